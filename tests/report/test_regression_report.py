"""evaluate_window on a regression window (issue 29): the task picks the metric set."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fairlearn.metrics import MetricFrame
from sklearn.metrics import mean_absolute_error

from fairmonitor import Threshold, Window, evaluate_window
from fairmonitor.exceptions import InvalidInputError
from fairmonitor.metrics import prediction_ks_distance
from fairmonitor.report import EvaluationOptions
from fairmonitor.report.registry import METRICS, task_metrics

N = 1200


@pytest.fixture(scope="module")
def window() -> Window:
    rng = np.random.default_rng(0)
    g = rng.choice(["a", "b"], N)
    y = rng.normal(50, 10, N)
    pred = y + rng.normal(0, 4, N) + np.where(g == "b", 3.0, 0.0)  # b over-predicted by 3
    return Window({"g": g}, y_pred=pred, y_true=y)


@pytest.fixture(scope="module")
def report(window: Window):
    return evaluate_window(window, task="regression", rng=0,
                           thresholds=[Threshold("mean_residual_difference", warning=1.0,
                                                 critical=2.0)])


def test_the_task_selects_the_regression_metrics(report) -> None:
    # a window without features nor model: the counterpart gap and the noise metrics are
    # skipped, saying why
    row = {m for m in task_metrics("regression") if METRICS[m].needs_features}
    assert row == {"counterpart_prediction_gap", "counterpart_prediction_gap_scaled",
                   "robustness_mae_gap_ratio_max", "robustness_mae_gap_delta_max",
                   "robustness_ks_gap_ratio_max", "robustness_ks_gap_delta_max"}
    assert report.metrics == tuple(m for m in task_metrics("regression") if m not in row)
    assert set(report.skipped) == row
    assert all(METRICS[m].task == "regression" for m in report.metrics)


def test_values_are_the_metric_functions_and_fairlearn(window: Window, report) -> None:
    frame = MetricFrame(metrics=mean_absolute_error, y_true=window.y_true,
                        y_pred=window.y_pred, sensitive_features=window.sensitive_features["g"])
    assert abs(report.values[("mae_difference", "g")] - frame.difference()) <= 1e-12
    expected = prediction_ks_distance(window.y_pred,
                                      sensitive_features=window.sensitive_features["g"])
    assert report.values[("prediction_ks_distance", "g")] == float(expected)
    residual = report.details[("mean_residual_difference", "g")].mean_residual_difference
    assert residual.by_group["b"] - residual.by_group["a"] == pytest.approx(3.0, abs=0.8)


def test_intervals_and_thresholds_follow(report) -> None:
    iv = report.intervals[("mean_residual_difference", "g")]
    assert iv.lower < report.values[("mean_residual_difference", "g")] < iv.upper
    assert iv.chance < 0.5 < iv.lower  # a 3-unit over-prediction is far above chance
    assert report.statuses[("mean_residual_difference", "g")] == "critical"
    assert math.isnan(report.intervals[("prediction_madd", "g")].lower)
    assert report.flat()["fairness/prediction_wasserstein/g"] == \
        report.values[("prediction_wasserstein", "g")]


def test_the_binary_default_is_unchanged(window: Window) -> None:
    binary = Window({"g": window.sensitive_features["g"]}, y_pred=(window.y_pred > 50) * 1,
                    y_true=(window.y_true > 50) * 1)
    report = evaluate_window(binary, confidence_level=None)
    assert not set(report.metrics) & set(task_metrics("regression"))
    assert "demographic_parity_difference" in report.metrics


def test_a_metric_of_another_task_is_nan_with_the_reason(window: Window) -> None:
    report = evaluate_window(window, task="regression", confidence_level=None,
                             metrics=["demographic_parity_difference", "mae_difference"])
    assert math.isnan(report.values[("demographic_parity_difference", "g")])
    assert "applies to binary models" in report.reasons[("demographic_parity_difference", "g")]
    assert report.values[("mae_difference", "g")] > 0


def test_weighted_and_options(window: Window) -> None:
    w = np.random.default_rng(3).uniform(0.5, 2.0, N)
    weighted = Window(dict(window.sensitive_features), y_pred=window.y_pred,
                      y_true=window.y_true, sample_weight=w)
    opts = EvaluationOptions(task="regression", confidence_level=None,
                             options={"bounded_group_loss": {"bound": 100.0},
                                      "prediction_wasserstein_scaled": {"scale": 2.0}})
    report = evaluate_window(weighted, evaluation=opts)
    assert report.values[("bounded_group_loss", "g")] == 0.0
    assert report.values[("prediction_wasserstein_scaled", "g")] == pytest.approx(
        report.values[("prediction_wasserstein", "g")] / 2.0)
    frame = MetricFrame(metrics=mean_absolute_error, y_true=window.y_true,
                        y_pred=window.y_pred, sensitive_features=window.sensitive_features["g"],
                        sample_params={"sample_weight": w})
    assert abs(report.values[("mae_difference", "g")] - frame.difference()) <= 1e-12
    assert math.isnan(report.values[("prediction_madd", "g")])  # MADD has no weights
    assert "no weighted definition" in report.reasons[("prediction_madd", "g")]


def test_non_numeric_predictions_are_an_error_per_metric() -> None:
    bad = Window({"g": ["a", "b"] * 5}, y_pred=["x"] * 10, y_true=list(range(10)))
    report = evaluate_window(bad, task="regression", confidence_level=None)
    assert "must be numeric" in report.reasons[("mae_difference", "g")]
    with pytest.raises(InvalidInputError, match="task"):
        EvaluationOptions(task="ranking")
