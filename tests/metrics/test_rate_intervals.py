"""Score-type intervals of rate gaps and ratios (issue 25, items 2 and 6).

The oracles are written here from the papers' formulas, independently of the module: Wilson's
score interval, Newcombe's hybrid score interval (1998, method 10) of a difference and the
MOVER-R interval (Donner & Zou 2012) of a ratio. The full coverage table is printed by
``benchmarks/bench_coverage.py``; the simulations here are its smoke test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.optimize import brentq

from fairmonitor.metrics import _rate_intervals as ri
from fairmonitor.metrics._rate_intervals import folded_far, rate_gap_interval, wilson_interval

Z95 = float(stats.norm.ppf(0.975))
#: the two orders of one pair share 2.5%: each at 1.25% (the lower bound of |p1 - p2|)
Z_PARITY = float(stats.norm.ppf(1 - 0.0125))


def wilson(x: int, n: int, z: float, modified: bool = True) -> tuple[float, float]:
    """Wilson (1927); ``modified``: Clopper-Pearson's bound where further out at rare counts
    (Brown, Cai & DasGupta 2001: x = 1, 2, 3 above 50 trials; and up to 10 at a rate <= 0.1),
    and at as many failures."""
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo, hi = (0.0 if x == 0 else centre - half), (1.0 if x == n else centre + half)
    if modified:
        tail, top = stats.norm.sf(z), (2 if n <= 50 else 3)

        def rare(k: int) -> bool:
            return 1 <= k <= top or (1 <= k <= 10 and k <= 0.1 * n)

        if rare(x):
            lo = min(lo, stats.beta.ppf(tail, x, n - x + 1))
        if rare(n - x):
            hi = max(hi, stats.beta.isf(tail, x + 1, n - x))
    return max(lo, 0.0), min(hi, 1.0)


def newcombe(x1: int, n1: int, x2: int, n2: int, z: float, modified: bool = True
             ) -> tuple[float, float]:
    """Newcombe (1998), method 10, for p1 - p2."""
    p1, p2 = x1 / n1, x2 / n2
    (l1, u1), (l2, u2) = wilson(x1, n1, z, modified), wilson(x2, n2, z, modified)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), \
        d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def mover_r(x1: int, n1: int, x2: int, n2: int, z: float) -> tuple[float, float]:
    """Donner & Zou (2012), the ratio p1 / p2 from Wilson intervals (as printed there)."""
    p1, p2 = x1 / n1, x2 / n2
    (l1, u1), (l2, u2) = wilson(x1, n1, z), wilson(x2, n2, z)
    lower = (p1 * p2 - math.sqrt((p1 * p2) ** 2 - l1 * u2 * (2 * p1 - l1) * (2 * p2 - u2))) \
        / (u2 * (2 * p2 - u2))
    upper = (p1 * p2 + math.sqrt((p1 * p2) ** 2 - u1 * l2 * (2 * p1 - u1) * (2 * p2 - l2))) \
        / (l2 * (2 * p2 - l2))
    return lower, upper


def folded_z(x: float, tail: float = 0.025, floor: float = 0.5) -> float:
    """The folded test's critical value away from parity at ``x`` SEs, from scipy's folded
    normal: ``t = x + z`` with ``P_t(|X| <= x) = tail``, ``|X| ~ foldnorm(t)`` (at least
    ``floor``; the floor where no ``t >= x`` solves it)."""
    def excess(z: float) -> float:
        return stats.foldnorm.cdf(x, x + z) - tail

    return max(brentq(excess, 0.0, 10.0, xtol=1e-12) if excess(0.0) > 0 else 0.0, floor)


def distance(x1: int, n1: int, x2: int, n2: int) -> float:
    """Two groups' distance from parity in SEs, as the score statistic: the z at which
    Newcombe's lower bound of |p1 - p2| reaches -0.5 / min(n) (the continuity correction)."""
    if x1 / n1 < x2 / n2:
        x1, n1, x2, n2 = x2, n2, x1, n1
    step = 0.5 / min(n1, n2)

    def lower(z: float) -> float:
        return newcombe(x1, n1, x2, n2, z)[0] + step

    if lower(1e-9) <= 0:
        return 0.0
    return brentq(lower, 1e-9, 8.0, xtol=1e-12) if lower(8.0) < 0 else 8.0


def folded_upper(x1: int, n1: int, x2: int, n2: int) -> float:
    """The upper bound of |p1 - p2|: the larger of the two orders' Newcombe upper bounds at
    the folded critical value."""
    lo, hi = newcombe(x1, n1, x2, n2, folded_z(distance(x1, n1, x2, n2)))
    return min(max(hi, -lo, abs(x1 / n1 - x2 / n2)), 1.0)


# ------------------------------------------------------------------ the reported cases


def test_equal_opportunity_from_5_of_7_vs_0_of_5_positives_is_newcombes_interval():
    # issue 25: EOpp 0.714, the old interval's lower bound was 0.344 (centred on the raw 0/5)
    r = rate_gap_interval([5, 0], [7, 5])
    # the lower bound is Newcombe's from Wilson's own formula (5 of 7 and 0 of 5 are not
    # rare counts at that end)
    assert r.lower == pytest.approx(newcombe(5, 7, 0, 5, Z95, modified=False)[0], rel=1e-9)
    assert round(r.lower, 3) == 0.153
    # the upper bound reads 5 of 7's upper bound, where 2 failures take Clopper-Pearson's
    assert r.upper == pytest.approx(newcombe(5, 7, 0, 5, Z95)[1], rel=1e-9)
    assert r.lower < 5 / 7 < r.upper


def test_a_dp_ratio_of_zero_is_inside_its_interval():
    # issue 25: ratio 0.0 got [0.0048, 1.0]
    r = rate_gap_interval([0, 12], [40, 40], ratio=True)
    assert r.lower == 0.0 and r.upper == pytest.approx(mover_r(0, 40, 12, 40, Z95)[1])
    # an intersection group among others: 0 and its two pairs' bound, jointly
    r = rate_gap_interval([0, 120, 95], [40, 400, 380], ratio=True)
    assert r.lower == 0.0 < mover_r(0, 40, 120, 400, Z95)[1] < r.upper < 1.0


@pytest.mark.parametrize("x1, n1, x2, n2", [(300, 1000, 200, 1000), (30, 100, 10, 100),
                                           (9, 12, 2, 15), (4000, 9000, 380, 1000)])
def test_a_settled_two_group_gap_is_newcombes_interval(x1, n1, x2, n2):
    r = rate_gap_interval([x1, x2], [n1, n2])
    lo, hi = newcombe(x1, n1, x2, n2, Z95)
    assert (r.lower, r.upper) == pytest.approx((lo, hi), rel=1e-9)


@pytest.mark.parametrize("x1, n1, x2, n2", [(400, 1000, 200, 1000), (30, 60, 12, 60),
                                           (45, 90, 8, 70)])
def test_a_settled_two_group_ratio_is_the_mover_r_interval(x1, n1, x2, n2):
    r = rate_gap_interval([x2, x1], [n2, n1], ratio=True)
    lo, hi = mover_r(x2, n2, x1, n1, Z95)
    assert (r.lower, r.upper) == pytest.approx((lo, hi), rel=1e-9)


@pytest.mark.parametrize("x1, n1, x2, n2", [(50, 100, 50, 100), (3, 40, 4, 40),
                                           (510, 1000, 490, 1000), (0, 30, 1, 30),
                                           (300, 1000, 200, 1000)])
def test_two_groups_match_newcombes_width_within_ten_percent(x1, n1, x2, n2):
    r = rate_gap_interval([x1, x2], [n1, n2])
    lo, hi = newcombe(x1, n1, x2, n2, Z95)
    folded = (max(lo, -hi, 0.0), max(hi, -lo))  # Newcombe's interval of |p1 - p2|
    if (x1, n1) == (x2, n2):
        # a tie (issue 25 item 6, deliberately): the folded test's upper bound, 0.085 where
        # Newcombe's folded interval reads 0.136 (which cannot miss a true gap below 1.96 SE)
        assert r.upper == pytest.approx(folded_upper(x1, n1, x2, n2), rel=1e-6)
        assert r.upper - r.lower < folded[1] - folded[0]
        return
    assert r.upper - r.lower == pytest.approx(folded[1] - folded[0], rel=0.10)


def test_the_lower_bound_excludes_parity_as_a_one_sided_975_test():
    # the lower bound of |p1 - p2| is > 0 exactly when Newcombe's interval at z_{1 - 0.0125}
    # excludes 0 (so at parity in 2 x 1.25% of windows); it is then Newcombe's 95% bound.
    # The upper bound is the folded test's (Newcombe's 95% bound once 2+ SEs from parity)
    for x1, x2 in [(50, 37), (50, 36), (50, 35), (50, 34), (50, 33), (50, 48)]:
        r = rate_gap_interval([x1, x2], [100, 100])
        assert (r.lower > 0) == (newcombe(x1, 100, x2, 100, Z_PARITY)[0] > 0)
        lo, hi = newcombe(x1, 100, x2, 100, Z95)
        assert r.lower == (pytest.approx(lo, rel=1e-9) if r.lower > 0 else 0.0)
        assert r.upper == pytest.approx(folded_upper(x1, 100, x2, 100), rel=1e-6)
        assert r.upper <= hi + 1e-12


def test_zero_rates_give_a_positive_width_interval_and_the_ratio_of_zeros_is_undefined():
    r = rate_gap_interval([0, 0], [20, 20])
    assert r.lower == 0.0 and r.upper == pytest.approx(folded_upper(0, 20, 0, 20), rel=1e-6)
    assert 0.1 < r.upper <= newcombe(0, 20, 0, 20, Z95)[1]
    q = rate_gap_interval([0, 0], [20, 20], ratio=True)
    assert math.isnan(q.lower) and "0/0" in q.reason


def test_chance_level_is_the_mean_gap_of_a_fair_model_at_these_sizes():
    # E|p1 - p2| under a common rate, by enumeration of the two binomials
    n, p = 25, 0.1
    pmf = stats.binom.pmf(np.arange(n + 1), n, p)
    diff = np.abs(np.subtract.outer(np.arange(n + 1), np.arange(n + 1))) / n
    exact = float((np.outer(pmf, pmf) * diff).sum())
    r = rate_gap_interval([2, 3], [n, n])  # pooled rate 0.1
    assert r.chance == pytest.approx(exact, rel=0.05)


def test_equalized_odds_takes_the_larger_family():
    tp, pos = np.array([700, 500]), np.array([1000, 1000])
    fp, neg = np.array([100, 100]), np.array([1000, 1000])
    both = rate_gap_interval(np.stack([tp, fp]), np.stack([pos, neg]))
    lo, hi = newcombe(700, 1000, 500, 1000, Z95)
    assert both.lower == pytest.approx(lo, rel=1e-9)
    assert both.upper == pytest.approx(hi, rel=1e-9)


def test_effective_trials_widen_the_interval_as_kish_says():
    # equal weights of 2: the same rates, half the information
    plain = rate_gap_interval([30, 10], [100, 100])
    weighted = rate_gap_interval([60, 20], [200, 200], effective_trials=[100, 100])
    assert (weighted.lower, weighted.upper) == pytest.approx((plain.lower, plain.upper))


# -------------------------------------------------------------------- properties


counts = st.lists(st.tuples(st.integers(0, 60), st.integers(1, 60)), min_size=2, max_size=6)


@settings(max_examples=150, deadline=None)
@given(counts, st.booleans(), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_the_interval_holds_the_value_and_stays_in_range(groups, ratio, level):
    x = np.array([min(a, b) for a, b in groups], dtype=float)
    n = np.array([b for _, b in groups], dtype=float)
    p = x / n
    r = rate_gap_interval(x, n, ratio=ratio, level=level)
    if ratio and p.max() == 0:
        assert math.isnan(r.lower) and r.reason
        return
    value = p.min() / p.max() if ratio else p.max() - p.min()
    assert 0.0 <= r.lower <= value <= r.upper <= 1.0
    assert 0.0 <= r.chance <= 1.0


@settings(max_examples=60, deadline=None)
@given(counts, counts)
def test_equalized_odds_interval_holds_the_value(tpr, fpr):
    k = min(len(tpr), len(fpr))
    x = np.array([[min(a, b) for a, b in fam[:k]] for fam in (tpr, fpr)], dtype=float)
    n = np.array([[b for _, b in fam[:k]] for fam in (tpr, fpr)], dtype=float)
    r = rate_gap_interval(x, n)
    value = float(np.max(np.ptp(x / n, axis=1)))
    assert 0.0 <= r.lower <= value <= r.upper <= 1.0


pair = st.tuples(st.integers(0, 80), st.integers(1, 80))


@settings(max_examples=100, deadline=None)
@given(pair, pair)
def test_two_groups_keep_the_lower_bound_and_narrow_only_the_upper(a, b):
    # the lower bound is Newcombe's 95% one once Newcombe's at z_{1 - 0.0125} excludes 0,
    # else 0 (as before: the parity test is unchanged); the upper bound is the folded test's,
    # never above the folded Newcombe bound and never below the value
    (x1, n1), (x2, n2) = (min(a), a[1]), (min(b), b[1])
    r = rate_gap_interval([x1, x2], [n1, n2])
    lo, hi = newcombe(x1, n1, x2, n2, Z95)
    plo, phi = newcombe(x1, n1, x2, n2, Z_PARITY)
    settled = plo > 0 or phi < 0
    assert r.lower == (pytest.approx(max(lo, -hi), rel=1e-9, abs=1e-12) if settled else 0.0)
    value = abs(x1 / n1 - x2 / n2)
    assert value <= r.upper <= min(max(hi, -lo), 1.0) + 1e-12


@settings(max_examples=80, deadline=None)
@given(st.lists(pair, min_size=3, max_size=6), st.booleans())
def test_many_groups_move_only_a_bound_that_already_excludes_parity(groups, ratio):
    # the settled critical value (pairs surely below the extreme no longer count in full)
    # applies only where the joint one already excludes parity: the same windows exclude it,
    # the bound away from parity is unchanged, and the bound towards parity only tightens
    x = np.array([min(a, b) for a, b in groups], dtype=float)
    n = np.array([b for _, b in groups], dtype=float)
    if ratio and x.max() == 0:
        return
    new = rate_gap_interval(x, n, ratio=ratio, chance=False)
    original = ri._apart
    try:
        ri._apart = lambda *args: None  # the joint critical value throughout, as before
        old = rate_gap_interval(x, n, ratio=ratio, chance=False)
    finally:
        ri._apart = original
    if ratio:
        assert new.lower == old.lower and (new.upper < 1.0) == (old.upper < 1.0)
        assert new.upper <= old.upper
    else:
        assert new.upper == old.upper and (new.lower > 0.0) == (old.lower > 0.0)
        assert new.lower >= old.lower


# --------------------------------------------------- coverage (the benchmark's smoke test)


def _coverage(p, n, *, ratio=False, reps=1000, seed=0):
    p, n = np.asarray(p, dtype=float), np.asarray(n)
    truth = p.min() / p.max() if ratio else p.max() - p.min()
    x = np.random.default_rng(seed).binomial(n, p, size=(reps, p.size))
    hits = zero_out = 0
    for row in x:
        r = rate_gap_interval(row, n, ratio=ratio, chance=False)  # the default draws
        hits += r.lower <= truth <= r.upper
        zero_out += (r.lower > 0) if not ratio else (r.upper < 1)
    return hits / reps, zero_out / reps


@pytest.mark.parametrize("ratio", [False, True], ids=["difference", "ratio"])
@pytest.mark.parametrize("p, n", [([0.3, 0.3], [60, 60]), ([0.3] * 5, [200] * 5),
                                  ([0.02, 0.02], [1000, 1000])], ids=["2x60", "5x200", "rare"])
def test_at_parity_zero_is_excluded_in_at_most_2_5_percent(p, n, ratio):
    coverage, excluded = _coverage(p, n, ratio=ratio)
    assert excluded <= 0.025 + 2 * math.sqrt(0.025 * 0.975 / 1000)  # binomial error of 1,000
    assert coverage == 1 - excluded


@pytest.mark.parametrize("ratio", [False, True], ids=["difference", "ratio"])
@pytest.mark.parametrize("p, n", [([0.2, 0.5], [120, 120]), ([0.3, 0.4], [2000, 2000]),
                                  ([0.2, 0.25, 0.3, 0.35, 0.45], [2000] * 5),
                                  ([0.02, 0.08], [300, 300])])
def test_a_real_gap_is_covered_at_the_nominal_rate(p, n, ratio):
    coverage, _ = _coverage(p, n, ratio=ratio)
    assert 0.93 <= coverage <= 0.975


@pytest.mark.parametrize("ratio", [False, True], ids=["difference", "ratio"])
def test_a_small_gap_among_five_groups_is_covered_below_97_5_percent(ratio):
    # issue 25 item 6: one group 0.1 (2.1 SE) above four alike was covered in 99.45% of these
    # 2,000 windows (ratio 99.5%): the bound towards parity kept the joint critical value of
    # all 20 ordered pairs, which holds parity at 2.5%, once the extreme was settled too.
    # The 97.5% cap is read as the benchmark reads it, with 1.96 binomial SEs (98.2%)
    coverage, _ = _coverage([0.4, 0.3, 0.3, 0.3, 0.3], [200] * 5, ratio=ratio, reps=2000)
    assert 0.93 <= coverage <= 0.975 + 1.96 * math.sqrt(0.025 * 0.975 / 2000)


# ------------------------------------------- two groups: the folded statistic's test


@pytest.mark.parametrize("x", [0.04, 0.1, 0.3, 0.5, 1.0, 1.5, 2.0])
def test_folded_far_is_the_folded_normal_quantile(x):
    # scipy's folded normal: the upper end t = x + z has P_t(|X| <= x) = 0.025
    z = folded_far(x, 0.025)
    assert z == pytest.approx(folded_z(x), abs=1e-9)
    if z > ri.FOLDED_FLOOR:
        assert stats.foldnorm.cdf(x, x + z) == pytest.approx(0.025, abs=1e-9)
    assert folded_far(0.01, 0.025) == ri.FOLDED_FLOOR  # no t >= x: the floor
    assert folded_far(6.0, 0.025) == pytest.approx(Z95, abs=1e-12)  # one pair's bound


def test_the_folded_upper_bound_misses_a_small_gap_at_the_nominal_rate():
    # X ~ N(theta, 1), theta 1 SE from parity: |X| + 1.96 (the signed bound folded) never
    # falls below |theta| < 1.96; the folded test's |X| + z_far(|X|) does, in 2.5% of draws
    x = np.abs(np.random.default_rng(7).standard_normal(40_000) + 1.0)
    old = x + Z95
    new = x + np.array([folded_far(v, 0.025) for v in x])
    assert (old < 1.0).mean() == 0.0
    assert (new < 1.0).mean() == pytest.approx(0.025, abs=0.003)
    assert (new <= old).all()


@pytest.mark.parametrize("x1, n1, x2, n2", [(0, 50, 0, 50), (1, 50, 2, 50), (30, 100, 27, 100),
                                           (27, 100, 30, 100), (3, 40, 4, 40),
                                           (120, 1000, 100, 1000), (2, 30, 40, 1500)])
def test_two_group_upper_bound_is_newcombes_at_the_folded_critical_value(x1, n1, x2, n2):
    r = rate_gap_interval([x1, x2], [n1, n2])
    assert r.upper == pytest.approx(folded_upper(x1, n1, x2, n2), rel=1e-6)
    lo, hi = newcombe(x1, n1, x2, n2, Z95)
    assert abs(x1 / n1 - x2 / n2) <= r.upper <= max(hi, -lo) + 1e-12
    if x1 * x2 > 0:  # the ratio's bound away from parity, MOVER-R's at the same value
        (a, na), (b, nb) = sorted([(x1, n1), (x2, n2)], key=lambda c: c[0] / c[1])
        q = rate_gap_interval([x1, x2], [n1, n2], ratio=True)
        z = folded_z(distance(x1, n1, x2, n2))
        assert q.lower == pytest.approx(min(mover_r(a, na, b, nb, z)[0], a / na / (b / nb)),
                                        rel=1e-6)


def test_shared_chance_draws_give_the_values_of_a_cold_start():
    """The fixed seed's chance draws are made once per window for a sequence of families:
    each metric's chance level equals the one computed with nothing cached (EO's FPR family
    still draws from where its TPR family left the generator)."""
    from fairmonitor.metrics import _rate_intervals as r

    tp, fn = np.array([40.0, 9.0, 25.0]), np.array([60.0, 11.0, 30.0])
    fp, tn = np.array([12.0, 2.0, 8.0]), np.array([88.0, 18.0, 70.0])
    calls = [lambda: rate_gap_interval(tp, tp + fn),
             lambda: rate_gap_interval(tp, tp + fn, ratio=True),
             lambda: rate_gap_interval(np.stack([tp, fp]), np.stack([tp + fn, fp + tn])),
             lambda: rate_gap_interval(fp, fp + tn)]
    cold = []
    for call in calls:
        r._CHANCE_DRAWS.clear()
        cold.append(call().chance)
    r._CHANCE_DRAWS.clear()
    assert [call().chance for call in calls] == cold  # warm: each reads the others' draws
    # the oracle: EO's level from its own generator, family after family
    from fairmonitor.metrics._intervals import _SEED

    gen = np.random.default_rng(_SEED)
    worst = np.full(r.N_DRAWS, -np.inf)
    for x, n in ((tp, tp + fn), (fp, fp + tn)):
        size = n.astype(np.int64)
        rates = gen.binomial(size, x.sum() / n.sum(), size=(r.N_DRAWS, 3)) / size
        worst = np.maximum(worst, rates.max(axis=1) - rates.min(axis=1))
    assert cold[2] == pytest.approx(float(worst.mean()), rel=1e-12)


def test_gaussian_chance_families_read_fixed_normals_and_leave_the_stream_alone():
    """With the fixed seed, a family whose groups all expect >= 30 of each outcome reads the
    fixed normals of its position in the call (TPR first, FPR second); a binomial family after
    it draws from the seed's stream as if it came first. Cold and warm (cached) agree."""
    from fairmonitor.metrics import _rate_intervals as r
    from fairmonitor.metrics._intervals import _SEED

    tp, fn = np.array([400.0, 300.0, 250.0]), np.array([600.0, 500.0, 450.0])  # Gaussian
    fp, tn = np.array([3.0, 1.0, 2.0]), np.array([90.0, 40.0, 70.0])  # binomial (rare)
    r._CHANCE_DRAWS.clear()
    cold = rate_gap_interval(np.stack([tp, fp]), np.stack([tp + fn, fp + tn])).chance
    warm = rate_gap_interval(np.stack([tp, fp]), np.stack([tp + fn, fp + tn])).chance
    assert warm == cold

    size, pooled = (tp + fn).astype(np.int64), tp.sum() / (tp + fn).sum()
    z = np.random.default_rng([_SEED, 1, 3]).standard_normal((r.N_DRAWS, 3))
    tpr = np.clip(pooled + z * np.sqrt(pooled * (1 - pooled) / size), 0.0, 1.0)
    fpr = np.random.default_rng(_SEED).binomial(  # the stream untouched by the TPR family
        (fp + tn).astype(np.int64), fp.sum() / (fp + tn).sum(), size=(r.N_DRAWS, 3)
    ) / (fp + tn)
    worst = np.maximum(np.ptp(tpr, axis=1), np.ptp(fpr, axis=1))
    assert cold == pytest.approx(float(worst.mean()), rel=1e-12)

    # the FPR family Gaussian too: its own normals (position 2), not the TPR family's
    fp2, tn2 = np.array([90.0, 80.0, 100.0]), np.array([400.0, 420.0, 380.0])
    both = rate_gap_interval(np.stack([tp, fp2]), np.stack([tp + fn, fp2 + tn2])).chance
    rate2 = fp2.sum() / (fp2 + tn2).sum()
    z2 = np.random.default_rng([_SEED, 2, 3]).standard_normal((r.N_DRAWS, 3))
    fpr2 = np.clip(rate2 + z2 * np.sqrt(rate2 * (1 - rate2) / (fp2 + tn2)), 0.0, 1.0)
    assert both == pytest.approx(float(np.maximum(np.ptp(tpr, axis=1),
                                                  np.ptp(fpr2, axis=1)).mean()), rel=1e-12)
    # an explicit generator still draws every family from it
    seeded = rate_gap_interval(tp, tp + fn, rng=5).chance
    z5 = np.random.default_rng(5).standard_normal((r.N_DRAWS, 3))
    own = np.clip(pooled + z5 * np.sqrt(pooled * (1 - pooled) / size), 0.0, 1.0)
    assert seeded == pytest.approx(float(np.ptp(own, axis=1).mean()), rel=1e-12)


def test_joint_maxima_kernel_equals_numpy_within_rounding():
    from fairmonitor._kernels.intervals import pair_maxima

    rng = np.random.default_rng(3)
    z, scale = rng.standard_normal((500, 7)), rng.uniform(0.01, 0.1, 7)
    left, right = rng.integers(0, 7, 30), rng.integers(0, 7, 30)
    se, shift = rng.uniform(0.01, 0.2, 30), rng.uniform(0, 3, 30)
    t = ((z * scale)[:, left] - (z * scale)[:, right]) / se
    near, far = pair_maxima(z, scale, left, right, se, shift)
    # numpy as the oracle within a stated tolerance (issue 27), not to the bit
    np.testing.assert_allclose(near, t.max(axis=1), rtol=1e-12, atol=0.0)
    np.testing.assert_allclose(far, (t - shift).max(axis=1), rtol=1e-12, atol=0.0)


def test_a_group_left_out_for_few_conditioning_rows_is_ignored_silently():
    # report.intervals leaves a group out of a family by zeroing its trials (fewer than
    # min_condition_size positives) and keeps its successes: 5 true positives of 0 trials.
    # Such a group must not matter, and must not raise a RuntimeWarning (the suite and the
    # monitor's strict mode turn it into an error) from Agresti-Caffo's q = 6/2 > 1
    successes = np.array([[5, 0, 3], [3, 4, 5]])
    trials = np.array([[0, 20, 20], [30, 30, 30]])
    got = rate_gap_interval(successes, trials)
    cleaned = rate_gap_interval(np.where(trials > 0, successes, 0), trials)
    assert (got.lower, got.upper) == (cleaned.lower, cleaned.upper)
    assert got.lower <= 3 / 20 <= got.upper  # the value: 3/20 - 0/20 in the TPR family


def test_joint_maxima_kernel_is_the_product_by_the_reciprocal_either_path():
    # issue 25: finite inputs take a pass per pair over the draws; the maxima are those of
    # (e_l - e_r) * (1 / se) (the kernel's documented arithmetic) to the bit; an se of 0
    # (an infinite T) takes the draw-by-draw path, with numpy's maxima
    from fairmonitor._kernels.intervals import pair_maxima

    rng = np.random.default_rng(25)
    z, scale = rng.standard_normal((300, 6)), rng.uniform(0.01, 0.1, 6)
    left, right = rng.integers(0, 6, 40), rng.integers(0, 6, 40)
    se, shift = rng.uniform(0.01, 0.2, 40), rng.uniform(0, 3, 40)
    e = z * scale
    for s in (se, np.where(np.arange(40) == 3, 0.0, se)):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (e[:, left] - e[:, right]) * (1.0 / s)
        near, far = pair_maxima(z, scale, left, right, s, shift)
        assert np.array_equal(near, t.max(axis=1))
        assert np.array_equal(far, (t - shift).max(axis=1))


def test_compiled_wilson_bounds_are_the_score_formula_and_flag_rare_counts():
    # issue 25: Wilson's bounds compiled, element by element; checked against the score
    # interval written out here (Wilson 1927), to the bit, and the rare counts (Brown, Cai &
    # DasGupta's fix, applied by wilson_interval in numpy) flagged
    from fairmonitor._kernels.intervals import wilson_bounds

    rng = np.random.default_rng(25)
    n = rng.integers(60, 5000, (2, 9)).astype(float)
    x = np.floor(rng.uniform(0.2, 0.8, n.shape) * n)
    x[0, 0], x[1, 1] = 0.0, n[1, 1]  # the exact endpoints 0 and 1
    z = 2.241403
    centre = (x + z * z / 2.0) / (n + z * z)
    half = z * np.sqrt(x * (n - x) / n + z * z / 4.0) / (n + z * z)
    lo, hi, rare = wilson_bounds(x, n, z)
    assert not rare
    assert np.array_equal(lo, np.where(x <= 0, 0.0, np.minimum(centre - half, x / n)))
    assert np.array_equal(hi, np.where(x >= n, 1.0, np.maximum(centre + half, x / n)))
    assert all(wilson_bounds(np.array([a]), np.array([b]), z)[2]
               for a, b in [(2.0, 30.0), (9.0, 100.0), (3.0, 60.0), (58.0, 60.0)])
    got = wilson_interval(np.array([2.0, 30.0]), np.array([30.0, 60.0]), z)  # numpy's fix
    want = stats.beta.ppf(stats.norm.sf(z), 2, 29)  # Clopper-Pearson where further out
    assert got[0][0] == pytest.approx(min(want, float(wilson_bounds(
        np.array([2.0]), np.array([30.0]), z)[0][0])), rel=1e-12)


def _newcombe_numpy(p1, p2, l1, u2, u1, l2):
    """Newcombe's bounds from Wilson bounds, numpy's elementwise operations (the oracle)."""
    d = p1 - p2
    return d - np.hypot(p1 - l1, u2 - p2), d + np.hypot(u1 - p1, p2 - l2)


def _mover_r_numpy(p1, p2, l1, u2, u1, l2):
    """MOVER-R's bounds from Wilson bounds, as the numpy code before the kernel wrote them."""
    pp = p1 * p2
    with np.errstate(invalid="ignore", divide="ignore"):
        a, c = u2 * (2 * p2 - u2), l1 * (2 * p1 - l1)
        lower = np.where(c <= 0, 0.0, c / (pp + np.sqrt(np.maximum(pp * pp - a * c, 0.0))))
        b, e = l2 * (2 * p2 - l2), u1 * (2 * p1 - u1)
        upper = np.where(b > 0, (pp + np.sqrt(np.maximum(pp * pp - b * e, 0.0))) / b, np.inf)
        ratio = p1 / p2
    return np.minimum(lower, ratio), np.maximum(upper, ratio)


@pytest.mark.parametrize("ratio", [False, True])
def test_compiled_pair_bounds_are_numpys_formulas_to_the_bit(ratio):
    # issue 25 item 7: Newcombe's and MOVER-R's pair bounds in one kernel pass; the numpy
    # expressions they replaced are the oracle, bit for bit, over every ordered pair of two
    # families with rates of 0 and 1 and a group of 0 trials among them
    from fairmonitor._kernels.intervals import pair_score_bounds

    rng = np.random.default_rng(11)
    n = rng.integers(5, 3000, (2, 7)).astype(float)
    x = np.floor(rng.uniform(0.0, 1.0, n.shape) * n)
    x[0, 0], x[0, 1], x[1, 2] = 0.0, n[0, 1], 0.0
    p = x / n
    lo_l, lo_u = wilson_interval(x, n, 2.5)
    up_l, up_u = wilson_interval(x, n, 1.7)
    fam, i, j = np.nonzero(np.ones((2, 7, 7)) - np.eye(7))
    lower, upper = pair_score_bounds(p, lo_l, lo_u, up_l, up_u, fam, i, j, ratio)
    oracle = _mover_r_numpy if ratio else _newcombe_numpy
    want = oracle(p[fam, i], p[fam, j], lo_l[fam, i], lo_u[fam, j], up_u[fam, i],
                  up_l[fam, j])
    assert np.array_equal(lower, want[0]) and np.array_equal(upper, want[1])
    if ratio:  # 0 / p: lower 0; p / 0: an infinite upper bound
        assert lower[(fam == 0) & (i == 0)].max() == 0.0
        assert np.isinf(upper[(fam == 1) & (j == 2)]).all()
    # the public functions read the same kernel: a scalar against an array, broadcast
    public = ri.mover_ratio if ratio else ri.newcombe_difference
    lo, hi = public(x[0, 3], n[0, 3], x[1], n[1], z_lower=2.5, z_upper=1.7)
    want = oracle(p[0, 3], p[1], lo_l[0, 3], lo_u[1], up_u[0, 3], up_l[1])
    assert lo.shape == hi.shape == (7,)
    assert np.array_equal(lo, want[0]) and np.array_equal(hi, want[1])


def test_compiled_rate_extremes_are_numpys_clip_and_extremes_to_the_bit():
    # issue 25 item 7: the chance level's Gaussian rates (clipped at both ends here) and
    # their extremes per draw in one pass; numpy's expressions the oracle
    from fairmonitor._kernels.intervals import rate_extremes

    rng = np.random.default_rng(3)
    z = rng.standard_normal((500, 6))
    sd = np.array([0.01, 0.2, 0.05, 0.3, 0.02, 0.1])
    for rate in (0.02, 0.5, 0.97):
        rates = np.clip(np.add(rate, np.multiply(z, sd)), 0.0, 1.0)
        hi, lo = rate_extremes(np.ascontiguousarray(z.T), sd, rate)
        assert np.array_equal(hi, rates.max(axis=1)) and np.array_equal(lo, rates.min(axis=1))
        if rate != 0.5:  # the clip at either end is exercised
            assert (lo == 0.0).any() if rate < 0.5 else (hi == 1.0).any()
    with pytest.raises(ValueError, match="no groups"):
        rate_extremes(np.zeros((0, 5)), np.zeros(0), 0.5)


# --------------------------------------------------------------------------------------------
# issue 25 item 7: the joint critical value's draws in one pass, by cell, cached


def test_one_pass_maxima_are_those_of_two_kernel_calls_to_the_bit():
    # pair_maxima_cols with a second shift gives what a second pair_maxima call on the same
    # draws gives (the same T for both shifts), exactly: no result may move
    from fairmonitor._kernels.intervals import pair_maxima, pair_maxima_cols

    rng = np.random.default_rng(7)
    z, scale = rng.standard_normal((400, 8)), rng.uniform(0.01, 0.2, 8)
    left, right = rng.integers(0, 8, 50), rng.integers(0, 8, 50)
    se = rng.uniform(0.01, 0.3, 50)
    shift, apart = rng.uniform(0, 3, 50), rng.uniform(0, 2, 50)
    near, far = pair_maxima(z, scale, left, right, se, shift)
    _, far_apart = pair_maxima(z, scale, left, right, se, apart)
    cols = np.ascontiguousarray(z.T)
    got = pair_maxima_cols(cols, scale, left, right, 1.0 / se, shift, apart)
    assert [a.tolist() for a in got] == [near.tolist(), far.tolist(), far_apart.tolist()]
    assert [a.tolist() for a in pair_maxima_cols(cols, scale, left, right, 1.0 / se, shift)] \
        == [near.tolist(), far.tolist()]


def test_cells_are_numpys_unique_and_inverse():
    rng = np.random.default_rng(8)
    for size in (2, 5, 20, 60):
        keys = rng.integers(0, size, rng.integers(1, 40))
        cells, where = ri._cells(keys, size)
        want_cells, want_where = np.unique(keys, return_inverse=True)
        assert cells.tolist() == want_cells.tolist()
        assert where.tolist() == want_where.tolist()


def test_fixed_draws_by_cell_are_cached_per_shape_and_read_only():
    from fairmonitor.metrics._intervals import _SEED

    first = ri._fixed_normal_cols(300, 4)
    assert ri._fixed_normal_cols(300, 4) is first  # a hit: the same (read-only) array
    assert not first.flags.writeable and first.flags.c_contiguous
    assert first.tolist() == ri._fixed_normal(300, 4).T.tolist()
    # other shapes never share an entry: each is its own shape and the seed's own draws
    for n_draws, size in ((300, 5), (301, 4), (2000, 4)):
        other = ri._fixed_normal_cols(n_draws, size)
        assert other.shape == (size, n_draws)
        assert other.tolist() == np.random.default_rng(_SEED).standard_normal(
            (n_draws, size)).T.tolist()


def _critical_by_two_calls(sd, fam, i, j, shift, apart, rng, n_draws=500):
    """The maxima as integ computed them: two pair_maxima calls, each drawing via _normal."""
    from fairmonitor._kernels.intervals import pair_maxima

    cells, where = np.unique(np.concatenate([fam * sd.shape[1] + i, fam * sd.shape[1] + j]),
                             return_inverse=True)
    se = np.hypot(sd[fam, i], sd[fam, j])
    args = (sd.ravel()[cells], where[:fam.size], where[fam.size:], se)
    top, top_shifted = pair_maxima(ri._normal(rng, n_draws, cells.size), *args, shift)
    return top, top_shifted, pair_maxima(ri._normal(rng, n_draws, cells.size), *args, apart)[1]


@pytest.mark.parametrize("rng", [None, 5, "generator"])
def test_maxima_equal_the_two_call_form_for_every_rng(rng):
    # the fixed seed takes the one-pass path; an int seed or a Generator the two calls (a
    # Generator's second call draws afresh): each equals the former code's numbers exactly
    gen = np.random.default_rng(3)
    sd = gen.uniform(0.01, 0.1, (2, 5))
    fam, i, j = ri._ordered_pairs(np.ones((2, 5), dtype=bool), sd, False)
    shift, apart = gen.uniform(0, 2, fam.size), gen.uniform(0, 1, fam.size)
    make = (lambda: np.random.default_rng(11)) if rng == "generator" else (lambda: rng)
    want = _critical_by_two_calls(sd, fam, i, j, shift, apart, make())
    cells, where = ri._cells(np.concatenate([fam * 5 + i, fam * 5 + j]), 10)
    got = ri._maxima(make(), 500, sd.ravel()[cells], where[:fam.size], where[fam.size:],
                     np.hypot(sd[fam, i], sd[fam, j]), shift, apart)
    assert [a.tolist() for a in got] == [a.tolist() for a in want]


def test_concurrent_intervals_equal_serial_ones():
    # the module's caches (fixed draws, chance draws, pairs) are shared between threads: a
    # thread pool gives every call's serial result
    from concurrent.futures import ThreadPoolExecutor

    gen = np.random.default_rng(9)
    cases = []
    for k in (2, 3, 5, 8):
        n = gen.integers(20, 300, (2, k)).astype(float)
        cases.append((np.floor(n * gen.uniform(0.05, 0.6, (2, k))), n, False))
        cases.append((np.floor(n[0] * gen.uniform(0.0, 0.6, k)), n[0], True))

    def run(case):
        x, n, ratio = case
        r = rate_gap_interval(x, n, ratio=ratio)
        return (r.lower, r.upper, r.chance)

    ri._CHANCE_DRAWS.clear()
    serial = [run(c) for c in cases]
    ri._CHANCE_DRAWS.clear()
    ri._fixed_normal_cols.cache_clear()
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(run, cases * 4))
    assert threaded == serial * 4


def test_float_wilson_is_the_kernels_to_the_bit_where_it_applies():
    # two groups' folded test evaluates Wilson's bounds ~10 times in Python floats: where no
    # rare-count fix applies they are wilson_interval's numbers exactly, elsewhere not used
    rng = np.random.default_rng(12)
    n = np.concatenate([rng.integers(1, 60, 400), rng.integers(60, 10 ** 6, 400)]).astype(float)
    x = np.floor(n * rng.choice([0.0, 0.01, 0.2, 0.5, 0.97, 1.0], n.size))
    x = np.concatenate([x[:600], n[600:700] * rng.uniform(0, 1, 100), n[700:]])  # weighted
    used = 0
    for xk, nk in zip(x.tolist(), n.tolist(), strict=True):
        for z in (0.3, 1.959964, float(rng.uniform(0, 4))):
            lo, hi = wilson_interval(np.array([xk]), np.array([nk]), z)
            if ri._plain_wilson(xk, nk):
                used += 1
                assert ri._wilson_float(xk, nk, z) == (float(lo[0]), float(hi[0]))
    assert used > 1000
    assert not ri._plain_wilson(2.0, 40.0) and not ri._plain_wilson(39.0, 40.0)  # rare
    assert not ri._plain_wilson(5.0, 0.0) and not ri._plain_wilson(float("nan"), 4.0)
