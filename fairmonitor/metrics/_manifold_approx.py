"""ApproxDist / ExtendDist / AcceleDist (paper 000, Algorithms 1-3): projected HFM distances.

AcceleDist (Alg. 3) projects every point ``z = (label, x)`` on a direction ``w``, sorts by the
projection, and compares each row only with the ``m2`` nearest rows *of another group* on each
side in that order. ApproxDist (Alg. 2) repeats this on ``m1`` random frames of two orthonormal
directions and keeps the smallest maximum and the smallest sum; ExtendDist (Alg. 1) takes the
max (maximal version) and the mean (average version) over the attributes.

Every per-row value is a minimum over a *subset* of the true candidates, so each estimate is an
**upper bound** of the exact distance; with ``m2 >= n - 1`` every candidate is scanned and the
estimate is exact.

Choices, all deliberate:

* Directions: QR of a standard-normal ``(1 + n_x) x 2`` matrix, as the paper's footnote 5 (the
  first two columns of the QR of the full square matrix are the QR of its first two columns).
  The reference code draws uniform [0, 1) entries and Gram-Schmidt, whose first direction
  always lies in the positive orthant.
* The same directions serve the true-label and the predicted-label distance (common random
  numbers): perfect predictions give exactly ``D_f = D``. The reference code draws them
  independently, so its HFM of a perfect model is not 0.
* The same directions serve every attribute: each attribute's estimate has exactly Alg. 2's
  distribution, and one sort per direction serves all attributes. An attribute's estimate
  therefore does not depend on which other attributes are evaluated with it.
* Walking "at most m2 nearby rows of another group" is an index into the sorted positions of
  the other groups (a row's position minus its rank in its own group), so skipping same-group
  rows costs nothing; the reference code walks them one by one, O(n) per row when the row's
  own group dominates.
* The ``2 * m1`` directions are scanned by a thread pool (one thread per core); numpy
  releases the GIL in the sorts, gathers and arithmetic. The result does not depend on the
  number of threads.
* Ties in the projection are broken by row order, so results are reproducible on any machine
  (the reference code's ``np.argsort`` leaves them to the sort algorithm).
"""

from __future__ import annotations

import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import NDArray

from ._manifold_exact import FeatureSpace

__all__ = ["approx_distances", "default_m2"]

log = logging.getLogger(__name__)

#: Orthonormal directions per repetition (the paper's choice, Alg. 2 line 2).
N_DIRECTIONS = 2

#: Candidate pairs evaluated per vectorised chunk (arrays of 256 KiB stay in cache).
_CHUNK_PAIRS = 1 << 15


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_m2(n: int) -> int:
    """The paper's ``m2 = ceil(2 log10 n)``, at least 1.

    >>> default_m2(118), default_m2(1000), default_m2(30162), default_m2(1)
    (5, 6, 9, 1)
    """
    return max(1, math.ceil(2 * math.log10(n))) if n > 1 else 1


def _candidates(groups: NDArray[np.intp], m2: int) -> NDArray[np.intp]:
    """Sorted positions of the ``m2`` nearest other-group rows on each side of every row.

    ``groups`` are the group codes in projection order. Row ``p`` of the result lists, for the
    row at position ``p``, the positions of up to ``m2`` rows of another group before it and up
    to ``m2`` after it, as Alg. 3 lines 6 and 8; where a side runs out, the position ``n`` (a
    sentinel row at infinite distance) fills in.
    """
    n = groups.size
    out = np.empty((n, 2 * m2), dtype=np.intp)
    offsets = np.arange(2 * m2)
    sentinel = np.full(m2, n, dtype=np.intp)
    for j in np.unique(groups):
        mine = np.flatnonzero(groups == j)
        other = np.concatenate([sentinel, np.flatnonzero(groups != j), sentinel])
        # rows of other groups before position p: p minus the rows of group j before it, so
        # other[ins-1] is the nearest other-group row before and other[ins] the nearest after
        # (in the unpadded array; the padding shifts both by m2)
        ins = mine - np.arange(mine.size)
        out[mine] = other[ins[:, None] + offsets]
    return out


def _sort_by_projection(g: NDArray[np.float64]) -> NDArray[np.intp]:
    """``argsort(g)`` with ties broken by row index, whatever sort algorithm numpy picks.

    The default (SIMD quicksort) is ~5x faster than a stable sort but orders equal keys
    arbitrarily; duplicated rows make ties common. Re-sorting the unique integer keys
    ``run * n + row`` puts each tied run in row order.
    """
    n = g.size
    order = np.argsort(g)
    sorted_g = g[order]
    run = np.concatenate([[0], np.cumsum(sorted_g[1:] != sorted_g[:-1])])
    return np.sort(run * n + order) % n


def _accele(space: FeatureSpace, label: NDArray[np.float64], groups: NDArray[np.intp],
            m2: int) -> tuple[float, float]:
    """AcceleDist (Alg. 3) on rows sorted by their projection: ``(max, sum)`` of the per-row
    minimum distances.

    ``space`` and ``label`` hold one extra row at the end, the sentinel (label +inf).
    """
    n = groups.size
    # more than n - 1 candidates per side cannot exist; the cap keeps the arrays small
    cand = _candidates(groups, min(m2, max(n - 1, 1)))
    chunk = max(1, _CHUNK_PAIRS // cand.shape[1])
    best = np.empty(n)
    for c0 in range(0, n, chunk):
        c1 = min(c0 + chunk, n)
        d2 = space.sqdist(np.arange(c0, c1)[:, None], cand[c0:c1], label)
        d2.min(axis=1, out=best[c0:c1])
    np.sqrt(best, out=best)
    return float(best.max()), float(best.sum())


def approx_distances(
    space: FeatureSpace,
    label_true: NDArray[np.float64],
    label_pred: NDArray[np.float64],
    attributes: NDArray[np.intp],
    *,
    m1: int,
    m2: int,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """ApproxDist for every attribute and both label versions (Alg. 2, called by Alg. 1).

    Parameters
    ----------
    space : FeatureSpace
        The non-sensitive features.
    label_true, label_pred : ndarray of shape (n,)
        Class codes of the labels and the predictions.
    attributes : ndarray of shape (n, n_attributes)
        Group codes; ``-1`` leaves a row out of that attribute.
    m1 : int
        Repetitions (random frames).
    m2 : int
        Other-group rows compared on each side of a row.
    rng : numpy.random.Generator
        Source of the random directions.

    Returns
    -------
    maximal, average : ndarray of shape (2, n_attributes)
        Row 0 with the true labels, row 1 with the predictions: estimates of Eq. (4) and
        Eq. (5), each an upper bound of the exact value.
    """
    started = time.perf_counter()
    n, n_attr = attributes.shape
    dim = 1 + space.n_dims
    n_dir = min(N_DIRECTIONS, dim)  # a 1-D space has a single direction
    kept = (attributes >= 0).sum(axis=0)
    # one sentinel row (index n) at infinite distance pads the candidate lists
    space = space.take(np.append(np.arange(n), 0))
    labels = (np.append(label_true, np.inf), np.append(label_pred, np.inf))
    # Alg. 2 line 2, drawn up front in a fixed order so the result does not depend on threads
    frames = [np.linalg.qr(rng.standard_normal((dim, n_dir)))[0] for _ in range(m1)]
    directions = [frame[:, k] for frame in frames for k in range(n_dir)]
    workers = min(_available_cores(), len(directions))
    log.info("hfm approx: %d rows, %d dims, %d attributes, m1=%d, m2=%d, %d threads", n, dim,
             n_attr, m1, m2, workers)

    def scan(w: NDArray[np.float64]) -> NDArray[np.float64]:
        """AcceleDist along ``w`` for both label versions and every attribute."""
        out = np.empty((2, n_attr, 2))
        gx = space.project(w[1:])[:n]  # the label coordinate is w[0]
        for v, label in enumerate(labels):
            order = _sort_by_projection(gx + label[:n] * w[0])
            for s in range(n_attr):
                groups = attributes[order, s]
                kept_rows = groups >= 0  # rows of excluded groups are not in the data set
                rows = np.append(order[kept_rows], n)  # the sentinel stays last
                out[v, s] = _accele(space.take(rows, codes=False), label[rows],
                                    groups[kept_rows], m2)
        return out

    # numpy releases the GIL in the sort, the gathers and the arithmetic, so threads scale
    if workers > 1:
        with ThreadPoolExecutor(workers, thread_name_prefix="hfm-approx") as pool:
            scans = list(pool.map(scan, directions))
    else:
        scans = [scan(w) for w in directions]
    # Alg. 2 takes the min over the n_dir directions of a repetition (lines 6-7), then over
    # the repetitions (line 9): together, the min over all directions, of the max and of the
    # sum separately
    best = np.min(scans, axis=0)
    log.info("hfm approx: done in %.2f s", time.perf_counter() - started)
    return best[..., 0], best[..., 1] / kept
