"""Parity metrics: hand-derived cases and fairlearn 0.15 as an oracle."""

from __future__ import annotations

import numpy as np
import pytest
from fairlearn import metrics as flm

from fairmonitor.exceptions import (
    GroupExclusionWarning,
    InvalidInputError,
    UndefinedMetricWarning,
)
from fairmonitor.metrics import (
    demographic_parity_difference,
    demographic_parity_ratio,
    equal_opportunity_difference,
    equalized_odds_difference,
    group_rates,
)


def test_dp_difference_hand_derived():
    # group a selects 2/3, group b selects 1/3
    y_pred = [1, 1, 0, 1, 0, 0]
    sf = list("aaabbb")
    assert demographic_parity_difference(None, y_pred,
                                         sensitive_features=sf) == pytest.approx(1 / 3)
    assert demographic_parity_ratio(None, y_pred, sensitive_features=sf) == pytest.approx(0.5)


def test_dp_three_groups_uses_max_minus_min():
    y_pred = [1, 1, 1, 0, 0, 0, 1, 0, 0, 0]
    sf = ["a", "a", "b", "b", "c", "c", "c", "c", "c", "c"]
    # rates: a 1.0, b 0.5, c 1/6
    assert demographic_parity_difference(None, y_pred,
                                         sensitive_features=sf) == pytest.approx(1 - 1 / 6)
    assert demographic_parity_ratio(None, y_pred, sensitive_features=sf) == pytest.approx(1 / 6)


def test_equalized_odds_hand_derived():
    y_true = [1, 1, 0, 0, 1, 1, 0, 0]
    y_pred = [1, 1, 1, 0, 1, 0, 0, 0]
    sf = list("aaaabbbb")
    # a: TPR 1, FPR 0.5 ; b: TPR 0.5, FPR 0
    eod = equal_opportunity_difference(y_true, y_pred, sensitive_features=sf)
    assert eod == pytest.approx(0.5)
    assert equalized_odds_difference(y_true, y_pred, sensitive_features=sf) == pytest.approx(0.5)


def test_group_rates_table():
    r = group_rates([1, 0, 1, 0, 1, 1], [1, 0, 0, 0, 1, 1], sensitive_features=list("aabbcc"))
    assert r.labels == ("a", "b", "c")
    assert r.counts.tolist() == [2, 2, 2]
    assert r.selection_rate.tolist() == [0.5, 0.0, 1.0]
    assert r.true_positive_rate.tolist() == [1.0, 0.0, 1.0]
    assert np.isnan(r.false_positive_rate[2])  # group c has no negatives


def _random_case(rng, n, n_groups, intersectional):
    y_true = rng.integers(0, 2, n)
    y_pred = np.where(rng.random(n) < 0.7, y_true, 1 - y_true)
    if intersectional:
        sf = {"a": rng.choice(["x", "y"], n), "b": rng.integers(0, max(2, n_groups // 2), n)}
    else:
        sf = rng.choice([f"g{k}" for k in range(n_groups)], n)
    return y_true, y_pred, sf


@pytest.mark.parametrize("n_groups", [2, 3, 5, 8])
@pytest.mark.parametrize("intersectional", [False, True])
def test_parity_equals_fairlearn(rng, n_groups, intersectional):
    y_true, y_pred, sf = _random_case(rng, 4000, n_groups, intersectional)
    fl_sf = sf if not intersectional else np.column_stack([sf["a"], sf["b"].astype(str)])
    assert demographic_parity_difference(None, y_pred, sensitive_features=sf) == pytest.approx(
        flm.demographic_parity_difference(y_true, y_pred, sensitive_features=fl_sf), abs=1e-12)
    assert demographic_parity_ratio(None, y_pred, sensitive_features=sf) == pytest.approx(
        flm.demographic_parity_ratio(y_true, y_pred, sensitive_features=fl_sf), abs=1e-12)
    assert equalized_odds_difference(y_true, y_pred, sensitive_features=sf) == pytest.approx(
        flm.equalized_odds_difference(y_true, y_pred, sensitive_features=fl_sf), abs=1e-12)
    assert equal_opportunity_difference(y_true, y_pred, sensitive_features=sf) == pytest.approx(
        flm.equal_opportunity_difference(y_true, y_pred, sensitive_features=fl_sf), abs=1e-12)


def test_dp_ratio_all_zero_is_nan_with_reason():
    with pytest.warns(UndefinedMetricWarning, match="every group has selection rate 0"):
        value = demographic_parity_ratio(None, [0, 0, 0, 0], sensitive_features=list("aabb"))
    assert np.isnan(value)


def test_single_group_is_nan_with_reason():
    with pytest.warns(UndefinedMetricWarning, match="single group"):
        value = demographic_parity_difference(None, [0, 1, 1], sensitive_features=["a", "a", "a"])
    assert np.isnan(value)


def test_group_without_positives_is_left_out_not_scored_zero():
    # group c has no positives: its TPR is undefined; fairlearn would score it 0
    y_true = [1, 1, 0, 1, 1, 0, 0, 0]
    y_pred = [1, 0, 0, 1, 1, 0, 1, 0]
    sf = list("aaabbbcc")
    with pytest.warns(GroupExclusionWarning, match=r"left out group\(s\) 'c'"):
        value = equal_opportunity_difference(y_true, y_pred, sensitive_features=sf)
    assert value == pytest.approx(0.5)  # a: 1/2, b: 2/2


def test_min_group_size_drops_small_groups():
    y_pred = [1, 1, 0, 0, 1]
    sf = ["a", "a", "b", "b", "c"]
    with pytest.warns(GroupExclusionWarning, match=r"'c' \(1 rows\)"):
        value = demographic_parity_difference(None, y_pred, sensitive_features=sf,
                                              min_group_size=2)
    assert value == pytest.approx(1.0)


def test_too_few_groups_after_min_group_size():
    with pytest.warns(GroupExclusionWarning), pytest.warns(UndefinedMetricWarning,
                                                           match="min_group_size"):
        value = demographic_parity_difference(None, [1, 0, 1], sensitive_features=list("aab"),
                                              min_group_size=2)
    assert np.isnan(value)


def test_scores_are_rejected_as_predictions():
    with pytest.raises(InvalidInputError, match="threshold them first"):
        demographic_parity_difference(None, [0.2, 0.9], sensitive_features=["a", "b"])


def test_length_mismatch_names_both_arguments():
    with pytest.raises(InvalidInputError, match="`y_true` has 3 rows but `y_pred` has 2"):
        equalized_odds_difference([1, 0, 1], [1, 0], sensitive_features=["a", "b"])
