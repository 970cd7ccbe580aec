"""The README and the documentation pages teach what the code does: their examples are checked.

The ``>>>`` examples run as doctests (``--doctest-glob='*.md'`` over ``README.md`` and
``docs/*.md`` in ``make test``); the other Python blocks of the README and of the docs pages
run here, in order, as one script in a temporary directory (they write ``mlflow.db`` and
``predictions.db`` to the working directory, as a user's session would); a block repeated on
several pages runs once. The blocks that import pyspark run in
``tests/spark/test_readme_spark.py`` instead, on the shared Spark session
(:func:`python_blocks` splits them). The metric table of ``docs/metrics.md`` is the
registry's, and every complete monitor config shown (a YAML block with a ``source:``) loads.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

from fairmonitor import METRICS
from fairmonitor.monitor.config import load_config

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def _fmt(x: float) -> str:
    return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:g}"


def metrics_table() -> str:
    """The metric table of docs/metrics.md, generated from the registry."""
    rows = ["| metric | direction | ideal | range | needs | what it says |",
            "|---|---|---|---|---|---|"]
    for name, s in METRICS.items():
        needs = [k for k in ("labels", "scores", "features", "model") if getattr(s, f"needs_{k}")]
        direction = "lower is fairer" if s.direction == "lower_is_fairer" else "higher is fairer"
        rows.append(f"| `{name}` | {direction} | {_fmt(s.ideal)} | [{_fmt(s.lower)}, "
                    f"{_fmt(s.upper)}] | {', '.join(needs) or 'predictions'} | "
                    f"{s.help.replace('|', chr(92) + '|')} |")
    return "\n".join(rows)


def test_metric_table_matches_the_registry():
    text = (ROOT / "docs" / "metrics.md").read_text()
    expected = metrics_table()
    assert expected in text, "docs/metrics.md metric table is stale; replace it with:\n" + expected


def _blocks(language: str) -> list[str]:
    found: list[str] = []
    for page in PAGES:
        for block in re.findall(rf"```{language}\n(.*?)```", page.read_text(), flags=re.DOTALL):
            if block not in found:
                found.append(block)
    return found


def python_blocks(*, spark: bool) -> list[str]:
    """The runnable (non-``>>>``) Python blocks of the pages, with or without pyspark."""
    return [b for b in _blocks("python") if not b.lstrip().startswith(">>>")
            and ("from pyspark" in b or "import pyspark" in b) == spark]


def test_readme_python_blocks_run(tmp_path):
    scripts = python_blocks(spark=False)
    assert scripts, "the README has runnable Python blocks"
    script = tmp_path / "readme_blocks.py"
    script.write_text("\n\n".join(scripts))
    # a fresh user session: no tracking URI or experiment id inherited from other tests
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_monitor_configs_shown_load(tmp_path):
    configs = [b for b in _blocks("yaml") if b.startswith("models:") and "source:" in b]
    assert len(configs) >= 2, "the README and getting started show a monitor config"
    for text in configs:
        config = load_config(text, base_dir=tmp_path)
        assert config.models, text
