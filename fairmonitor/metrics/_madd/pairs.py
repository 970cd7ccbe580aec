"""MADD's worst pair among many groups without scoring every pair (issue 30).

:func:`worst_fixed` and :func:`worst_auto` return the largest pairwise MADD (``agg="max"``),
scoring exactly (with the functions the all-pairs matrix calls, so the value is its maximum to
the last bit) only the pairs that an upper bound cannot rule out (:mod:`.._worst_pair`).

**Fixed bandwidth.** MADD at ``m`` bins is the L1 distance of the groups' bin proportions, so
``MADD(a, b) <= MADD(a, r) + MADD(r, b)`` for any vector ``r`` (the triangle inequality);
the references are the pooled proportions and the two largest groups'.

**"auto".** Each pair picks its own bandwidth interval, so the bound has to hold for whatever
interval the pair's search picks. The argument, for a pair ``(a, b)`` with the curve
``c_q = MADD_{m_q}(a, b)`` over the grid ``h_q = 1 / m_q``:

1. Per grid point, the triangle inequality through references ``r`` holds at every bin count:
   ``c_q <= U_q = min(2, min_r MADD_{m_q}(a, r) + MADD_{m_q}(r, b))``. ``MADD_{m_q}(g, r)``
   is one curve per group and reference (``K R`` curves instead of ``K(K-1)/2``).
2. The value is the mean of ``c`` over the interval ``[i, j]`` Algorithm 1 picks, and it picks
   among *admissible* intervals only: a start ``i`` with ``h_i <= h_max - L`` and an end ``j >=
   f_i``, ``f_i = max(last grid point within h_i + L, i + 50)`` (``L = 0.45 h_sup(n_a, n_b)``;
   :func:`~fairmonitor.metrics._madd.bandwidth._first_ends`). Whatever the standard deviations
   that decide which one, the value is at most the largest mean of ``U`` over an admissible
   interval, and that is at most ``max_i max(mean(U[i..f_i]), max_{t > f_i} U_t)`` (the mean
   over ``[i, j]`` is a weighted mean of the mean over ``[i, f_i]`` and of the ``U_t`` after).
3. A smaller ``L`` admits more starts and earlier ends (a superset of intervals), so rounding
   ``L`` *down* to one of a few levels keeps the bound valid and lets pairs share the index
   arithmetic. ``compat="maddlib"`` has one ``L`` (0.05) and skips rather than extends short
   starts; its admissible set is the same shape, ``f_i = last`` for the starts it keeps.
4. Step 1 is loose for pairs with a small group: at fine bins its curve through a reference is
   noise near 2, so the sum is capped at 2 whatever the pair. The pair's own curve is exact
   and cheap at the *coarse* grid points (``m`` bins cost ``m``; every ``m <= 64`` together
   cost 1/60 of the grid): ``U_q`` is replaced by ``c_q`` there, from the coarsest grid
   point up, and the bound is checked at a few bin counts (:data:`_CHECK_BINS`, up to the
   coarse shares every group keeps): a pair stops at the first check whose bound is below a
   floor. Admissible intervals hold the coarse points too, so at 400 groups the checks up
   to ~200 bins leave a few hundred of 79,800 pairs (the reference bound alone: half).

The floor is the worst pair among the smallest groups and those farthest from the pooled
scores (:func:`_seed_pairs`, scored exactly in decreasing order of their bound); then every
pair's bound is computed in one compiled pass (:func:`~fairmonitor._kernels.madd.
auto_pair_bounds`) and :func:`.._worst_pair.search` scores the pairs left. Per group, one
compiled pass gives its curves to the references and its coarse shares
(:func:`~fairmonitor._kernels.madd.reference_curves`); a group's full shares (~1 MB at 499
bins) are made only for the pairs scored.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from .. import _worst_pair
from .bandwidth import COMPAT_MIN_LENGTH, LENGTH_FRACTION, MIN_POINTS, _Grid

__all__ = ["AUTO_SMALL", "chance_pairs", "worst_auto", "worst_fixed"]

#: Min-length levels per factor of 2 (step ~4%): pairs share the admissible intervals of
#: their level, a little looser than their own.
_LEVELS_PER_OCTAVE = 16
#: The floor the bounds prune against is the worst pair among these groups: the smallest,
#: and as many of the farthest from the pooled scores.
_SEED_GROUPS = 24
#: The pairs' own curves are computed up to this many bins (every group keeps its shares of
#: those grid points, within _TAIL_BUDGET doubles in all), the bounds checked at these.
_TAIL_BINS, _TAIL_BUDGET = 250, 8 * 2**20
_CHECK_BINS = (64, 100, 150)
#: "auto" scores every pair up to this many groups: the bounds cost ~3 curves a group and the
#: seeds, more than they save on a few dozen pairs.
AUTO_SMALL = 20


def _references(shares: NDArray[np.float64], sizes: NDArray[np.int64]
                ) -> list[NDArray[np.float64]]:
    """Return the pooled proportions and the two largest groups' (any vectors are valid)."""
    pooled = (sizes.astype(float) @ shares) / sizes.sum()
    largest = np.argsort(-sizes, kind="stable")[:2]
    return [pooled, *(shares[g] for g in largest.tolist())]


def worst_fixed(proportions: NDArray[np.float64], sizes: NDArray[np.int64],
                pair: Callable[[int, int], float]) -> _worst_pair.WorstPair:
    """Return the worst pair at a fixed bin count (``proportions``: groups x bins).

    ``pair(i, j)`` scores a pair exactly (the all-pairs loop's MADD).
    """
    k = proportions.shape[0]
    dist = np.array([np.abs(proportions - ref).sum(axis=1)
                     for ref in _references(proportions, sizes)])
    lower = float(np.ptp(dist, axis=1).max())  # reverse triangle: |d(a,r) - d(b,r)| <= d(a,b)
    floor = lower - (_worst_pair.REL_MARGIN * lower + _worst_pair.ABS_MARGIN)
    upper = _worst_pair.widen(_worst_pair.through_references(dist, cap=2.0))
    return _worst_pair.search(k, upper, pair, floor=floor)


def _level(min_length: NDArray[np.float64]) -> NDArray[np.float64]:
    """Round min lengths down to ``2 ** (e / _LEVELS_PER_OCTAVE)`` (never above the input)."""
    exponent = np.floor(np.log2(min_length) * _LEVELS_PER_OCTAVE)
    level = np.exp2(exponent / _LEVELS_PER_OCTAVE)
    return np.where(level <= min_length, level,
                    np.exp2((exponent - 1) / _LEVELS_PER_OCTAVE))


def _first_ends(grid: _Grid, min_length: float, extend: bool) -> NDArray[np.int64]:
    """Each start's first admissible end at ``min_length`` (``grid.h.size`` when none)."""
    from ..._kernels.madd import first_ends

    return first_ends(grid.h, float(min_length), extend, MIN_POINTS)


def _levels(sizes: NDArray[np.int64], rows: NDArray[np.intp], cols: NDArray[np.intp],
            compat: str | None) -> NDArray[np.float64]:
    """Each pair's minimum interval length, rounded down to a level (step 3)."""
    if compat == "maddlib":
        return np.full(rows.size, COMPAT_MIN_LENGTH)
    h_sup = ((np.sqrt(sizes[rows]) + np.sqrt(sizes[cols]))
             / np.sqrt(sizes[rows] * sizes[cols].astype(float))) ** (2 / 3)
    return _level(LENGTH_FRACTION * h_sup * (1 - 1e-12))


class _Curves(NamedTuple):
    """What the bounds read of every group (step 1 and the coarse end of step 4)."""

    curves: NDArray[np.float64]  # (K, R, N): each group's L1 distance to each reference
    tail: NDArray[np.float64]  # (K, T): each group's shares of the grid points q >= first
    first: int  # the first grid point of the tail
    checks: NDArray[np.int64]  # where the bounds are checked (descending grid points)


def _tail_start(grid: _Grid, k: int) -> int:
    """Return the first grid point whose shares every group keeps (coarse, within a budget)."""
    cells = grid.stop[-1] - grid.start  # bins from each grid point to the end of the grid
    fits = (grid.bins <= _TAIL_BINS) & (cells * k <= _TAIL_BUDGET)
    return int(np.argmax(fits)) if fits.any() else grid.h.size


def _group_curves(parts: Sequence[NDArray[np.float64]], sizes: NDArray[np.int64],
                  grid: _Grid) -> _Curves:
    """Every group's curves to the references and coarse shares, one compiled pass each.

    The references are the pooled shares (of every row) and the two largest groups' (any
    vectors are valid); no group's full shares are kept (~1 MB each at 499 bins).
    """
    from ..._kernels.madd import reference_curves
    from .bandwidth import _edge_shares, _edges_below

    k, size = len(parts), grid.h.size
    largest = np.argsort(-sizes, kind="stable")[:2]
    refs = np.stack([_edge_shares(np.sort(np.concatenate(parts)), grid)[0],
                     *(_edge_shares(parts[g], grid)[0] for g in largest.tolist())])
    first = _tail_start(grid, k)
    base = int(grid.start[first]) if first < size else int(grid.stop[-1])
    curves = np.empty((k, refs.shape[0], size))
    tail = np.empty((k, int(grid.stop[-1]) - base))
    below = np.empty(grid.edges.size, dtype=np.int64)
    for g, part in enumerate(parts):
        reference_curves(_edges_below(part, grid, below), grid.where, grid.start, grid.bins,
                         part.size, refs, first, tail[g], curves[g])
    checks = [size] + [q for q in (int(np.argmax(grid.bins <= m)) for m in _CHECK_BINS)
                       if first <= q < size]
    checks = sorted(set(checks + [first]), reverse=True) if first < size else [size]
    return _Curves(curves, tail, first, np.array(checks, dtype=np.int64))


def _pair_bounds(data: _Curves, grid: _Grid, rows: NDArray[np.intp], cols: NDArray[np.intp],
                 levels: NDArray[np.float64], compat: str | None, floor: float
                 ) -> NDArray[np.float64]:
    """Upper bounds (widened) of the "auto" value of pairs ``(rows, cols)`` (steps 1-4)."""
    from ..._kernels.madd import auto_pair_bounds

    unique, level = np.unique(levels, return_inverse=True)
    firsts = np.full((unique.size, grid.h.size), grid.h.size, dtype=np.int64)
    for u, length in enumerate(unique.tolist()):
        ends = _first_ends(grid, length, compat != "maddlib")
        firsts[u, :ends.size] = ends
    bound = auto_pair_bounds(data.curves, data.tail, data.first, grid.start, grid.bins,
                             rows.astype(np.int64), cols.astype(np.int64),
                             level.astype(np.int64), firsts, data.checks, floor)
    return _worst_pair.widen(bound)


def _seed_pairs(sizes: NDArray[np.int64], curves: NDArray[np.float64]
                ) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Return pairs likely to be near the worst (among the smallest and the farthest groups).

    The farthest are those farthest from the pooled scores; only the floor's quality, i.e.
    the cost, depends on the choice.
    """
    small = np.argsort(sizes, kind="stable")[:_SEED_GROUPS]
    far = np.argsort(-curves[:, 0].mean(axis=1), kind="stable")[:_SEED_GROUPS]
    chosen = np.unique(np.concatenate([small, far]))
    i, j = np.triu_indices(chosen.size, k=1)
    return chosen[i], chosen[j]


def worst_auto(parts: Sequence[NDArray[np.float64]], sizes: NDArray[np.int64], grid: _Grid,
               compat: str | None, pair: Callable[[int, int], float]) -> _worst_pair.WorstPair:
    """Return the worst pair of MADD "auto" (``parts``: each group's scores, sorted).

    ``pair(i, j)`` scores a pair exactly (the all-pairs loop's ``_auto_pair``). The bounds of
    a few likely pairs (:func:`_seed_pairs`) pick the pairs scored first, to set a floor; then
    every pair gets its bound (a pair stops at the first check below the floor) and the search
    scores pairs by decreasing bound.
    """
    k = len(parts)
    data = _group_curves(parts, sizes, grid)
    rows, cols = _worst_pair.pair_indices(k)
    a, b = _seed_pairs(sizes, data.curves)
    seed_bound = _pair_bounds(data, grid, a, b, _levels(sizes, a, b, compat), compat, -np.inf)
    floor = -np.inf  # the largest value among the seeds, scoring only those that may be it
    for s in np.argsort(-seed_bound, kind="stable").tolist():
        if seed_bound[s] < floor:
            break
        floor = max(floor, pair(int(a[s]), int(b[s])))
    floor -= _worst_pair.REL_MARGIN * floor + _worst_pair.ABS_MARGIN
    upper = _pair_bounds(data, grid, rows, cols, _levels(sizes, rows, cols, compat), compat,
                         floor)
    return _worst_pair.search(k, upper, pair, floor=floor)


def chance_pairs(result: Any, labels: Sequence[Any], sizes: NDArray[np.float64]
                 ) -> tuple[list[tuple[int, int]], dict[tuple[int, int], int]]:
    """Return the pairs MADD's chance level reads and their bins, scoring no other pair.

    The hook of :func:`~fairmonitor.metrics._score_intervals.score_gap_interval` for a
    :class:`~fairmonitor.metrics.MADDResult` whose pairs were not all scored. Its chance
    level reads the ``MAX_PAIRS`` pairs of smallest groups (``_null_gaps``: a stable sort of
    the pairs by ``-(n_i^-1/2 + n_j^-1/2)``, then the first ``MAX_PAIRS``); given exactly those,
    in that order, it reads the same pairs and gives the same chance level, and only their
    bins are needed (each scored on demand by ``result.pair``). With more than ``MAX_GROUPS``
    groups the interval is undefined before any bin is read: every pair is returned, without
    bins.

    Parameters
    ----------
    result : MADDResult
        The metric's result (``group_labels`` in its matrix order, ``pair``).
    labels : sequence
        The groups of the interval's histograms, in their order (indices of the pairs).
    sizes : ndarray of shape (len(labels),)
        Their rows (the histograms' sums).

    Returns
    -------
    pairs : list of (i, j)
        Indices into ``labels``, in the order the full list of pairs would give them.
    bins : dict
        ``(i, j) -> n_bins`` of those pairs.
    """
    from .._score_intervals import MAX_GROUPS, MAX_PAIRS

    index = {label: k for k, label in enumerate(labels)}
    order = [(index[a], index[b]) for a, b in itertools.combinations(result.group_labels, 2)
             if a in index and b in index]
    if len({g for pair in order for g in pair}) > MAX_GROUPS:
        return order, {}
    smallest = sorted(order, key=lambda q: -(sizes[q[0]] ** -0.5 + sizes[q[1]] ** -0.5))
    smallest = smallest[:MAX_PAIRS]
    bins = {(i, j): int(result.pair(labels[i], labels[j]).n_bins) for i, j in smallest}
    return smallest, bins
