"""report.evidence: the budgeted pages' sequential state (issue 24 item 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from fairmonitor.metrics._rate_intervals import rate_gap_interval
from fairmonitor.report.evidence import (
    CAP_FACTOR,
    SE_FLOOR_FRACTION,
    Budget,
    Evidence,
    accumulate,
    comparisons,
    increment,
    overshoot_factor,
    standard_error,
)

VILLE = Budget(calibration="ville")


def _siegmund_nu(r):
    """nu(r) = 2 / r^2 exp(-2 sum_k Phi(-r sqrt(k) / 2) / k), summed with scipy."""
    k = np.arange(1, 200_001)
    return 2 / r**2 * math.exp(-2 * np.sum(norm.cdf(-r * np.sqrt(k) / 2) / k))

Z95 = norm.ppf(0.975)
BUDGET = Budget()  # frozen: one shared default


def _window(value, se, level=0.1, bound="upper", budget=BUDGET, **kw):
    return dict(value=value, lower=value - Z95 * se, upper=value + Z95 * se, level=level,
                bound=bound, budget=budget, **kw)


def _hand_increment(x, s, g0, g1):
    """The Gaussian LLR of g1 vs g0 minus the log of its folded-normal mean at g0."""
    llr = (g1 - g0) / s**2 * (x - (g0 + g1) / 2)
    c = norm.cdf((g1) / s) + math.exp(-2 * (g1 - g0) * g0 / s**2) * norm.cdf((g1 - 2 * g0) / s)
    return llr - math.log(c)


def test_two_hand_computed_steps():
    # level 0.1: g0 = 0.05, g1 = 0.15; s = 0.05; LLR = 40 * (0.2 - 0.1) = 4
    step = _hand_increment(0.2, 0.05, 0.05, 0.15)
    assert step == pytest.approx(4 - math.log(norm.cdf(3) + math.exp(-4) * norm.cdf(1)))
    one = accumulate(Evidence(), **_window(0.2, 0.05))
    assert one.windows == 1
    assert one.log_sr == pytest.approx(math.log1p(math.exp(step)), rel=1e-12)
    # the overshoot credit of r = (g1 - g0) / s = 2, less the 10% margin, added to the
    # decided statistic
    assert one.credit == pytest.approx(-math.log(_siegmund_nu(2.0)) - math.log(1.1), rel=1e-9)
    assert one.statistic == pytest.approx(one.log_sr + one.credit, rel=1e-12)
    # a window below the midpoint: LLR = 40 * (0.06 - 0.1) = -1.6
    step2 = _hand_increment(0.06, 0.05, 0.05, 0.15)
    two = accumulate(one, **_window(0.06, 0.05))
    assert two.log_sr == pytest.approx(math.log1p(math.exp(one.log_sr + step2)), rel=1e-12)
    assert two.windows == 2
    # never below Page's CUSUM max(0, S + l) on the same increments
    assert two.log_sr >= max(0.0, max(0.0, step) + step2)
    # Ville's calibration: no credit, the statistic is log(1 + R) itself
    plain = accumulate(Evidence(), **_window(0.2, 0.05, budget=VILLE))
    assert plain.credit == 0.0 and plain.statistic == pytest.approx(one.log_sr, rel=1e-12)


def test_the_wider_half_width_and_the_floor_give_the_standard_error():
    # asymmetric interval (lower clipped at 0): the wider half, 0.1, gives s = 0.1 / z
    got = increment(value=0.02, lower=0.0, upper=0.12, level=0.1, bound="upper",
                    budget=Budget())
    assert got == pytest.approx(_hand_increment(0.02, 0.1 / Z95, 0.05, 0.15))
    # a zero-width interval: s is floored at (g1 - g0) / 8
    got = increment(value=0.0, lower=0.0, upper=0.0, level=0.1, bound="upper", budget=Budget())
    assert got == pytest.approx(_hand_increment(0.0, SE_FLOOR_FRACTION * 0.1, 0.05, 0.15))


def test_a_ratio_is_a_log_gap_with_fractions_of_the_distance_from_parity():
    # level 0.8: g0 = -log(1 - 0.1), g1 = -log(1 - 0.3); the interval on the log scale
    x, lo, hi = -math.log(0.7), -math.log(0.8), -math.log(0.6)
    s = max(x - lo, hi - x) / Z95
    got = increment(value=0.7, lower=0.6, upper=0.8, level=0.8, bound="lower", budget=Budget())
    assert got == pytest.approx(_hand_increment(x, s, -math.log(0.9), -math.log(0.7)))
    with pytest.raises(ValueError, match="ratio level in"):
        increment(value=0.7, lower=0.6, upper=0.8, level=1.5, bound="lower", budget=Budget())


@pytest.mark.parametrize("field", ["value", "lower", "upper"])
def test_an_undefined_window_leaves_the_state_unchanged(field):
    state = Evidence(4.2, 7)
    window = _window(0.2, 0.05)
    window[field] = float("nan")
    assert accumulate(state, **window, page_level=9.0) is state


def test_page_level_is_the_log_of_the_expected_windows_per_false_page():
    b = Budget()
    assert b.page_level(windows_per_day=24, n_series=10) == pytest.approx(
        math.log(1 + 10 * 24 * 90))
    levels = [Budget(false_pages=f).page_level(windows_per_day=24, n_series=10)
              for f in (4, 2, 1, 0.5)]
    assert levels == sorted(levels) and len(set(levels)) == 4
    by_series = [b.page_level(windows_per_day=24, n_series=n) for n in (1, 2, 10, 40)]
    assert by_series == sorted(by_series) and len(set(by_series)) == 4
    assert Budget(days=30).page_level(windows_per_day=24, n_series=10) < \
        b.page_level(windows_per_day=24, n_series=10)
    with pytest.raises(ValueError, match="n_series >= 1"):
        b.page_level(windows_per_day=24, n_series=0)


@pytest.mark.parametrize("kwargs, match", [
    ({"false_pages": 0}, "false_pages: must be a positive"),
    ({"days": float("inf")}, "days: must be a positive"),
    ({"null_fraction": 1.5, "alternative_fraction": 1.0}, "null_fraction must be below"),
])
def test_budget_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Budget(**kwargs)


def test_evidence_round_trips_through_a_dict():
    e = Evidence(3.25, 11)
    assert Evidence.from_dict(e.to_dict()) == e
    assert Evidence.from_dict({}) == Evidence()


def _run_lengths(gap, se, *, runs, page_level, rng, level=0.1, budget=BUDGET, limit=100_000):
    """Windows to the first page of |N(gap, se)| windows (the folded statistic)."""
    out = []
    for _ in range(runs):
        state, t = Evidence(), 0
        while t < limit:
            t += 1
            x = abs(rng.normal(gap, se))
            state = accumulate(state, **_window(x, se, level=level, budget=budget),
                               page_level=page_level)
            if state.statistic >= page_level:
                break
        out.append(t)
    return np.array(out)


@pytest.mark.parametrize("ratio", [0.8, 2.0])  # level / se: small groups (fold matters), mid
def test_arl0_at_g0_is_at_least_the_page_levels_promise(ratio):
    # E[R_N] >= A at a page and R_t - t is a supermartingale at g0: E[N] >= A = exp(h) - 1
    rng = np.random.default_rng(20240611)
    h = math.log1p(40.0)
    n = _run_lengths(0.05, 0.1 / ratio, runs=300, page_level=h, rng=rng, budget=VILLE)
    # mean minus three standard errors still above A
    assert n.mean() - 3 * n.std(ddof=1) / math.sqrt(n.size) >= 40.0


def test_a_gap_of_twice_the_threshold_pages_within_three_windows():
    rng = np.random.default_rng(7)
    h = Budget().page_level(windows_per_day=24, n_series=10)
    n = _run_lengths(0.2, 0.03, runs=200, page_level=h, rng=rng)  # groups of about 500 rows
    assert n.max() <= 3 and np.median(n) <= 2


def test_the_cap_and_the_restart_clear_a_long_breach_quickly():
    h = Budget().page_level(windows_per_day=24, n_series=10)
    state = Evidence()
    for _ in range(50):
        state = accumulate(state, **_window(0.2, 0.03), page_level=h)
    assert state.log_sr == pytest.approx(CAP_FACTOR * h) and state.windows == 50
    cleared = 0
    while state.statistic >= h:
        state = accumulate(state, **_window(0.0, 0.03), page_level=h)
        cleared += 1
    # a fair window subtracts about (0.1 / 0.03**2) * 0.1 = 11.1 > 1.5h - h + credit
    # (5.0 + 1.8): one clears
    assert cleared == 1 and state == Evidence(0.0, 0)


def test_a_largest_of_several_pair_gaps_divides_by_the_comparisons():
    window = _window(0.2, 0.05)
    one = increment(**window)
    assert increment(**window, n_comparisons=6) == pytest.approx(one - math.log(6))
    assert [comparisons(k, f) for k, f in ((2, 1), (3, 1), (4, 1), (3, 2), (1, 1))] == \
        [1, 3, 6, 6, 1]


def test_arl0_of_the_largest_gap_of_three_small_groups_at_parity():
    # three groups of 30 at one rate: the max pair gap's noise (0.13) exceeds the level 0.1;
    # the interval's half-width is computed as the project's intervals do, from draws
    rng = np.random.default_rng(11)
    sd = math.sqrt(0.25 / 30)
    draws = rng.standard_normal((4000, 3)) * sd
    half = np.quantile(draws.max(axis=1) - draws.min(axis=1), 0.95)
    # P(page within T windows) <= E[pages within T] <= T / A
    h, horizon = math.log1p(200.0), 50
    lengths = []
    for _ in range(400):
        state, t = Evidence(), 0
        while state.statistic < h and t < horizon:
            t += 1
            p = rng.normal(0.5, sd, 3)
            x = p.max() - p.min()
            state = accumulate(state, value=x, lower=max(x - half, 0.0), upper=x + half,
                               level=0.1, bound="upper", budget=VILLE, page_level=h,
                               n_comparisons=comparisons(3))
        lengths.append(state.statistic >= h)
    paged = float(np.mean(lengths))
    assert paged <= horizon / 200.0
    # the same windows with one comparison (the max taken as a single pair) page too often
    rng = np.random.default_rng(11)
    single = 0
    for _ in range(400):
        state = Evidence()
        for _ in range(horizon):
            p = rng.normal(0.5, sd, 3)
            x = p.max() - p.min()
            state = accumulate(state, value=x, lower=max(x - half, 0.0), upper=x + half,
                               level=0.1, bound="upper", budget=VILLE, page_level=h)
        single += state.windows < horizon or state.statistic >= h
    assert single / 400 > horizon / 200.0


@pytest.mark.parametrize("r", [0.5, 1.0, 2.0, 3.2, 8.0])
def test_overshoot_factor_is_siegmunds_series(r):
    assert overshoot_factor(r) == pytest.approx(_siegmund_nu(r), rel=1e-6)


def test_overshoot_factor_below_the_series_is_the_first_order_approximation():
    # Siegmund's nu(r) = exp(-0.583 r) + o(r): within 0.2% of the series at r = 0.3
    assert overshoot_factor(0.3) == pytest.approx(math.exp(-0.583 * 0.3))
    assert overshoot_factor(0.3) == pytest.approx(_siegmund_nu(0.3), rel=2e-3)
    assert overshoot_factor(0.0) == 1.0 and overshoot_factor(float("nan")) == 1.0


def test_the_overshoot_level_makes_arl0_equal_the_budgeted_a():
    # Gaussian windows at g0 with s = 0.03 (r = 3.33, fold negligible): Ville's level keeps
    # ARL0 several times above A (the overshoot); the credited level brings it to about A
    rng = np.random.default_rng(5)
    a = 100.0
    h = math.log1p(a)

    def arl(budget):
        lengths = []
        for _ in range(200):
            state, t = Evidence(), 0
            while state.statistic < h:
                t += 1
                state = accumulate(state, **_window(rng.normal(0.05, 0.03), 0.03,
                                                    budget=budget), page_level=h)
            lengths.append(t)
        return np.mean(lengths), np.std(lengths, ddof=1) / math.sqrt(len(lengths))

    mean, se = arl(Budget())
    assert abs(mean - 1.1 * a) <= 3 * se + 0.1 * a  # A less its 10% margin
    mean_ville, _ = arl(VILLE)
    assert mean_ville >= 3 * a


def test_the_standard_error_is_the_wider_half():
    # lower end clipped at 0 (the parity side's joint critical value): the wider half
    assert standard_error(value=0.15, lower=0.0, upper=0.28) == pytest.approx(0.15 / Z95)
    got = increment(value=0.15, lower=0.0, upper=0.28, level=0.1, bound="upper",
                    budget=Budget())
    assert got == pytest.approx(_hand_increment(0.15, 0.15 / Z95, 0.05, 0.15))


def _exact_mean_e_values(n, p0, p1, rules):
    """E[exp(l)] per standard-error rule over the binomial counts of two n-row groups (the
    project's intervals; counts of probability below 1e-5 left out)."""
    from scipy.stats import binom

    w0, w1 = binom.pmf(np.arange(n + 1), n, p0), binom.pmf(np.arange(n + 1), n, p1)
    totals = [0.0] * len(rules)
    for i in np.flatnonzero(w0 > 1e-5):
        for j in np.flatnonzero(w1 > 1e-5):
            iv = rate_gap_interval(np.array([i, j]), np.array([n, n]), chance=False)
            x = abs(i - j) / n
            for k, rule in enumerate(rules):
                s = max(rule(x, iv.lower, iv.upper), SE_FLOOR_FRACTION * 0.1)
                c = norm.cdf(0.15 / s) + math.exp(-2 * 0.1 / s**2 * 0.05) * norm.cdf(0.05 / s)
                totals[k] += w0[i] * w1[j] * math.exp(0.1 / s**2 * (x - 0.1) - math.log(c))
    return totals


def test_the_wider_half_keeps_the_e_value_valid_where_the_away_half_does_not():
    # two 100-row groups at 0.5 and 0.45: a DP gap exactly at g0 = 0.05 (level 0.1). The
    # half away from parity is the Wilson error at the observed rates, smaller than the
    # null's in the upper tail: E[exp(l)] = 1.3 > 1, the detector would drift up on a fair
    # model (measured: 23 false pages in 4 x 90 days at 30 rows). The wider half keeps it <= 1
    wider, away = _exact_mean_e_values(100, 0.5, 0.45, [
        lambda x, lo, hi: standard_error(value=x, lower=lo, upper=hi),
        lambda x, lo, hi: (hi - x) / Z95])
    assert wider <= 1.0 < 1.2 < away


def test_budget_rejects_an_unknown_calibration():
    with pytest.raises(ValueError, match="calibration"):
        Budget(calibration="simulated")


def test_evidence_with_credit_round_trips_and_old_checkpoints_load():
    e = Evidence(9.5, 3, 1.75)
    assert Evidence.from_dict(e.to_dict()) == e and e.log_sr == 7.75
    assert Evidence.from_dict({"statistic": 4.0, "windows": 2}) == Evidence(4.0, 2, 0.0)


def test_no_overshoot_credit_where_the_fold_is_material():
    # s = L / 1.4 (groups of about 100 rows): c = Phi(2.1) + exp(-1.96) Phi(0.7) = 1.09
    # > 1.05, the folded walk's overshoot is not the Gaussian one's: Ville's level alone
    se = 0.1 / 1.4
    c = norm.cdf(2.1) + math.exp(-1.96) * norm.cdf(0.7)
    assert c > 1.05
    small = accumulate(Evidence(), **_window(0.1, se), page_level=9.98)
    assert small.credit == 0.0
    # s = L / 2: c = Phi(3) + exp(-4) Phi(1) = 1.014, the credit applies
    large = accumulate(Evidence(), **_window(0.1, 0.05), page_level=9.98)
    assert large.credit == pytest.approx(-math.log(_siegmund_nu(2.0) * 1.1), rel=1e-9)
