"""permutation_test: null floor, p-values under the null and under a shift, determinism."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from scipy import stats

from fairmonitor.exceptions import GroupExclusionWarning, InvalidInputError, UndefinedMetricWarning
from fairmonitor.metrics import (
    PermutationResult,
    abcc,
    abpc,
    demographic_parity_difference,
    permutation_test,
)


def shifted(seed, n=100, shift=0.0):
    rng = np.random.default_rng(seed)
    y = np.concatenate([rng.beta(2, 5, n), np.clip(rng.beta(2, 5, n) + shift, 0, 1)])
    return y, np.repeat(["a", "b"], n)


def null_run(seed, n=100, n_resamples=99):
    """The test on a sample where both groups come from one Beta(2, 5)."""
    y, s = shifted(seed, n)
    return permutation_test(abcc, y, sensitive_features=s, n_resamples=n_resamples,
                            random_state=seed)


@functools.cache
def null_p_values():
    return np.array([null_run(seed).p_value for seed in range(40)])


def test_p_values_under_the_null_are_roughly_uniform():
    # uniform on {0.01, ..., 1}: mean 0.505, sd of a mean of 40 is 0.046
    assert 0.36 < null_p_values().mean() < 0.65


def test_p_values_under_the_null_rarely_small():
    assert np.mean(null_p_values() <= 0.05) <= 0.15


def test_strong_shift_gives_the_smallest_p_value():
    y, s = shifted(1, shift=0.2)
    result = permutation_test(abcc, y, sensitive_features=s, n_resamples=199, random_state=1)
    assert result.p_value == 1 / 200


def test_abpc_strong_shift_is_detected():
    y, s = shifted(2, shift=0.2)
    assert permutation_test(abpc, y, sensitive_features=s, n_resamples=49,
                            random_state=2).p_value == 0.02


def test_null_mean_is_the_small_sample_floor():
    # two groups of 100 from one Beta(2, 5): E[ABCC] = 0.0265 (Monte Carlo, 2000 draws)
    means = [null_run(seed, n_resamples=200).null_mean for seed in range(8)]
    assert np.mean(means) == pytest.approx(0.0265, abs=0.003)


def test_null_floor_shrinks_with_group_size():
    small = null_run(3, n=100, n_resamples=100).null_mean
    large = null_run(3, n=2500, n_resamples=100).null_mean
    # ~ sqrt(1/n0 + 1/n1): 5 times smaller at 25 times the size
    assert large / small == pytest.approx(0.2, abs=0.05)


def test_same_seed_same_result():
    y, s = shifted(4)
    first = permutation_test(abcc, y, sensitive_features=s, n_resamples=50, random_state=7)
    second = permutation_test(abcc, y, sensitive_features=s, n_resamples=50, random_state=7)
    assert np.array_equal(first.null_distribution, second.null_distribution)


def test_different_seed_different_null():
    y, s = shifted(4)
    first = permutation_test(abcc, y, sensitive_features=s, n_resamples=50, random_state=7)
    other = permutation_test(abcc, y, sensitive_features=s, n_resamples=50, random_state=8)
    assert not np.array_equal(first.null_distribution, other.null_distribution)


def test_p_value_counts_ties_and_adds_one():
    # a metric blind to the labels: every shuffle ties with the observed value
    const = lambda y, *, sensitive_features: 0.3  # noqa: E731
    result = permutation_test(const, [0.1, 0.2, 0.3, 0.4], sensitive_features=[0, 0, 1, 1],
                              n_resamples=9, random_state=0)
    assert (result.p_value, result.null_mean, result.null_std) == (1.0, 0.3, 0.0)


def test_p_value_exact_enumeration():
    # 2 + 2 rows: 6 labellings, 2 of them give the observed ABCC of 0.5 -> P(null >= obs) = 1/3
    y, s = [0.1, 0.2, 0.6, 0.7], [0, 0, 1, 1]
    result = permutation_test(abcc, y, sensitive_features=s, n_resamples=1000, random_state=5)
    expected = (1 + result.n_resamples / 3) / (1 + result.n_resamples)
    assert result.p_value == pytest.approx(expected, abs=0.05)  # 3.4 sd of the estimate


def test_result_value_is_observed_and_frozen():
    y, s = shifted(5)
    result = permutation_test(abcc, y, sensitive_features=s, n_resamples=20, random_state=0)
    assert result.value == abcc(y, sensitive_features=s)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.observed = 0.0  # type: ignore[misc]


def test_metric_options_are_passed():
    y = np.concatenate([shifted(6)[0], np.random.default_rng(6).beta(5, 2, 100)])
    s = np.repeat(["a", "b", "c"], 100)
    result = permutation_test(abcc, y, sensitive_features=s, n_resamples=5, random_state=0,
                              agg="mean")
    assert result.observed == abcc(y, sensitive_features=s, agg="mean")


def test_registry_name_and_hard_predictions():
    rng = np.random.default_rng(7)
    y_pred = np.concatenate([rng.random(200) < 0.3, rng.random(200) < 0.6]).astype(int)
    s = np.repeat([0, 1], 200)
    result = permutation_test("demographic_parity_difference", y_pred, sensitive_features=s,
                              n_resamples=99, random_state=0)
    assert result.observed == demographic_parity_difference(None, y_pred, sensitive_features=s)
    assert result.p_value == 0.01


def test_higher_is_fairer_metric_tests_the_lower_side():
    rng = np.random.default_rng(8)
    y_pred = np.concatenate([rng.random(200) < 0.3, rng.random(200) < 0.6]).astype(int)
    result = permutation_test("demographic_parity_ratio", y_pred,
                              sensitive_features=np.repeat([0, 1],
                                                           200), n_resamples=99, random_state=0)
    assert result.p_value == 0.01


def test_metric_needing_labels_is_rejected():
    with pytest.raises(InvalidInputError, match="label-free"):
        permutation_test("equalized_odds_difference", [1, 0], sensitive_features=[0, 1])


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n_resamples": 0}, "n_resamples"),
    ({"alternative": "two-sided"}, "alternative"),
    ({"metric": "nope"}, "unknown metric"),
    ({"metric": 3}, "metric"),
])
def test_bad_arguments(kwargs, match):
    args = {"metric": abcc, **kwargs}
    metric = args.pop("metric")
    with pytest.raises(InvalidInputError, match=match):
        permutation_test(metric, [0.1, 0.9], sensitive_features=[0, 1], **args)


def test_undefined_observed_gives_nan_result():
    with pytest.warns(UndefinedMetricWarning, match="single group"):
        result = permutation_test(abcc, [0.1, 0.2], sensitive_features=[0, 0], random_state=0)
    assert np.isnan(result.p_value)


def test_min_group_size_applies_before_shuffling():
    y, s = shifted(9, shift=0.3)
    y, s = np.append(y, 0.99), np.append(s, "tiny")
    with pytest.warns(GroupExclusionWarning, match="tiny"):
        result = permutation_test(abcc, y, sensitive_features=s, n_resamples=30, random_state=0,
                                  min_group_size=2)
    assert result.observed == pytest.approx(stats.wasserstein_distance(y[s == "a"], y[s == "b"]),
                                            abs=1e-12)


def test_result_type():
    result = permutation_test(abcc, [0.1, 0.2, 0.8, 0.9], sensitive_features=[0, 0, 1, 1],
                              n_resamples=3, random_state=0)
    assert isinstance(result, PermutationResult)


def test_names_it_accepts_agree_with_the_registry():
    # the metrics package keeps its own table (it may not import the registry above it): it must
    # list exactly the registry's label-free one-array metrics, with the same function and side
    from fairmonitor import METRICS
    from fairmonitor.metrics._permutation import _label_free

    # (a classifier's: the regression metrics carry their own chance level, issue 29)
    expected = {s.name: (s.func, "greater" if s.direction == "lower_is_fairer" else "less")
                for s in METRICS.values()
                if s.inputs in (("y_score",), ("y_pred",)) and s.task == "binary"}
    assert _label_free() == expected
