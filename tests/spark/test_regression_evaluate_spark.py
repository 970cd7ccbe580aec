"""``evaluate_spark`` on a regressor's rows (issue 29): ``task="regression"``.

Each partition summarizes its rows with ``summarize_regression`` and each window's merged
summary gives the report ``evaluate_window(task="regression")`` gives on the same rows (the
oracle here, itself checked against fairlearn and scipy in ``tests/metrics``). Without
``task``, continuous targets are refused with an error that names ``task='regression'``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fairmonitor.exceptions import InvalidInputError
from fairmonitor.report import Window, evaluate_window
from fairmonitor.report.registry import METRICS, task_metrics
from fairmonitor.spark import evaluate_spark

#: every regression metric a summary gives (the counterpart gap and noise read features)
GROUP_METRICS = [m for m in task_metrics("regression") if not METRICS[m].needs_features]


def limits(n: int = 900, seed: int = 0) -> pd.DataFrame:
    """Two days of credit-limit predictions; group b over-predicted by 2 on the second."""
    rng = np.random.default_rng(seed)
    day = np.repeat(["2026-11-21", "2026-11-22"], n // 2)
    group = rng.choice(["a", "b"], n)
    target = rng.normal(20, 5, n)
    pred = target + rng.normal(0, 1, n) + 2.0 * ((group == "b") & (day == "2026-11-22"))
    return pd.DataFrame({"day": day, "group": group, "limit": target, "predicted": pred})


def test_a_regressor_on_spark_gives_evaluate_window_per_window(spark):
    frame = limits()
    df = spark.createDataFrame(frame)  # two partitions: each window split over both
    options = {"prediction_madd": {"value_range": [0.0, 40.0]}}
    reports = evaluate_spark(df, sensitive_features=["group"], label="limit",
                             prediction="predicted", window_column="day", task="regression",
                             value_range=(0.0, 40.0), metrics=GROUP_METRICS, rng=0,
                             min_group_size=30, options=options)
    assert sorted(reports) == ["2026-11-21", "2026-11-22"]
    for day, report in reports.items():
        rows = frame[frame["day"] == day]
        want = evaluate_window(Window({"group": rows["group"]}, y_pred=rows["predicted"],
                                      y_true=rows["limit"]),
                               metrics=GROUP_METRICS, task="regression", rng=0,
                               min_group_size=30, options=options)
        assert len(GROUP_METRICS) == 10
        assert report.values.keys() == want.values.keys() == {
            (m, "group") for m in GROUP_METRICS}
        assert report.n_rows == len(rows)
        for key, value in want.values.items():
            assert report.values[key] == pytest.approx(value, rel=1e-12, abs=1e-12), (day, key)
            got_iv, want_iv = report.intervals.get(key), want.intervals.get(key)
            if want_iv is not None:  # NaN where the metric has no interval (with a reason)
                np.testing.assert_allclose([got_iv.lower, got_iv.upper],
                                           [want_iv.lower, want_iv.upper], rtol=1e-9,
                                           atol=1e-12, equal_nan=True, err_msg=f"{day} {key}")
    assert reports["2026-11-22"].values[("mean_residual_difference", "group")] == pytest.approx(
        2.0, abs=0.3)


def test_continuous_targets_without_task_name_the_regression_path(spark):
    df = spark.createDataFrame(limits(200))
    with pytest.raises(Exception, match=r"task='regression'"):
        evaluate_spark(df, sensitive_features=["group"], label="limit",
                       prediction="predicted", metrics=["demographic_parity_difference"])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"task": "ranking"}, r"task.*must be one of \('binary', 'regression'\)"),
    ({"task": "regression", "score": "predicted"},
     "task='regression' reads 'prediction' .continuous., not a score"),
    ({"task": "regression", "prediction": None}, "task='regression' needs 'prediction'"),
])
def test_a_wrong_task_is_refused_before_any_job(spark, kwargs, message):
    df = spark.createDataFrame(limits(20))
    given = {"sensitive_features": ["group"], "label": "limit", "prediction": "predicted",
             **kwargs}
    with pytest.raises(InvalidInputError, match=message):
        evaluate_spark(df, **given)
