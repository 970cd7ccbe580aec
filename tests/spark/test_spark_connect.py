"""The Spark adapter over Spark Connect (issue 17 item 4: "it must also run over Spark Connect").

``evaluate_spark`` (windows evaluated on the executors) and the monitor's Spark source
(summaries made on the executors, issue 30) run against one local Spark Connect server.

A Spark Connect client has no SparkContext, no RDD and no JVM handle: only the DataFrame API
crosses the wire. `SparkSession.builder.remote("local[2]")` starts a local Spark Connect server
(pyspark 4 bundles it) and connects to it, so `evaluate_spark` is run here exactly as against a
remote cluster. It runs in a subprocess: one process cannot hold both the suite's classic
session and a Spark Connect one.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sources import MemorySource
from fairmonitor.report import Window, evaluate_window

ROOT = Path(__file__).resolve().parents[2]
# hfm_average scans every row (its three Spark jobs), exactly while the window has at most
# hfm_queries (2000) rows
METRICS = ["demographic_parity_difference", "equalized_odds_difference", "abcc", "madd",
           "hfm_average"]
SCRIPT = """
import json, sys
from pyspark.sql import SparkSession
from fairmonitor.spark import evaluate_spark

spark = (SparkSession.builder.remote("local[2]")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
reports = evaluate_spark(sys.argv[1], spark=spark, sensitive_features=["sex", "race"],
                         label="label", score="score", features=["x1"],
                         metrics=json.loads(sys.argv[2]))
report = reports[None]
print("RESULT " + json.dumps({"values": [[m, a, v] for (m, a), v in report.values.items()],
                              "counts": {a: {str(k): int(v) for k, v in c.items()}
                                         for a, c in report.group_counts.items()}}))

# the monitor's Spark source over the same Connect session: summaries, never rows
from datetime import datetime, timedelta, UTC
from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sources.spark import SparkSource

SparkSource.fetch = None  # a window's rows are never asked for
cfg = load_config(sys.argv[4])
results = run_once(cfg, {"credit": SparkSource(sys.argv[3], spark=spark)}, MemoryCheckpoint(),
                   now=datetime(2026, 1, 5, 2, tzinfo=UTC))
print("MONITOR " + json.dumps([[r.n_rows, dict(r.rejected), r.labelled_rows, dict(r.errors),
                                [[m, a, v] for (m, a), v in r.report.values.items()],
                                {f"{m}/{a}": why for (m, a), why in r.report.reasons.items()}]
                               for r in results]))
spark.stop()
"""
MONITOR_CONFIG = """
models:
  credit:
    source: {kind: spark, path: unused.parquet}
    sensitive_features: [sex, race]
    label: label
    score: score
    window: 1h
    start: "2026-01-05T00:00:00+00:00"
    metrics: [demographic_parity_difference, equalized_odds_difference, abcc, madd]
"""


def test_evaluate_spark_runs_over_spark_connect(tmp_path):
    rng = np.random.default_rng(3)
    n = 1500
    log = pd.DataFrame({"sex": rng.choice(["F", "M"], n), "race": rng.choice(list("abc"), n),
                        "score": rng.beta(2, 2, n)})
    log["label"] = (rng.random(n) < log["score"]).astype(int)
    log["x1"] = rng.normal(size=n) + log["score"]
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    # two hours with null labels and invalid scores, for the monitor's Spark source
    timed = log.assign(
        model="credit",
        timestamp=(pd.Timestamp("2026-01-05") + pd.to_timedelta(np.sort(
            rng.uniform(0, 7200, n)), unit="s")).astype("datetime64[us]"),
        label=log["label"].astype("float64").where(np.arange(n) % 7 != 0),
        score=log["score"].where(np.arange(n) % 53 != 1))
    timed.to_parquet(tmp_path / "timed.parquet")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"),
                                          os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(path), json.dumps(METRICS),
                           str(tmp_path / "timed.parquet"), MONITOR_CONFIG],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-4000:]
    got = json.loads(lines[0][len("RESULT "):])
    local = evaluate_window(Window({"sex": log["sex"].to_numpy(), "race": log["race"].to_numpy()},
                                   y_score=log["score"].to_numpy(),
                                   y_true=log["label"].to_numpy(), X=log[["x1"]]),
                           metrics=METRICS)
    assert got["counts"] == {a: {str(k): v for k, v in c.items()}
                             for a, c in local.group_counts.items()}
    values = {(m, a): v for m, a, v in got["values"]}
    assert set(values) == set(local.values)
    for key, expected in local.values.items():
        assert abs(values[key] - expected) <= 1e-12, (key, values[key], expected)
    # the monitor over Spark Connect: the row path's windows and values, from memory
    monitor = json.loads(next(x for x in done.stdout.splitlines()
                              if x.startswith("MONITOR "))[len("MONITOR "):])
    memory = timed.assign(timestamp=timed["timestamp"].dt.tz_localize("UTC"))
    want = run_once(load_config(MONITOR_CONFIG, base_dir=tmp_path),
                    {"credit": MemorySource(memory)}, MemoryCheckpoint(),
                    now=datetime(2026, 1, 5, 2, tzinfo=UTC))
    assert [m[:4] for m in monitor] == [[r.n_rows, dict(r.rejected), r.labelled_rows, {}]
                                        for r in want]
    assert all(r.rejected and r.labelled_rows < r.n_rows for r in want)
    for (*_, got_values, reasons), r in zip(monitor, want, strict=True):
        got_values = {(m, a): v for m, a, v in got_values}
        assert got_values.keys() == r.report.values.keys()
        for key, expected in r.report.values.items():
            assert abs(got_values[key] - expected) <= 1e-12 or (
                math.isnan(expected) and math.isnan(got_values[key])), (key, reasons, monitor)
