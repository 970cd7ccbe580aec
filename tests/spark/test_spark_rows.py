"""Invalid rows and column types on Spark: the monitor's policy (``monitor/rows.py``) per window.

A null label is a label not arrived yet (label metrics on the labelled rows, label-free ones on
every valid row, the coverage reported); a missing, NaN or out-of-range score is dropped and
counted (``invalid_score``); DECIMAL scores and integer or boolean labels are numbers; a
numeric timestamp needs its unit. The oracle is ``evaluate_window`` on rows filtered by hand.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from fairmonitor import Window, evaluate_window
from fairmonitor.exceptions import InvalidInputError
from fairmonitor.report.evaluate import SUMMARY_METRICS
from fairmonitor.report.registry import METRICS
from fairmonitor.spark import evaluate_spark, hfm_average_spark, summarize_spark

SENSITIVE = ["sex", "race"]
ATTRS = ["sex", "race", "sex:race"]
COLUMNS = dict(sensitive_features=SENSITIVE, label="label", score="score")
SUMMARY_ONLY = sorted(SUMMARY_METRICS)
LABEL_METRICS = [m for m in SUMMARY_ONLY if METRICS[m].needs_labels]
FREE_METRICS = [m for m in SUMMARY_ONLY if not METRICS[m].needs_labels]
HOUR = timedelta(hours=1)
T0 = datetime(2026, 1, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def log(prediction_log):
    return prediction_log(3_000, seed=23, hours=2)


@pytest.fixture(scope="module")
def dirty(log):
    """The log with null labels (hour 0 only), NaN, negative and >1 scores."""
    out = log.astype({"label": "float64"})
    first = out["timestamp"] < pd.Timestamp("2026-01-05 01:00:00")
    out.loc[first & (np.arange(len(out)) % 5 == 0), "label"] = np.nan
    out.loc[np.arange(len(out)) % 97 == 3, "score"] = np.nan
    out.loc[np.arange(len(out)) % 101 == 7, "score"] = 1.5
    out.loc[np.arange(len(out)) % 103 == 9, "score"] = -0.25
    return out


def spark_frame(spark, frame, path, partitions=3):
    """``frame`` through Parquet (Spark's Arrow conversion of pandas timestamps warns)."""
    frame.to_parquet(path)
    return spark.read.parquet(str(path)).repartition(partitions)


def rows_of(frame, start):
    ts = frame["timestamp"].dt.tz_localize("UTC")
    return frame[(ts >= start) & (ts < start + HOUR)].reset_index(drop=True)


def local_report(rows, metrics, *, labels=True):
    window = Window.from_frame(rows, sensitive_features=SENSITIVE,
                               label="label" if labels else None, score="score")
    return evaluate_window(window, metrics=metrics)


def assert_values(report, expected, metrics):
    for metric in metrics:
        for attr in ATTRS:
            a, b = report.values[(metric, attr)], expected.values[(metric, attr)]
            assert not math.isnan(a), (metric, attr, report.reasons.get((metric, attr)))
            assert a == pytest.approx(b, rel=1e-12, abs=1e-12), (metric, attr)


def test_null_labels_and_invalid_scores_follow_the_monitors_policy(spark, dirty, tmp_path):
    frame = spark_frame(spark, dirty, tmp_path / "dirty.parquet")
    summaries = summarize_spark(frame, **COLUMNS, timestamp="timestamp", window="1h")
    reports = evaluate_spark(None, summaries=summaries, metrics=SUMMARY_ONLY)
    assert list(reports) == [T0, T0 + HOUR]
    for start, report in reports.items():
        rows = rows_of(dirty, start)
        valid = rows[rows["score"].between(0.0, 1.0)]  # NaN fails both comparisons
        labelled = valid[valid["label"].notna()].astype({"label": "int64"})
        assert summaries.rejected[start] == {"invalid_score": len(rows) - len(valid)}
        assert summaries.labelled_rows[start] == len(labelled)
        assert report.n_rows == len(valid)  # every valid row, labelled or not
        assert report.group_counts == local_report(valid, FREE_METRICS,
                                                   labels=False).group_counts
        assert_values(report, local_report(valid, FREE_METRICS, labels=False), FREE_METRICS)
        assert_values(report, local_report(labelled, LABEL_METRICS), LABEL_METRICS)
        assert any(f"invalid_score {len(rows) - len(valid)}" in n for n in report.notes)
    first, second = summaries.windows[T0], summaries.windows[T0 + HOUR]
    assert T0 in summaries.labelled and T0 + HOUR not in summaries.labelled
    assert "y_true" not in first.inputs and "y_true" in second.inputs
    n_labelled, n_valid = summaries.labelled_rows[T0], first.n_rows
    assert any(f"{n_labelled} of {n_valid} rows labelled" in n for n in reports[T0].notes)


def test_a_window_without_any_label_gives_nan_label_metrics_not_a_failure(spark, log):
    rows = log.drop(columns="timestamp").astype({"label": "float64"}).assign(label=np.nan)
    frame = spark.createDataFrame(rows, "sex string, race string, x1 double, x2 long, "
                                        "score double, label double").repartition(2)
    report = evaluate_spark(frame, **COLUMNS, metrics=SUMMARY_ONLY)[None]
    assert report.n_rows == len(rows)
    assert_values(report, local_report(rows, FREE_METRICS, labels=False), FREE_METRICS)
    for metric in LABEL_METRICS:
        assert math.isnan(report.values[(metric, "sex")])


def test_decimal_scores_and_integer_or_boolean_labels_are_numbers(spark, log):
    rows = log.drop(columns="timestamp").head(800)
    # Decimal scores exact to 6 places: the oracle reads the same numbers as floats
    rounded = rows.assign(score=rows["score"].round(6))
    as_decimal = rounded.assign(score=[Decimal(f"{s:.6f}") for s in rounded["score"]],
                                label=rounded["label"].astype(bool))
    frame = spark.createDataFrame(
        as_decimal, "sex string, race string, x1 double, x2 long, score decimal(10,6), "
                    "label boolean").repartition(2)
    report = evaluate_spark(frame, **COLUMNS, metrics=SUMMARY_ONLY)[None]
    assert_values(report, local_report(rounded, SUMMARY_ONLY), SUMMARY_ONLY)
    ints = spark.createDataFrame(rounded.astype({"label": "int32"}),
                                 "sex string, race string, x1 double, x2 long, score double, "
                                 "label int")
    assert_values(evaluate_spark(ints, **COLUMNS, metrics=SUMMARY_ONLY)[None],
                  local_report(rounded, SUMMARY_ONLY), SUMMARY_ONLY)


def test_numeric_timestamps_need_their_unit(spark, log, tmp_path):
    micros = log["timestamp"].astype("datetime64[us]").astype("int64")
    frame = spark.createDataFrame(log.assign(timestamp=micros)).repartition(2)
    with pytest.raises(InvalidInputError, match=r"'timestamp'.*bigint.*timestamp_unit"):
        summarize_spark(frame, **COLUMNS, timestamp="timestamp", window="1h")
    expected = summarize_spark(spark_frame(spark, log, tmp_path / "log.parquet"), **COLUMNS,
                               timestamp="timestamp", window="1h")
    for unit, values in (("us", micros), ("ms", micros // 1000), ("s", micros / 1e6)):
        got = summarize_spark(spark.createDataFrame(log.assign(timestamp=values)), **COLUMNS,
                              timestamp="timestamp", window="1h", timestamp_unit=unit)
        assert list(got.windows) == list(expected.windows) == [T0, T0 + HOUR], unit
        # ms and s round each row's time down; no row of this log sits within 1 ms of an hour
        assert [s.n_rows for s in got.windows.values()] == \
            [s.n_rows for s in expected.windows.values()], unit


def test_an_invalid_label_names_the_window_and_the_column(spark, log, tmp_path):
    bad = log.assign(label=np.where(np.arange(len(log)) == 2500, 2, log["label"]))
    frame = spark_frame(spark, bad, tmp_path / "bad.parquet")
    with pytest.raises(Exception, match=r"window 2026-01-05T01:00:00\+00:00.*column 'label'") \
            as info:
        summarize_spark(frame, **COLUMNS, timestamp="timestamp", window="1h")
    assert "row" not in str(info.value).split("column 'label'")[1].split("\n")[0]


def test_hfm_average_drops_the_same_rows(spark, dirty):
    """Null labels out, invalid scores out: the exact average on the rows left."""
    from fairmonitor.metrics import hfm

    rows = dirty.drop(columns="timestamp")
    frame = spark.createDataFrame(rows).repartition(3)
    found = hfm_average_spark(frame, sensitive_features=["sex"], label="label", score="score",
                              features=["x1", "x2"], n_queries=10_000)[None]["sex"]
    kept = rows[rows["score"].between(0.0, 1.0) & rows["label"].notna()]
    exact = hfm(kept[["x1", "x2"]], kept["label"].astype(int),
                (kept["score"] >= 0.5).astype(int), sensitive_features={"sex": kept["sex"]},
                method="exact")
    assert found.n_queries == len(kept)
    assert found.value_average == pytest.approx(exact.value_average, rel=1e-12)


def test_the_driver_receives_one_summary_per_window_whatever_the_partitions(spark, dirty,
                                                                             tmp_path):
    """Partition summaries merged per window on the executors: the driver merge's values."""
    from fairmonitor.spark import merge_partials, merged_summaries, partial_summaries

    frame = spark_frame(spark, dirty, tmp_path / "dirty.parquet", partitions=24)
    kwargs = dict(**COLUMNS, timestamp="timestamp", window="1h")
    partials, plan = partial_summaries(frame, **kwargs)
    partial_rows = [r.asDict() for r in partials.collect()]
    merged, _ = merged_summaries(frame, **kwargs)
    merged_rows = [r.asDict() for r in merged.collect()]
    assert len(partial_rows) == 48  # 2 hours x 24 partitions
    assert len(merged_rows) == 2  # one row per window
    on_driver, on_executors = merge_partials(partial_rows, plan), merge_partials(merged_rows,
                                                                                 plan)
    assert on_executors.partials == on_driver.partials == 48 + 24  # hour 0: two parts each
    assert on_executors.rejected == on_driver.rejected
    assert on_executors.labelled_rows == on_driver.labelled_rows
    for start in (T0, T0 + HOUR):
        a = evaluate_spark(None, summaries=on_driver, metrics=SUMMARY_ONLY)[start]
        b = evaluate_spark(None, summaries=on_executors, metrics=SUMMARY_ONLY)[start]
        assert a.n_rows == b.n_rows and a.group_counts == b.group_counts
        assert_values(b, a, SUMMARY_ONLY)


def test_windows_are_evaluated_on_the_executors_the_driver_receives_reports(
        spark, dirty, tmp_path, monkeypatch):
    """evaluate_spark: each window merged and evaluated in an executor's Python worker.

    ``evaluate_summary`` broken in the driver process: evaluating there fails, evaluating on
    the executors (their own processes) does not. The reports equal the driver's.
    """
    import fairmonitor.spark._parts as parts
    from fairmonitor.spark.evaluate import evaluated_windows

    frame = spark_frame(spark, dirty, tmp_path / "dirty.parquet", partitions=6)
    kwargs = dict(**COLUMNS, timestamp="timestamp", window="1h")
    on_driver = evaluate_spark(None, summaries=summarize_spark(frame, **kwargs),
                               metrics=SUMMARY_ONLY, rng=3)

    def broken(*args, **kw):
        raise AssertionError("evaluated on the driver")

    monkeypatch.setattr(parts, "evaluate_summary", broken)
    with pytest.raises(AssertionError, match="evaluated on the driver"):
        evaluate_spark(None, summaries=summarize_spark(frame, **kwargs), metrics=SUMMARY_ONLY)
    on_executors = evaluate_spark(frame, **kwargs, metrics=SUMMARY_ONLY, rng=3)
    assert list(on_executors) == list(on_driver) == [T0, T0 + HOUR]
    for start, report in on_executors.items():
        assert report.n_rows == on_driver[start].n_rows
        assert report.notes == on_driver[start].notes
        assert_values(report, on_driver[start], SUMMARY_ONLY)
        assert report.intervals.keys() == on_driver[start].intervals.keys()
    # what travels: one row per window, a pickled report, no summary
    rows = evaluated_windows(frame, metrics=SUMMARY_ONLY, **kwargs)[0].collect()
    assert sorted(r["window"] for r in rows) == [
        (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
        for t in (T0, T0 + HOUR)]
    assert rows[0].asDict().keys() == {"window", "rows", "report"}
