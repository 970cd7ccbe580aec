"""The worst pair without scoring every pair equals the all-pairs maximum (issue 30).

Oracles: brute force over every pair, written here (the pair functions the matrices use, the
matrices' own maximum and first argmax); ties are forced by repeating a group's scores under
another label, so two or more pairs share the maximum.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairmonitor.metrics import abcc, abpc, madd, pairwise_matrix
from fairmonitor.metrics._worst_pair import pair_indices, search, through_references, widen

SLOW = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def brute_max(matrix: np.ndarray) -> tuple[float, tuple[int, int]]:
    """The largest upper-triangle entry and the first pair (row order) holding it."""
    k = matrix.shape[0]
    best, where = -np.inf, None
    for i, j in itertools.combinations(range(k), 2):
        if matrix[i, j] > best:
            best, where = matrix[i, j], (i, j)
    return float(best), where


@st.composite
def windows(draw, max_groups: int = 24, max_rows: int = 60):
    """Scores of k groups of Beta-shaped, rounded (ties inside) scores, some groups repeated."""
    seed = draw(st.integers(0, 2**32 - 1))
    k = draw(st.integers(2, max_groups))
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, max_rows, k)
    parts = [np.round(rng.beta(rng.uniform(0.5, 4), rng.uniform(0.5, 4), n),
                      draw(st.sampled_from([2, 3, 12]))) for n in sizes]
    for _ in range(draw(st.integers(0, 3))):  # a repeated group: pairs tied for any value
        parts.append(parts[int(rng.integers(0, len(parts)))].copy())
    labels = np.concatenate([np.full(p.size, g) for g, p in enumerate(parts)])
    order = rng.permutation(labels.size)
    return np.concatenate(parts)[order], labels[order]


# --------------------------------------------------------------------------- the search


@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 40), dim=st.integers(1, 4),
       grid=st.sampled_from([None, 1, 4]))
@settings(max_examples=200, deadline=None)
def test_search_is_the_brute_force_maximum(seed, k, dim, grid):
    # L1 distances between points (a metric); rounded points tie many pairs
    rng = np.random.default_rng(seed)
    x = rng.random((k, dim))
    if grid is not None:
        x = np.round(x * grid) / grid
    dist = np.abs(x[:, None, :] - x[None, :, :]).sum(axis=2)
    refs = rng.choice(k, size=min(k, 3), replace=False)
    upper = widen(through_references(dist[refs], cap=np.inf))
    found = search(k, upper, lambda i, j: float(dist[i, j]))
    assert (found.value, found.pair) == brute_max(dist)
    assert len(found.scored) <= k * (k - 1) // 2


def test_search_scores_only_what_may_be_the_worst():
    # points on a line, references at both ends: the bound of (i, j) is min(x_i + x_j,
    # 2 - x_i - x_j), at least 1 only where x_i + x_j = 1, the 25 pairs (i, 49 - i)
    x = np.linspace(0.0, 1.0, 50)
    upper = widen(through_references(np.abs(x - x[[0, -1]][:, None])))
    found = search(50, upper, lambda i, j: float(abs(x[i] - x[j])))
    assert (found.value, found.pair) == (1.0, (0, 49))
    assert len(found.scored) <= 25 < 1225


def test_pair_indices_are_the_loop_order():
    rows, cols = pair_indices(4)
    assert list(zip(rows.tolist(), cols.tolist(), strict=True)) == list(
        itertools.combinations(range(4), 2))


# --------------------------------------------------------------------------- the metrics


@given(windows())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_abcc_max_is_the_all_pairs_maximum(window):
    scores, groups = window
    matrix = pairwise_matrix(scores, sensitive_features=groups, metric="abcc").matrix
    assert abcc(scores, sensitive_features=groups) == brute_max(matrix)[0]


@given(windows(max_groups=16))
@SLOW
def test_abpc_max_is_the_all_pairs_maximum(window):
    scores, groups = window
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant groups have no density: left out
        pm = pairwise_matrix(scores, sensitive_features=groups, metric="abpc")
        value = abpc(scores, sensitive_features=groups)
    if pm is None:
        assert np.isnan(value)
    else:
        assert value == brute_max(pm.matrix)[0]


@given(windows(), st.sampled_from([0.1, 0.05, 0.013]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_madd_fixed_max_is_the_all_pairs_maximum(window, bandwidth):
    scores, groups = window
    r = madd(scores, sensitive_features=groups, bandwidth=bandwidth)
    pm = pairwise_matrix(scores, sensitive_features=groups, metric="madd", bandwidth=bandwidth)
    value, (i, j) = brute_max(pm.matrix)
    assert r.value == value
    assert r.worst.groups == (pm.labels[i], pm.labels[j])


@given(windows(max_groups=12, max_rows=40), st.sampled_from([None, "maddlib"]))
@SLOW
def test_madd_auto_max_is_the_all_pairs_maximum(window, compat):
    from fairmonitor.metrics._madd import pairs

    scores, groups = window
    original, pairs.AUTO_SMALL = pairs.AUTO_SMALL, 2  # the search from three groups on
    try:
        r = madd(scores, sensitive_features=groups, compat=compat)
    finally:
        pairs.AUTO_SMALL = original
    pm = pairwise_matrix(scores, sensitive_features=groups, metric="madd", compat=compat)
    value, (i, j) = brute_max(pm.matrix)
    assert r.value == value
    assert r.worst.groups == (pm.labels[i], pm.labels[j])
    # the pairs and matrix, computed when read, are the all-pairs ones
    assert np.array_equal(r.matrix.matrix, pm.matrix)
    assert r.worst == max(r.pairs, key=lambda p: p.value)


@st.composite
def tiny_groups(draw):
    """Many groups of 1-9 rows on a coarse score grid: pairs near or at 2, many tied."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = draw(st.integers(21, 30))
    step = draw(st.sampled_from([0.5, 0.1, 0.01]))
    sizes = rng.integers(1, 10, k)
    parts = [np.round(rng.beta(rng.uniform(0.5, 4), rng.uniform(0.5, 4), n) / step) * step
             for n in sizes]
    for _ in range(draw(st.integers(0, 4))):  # repeated groups: tied pairs
        parts.append(parts[int(rng.integers(0, len(parts)))].copy())
    labels = np.concatenate([np.full(p.size, g) for g, p in enumerate(parts)])
    order = rng.permutation(labels.size)
    return np.clip(np.concatenate(parts)[order], 0.0, 1.0), labels[order]


@given(tiny_groups(), st.sampled_from([None, "maddlib"]))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_madd_auto_max_with_many_tiny_groups(window, compat):
    # the bounds' own-curve checks and the seeds' floor (more than AUTO_SMALL groups), on
    # groups whose pairs read 2 at most bin counts and tie
    scores, groups = window
    r = madd(scores, sensitive_features=groups, compat=compat)
    pm = pairwise_matrix(scores, sensitive_features=groups, metric="madd", compat=compat)
    value, (i, j) = brute_max(pm.matrix)
    assert r.value == value
    assert r.worst.groups == (pm.labels[i], pm.labels[j])


@pytest.mark.parametrize(("seed", "compat"), [(0, None), (1, None), (2, "maddlib")])
def test_madd_auto_pair_bounds_hold(seed, compat):
    # every pair's bound (all checks run: no floor) is at least its exact "auto" value, and a
    # pair stopped below a floor is below it
    import importlib

    from fairmonitor.metrics._madd import pairs

    madd_module = importlib.import_module("fairmonitor.metrics._madd.madd")
    rng = np.random.default_rng(seed)
    sizes = np.concatenate([rng.integers(2, 40, 24), rng.integers(300, 2000, 4)])
    parts = [np.sort(rng.beta(rng.uniform(1, 4), rng.uniform(1, 4), n)) for n in sizes]
    grid = madd_module._grid(499, compat)
    data = pairs._group_curves(parts, sizes, grid)
    rows, cols = pairs._worst_pair.pair_indices(len(parts))
    levels = pairs._levels(sizes, rows, cols, compat)
    prepared = [madd_module._Prepared(g, p.size, None, *madd_module._edge_shares(p, grid))
                for g, p in enumerate(parts)]
    exact = np.array([madd_module._auto_pair(prepared[a], prepared[b], grid, compat).value
                      for a, b in zip(rows.tolist(), cols.tolist(), strict=True)])
    bound = pairs._pair_bounds(data, grid, rows, cols, levels, compat, -np.inf)
    assert np.all(bound >= exact)
    floor = float(np.quantile(exact, 0.9))
    stopped = pairs._pair_bounds(data, grid, rows, cols, levels, compat, floor)
    assert np.all(stopped >= exact) and np.all(exact[stopped < floor] < floor)
    assert (stopped < floor).mean() > 0.5  # the bounds prune: the own curve is tight


def test_reference_curves_are_the_l1_distances():
    # each group's curve to each reference against np.histogram at every m, and its coarse
    # shares against numpy's counts / n
    import importlib

    from fairmonitor.metrics._madd import pairs

    madd_module = importlib.import_module("fairmonitor.metrics._madd.madd")
    rng = np.random.default_rng(9)
    parts = [np.sort(np.round(rng.beta(2, 3, n), 2)) for n in (5, 40, 300, 900)]
    sizes = np.array([p.size for p in parts])
    grid = madd_module._grid(120, None)
    data = pairs._group_curves(parts, sizes, grid)
    pooled = np.sort(np.concatenate(parts))
    refs = [pooled, parts[3], parts[2]]  # the pooled rows, then the largest groups
    for g, part in enumerate(parts):
        for q, m in enumerate(grid.bins.tolist()):
            share = np.histogram(part, bins=m, range=(0, 1))[0] / part.size
            for r, ref in enumerate(refs):
                other = np.histogram(ref, bins=m, range=(0, 1))[0] / ref.size
                assert data.curves[g, r, q] == pytest.approx(np.abs(share - other).sum(),
                                                             abs=1e-12)
            if q >= data.first:
                at = grid.start[q] - grid.start[data.first]
                assert np.array_equal(data.tail[g, at:at + m], share)


@pytest.mark.parametrize("bandwidth", ["auto", 0.02])
def test_madd_many_groups_scores_few_pairs(bandwidth):
    # 30 groups, one far from the others: the worst pair involves it, and far fewer than the
    # 435 pairs are scored
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(30), 400)
    scores = rng.beta(2, 5, groups.size)
    scores[groups == 7] = rng.beta(8, 2, 400)
    r = madd(scores, sensitive_features=groups, bandwidth=bandwidth)
    pm = pairwise_matrix(scores, sensitive_features=groups, metric="madd", bandwidth=bandwidth)
    assert r.value == brute_max(pm.matrix)[0] and 7 in r.worst.groups
    assert len(r._source.scored) < 435 // 4


def test_madd_result_pairs_on_demand():
    rng = np.random.default_rng(4)
    groups = np.repeat(np.array(list("abcdefgh")), 50)
    scores = rng.beta(2, 3, groups.size)
    r = madd(scores, sensitive_features=groups, n_bins=10)
    full = madd(scores, sensitive_features=groups, n_bins=10, agg="mean")
    assert r.group_labels == tuple("abcdefgh")
    assert r.pair("c", "a") == full.pairs[1]  # (a, c): the second pair of row a
    assert r.pairs == full.pairs
    assert r.value == max(p.value for p in full.pairs)
    with pytest.raises(AttributeError):
        r.value = 0.0


@pytest.mark.parametrize("k", [3, 12])
def test_madd_chance_level_reads_the_all_pairs_bins(k):
    # the report's chance level of MADD (its pairs' bins, scored on demand) against the
    # interval computed from every pair's bins, as before the search
    from fairmonitor.metrics.shared import ScoreBootstrap, score_gap_interval
    from fairmonitor.report import Window, evaluate_window

    rng = np.random.default_rng(k)
    groups = rng.integers(0, k, 3000)
    scores = rng.beta(2 + groups % 3, 4, groups.size)
    report = evaluate_window(Window({"g": groups}, y_score=scores), metrics=["madd"])
    ours = report.intervals[("madd", "g")]
    every = madd(scores, sensitive_features=groups, agg="mean")
    labels = list(every.group_labels)
    hist = np.stack([np.histogram(scores[groups == g], bins=128, range=(0, 1))[0]
                     for g in labels]).astype(float)
    bins = {(labels.index(p.groups[0]), labels.index(p.groups[1])): p.n_bins
            for p in every.pairs}
    oracle = score_gap_interval(ScoreBootstrap(hist), "madd", value=1.0, pairs=list(bins),
                                pair_bins=bins)
    assert ours.chance == oracle.chance and ours.reason == oracle.reason


# --------------------------------------------------------------------------- rate intervals


@st.composite
def rate_counts(draw):
    """Per-group successes and trials of one or two families: tiny groups, ties, parity."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = draw(st.integers(2, 240))
    families = draw(st.integers(1, 2))
    n = rng.choice([0, 1, 3, 10, 40, 500, 5000], size=(families, k),
                   p=[0.05, 0.05, 0.1, 0.3, 0.3, 0.15, 0.05]).astype(float)
    rate = rng.choice([0.0, 0.2, 0.5, 1.0, -1.0], size=(families, k))  # -1: a random rate
    rate = np.where(rate < 0, rng.random((families, k)), rate)
    if draw(st.booleans()):
        rate[:] = rate[:, :1]  # parity: every pair in contention
    x = np.round(rate * n)
    return x, n


@given(rate_counts(), st.sampled_from([0.9, 0.95]), st.booleans())
@settings(max_examples=150, deadline=None)
def test_rate_gap_interval_from_few_pairs_equals_every_pair(counts, level, kish):
    from fairmonitor.metrics import _rate_intervals as ri

    x, n = counts
    trials = np.where(n > 0, n * 0.7, 0.0) if kish else None
    every_pair_max = ri.EVERY_PAIR_MAX
    try:  # the few-pairs search at any number of groups (by default only beyond 1024 pairs)
        ri.EVERY_PAIR_MAX = 0
        found = ri.rate_gap_interval(x, n, level=level, effective_trials=trials, chance=False)
    finally:
        ri.EVERY_PAIR_MAX = every_pair_max
    original = ri._gap_in_contention
    try:
        ri._gap_in_contention = lambda *args: None  # every ordered pair, as before
        every = ri.rate_gap_interval(x, n, level=level, effective_trials=trials, chance=False)
    finally:
        ri._gap_in_contention = original
    assert (found.lower, found.upper, found.reason) == (every.lower, every.upper, every.reason) \
        or (np.isnan(found.lower) and np.isnan(every.lower) and found.reason == every.reason)


@pytest.mark.parametrize("seed", range(6))
def test_rate_gap_interval_with_many_pairs_in_contention(seed):
    # hundreds of small groups (at one rate, or at spread rates): thousands of pairs in
    # contention (Bonferroni's critical values); the interval from few pairs is the same
    from fairmonitor.metrics import _rate_intervals as ri

    rng = np.random.default_rng(seed)
    n = np.maximum(rng.zipf(1.5, 600) * 20, 20).astype(float)
    x = rng.binomial(n.astype(int), 0.3 if seed % 2 else rng.uniform(0.1, 0.5, n.size))
    x = x.astype(float)
    defined = np.atleast_2d(n > 0)
    answer = ri._gap_in_contention(np.atleast_2d(x), np.atleast_2d(n), defined, 0.025, 2000,
                                   None)
    assert answer is not None or seed % 2 == 0  # at parity the few-pairs path answers
    found = ri.rate_gap_interval(x, n, chance=False)
    original = ri._gap_in_contention
    try:
        ri._gap_in_contention = lambda *args: None
        every = ri.rate_gap_interval(x, n, chance=False)
    finally:
        ri._gap_in_contention = original
    assert (found.lower, found.upper) == (every.lower, every.upper)


def test_dominance_count_is_the_brute_force_count():
    from fairmonitor.metrics._rate_intervals import _dominance_count, _either_count

    rng = np.random.default_rng(7)
    a, av, b, bv = (np.round(rng.random(60), 1) for _ in range(4))
    both = sum(av[j] <= a[i] and bv[j] <= b[i] for i in range(60) for j in range(60) if i != j)
    either = sum(av[j] <= a[i] or bv[j] <= b[i] for i in range(60) for j in range(60) if i != j)
    assert (_dominance_count(a, av, b, bv), _either_count(a, av, b, bv)) == (both, either)


def test_madd_result_matrix_found_by_slots():
    # the MLflow evaluator finds a result's pairwise matrix by scanning its fields or slots
    # (plugins/fairmonitor_mlflow/artifacts.py); the lazy matrix is found there as before
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(30), 60)
    scores = rng.beta(2, 3, groups.size)
    r = madd(scores, sensitive_features=groups, n_bins=20)
    assert r._source is not None and not hasattr(r, "labels")
    found = [getattr(r, name) for name in r.__slots__
             if hasattr(getattr(r, name, None), "matrix")]
    every = pairwise_matrix(scores, sensitive_features=groups, metric="madd", n_bins=20)
    assert len(found) == 1 and np.array_equal(found[0].matrix, every.matrix)
    assert found[0].labels == every.labels


@pytest.mark.parametrize("k", [3, 30])
def test_madd_result_pickles(k):
    import copy
    import pickle

    rng = np.random.default_rng(k)
    groups = np.repeat(np.arange(k), 40)
    scores = rng.beta(2, 3, groups.size)
    r = madd(scores, sensitive_features=groups)
    back = pickle.loads(pickle.dumps(r))
    assert (back.value, back.worst) == (r.value, r.worst)
    assert back.pairs == r.pairs == copy.deepcopy(r).pairs


@pytest.mark.parametrize("k", [2, 5])
def test_madd_prepares_the_groups_once_when_every_pair_is_scored(monkeypatch, k):
    # on few groups worst() scores every pair; building the result must reuse them, not sort
    # and bin every group a second time (that doubled MADD "auto"'s cost on two groups)
    import importlib

    madd_module = importlib.import_module("fairmonitor.metrics._madd.madd")

    calls = []
    original = madd_module._prepared_groups

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(madd_module, "_prepared_groups", counted)
    rng = np.random.default_rng(k)
    scores = rng.random(600)
    groups = rng.integers(0, k, 600)
    result = madd_module.madd(scores, sensitive_features=groups)
    assert len(calls) == 1
    assert len(result.pairs) == k * (k - 1) // 2  # the pairs are all there, from the one pass
    assert result.value == max(p.value for p in result.pairs)
