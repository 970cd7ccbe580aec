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
* Walking "at most m2 nearby rows of another group" jumps over each run of the row's own
  group in one step, so a row costs O(m2) however large its group; the reference code walks
  same-group rows one by one, O(n) per row when the row's own group dominates. The walk is
  compiled (:mod:`fairmonitor._kernels.hfm`, Cython): as numpy gathers it cost ~70 ns per pair,
  compiled <10.
* The ``2 * m1`` directions are scanned by a thread pool (one thread per core); the sorts and
  the compiled scan release the GIL. The result does not depend on the number of threads.
* Ties in the projection are left in whatever order the sort puts them: the estimate does not
  depend on it. Distinct points tie only on a null set of directions; identical points (same
  label and features) tie, and are at the same distance from any row, so a walk that counts
  some of them finds the same minimum whichever it counts, and a row among them whose group
  differs from another's is at distance 0 either way. (The unstable sort is ~5x faster than a
  stable one.)
* Candidate distances use the compact features, never the one-hot matrix: the label, the
  scaled numeric columns and one packed word of categorical codes per row, about
  ``2 + n_numeric`` values per pair instead of ``1 + n_x`` (Adult: 8, not 102). A differing
  category adds exactly 2 (two one-hot coordinates flip). The terms are added in the order of
  :meth:`FeatureSpace.sqdist <._manifold_exact.FeatureSpace.sqdist>`: every pair's distance
  is bit-for-bit the one the exact path computes.
"""

from __future__ import annotations

import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import NDArray

from .exact import FeatureSpace

__all__ = ["approx_distances", "default_m2"]

log = logging.getLogger(__name__)

#: Orthonormal directions per repetition (the paper's choice, Alg. 2 line 2).
N_DIRECTIONS = 2

def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_m2(n: int) -> int:
    """Return the paper's ``m2 = ceil(2 log10 n)``, at least 1.

    >>> default_m2(118), default_m2(1000), default_m2(30162), default_m2(1)
    (5, 6, 9, 1)
    """
    return max(1, math.ceil(2 * math.log10(n))) if n > 1 else 1


def _compact_table(space: FeatureSpace, label: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(1 + n_numeric, n)`` coordinates of every row: the label, then the numeric columns.

    With :attr:`FeatureSpace.packed` (one integer word per row holding every categorical code),
    this is all a pair's distance needs: about ``2 + n_numeric`` values per row instead of the
    ``1 + n_x`` one-hot coordinates.
    """
    return np.concatenate([label[None, :], space.columns])


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
    from ..._kernels.hfm import nearest_other_group_sqdist

    tables = [_compact_table(space, label) for label in (label_true, label_pred)]

    def _accele(coords: NDArray[np.float64], packed: NDArray[np.uint64],
                groups: NDArray[np.intp]) -> tuple[float, float]:
        """AcceleDist (Alg. 3) on rows in projection order: max and sum of row minima."""
        best = nearest_other_group_sqdist(coords, packed, space.lane_bits, groups, m2)
        np.sqrt(best, out=best)
        return float(best.max()), float(best.sum())

    # Alg. 2 line 2, drawn up front in a fixed order so the result does not depend on threads
    frames = [np.linalg.qr(rng.standard_normal((dim, n_dir)))[0] for _ in range(m1)]
    directions = [frame[:, k] for frame in frames for k in range(n_dir)]
    workers = min(_available_cores(), len(directions))
    log.info("hfm approx: %d rows, %d dims, %d attributes, m1=%d, m2=%d, %d threads", n, dim,
             n_attr, m1, m2, workers)

    def scan(w: NDArray[np.float64]) -> NDArray[np.float64]:
        """AcceleDist along ``w`` for both label versions and every attribute."""
        out = np.empty((2, n_attr, 2))
        gx = space.project(w[1:])  # the label coordinate is w[0]
        for v, label in enumerate((label_true, label_pred)):
            order = np.argsort(gx + label * w[0])  # ties: see the module docstring
            # the sorted rows, gathered once for every attribute that keeps them all
            coords = np.take(tables[v], order, axis=1)
            packed = np.take(space.packed, order, axis=1)
            for s in range(n_attr):
                groups = attributes[order, s]
                if kept[s] == n:
                    out[v, s] = _accele(coords, packed, groups)
                else:
                    kept_rows = groups >= 0  # rows of excluded groups are not in the data set
                    out[v, s] = _accele(coords[:, kept_rows], packed[:, kept_rows],
                                        groups[kept_rows])
        return out

    # numpy's sorts and gathers and the compiled scan release the GIL, so threads scale
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
