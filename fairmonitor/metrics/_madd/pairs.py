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

Step 1 is loose for pairs of two small groups: at fine bins both curves through a reference
are noise near 2, so their sum is capped at 2 whatever the pair, and those pairs are scored.
(Step 2 with the pair's own curve, ``U = c``, would rule out ~99% of them, but the curve is
~85% of a pair's cost: a cheaper bound needs a compiled sparse curve, O(m) per bin count
over the smaller group's occupied bins.)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .. import _worst_pair
from .bandwidth import COMPAT_MIN_LENGTH, LENGTH_FRACTION, MIN_POINTS, _Grid

__all__ = ["AUTO_SMALL", "chance_pairs", "worst_auto", "worst_fixed"]

#: Min-length levels per factor of 2 (step ~4%): pairs share the admissible intervals of
#: their level, a little looser than their own.
_LEVELS_PER_OCTAVE = 16
#: Pairs per block of the interval bounds (a few MB of curves at a time).
_BLOCK = 2048
#: Pairs scored first to set the floor that the cheap bounds prune against.
_SEEDS = 8
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


def _interval_bound(upper: NDArray[np.float64], starts: NDArray[np.intp],
                    first: NDArray[np.intp]) -> NDArray[np.float64]:
    """``max_i max(mean(U[i..f_i]), max_{t > f_i} U_t)`` per row of ``upper`` (step 2)."""
    size = upper.shape[1]
    total = np.zeros((upper.shape[0], size + 1))
    np.cumsum(upper, axis=1, out=total[:, 1:])
    after = np.full((upper.shape[0], size + 1), -np.inf)
    after[:, :size] = np.maximum.accumulate(upper[:, ::-1], axis=1)[:, ::-1]
    mean = (total[:, first + 1] - total[:, starts]) / (first + 1 - starts)
    return np.maximum(mean, after[:, first + 1]).max(axis=1)


def _first_ends(grid: _Grid, min_length: float, extend: bool
                ) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Return the admissible starts and their first ends at ``min_length``."""
    from ..._kernels.madd import first_ends  # numba: only when "auto" runs

    ends = first_ends(grid.h, float(min_length), extend, MIN_POINTS)
    starts = np.flatnonzero(ends < grid.h.size)
    return starts, ends[starts].astype(np.intp)


def _levels(sizes: NDArray[np.int64], rows: NDArray[np.intp], cols: NDArray[np.intp],
            compat: str | None) -> NDArray[np.float64]:
    """Each pair's minimum interval length, rounded down to a level (step 3)."""
    if compat == "maddlib":
        return np.full(rows.size, COMPAT_MIN_LENGTH)
    h_sup = ((np.sqrt(sizes[rows]) + np.sqrt(sizes[cols]))
             / np.sqrt(sizes[rows] * sizes[cols].astype(float))) ** (2 / 3)
    return _level(LENGTH_FRACTION * h_sup * (1 - 1e-12))


def _curve_bounds(upper: NDArray[np.float64], levels: NDArray[np.float64], grid: _Grid,
                  compat: str | None) -> NDArray[np.float64]:
    """Return the largest mean of ``upper`` (a row a pair) over its admissible intervals."""
    bound = np.full(upper.shape[0], 2.0)
    for level in np.unique(levels).tolist():
        starts, first = _first_ends(grid, level, compat != "maddlib")
        if starts.size:
            on = levels == level
            bound[on] = _interval_bound(upper[on], starts, first)
    return bound


def _auto_bounds(curves: NDArray[np.float64], sizes: NDArray[np.int64],
                 rows: NDArray[np.intp], cols: NDArray[np.intp], grid: _Grid,
                 compat: str | None) -> NDArray[np.float64]:
    """Upper bounds of the "auto" value of pairs ``(rows, cols)`` (steps 1-3)."""
    levels = _levels(sizes, rows, cols, compat)
    order = np.argsort(levels, kind="stable")  # blocks of few levels
    bound = np.full(rows.size, 2.0)
    for lo in range(0, rows.size, _BLOCK):
        block = order[lo:lo + _BLOCK]
        a, b = rows[block], cols[block]
        upper = curves[0, a] + curves[0, b]
        for r in range(1, curves.shape[0]):
            np.minimum(upper, curves[r, a] + curves[r, b], out=upper)
        np.minimum(upper, 2.0, out=upper)
        bound[block] = _curve_bounds(upper, levels[block], grid, compat)
    return bound


def worst_auto(shares: NDArray[np.float64], sizes: NDArray[np.int64], grid: _Grid,
               compat: str | None, pair: Callable[[int, int], float]) -> _worst_pair.WorstPair:
    """Return the worst pair of MADD "auto" (``shares``: groups x every bin of the grid).

    ``pair(i, j)`` scores a pair exactly (the all-pairs loop's ``_auto_pair``). First the
    pairs with the largest cheap bound (each curve's maximum through the references) are
    scored, to set a floor; only the pairs whose cheap bound reaches it get the interval
    bound of the module docstring, and the search scores pairs by decreasing bound.
    """
    from ..._kernels.madd import madd_curve  # numba: only when "auto" runs

    k = shares.shape[0]
    curves = np.array([[madd_curve(shares[g], ref, grid.start, grid.stop) for g in range(k)]
                       for ref in _references(shares, sizes)])
    rows, cols = _worst_pair.pair_indices(k)
    peak = curves.max(axis=2)
    cheap = _worst_pair.widen(np.minimum(
        2.0, (peak[:, rows] + peak[:, cols]).min(axis=0)))
    seeds = np.argsort(-cheap, kind="stable")[:_SEEDS]
    floor = max(pair(int(rows[s]), int(cols[s])) for s in seeds.tolist())
    floor -= _worst_pair.REL_MARGIN * floor + _worst_pair.ABS_MARGIN
    upper = cheap.copy()
    near = np.flatnonzero(cheap >= floor)
    upper[near] = _worst_pair.widen(_auto_bounds(curves, sizes, rows[near], cols[near], grid,
                                                 compat))
    return _worst_pair.search(k, upper, pair, floor=floor)


def chance_pairs(result: Any, labels: Sequence[Any], sizes: NDArray[np.float64]
                 ) -> tuple[list[tuple[int, int]], dict[tuple[int, int], int]]:
    """Return the pairs MADD's chance level reads and their bins, scoring no other pair.

    The hook of :func:`~fairmonitor.metrics._intervals.score_gap_interval` for a
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
    from .._intervals import MAX_GROUPS, MAX_PAIRS

    index = {label: k for k, label in enumerate(labels)}
    order = [(index[a], index[b]) for a, b in itertools.combinations(result.group_labels, 2)
             if a in index and b in index]
    if len({g for pair in order for g in pair}) > MAX_GROUPS:
        return order, {}
    smallest = sorted(order, key=lambda q: -(sizes[q[0]] ** -0.5 + sizes[q[1]] ** -0.5))
    smallest = smallest[:MAX_PAIRS]
    bins = {(i, j): int(result.pair(labels[i], labels[j]).n_bins) for i, j in smallest}
    return smallest, bins
