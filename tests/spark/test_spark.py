"""fairmonitor.spark gives the single-process values: counts exactly, floats within 1e-12.

A few thousand logged predictions (2 attributes + their intersection, labels, scores, two
features) over 4 hours, spread over 3 partitions so that every hourly window is summarized in
several partitions and merged on the driver. Each window's report is compared with
``evaluate_window`` on the same rows (the summary metrics) and with ``evaluate_summary`` of the
single-process summary of those rows (the row metrics, which both run on the same row sample).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import mlflow
import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from fairmonitor import Window, evaluate_summary, evaluate_window
from fairmonitor.report.evaluate import SUMMARY_METRICS
from fairmonitor.spark import (
    evaluate_spark,
    partial_summaries,
    summarize_spark,
)
from fairmonitor.summaries import SummarySpec, summarize

SENSITIVE = ["sex", "race"]
ATTRS = ["sex", "race", "sex:race"]
FEATURES = ["x1", "x2"]
COLUMNS = dict(sensitive_features=SENSITIVE, label="label", score="score", features=FEATURES)
SUMMARY_ONLY = sorted(SUMMARY_METRICS)
ROW_METRICS = ["hfm", "hfm_average", "cfair"]
HOUR = timedelta(hours=1)
T0 = datetime(2026, 1, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def log(prediction_log):
    return prediction_log(4_000, hours=4)


@pytest.fixture(scope="module")
def parquet(log, tmp_path_factory):
    """The log as a Parquet file (timestamps written by pandas, read by Spark)."""
    path = tmp_path_factory.mktemp("spark-log") / "log.parquet"
    log.to_parquet(path)
    return str(path)


@pytest.fixture(scope="module")
def frame(spark, parquet):
    # round-robin over 3 partitions: every hour has rows in every partition
    return spark.read.parquet(parquet).repartition(3)


@pytest.fixture(scope="module")
def hourly(frame):
    return summarize_spark(frame, **COLUMNS, timestamp="timestamp", window="1h")


def rows_of(log, start):
    ts = log["timestamp"].dt.tz_localize("UTC")
    return log[(ts >= start) & (ts < start + HOUR)].reset_index(drop=True)


def window_of(rows):
    return Window.from_frame(rows, sensitive_features=SENSITIVE, label="label", score="score",
                             features=FEATURES)


def assert_same(spark_report, local_report, metrics):
    assert spark_report.n_rows == local_report.n_rows
    assert spark_report.group_counts == local_report.group_counts  # exact counts
    for metric in metrics:
        for attr in ATTRS:
            a = spark_report.values[(metric, attr)]
            b = local_report.values[(metric, attr)]
            assert not math.isnan(a) and not math.isnan(b), (metric, attr)
            assert abs(a - b) <= 1e-12, (metric, attr, a, b)


def test_one_summary_per_hour_merged_from_several_partitions(hourly, log):
    assert list(hourly.windows) == [T0 + k * HOUR for k in range(4)]
    assert hourly.partials == 12  # 4 hours x 3 partitions, merged on the driver
    assert hourly.undated == 0
    for start, summary in hourly.windows.items():
        assert (summary.start, summary.end) == (start, start + HOUR)
        assert summary.n_rows == len(rows_of(log, start))
    assert sum(s.n_rows for s in hourly.windows.values()) == len(log)
    assert set(hourly.timings) == {"scan", "merge"}


def test_each_window_equals_evaluate_window_on_its_rows(hourly, log):
    reports = evaluate_spark(None, summaries=hourly, metrics=SUMMARY_ONLY)
    for start, report in reports.items():
        local = evaluate_window(window_of(rows_of(log, start)), metrics=SUMMARY_ONLY)
        assert_same(report, local, SUMMARY_ONLY)
        assert report.start == start and report.end == start + HOUR


def test_row_metrics_equal_the_single_process_summary_of_the_same_rows(hourly, log):
    # HFM and CFair run on each group's row sample, on Spark and in one process alike
    reports = evaluate_spark(None, summaries=hourly, metrics=ROW_METRICS, rng=0)
    for start, report in reports.items():
        w = window_of(rows_of(log, start))
        local = evaluate_summary(summarize(w.sensitive_features, y_pred=w.y_pred,
                                           y_score=w.y_score, y_true=w.y_true, X=w.X,
                                           spec=SummarySpec()),
                                 metrics=ROW_METRICS, rng=0)
        assert_same(report, local, ROW_METRICS)
        assert any("row sample" in note for note in report.notes)


def test_whole_parquet_file_equals_evaluate_window(spark, log, parquet):
    reports = evaluate_spark(parquet, **COLUMNS, spark=spark, metrics=SUMMARY_ONLY)
    assert list(reports) == [None]
    assert_same(reports[None], evaluate_window(window_of(log), metrics=SUMMARY_ONLY),
                SUMMARY_ONLY)


def test_reports_are_logged_to_the_run_with_the_evaluator_keys(hourly, mlflow_store):
    with mlflow.start_run() as run:
        reports = evaluate_spark(None, summaries=hourly, metrics=SUMMARY_ONLY,
                                 run_id=run.info.run_id)
    key = "fairness/demographic_parity_difference/sex:race"
    history = sorted(MlflowClient().get_metric_history(run.info.run_id, key),
                     key=lambda m: m.step)
    assert [m.step for m in history] == [0, 1, 2, 3]
    assert [m.value for m in history] == [r.flat()[key] for r in reports.values()]
    assert [m.timestamp for m in history] == [
        int((T0 + (k + 1) * HOUR).timestamp() * 1000) for k in range(4)]
    data = mlflow.get_run(run.info.run_id).data
    assert set(data.metrics) == set(reports[T0].flat())
    assert data.tags["fairness.source"] == "spark"


def test_rows_without_timestamp_are_counted_and_left_out(spark, log, tmp_path):
    broken = log.copy()
    broken.loc[:9, "timestamp"] = None  # NaT: null in Parquet
    broken.to_parquet(tmp_path / "broken.parquet")
    frame = spark.read.parquet(str(tmp_path / "broken.parquet")).repartition(2)
    result = summarize_spark(frame, **COLUMNS, timestamp="timestamp", window="2h")
    assert result.undated == 10
    assert list(result.windows) == [T0, T0 + 2 * HOUR]
    assert sum(s.n_rows for s in result.windows.values()) == len(log) - 10


def test_invalid_labels_fail_the_job_with_fairmonitors_message(spark, log):
    bad = log.drop(columns="timestamp").head(200).assign(label=2)
    with pytest.raises(Exception, match="y_true"):
        summarize_spark(spark.createDataFrame(bad), **COLUMNS)


def test_a_missing_column_is_named_before_any_job(frame):
    with pytest.raises(ValueError, match=r"\['nope'\] not in the data"):
        partial_summaries(frame, sensitive_features=["nope"], score="score")


def test_the_docstring_example_runs(spark):
    """evaluate_spark's example (a literal block: the doctest run has no JVM) runs here."""
    import textwrap

    import fairmonitor.spark.evaluate as module

    doc = module.evaluate_spark.__doc__
    block = textwrap.dedent(doc[doc.index("value::") + len("value::"):]).strip()
    code = block.rsplit("reports[None].flat()", 1)[0]
    scope = {"evaluate_spark": evaluate_spark}
    exec(compile(code, module.__file__, "exec"), scope)  # noqa: S102 - our own docstring
    assert scope["reports"][None].flat() == {"fairness/demographic_parity_difference/sex": 0.5}
    assert "{'fairness/demographic_parity_difference/sex': 0.5}" in block


def test_values_do_not_depend_on_the_partitioning(spark, parquet):
    one = summarize_spark(spark.read.parquet(parquet).coalesce(1), **COLUMNS)
    five = summarize_spark(spark.read.parquet(parquet).repartition(5), **COLUMNS)
    assert (one.partials, five.partials) == (1, 5)
    a = evaluate_summary(one.windows[None], metrics=SUMMARY_ONLY)
    b = evaluate_summary(five.windows[None], metrics=SUMMARY_ONLY)
    # counts exact; floats within 1e-12 (score sums added in another order differ by ulps)
    assert_same(a, b, SUMMARY_ONLY)
    for attr in ATTRS:  # the merged row samples are the same rows too
        for label, group in one.windows[None].attributes[attr].groups.items():
            other = five.windows[None].attributes[attr].groups[label]
            np.testing.assert_array_equal(group.sample_keys, other.sample_keys)


def test_spark_source_fetches_one_models_window_in_utc(spark, log, tmp_path):
    from fairmonitor.exceptions import WindowUnavailableError
    from fairmonitor.monitor.sources import WindowSource
    from fairmonitor.monitor.sources.spark import SparkSource

    both = log.assign(model=np.where(np.arange(len(log)) % 2, "credit", "other"))
    both.to_parquet(tmp_path / "models.parquet")
    source = SparkSource(str(tmp_path / "models.parquet"), spark=spark)
    assert isinstance(source, WindowSource)
    got = source.fetch("credit", T0 + HOUR, T0 + 2 * HOUR)
    ts = both["timestamp"].dt.tz_localize("UTC")
    want = both[(ts >= T0 + HOUR) & (ts < T0 + 2 * HOUR) & (both["model"] == "credit")]
    assert str(got["timestamp"].dt.tz) == "UTC"
    got = got.sort_values("timestamp").reset_index(drop=True)
    want = want.sort_values("timestamp").reset_index(drop=True)
    assert got["timestamp"].tolist() == want["timestamp"].dt.tz_localize("UTC").tolist()
    for column in ["sex", "race", "x1", "x2", "score", "label"]:
        assert got[column].tolist() == want[column].tolist(), column
    # evaluated by the monitor's path, its values are the window's
    report = evaluate_window(window_of(got), metrics=SUMMARY_ONLY)
    assert_same(report, evaluate_window(window_of(want), metrics=SUMMARY_ONLY), SUMMARY_ONLY)
    with pytest.raises(WindowUnavailableError, match="cannot give credit's window"):
        SparkSource(str(tmp_path / "absent.parquet"), spark=spark).fetch(
            "credit", T0, T0 + HOUR)


@pytest.mark.parametrize("policy", ["group", "drop"])
def test_missing_sensitive_values_follow_the_window_policy(spark, log, tmp_path, policy):
    holes = log.drop(columns="timestamp").astype({"sex": object, "race": object})
    holes.loc[::37, "sex"] = None
    holes.loc[::53, "race"] = None
    holes.to_parquet(tmp_path / "holes.parquet")
    frame = spark.read.parquet(str(tmp_path / "holes.parquet")).repartition(3)
    missing = {"sex": policy, "race": policy}
    reports = evaluate_spark(frame, **COLUMNS, missing=missing, metrics=SUMMARY_ONLY)
    local = evaluate_window(Window.from_frame(holes, sensitive_features=SENSITIVE, label="label",
                                              score="score", features=FEATURES, missing=missing),
                            metrics=SUMMARY_ONLY)
    assert_same(reports[None], local, SUMMARY_ONLY)
    if policy == "group":
        assert reports[None].group_counts["sex"]["missing"] == len(holes.loc[::37])
    with pytest.raises(Exception, match="missing values"):  # the default policy: "raise"
        summarize_spark(frame, **COLUMNS)
