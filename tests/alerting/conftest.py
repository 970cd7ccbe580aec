"""Fixtures for the alerting/dashboard/docker tests: paths, the example config, promtool."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "dashboards"
DOCKER = REPO / "docker"
EXAMPLE_CONFIG = DOCKER / "monitor.example.yaml"
#: The runbook base the committed rules link (``fairmonitor rules --runbook-url``).
RUNBOOK_URL = "https://git.example.org/ml/fairmonitor/blob/main/docs/runbook.md"


@pytest.fixture(scope="session")
def promtool() -> str:
    """Path of promtool; FAILS (never skips) when it is missing: CI installs it."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: install Debian's `prometheus` package "
                    "(apt-get install --no-install-recommends prometheus)")
    return path


@pytest.fixture(scope="session")
def example_config():
    from fairmonitor.monitor.config import load_config

    return load_config(EXAMPLE_CONFIG)


def run_promtool(promtool: str, *args: str, cwd: Path | None = None
                 ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60, check=False)


def check_promql(promtool: str, exprs: list[str], tmp_path: Path
                 ) -> subprocess.CompletedProcess[str]:
    """``promtool check rules`` on ``exprs`` written as recording rules (validates PromQL)."""
    rules = {"groups": [{"name": "check", "rules": [
        {"record": f"check:expr_{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    path = tmp_path / "check.rules.yml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return run_promtool(promtool, "check", "rules", str(path))


def read_yaml(path: Path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))
