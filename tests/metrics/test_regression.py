"""Regression metrics against independent oracles: fairlearn's MetricFrame and scipy.stats."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from fairlearn.metrics import MetricFrame
from scipy import stats
from sklearn.metrics import mean_absolute_error, mean_squared_error

from fairmonitor.exceptions import GroupExclusionWarning, UndefinedMetricWarning
from fairmonitor.metrics import (
    bounded_group_loss,
    madd,
    mae_difference,
    mae_ratio,
    mean_residual_difference,
    prediction_ks_distance,
    prediction_madd,
    prediction_wasserstein,
    prediction_wasserstein_scaled,
    rmse_difference,
    rmse_ratio,
)


def data(n: int = 900, seed: int = 0, k: int = 3) -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(seed)
    group = rng.choice([f"g{i}" for i in range(k)], size=n, p=np.linspace(1, 2, k) / sum(
        np.linspace(1, 2, k)))
    y = rng.normal(50, 10, size=n)
    shift = np.array([int(g[1:]) for g in group]) * 1.5
    pred = y + shift + rng.normal(0, 3 + shift, size=n)
    return y, np.round(pred, 1), group  # rounding: ties in the predictions


def rmse(y: Any, p: Any, sample_weight: Any = None) -> float:
    return math.sqrt(mean_squared_error(y, p, sample_weight=sample_weight))


def mean_residual(y: Any, p: Any, sample_weight: Any = None) -> float:
    return float(np.average(np.asarray(p) - np.asarray(y), weights=sample_weight))


@pytest.mark.parametrize(("func", "oracle", "agg"), [
    (mae_difference, mean_absolute_error, "difference"),
    (rmse_difference, rmse, "difference"),
    (mean_residual_difference, mean_residual, "difference"),
    (mae_ratio, mean_absolute_error, "ratio"),
    (rmse_ratio, rmse, "ratio"),
])
@pytest.mark.parametrize("weighted", [False, True])
def test_error_parity_matches_fairlearn(func: Any, oracle: Any, agg: str,
                                        weighted: bool) -> None:
    y, p, g = data()
    w = np.random.default_rng(1).uniform(0.2, 3.0, size=y.size) if weighted else None
    params = {"sample_weight": w} if weighted else None
    frame = MetricFrame(metrics=oracle, y_true=y, y_pred=p, sensitive_features=g,
                        sample_params=params)
    expected = frame.difference() if agg == "difference" else frame.ratio()
    result = func(y, p, sensitive_features=g, sample_weight=w)
    assert abs(float(result) - expected) <= 1e-12
    for label, value in frame.by_group.items():
        assert abs(result.by_group[label] - value) <= 1e-12


def test_hand_derived_error_parity() -> None:
    # a: residuals +2, 0 -> MAE 1, RMSE sqrt 2, MR 1; b: residuals -1, -1 -> MAE 1, RMSE 1, MR -1
    y, p, g = [0, 0, 5, 5], [2, 0, 4, 4], list("aabb")
    assert float(mae_difference(y, p, sensitive_features=g)) == 0.0
    assert float(rmse_difference(y, p, sensitive_features=g)) == pytest.approx(
        math.sqrt(2) - 1, abs=1e-15)
    r = mean_residual_difference(y, p, sensitive_features=g)
    assert (float(r), r.by_group, r.extremes) == (2.0, {"a": 1.0, "b": -1.0}, ("b", "a"))
    assert float(rmse_ratio(y, p, sensitive_features=g)) == pytest.approx(1 / math.sqrt(2))
    assert float(mae_ratio(y, p, sensitive_features=g)) == 1.0


def test_bounded_group_loss_is_the_worst_excess() -> None:
    y, p, g = data()
    per_group = MetricFrame(metrics=mean_absolute_error, y_true=y, y_pred=p,
                            sensitive_features=g).by_group
    bound = float(per_group.mean())
    r = bounded_group_loss(y, p, sensitive_features=g, bound=bound)
    assert float(r) == pytest.approx(per_group.max() - bound, abs=1e-12)
    assert r.extremes == (per_group.idxmax(),)
    assert float(bounded_group_loss(y, p, sensitive_features=g, bound=per_group.max() + 1)) == 0
    squared = bounded_group_loss(y, p, sensitive_features=g, bound=0.0, loss="rmse")
    assert float(squared) == pytest.approx(max(rmse(y[g == k], p[g == k]) for k in set(g)))
    # no bound: each group against the pooled MAE of every row
    pooled = bounded_group_loss(y, p, sensitive_features=g)
    assert float(pooled) == pytest.approx(per_group.max() - mean_absolute_error(y, p),
                                          abs=1e-12)
    assert pooled.detail["bound_source"] == "pooled"


def test_ks_matches_scipy_ks_2samp_on_group_vs_pooled() -> None:
    y, p, g = data(seed=3)
    r = prediction_ks_distance(p, sensitive_features=g)
    for label in set(g):
        expected = stats.ks_2samp(p[g == label], p).statistic
        assert abs(r.by_group[label] - expected) <= 1e-12
    assert float(r) == max(r.by_group.values())


def test_weighted_ks_equals_repeating_rows() -> None:
    y, p, g = data(n=300, seed=4)
    counts = np.random.default_rng(2).integers(1, 4, size=p.size)
    r = prediction_ks_distance(p, sensitive_features=g, sample_weight=counts)
    repeated = prediction_ks_distance(np.repeat(p, counts),
                                      sensitive_features=np.repeat(g, counts))
    assert float(r) == pytest.approx(float(repeated), abs=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_wasserstein_matches_scipy(weighted: bool) -> None:
    y, p, g = data(seed=5, k=4)
    w = np.random.default_rng(1).uniform(0.2, 3.0, size=p.size) if weighted else None
    r = prediction_wasserstein(p, sensitive_features=g, sample_weight=w)
    expected = {}
    for a, b in itertools.combinations(sorted(set(g)), 2):
        ia, ib = g == a, g == b
        expected[(a, b)] = stats.wasserstein_distance(
            p[ia], p[ib], None if w is None else w[ia], None if w is None else w[ib])
        assert abs(r.detail["pairs"][(a, b)] - expected[(a, b)]) <= 1e-9
    assert float(r) == pytest.approx(max(expected.values()), abs=1e-9)
    assert r.extremes == max(expected, key=expected.get)


def test_scaled_wasserstein_divides_by_the_scale() -> None:
    y, p, g = data(seed=6)
    raw = float(prediction_wasserstein(p, sensitive_features=g))
    assert float(prediction_wasserstein_scaled(p, sensitive_features=g, scale=4.0)) == \
        pytest.approx(raw / 4.0, rel=1e-12)
    q1, q3 = np.quantile(p, [0.25, 0.75])
    window = prediction_wasserstein_scaled(p, sensitive_features=g)
    assert float(window) == pytest.approx(raw / (q3 - q1), rel=1e-12)
    assert window.detail["scale_source"] == "window IQR"


def test_hand_derived_distributions() -> None:
    # a = {0, 1}, b = {1, 3}: pooled CDF at 0, 1, 3 is 1/4, 3/4, 1; a's 1/2, 1, 1; b's 0, 1/2, 1
    p, g = [0, 1, 1, 3], list("abab")
    r = prediction_ks_distance(p, sensitive_features=g)
    assert r.by_group == {"a": 0.25, "b": 0.25}
    # W1(a, b) = |1/2 - 0| * 1 + |1 - 1/2| * 2 = 1.5
    assert float(prediction_wasserstein(p, sensitive_features=g)) == 1.5


def test_madd_on_a_fixed_range_is_madd_of_the_mapped_predictions() -> None:
    y, p, g = data(seed=7)
    r = prediction_madd(p, sensitive_features=g, value_range=(0.0, 100.0), bandwidth=0.02)
    expected = madd(np.clip(p / 100.0, 0, 1), sensitive_features=g, bandwidth=0.02)
    assert float(r) == float(expected)
    assert r.detail["range_source"] == "option"
    assert r.detail["clipped"] == int(np.count_nonzero((p < 0) | (p > 100)))
    # the same range for two windows: the same bins, whatever each window's own min and max
    shifted = prediction_madd(np.r_[p, 1000.0], sensitive_features=np.append(g, "g0"),
                              value_range=(0.0, 100.0), bandwidth=0.02)
    assert shifted.detail["clipped"] == r.detail["clipped"] + 1


def test_undefined_with_a_single_group_and_small_groups_dropped() -> None:
    with pytest.warns(UndefinedMetricWarning, match="single group"):
        assert math.isnan(float(mae_difference([1, 2], [1, 3], sensitive_features=["a", "a"])))
    with pytest.warns(UndefinedMetricWarning, match="single group"):
        assert math.isnan(float(prediction_ks_distance([1, 2], sensitive_features=["a", "a"])))
    with pytest.warns(UndefinedMetricWarning, match="every group's error is 0"):
        assert math.isnan(float(mae_ratio([1, 2], [1, 2], sensitive_features=["a", "b"])))
    y, p, g = [0] * 5, [1, 1, 3, 3, 9], ["a", "a", "b", "b", "c"]
    with pytest.warns(GroupExclusionWarning, match="c"):
        assert float(mae_difference(y, p, sensitive_features=g, min_group_size=2)) == 2.0


def test_intervals_cover_and_chance_is_near_zero_for_fair_groups() -> None:
    rng = np.random.default_rng(0)
    g = rng.choice(["a", "b"], size=2000)
    y = rng.normal(size=2000)
    p = y + rng.normal(size=2000) + (g == "b") * 1.0  # b over-predicted by 1
    r = mean_residual_difference(y, p, sensitive_features=g, confidence_level=0.9,
                                 random_state=1)
    assert r.interval.lower < float(r) < r.interval.upper
    assert r.interval.lower > 0.8 and r.interval.upper < 1.2
    assert r.interval.chance < 0.1  # groups permuted: the gap a fair model shows here
    ks = prediction_ks_distance(p, sensitive_features=g, confidence_level=0.9, random_state=1)
    assert ks.interval.lower < float(ks) < ks.interval.upper
    assert ks.interval.chance < float(ks) / 4
    again = prediction_ks_distance(p, sensitive_features=g, confidence_level=0.9,
                                   random_state=1)
    assert again.interval == ks.interval  # reproducible with a seed


def test_the_interval_cells_read_the_values_the_rows_give() -> None:
    # the intervals read (group x quantile bin) cells: with at most MAX_BINS distinct
    # predictions they are the rows' CDFs exactly, above it within the bins' resolution
    from fairmonitor.metrics._regression import distribution as d
    from fairmonitor.metrics._regression._common import prepare

    for decimals, tol in ((0, 1e-12), (6, 5e-3)):
        y, p, g = data(n=6000, seed=8)
        p = np.round(p, decimals)
        s = d._Sorted(prepare(None, p, g, min_group_size=1, sample_weight=None))
        counts, mass, dx = d._cells(s)
        ks, w1, _ = d._cell_statistics(mass, dx, 1.0)
        assert ks == pytest.approx(float(prediction_ks_distance(p, sensitive_features=g)),
                                   abs=tol)
        assert w1 == pytest.approx(float(prediction_wasserstein(p, sensitive_features=g)),
                                   rel=tol)


@pytest.mark.parametrize(("bound", "loss"),
                         [(None, "mae"), (2.0, "rmse"), (None, "mean_residual")])
def test_the_error_draws_read_at_once_equal_each_draw_alone(bound: Any, loss: Any) -> None:
    # the interval evaluates every bootstrap draw in one array pass: each draw's six values
    # must be bit for bit what that draw's sums give alone (a group of zero weight included)
    from fairmonitor.metrics._regression import errors as e

    rng = np.random.default_rng(3)
    sums = rng.gamma(2.0, size=(50, 4, 4))
    sums[..., 3] -= 0.5 * sums[..., 0]  # signed residual sums
    sums[::7, 2] = 0.0  # a group without weight in some draws: its losses NaN
    at_once = e._statistics(e._losses(sums), bound, loss)
    alone = np.array([e._statistics(e._losses(s), bound, loss) for s in sums])
    np.testing.assert_array_equal(at_once, alone)
    # and each alone is the plain definition: max - min of the defined group losses
    for s, row in zip(sums, alone, strict=True):
        with np.errstate(invalid="ignore", divide="ignore"):
            mae = s[:, 1] / s[:, 0]
        defined = mae[np.isfinite(mae)]
        assert row[0] == pytest.approx(defined.max() - defined.min(), rel=1e-15)


