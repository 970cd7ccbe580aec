"""The worst pair among K groups without scoring all K(K-1)/2 pairs (issue 30).

A distribution metric aggregated by ``"max"`` needs one number, the largest pair value; with
hundreds of groups (an intersection) scoring every pair is what costs. For a metric that obeys
the triangle inequality (W1 for ABCC, the L1 distance of densities for ABPC and of histograms
for MADD at a fixed bin count) the distances of each group to a few *reference*
distributions bound every pair from above, ``d(a, b) <= min_r d(a, r) + d(r, b)``, in O(K R)
distance evaluations and O(K^2 R) additions. :func:`search` then scores pairs exactly in
decreasing order of their bound and stops at the first pair whose bound cannot reach the
largest value found: every pair left unscored is provably below the maximum.

**The result is the all-pairs maximum, bit for bit**: the value is an exactly scored pair's,
with the pair function the all-pairs loop calls, and every pair that may hold the maximum is
scored. The bounds hold for the exact distances; the computed ones differ from them by
round-off (a few units in the last place of sums of at most ~10^6 terms), so a bound is
widened by :data:`REL_MARGIN` and :data:`ABS_MARGIN` before it prunes. A pair whose bound
equals the maximum is scored, so ties are found too and the worst pair is the first of the
tied ones in the all-pairs order (``i < j``, row by row), as ``max`` over the matrix gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["ABS_MARGIN", "REL_MARGIN", "SMALL", "WorstPair", "pair_indices", "search",
           "through_references", "widen"]

#: Relative and absolute widening of a bound before it prunes (computed vs exact distances:
#: values <= 2, sums of <= ~10^6 terms, so the round-off is below ~1e-10 absolute).
REL_MARGIN, ABS_MARGIN = 1e-9, 1e-9
#: Up to this many groups every pair is scored (the bounds would cost more than they save).
SMALL = 6


@dataclass(frozen=True, slots=True)
class WorstPair:
    """The largest pair value, its pair and the exactly scored pairs.

    Attributes
    ----------
    value : float
        The largest pair value (the all-pairs maximum).
    pair : tuple of int
        The first pair ``(i, j)``, ``i < j`` in row order, holding it.
    scored : dict
        ``(i, j) -> value`` of every pair scored exactly.
    """

    value: float
    pair: tuple[int, int]
    scored: dict[tuple[int, int], float]


def pair_indices(k: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Return ``(i, j)`` of every pair ``i < j`` in row order (the all-pairs loop's order)."""
    return np.triu_indices(k, k=1)


def widen(bound: NDArray[np.float64]) -> NDArray[np.float64]:
    """Widen upper bounds by the round-off margins (an upper bound only grows)."""
    return bound + (REL_MARGIN * np.abs(bound) + ABS_MARGIN)


def through_references(distances: NDArray[np.float64], cap: float = np.inf
                       ) -> NDArray[np.float64]:
    """Upper bounds of every pair ``i < j`` from distances to references (triangle inequality).

    Parameters
    ----------
    distances : ndarray of shape (R, K)
        ``distances[r, g]``: the metric between group ``g`` and reference ``r``.
    cap : float
        The metric's largest value (a bound never needs to exceed it).

    Returns
    -------
    upper : ndarray of shape (K(K-1)/2,)
        ``min(cap, min_r distances[r, i] + distances[r, j])``, pairs in :func:`pair_indices`
        order (not yet widened).

    Examples
    --------
    >>> through_references(np.array([[0.0, 0.3, 0.5]]), cap=0.6).tolist()
    [0.3, 0.5, 0.6]
    """
    i, j = pair_indices(distances.shape[1])
    upper = np.full(i.size, cap, dtype=float)
    for row in distances:
        np.minimum(upper, row[i] + row[j], out=upper)
    return upper


def search(k: int, upper: NDArray[np.float64], pair: Callable[[int, int], float], *,
           floor: float = -np.inf) -> WorstPair:
    """Score pairs in decreasing order of their bound until no other pair can be the largest.

    Parameters
    ----------
    k : int
        Number of groups (>= 2).
    upper : ndarray of shape (K(K-1)/2,)
        A valid upper bound of each pair's value, :func:`pair_indices` order, already widened
        (:func:`widen`).
    pair : callable
        ``pair(i, j)``: the exact value of pair ``i < j`` (finite).
    floor : float
        A value some pair is known to reach at least (e.g. from lower bounds, already
        narrowed by the margins): pairs whose bound is below it are never sorted.

    Returns
    -------
    WorstPair

    Examples
    --------
    Three points on a line, the distance their gap; the reference is the first point:

    >>> x = np.array([0.0, 0.25, 1.0])
    >>> upper = widen(through_references(np.abs(x - x[0])[None, :]))
    >>> found = search(3, upper, lambda i, j: float(abs(x[i] - x[j])))
    >>> found.value, found.pair, len(found.scored) < 3
    (1.0, (0, 2), True)
    """
    rows, cols = pair_indices(k)
    candidates = np.flatnonzero(upper >= floor)
    if candidates.size == 0:  # round-off beyond the margins: score everything
        candidates = np.arange(upper.size)
    order = candidates[np.argsort(-upper[candidates], kind="stable")]
    best, scored = -np.inf, {}
    for index in order:
        if upper[index] < best:
            break
        key = (int(rows[index]), int(cols[index]))
        scored[key] = pair(*key)
        best = max(best, scored[key])
    first = min(key for key, value in scored.items() if value == best)
    return WorstPair(float(best), first, scored)
