"""The monitor on a regression model (issue 29): ``task: regression`` windows, gauges, config."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import MetricFrame
from sklearn.metrics import mean_absolute_error

from fairmonitor.exceptions import ConfigError
from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sources import MemorySource

T0 = datetime(2026, 11, 22, tzinfo=UTC)
H = timedelta(hours=1)


def regression_frame(n_hours: int = 4, rows: int = 300, *, bias_from: int = 2,
                     seed: int = 0) -> pd.DataFrame:
    """Hourly credit-limit predictions; from ``bias_from`` on, group M is over-predicted by 3."""
    rng = np.random.default_rng(seed)
    parts = []
    for h in range(n_hours):
        sex = np.tile(["F", "M"], rows // 2)
        target = rng.normal(20, 5, rows)
        pred = target + rng.normal(0, 1, rows) + np.where((sex == "M") & (h >= bias_from),
                                                          3.0, 0.0)
        offsets = np.sort(rng.uniform(0, 3600, rows))
        parts.append(pd.DataFrame({
            "timestamp": [T0 + timedelta(hours=h, seconds=float(s)) for s in offsets],
            "model": "limits", "version": "1", "sex": sex,
            # a database's text and decimals: the monitor converts them
            "prediction": [f"{v:.6f}" for v in pred], "label": target}))
    return pd.concat(parts, ignore_index=True)


def config(extra: str = "", metrics: str = "[mae_difference, mean_residual_difference, "
           "prediction_ks_distance, prediction_wasserstein]") -> object:
    return load_config(f"""
models:
  limits:
    task: regression
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    label: label
    window: 1h
    start: 2026-11-22T00:00:00Z
    metrics: {metrics}
    thresholds:
      mean_residual_difference: {{warning: 1.0, critical: 2.0}}
{extra}""")


def test_regression_windows_are_evaluated_and_alert() -> None:
    frame = regression_frame()
    cfg = config()
    assert cfg.models["limits"].evaluation.task == "regression"
    results = run_once(cfg, {"limits": MemorySource(frame)}, MemoryCheckpoint(), now=T0 + 4 * H)
    assert [r.status for r in results] == ["ok", "ok", "critical", "critical"]
    last = results[-1]
    hour = frame[frame["timestamp"] >= T0 + 3 * H]
    frame_mae = MetricFrame(metrics=mean_absolute_error, y_true=hour["label"],
                            y_pred=hour["prediction"].astype(float),
                            sensitive_features=hour["sex"])
    assert abs(last.report.values[("mae_difference", "sex")] - frame_mae.difference()) <= 1e-12
    assert last.report.values[("mean_residual_difference", "sex")] == pytest.approx(3.0, abs=0.4)
    assert last.report.intervals[("mean_residual_difference", "sex")].lower > 2.0
    assert last.n_rows == 300


def test_invalid_predictions_are_dropped_and_counted() -> None:
    frame = regression_frame(n_hours=1)
    frame.loc[[0, 5], "prediction"] = ["not a number", None]
    (result,) = run_once(config(), {"limits": MemorySource(frame)}, MemoryCheckpoint(),
                         now=T0 + H)
    assert result.rejected == {"invalid_prediction": 2}
    assert result.n_rows == 298


def test_the_gauges_carry_the_regression_metrics() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from fairmonitor.monitor.sinks.prometheus import FairnessCollector

    cfg = config()
    (result,) = run_once(cfg, {"limits": MemorySource(regression_frame(n_hours=1))},
                         MemoryCheckpoint(), now=T0 + H)
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models, build_version="0.0.0")
    collector.observe(result)
    text = generate_latest(registry).decode()
    assert 'fairmonitor_mean_residual_difference{' in text
    assert 'fairmonitor_prediction_ks_distance{' in text


@pytest.mark.parametrize(("extra", "metrics", "message"), [
    ("", "[demographic_parity_difference]", "applies to binary models"),
    ("    score: score\n", "[mae_difference]", "reads 'prediction', not 'score'"),
    # a version's reference evaluation predicts with the version itself (no score column)
    ("    model: models:/limits/1\n    reference: {path: ref.csv, score: s}\n",
     "[mae_difference]", r"reference.score: task: regression reads 'prediction' \(the "),
])
def test_config_errors(extra: str, metrics: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(extra, metrics)
    with pytest.raises(ConfigError, match="task: must be one of"):
        load_config("""
models:
  m:
    task: ranking
    source: {kind: sql, url: "sqlite://"}
    sensitive_features: [sex]
    prediction: p
    window: 1h
    metrics: [mae_difference]
""")


class LocalSummaries:
    """A summarizing source (as ``kind: spark``): the executors' function, in this process."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.asked: list[dict] = []

    def table_columns(self) -> list[str]:
        return list(self.frame.columns)

    def fetch(self, *args):
        raise AssertionError("a summarizing source is never asked for rows")

    def window_summaries(self, model, spans, **kw):
        from fairmonitor.spark import merge_partials
        from fairmonitor.spark._partition import KEY, PartitionPlan, summarize_partition
        from fairmonitor.spark.windows import WindowParts

        self.asked.append(kw)
        epoch, us = datetime(1970, 1, 1, tzinfo=UTC), timedelta(microseconds=1)
        out = {}
        for start, end in spans:
            lo, hi = (start - epoch) // us, (end - epoch) // us
            plan = PartitionPlan(tuple(kw["sensitive_features"]), kw["label"], kw["score"],
                                 kw["prediction"], (), 0.5, kw["intersection"], kw["spec"],
                                 kw["missing"], model, "", hi - lo, True, kw["task"],
                                 kw["value_range"])
            rows = self.frame[(self.frame["timestamp"] >= start)
                              & (self.frame["timestamp"] < end)]
            names = [*kw["sensitive_features"], kw["prediction"], *[kw["label"]] * bool(
                kw["label"])]
            halves = [rows.iloc[: len(rows) // 3], rows.iloc[len(rows) // 3:]]  # 2 partitions
            partials = [r for half in halves
                        for part in summarize_partition(plan, iter([half[names].assign(
                            **{KEY: lo})])) for r in part.to_dict("records")]
            got = merge_partials(partials, plan)
            every, labelled = got.windows.get(start), got.labelled.get(start)
            if every is not None and labelled is None and "y_true" in every.inputs:
                every, labelled = every.without_labels(), every
            out[(start, end)] = WindowParts(every, labelled, got.labelled_rows.get(start, 0),
                                            got.rejected.get(start, {}), {"1": len(rows)})
        return out


def spark_config(extra: str = "") -> object:
    return load_config(f"""
models:
  limits:
    task: regression
    source: {{kind: spark, table: predictions}}
    sensitive_features: [sex]
    prediction: prediction
    label: label
    window: 1h
    start: 2026-11-22T00:00:00Z
    metrics: {ALL}
{ROLLUP}{extra}""")


def test_a_summarizing_source_gives_the_row_path_results() -> None:
    """``kind: spark`` for regression: executors summarize (here in process), the driver merges."""
    from fairmonitor.monitor.summary_store import MemorySummaryStore

    frame = regression_frame(n_hours=8)
    frame.loc[[3, 400], "prediction"] = ["oops", None]  # dropped and counted on both paths
    frame.loc[frame.index % 7 == 0, "label"] = np.nan  # labels missing: two phases
    cfg = spark_config()
    source = LocalSummaries(frame)
    now = T0 + 8 * H
    got = run_once(cfg, {"limits": source}, MemoryCheckpoint(), now=now,
                   summaries=MemorySummaryStore())
    want = run_once(cfg, {"limits": MemorySource(frame)}, MemoryCheckpoint(), now=now,
                    summaries=MemorySummaryStore())
    assert source.asked[0]["task"] == "regression"
    assert source.asked[0]["value_range"] == [0, 40]
    assert [(r.rollup, r.end, r.n_rows, dict(r.rejected), r.labelled_rows) for r in got] == \
        [(r.rollup, r.end, r.n_rows, dict(r.rejected), r.labelled_rows) for r in want]
    assert any(r.rollup for r in got) and any(r.rejected for r in got)
    for a, b in zip(got, want, strict=True):
        assert a.errors == b.errors == {}
        assert a.report.values.keys() == b.report.values.keys()
        for key, value in b.report.values.items():
            assert a.report.values[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


ALL = ("[mae_difference, rmse_difference, mean_residual_difference, mae_ratio, rmse_ratio, "
       "bounded_group_loss, prediction_ks_distance, prediction_wasserstein, "
       "prediction_wasserstein_scaled, prediction_madd]")
ROLLUP = """    rollups: [6h]
    options:
      prediction_madd: {value_range: [0, 40], bandwidth: 0.05}
      prediction_wasserstein_scaled: {scale: 5.0}
"""


def day_of(results):
    (day,) = [r for r in results if r.rollup]
    return day


def test_a_regression_rollup_merged_from_hourly_summaries_equals_its_rows() -> None:
    """6 hourly summaries (raw predictions: 900 rows a group) merged: the rows' values."""
    from fairmonitor.monitor.summary_store import MemorySummaryStore
    from fairmonitor.report import Window, evaluate_window

    frame = regression_frame(n_hours=8)
    cfg = config(ROLLUP, ALL)
    results = run_once(cfg, {"limits": MemorySource(frame)}, MemoryCheckpoint(),
                       now=T0 + 8 * H, summaries=MemorySummaryStore())
    day = day_of(results)
    assert (day.start, day.end, day.merged_windows, day.n_rows) == (T0, T0 + 6 * H, 6, 1800)
    rows = frame[frame["timestamp"] < T0 + 6 * H]
    pred = rows["prediction"].astype(float).to_numpy()
    oracle = evaluate_window(Window({"sex": rows["sex"].to_numpy()}, y_pred=pred,
                                    y_true=rows["label"].to_numpy()),
                             evaluation=cfg.models["limits"].evaluation.replace(rng=0))
    assert set(day.report.values) == set(oracle.values)
    for key, expected in oracle.values.items():
        assert day.report.values[key] == pytest.approx(expected, rel=1e-12, abs=1e-12), key
    frame_mae = MetricFrame(metrics=mean_absolute_error, y_true=rows["label"], y_pred=pred,
                            sensitive_features=rows["sex"])
    assert day.report.values[("mae_difference", "sex")] == pytest.approx(
        frame_mae.difference(), abs=1e-12)
    assert day.report.intervals[("mean_residual_difference", "sex")].lower > 1.0


def test_a_regression_rollup_of_cells_is_within_its_certified_error() -> None:
    """Groups above ``summaries.max_raw`` keep cells: KS and W1 within their error bound."""
    from scipy.stats import ks_2samp, wasserstein_distance

    from fairmonitor.monitor.summary_store import MemorySummaryStore

    frame = regression_frame(n_hours=8)
    cfg = config(ROLLUP + "    summaries: {max_raw: 500}\n", ALL)
    day = day_of(run_once(cfg, {"limits": MemorySource(frame)}, MemoryCheckpoint(),
                          now=T0 + 8 * H, summaries=MemorySummaryStore()))
    rows = frame[frame["timestamp"] < T0 + 6 * H]
    pred = rows["prediction"].astype(float).to_numpy()
    sex = rows["sex"].to_numpy()
    ks = max(ks_2samp(pred[sex == g], pred).statistic for g in ("F", "M"))
    got = day.report.details[("prediction_ks_distance", "sex")].prediction_ks_distance
    assert abs(got.value - ks) <= got.detail["error"] + 1e-12 and got.detail["error"] < 0.02
    w1 = wasserstein_distance(pred[sex == "F"], pred[sex == "M"])
    got = day.report.details[("prediction_wasserstein", "sex")].prediction_wasserstein
    assert abs(got.value - w1) <= got.detail["error"] + 1e-12
    frame_mae = MetricFrame(metrics=mean_absolute_error, y_true=rows["label"], y_pred=pred,
                            sensitive_features=sex)
    assert day.report.values[("mae_difference", "sex")] == pytest.approx(
        frame_mae.difference(), abs=1e-12)
    # 4 of the 6 hours over-predict M by 3: a gap of about 2, past the warning line (1)
    assert day.report.statuses[("mean_residual_difference", "sex")] != "ok"


def test_a_corrupt_or_lost_regression_summary_is_re_made_from_the_rows() -> None:
    """The rollup checks each stored regression summary and re-makes a bad one from its rows."""
    from fairmonitor.monitor.incidents import INCIDENTS
    from fairmonitor.monitor.summary_store import MemorySummaryStore
    from fairmonitor.monitor.windows import window_index

    frame = regression_frame(n_hours=8)
    cfg = config(ROLLUP, ALL)
    source, checkpoint, store = MemorySource(frame), MemoryCheckpoint(), MemorySummaryStore()
    run_once(cfg, {"limits": source}, checkpoint, now=T0 + 5 * H, summaries=store)
    first = window_index(H, T0 + H)  # the index of the window ending at T0 + 1h
    key = ("limits", first, "labels")
    blob = store.blobs[key]
    store.blobs[key] = blob[:40] + bytes([blob[40] ^ 0xFF]) + blob[41:]  # a flipped byte
    del store.blobs[("limits", first + 1, "labels")]  # a lost one
    before = {k: INCIDENTS.get("repairs", "limits", k)
              for k in ("summary_corrupt", "summary_missing")}
    after_run = run_once(cfg, {"limits": source}, checkpoint, now=T0 + 8 * H, summaries=store)
    (six,) = [r for r in after_run if r.rollup]
    assert six.errors == {} and six.merged_windows == 6
    assert {k: INCIDENTS.get("repairs", "limits", k) - v for k, v in before.items()} == {
        "summary_corrupt": 1, "summary_missing": 1}
    fresh = run_once(cfg, {"limits": MemorySource(frame)}, MemoryCheckpoint(), now=T0 + 8 * H,
                     summaries=MemorySummaryStore())
    (want,) = [r for r in fresh if r.rollup]
    for k, v in want.report.values.items():
        assert six.report.values[k] == pytest.approx(v, rel=1e-12, abs=1e-12), k


def test_the_counterpart_gap_reads_the_feature_columns() -> None:
    from fairmonitor.metrics import counterpart_prediction_gap

    frame = regression_frame(n_hours=1, rows=400)
    rng = np.random.default_rng(5)
    frame["income"] = rng.normal(50, 10, len(frame))
    cfg = config(metrics="[mean_residual_difference, counterpart_prediction_gap, "
                         "counterpart_prediction_gap_scaled]",
                 extra="    features: [income]\n    options:\n"
                       "      counterpart_prediction_gap: {value_range: [0, 40]}\n")
    (result,) = run_once(cfg, {"limits": MemorySource(frame)}, MemoryCheckpoint(),
                         now=T0 + H)
    direct = counterpart_prediction_gap(frame[["income"]], frame["prediction"].astype(float),
                                        sensitive_features=frame["sex"], value_range=(0, 40),
                                        min_group_size=30, random_state=0)
    values = result.report.values
    assert values[("counterpart_prediction_gap", "sex")] == pytest.approx(direct.value,
                                                                          rel=1e-12)
    assert values[("counterpart_prediction_gap_scaled", "sex")] == pytest.approx(
        direct.value / 40, rel=1e-12)
