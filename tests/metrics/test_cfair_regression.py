"""CFair's counterpart gap of a regressor's predictions, against a brute-force pairing."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from fairmonitor.exceptions import InvalidInputError, UndefinedMetricWarning
from fairmonitor.metrics import counterpart_prediction_gap


def duplicated(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Group b's rows are exact copies of group a's: each a-row's counterpart is its copy."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, 3))
    return np.vstack([base, base]), np.repeat(["a", "b"], n)


def test_mean_absolute_gap_equals_brute_force_over_the_copies() -> None:
    X, group = duplicated()
    # group a gets an offset whose sign changes with x0: the signed mean nearly cancels,
    # the mean absolute difference does not
    pred = 10 * X[:, 0] + 3.0 * np.sin(2 * X[:, 0]) * (group == "a")
    r = counterpart_prediction_gap(X, pred, sensitive_features=group, reference="b")
    n = len(group) // 2
    d = pred[:n] - pred[n:]  # brute force: row i of a against row i of b, its exact copy
    assert r.n_pairs == n
    assert r.value == pytest.approx(np.abs(d).mean(), rel=1e-12)
    assert r.signed == pytest.approx(d.mean(), rel=1e-12)
    assert abs(r.signed) < r.value / 2
    lo, hi = pred.min(), pred.max()  # no value_range: the window's own range
    assert r.value_range == (lo, hi) and r.range_source == "window"
    assert r.scaled == pytest.approx(np.abs(d).mean() / (hi - lo), rel=1e-12)


def test_hand_derived_constant_offset_and_a_configured_range() -> None:
    X, group = duplicated(60)
    pred = X[:, 0] + 2.5 * (group == "a")  # every pair differs by exactly 2.5
    r = counterpart_prediction_gap(X, pred, sensitive_features=group, reference="b",
                                   value_range=(0, 10))
    assert (r.value, r.signed, r.scaled) == pytest.approx((2.5, 2.5, 0.25), rel=1e-12)
    assert r.range_source == "option" and (r.group, r.reference) == ("a", "b")
    same = counterpart_prediction_gap(X, X[:, 0], sensitive_features=group)
    assert same.value == 0.0 and same.scaled == 0.0  # a group-blind model on look-alikes


def test_the_worst_comparison_of_three_groups() -> None:
    X, _ = duplicated(80)
    X = np.vstack([X, X[:80]])
    group = np.repeat(["a", "b", "c"], 80)
    pred = X[:, 0] + 1.0 * (group == "a") + 4.0 * (group == "c")
    r = counterpart_prediction_gap(X, pred, sensitive_features=group, reference="b")
    assert r.by_comparison == pytest.approx({("a", "b"): 1.0, ("c", "b"): 4.0})
    assert (r.value, r.group) == (pytest.approx(4.0), "c")


def test_undefined_and_invalid() -> None:
    X, group = duplicated(10)  # 10 pairs < min_pairs=30
    with pytest.warns(UndefinedMetricWarning):
        r = counterpart_prediction_gap(X, X[:, 0], sensitive_features=group)
    assert math.isnan(r.value) and math.isnan(r.scaled)
    with pytest.raises(InvalidInputError, match="value_range"):
        counterpart_prediction_gap(X, X[:, 0], sensitive_features=group, value_range=(3, 3))
    with warnings.catch_warnings(), pytest.raises(InvalidInputError):
        warnings.simplefilter("ignore")
        counterpart_prediction_gap(X, np.r_[X[:, 0], np.nan][1:] * np.nan,
                                   sensitive_features=group)
