"""A regression model on a Spark source (issue 29 item 4): executors summarize, the driver merges.

Before: ``task: regression`` with ``source: {kind: spark}`` was a config error (the executors
summarized binary windows only). Now each partition summarizes its rows with
``summarize_regression`` and the windows and rollups give the values the same rows from
memory give.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sources import MemorySource, build_sources
from fairmonitor.monitor.summary_store import MemorySummaryStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "monitor"))
from test_regression_monitor import ALL, ROLLUP, T0, H, regression_frame  # noqa: E402


def test_a_regression_model_on_a_parquet_path_gives_the_memory_values(spark, tmp_path):
    frame = regression_frame(n_hours=7, rows=200)
    frame.loc[[5], "prediction"] = ["not a number"]
    frame.to_parquet(tmp_path / "preds.parquet")
    cfg = load_config(f"""
models:
  limits:
    task: regression
    source: {{kind: spark, path: preds.parquet}}
    sensitive_features: [sex]
    prediction: prediction
    label: label
    window: 1h
    start: 2026-11-22T00:00:00Z
    metrics: {ALL}
{ROLLUP}""", base_dir=tmp_path)
    now = T0 + 7 * H
    got = run_once(cfg, build_sources(cfg), MemoryCheckpoint(), now=now,
                   summaries=MemorySummaryStore())
    memory = frame.assign(timestamp=pd.to_datetime(frame["timestamp"]))
    want = run_once(cfg, {"limits": MemorySource(memory)}, MemoryCheckpoint(), now=now,
                    summaries=MemorySummaryStore())
    assert [(r.rollup, r.end, r.n_rows, dict(r.rejected)) for r in got] == \
        [(r.rollup, r.end, r.n_rows, dict(r.rejected)) for r in want]
    assert [r.rollup for r in got].count("6h") == 1
    for a, b in zip(got, want, strict=True):
        assert a.errors == {}
        for key, value in b.report.values.items():
            assert a.report.values[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
