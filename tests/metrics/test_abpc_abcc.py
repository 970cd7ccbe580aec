"""ABCC and ABPC: spec 001 §5 cases, paper toys (errata corrected), oracles and properties."""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from fairmonitor import METRICS
from fairmonitor.exceptions import GroupExclusionWarning, InvalidInputError, UndefinedMetricWarning
from fairmonitor.metrics import PairwiseMatrix, abcc, abpc, pairwise_matrix
from fairmonitor.metrics._abpc_abcc.kde import grid_size

TOY1_Y = [0.4, 0.4, 0.4, 0.4, 0.5, 0.5, 0.5, 0.5, 0.5, 0.9]
TOY1_S = [0, 0, 0, 0, 1, 1, 1, 1, 1, 0]
TOY2_Y = [0.35, 0.45, 0.55, 0.65]
TOY2_S = [0, 1, 0, 1]


def two(a, b):
    """Scores and 0/1 labels of two groups."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.concatenate([a, b]), np.repeat([0, 1], [a.size, b.size])


def quantiles(dist, n):
    """A deterministic sample: the (i + 1/2)/n quantiles (converges like 1/n, not 1/sqrt(n))."""
    return dist.ppf((np.arange(n) + 0.5) / n)


def reference_abcc(a, b, m=10000):
    """The paper's ABCC code (ECDF on linspace(0, 1, m), trapezoid), numpy only."""
    x = np.linspace(0, 1, m)
    f0 = np.searchsorted(np.sort(a), x, side="right") / len(a)
    f1 = np.searchsorted(np.sort(b), x, side="right") / len(b)
    return np.trapezoid(np.abs(f0 - f1), x)


def ks(a, b):
    """max_t ΔDP_b^t over every threshold, both conventions (ECDF jumps at the data)."""
    t = np.concatenate([a, b])
    f = lambda v, side: np.searchsorted(np.sort(v), t, side=side) / len(v)  # noqa: E731
    return max(np.abs(f(a, "right") - f(b, "right")).max(),
               np.abs(f(a, "left") - f(b, "left")).max())


def direct_reflected(values, h, x):
    """The reflected KDE summed directly over every point and its mirror images at 0 and 1.

    Images at distance >= 1 (shifts by +-2) are kept only when the kernel reaches that far.
    """
    images = [values, -values, 2 - values]
    if h > 0.05:
        images += [values - 2, values + 2, -2 - values]
    points = np.concatenate(images)
    out = np.empty_like(x)
    for lo in range(0, x.size, 512):
        z = (x[lo:lo + 512, None] - points[None, :]) / h
        out[lo:lo + 512] = np.exp(-0.5 * z * z).sum(axis=1)
    return out / (values.size * h * np.sqrt(2 * np.pi))


def scott(values):
    return values.std(ddof=1) * values.size ** -0.2


# ------------------------------------------------------------------ ABCC: exact cases (§5)


def test_t1_identical_groups_give_exactly_zero():
    g = np.random.default_rng(1).random(50)
    y, s = two(g, g[::-1])
    assert abcc(y, sensitive_features=s) == 0.0


def test_t2_paper_toy1():
    assert abcc(TOY1_Y, sensitive_features=TOY1_S) == pytest.approx(0.16, abs=1e-15)


def test_t3_paper_toy2():
    assert abcc(TOY2_Y, sensitive_features=TOY2_S) == pytest.approx(0.1, abs=1e-15)


def test_toy2_erratum_dp_at_06_is_one_half_not_067():
    # paper §3.1 says ΔDP_b^0.6 = 0.67; group 0 has 0/2 >= 0.6, group 1 has 1/2
    y, s = np.array(TOY2_Y), np.array(TOY2_S)
    rates = [np.mean(y[s == g] >= 0.6) for g in (0, 1)]
    assert abs(rates[0] - rates[1]) == 0.5


@pytest.mark.parametrize(("a", "b", "k0", "k1"), [(0.2, 0.7, 5, 5), (0.9, 0.1, 3, 8)])
def test_t4_point_masses_give_their_distance(a, b, k0, k1):
    y, s = two([a] * k0, [b] * k1)
    assert abcc(y, sensitive_features=s) == pytest.approx(abs(a - b), abs=1e-15)


def test_t5_two_point_mixtures_with_ties():
    y, s = two([0.5, 0.5, 0.5, 0.5, 0.9], [0.5, 0.9, 0.9, 0.9, 0.9])
    assert abcc(y, sensitive_features=s) == pytest.approx(0.6 * 0.4, abs=1e-15)


def test_t5_unequal_sizes():
    # p = 2/3 at .2 vs q = 1/4 at .2 (rest at .6): |p - q| |b - a| = 5/12 * 0.4
    y, s = two([0.2, 0.2, 0.6], [0.2, 0.6, 0.6, 0.6])
    assert abcc(y, sensitive_features=s) == pytest.approx(5 / 12 * 0.4, abs=1e-15)


def test_t6_scores_outside_unit_interval_are_rejected():
    y, s = two([-0.5, 0.2, 0.4], [0.6, 0.7, 1.8])
    with pytest.raises(InvalidInputError, match="must lie in"):
        abcc(y, sensitive_features=s)


def test_t6_value_of_the_clipped_scores():
    y, s = two([0.0, 0.2, 0.4], [0.6, 0.7, 1.0])
    assert abcc(y, sensitive_features=s) == pytest.approx(0.566667, abs=1e-6)


def test_t7_grid_worst_case_is_exact():
    x = np.linspace(0, 1, 10000)
    y, s = two([x[5000] + 1e-9] * 10, [x[5001] - 1e-9] * 10)
    assert abcc(y, sensitive_features=s) == pytest.approx(x[5001] - x[5000] - 2e-9, abs=1e-15)


def test_t7_the_reference_grid_misses_it():
    x = np.linspace(0, 1, 10000)
    assert reference_abcc(np.full(10, x[5000] + 1e-9), np.full(10, x[5001] - 1e-9)) == 0.0


G3 = (quantiles(stats.beta(2, 5), 1000), quantiles(stats.beta(5, 2), 1000))
G4 = (quantiles(stats.norm(0.5, 0.1), 2000), quantiles(stats.norm(0.6, 0.1), 2000))
G5 = (quantiles(stats.beta(2, 5), 300), quantiles(stats.beta(2, 4), 1700))
GOLDEN = {  # spec §5: (groups, exact ABCC, reference ABCC, reference ABPC)
    "G3": (G3, 0.428587015158, 0.428585458546, 1.524142038254),
    "G4": (G4, 0.100000000000, 0.099999799980, 0.749547048455),
    "G5": (G5, 0.047656444217, 0.047656981384, 0.200615024268),
}


@pytest.mark.parametrize("case", GOLDEN)
def test_golden_exact_abcc(case):
    (a, b), exact, _, _ = GOLDEN[case]
    y, s = two(a, b)
    assert abcc(y, sensitive_features=s) == pytest.approx(exact, abs=1e-11)


@pytest.mark.parametrize("case", GOLDEN)
def test_golden_reference_grid_value_reproduced(case):
    (a, b), _, reference, _ = GOLDEN[case]
    assert reference_abcc(a, b) == pytest.approx(reference, abs=1e-11)


@pytest.mark.parametrize(("y", "s", "reference"), [
    (TOY1_Y, TOY1_S, 0.16001600160016), (TOY2_Y, TOY2_S, 0.10001000100010),
    (*two([.5, .5, .5, .5, .9], [.5, .9, .9, .9, .9]), 0.240024),
])
def test_reference_grid_within_one_step_of_exact(y, s, reference):
    y, s = np.asarray(y), np.asarray(s)
    assert reference_abcc(y[s == 0], y[s == 1]) == pytest.approx(reference, abs=1e-6)
    assert abs(abcc(y, sensitive_features=s) - reference) <= 1 / 9999


# ------------------------------------------------------------------ ABCC: population cases

N_POP = 20000
POPULATION = {  # spec §5 T8-T15: (group 0, group 1, population ABCC on [0, 1])
    "T8": (stats.uniform(0, 0.5), stats.uniform(0.5, 0.5), 0.5),
    "T9": (stats.uniform(0, 1), stats.uniform(0, 0.5), 0.25),
    "T9b": (stats.uniform(0.1, 0.4), stats.uniform(0.35, 0.4), 0.25),
    "T10": (stats.norm(0.3, 0.1), stats.norm(0.4, 0.1), 0.099962),
    "T11": (stats.norm(0.2, 0.1), stats.norm(0.4, 0.1), 0.199152),
    "T12": (stats.beta(2, 5), stats.beta(5, 2), 3 / 7),
    "T15": (stats.beta(0.3, 3), stats.beta(3, 0.3), 2.7 / 3.3),  # = ΔDP_c (dominance)
}


@pytest.mark.parametrize("case", POPULATION)
def test_population_abcc(case):
    d0, d1, target = POPULATION[case]
    # clipping to [0, 1] is what "integrated on [0, 1]" means for the normals (T10, T11)
    y, s = two(np.clip(quantiles(d0, N_POP), 0, 1), np.clip(quantiles(d1, N_POP), 0, 1))
    assert abcc(y, sensitive_features=s) == pytest.approx(target, abs=2e-6)


def test_t13_abcc_is_not_invariant_under_monotone_maps():
    y, s = two(quantiles(stats.beta(2, 5), N_POP) ** 3, quantiles(stats.beta(5, 2), N_POP) ** 3)
    assert abcc(y, sensitive_features=s) == pytest.approx(186 / 504, abs=2e-6)


def test_t14_sigmoid_mapped_normals():
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    y, s = two(sig(quantiles(stats.norm(-0.5, 1), N_POP)),
               sig(quantiles(stats.norm(0.5, 1), N_POP)))
    assert abcc(y, sensitive_features=s) == pytest.approx(0.204054, abs=2e-6)


def test_t16_same_distribution_stays_near_its_null_floor():
    rng = np.random.default_rng(16)
    y, s = two(rng.beta(2, 5, 10000), rng.beta(2, 5, 10000))
    # spec §6.6: null mean 0.0028, sd 0.0010 at 10k/10k; 5 sd above the mean
    assert abcc(y, sensitive_features=s) < 0.0028 + 5 * 0.0010


# ------------------------------------------------------------------ ABCC: oracle and identities


def _random_groups(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 9))
    sizes = rng.integers(1, 300, size=k)
    parts = [np.round(rng.beta(rng.uniform(.3, 5), rng.uniform(.3, 5), n), int(rng.integers(2, 6)))
             for n in sizes]  # rounding makes ties within and across groups
    labels = np.repeat(np.array([f"g{i}" for i in range(k)]), sizes)
    order = rng.permutation(labels.size)
    return parts, np.concatenate(parts)[order], labels[order]


@pytest.mark.parametrize("seed", range(12))
def test_scipy_wasserstein_oracle_max(seed):
    parts, y, s = _random_groups(seed)
    brute = max(stats.wasserstein_distance(a, b) for a, b in combinations(parts, 2))
    assert abcc(y, sensitive_features=s, agg="max") == pytest.approx(brute, abs=1e-12)


@pytest.mark.parametrize("seed", range(12))
def test_scipy_wasserstein_oracle_mean(seed):
    parts, y, s = _random_groups(seed)
    brute = np.mean([stats.wasserstein_distance(a, b) for a, b in combinations(parts, 2)])
    assert abcc(y, sensitive_features=s, agg="mean") == pytest.approx(brute, abs=1e-12)


def test_large_coprime_groups_match_scipy():
    rng = np.random.default_rng(7)
    a, b = rng.beta(2, 3, 100003), rng.beta(3, 2, 70001)
    y, s = two(a, b)
    assert abcc(y, sensitive_features=s) == pytest.approx(stats.wasserstein_distance(a, b),
                                                         abs=1e-12)


@pytest.mark.parametrize(("d0", "d1"), [((2, 3), (2.5, 2)), ((2, 2), (6, 6))])  # 2nd: CDFs cross
def test_chain_mean_gap_below_abcc(d0, d1):
    rng = np.random.default_rng(3)
    a, b = rng.beta(*d0, 400), rng.beta(*d1, 300)
    y, s = two(a, b)
    assert abs(a.mean() - b.mean()) <= abcc(y, sensitive_features=s) + 1e-12


@pytest.mark.parametrize(("d0", "d1"), [((2, 3), (2.5, 2)), ((2, 2), (6, 6))])
def test_chain_abcc_below_ks(d0, d1):
    rng = np.random.default_rng(3)
    a, b = rng.beta(*d0, 400), rng.beta(*d1, 300)
    y, s = two(a, b)
    assert abcc(y, sensitive_features=s) <= ks(a, b)


def test_abcc_equals_mean_gap_under_dominance():
    # spec §2.6: ABCC = ΔDP_c when one group's CDF lies below the other's everywhere
    a, b = quantiles(stats.beta(2, 5), 3000), quantiles(stats.beta(5, 2), 3000)
    y, s = two(a, b)
    assert abcc(y, sensitive_features=s) == pytest.approx(b.mean() - a.mean(), abs=1e-12)


def test_averaging_identity_on_toy2():
    # ABCC = E_t ΔDP_b^t over a uniform threshold, either convention ("≥" here)
    y, s = np.array(TOY2_Y), np.array(TOY2_S)
    t = (np.arange(100000) + 0.5) / 100000
    dp = np.abs((y[s == 0][:, None] >= t).mean(0) - (y[s == 1][:, None] >= t).mean(0))
    assert dp.mean() == pytest.approx(abcc(y, sensitive_features=s), abs=1e-9)


def test_scaling_and_shift():
    rng = np.random.default_rng(4)
    y, s = two(rng.uniform(0.1, 0.5, 40), rng.uniform(0.2, 0.6, 60))
    base = abcc(y, sensitive_features=s)
    assert abcc(0.5 * y, sensitive_features=s) == pytest.approx(0.5 * base, abs=1e-15)
    assert abcc(y + 0.3, sensitive_features=s) == pytest.approx(base, abs=1e-14)


def test_three_groups_agg_max_and_mean():
    y = [0.1, 0.2, 0.5, 0.6, 0.9, 1.0]
    s = ["a", "a", "b", "b", "c", "c"]
    assert abcc(y, sensitive_features=s) == pytest.approx(0.8, abs=1e-15)
    assert abcc(y, sensitive_features=s, agg="mean") == pytest.approx(1.6 / 3, abs=1e-15)


def test_intersection_of_two_columns():
    y = [0.1, 0.2, 0.5, 0.6]
    sf = {"sex": ["f", "f", "m", "m"], "age": ["o", "y", "o", "y"]}
    pm = pairwise_matrix(y, sensitive_features=sf)
    assert pm.attribute == "sex:age"
    assert pm.matrix.max() == pytest.approx(0.5, abs=1e-15)


def test_min_group_size_leaves_out_small_groups():
    y, s = [0.1, 0.2, 0.3, 0.8, 0.9, 0.5], ["a", "a", "a", "b", "b", "c"]
    with pytest.warns(GroupExclusionWarning, match="'c'"):
        value = abcc(y, sensitive_features=s, min_group_size=2)
    assert value == pytest.approx(0.85 - 0.2, abs=1e-15)


def test_single_group_is_nan_with_reason():
    with pytest.warns(UndefinedMetricWarning, match="single group"):
        value = abcc([0.1, 0.2], sensitive_features=["a", "a"])
    assert np.isnan(value)


def test_all_but_one_group_too_small_is_nan():
    with pytest.warns(GroupExclusionWarning), pytest.warns(UndefinedMetricWarning,
                                                           match="min_group_size"):
        value = abcc([0.1, 0.2, 0.3], sensitive_features=["a", "a", "b"], min_group_size=2)
    assert np.isnan(value)


@pytest.mark.parametrize(("y", "s", "match"), [
    ([0.1, np.nan], [0, 1], "NaN or infinite"),
    ([0.1, np.inf], [0, 1], "NaN or infinite"),
    ([0.1, 0.2, 0.3], [0, 1], "rows"),
    ([0.1, 0.2], [0, None], "missing"),
    ([], [], "empty"),
    (["a", "b"], [0, 1], "numeric"),
])
def test_bad_input_raises(y, s, match):
    with pytest.raises(InvalidInputError, match=match):
        abcc(y, sensitive_features=s)


@pytest.mark.parametrize("n_groups", [2, 6])  # packed sort (<= 4 groups) and split path
def test_abcc_does_not_modify_its_input(n_groups):
    # abcc sorts a private copy in place: the caller's array must stay bit-for-bit the same
    y = np.random.default_rng(14).random(60)
    y[:3] = [-0.0, 0.0, 1.0]
    before = y.copy()
    abcc(y, sensitive_features=np.arange(60) % n_groups)
    assert np.array_equal(y.view(np.uint64), before.view(np.uint64))


def test_negative_zero_is_zero():
    assert abcc([-0.0, 0.5, 0.0, 0.5], sensitive_features=[0, 0, 1, 1]) == 0.0


def test_bad_agg_lists_the_options():
    with pytest.raises(InvalidInputError, match=r"\('max', 'mean'\)"):
        abcc(TOY1_Y, sensitive_features=TOY1_S, agg="median")


# ------------------------------------------------------------------ properties (hypothesis)

scores_st = st.lists(st.floats(0, 1), min_size=2, max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scores=scores_st, data=st.data())
def test_abcc_in_unit_interval_symmetric_and_order_free(scores, data):
    y = np.array(scores)
    s = np.array(data.draw(st.lists(st.sampled_from("abc"), min_size=y.size, max_size=y.size)))
    if np.unique(s).size < 2:
        s[0], s[-1] = "a", "b"
    value = abcc(y, sensitive_features=s)
    perm = np.random.default_rng(0).permutation(y.size)
    relabel = np.array([{"a": "z", "b": "a", "c": "b"}[v] for v in s])
    assert 0.0 <= value <= 1.0
    assert abcc(y[perm], sensitive_features=s[perm]) == pytest.approx(value, abs=1e-12)
    assert abcc(y, sensitive_features=relabel) == pytest.approx(value, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(a=st.lists(st.floats(0, 1), min_size=1, max_size=40),
       b=st.lists(st.floats(0, 1), min_size=1, max_size=40))
def test_abcc_symmetric_and_equals_wasserstein(a, b):
    y, s = two(a, b)
    value = abcc(y, sensitive_features=s)
    assert value == pytest.approx(abcc(y, sensitive_features=1 - s), abs=1e-12)
    assert value == pytest.approx(stats.wasserstein_distance(a, b), abs=1e-12)


bad_score = st.one_of(st.just(np.nan), st.just(np.inf), st.just(-np.inf),
                      st.floats(1.001, 1e9), st.floats(-1e9, -0.001))


@settings(max_examples=60, deadline=None)
@given(scores=scores_st, bad=bad_score, where=st.integers(0, 59),
       metric=st.sampled_from(["abcc", "abpc"]))
def test_bad_scores_raise_invalid_input(scores, bad, where, metric):
    y = np.array(scores)
    y[where % y.size] = bad
    func = abcc if metric == "abcc" else abpc
    with pytest.raises(InvalidInputError):
        func(y, sensitive_features=np.arange(y.size) % 2)


@settings(max_examples=60, deadline=None)
@given(y=st.one_of(st.lists(st.floats(allow_nan=True), max_size=6),
                   st.lists(st.text(max_size=2), max_size=4), st.just([[0.1, 0.2], [0.3, 0.4]])),
       s=st.one_of(st.lists(st.integers(0, 2), max_size=6),
                   st.lists(st.one_of(st.none(), st.just("a")), max_size=6)),
       metric=st.sampled_from(["abcc", "abpc"]))
def test_arbitrary_input_gives_error_or_number_never_crash(y, s, metric):
    func = abcc if metric == "abcc" else abpc
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = func(y, sensitive_features=s)
        except InvalidInputError:
            return
    assert np.isnan(value) or 0.0 <= value <= 2.0
    assert all(issubclass(w.category, UndefinedMetricWarning | GroupExclusionWarning)
               for w in caught)


@settings(max_examples=40, deadline=None)
@given(scores=st.lists(st.floats(0, 1), min_size=6, max_size=60), data=st.data())
def test_abpc_in_range_and_symmetric(scores, data):
    y = np.array(scores)
    s = np.arange(y.size) % 2
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        value = abpc(y, sensitive_features=s)
        swapped = abpc(y, sensitive_features=1 - s)
    assert np.isnan(value) or 0.0 <= value <= 2.0 + 1e-9
    assert np.isnan(value) == np.isnan(swapped)
    assert np.isnan(value) or value == pytest.approx(swapped, abs=1e-12)


# ------------------------------------------------------------------ ABPC


@pytest.mark.parametrize("case", GOLDEN)
def test_abpc_compat_reproduces_reference_golden_values(case):
    (a, b), _, _, reference = GOLDEN[case]
    y, s = two(a, b)
    assert abpc(y, sensitive_features=s, compat="paper") == pytest.approx(reference, abs=1e-10)


def test_abpc_compat_paper_toy2():
    assert abpc(TOY2_Y, sensitive_features=TOY2_S, compat="paper") == pytest.approx(
        0.4594590131419566, abs=1e-12)


def test_abpc_identical_groups_exactly_zero():
    g = np.random.default_rng(2).beta(2, 3, 300)
    y, s = two(g, g[::-1])
    assert abpc(y, sensitive_features=s) == 0.0


def test_abpc_compat_identical_groups_zero():
    g = np.random.default_rng(2).beta(2, 3, 300)
    y, s = two(g, g[::-1])  # the reference sums in row order: zero up to round-off
    assert abpc(y, sensitive_features=s, compat="paper") == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(("d0", "d1", "n0", "n1"), [
    (stats.beta(2, 5), stats.beta(5, 2), 800, 500),
    (stats.beta(0.3, 3), stats.beta(3, 0.3), 600, 600),  # mass at the boundaries
    (stats.uniform(0, 0.5), stats.uniform(0.5, 0.5), 500, 700),
    (stats.norm(0.5, 0.01), stats.norm(0.52, 0.012), 30, 60),  # narrow: a fine grid
])
def test_abpc_fast_matches_direct_reflected_kde(d0, d1, n0, n1):
    rng = np.random.default_rng(11)
    a = np.clip(d0.rvs(n0, random_state=rng), 0, 1)
    b = np.clip(d1.rvs(n1, random_state=rng), 0, 1)
    x = (np.arange(5000) + 0.5) / 5000  # midpoint rule on a grid of >= 50 points per h
    direct = np.abs(direct_reflected(a, scott(a), x) - direct_reflected(b, scott(b), x)).mean()
    y, s = two(a, b)
    assert abpc(y, sensitive_features=s) == pytest.approx(direct, abs=1e-4)


def test_abpc_fast_equals_reference_away_from_the_boundaries():
    # G4 sits 4+ std from 0 and 1: reflection adds nothing, only the estimator differs
    y, s = two(*G4)
    assert abpc(y, sensitive_features=s) == pytest.approx(0.749547048455, abs=2e-5)


T15_SAMPLE = two(np.random.default_rng(5).beta(0.3, 3, 5000),
                 np.random.default_rng(6).beta(3, 0.3, 5000))


def test_abpc_reflection_recovers_boundary_mass():
    # spec §4 / T15: Beta(.3, 3) vs Beta(3, .3), population ABPC 1.894750
    y, s = T15_SAMPLE
    assert abpc(y, sensitive_features=s) == pytest.approx(1.894750, abs=0.015)


def test_abpc_reference_loses_boundary_mass():
    # the reference drops the kernel mass beyond 0 and 1: it even falls below the population
    # bound ABPC >= 2 ΔDP_c (= 2 * 2.7/3.3 = 1.636), as the paper's tables do (spec §2.6)
    y, s = T15_SAMPLE
    assert abpc(y, sensitive_features=s, compat="paper") < 2 * 2.7 / 3.3 - 0.1


def test_abpc_absolute_bandwidth():
    y, s = two(quantiles(stats.beta(2, 5), 400), quantiles(stats.beta(5, 2), 400))
    a, b = y[s == 0], y[s == 1]
    x = (np.arange(5000) + 0.5) / 5000
    direct = np.abs(direct_reflected(a, 0.05, x) - direct_reflected(b, 0.05, x)).mean()
    assert abpc(y, sensitive_features=s, bandwidth=0.05) == pytest.approx(direct, abs=1e-5)


def test_abpc_silverman_bandwidth():
    a, b = quantiles(stats.beta(2, 5), 400), quantiles(stats.beta(5, 2), 300)
    x = (np.arange(5000) + 0.5) / 5000
    h = lambda v: v.std(ddof=1) * (0.75 * v.size) ** -0.2  # noqa: E731
    direct = np.abs(direct_reflected(a, h(a), x) - direct_reflected(b, h(b), x)).mean()
    y, s = two(a, b)
    assert abpc(y, sensitive_features=s, bandwidth="silverman") == pytest.approx(direct, abs=1e-4)


def test_abpc_constant_group_is_nan_with_reason():
    with pytest.warns(UndefinedMetricWarning, match=r"group 1 .* constant scores \(all 0.5\)"):
        value = abpc(TOY1_Y, sensitive_features=TOY1_S)
    assert np.isnan(value)


def test_abpc_constant_group_defined_with_absolute_bandwidth():
    value = abpc(TOY1_Y, sensitive_features=TOY1_S, bandwidth=0.05)
    assert 0.0 < value < 2.0


def test_abpc_single_score_group_is_nan_with_reason():
    with pytest.warns(UndefinedMetricWarning, match="single score"):
        value = abpc([0.1, 0.2, 0.3], sensitive_features=[0, 0, 1])
    assert np.isnan(value)


@pytest.mark.parametrize("compat", [None, "paper"])
def test_abpc_near_constant_scores_are_guarded_not_aliased(compat):
    # spec §4: std 1e-6, n = 5000 per group; the reference returns 0.0000 or 2.0199 (> 2!)
    rng = np.random.default_rng(6)
    y, s = two(0.5 + 1e-6 * rng.standard_normal(5000), 0.5 + 1e-6 * rng.standard_normal(5000))
    with pytest.warns(UndefinedMetricWarning, match="nearly constant"):
        value = abpc(y, sensitive_features=s, compat=compat)
    assert np.isnan(value)


def test_abpc_near_constant_group_left_out_of_three():
    rng = np.random.default_rng(8)
    a, b = rng.beta(2, 5, 300), rng.beta(5, 2, 300)
    y = np.concatenate([a, b, 0.5 + 1e-7 * rng.standard_normal(300)])
    s = np.repeat(["a", "b", "c"], 300)
    with pytest.warns(GroupExclusionWarning, match="'c'.*nearly constant"):
        value = abpc(y, sensitive_features=s)
    pair_y, pair_s = two(a, b)
    assert value == abpc(pair_y, sensitive_features=pair_s)


def test_abpc_small_bandwidth_refines_the_grid():
    # h ~ 9e-6: the grid stops at 2^20 cells, ~9.5 per bandwidth, and still matches direct
    rng = np.random.default_rng(9)
    a, b = 0.5 + 3e-5 * rng.standard_normal(400), 0.50006 + 3e-5 * rng.standard_normal(400)
    lo, hi = 0.4997, 0.50036
    x = lo + (np.arange(6000) + 0.5) * (hi - lo) / 6000
    direct = np.abs(direct_reflected(a, scott(a), x) - direct_reflected(b, scott(b), x)).mean()
    y, s = two(a, b)
    assert grid_size(min(scott(a), scott(b))) == 1 << 20
    assert abpc(y, sensitive_features=s) == pytest.approx(direct * (hi - lo), abs=2e-4)


@pytest.mark.parametrize("bandwidth", [0.0, -0.1, np.nan, np.inf, True, "wide", [0.1], 1e-6])
def test_abpc_bad_bandwidth(bandwidth):
    with pytest.raises(InvalidInputError, match="bandwidth"):
        abpc(TOY2_Y, sensitive_features=TOY2_S, bandwidth=bandwidth)


def test_abpc_bad_compat():
    with pytest.raises(InvalidInputError, match="compat"):
        abpc(TOY2_Y, sensitive_features=TOY2_S, compat="ffb")


def test_abpc_pair_value_does_not_depend_on_other_groups():
    rng = np.random.default_rng(10)
    a, b, c = rng.beta(2, 5, 200), rng.beta(3, 3, 250), 0.5 + 0.001 * rng.standard_normal(5000)
    y = np.concatenate([a, b, c])
    s = np.repeat([0, 1, 2], [200, 250, 5000])
    pm = pairwise_matrix(y, sensitive_features=s, metric="abpc")
    alone = abpc(np.concatenate([a, b]), sensitive_features=s[:450])
    assert pm.matrix[0, 1] == alone


# ------------------------------------------------------------------ pairwise_matrix, registry


@pytest.mark.parametrize("metric", ["abcc", "abpc"])
@pytest.mark.parametrize("agg", ["max", "mean"])
def test_pairwise_matrix_aggregates_to_the_metric(metric, agg):
    rng = np.random.default_rng(12)
    y, s = rng.beta(2, 3, 600), rng.integers(0, 4, 600)
    pm = pairwise_matrix(y, sensitive_features=s, metric=metric)
    func = abcc if metric == "abcc" else abpc
    assert isinstance(pm, PairwiseMatrix)
    assert pm.aggregate(agg) == func(y, sensitive_features=s, agg=agg)


def test_pairwise_matrix_is_symmetric_with_zero_diagonal():
    rng = np.random.default_rng(13)
    pm = pairwise_matrix(rng.random(300), sensitive_features=rng.integers(0, 5, 300))
    assert np.array_equal(pm.matrix, pm.matrix.T)
    assert np.all(np.diag(pm.matrix) == 0)


def test_pairwise_matrix_passes_options():
    pm = pairwise_matrix(TOY1_Y, sensitive_features=TOY1_S, metric="abpc", bandwidth=0.05)
    assert pm.matrix[0, 1] == abpc(TOY1_Y, sensitive_features=TOY1_S, bandwidth=0.05)


def test_pairwise_matrix_unknown_option():
    with pytest.raises(InvalidInputError, match="unknown option.*'agg'"):
        pairwise_matrix(TOY1_Y, sensitive_features=TOY1_S, agg="max")


def test_pairwise_matrix_unknown_metric():
    with pytest.raises(InvalidInputError, match="'metric' parameter of pairwise_matrix"):
        pairwise_matrix(TOY1_Y, sensitive_features=TOY1_S, metric="kl")


def test_pairwise_matrix_single_group_is_none():
    with pytest.warns(UndefinedMetricWarning):
        assert pairwise_matrix([0.1, 0.2], sensitive_features=[1, 1]) is None


@pytest.mark.parametrize(("name", "upper"), [("abcc", 1.0), ("abpc", 2.0)])
def test_registered(name, upper):
    spec = METRICS[name]
    assert (spec.inputs, spec.direction, spec.lower, spec.upper) == (
        ("y_score",), "lower_is_fairer", 0.0, upper)


# --------------------------------------------------------------------------- compiled kernels
# The numpy versions the compiled kernels replaced, kept as oracles: ABCC's W1 sum, ABPC's
# linear binning and its bandwidth's std. The kernels sum in their own order (issue 27 dropped
# the copy of numpy's pairwise summation): the values agree to a stated tolerance, 1e-12
# relative (round-off of sums of <= 10^5 terms), and exactly where every sum is exact.

_ORACLE_BLOCK, _ORACLE_BIN_BLOCK = 1 << 14, 1 << 16


def _numpy_w1_sorted(a, b, exact_units=float(1 << 52)):
    """The former block-wise numpy ``_w1_sorted``; ``exact_units=0`` forces its int64 branch."""
    import math

    if a.size == b.size:
        return float(np.abs(a - b).mean())
    x, y = (a, b) if a.size > b.size else (b, a)
    n, m = x.size, y.size
    g = math.gcd(n, m)
    total_units = float(n) * (m // g)
    exact_float = total_units < exact_units
    dtype = np.float64 if exact_float else np.int64
    ux, uy = dtype(m // g), dtype(n // g)
    width = min(_ORACLE_BLOCK, n)
    offsets = np.arange(width, dtype=dtype) * ux
    start, split, first = (np.empty(width, dtype) for _ in range(3))
    index, gap, gap_next = np.empty(width, np.intp), np.empty(width), np.empty(width)
    total = 0.0
    for lo in range(0, n, _ORACLE_BLOCK):
        w = min(_ORACLE_BLOCK, n - lo)
        s, sp, ln, ix, gp, gn = start[:w], split[:w], first[:w], index[:w], gap[:w], gap_next[:w]
        np.add(offsets[:w], dtype(lo) * ux, out=s)
        if exact_float:
            np.divide(s, uy, out=sp)
            np.floor(sp, out=sp)
        else:
            np.floor_divide(s, uy, out=sp)
        ix[...] = sp
        sp += 1
        sp *= uy
        np.subtract(sp, s, out=ln)
        np.minimum(ln, ux, out=ln)
        xs = x[lo:lo + w]
        np.take(y, ix, out=gp)
        np.subtract(xs, gp, out=gp)
        np.abs(gp, out=gp)
        gp *= ln
        total += float(gp.sum())
        ix += 1
        np.minimum(ix, m - 1, out=ix)
        np.take(y, ix, out=gn)
        np.subtract(xs, gn, out=gn)
        np.abs(gn, out=gn)
        np.subtract(ux, ln, out=ln)
        gn *= ln
        total += float(gn.sum())
    return total / total_units


def _numpy_linear_binning(scores, cells):
    """The former numpy ``linear_binning``: two weighted bincounts per block of 2^16 rows."""
    w = np.zeros(cells)
    for lo in range(0, scores.size, _ORACLE_BIN_BLOCK):
        u = scores[lo:lo + _ORACLE_BIN_BLOCK] * cells - 0.5
        left = np.floor(u)
        frac = u - left
        left_i = left.astype(np.intp)
        w += np.bincount(np.clip(left_i, 0, cells - 1), weights=1.0 - frac, minlength=cells)
        w += np.bincount(np.clip(left_i + 1, 0, cells - 1), weights=frac, minlength=cells)
    return w


def _bits(value):
    return np.asarray(value, dtype=np.float64).view(np.uint64)


def _sorted_sample(rng, n, decimals):
    """Sorted scores with ties (rounded), exact 0 and 1 at the ends when there is room."""
    values = np.round(rng.beta(rng.uniform(.3, 4), rng.uniform(.3, 4), n), decimals)
    if n >= 3:
        values[:2] = rng.permutation([0.0, 1.0])
    return np.sort(values)


# n == m, coprime, tiny groups, one or many blocks of the ABCC sum (2^14 steps) and of numpy's
# pairwise leaves (128 terms; fewer than 8)
W1_SIZES = [(1, 1), (1, 2), (2, 3), (3, 1), (3, 3), (7, 5), (8, 9), (127, 128), (129, 100),
            (1000, 1000), (1001, 999), (16384, 3), (16385, 16384), (40000, 39999),
            (50021, 70001), (100003, 2)]


@pytest.mark.parametrize(("n_a", "n_b"), W1_SIZES)
@pytest.mark.parametrize("decimals", [1, 3, 17])
def test_compiled_w1_equals_numpy(n_a, n_b, decimals):
    from fairmonitor.metrics._abpc_abcc.areas import _w1_sorted

    rng = np.random.default_rng([n_a, n_b, decimals])
    a, b = _sorted_sample(rng, n_a, decimals), _sorted_sample(rng, n_b, decimals)
    expected = _numpy_w1_sorted(a, b)
    assert _w1_sorted(a, b) == pytest.approx(expected, rel=1e-12, abs=0)
    assert _bits(_w1_sorted(b, a)) == _bits(_w1_sorted(a, b))  # symmetric by construction
    if n_a != n_b:  # the oracle's int64 branch (lcm >= 2^52 units) gives the same bits too
        assert _bits(_numpy_w1_sorted(a, b, exact_units=0.0)) == _bits(expected)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_a=st.integers(1, 3000), n_b=st.integers(1, 3000),
       decimals=st.sampled_from([0, 1, 2, 17]))
def test_compiled_w1_equals_numpy_random_sizes(seed, n_a, n_b, decimals):
    from fairmonitor.metrics._abpc_abcc.areas import _w1_sorted

    rng = np.random.default_rng(seed)
    a, b = _sorted_sample(rng, n_a, decimals), _sorted_sample(rng, n_b, decimals)
    assert _w1_sorted(a, b) == pytest.approx(_numpy_w1_sorted(a, b), rel=1e-12, abs=0)


def test_compiled_w1_beyond_2_52_units_is_exact():
    # lcm(n, m) > 2^52 units, where float64 unit arithmetic would round: the integer steps stay
    # exact. Constant samples (broadcast views: no memory) 1/2 apart make every term a multiple
    # of 1/2 below 2^53, so the sum is exact and the value exactly 1/2.
    import math

    from fairmonitor.metrics._abpc_abcc.areas import _w1_sorted

    n, m = 2**26 + 3, 2**26 + 1
    assert math.gcd(n, m) == 1 and n * m > 2**52
    x, y = np.broadcast_to(0.75, n), np.broadcast_to(0.25, m)
    assert _w1_sorted(x, y) == 0.5
    assert _w1_sorted(y, x) == 0.5


def _fsum_std(values, ddof):
    """The two-pass std with correctly rounded sums (math.fsum): the compensated kernel's."""
    import math

    mean = math.fsum(values) / values.size
    return math.sqrt(math.fsum((values - mean) ** 2) / (values.size - ddof))


def test_compiled_is_sorted_and_std_equal_numpy():
    from fairmonitor._kernels import abcc as compiled

    rng = np.random.default_rng(15)
    for n in (2, 3, 7, 8, 9, 128, 129, 1023, 1024, 1025, 2049, 100003):
        for values in (rng.random(n), np.round(rng.random(n), 1), np.full(n, 0.5),
                       np.sort(rng.random(n)), rng.random(2 * n)[::2]):
            assert compiled.is_sorted(values) == bool(np.all(values[1:] >= values[:-1]))
            for ddof in (0, 1):
                got = compiled.std(values, ddof)
                # numpy's pairwise sums to round-off; correctly rounded sums to one ulp
                assert got == pytest.approx(values.std(ddof=ddof), rel=1e-13, abs=0)
                assert got == pytest.approx(_fsum_std(values, ddof), rel=2.0**-52, abs=0)
    descent = np.arange(3000.0)
    descent[2047] = -1.0  # the only descent, in the second block of 1024
    assert not compiled.is_sorted(descent)


@pytest.mark.parametrize("n", [2, 3, 300, 1001, 100003])
def test_compiled_std_does_not_depend_on_the_row_order(n):
    # compensated sums: a group's bandwidth is the same whatever the order of its rows, so
    # identical groups give ABPC exactly 0 (test_abpc_identical_groups_exactly_zero)
    from fairmonitor._kernels import abcc as compiled

    rng = np.random.default_rng(n)
    for values in (rng.beta(2, 3, n), np.round(rng.random(n), 2), rng.random(n) * 1e-3 + 0.5):
        want = _bits(compiled.std(values, 1))
        for other in (values[::-1], np.sort(values), rng.permutation(values)):
            assert _bits(compiled.std(other, 1)) == want


@pytest.mark.parametrize("n", [0, 1, 2, 3, 100, 65535, 65536, 65537, 200001])
@pytest.mark.parametrize("cells", [1024, 4096, 1 << 20])
def test_compiled_linear_binning_equals_numpy(n, cells):
    # each cell's left and right weights added in row order; the oracle sums the left and the
    # right weights apart, per block of 2^16 rows: the same terms, to round-off
    from fairmonitor.metrics._abpc_abcc.kde import linear_binning

    rng = np.random.default_rng([n, cells])
    values = np.round(rng.beta(2, 5, n), 3)  # ties
    values[: min(n, 2)] = [0.0, 1.0][: min(n, 2)]
    for scores in (values, np.sort(values), np.sort(values)[::-1], rng.random(n)):
        got = linear_binning(scores, cells)
        np.testing.assert_allclose(got, _numpy_linear_binning(scores, cells), rtol=1e-12,
                                   atol=1e-12)


@pytest.mark.parametrize("metric", [abcc, abpc])
@pytest.mark.parametrize("groups", [2, 6])
def test_score_metrics_read_the_callers_scores_without_writing(metric, groups):
    # the scores are validated without a copy (check_scores(copy=False)): no path may write
    # into them, with or without a group left out (min_group_size)
    rng = np.random.default_rng(16)
    y = rng.random(400)
    y[:3] = [-0.0, 0.0, 1.0]
    s = np.arange(400) % groups
    s[-1] = groups  # a one-row group
    before = y.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupExclusionWarning)
        metric(y, sensitive_features=s)
        metric(y, sensitive_features=s, min_group_size=2)
    assert np.array_equal(y.view(np.uint64), before.view(np.uint64))
