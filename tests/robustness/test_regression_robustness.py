"""Noise robustness of a regressor's gaps: hand-derived and analytic (Laplace) expectations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fairmonitor.exceptions import UndefinedMetricWarning
from fairmonitor.metrics import mae_difference, prediction_ks_distance
from fairmonitor.robustness.regression import regression_robustness


def offset_model(c: float):
    """``pred = x + c`` for group a (the model sees the frozen group column)."""
    return lambda d: d["x"].to_numpy(float) + c * (d["g"].to_numpy() == "a")


def frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.normal(size=n), "g": rng.choice(["a", "b"], size=n)})


def test_the_mae_gap_under_laplace_noise_matches_its_expectation() -> None:
    # residual = c + e in group a, e in group b, e ~ Laplace(b) with b = k std(x) / sqrt(2):
    # E|e| = b and E|c + e| = c + b exp(-c / b), so the expected MAE gap is
    # c + b exp(-c / b) - b (the clean gap is c exactly: the targets are x)
    X, c = frame(20_000), 1.0
    res = regression_robustness(offset_model(c), X, sensitive_features="g",
                                y_true=X["x"].to_numpy(), levels=(0.5, 1.0, 2.0),
                                n_repeats=10, random_state=0)
    assert res.clean["mae_difference"] == pytest.approx(c, rel=1e-12)
    sd = X["x"].std(ddof=0)
    for k, level in enumerate(res.levels):
        b = level * sd / math.sqrt(2)
        expected = c + b * math.exp(-c / b) - b
        gap, se = res.gaps["mae_difference"][k], res.gap_se["mae_difference"][k]
        # the copies share the rows: the spread of their mean is that of one copy's gap
        assert gap == pytest.approx(expected, abs=5 * se + 0.02)
        assert res.deltas["mae_difference"][k] == pytest.approx(gap - c, rel=1e-12)
        assert res.ratios["mae_difference"][k] == pytest.approx(gap / c, rel=1e-12)
    assert res.mae_delta_max == pytest.approx(res.deltas["mae_difference"].max())
    assert res.mae_delta_max < 0  # noise dilutes the offset's share of the error


def test_the_clean_gaps_are_the_metric_functions_and_unused_noise_moves_nothing() -> None:
    X = frame(600, seed=1)
    g = X["g"].to_numpy()
    y = np.linspace(0, 5, 600)
    X["t"] = y  # frozen: the model reads only unperturbed columns
    pred = 3.0 * (g == "a") + y
    res = regression_robustness(lambda d: 3.0 * (d["g"].to_numpy() == "a") + d["t"], X,
                                sensitive_features="g", y_true=y, levels=(0.5, 2.0),
                                n_repeats=4, column_kinds={"t": "frozen"})
    assert res.clean["mae_difference"] == float(mae_difference(y, pred, sensitive_features=g))
    assert res.clean["prediction_ks_distance"] == float(
        prediction_ks_distance(pred, sensitive_features=g))
    for metric in ("mae_difference", "prediction_ks_distance"):
        np.testing.assert_allclose(res.deltas[metric], 0.0, atol=1e-12)
        np.testing.assert_allclose(res.ratios[metric], 1.0, rtol=1e-12)


def test_without_targets_only_the_ks_gap_is_followed() -> None:
    X = frame(400, seed=2)
    res = regression_robustness(offset_model(0.5), X, sensitive_features="g",
                                levels=(1.0,), n_repeats=3)
    assert math.isnan(res.mae_delta_max) and "y_true" in res.reasons["mae_difference"]
    assert math.isfinite(res.ks_delta_max)
    with pytest.warns(UndefinedMetricWarning):
        one = regression_robustness(offset_model(0.5), X, sensitive_features=np.full(400, "a"),
                                    levels=(1.0,), n_repeats=2)
    assert math.isnan(one.ks_ratio_max)


def test_round_integers_gives_the_model_integer_copies() -> None:
    """A model that insists on its integer column's dtype (as an MLflow signature does)."""
    rng = np.random.default_rng(3)
    X = pd.DataFrame({"n": rng.integers(0, 100, 500), "g": rng.choice(["a", "b"], 500)})
    seen: list[np.dtype] = []

    def model(d: pd.DataFrame) -> np.ndarray:
        seen.append(d["n"].dtype)
        return d["n"].to_numpy(float) + (d["g"].to_numpy() == "a")

    res = regression_robustness(model, X, sensitive_features="g", levels=(0.5, 1.0),
                                n_repeats=2, round_integers=True)
    assert seen and all(dtype == np.int64 for dtype in seen)
    assert math.isfinite(res.ks_delta_max)
    seen.clear()
    regression_robustness(model, X, sensitive_features="g", levels=(0.5,), n_repeats=2)
    assert seen[0] == np.int64 and seen[1].kind == "f"  # the clean rows, then noisy floats
