"""Confidence intervals and chance levels of between-group gaps (issue 16).

Hand-derived cases (a settled gap is a Wald interval; a gap at parity is the folded one), the
undefined cases, and coverage: on simulated windows with a known population value the 95%
interval must cover it in 93-97% of 500 replications, at parity and for a real gap, with 2
and 5 groups, small and large windows. (The full table, with more replications and the score
metrics at 5 groups, is printed by ``benchmarks/bench_intervals.py``.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fairmonitor.exceptions import InvalidInputError
from fairmonitor.metrics import abcc, abpc, madd
from fairmonitor.metrics._abpc_abcc.kde import density_from_binned
from fairmonitor.metrics._intervals import (
    ScoreBootstrap,
    fine_histogram,
    fine_histogram_sorted,
    rate_gap_interval,
    score_gap_interval,
    wald_interval,
)

Z95 = stats.norm.ppf(0.975)


def _ac_se(x: float, n: float) -> float:
    p = (x + 1) / (n + 2)
    return math.sqrt(p * (1 - p) / (n + 2))


def test_settled_gap_is_the_wald_interval_with_agresti_caffo_variances():
    x, n = np.array([3000, 2000]), np.array([10000, 10000])
    se = math.hypot(_ac_se(3000, 10000), _ac_se(2000, 10000))
    r = rate_gap_interval(x, n)
    assert r.lower == pytest.approx(0.1 - Z95 * se, abs=0.05 * Z95 * se)
    assert r.upper == pytest.approx(0.1 + Z95 * se, abs=0.05 * Z95 * se)
    assert r.method == "difference" and r.reason is None


def test_gap_at_parity_is_the_folded_interval_and_its_chance_level_the_folded_mean():
    # two equal rates: the estimate is |N(0, se^2)|, whose mean is se * sqrt(2 / pi)
    x, n = np.array([500, 500]), np.array([1000, 1000])
    se = math.hypot(_ac_se(500, 1000), _ac_se(500, 1000))
    r = rate_gap_interval(x, n)
    assert r.lower == 0.0
    assert r.upper == pytest.approx(Z95 * se, rel=0.05)
    null_se = math.sqrt(2 * 0.25 / 1000)
    assert r.chance == pytest.approx(null_se * math.sqrt(2 / math.pi), rel=0.05)


def test_ratio_interval_is_the_exponentiated_log_gap_interval():
    x, n = np.array([400, 200]), np.array([1000, 1000])
    r = rate_gap_interval(x, n, ratio=True)
    d = math.log(0.4) - math.log(0.2)
    se = math.sqrt(sum((1 - (xi + 1) / (ni + 2)) / ((ni + 2) * (xi + 1) / (ni + 2))
                       for xi, ni in zip(x, n, strict=True)))
    assert r.lower == pytest.approx(math.exp(-(d + Z95 * se)), rel=0.02)
    assert r.upper == pytest.approx(math.exp(-(d - Z95 * se)), rel=0.02)
    assert r.lower < 0.5 < r.upper


def test_equalized_odds_families_take_the_larger_gap():
    # TPR gap 0.2 (settled), FPR gap 0: the interval is the TPR gap's
    tp, pos = np.array([700, 500]), np.array([1000, 1000])
    fp, neg = np.array([100, 100]), np.array([1000, 1000])
    both = rate_gap_interval(np.stack([tp, fp]), np.stack([pos, neg]))
    tpr = rate_gap_interval(tp, pos)
    assert both.lower == pytest.approx(tpr.lower, abs=0.01)
    assert both.upper == pytest.approx(tpr.upper, abs=0.01)


def test_undefined_interval_is_nan_with_a_reason_never_zero_width():
    r = rate_gap_interval([3], [10])
    assert math.isnan(r.lower) and math.isnan(r.upper) and "two groups" in r.reason
    # a rate of 0 in both groups still has a positive-width interval (Agresti-Caffo)
    r = rate_gap_interval([0, 0], [20, 20])
    assert r.lower == 0.0 and r.upper > 0.05
    w = wald_interval(0.3, 0.0)
    assert math.isnan(w.lower) and "standard error is 0" in w.reason
    s = score_gap_interval(np.ones((1, 8)), "abcc", value=0.1)
    assert math.isnan(s.lower) and "two groups" in s.reason
    s = score_gap_interval(np.ones((2, 8)), "abcc", value=float("nan"))
    assert math.isnan(s.upper) and "undefined" in s.reason


def test_level_is_checked():
    with pytest.raises(InvalidInputError, match="level"):
        rate_gap_interval([1, 2], [10, 10], level=95)


def test_bounds_are_stable_from_one_evaluation_to_the_next():
    a = rate_gap_interval([30, 20], [100, 100])
    b = rate_gap_interval([30, 20], [100, 100])
    assert (a.lower, a.upper, a.chance) == (b.lower, b.upper, b.chance)


def test_score_bootstrap_is_shared_and_deterministic():
    rng = np.random.default_rng(0)
    hist = np.stack([fine_histogram(rng.beta(2, 5, 300)), fine_histogram(rng.beta(3, 4, 300))])
    boot = ScoreBootstrap(hist)
    one = score_gap_interval(boot, "abcc", value=0.14)
    two = score_gap_interval(hist, "abcc", value=0.14)
    assert (one.lower, one.upper) == (two.lower, two.upper)
    assert 0.0 < one.lower < 0.14 < one.upper


# ---------------------------------------------------------------- coverage (500 replications)


def _rate_coverage(p, n, *, ratio=False, reps=2000, seed=0):
    p, n = np.asarray(p, dtype=float), np.asarray(n)
    truth = p.min() / p.max() if ratio else p.max() - p.min()
    rng = np.random.default_rng(seed)
    hits = 0
    for rep in range(reps):
        r = rate_gap_interval(rng.binomial(n, p), n, ratio=ratio, rng=rep, n_draws=1000)
        hits += r.lower <= truth <= r.upper
    return hits / reps


RATE_CASES = {
    "fair, 2 groups, small": ([0.3, 0.3], [60, 60]),
    "fair, 2 groups, large": ([0.3, 0.3], [5000, 5000]),
    "fair, 5 groups, small": ([0.3] * 5, [60] * 5),
    "fair, 5 groups, large": ([0.3] * 5, [3000] * 5),
    "unfair, 2 groups, small": ([0.2, 0.5], [120, 120]),
    "unfair, 2 groups, large": ([0.3, 0.4], [2000, 2000]),
    "unfair, 5 groups, large": ([0.2, 0.25, 0.3, 0.35, 0.45], [2000] * 5),
}


@pytest.mark.parametrize("ratio", [False, True], ids=["difference", "ratio"])
@pytest.mark.parametrize("case", list(RATE_CASES))
def test_rate_gap_interval_covers_at_the_nominal_rate(case, ratio):
    p, n = RATE_CASES[case]
    assert 0.93 <= _rate_coverage(p, n, ratio=ratio) <= 0.97


_EDGES = np.linspace(0.0, 1.0, (1 << 14) + 1)


def _true_scores(dists, kind, m=20, h=0.05):
    cdf = [d.cdf(_EDGES) for d in dists]
    if kind == "abcc":
        curves, w = cdf, 1 / (_EDGES.size - 1)
    elif kind == "madd":
        curves, w = [np.diff(d.cdf(np.linspace(0, 1, m + 1))) for d in dists], 1.0
    else:
        curves = [density_from_binned(np.diff(c) * 1e6, h, 10 ** 6) for c in cdf]
        w = 1 / (_EDGES.size - 1)
    k = len(curves)
    return max(np.abs(curves[i] - curves[j]).sum() * w for i in range(k) for j in range(i + 1, k))


def _score_coverage(dists, n, kind, reps=500, seed=0, m=20, h=0.05):
    truth = _true_scores(dists, kind, m, h)
    rng = np.random.default_rng(seed)
    k = len(dists)
    groups = np.repeat(np.arange(k), n)
    hits = 0
    for rep in range(reps):
        parts = [d.rvs(size=n, random_state=rng) for d in dists]
        scores = np.concatenate(parts)
        hist = np.stack([fine_histogram(s) for s in parts])
        if kind == "abcc":
            r = score_gap_interval(hist, "abcc", value=abcc(scores, sensitive_features=groups),
                                   rng=rep)
        elif kind == "madd":
            value = madd(scores, sensitive_features=groups, n_bins=m).value
            bins = {(i, j): m for i in range(k) for j in range(i + 1, k)}
            r = score_gap_interval(hist, "madd", value=value, pair_bins=bins, rng=rep)
        else:
            value = abpc(scores, sensitive_features=groups, bandwidth=h)
            r = score_gap_interval(hist, "abpc", value=value, bandwidths=[h] * k, rng=rep)
        hits += r.lower <= truth <= r.upper
    return hits / reps


SCORE_CASES = {
    "fair, small": ([stats.beta(2, 5)] * 2, 200),
    "unfair, large": ([stats.beta(2, 5), stats.beta(3, 4)], 2000),
}


@pytest.mark.parametrize("kind", ["abcc", "madd", "abpc"])
@pytest.mark.parametrize("case", list(SCORE_CASES))
def test_score_gap_interval_covers_at_the_nominal_rate(case, kind):
    dists, n = SCORE_CASES[case]
    assert 0.93 <= _score_coverage(dists, n, kind) <= 0.97


@pytest.mark.parametrize("kind", ["madd", "abpc"])
def test_score_gap_interval_errs_on_the_wide_side_between_parity_and_a_settled_gap(kind):
    # a real gap on a small window: many bins differ by less than KAPPA standard errors, and
    # the directional derivative folds them (|h|): conservative by design (documented), never
    # below the nominal rate
    dists = [stats.beta(2, 5), stats.beta(3, 4)]
    assert _score_coverage(dists, 300, kind, reps=300) >= 0.95


@pytest.mark.parametrize("resolution", [512, 4, 1024, 500])
def test_fine_histogram_of_sorted_scores_equals_binning_every_row(resolution):
    # the summary's raw scores are sorted: a binary search per bin replaces a pass over rows
    rng = np.random.default_rng(11)
    edges = np.arange(resolution + 1) / resolution  # scores exactly on bin edges, 0 and 1
    for scores in (np.sort(rng.random(10_007)), np.sort(np.r_[edges, edges, rng.beta(2, 5, 999)]),
                   np.array([1.0]), np.array([0.0, 0.0]), np.zeros(0)):
        assert np.array_equal(fine_histogram_sorted(scores, resolution),
                              fine_histogram(scores, resolution))
