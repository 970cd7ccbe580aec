"""MADD (spec madd.md): known answers, cross-check values, the paper's simulation, edge cases.

Expected values come from the spec: §5 (small cases, verified against maddlib 1.1.0), §3.7.1
(synthetic beta inputs: fixed bandwidths and maddlib's "auto"), §7 (the paper's Algorithm 1
reconstructed: cases A-D) and §2.2 (the paper's simulated data).
"""

from __future__ import annotations

import importlib
import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairmonitor import InvalidInputError, UndefinedMetricWarning
from fairmonitor.exceptions import GroupExclusionWarning
from fairmonitor.metrics import MADDResult, madd, madd_h_sup
from fairmonitor.metrics._madd.bandwidth import _edge_counts, _grid
from fairmonitor.metrics._matrix import pairwise_matrix
from fairmonitor.report import Window, evaluate_window
from fairmonitor.report.registry import get_metric

ABS = 1e-12


def two(p0, p1, **kw):
    """MADD value between two groups given as separate arrays."""
    p0, p1 = np.atleast_1d(np.asarray(p0, float)), np.atleast_1d(np.asarray(p1, float))
    groups = np.r_[np.zeros(p0.size, int), np.ones(p1.size, int)]
    return madd(np.r_[p0, p1], sensitive_features=groups, **kw)


# --------------------------------------------------------------------------- spec §5


@pytest.mark.parametrize(("p0", "p1", "h", "expected"), [
    ([0.1, 0.5, 0.9], [0.1, 0.5, 0.9], 0.1, 0.0),  # T1 identical
    ([0.2] * 5, [0.8] * 7, 0.1, 2.0),  # T2 disjoint bins
    ([0.1, 0.2, 0.33], [0.5, 0.2], 0.05, 4 / 3),  # T3
    ([0.5, 0.2], [0.1, 0.2, 0.33], 0.05, 4 / 3),  # T3 swapped
    ([0.05, 0.15, 0.25, 0.35], [0.05, 0.05, 0.15, 0.95], 0.1, 1.0),  # T4
    ([0.05, 0.15, 0.25, 0.35], [0.05, 0.05, 0.15, 0.95], 0.5, 0.5),
    ([0.05, 0.15, 0.25, 0.35], [0.05, 0.05, 0.15, 0.95], 1.0, 0.0),
    ([0.1, 0.1, 0.1, 0.9], [0.1, 0.9], 0.5, 0.5),  # T5 unequal sizes
    ([0.3], [0.25], 0.1, 0.0),  # T6: 0.3 falls in [0.2, 0.3) (edge 0.30000000000000004)
    ([0.3], [0.35], 0.1, 2.0),  # T7
    ([1.0], [0.95], 0.1, 0.0),  # T8 last bin closed
    ([0.0], [0.05], 0.1, 0.0),  # T9 first bin
    ([0.3], [0.7], 0.1, 2.0),  # T10 singletons
])
def test_spec_small_cases(p0, p1, h, expected):
    assert two(p0, p1, bandwidth=h).value == pytest.approx(expected, abs=ABS)


def test_t11_singleton_against_uniform():
    uniform = np.random.default_rng(0).uniform(size=1000)
    assert two([0.55], uniform, bandwidth=0.1).value == pytest.approx(1.7840000000000003, abs=ABS)


def test_t12_one_bin_is_always_zero(rng):
    assert two(rng.beta(2, 5, 50), rng.beta(5, 2, 70), bandwidth=1.0).value == 0.0


def test_t13_constant_groups_paper_mode_averages_coarse_bins_too():
    # spec T13 (2.0) is maddlib's "auto"; the paper's minimum width 0.45 * h_sup = 0.33 for
    # 10 + 10 rows forces the interval up to h = 1/3, i.e. m = 499..3, and at m = 3, 5, 6, 7,
    # 10, 11, 15 both constants share a bin (MADD 0)
    r = two([0.2] * 10, [0.25] * 10)
    per_m = [2.0 * np.any(np.histogram([0.2], m, (0, 1))[0] != np.histogram([0.25], m, (0, 1))[0])
             for m in range(3, 500)]
    assert (*r.interval, r.value) == pytest.approx((1 / 499, 1 / 2, np.mean(per_m)), abs=ABS)


def test_t13_constant_groups_in_different_bins_compat():
    assert two([0.2] * 10, [0.25] * 10, compat="maddlib").value == pytest.approx(2.0, abs=ABS)


def test_t14_identical_constants_auto():
    assert two([0.5] * 100, [0.5] * 50).value == 0.0


def test_constant_groups_depend_on_the_bandwidth():
    assert two([0.2], [0.25], bandwidth=0.1).value == 0.0


def test_constant_groups_split_at_fine_bandwidth():
    assert two([0.2], [0.25], bandwidth=0.01).value == 2.0


DT_LIKE = ([0, 0, 0.5, 1, 1, 1], [0, 0.5, 0.5, 0.5, 1, 1 / 3])


@pytest.mark.parametrize("h", [0.1, 0.01, "auto"])
def test_discrete_scores_are_flat_in_h(h):
    assert two(*DT_LIKE, bandwidth=h).value == pytest.approx(1.0, abs=ABS)


@pytest.mark.parametrize(("h", "bins"), [(0.3, 3), (0.34, 2), (0.022, 45), (0.1, 10), (1.0, 1)])
def test_bins_are_floor_of_one_over_h(h, bins):
    assert two([0.1], [0.9], bandwidth=h).n_bins == bins


def test_n_bins_equals_the_matching_bandwidth(rng):
    p0, p1 = rng.beta(2, 5, 300), rng.beta(3, 3, 200)
    assert two(p0, p1, n_bins=45).value == two(p0, p1, bandwidth=0.022).value


def test_fixed_result_fields():
    r = two([0.1, 0.2, 0.33], [0.5, 0.2], bandwidth=0.05)
    assert (r.n_bins, r.bandwidth, r.interval, r.worst.counts) == (20, 0.05, None, (3, 2))


def test_float_of_result_is_the_value():
    r = two([0.1, 0.2, 0.33], [0.5, 0.2], bandwidth=0.05)
    assert float(r) == r.value


# --------------------------------------------------------------------------- spec §3.7.1


def _cases():
    np.random.seed(0)  # the spec's legacy-seeded case A
    a0, a1 = np.random.beta(2, 5, 1000), np.random.beta(5, 2, 1000)
    np.random.seed(None)
    r = np.random.default_rng(42)
    b0, b1 = r.beta(2, 2, 1000), r.beta(2.5, 2, 1000)
    r = np.random.default_rng(7)
    c0, c1 = r.beta(2, 5, 5000), r.beta(3, 4, 300)
    r = np.random.default_rng(123)
    d0, d1 = r.beta(2, 3, 1000), r.beta(2, 3, 1000)
    return {"A": (a0, a1), "B": (b0, b1), "C": (c0, c1), "D": (d0, d1)}


CASES = _cases()

FINGERPRINTS = {  # first value and sum of each array (spec §3.7.1, numpy 2.4.6)
    "A": ((0.47917137864, 292.60477008878627), (0.75158747115, 710.5999035753425)),
    "B": ((0.42454802689, 503.1722477085144), (0.164623512051, 552.8895926353432)),
    "C": ((0.289255348502, 1434.1500469118023), (0.332296190785, 128.47032072896)),
    "D": ((0.113557006488, 406.33312673683326), (0.511783468489, 397.49900393499087)),
}


@pytest.mark.parametrize("case", "ABCD")
def test_cross_check_inputs_match_the_spec_fingerprints(case):
    got = [value for p in CASES[case] for value in (p[0], p.sum())]
    expected = [value for pair in FINGERPRINTS[case] for value in pair]
    assert got == pytest.approx(expected, abs=1e-10)


BANDWIDTHS = [1.0, 0.5, 0.1, 0.05, 0.02, 0.01, 0.005, 0.001]
FIXED = {
    "A": [0.0, 1.548, 1.548, 1.5480000000000003, 1.5519999999999998, 1.5659999999999996, 1.582,
          1.6780000000000002],
    "B": [0.0, 0.19199999999999995, 0.20800000000000002, 0.23000000000000004,
          0.32200000000000006, 0.35600000000000004, 0.498, 1.0220000000000002],
    "C": [0.0, 0.476, 0.7182666666666666, 0.7190666666666666, 0.7481333333333334,
          0.7701333333333333, 0.8766666666666668, 1.3549333333333335],
    "D": [0.0, 0.020000000000000018, 0.11600000000000002, 0.18399999999999997, 0.266,
          0.3480000000000001, 0.49800000000000005, 0.9980000000000002],
}


@pytest.mark.parametrize(("case", "k"), list(itertools.product("ABCD", range(len(BANDWIDTHS)))))
def test_fixed_bandwidth_equals_maddlib(case, k):
    assert two(*CASES[case], bandwidth=BANDWIDTHS[k]).value == pytest.approx(FIXED[case][k],
                                                                             abs=ABS)


COMPAT_AUTO = {"A": 1.5555873015873016, "B": 0.2759607843137255, "C": 0.7392078431372548,
               "D": 0.25007843137254904}
COMPAT_STD = {"A": 0.004620983612172278, "B": 0.02712206307173564, "C": 0.015877074891573993,
              "D": 0.045912040002021814}
COMPAT_INTERVAL = {"A": (0.013, 0.067), "B": (0.015, 0.067), "C": (0.015, 0.067),
                   "D": (0.015, 0.067)}


@pytest.mark.parametrize("case", "ABCD")
def test_compat_auto_equals_maddlib(case):
    assert two(*CASES[case], compat="maddlib").value == pytest.approx(COMPAT_AUTO[case], abs=ABS)


@pytest.mark.parametrize("case", "ABCD")
def test_compat_auto_std_equals_maddlib(case):
    r = two(*CASES[case], compat="maddlib")
    assert r.worst.interval_std == pytest.approx(COMPAT_STD[case], abs=1e-12)


@pytest.mark.parametrize("case", "ABCD")
def test_compat_interval_prints_as_maddlib(case):
    lo, hi = two(*CASES[case], compat="maddlib").interval
    assert (round(lo, 3), round(hi, 3)) == COMPAT_INTERVAL[case]


PAPER_AUTO = {"A": 1.5549253731343284, "B": 0.26725490196078433, "C": 0.733030065359477,
              "D": 0.23894117647058824}


@pytest.mark.parametrize("case", "ABCD")
def test_paper_auto_equals_the_spec_reconstruction(case):
    assert two(*CASES[case]).value == pytest.approx(PAPER_AUTO[case], abs=ABS)


@pytest.mark.parametrize("case", "ABCD")
def test_paper_auto_is_the_same_on_a_1000_bandwidth_grid(case):
    assert two(*CASES[case], max_bins=1000).value == pytest.approx(PAPER_AUTO[case], abs=ABS)


def test_paper_auto_interval_case_a():
    # indexes (421, 487) of the 499-grid: m = 78 .. 12, i.e. h in [1/78, 1/11)
    assert two(*CASES["A"]).interval == (1 / 78, 1 / 11)


def test_h_sup_matches_the_spec():
    assert (madd_h_sup(1000, 1000), madd_h_sup(5000, 300)) == pytest.approx(
        (0.15874010519681997, 0.1728730454550777), abs=1e-15)


def test_h_sup_paper_example():
    assert madd_h_sup(10_000, 10_000) == pytest.approx(0.07368062997280773, abs=1e-15)


def test_auto_representative_bins_lie_in_the_interval():
    r = two(*CASES["B"])
    lo, hi = r.interval
    assert lo <= r.bandwidth < hi


def test_auto_representative_bins_reproduce_the_value_closely():
    r = two(*CASES["B"])
    assert abs(two(*CASES["B"], n_bins=r.n_bins).value - r.value) <= r.worst.interval_std


# --------------------------------------------------------------------------- paper simulation


SIM_FIXED = {(0, 1): [1.1929999999999998, 1.1929999999999998, 1.1963999999999997,
                      1.1985999999999999],
             (0, 0): [1.183, 1.1829999999999996, 1.1933999999999998, 1.194]}


@pytest.mark.parametrize("seeds", [(0, 1), (0, 0)])
def test_paper_simulation_fixed_bandwidths(seeds, madd_paper_scores):
    p0, p1 = madd_paper_scores(*seeds)
    got = [two(p0, p1, bandwidth=h).value for h in (0.1, 0.05, 0.02, 0.01)]
    assert got == pytest.approx(SIM_FIXED[seeds], abs=ABS)


@pytest.mark.parametrize("max_bins", [1000, 499])
def test_paper_simulation_stable_interval(max_bins, madd_paper_scores):
    r = two(*madd_paper_scores(0, 1), max_bins=max_bins)
    assert tuple(round(h, 3) for h in r.interval) == (0.007, 0.04)  # paper: [0.007, 0.040]


def test_paper_simulation_stable_value(madd_paper_scores):
    # paper: 1.19; the spec's run of maddlib's find_stable_interval on the same interval gives
    # 1.1979560975609753, which evaluates floor(1/(1/m)) bins (92 for 93, ...): within 2e-6
    r = two(*madd_paper_scores(0, 1), max_bins=1000)
    assert r.value == pytest.approx(1.1979560975609753, abs=2e-6)


def test_paper_simulation_interval_lies_before_h_sup(madd_paper_scores):
    r = two(*madd_paper_scores(0, 1))
    assert r.interval[1] < r.h_sup


def test_paper_simulation_other_seeds(madd_paper_scores):
    r = two(*madd_paper_scores(0, 0), max_bins=1000)
    assert (round(r.interval[0], 3), round(r.value, 4)) == (0.006, 1.1944)


# --------------------------------------------------------------------------- fast all-m counts


def test_edge_counts_equal_numpy_histogram_on_edge_valued_scores(rng):
    scores = np.r_[np.round(rng.random(3000) * 20) / 20, np.linspace(0, 1, 101), 0.3, 0.6, 0.7,
                   1 / 3, 2 / 3, rng.random(500)]
    grid = _grid(499, None)
    expected = np.concatenate([np.histogram(scores, m, (0, 1))[0] for m in grid.bins])
    assert np.array_equal(_edge_counts(np.sort(scores), grid), expected)


def _edge_valued_scores(rng, m):
    """Random scores plus every edge value of m bins (numpy's edges, k/m, k*(1/m), their float
    neighbours), 0.0 and 1.0, shuffled."""
    k = np.arange(m + 1) if m <= 5000 else np.r_[0, rng.integers(0, m + 1, 5000), m]
    edges = np.linspace(0.0, 1.0, m + 1)[k]
    exact = np.r_[edges, k / m, k * (1.0 / m), np.round(rng.random(500) * m) / m]
    exact = np.clip(np.r_[exact, np.nextafter(exact, 0.0), np.nextafter(exact, 1.0)], 0.0, 1.0)
    return rng.permutation(np.r_[exact, 0.0, 1.0, 1.0, rng.random(3000), rng.beta(2, 5, 1000)])


def _check_histograms_by_group(rng, m, k, dtype):
    from fairmonitor._kernels.madd import histograms_by_group
    from fairmonitor.utils.groups import Groups

    module = importlib.import_module("fairmonitor.metrics._madd.madd")
    scores = _edge_valued_scores(rng, m)
    codes = rng.integers(-1, k, scores.size).astype(dtype)  # -1: rows of an excluded group
    expected = np.array([np.histogram(scores[codes == g], m, (0, 1))[0] for g in range(k)])
    compiled = histograms_by_group(scores, codes, m, k, np.linspace(0.0, 1.0, m + 1))
    assert compiled.dtype == np.int64 and np.array_equal(compiled, expected)
    groups = Groups(codes, tuple(range(k)), np.bincount(codes[codes >= 0], minlength=k), "g",
                    {"left out": int(np.sum(codes < 0))})
    assert np.array_equal(module._histograms_by_group(groups, scores, m), expected)


@pytest.mark.parametrize("m", [1, 2, 3, 7, 10, 20, 49, 100, 333, 1000])
@pytest.mark.parametrize("k", [1, 2, 3, 7])
@pytest.mark.parametrize("dtype", [np.intp, np.int16, np.int8])
def test_fixed_histograms_by_group_equal_numpy_histogram(rng, m, k, dtype):
    _check_histograms_by_group(rng, m, k, dtype)


@pytest.mark.parametrize("m", [65537, 999_983, 10**6])
def test_fixed_histograms_by_group_equal_numpy_histogram_with_many_bins(rng, m):
    _check_histograms_by_group(rng, m, 2, np.intp)


@pytest.mark.parametrize("n", [100, 2000, 300_000])  # one compiled pass at every size
def test_fixed_bandwidth_pairs_are_numpys_histogram_sums(rng, n):
    # exact by construction: numpy's histogram counts, then the reference package's
    # arithmetic (proportions c / n, np.sum of the gaps) in numpy itself
    scores = np.r_[_edge_valued_scores(rng, 20), rng.beta(2, 5, n)]
    groups = rng.integers(0, 4, scores.size)
    for h in (0.01, 0.05, 0.3, 1.0):
        for agg in ("max", "mean"):
            r = madd(scores, sensitive_features=groups, bandwidth=h, agg=agg)
            for pair in r.pairs:
                a, b = (scores[groups == g] for g in pair.groups)
                d = [np.histogram(p, pair.n_bins, (0, 1))[0] / p.size for p in (a, b)]
                assert pair.value == float(np.sum(np.abs(d[0] - d[1])))


def test_compat_grid_uses_maddlibs_bin_counts():
    # spec §3.3 (i): floor(1/(1/m)) = m - 1 for these 33 values of m in 1..499
    quirks = [93, 99, 105, 117, 123, 186, 198, 210, 211, 221, 227, 234, 243, 245, 246, 372, 391,
              393, 396, 415, 420, 422, 442, 445, 454, 459, 468, 483, 486, 489, 490, 492, 497]
    nominal = np.arange(499, 0, -1)
    bins = _grid(499, "maddlib").bins
    assert sorted(nominal[bins != nominal].tolist()) == quirks


def test_compat_grid_uses_one_less_bin_at_the_quirks():
    nominal = np.arange(499, 0, -1)
    bins = _grid(499, "maddlib").bins
    assert np.array_equal(nominal[bins != nominal] - 1, bins[bins != nominal])


# --------------------------------------------------------------------------- edge cases (§4)


def test_single_group_is_nan_with_warning():
    with pytest.warns(UndefinedMetricWarning, match="single group"):
        r = madd([0.1, 0.2], sensitive_features=["a", "a"])
    assert math.isnan(r.value)


def test_single_group_result_has_no_pairs():
    with pytest.warns(UndefinedMetricWarning):
        r = madd([0.1, 0.2], sensitive_features=["a", "a"])
    assert (r.worst, r.pairs, r.matrix, r.n_bins, r.interval) == (None, (), None, None, None)


def test_groups_below_min_group_size_leave_nan():
    with pytest.warns(GroupExclusionWarning), pytest.warns(UndefinedMetricWarning,
                                                           match="min_group_size"):
        r = madd([0.1, 0.2, 0.3], sensitive_features=["a", "a", "b"], min_group_size=2)
    assert math.isnan(r.value)


def test_small_group_is_left_out_of_the_pairs():
    with pytest.warns(GroupExclusionWarning):
        r = madd([0.1, 0.2, 0.8, 0.9, 0.5], sensitive_features=list("aabbc"), n_bins=10,
                 min_group_size=2)
    assert (r.matrix.labels, r.value) == (("a", "b"), 2.0)


def test_column_vector_scores_are_flattened():
    r = madd(np.array([[0.2], [0.8]]), sensitive_features=[0, 1], n_bins=10)
    assert r.value == 2.0


def test_groups_align_by_position_not_dataframe_index():
    import pandas as pd

    frame = pd.DataFrame({"g": [0, 0, 1, 1]}, index=[0, 2, 1, 3])
    assert madd([0.1, 0.1, 0.9, 0.9], sensitive_features=frame, n_bins=10).value == 2.0


def test_score_round_off_above_one_is_accepted():
    assert two([1.0 + 1e-12], [0.95], bandwidth=0.1).value == 0.0


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_scores_raise(bad):
    with pytest.raises(InvalidInputError, match="NaN or infinite"):
        two([0.2, bad], [0.3])


@pytest.mark.parametrize("bad", [-0.5, 1.5])
def test_out_of_range_scores_raise(bad):
    with pytest.raises(InvalidInputError, match=r"must lie in \[0, 1\]"):
        two([bad, 0.2, 1.0], [0.2])  # maddlib would drop the value and return 0.0 (T15)


def test_length_mismatch_raises():
    with pytest.raises(InvalidInputError, match="rows"):
        madd([0.1, 0.2, 0.3], sensitive_features=[0, 1])


@pytest.mark.parametrize(("kw", "message"), [
    ({"bandwidth": 0}, r"\(0, 1\]"),
    ({"bandwidth": -0.1}, r"\(0, 1\]"),
    ({"bandwidth": 1.5}, r"\(0, 1\]"),
    ({"bandwidth": float("nan")}, r"\(0, 1\]"),
    ({"bandwidth": 1e-7}, "at least"),
    ({"bandwidth": "scott"}, "'bandwidth'"),
    ({"bandwidth": True}, "'auto' or a number"),
    ({"bandwidth": [0.1]}, "'auto' or a number"),
    ({"bandwidth": 0.1, "n_bins": 10}, "not both"),
    ({"n_bins": 0}, "n_bins"),
    ({"n_bins": 2.5}, "n_bins"),
    ({"n_bins": 10**7}, "at most"),
    ({"max_bins": 10}, "max_bins"),
    ({"max_bins": 5000}, "max_bins"),
    ({"compat": "paper"}, "'compat'"),
    ({"agg": "median"}, "'agg'"),
    ({"min_group_size": 0}, "min_group_size"),
])
def test_bad_options_raise(kw, message):
    with pytest.raises(InvalidInputError, match=message):
        madd([0.1, 0.9], sensitive_features=[0, 1], **kw)


# --------------------------------------------------------------------------- several groups


def _three_groups(rng):
    scores = np.r_[rng.beta(2, 5, 300), rng.beta(3, 3, 200), rng.beta(5, 2, 250)]
    labels = np.repeat(["x", "y", "z"], [300, 200, 250])
    return scores, labels


@pytest.mark.parametrize("bandwidth", [0.05, "auto"])
def test_max_is_the_worst_pair(rng, bandwidth):
    scores, labels = _three_groups(rng)
    pairs = [madd(scores[np.isin(labels, ab)], sensitive_features=labels[np.isin(labels, ab)],
                  bandwidth=bandwidth).value for ab in (("x", "y"), ("x", "z"), ("y", "z"))]
    assert madd(scores, sensitive_features=labels, bandwidth=bandwidth).value == max(pairs)


def test_mean_is_the_mean_over_pairs(rng):
    scores, labels = _three_groups(rng)
    r = madd(scores, sensitive_features=labels, agg="mean")
    assert r.value == pytest.approx(np.mean([p.value for p in r.pairs]), abs=ABS)


def test_worst_pair_is_labelled(rng):
    scores, labels = _three_groups(rng)
    r = madd(scores, sensitive_features=labels)
    assert (r.worst.groups, r.matrix.worst_pair()) == (("x", "z"), ("x", "z"))


def test_matrix_is_symmetric(rng):
    scores, labels = _three_groups(rng)
    m = madd(scores, sensitive_features=labels).matrix.matrix
    assert np.array_equal(m, m.T)


def test_matrix_has_zero_diagonal(rng):
    scores, labels = _three_groups(rng)
    m = madd(scores, sensitive_features=labels).matrix.matrix
    assert np.diag(m).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("agg", ["max", "mean"])
def test_pairwise_matrix_builder_matches_madd(rng, agg):
    scores, labels = _three_groups(rng)
    pm = pairwise_matrix(scores, sensitive_features=labels, metric="madd", bandwidth=0.05)
    assert pm.aggregate(agg) == madd(scores, sensitive_features=labels, bandwidth=0.05,
                                     agg=agg).value


def test_pairwise_matrix_builder_single_group_is_none_with_warning():
    with pytest.warns(UndefinedMetricWarning):
        assert pairwise_matrix([0.1, 0.2], sensitive_features=["a", "a"], metric="madd") is None


def test_intersection_groups(rng):
    scores = rng.random(400)
    sf = {"sex": rng.choice(["F", "M"], 400), "age": rng.choice(["old", "young"], 400)}
    r = madd(scores, sensitive_features=sf, n_bins=10)
    assert (r.attribute, len(r.pairs)) == ("sex:age", 6)


def test_one_vs_pooled_identity(rng):
    # MADD(k, pooled) = (1 - w_k) * MADD(k, rest), spec §4
    k, rest = rng.beta(2, 5, 300), rng.beta(4, 3, 500)
    pooled = np.r_[k, rest]
    assert two(k, pooled, n_bins=20).value == pytest.approx(
        (1 - 300 / 800) * two(k, rest, n_bins=20).value, abs=1e-12)


def test_null_expected_matches_the_noise_floor(rng):
    # spec §4 table: beta(2,3), 1000 + 1000, m = 10: analytic E = 0.0984, simulated mean 0.0981
    r = two(rng.beta(2, 3, 1000), rng.beta(2, 3, 1000), n_bins=10)
    assert r.null_expected == pytest.approx(0.0984, abs=0.003)


# --------------------------------------------------------------------------- registry, report


def test_registry_entry():
    spec = get_metric("madd")
    assert (spec.inputs, spec.direction, spec.lower, spec.upper, spec.unit, spec.field) == (
        ("y_score",), "lower_is_fairer", 0.0, 2.0, "density distance", "value")


def test_report_reads_the_value(rng):
    scores = np.r_[rng.beta(2, 5, 400), rng.beta(5, 2, 400)]
    sex = np.repeat(["F", "M"], 400)
    report = evaluate_window(Window({"sex": sex}, y_score=scores), metrics=["madd"])
    assert report.values[("madd", "sex")] == madd(scores, sensitive_features=sex).value


def test_report_passes_options(rng):
    scores = np.r_[rng.beta(2, 5, 400), rng.beta(5, 2, 400)]
    sex = np.repeat(["F", "M"], 400)
    report = evaluate_window(Window({"sex": sex}, y_score=scores), metrics=["madd"],
                             options={"madd": {"bandwidth": 0.01}})
    assert report.values[("madd", "sex")] == two(scores[:400], scores[400:], bandwidth=0.01).value


# --------------------------------------------------------------------------- properties

samples = st.tuples(st.integers(1, 60), st.integers(1, 60), st.integers(0, 2**32 - 1),
                    st.floats(0.3, 6), st.floats(0.3, 6))


def _draw(sizes):
    n0, n1, seed, a, b = sizes
    r = np.random.default_rng(seed)
    return r.beta(a, b, n0), r.beta(b, a, n1)


@settings(max_examples=60, deadline=None)
@given(sizes=samples, bandwidth=st.one_of(st.floats(1e-3, 1.0), st.just("auto")))
def test_property_range(sizes, bandwidth):
    assert 0.0 <= two(*_draw(sizes), bandwidth=bandwidth).value <= 2.0 + 1e-12


@settings(max_examples=40, deadline=None)
@given(sizes=samples, bandwidth=st.one_of(st.floats(1e-3, 1.0), st.just("auto")))
def test_property_symmetry(sizes, bandwidth):
    p0, p1 = _draw(sizes)
    assert two(p0, p1, bandwidth=bandwidth).value == pytest.approx(
        two(p1, p0, bandwidth=bandwidth).value, abs=ABS)


@settings(max_examples=30, deadline=None)
@given(sizes=samples)
def test_property_one_bin_is_zero(sizes):
    assert two(*_draw(sizes), n_bins=1).value == 0.0


@settings(max_examples=40, deadline=None)
@given(sizes=samples, m=st.integers(1, 40), k=st.integers(2, 5))
def test_property_refinement_never_decreases(sizes, m, k):
    p0, p1 = _draw(sizes)
    assert two(p0, p1, n_bins=k * m).value >= two(p0, p1, n_bins=m).value - 1e-12


@settings(max_examples=40, deadline=None)
@given(sizes=samples, m=st.integers(1, 30))
def test_property_half_madd_bounds_the_parity_gap(sizes, m):
    p0, p1 = _draw(sizes)
    gap = abs(np.mean(p0 >= 0.5) - np.mean(p1 >= 0.5))
    assert two(p0, p1, n_bins=2 * m).value / 2 >= gap - 1e-12


@settings(max_examples=40, deadline=None)
@given(sizes=samples, m=st.integers(1, 60), copies=st.integers(2, 4))
def test_property_duplicating_both_groups_changes_nothing(sizes, m, copies):
    p0, p1 = _draw(sizes)
    assert two(np.tile(p0, copies), np.tile(p1, copies), n_bins=m).value == pytest.approx(
        two(p0, p1, n_bins=m).value, abs=ABS)


@settings(max_examples=30, deadline=None)
@given(sizes=samples, bandwidth=st.sampled_from([0.1, 0.02, "auto"]))
def test_property_identical_groups_are_zero(sizes, bandwidth):
    p0, _ = _draw(sizes)
    assert two(p0, p0, bandwidth=bandwidth).value == 0.0


@settings(max_examples=30, deadline=None)
@given(sizes=samples, bandwidth=st.sampled_from([0.1, "auto"]))
def test_property_row_order_within_groups_is_irrelevant(sizes, bandwidth):
    p0, p1 = _draw(sizes)
    assert two(p0[::-1], np.sort(p1), bandwidth=bandwidth).value == two(
        p0, p1, bandwidth=bandwidth).value


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=2, max_size=8))
def test_property_bad_scores_raise_or_give_a_value_in_range(values):
    scores = np.array(values, dtype=float)
    groups = np.arange(scores.size) % 2
    ok = np.all(np.isfinite(scores)) and np.all((scores >= -1e-9) & (scores <= 1 + 1e-9))
    if ok:
        assert 0.0 <= madd(scores, sensitive_features=groups).value <= 2.0
    else:
        with pytest.raises(InvalidInputError):
            madd(scores, sensitive_features=groups)


def test_result_is_frozen():
    r = two([0.1], [0.9], n_bins=10)
    with pytest.raises(AttributeError):
        r.value = 0.0  # type: ignore[misc]


def test_result_type():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(two([0.1], [0.9]), MADDResult)


# --------------------------------------------------------------------------- compiled search
# The numpy versions the compiled kernels replaced, kept as oracles: on a given curve the
# interval search gives the numpy table's bits (the same running sums from each start); the
# curve's sums are the kernel's own (four partial sums, not numpy's pairwise order, issue 27),
# within 1e-12 of numpy's.


def _table_interval(h, values, min_length, *, extend):
    """The former N x N numpy table of ``_stable_interval`` (before issue 18)."""
    from fairmonitor.metrics._madd.bandwidth import _STD_TIE, MIN_POINTS

    n = h.size
    n_starts = int(np.count_nonzero(h <= h[-1] - min_length))
    starts = np.arange(n_starts)
    reach = np.searchsorted(h, h[:n_starts] + min_length, side="right") - 1
    if extend:
        first_end = np.maximum(reach, starts + MIN_POINTS)
    else:
        first_end = np.where(reach - starts >= MIN_POINTS, reach, n)
    if not (first_end < n).any():
        return None
    dev = np.triu(values[None, :] - values[:n_starts, None])
    s1 = np.cumsum(dev, axis=1)
    np.multiply(dev, dev, out=dev)
    s2 = np.cumsum(dev, axis=1)
    size = np.maximum(np.arange(1, n + 1)[None, :] - starts[:, None], 1).astype(np.float64)
    s1 /= size
    s2 /= size
    s1 *= s1
    s2 -= s1
    s2[np.arange(n)[None, :] < first_end[:, None]] = np.inf
    best = math.sqrt(max(float(s2.min()), 0.0))
    row, col = divmod(int(np.argmax(s2 <= (best + _STD_TIE) ** 2)), n)
    return row, col, math.sqrt(max(float(s2[row, col]), 0.0))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), max_bins=st.integers(51, 1000),
       compat=st.sampled_from([None, "maddlib"]), levels=st.sampled_from([0, 2, 4, 1000]),
       min_length=st.sampled_from([0.0, 0.01, 0.05, 0.2, 0.6]))
def test_compiled_interval_search_equals_the_numpy_table(seed, max_bins, compat, levels,
                                                         min_length):
    from fairmonitor.metrics._madd.bandwidth import _stable_interval

    grid = _grid(max_bins, compat)
    r = np.random.default_rng(seed)
    # flat runs (few levels) exercise the ties, smooth random walks the usual curves
    curve = r.random(grid.h.size) if levels == 0 else np.round(r.random(grid.h.size) * levels)
    if levels == 1000:
        curve = np.abs(np.cumsum(r.normal(0, 0.01, grid.h.size)))
    for extend in (True, False):
        expected = _table_interval(grid.h, curve, min_length, extend=extend)
        if expected is None:
            with pytest.raises(InvalidInputError, match="raise `max_bins`"):
                _stable_interval(grid.h, curve, min_length, extend=extend)
        else:
            assert _stable_interval(grid.h, curve, min_length, extend=extend) == expected


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_a=st.integers(1, 3000), n_b=st.integers(1, 3000),
       decimals=st.sampled_from([None, 1, 2, 3]))
def test_compiled_curve_equals_numpy_sums(seed, n_a, n_b, decimals):
    from fairmonitor._kernels.madd import madd_curve

    grid = _grid(499, None)
    r = np.random.default_rng(seed)
    a, b = np.sort(r.beta(2, 5, n_a)), np.sort(r.beta(5, 2, n_b))
    if decimals is not None:  # scores on the edges
        a, b = np.round(a, decimals), np.round(b, decimals)
    ca, cb = _edge_counts(a, grid), _edge_counts(b, grid)
    per_bin = np.abs(ca / n_a - cb / n_b)
    expected = [per_bin[lo:hi].sum()
                for lo, hi in zip(grid.start.tolist(), grid.stop, strict=True)]
    got = madd_curve(ca / n_a, cb / n_b, grid.start, grid.start + grid.bins)
    # a fixed-bandwidth call's value to round-off: <= 1000 terms, each <= 1, summed in
    # another order (issue 27 dropped the copy of numpy's pairwise order)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- compiled "auto"
# The numpy implementation of "auto" before the pair became one compiled call (issue 18,
# second pass), kept as the oracle: per-group counts by one searchsorted (or, for few scores,
# a bincount over the edges) and ``counts / n``; per pair the curve of np.sum per m, the numpy
# table's interval, np.mean, np.add.reduceat of the null terms and np.argmin. The kernel sums
# in its own order (issue 27): every MADDPair float within 1e-12 of the oracle's, the interval
# the same (the search's tie, 1e-12 on the std, absorbs the round-off), the bins the first
# grid point within round-off of the closest to the mean.


def _former_edge_counts(sorted_scores, grid):
    if sorted_scores.size * 8 < grid.edges.size:
        ahead = np.searchsorted(grid.edges, sorted_scores, side="right")
        below = np.cumsum(np.bincount(ahead, minlength=grid.edges.size + 1)[:-1])
    else:
        below = np.searchsorted(sorted_scores, grid.edges, side="left")
    below[-1] = sorted_scores.size
    return below[grid.hi] - below[grid.lo]


def _former_auto_pair(a, b, grid, compat):
    from fairmonitor.metrics._madd.bandwidth import (
        COMPAT_MIN_LENGTH,
        LENGTH_FRACTION,
        _null_terms,
    )

    n_a, n_b = a.size, b.size
    ca, cb = _former_edge_counts(np.sort(a), grid), _former_edge_counts(np.sort(b), grid)
    per_bin = np.abs(ca / n_a - cb / n_b)
    curve = np.array([per_bin[lo:hi].sum() for lo, hi in zip(grid.start, grid.stop, strict=True)])
    h_sup = madd_h_sup(n_a, n_b)
    if compat == "maddlib":
        found = _table_interval(grid.h, curve, COMPAT_MIN_LENGTH, extend=False)
    else:
        found = _table_interval(grid.h, curve, LENGTH_FRACTION * h_sup, extend=True)
    if found is None:
        return None
    i, j, std = found
    value = float(np.mean(curve[i : j + 1]))
    lo, hi = int(grid.start[i]), int(grid.stop[j])
    nulls = np.add.reduceat(_null_terms(ca[lo:hi], cb[lo:hi], n_a, n_b),
                            grid.start[i : j + 1] - lo)
    gaps = np.abs(curve[i : j + 1] - value)
    m = int(grid.bins[i + int(np.argmin(gaps))])
    upper = float(grid.h[j + 1]) if j + 1 < grid.h.size else 1.0
    # the bins within round-off of the closest to the mean (a flat curve has many)
    closest = {int(b) for b in grid.bins[i : j + 1][gaps <= gaps.min() + 1e-12]}
    return ((n_a, n_b), value, m, 1.0 / m, (float(grid.h[i]), upper), std, h_sup,
            float(np.mean(nulls)), closest)


def _kernel_scores(r, n, kind):
    """Scores that stress the kernels: smooth, on the grid's edges (ties), or 0 and 1 only."""
    if kind == "beta":
        return r.beta(2, 5, n)
    if kind == "edges":  # every value an edge k/m of some m, or a rounded one
        m = r.integers(1, 500, n)
        return np.where(r.random(n) < 0.5, np.round(r.random(n), 2),
                        np.array([np.linspace(0, 1, k + 1)[r.integers(0, k + 1)] for k in m]))
    return r.choice(np.array([0.0, 1.0]), n)  # the first and the closed last bin


@pytest.mark.parametrize("max_bins, compat", [(499, None), (499, "maddlib"), (1000, None),
                                              (51, None), (120, "maddlib")])
@pytest.mark.parametrize("n", [1, 2, 7, 50, 499, 5000, 70000])
@pytest.mark.parametrize("kind", ["beta", "edges", "zero_one"])
def test_edge_kernels_equal_the_former_counts(max_bins, compat, n, kind):
    from fairmonitor.metrics._madd.bandwidth import _edge_shares, _edges_below

    grid = _grid(max_bins, compat)
    scores = np.sort(_kernel_scores(np.random.default_rng(n), n, kind))
    expected = _former_edge_counts(scores, grid)
    assert np.array_equal(_edge_counts(scores, grid), expected)
    below = np.searchsorted(scores, grid.edges, side="left")
    below[-1] = n
    assert np.array_equal(_edges_below(scores, grid), below)
    share, _ = _edge_shares(scores, grid)
    assert share.tobytes() == (expected / n).tobytes()  # numpy's division, to the bit


@pytest.mark.parametrize("compat, max_bins", [(None, 499), ("maddlib", 499), (None, 1000),
                                              (None, 51), ("maddlib", 77)])
@pytest.mark.parametrize("sizes", [(1, 1), (1, 9), (3, 40), (10, 10), (200, 1000), (5000, 3000),
                                   (40000, 7), (2, 5, 300, 60)])
@pytest.mark.parametrize("kind", ["beta", "edges", "zero_one"])
def test_auto_pairs_equal_the_former_numpy_version(compat, max_bins, sizes, kind):
    r = np.random.default_rng(sum(sizes))
    parts = [_kernel_scores(r, n, kind) for n in sizes]
    if kind == "beta":
        parts = [np.clip(p + 0.1 * k, 0.0, 1.0) for k, p in enumerate(parts)]
    groups = np.repeat(np.arange(len(sizes)), sizes)
    grid = _grid(max_bins, compat)
    expected = [_former_auto_pair(parts[a], parts[b], grid, compat)
                for a, b in itertools.combinations(range(len(sizes)), 2)]
    if any(e is None for e in expected):
        with pytest.raises(InvalidInputError, match="raise `max_bins`"):
            madd(np.concatenate(parts), sensitive_features=groups, compat=compat,
                 max_bins=max_bins)
        return
    result = madd(np.concatenate(parts), sensitive_features=groups, compat=compat,
                  max_bins=max_bins)
    got = [(p.counts, p.value, p.n_bins, p.bandwidth, p.interval, p.interval_std, p.h_sup,
            p.null_expected) for p in result.pairs]
    for pair, want in zip(got, expected, strict=True):
        assert (pair[0], pair[4], pair[6]) == (want[0], want[4], want[6])  # sizes, interval, h_sup
        # the bins: the first grid point closest to the mean, up to round-off (exact ties are
        # settled by the first; numpy's argmin settles them by its own rounding)
        assert pair[2] in want[8] and pair[2] >= max(want[8]) and pair[3] == 1.0 / pair[2]
        assert pair[1] == pytest.approx(want[1], rel=0, abs=1e-12)  # value
        assert pair[5] == pytest.approx(want[5], rel=0, abs=1e-12)  # interval_std
        assert pair[7] == pytest.approx(want[7], rel=0, abs=1e-12)  # null_expected


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 7, 8, 127, 129, 1000, 4099, 100_003])
def test_compiled_curve_sums_long_ranges_to_round_off(n):
    # one curve value over n bins (the grid has <= 1000 a value; longer sums bound the error):
    # four partial sums, within n / 4 round-offs of numpy's pairwise sum
    from fairmonitor._kernels.madd import madd_curve

    r = np.random.default_rng(n)
    a, b = r.random(n + 5), r.random(n + 5)
    start, stop = np.array([3]), np.array([n + 3])
    expected = np.abs(a - b)[3 : n + 3].sum()
    assert madd_curve(a, b, start, stop)[0] == pytest.approx(expected, rel=n * 2.0**-52, abs=0)
