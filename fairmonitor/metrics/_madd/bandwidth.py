"""The bandwidth search of MADD ``"auto"`` (the paper's Algorithm 1, spec ``madd.md`` §4).

MADD is computed on the grid ``h = 1/m`` for ``m = max_bins..1``; the value is the mean over the
interval of ``h`` (width >= 0.45 * h_sup, >= 50 grid steps) where MADD is most stable.
:func:`_grid` lays out the bins of every ``m`` among all distinct edges, so one merge walk of
the edges against a group's sorted scores gives every histogram (:func:`_edges_below`,
:func:`_edge_shares`); :func:`_stable_interval` finds the interval with cumulative sums. The
loops are compiled (:mod:`fairmonitor._kernels.madd`).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from ...exceptions import InvalidInputError

__all__ = ["COMPAT_MIN_LENGTH", "LENGTH_FRACTION", "MIN_POINTS", "madd_h_sup"]

#: Algorithm 1's ``nbPointsMin`` and ``percent`` (paper §4.3.1).
MIN_POINTS = 50
LENGTH_FRACTION = 0.45
#: maddlib's ``MADD(h="auto")`` never passes the group sizes, so its minimum width is 0.05.
COMPAT_MIN_LENGTH = 0.05
# Two standard deviations closer than this are a tie, settled by the first interval (the
# reference's strict "<" in loop order); absorbs float round-off between implementations.
_STD_TIE = 1e-12


def madd_h_sup(n_a: int, n_b: int) -> float:
    """Return the paper's optimal bandwidth order ``h_sup = (1/sqrt(n_a) + 1/sqrt(n_b))^(2/3)``.

    Theorem 2 of the paper: MADD converges to the L1 distance between the group densities
    fastest when the bandwidth is of this order.

    >>> round(madd_h_sup(10_000, 10_000), 6)
    0.073681
    """
    return float(((n_a**0.5 + n_b**0.5) / (n_a * n_b) ** 0.5) ** (2 / 3))


# ---------------------------------------------------------------------------------------------
# The bandwidth grid of "auto": the bins of every m, located among all distinct edges


class _Grid(NamedTuple):
    h: NDArray[np.float64]  # ascending bandwidths (the search axis)
    bins: NDArray[np.intp]  # bin count behind each h
    edges: NDArray[np.float64]  # every distinct edge np.linspace(0, 1, m + 1)[k], sorted
    lo: NDArray[np.intp]  # for every bin of every m (concatenated): its left edge in `edges`
    hi: NDArray[np.intp]  # ... and its right edge
    # every edge of every m (concatenated, m + 1 each): its place in `edges`; the bin k of the
    # q-th m runs from where[k + q] to where[k + q + 1] (a quarter of lo and hi's bytes)
    where: NDArray[np.int32]
    start: NDArray[np.intp]  # first bin of each m among all bins
    stop: NDArray[np.intp]  # one past its last bin


@functools.lru_cache(maxsize=8)
def _grid(max_bins: int, compat: str | None) -> _Grid:
    if compat == "maddlib":
        # generate_bandwidths(N + 1), then int(floor(1/h)) per h: some m appear twice and
        # others never (floor(1/(1/93)) = 92), as in the package.
        h = (1 / np.arange(1, max_bins + 1))[::-1]
        bins = np.floor(1 / h).astype(np.intp)
    else:
        bins = np.arange(max_bins, 0, -1, dtype=np.intp)
        h = 1.0 / bins
    per_m = np.concatenate([np.linspace(0.0, 1.0, m + 1) for m in bins])
    # distinct edges, so that one searchsorted of sorted needles locates all of them (the
    # float edges of different m are compared exactly: 3 * (1/10) and 6 * (1/20) may differ)
    edges, where = np.unique(per_m, return_inverse=True)
    first = np.concatenate([[0], np.cumsum(bins + 1)[:-1]])
    start = np.concatenate([[0], np.cumsum(bins)[:-1]])
    left = np.arange(int(bins.sum())) + np.repeat(first - start, bins)
    grid = _Grid(h, bins, edges, where[left], where[left + 1], where.astype(np.int32), start,
                 start + bins)
    for array in grid:
        array.flags.writeable = False  # cached and shared between calls
    return grid


def _edge_counts(sorted_scores: NDArray[np.float64], grid: _Grid) -> NDArray[np.int64]:
    """Return the counts per bin for every m of the grid, identical to ``np.histogram`` per m."""
    below = _edges_below(sorted_scores, grid)
    return below[grid.hi] - below[grid.lo]


def _edges_below(sorted_scores: NDArray[np.float64], grid: _Grid,
                 out: NDArray[np.int64] | None = None) -> NDArray[np.int64]:
    """Return the scores below each edge of ``grid.edges`` (the last edge, 1.0, closes the bins).

    One compiled merge walk of the sorted edges against the sorted scores: O(E + n), instead
    of a binary search per edge (or, for few scores, per score and a count over the edges).
    """
    from ..._kernels.madd import edges_below

    below = np.empty(grid.edges.size, dtype=np.int64) if out is None else out
    edges_below(np.ascontiguousarray(sorted_scores, dtype=np.float64), grid.edges, below)
    below[-1] = sorted_scores.size  # the last edge is 1.0, and the last bin is closed
    return below


def _edge_shares(sorted_scores: NDArray[np.float64], grid: _Grid,
                 out: tuple[NDArray[np.float64], NDArray[np.int64]] | None = None
                 ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Every bin's share ``counts / n`` (numpy's bits) and :func:`_edges_below` of a group.

    ``out``: arrays to fill (``grid.lo.size`` shares, ``grid.edges.size`` positions).
    """
    below = _edges_below(sorted_scores, grid, None if out is None else out[1])
    return _shares_below(below, grid, sorted_scores.size, None if out is None else out[0])


def _shares_below(below: NDArray[np.int64], grid: _Grid, n: int,
                  out: NDArray[np.float64] | None = None
                  ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Return the shares of every bin from the rows below each edge (the last must be ``n``)."""
    from ..._kernels.madd import bin_shares

    share = np.empty(grid.lo.size) if out is None else out
    bin_shares(below, grid.where, grid.start, grid.bins, n, share)
    return share, below


def _null_terms(counts_a: NDArray[Any], counts_b: NDArray[Any], n_a: int, n_b: int
                ) -> NDArray[np.float64]:
    pooled = (counts_a + counts_b) / (n_a + n_b)
    return np.sqrt(pooled * (1.0 - pooled)) * math.sqrt(2 / math.pi * (1 / n_a + 1 / n_b))


# ---------------------------------------------------------------------------------------------
# Algorithm 1


def _stable_interval(h: NDArray[np.float64], values: NDArray[np.float64], min_length: float,
                     *, extend: bool) -> tuple[int, int, float]:
    """Return ``(i, j)`` of the interval of ``h`` with the most stable ``values``, and its std.

    An interval starts at ``i`` if ``h[i] + min_length`` does not pass ``h[-1]``; ``k`` is the
    last grid point within ``h[i] + min_length``. The interval must reach ``j - i >=
    MIN_POINTS`` (the package's count of "50 points"): with ``extend`` (the paper) a shorter
    ``[i, k]`` is extended to ``i + MIN_POINTS``; without (maddlib) that start is skipped. Every
    end ``j`` from there to the last grid point is a candidate; the first interval (smallest
    ``i``, then ``j``) with the smallest population standard deviation wins.
    """
    from ..._kernels.madd import stable_interval_search

    first_end = _first_ends(h, min_length, extend=extend)
    # the std of values[i..j] for every start i and end j: cumulative sums of values - values[i]
    # (centring on the interval's first value keeps the sums small, no cancellation, and makes
    # a flat run exactly 0), one compiled pass per start that can hold the answer instead of an
    # N x N numpy table (the other starts are skipped in O(1))
    row, col, variance = stable_interval_search(
        np.ascontiguousarray(values, dtype=np.float64), first_end, _STD_TIE)
    return int(row), int(col), math.sqrt(max(float(variance), 0.0))


def _first_ends(h: NDArray[np.float64], min_length: float, *, extend: bool
                ) -> NDArray[np.int64]:
    """Each start's first admissible end (``h.size``: none); raises if no start has one."""
    from ..._kernels.madd import first_ends

    first_end = first_ends(h, float(min_length), extend, MIN_POINTS)
    if not (first_end < h.size).any():
        raise InvalidInputError(
            f"madd: no bandwidth interval holds {MIN_POINTS + 1} grid points; raise `max_bins`."
        )
    return first_end
