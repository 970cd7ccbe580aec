"""The benchmarks page shows the scripts' recorded output, with the conditions of each run.

``benchmarks/run_all.py --record`` writes ``benchmarks/results/<script>.txt``; the docs build
renders them (``docs/_scripts/benchmark_results.py``). These tests record a real (tiny) script
through ``run_all`` and read it back, and hold every committed result to the same header.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


run_all = _load(ROOT / "benchmarks" / "run_all.py", "fairmonitor_bench_run_all")
render = _load(ROOT / "docs" / "_scripts" / "benchmark_results.py", "fairmonitor_bench_render")

SCRIPT = '''"""Measure nothing much: one ratio for the test."""
print("warming up")
print("TARGET toy_ratio: 1.25 (target <= 2) OK")
print("TARGET toy_pipes: a | b (reported)")
'''


@pytest.fixture
def bench_dir(tmp_path, monkeypatch):
    """A benchmarks folder with one script, and run_all pointed at it."""
    (tmp_path / "bench_toy.py").write_text(SCRIPT)
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    monkeypatch.setattr(run_all, "RESULTS", tmp_path / "results")
    return tmp_path


def test_record_keeps_the_output_under_the_runs_conditions(bench_dir, capsys):
    assert run_all.main(["--record", "--only", "bench_toy.py", "--quick"]) == 0
    text = (bench_dir / "results" / "bench_toy.txt").read_text()
    header, output = render.read_result(bench_dir / "results" / "bench_toy.txt")
    assert header["command"] == "python benchmarks/bench_toy.py --quick"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", header["date"])
    assert f"{run_all.os.cpu_count()} CPUs" in header["machine"]
    assert re.fullmatch(r"[\d.]+ [\d.]+ [\d.]+ at the start, [\d.]+ [\d.]+ [\d.]+ at the end",
                        header["load"])
    assert output == ["warming up", "TARGET toy_ratio: 1.25 (target <= 2) OK",
                      "TARGET toy_pipes: a | b (reported)"]
    assert text.endswith("TARGET toy_pipes: a | b (reported)\n")
    assert "TARGET toy_ratio: 1.25 (target <= 2) OK" in capsys.readouterr().out


def test_a_failing_script_is_reported_and_not_recorded(bench_dir):
    (bench_dir / "bench_broken.py").write_text("raise SystemExit(3)\n")
    assert run_all.main(["--record", "--only", "bench_broken.py"]) == 1
    assert not (bench_dir / "results" / "bench_broken.txt").exists()


def test_the_page_renders_the_targets_the_conditions_and_the_output(bench_dir):
    run_all.main(["--record", "--only", "bench_toy.py"])
    page = render.markdown(bench_dir / "results", bench_dir)
    # the label before the heading: the target of the bench role's link to this run
    assert page.startswith("(bench-bench_toy)=\n### bench_toy\n\n"
                           "Measure nothing much: one ratio for the test.\n")
    assert "| `toy_ratio` | 1.25 (target <= 2) OK |" in page
    assert "| `toy_pipes` | a \\| b (reported) |" in page  # a pipe cannot split the row
    assert "- command: `python benchmarks/bench_toy.py`" in page
    assert "```text\nwarming up\n" in page


def test_no_recorded_run_says_how_to_record_one(tmp_path):
    assert "run_all.py --record" in render.markdown(tmp_path, tmp_path)


def test_every_committed_result_names_its_script_and_conditions():
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.txt")):
        assert (ROOT / "benchmarks" / f"{path.stem}.py").exists(), path.name
        header, output = render.read_result(path)
        assert set(header) == {"command", "date", "machine", "load", "wall"}, path.name
        assert header["command"].startswith(f"python benchmarks/{path.stem}.py"), path.name
        assert output, f"{path.name} recorded no output"
