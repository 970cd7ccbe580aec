"""The monitor's Spark source evaluates summaries made on the executors (issue 30 item 5).

Before: ``SparkSource`` collected each window's rows to the driver (``toPandas``) and ran one
Spark job per window, empty ones included (100 empty hourly windows: 6 minutes), so a window
larger than one process could not be monitored. Now a batch of due windows is one Spark job
whose driver side receives one summary per window; the rows never travel. The oracle is the
same monitor on the same rows from memory (the row path): same windows, row counts, rejected
rows, label coverage, versions and values, phase by phase.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sources import MemorySource, build_sources
from fairmonitor.monitor.sources.spark import SparkSource

T0 = datetime(2026, 1, 5, tzinfo=UTC)
HOUR = timedelta(hours=1)
METRICS = ["demographic_parity_difference", "equalized_odds_difference", "abcc", "abpc",
           "madd", "equal_opportunity_difference"]


def config(tmp_path, source, *, window="1h", extra=""):
    return load_config(f"""
models:
  credit:
    source: {source}
    sensitive_features: [sex, race]
    label: label
    score: score
    window: {window}
    start: "{T0.isoformat()}"
    metrics: [{", ".join(METRICS)}]
{extra}
""", base_dir=tmp_path)


@pytest.fixture(scope="module")
def dirty(prediction_log):
    """4 hours: null labels (hours 0-1), NaN, negative and >1 scores, two model versions."""
    log = prediction_log(3_000, seed=41, hours=4).assign(model="credit")
    log = log.astype({"label": "float64"})
    i = np.arange(len(log))
    early = log["timestamp"] < pd.Timestamp("2026-01-05 02:00:00")
    log.loc[early & (i % 4 == 0), "label"] = np.nan
    log.loc[i % 89 == 3, "score"] = np.nan
    log.loc[i % 97 == 5, "score"] = 1.25
    log.loc[i % 101 == 7, "score"] = -0.5
    log["version"] = np.where(i % 3 == 0, "7", "8")
    return log


def memory(frame):
    return MemorySource(frame.assign(
        timestamp=pd.to_datetime(frame["timestamp"]).dt.tz_localize("UTC")))


def as_in_memory(results):
    return [(r.rollup, r.phase, r.start, r.end, r.n_rows, dict(r.rejected), r.labelled_rows,
             r.label_coverage, r.labels_overdue, r.version, dict(r.versions),
             r.labels_included, dict(r.errors)) for r in results]


def assert_same_results(got, want):
    assert as_in_memory(got) == as_in_memory(want)
    for a, b in zip(got, want, strict=True):
        if b.report is None:
            assert a.report is None
            continue
        assert a.report.group_counts == b.report.group_counts
        assert set(a.report.values) == set(b.report.values)
        for key, value in b.report.values.items():
            if math.isnan(value):
                assert math.isnan(a.report.values[key]), key
                assert a.report.reasons[key] == b.report.reasons[key], key
            else:
                assert a.report.values[key] == pytest.approx(value, abs=1e-12), key
        for key, iv in b.report.intervals.items():
            for side in ("lower", "upper"):
                x, y = getattr(a.report.intervals[key], side), getattr(iv, side)
                assert (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, abs=1e-9), \
                    (key, side)


def spark_only(monkeypatch):
    """Fail if the monitor asks the Spark source for a window's rows."""
    def refuse(*args, **kwargs):
        raise AssertionError("the monitor collected a window's rows")
    monkeypatch.setattr(SparkSource, "fetch", refuse)


@pytest.mark.parametrize("extra, window", [
    ("    rollups: [2h]", "1h"),  # phase full, rollups from the stored summaries
    ("    labels_after: 1h", "1h"),  # phases predictions then labels
    ("    every: 1h", "2h"),  # sliding windows: slots summed on the driver
], ids=["full-rollups", "label-delay", "sliding"])
def test_spark_source_equals_the_row_path(spark, dirty, tmp_path, monkeypatch, extra, window):
    dirty.to_parquet(tmp_path / "preds.parquet")
    cfg = config(tmp_path, "{kind: spark, path: preds.parquet}", window=window, extra=extra)
    spark_only(monkeypatch)
    now = T0 + 5 * HOUR + timedelta(minutes=1)
    got = run_once(cfg, build_sources(cfg), MemoryCheckpoint(), now=now)
    want = run_once(cfg, {"credit": memory(dirty)}, MemoryCheckpoint(), now=now)
    assert len(got) >= 4 and any(r.rejected for r in got)
    assert any(r.label_coverage is not None and r.label_coverage < 1 for r in got)
    assert_same_results(got, want)


def test_decimal_scores_and_boolean_labels(spark, dirty, tmp_path, monkeypatch):
    """DECIMAL scores (Parquet decimal128), nullable boolean labels: read as the row path does."""
    rows = dirty.assign(score=dirty["score"].round(6))
    typed = rows.assign(
        score=[None if not np.isfinite(s) else Decimal(f"{s:.6f}") for s in rows["score"]],
        label=rows["label"].map({1.0: True, 0.0: False}).astype("boolean"))
    typed.to_parquet(tmp_path / "typed.parquet")
    assert spark.read.parquet(str(tmp_path / "typed.parquet")).schema["score"] \
        .dataType.simpleString() == "decimal(7,6)"
    cfg = config(tmp_path, "{kind: spark, path: typed.parquet}")
    spark_only(monkeypatch)
    now = T0 + 4 * HOUR
    got = run_once(cfg, build_sources(cfg), MemoryCheckpoint(), now=now)
    want = run_once(cfg, {"credit": memory(typed)}, MemoryCheckpoint(), now=now)
    assert [r.n_rows for r in got] == [r.n_rows for r in want] and sum(
        r.n_rows for r in got) > 2500
    assert_same_results(got, want)


def test_a_batch_of_windows_is_one_spark_call_and_empty_windows_cost_nothing(
        spark, prediction_log, tmp_path, monkeypatch):
    """48 due hourly windows, rows in 2 of them: one summarizing call, 46 windows of no traffic."""
    import fairmonitor.spark.windows as windows

    log = prediction_log(800, seed=5, hours=2).assign(model="credit")
    log.to_parquet(tmp_path / "sparse.parquet")
    calls = []
    real = windows.merged_summaries

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(windows, "merged_summaries", counted)
    spark_only(monkeypatch)
    cfg = config(tmp_path, "{kind: spark, path: sparse.parquet}")
    now = T0 + 48 * HOUR
    results = run_once(cfg, build_sources(cfg), MemoryCheckpoint(), now=now)
    assert len(results) == 48 and len(calls) == 1
    assert [r.n_rows for r in results[:2]] == [int((log["timestamp"] < pd.Timestamp(
        "2026-01-05 01:00")).sum()), int((log["timestamp"] >= pd.Timestamp(
            "2026-01-05 01:00")).sum())]
    assert all(r.n_rows == 0 and r.report is None and r.errors == {} for r in results[2:])


def test_a_date_partition_column_prunes_the_partitions_read(spark, prediction_log, tmp_path,
                                                            capsys):
    """``date_column``: the windows' dates (one day of slack) are a partition filter."""
    from fairmonitor.spark.windows import _ranges, _time_filter

    log = prediction_log(400, seed=9, hours=2)
    log["dt"] = log["timestamp"].dt.strftime("%Y-%m-%d")
    log.to_parquet(tmp_path / "by_day", partition_cols=["dt"])
    df = spark.read.parquet(str(tmp_path / "by_day"))
    lo = (T0 - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    filtered = _time_filter(df, "timestamp", _ranges([(lo, lo + 3_600_000_000)]), "dt")
    filtered.explain()
    plan = capsys.readouterr().out
    scan = next(line for line in plan.splitlines() if "FileScan parquet" in line)
    assert "PartitionFilters: [" in scan and "dt" in scan.split("PartitionFilters: [")[1]
    # the timestamp bounds are pushed into the scan too (row groups skipped by their stats)
    assert "PushedFilters: [" in scan and "timestamp" in scan.split("PushedFilters: [")[1]
    assert filtered.count() == int((log["timestamp"] < pd.Timestamp("2026-01-05 01:00")).sum())


def test_a_missing_column_holds_the_window_as_a_data_error(spark, prediction_log, tmp_path):
    log = prediction_log(300, seed=2, hours=1).assign(model="credit").drop(columns="race")
    log.to_parquet(tmp_path / "norace.parquet")
    cfg = config(tmp_path, "{kind: spark, path: norace.parquet}")
    results = run_once(cfg, build_sources(cfg), MemoryCheckpoint(), now=T0 + HOUR)
    assert len(results) == 1 and results[0].report is None
    assert "sensitive feature column 'race' is not in the source" in results[0].errors["data"]


def test_an_unreadable_label_is_a_data_error_naming_window_and_column(spark, prediction_log,
                                                                     tmp_path):
    log = prediction_log(300, seed=2, hours=1).assign(model="credit")
    log.loc[10, "label"] = 2
    log.to_parquet(tmp_path / "bad.parquet")
    cfg = config(tmp_path, "{kind: spark, path: bad.parquet}")
    results = run_once(cfg, build_sources(cfg), MemoryCheckpoint(), now=T0 + HOUR)
    assert results[0].report is None
    error = results[0].errors["data"]
    assert "window 2026-01-05T00:00:00+00:00" in error and "column 'label'" in error, error


def test_a_thousand_partitions_give_the_row_paths_windows(spark, dirty, tmp_path, monkeypatch):
    """1,000 partitions (3 rows each), null labels, invalid scores: the row path's values.

    One Spark job: the >1,000 partition summaries merge per window on the executors.
    """
    dirty.to_parquet(tmp_path / "preds.parquet")
    many = spark.read.parquet(str(tmp_path / "preds.parquet")).drop("version").repartition(1000)
    assert many.rdd.getNumPartitions() == 1000
    cfg = config(tmp_path, "{kind: spark, path: unused.parquet}")
    spark_only(monkeypatch)
    import fairmonitor.spark.windows as windows

    batches, real = [], windows.summarize_windows

    def recorded(*args, **kwargs):
        batches.append(real(*args, **kwargs))
        return batches[-1]

    monkeypatch.setattr(windows, "summarize_windows", recorded)
    now = T0 + 4 * HOUR
    got = run_once(cfg, {"credit": SparkSource(many, spark=spark, version_column=None)},
                   MemoryCheckpoint(), now=now)
    assert len(batches) == 1 and len(batches[0]) == 4
    assert sum(p.partials for p in batches[0].values()) > 1000
    want = run_once(cfg, {"credit": memory(dirty.drop(columns="version"))}, MemoryCheckpoint(),
                    now=now)
    assert_same_results(got, want)
