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
    ("    rollups: [1d]\n", "[mae_difference]", "not supported with task: regression"),
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


def test_a_spark_source_is_refused_for_regression() -> None:
    with pytest.raises(ConfigError, match="spark is not supported with task: regression"):
        load_config("""
models:
  limits:
    task: regression
    source: {kind: spark, table: predictions}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    metrics: [prediction_ks_distance]
""")


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
