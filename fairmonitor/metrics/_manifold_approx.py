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
* Candidate distances use the compact features, never the one-hot matrix: the label, the
  scaled numeric columns (:func:`_compact_table`) and one packed word of categorical codes per
  row, about ``2 + n_numeric`` values per pair instead of ``1 + n_x`` (Adult: 8, not 102). A
  differing category adds exactly 2 (two one-hot coordinates flip). Candidates are processed in
  ``(2 * m2, rows)`` chunks, so every operation runs on contiguous runs of rows, and the terms
  are added in the order of :meth:`FeatureSpace.sqdist <._manifold_exact.FeatureSpace.sqdist>`:
  every pair's distance is bit-for-bit the one the exact path computes.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import NDArray

from ._manifold_exact import FeatureSpace, _count_lanes

__all__ = ["approx_distances", "default_m2"]

log = logging.getLogger(__name__)

#: Orthonormal directions per repetition (the paper's choice, Alg. 2 line 2).
N_DIRECTIONS = 2

#: Candidate pairs evaluated per vectorised chunk: the gathered coordinates (~0.5 MiB for
#: Adult's 7 per pair) stay in cache.
_CHUNK_PAIRS = 1 << 13

#: One in every byte: multiplying 0/1 bytes by it sums them into the top byte.
_BYTE_ONES = np.uint64(0x0101010101010101)


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


def _candidates(groups: NDArray[np.intp], m2: int
                ) -> Iterator[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """Sorted positions of the ``m2`` nearest other-group rows on each side of every row.

    ``groups`` are the group codes in projection order. Yields ``(rows, cand)`` chunks, ``cand``
    of shape ``(2 * m2, rows.size)``: column ``t`` lists, for the row at position ``rows[t]``,
    the positions of up to ``m2`` rows of another group before it and up to ``m2`` after it, as
    Alg. 3 lines 6 and 8; where a side runs out, the position ``n`` (a sentinel row at infinite
    distance) fills in. Every row appears in exactly one chunk.
    """
    n = groups.size
    offsets = np.arange(2 * m2)[:, None]
    sentinel = np.full(m2, n, dtype=np.intp)
    chunk = max(1, _CHUNK_PAIRS // (2 * m2))
    for j in np.unique(groups):
        mine = np.flatnonzero(groups == j)
        other = np.concatenate([sentinel, np.flatnonzero(groups != j), sentinel])
        # rows of other groups before position p: p minus the rows of group j before it, so
        # other[ins-1] is the nearest other-group row before and other[ins] the nearest after
        # (in the unpadded array; the padding shifts both by m2)
        ins = mine - np.arange(mine.size)
        for c0 in range(0, mine.size, chunk):
            yield mine[c0:c0 + chunk], other[offsets + ins[c0:c0 + chunk]]


def _compact_table(space: FeatureSpace, label: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(1 + n_numeric, n)`` coordinates of every row: the label, then the numeric columns.

    With :attr:`FeatureSpace.packed` (one integer word per row holding every categorical code),
    this is all a pair's distance needs: about ``2 + n_numeric`` values per row instead of the
    ``1 + n_x`` one-hot coordinates.
    """
    return np.concatenate([label[None, :], space.columns])


def _pair_sqdist(coords: NDArray[np.float64], packed: NDArray[np.uint64], lane_bits: int,
                 i: NDArray[np.intp], j: NDArray[np.intp]) -> NDArray[np.float64]:
    """Squared distances between rows ``i`` (shape ``(c,)``) and ``j`` (``(k, c)``).

    ``coords`` from :func:`_compact_table`, ``packed`` the packed categorical codes, both with
    one column per row. The terms are those of :meth:`FeatureSpace.sqdist
    <._manifold_exact.FeatureSpace.sqdist>`, added in the same order: bit-for-bit equal. The
    layout keeps every operation on contiguous runs of length ``c``.
    """
    g = np.take(coords, j, axis=1)  # (n_float, k, c)
    g -= coords[:, i][:, None, :]
    g *= g
    out = g[0].copy()
    for term in g[1:]:
        out += term
    if packed.shape[0]:
        mismatches = 0
        for word in packed:
            x = word[j] ^ word[i]
            if lane_bits == 8:  # non-zero bytes as 0/1 bytes, summed by one multiply
                x = ((x.view(np.uint8) != 0).view(np.uint64) * _BYTE_ONES) >> np.uint64(56)
            else:
                x = _count_lanes(x, lane_bits)
            mismatches = mismatches + x
        # a differing category flips two one-hot coordinates: +1 + 1
        out += 2.0 * mismatches
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


def _accele(coords: NDArray[np.float64], packed: NDArray[np.uint64], lane_bits: int,
            groups: NDArray[np.intp], m2: int) -> tuple[float, float]:
    """AcceleDist (Alg. 3) on rows sorted by their projection: ``(max, sum)`` of the per-row
    minimum distances.

    ``coords`` and ``packed`` (see :func:`_pair_sqdist`) hold one extra row at the end, the
    sentinel (label +inf).
    """
    n = groups.size
    best = np.empty(n)
    # more than n - 1 candidates per side cannot exist; the cap keeps the arrays small
    for rows, cand in _candidates(groups, min(m2, max(n - 1, 1))):
        best[rows] = _pair_sqdist(coords, packed, lane_bits, rows, cand).min(axis=0)
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
    tables = [_compact_table(space, label) for label in labels]

    def _sorted(rows: NDArray[np.intp], v: int) -> tuple[NDArray[np.float64], NDArray[np.uint64]]:
        """Coordinates and packed codes of ``rows``, in that order, with label version ``v``."""
        return np.take(tables[v], rows, axis=1), np.take(space.packed, rows, axis=1)

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
            everyone = None  # the sorted rows, shared by attributes that keep every row
            for s in range(n_attr):
                groups = attributes[order, s]
                if kept[s] == n:
                    if everyone is None:  # the sentinel stays last
                        everyone = _sorted(np.append(order, n), v)
                    sorted_rows = everyone
                else:
                    kept_rows = groups >= 0  # rows of excluded groups are not in the data set
                    groups = groups[kept_rows]
                    sorted_rows = _sorted(np.append(order[kept_rows], n), v)
                out[v, s] = _accele(*sorted_rows, space.lane_bits, groups, m2)
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
