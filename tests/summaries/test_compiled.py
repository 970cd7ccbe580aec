"""The compiled cell kernels (:mod:`fairmonitor._kernels.cells`) against the numpy code
they replaced, kept here as oracles: merging cells (``np.add.at`` and co., signed zeros in
minima and maxima included; the compact merge against the kernel on decoded cells), ABCC's
table and pairs, ABPC's linear binning of cells, MADD's bin counts.

Counts are compared exactly. Floats within ``RTOL`` (relative): the kernels sum in their own
order (blocks of 128 values, :func:`~fairmonitor._kernels.cells.array_sum`), not numpy's
pairwise order, so sums differ from numpy's by round-off: at most ~(n / 128 + 16) ulps of
the sum of magnitudes, under 1e-13 relative for the sizes here (the bit-for-bit promise
between a numpy twin and the kernels is gone with the twin). The blocked ABCC pairs give
the bits of a single pair's: one implementation, the same blocks in the same order."""

from __future__ import annotations

import numpy as np
import pytest

from fairmonitor._kernels.cells import (
    add_cells,
    add_steps,
    linear_binning_cells,
    steps_of_sorted,
)
from fairmonitor.metrics import madd
from fairmonitor.summaries import SummarySpec, cell_edges, merge_all, summarize
from fairmonitor.summaries.compute import _AbccTable, _binned, madd_from_summary
from fairmonitor.summaries.core import (
    STEP_BITS,
    _cells_of,
    _compact_sorted,
    _merge_many_cells,
)

from ._oracles import cells_of as _cells_of_numpy
from ._oracles import spread as _spread
from .test_summaries import rows

#: Relative tolerance of float results against the numpy oracles (see the module docstring).
RTOL = 1e-12


def _bits(a):
    return np.asarray(a, dtype=np.float64).view(np.uint64)


def assert_close(got, want):
    """Floats within RTOL of the oracle's (NaN where it has NaN); integers exactly."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    if got.dtype.kind in "iub":
        assert np.array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-300)


def _merge_numpy(parts, size):
    """The former ``_merge_many_cells`` loop: numpy's indexed loops, part after part."""
    count, total = np.zeros(size, dtype=np.int64), np.zeros(size)
    low, high = np.full(size, np.inf), np.full(size, -np.inf)
    for index, c, t, lo, hi in parts:
        at = index.astype(np.intp)
        np.add.at(count, at, c)
        np.add.at(total, at, t)
        np.minimum.at(low, at, lo)
        np.maximum.at(high, at, hi)
    return count, total, low, high


def _parts(n_parts=24, seed=0, decimals=None):
    rng = np.random.default_rng(seed)
    edges = cell_edges(499)
    parts = []
    for k in range(n_parts):
        scores = np.sort(rng.beta(2, 5, rng.integers(1, 40_000)))
        if decimals is not None:
            scores = np.round(scores, decimals)
        if k % 3 == 0:  # signed zeros: -0.0 and 0.0 tie in min/max, numpy keeps one
            scores[: scores.size // 50] = -0.0 if k % 2 else 0.0
        parts.append(_cells_of(scores, edges))
    return parts, edges.size - 1


@pytest.mark.parametrize("decimals", [None, 2])
def test_add_cells_is_numpys_indexed_loops(decimals):
    parts, size = _parts(decimals=decimals)
    want = _merge_numpy(parts, size)
    count, total = np.zeros(size, dtype=np.int64), np.zeros(size)
    low, high = np.full(size, np.inf), np.full(size, -np.inf)
    for index, c, t, lo, hi in parts:
        add_cells(count, total, low, high, index, c, t, lo, hi)
    assert np.array_equal(count, want[0])
    for got, ref in zip((total, low, high), want[1:], strict=True):
        assert_close(got, ref)


def test_add_cells_ties_of_signed_zeros_as_numpy():
    for first, second in ((0.0, -0.0), (-0.0, 0.0)):
        index = np.array([0], dtype=np.int32)
        got = [np.zeros(1, dtype=np.int64), np.zeros(1), np.full(1, np.inf), np.full(1, -np.inf)]
        want = [a.copy() for a in got]
        for v in (first, second):
            add_cells(*got, index, np.ones(1, dtype=np.int64), np.full(1, v), np.full(1, v),
                      np.full(1, v))
        want = _merge_numpy([(index, np.ones(1, dtype=np.int64), np.full(1, v), np.full(1, v),
                              np.full(1, v)) for v in (first, second)], 1)
        for g, w in zip(got, want, strict=True):  # minima, maxima: -0.0 vs 0.0 too
            assert np.array_equal(_bits(g), _bits(w))


@pytest.mark.parametrize("n", [0, 1, 2, 7, 9, 50, 5_000, 6_000, 200_000])
@pytest.mark.parametrize("kind", ["uniform", "on_edges", "rounded", "zeros", "u_shaped"])
def test_cells_of_sorted_is_the_numpy_searches(n, kind):
    """The former numpy searches (few and many scores), scores on edges, at 0 and 1, runs
    of -0.0 and 0.0, long runs per cell: the same cells, counts, minima and maxima exactly,
    sums within RTOL of ``np.add.reduceat``'s."""
    from fairmonitor._kernels.cells import cells_of_sorted

    rng = np.random.default_rng(n)
    edges = cell_edges(499)
    scores = {"uniform": lambda: rng.random(n), "on_edges": lambda: rng.choice(edges, n),
              "rounded": lambda: np.round(rng.random(n), 2),
              "zeros": lambda: rng.choice(np.array([0.0, -0.0, 1.0, 0.5]), n),
              "u_shaped": lambda: rng.beta(0.1, 0.1, n)}[kind]()
    scores.sort()
    got, want = cells_of_sorted(scores, edges), _cells_of_numpy(scores, edges)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
    for k in (0, 1, 3, 4):
        assert np.array_equal(got[k], want[k])
    assert_close(got[2], want[2])
    assert all(np.array_equal(a, b) for a, b in zip(_cells_of(scores, edges), got, strict=True))


@pytest.mark.parametrize("n", [0, 1, 7, 8, 127, 128, 129, 1000, 96_001])
def test_array_sum_within_its_bound_of_the_exact_sum(n):
    """The kernels' one summation: within (n / 128 + 16) ulps of the sum of magnitudes of
    the exact sum (``math.fsum``), for values magnitudes apart and of both signs."""
    import math

    from fairmonitor._kernels.cells import array_sum

    rng = np.random.default_rng(n)
    a = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    bound = (n / 128 + 16) * np.finfo(float).eps * float(np.abs(a).sum())
    assert abs(array_sum(a) - math.fsum(a)) <= bound
    assert array_sum(np.ones(n)) == n  # integers below 2**53: exact


def test_merge_many_cells_from_blobs_equals_the_numpy_merge():
    """Read-only parts (as :func:`from_bytes` gives) and raw groups beside cell groups."""
    sf, score, _ = rows(60_000, 2, groups=3)
    spec = SummarySpec(max_raw=3_000, sample_size=0)
    from fairmonitor.summaries import from_bytes, to_bytes

    hours = [from_bytes(to_bytes(summarize({k: v[a:a + 5_000] for k, v in sf.items()},
                                           y_score=score[a:a + 5_000], spec=spec)))
             for a in range(0, score.size, 5_000)]
    edges = cell_edges(spec.max_bins)
    for name in hours[0].attributes:
        for label in hours[0].attributes[name].groups:
            groups = [h.attributes[name].groups[label] for h in hours
                      if label in h.attributes[name].groups]
            got = _merge_many_cells(groups, edges)
            # the parts as _merge_many_cells lays them out: cells first, then the raw scores
            # (their bounds quantized, as summarize quantizes a group's)
            parts = [g.cells for g in groups if g.cells is not None]
            raw = [g.scores for g in groups if g.cells is None]
            if raw and sum(r.size for r in raw) <= edges.size - 1:
                parts.append(_compact_sorted(np.sort(np.concatenate(raw)), edges))
            else:
                parts += [_compact_sorted(r, edges) for r in raw]
            count, total, low, high = _merge_numpy(parts, edges.size - 1)
            index = np.flatnonzero(count)
            assert np.array_equal(got[0], index) and np.array_equal(got[1], count[index])
            for g, w in zip(got[2:], (total, low, high), strict=True):
                assert_close(g, w[index])


# --------------------------------------------------------------------------- ABCC


class _NumpyTable:
    """The former numpy ``_AbccTable`` (its ``__init__``, ``_dense``, ``pair``)."""

    def __init__(self, groups, edges):
        self.sparse = [g.sparse_cells(edges) for g in groups]
        self.n = [g.n for g in groups]
        mark = np.zeros(edges.size - 1, dtype=bool)
        for part in self.sparse:
            mark[part[0]] = True
        cells = np.flatnonzero(mark)
        where = np.cumsum(mark) - 1
        self.left, self.right = edges[cells], edges[cells + 1]
        self.gaps = self.left - np.r_[0.0, self.right[:-1]]
        extended = self.right - np.r_[0.0, self.right[:-1]]
        self.at = [where[part[0]] for part in self.sparse]
        self.F, self.G, self.m, self.minus_m = [], [], [], []
        for part, at, n in zip(self.sparse, self.at, self.n, strict=True):
            count, total = np.zeros(cells.size), np.zeros(cells.size)
            count[at], total[at] = part[1], part[2]
            F = (np.cumsum(count) - count) / n
            self.F.append(F)
            self.m.append(count / n)
            self.minus_m.append(-self.m[-1])
            self.G.append(F * extended + (count * self.right - total) / n)

    def _dense(self, k, ia):
        at, part = self.at[k], self.sparse[k]
        pos = np.minimum(np.searchsorted(at, ia), max(at.size - 1, 0))
        hit = at[pos] == ia if at.size else np.zeros(ia.size, dtype=bool)
        count = np.where(hit, part[1][pos], 0).astype(float) if at.size else np.zeros(ia.size)
        total = np.where(hit, part[2][pos], 0.0) if at.size else np.zeros(ia.size)
        low = np.where(hit, part[3][pos], self.left[ia]) if at.size else self.left[ia]
        high = np.where(hit, part[4][pos], self.right[ia]) if at.size else self.right[ia]
        return count, total, low, high

    def pair(self, i, j):
        d0 = self.F[i] - self.F[j]
        amb = np.less(d0, self.m[j])
        amb &= d0 > self.minus_m[i]
        ia = np.flatnonzero(amb)
        area = np.subtract(self.G[i], self.G[j])
        np.abs(area, out=area)
        area[ia] = 0.0
        exact = float(area.sum())
        if not ia.size:
            return exact, 0.0
        d = d0[ia]
        flat = float(np.abs(d * self.gaps[ia]).sum())
        estimate, error = _ambiguous(d, self.left[ia], self.right[ia], self.n[i], self.n[j],
                                     self._dense(i, ia), self._dense(j, ia))
        return exact + flat + float(estimate.sum()), float(error.sum())


def _ambiguous(d, lo_edge, r, na, nb, a, b):
    count_a, sum_a, low_a, high_a = a
    count_b, sum_b, low_b, high_b = b
    ja, jb = count_a / na, count_b / nb
    signed = d * (r - lo_edge) + (count_a * r - sum_a) / na - (count_b * r - sum_b) / nb
    lower, upper = d - jb, d + ja
    lo = np.abs(signed)
    hi = (r - lo_edge) * np.maximum(np.abs(lower), np.abs(upper))
    mid, mid_err = (lo + hi) / 2, (hi - lo) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        mu_a = np.clip(np.where(count_a > 0, sum_a / count_a, lo_edge), lo_edge, r)
        mu_b = np.clip(np.where(count_b > 0, sum_b / count_b, lo_edge), lo_edge, r)
    first, second = np.minimum(mu_a, mu_b), np.maximum(mu_a, mu_b)
    between = np.where(mu_a <= mu_b, d + ja, d - jb)
    step = (np.abs(d) * (first - lo_edge) + np.abs(between) * (second - first)
            + np.abs(d + ja - jb) * (r - second))
    step_err = _spread(ja, mu_a, low_a, high_a) + _spread(jb, mu_b, low_b, high_b)
    use_step = step_err < mid_err
    return np.where(use_step, step, mid), np.where(use_step, step_err, mid_err)


def _day(max_raw, decimals=None, n=60_000, groups=6, with_rows=False):
    sf, score, _ = rows(n, 4, groups=groups, decimals=decimals)
    score = np.where(sf["race"] == "f", score ** 3, score)  # one group far from the others
    sf["race"] = sf["race"].astype("<U1")
    sf["race"][::600] = "g"  # a small group: raw scores beside the cells
    s = merge_all([summarize({k: v[a:a + 5_000] for k, v in sf.items()},
                             y_score=score[a:a + 5_000], intersection=False,
                             spec=SummarySpec(max_raw=max_raw, sample_size=0))
                   for a in range(0, score.size, 5_000)])
    return (sf, score, s) if with_rows else s


@pytest.mark.parametrize(("decimals", "max_raw"), [(None, 100), (2, 100), (3, 2000), (None, 0)])
def test_abcc_table_is_the_numpy_table(decimals, max_raw):
    """Within RTOL of the numpy table's; the blocked pairs give a single pair's bits."""
    s = _day(max_raw, decimals)
    edges = cell_edges(499)
    ambiguous = 0
    for attr in s.attributes.values():
        groups = list(attr.groups.values())
        table, oracle = _AbccTable(groups, edges), _NumpyTable(groups, edges)
        for k in range(len(groups)):
            for name in ("F", "G", "m"):
                assert_close(getattr(table, name)[k], getattr(oracle, name)[k])
        wanted = [(i, j) for i in range(len(groups)) for j in range(len(groups)) if i != j]
        blocked = table.pairs(wanted)
        for i, j in wanted:
            value, error = table.pair(i, j)
            assert_close((value, error), oracle.pair(i, j))
            assert _bits(blocked[i, j]).tolist() == _bits((value, error)).tolist()
            ambiguous += oracle.pair(i, j)[1] > 0
    assert ambiguous  # the ambiguous cells' estimates were compared too


def test_blocked_pairs_with_few_kept_ambiguous_cells_and_odd_blocks(monkeypatch):
    """Pairs with more ambiguous cells than kept run alone; any block size, same bits."""
    s = _day(100, 2)
    groups = list(s.attributes["race"].groups.values())
    table = _AbccTable(groups, cell_edges(499))
    wanted = [(i, j) for i in range(len(groups)) for j in range(i + 1, len(groups))]
    want = {p: _bits(table.pair(*p)).tolist() for p in wanted}
    for block, cap in ((1, 1), (3, 5), (10_000, 0)):
        monkeypatch.setattr(_AbccTable, "BLOCK", block)
        monkeypatch.setattr(_AbccTable, "CAP", cap)
        got = table.pairs(wanted)
        assert {p: _bits(v).tolist() for p, v in got.items()} == want


# --------------------------------------------------------------------------- ABPC, MADD


def _binned_numpy(g, edges, cells):
    index, count, total = g.cells[:3]
    mid = (edges[index] + edges[index + 1]) / 2
    left_i = np.floor(mid * cells - 0.5).astype(np.intp)
    frac_sum = cells * total - (0.5 + left_i) * count
    w = np.bincount(np.clip(left_i, 0, cells - 1), weights=count - frac_sum, minlength=cells)
    w += np.bincount(np.clip(left_i + 1, 0, cells - 1), weights=frac_sum, minlength=cells)
    return w


@pytest.mark.parametrize("decimals", [None, 2])
def test_binned_cells_are_the_numpy_bincounts(decimals):
    s = _day(100, decimals)
    edges = cell_edges(499)
    checked = 0
    for attr in s.attributes.values():
        for g in attr.groups.values():
            if g.cells is None:
                continue
            for cells in (2, 64, 1000, 4096, (1 << 14) - 1):
                assert_close(_binned(g, edges, cells), _binned_numpy(g, edges, cells))
                checked += 1
    assert checked
    empty = np.zeros(0, dtype=np.int32)
    assert linear_binning_cells(empty, empty.astype(np.int64), np.zeros(0), edges, 8).tolist() \
        == [0.0] * 8


@pytest.mark.parametrize("n_bins", [None, 10, 499])
def test_madd_bin_counts_from_dense_cells_equal_the_searched_ones(n_bins):
    """Each group's counts below every edge as the former search of the edges among its
    cells, and every pair's MADD the raw rows' (cells and a raw group mixed)."""
    sf, score, s = _day(100, with_rows=True)
    edges = cell_edges(499)
    kw = {} if n_bins is None else {"n_bins": n_bins}
    for name, attr in s.attributes.items():
        for g in attr.groups.values():
            index, count = g.sparse_cells(edges)[:2]
            wanted = np.arange(edges.size)
            want = np.r_[0, np.cumsum(count)][np.searchsorted(index, wanted)]
            dense = np.zeros(edges.size, dtype=np.int64)
            dense[index + 1] = count
            assert np.array_equal(np.cumsum(dense)[wanted], want)
        got = madd_from_summary(attr, max_bins_cells=499, **kw)
        want = madd(score, sensitive_features=sf[name], **kw)
        assert np.array_equal(got.matrix.matrix, want.matrix.matrix), name


def _decoded_parts(seed=0, n_parts=24):
    """Random compact parts (quantized bounds), with counts of every stored dtype."""
    rng = np.random.default_rng(seed)
    edges = cell_edges(499)
    parts = []
    for k in range(n_parts):
        scores = np.sort(rng.beta(2, 5, rng.integers(1, 40_000)))
        if k % 4 == 1:  # scores on edges, at 0 and at 1, rounded: many per cell
            scores = np.sort(np.r_[np.round(scores, 2), rng.choice(edges, 50), 0.0, 1.0])
        part = _compact_sorted(scores, edges)
        dtype = (np.uint8, np.uint16, np.uint32, np.int64)[k % 4]
        if part.count.max() <= np.iinfo(dtype).max:
            part.count = part.count.astype(dtype)
        if k % 3 == 0:  # read-only arrays
            arrays = [part.index, part.count, part.ksum, part.qlo, part.qhi]
            for a in arrays:
                a.flags.writeable = False
            part = type(part)(edges, *arrays)
        parts.append(part)
    return parts, edges


@pytest.mark.parametrize("seed", [0, 1])
def test_add_steps_is_numpys_indexed_loops_and_the_merge_decodes_alike(seed):
    """The cells' merge (narrow counts, int64 step sums, uint8 bounds) is ``np.add.at`` of
    counts and step sums, ``np.minimum.at`` / ``np.maximum.at`` of the bounds; and the merged
    cells decode to the former merge of the decoded cells (sums added, bounds min / max)."""
    parts, edges = _decoded_parts(seed)
    size = edges.size - 1
    want = [np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64),
            np.full(size, 255, dtype=np.uint8), np.zeros(size, dtype=np.uint8)]
    got = [a.copy() for a in want]
    for p in parts:
        np.add.at(want[0], p.index, p.count.astype(np.int64))
        np.add.at(want[1], p.index, p.ksum)
        np.minimum.at(want[2], p.index, p.qlo)
        np.maximum.at(want[3], p.index, p.qhi)
        assert add_steps(*got, p.index, p.count, p.ksum, p.qlo, p.qhi) == p.size
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w)
    assert {p.count.dtype for p in parts} == {np.dtype(t) for t in ("u1", "u2", "u4", "i8")}
    groups = [type("G", (), {"cells": p, "scores": None})() for p in parts]
    merged = _merge_many_cells(groups, edges)
    count, total, low, high = _merge_numpy(parts, size)
    index = np.flatnonzero(count)
    assert np.array_equal(merged[0], index) and np.array_equal(merged[1], count[index])
    for g, w in zip(merged[2:], (total, low, high), strict=True):
        assert_close(g, w[index])


def test_steps_of_sorted_is_the_numpy_formula():
    """Each score's step ``floor((x - left) * 2**bits / width)`` (clipped), summed, min and
    max per cell; the cells those ``cells_of_sorted`` finds; the decoded sum within ``count *
    u`` of the exact one."""
    rng = np.random.default_rng(5)
    edges = cell_edges(499)
    scores = np.sort(np.r_[rng.beta(2, 5, 30_000), np.round(rng.random(5_000), 2),
                           rng.choice(edges, 200), np.nextafter(edges[1:400], 0), 0.0, 1.0])
    index, count, ksum, kmin, kmax = steps_of_sorted(scores, edges, STEP_BITS)
    exact = _cells_of(scores, edges)
    assert np.array_equal(index, exact[0]) and np.array_equal(count, exact[1])
    cell = np.repeat(index, count)
    left, right = edges[cell], edges[cell + 1]
    step = np.floor((scores - left) * (np.ldexp(1.0, STEP_BITS) / (right - left)))
    step = np.clip(step, 0, (1 << STEP_BITS) - 1).astype(np.int64)
    starts = np.r_[0, np.cumsum(count)[:-1]]
    assert np.array_equal(ksum, np.add.reduceat(step, starts))
    assert np.array_equal(kmin, np.minimum.reduceat(step, starts))
    assert np.array_equal(kmax, np.maximum.reduceat(step, starts))
    cells = _compact_sorted(scores, edges)
    u = np.ldexp(edges[index + 1] - edges[index], -STEP_BITS)
    # (plus round-off: cells one ulp wide hold scores whose sums round by more than u)
    assert np.all(np.abs(cells.total - exact[2]) <= count * (u + 4e-16 * exact[2]))
    assert np.all((cells[3] <= exact[3]) & (cells[4] >= exact[4]))  # bounds hold the scores


def test_add_steps_refuses_parts_that_do_not_match():
    from fairmonitor import InvalidInputError

    parts, edges = _decoded_parts(2, n_parts=1)
    p = parts[0]
    size = edges.size - 1
    dense = [np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64),
             np.full(size, 255, np.uint8), np.zeros(size, np.uint8)]
    before = [a.copy() for a in dense]
    assert add_steps(*dense, p.index, p.count[:-1], p.ksum, p.qlo, p.qhi) == -1
    beyond = p.index.copy()
    beyond[-1] = size  # past the grid's last cell
    assert add_steps(*dense, beyond, p.count, p.ksum, p.qlo, p.qhi) == -1
    unsorted = p.index.copy()
    unsorted[[0, 1]] = unsorted[[1, 0]]
    assert add_steps(*dense, unsorted, p.count, p.ksum, p.qlo, p.qhi) == -1
    assert all(np.array_equal(a, b) for a, b in zip(dense, before, strict=True))  # untouched
    bad = type(p)(edges, beyond, p.count, p.ksum, p.qlo, p.qhi)
    with pytest.raises(InvalidInputError, match="corrupted"):
        _merge_many_cells([type("G", (), {"cells": bad, "scores": None})()], edges)


@pytest.mark.parametrize("raw_sizes", [(40_000, 50_000, 30_000), (500, 20, 3_000)])
def test_merge_many_cells_of_compact_and_raw_parts_equals_the_former_merge(raw_sizes):
    """Compact parts then raw ones (many scores: binned one by one; few: sorted together):
    the former merge of the parts each binned as summarize bins them."""
    parts, edges = _decoded_parts(3, n_parts=6)
    rng = np.random.default_rng(4)
    raw = [np.sort(np.r_[rng.beta(2, 5, k - 2), 0.0, 1.0]) for k in raw_sizes]
    raw[0][:10] = edges[100:110]  # on edges
    raw[0].sort()
    groups = [type("G", (), {"cells": p, "scores": None})() for p in parts]
    groups += [type("G", (), {"cells": None, "scores": r})() for r in raw]
    got = _merge_many_cells(groups, edges)
    if sum(raw_sizes) <= edges.size - 1:
        raw = [np.sort(np.concatenate(raw))]
    want = _merge_numpy([*parts, *(_compact_sorted(r, edges) for r in raw)],
                        edges.size - 1)
    index = np.flatnonzero(want[0])
    assert np.array_equal(got[0], index) and np.array_equal(got[1], want[0][index])
    for g, w in zip(got[2:], want[1:], strict=True):
        assert_close(g, w[index])


# --------------------------------------------------------------------------- cell values


def _madd_edges(n_bins):
    from fairmonitor.metrics._madd.madd import _plan
    from fairmonitor.summaries.compute import _bin_edges_among_cells, _edge_slots

    plan = _plan("auto", n_bins, None, 499)
    args = (499, plan.n_bins, plan.compat, plan.auto)
    return _bin_edges_among_cells(*args), _edge_slots(*args)


@pytest.mark.parametrize("n_bins", [None, 10, 499])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int64])
def test_counts_below_are_the_former_dense_cumulative_sums(n_bins, dtype):
    """MADD's counts below its edges from the cells' slots: the former numpy pass (a dense
    count per grid cell, its cumulative sum gathered at the edges), counts of any dtype."""
    from fairmonitor._kernels.cells import counts_below

    where, slot = _madd_edges(n_bins)
    size = cell_edges(499).size - 1
    rng = np.random.default_rng(0)
    for cells in (0, 1, 50, 5_000, size):
        index = np.sort(rng.choice(size, cells, replace=False)).astype(np.int32)
        count = rng.integers(1, 256, cells).astype(dtype)
        index[:cells // 10] = np.arange(cells // 10)  # the first cells, and the last one below
        if cells:
            index[-1] = size - 1
        index = np.unique(index)
        count = count[:index.size]
        dense = np.zeros(size + 1, dtype=np.int64)
        dense[index + 1] = count
        want = np.cumsum(dense)[where]
        got = counts_below(index, count, slot, where.size)
        assert got.dtype == np.int64 and np.array_equal(got, want), cells


def test_table_cells_are_the_numpy_union_and_geometry():
    """``mark_cells`` / ``table_cells``: the former fancy assignment, flatnonzero, gathers and
    shifted differences, within RTOL."""
    from fairmonitor._kernels.cells import mark_cells, table_cells

    edges = cell_edges(499)
    rng = np.random.default_rng(1)
    for groups in ([], [0], [3, 40_000], [90_000, 500, 12]):
        parts = [np.sort(rng.choice(edges.size - 1, k, replace=False)).astype(np.int32)
                 for k in groups]
        mark, want_mark = np.zeros(edges.size - 1, dtype=np.bool_), np.zeros(edges.size - 1,
                                                                              dtype=bool)
        for p in parts:
            mark_cells(mark, p)
            want_mark[p] = True
        assert np.array_equal(mark, want_mark)
        cells = np.flatnonzero(want_mark)
        left, right = edges[cells], edges[cells + 1]
        want = (cells, left, right, left - np.r_[0.0, right[:-1]],
                right - np.r_[0.0, right[:-1]])
        got = table_cells(mark, edges)
        assert np.array_equal(got[0], want[0])
        for g, w in zip(got[1:], want[1:], strict=True):
            assert_close(g, w)


@pytest.mark.parametrize("n_cells", [0, 1, 300, 20_000])
def test_abcc_curves_are_the_numpy_formulas_with_large_counts(n_cells):
    """F, m, G of a group (sparse among the table's cells, counts beyond the table of shares,
    rows beyond 2**32) are the former dense numpy formulas; ``pos`` is the group's position of
    each table cell (-1: none), the former search of the cells."""
    from fairmonitor._kernels.cells import _SHARES, abcc_curves, table_cells

    edges = cell_edges(499)
    rng = np.random.default_rng(n_cells)
    mark = np.zeros(edges.size - 1, dtype=np.bool_)
    mark[rng.choice(edges.size - 1, 2 * n_cells + 3, replace=False)] = True
    cells, _, right, _, extended = table_cells(mark, edges)
    at = np.sort(rng.choice(cells.size, n_cells, replace=False))
    index = cells[at].astype(np.int32)
    count = rng.integers(1, 4 * _SHARES, n_cells).astype(np.int64)
    count[::3] = rng.integers(1, 8, count[::3].size)
    total = count * rng.random(n_cells)
    for n in (int(count.sum()) + 7, 1 << 33):
        c, t = np.zeros(cells.size), np.zeros(cells.size)
        c[at], t[at] = count, total
        F = (np.cumsum(c) - c) / n
        want = F, c / n, F * extended + (c * right - t) / n
        got = [np.empty(cells.size) for _ in range(3)]
        pos = np.empty(cells.size, dtype=np.int32)
        abcc_curves(index, count, total, cells, right, extended, n, *got, pos)
        for g, w in zip(got, want, strict=True):
            assert_close(g, w)
        want_pos = np.full(cells.size, -1)
        want_pos[at] = np.arange(n_cells)
        assert np.array_equal(pos, want_pos)


def test_abcc_from_cells_decodes_no_bounds_but_the_ambiguous_cells():
    """ABCC reads the quantized bounds of its ambiguous cells only (decoded in the kernel):
    evaluating it leaves the cells' bound fields undecoded, and the values are those of
    the table on decoded cells (the oracle above)."""
    from fairmonitor.summaries.compute import abcc_from_summary

    s = _day(100, 2)
    attr = s.attributes["race"]
    got = abcc_from_summary(attr, max_bins_cells=499)
    assert got.error > 0  # some cells were ambiguous
    assert all(g.cells._fields[3] is None for g in attr.groups.values() if g.cells is not None)
    groups = list(attr.groups.values())
    oracle = _NumpyTable(groups, cell_edges(499))
    from fairmonitor.summaries.compute import _steps

    # the table's error, and three times what the cells' step sums can move it
    pairs = {(i, j): oracle.pair(i, j)[1] + 3 * (_steps(groups[i]) + _steps(groups[j]))
             for i in range(len(groups)) for j in range(i + 1, len(groups))}
    assert got.error == pytest.approx(max(pairs.values()), rel=RTOL)


def test_binned_cells_in_any_order_are_the_numpy_bincounts():
    """The runs kept in registers read back a KDE cell met again: cells out of order (and
    clipped at both ends) give the bincounts of the same order, within RTOL."""
    edges = cell_edges(499)
    rng = np.random.default_rng(5)
    index = rng.permutation(edges.size - 1)[:3_000].astype(np.int32)
    index[:2] = [0, edges.size - 2]
    count = rng.integers(1, 30, index.size)
    total = count * (edges[index] + rng.random(index.size) * (edges[index + 1] - edges[index]))
    g = type("G", (), {"cells": (index, count, total), "scores": None})()
    for cells in (2, 64, 4096):
        assert_close(linear_binning_cells(index, count, total, edges, cells),
                     _binned_numpy(g, edges, cells))


def test_step_bounds_is_quantize_bounds_of_the_steps_floats():
    """The compiled bounds of steps are ``quantize_bounds`` of the numpy floats a step
    beyond each side, clipped to the cell; and they hold every score of the cell."""
    from fairmonitor._kernels.cells import quantize_bounds, step_bounds

    rng = np.random.default_rng(9)
    edges = cell_edges(499)
    index = np.sort(rng.choice(edges.size - 1, 5_000, replace=False)).astype(np.int32)
    top = (1 << STEP_BITS) - 1
    kmin = rng.integers(0, top + 1, index.size)
    kmax = np.minimum(kmin + rng.integers(0, 3_000, index.size), top)
    kmin[:5], kmax[:5] = 0, top  # the edges exactly
    left, right = edges[index], edges[index + 1]
    u = np.ldexp(right - left, -STEP_BITS)
    low = np.maximum(left + (kmin - 1) * u, left)
    high = np.minimum(left + (kmax + 2) * u, right)
    want = quantize_bounds(index, low, high, edges)
    got = step_bounds(index, kmin, kmax, edges, STEP_BITS)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_decode_cells_refuses_arrays_that_do_not_fit():
    """Gaps below 1, indices beyond the grid, counts below 1, more or fewer stored bounds
    than cells of two scores or more: None (the loader's "corrupted"), nothing read out of
    bounds; the arrays as stored decode to the cells' index and bounds."""
    from fairmonitor._kernels.cells import decode_cells

    edges = cell_edges(499)
    cells = _compact_sorted(np.sort(np.random.default_rng(3).beta(2, 5, 20_000)), edges)
    gaps = np.diff(cells.index, prepend=-1).astype(np.int64)
    count, ksum = cells.count.astype(np.int64), cells.ksum
    several = count > 1
    args = [gaps, count, ksum, cells.qlo[several], cells.qhi[several],
            np.array([cells.size], dtype=np.int64)]
    index, qlo, qhi = decode_cells(*args, edges, STEP_BITS)
    assert np.array_equal(index, cells.index)
    assert np.array_equal(qlo, cells.qlo) and np.array_equal(qhi, cells.qhi)
    for k, bad in ((0, gaps.copy()), (1, count.copy()), (3, args[3][1:]),
                   (5, np.array([cells.size + 1], dtype=np.int64))):
        if k == 0:
            bad[bad.size // 2] = 0 if bad[0] != 0 else -1
        if k == 1:
            bad[3] = 0
        broken = list(args)
        broken[k] = bad
        assert decode_cells(*broken, edges, STEP_BITS) is None
    beyond = gaps.copy()
    beyond[-1] += edges.size
    assert decode_cells(beyond, *args[1:], edges, STEP_BITS) is None
