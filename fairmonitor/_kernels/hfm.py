"""AcceleDist's scan (paper 000, Alg. 3 lines 3-11), compiled with numba.

The scan is a data-dependent loop: from every row, walk outwards in projection order, skip rows
of the row's own group, and measure up to ``m2`` rows of other groups on each side. numpy can
only run it as gathers of ``(2 m2, n)`` candidate blocks and elementwise passes over them
(~70 ns per pair on Adult); compiled, a pair costs under 10 ns, which is what makes
ApproxDist worth having at 10^5 rows (the paper's point). numba is the one dependency that
compiles it without a build step; this module is imported only by ``method="approx"``.

The pair distance is
:meth:`FeatureSpace.sqdist <fairmonitor.metrics._hfm.exact.FeatureSpace.sqdist>`'s,
term by term in the same order (label, numeric columns, then 2 per differing category), with no
fast-math: every pair's squared distance is bit-for-bit the exact path's.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fairmonitor._kernels import compiled  # absolute: a test loads this file on its own

__all__ = ["nearest_other_group_sqdist"]


@compiled(inline="always")
def _differing_lanes(x, lane_bits, low):  # pragma: no cover - compiled
    """Count the non-zero ``lane_bits``-wide lanes of ``x``, branch-free.

    ``low`` has every bit of every lane set but the lane's top bit. The count is exact, like
    that of the exact path's vectorised :func:`fairmonitor.metrics._hfm.exact._count_lanes`.
    """
    # (x & low) + low carries into a lane's top bit iff the lane's other bits are not all 0;
    # or-ing x adds the top bit itself: the top bit of each lane now says "lane != 0"
    top = (((x & low) + low) | x) & ~low
    ones = ~low >> np.uint64(lane_bits - 1)  # bit 0 of every lane
    # the lowest bits, multiplied by ones, sum into the top lane
    return ((top >> np.uint64(lane_bits - 1)) * ones) >> np.uint64(64 - lane_bits)


@compiled(inline="always")
def _min_sqdist(coords, packed, lane_bits, low, p, cand, start, stop):  # pragma: no cover
    """Smallest squared distance from row ``p`` to the rows ``cand[start:stop]``."""
    best = np.inf
    last = stop - 1
    # Four candidates at a time: four independent sums keep the FPU busy, where one sum's
    # chain of dependent additions stalls it. Each sum still adds its terms in
    # FeatureSpace.sqdist's order (label, numeric columns, categories): bit-for-bit exact.
    # Past the end, the last candidate repeats, which leaves the minimum alone.
    for c in range(start, stop, 4):
        q0, q1, q2, q3 = cand[c], cand[min(c + 1, last)], cand[min(c + 2, last)], \
            cand[min(c + 3, last)]
        m0 = m1 = m2 = m3 = 0  # differing categories; signed: int64 -> float is one instruction
        for w in range(packed.shape[0]):
            code = packed[w, p]
            m0 += np.int64(_differing_lanes(packed[w, q0] ^ code, lane_bits, low))
            m1 += np.int64(_differing_lanes(packed[w, q1] ^ code, lane_bits, low))
            m2 += np.int64(_differing_lanes(packed[w, q2] ^ code, lane_bits, low))
            m3 += np.int64(_differing_lanes(packed[w, q3] ^ code, lane_bits, low))
        # The categories' term 2 m is added last, to non-negative terms: rounding cannot make
        # the sum smaller than 2 m. A block whose 2 m are all >= best cannot lower it: skip
        # its numeric columns (on Adult, most candidates differ in several categories).
        if 2.0 * min(min(m0, m1), min(m2, m3)) >= best:
            continue
        x = coords[0, p]
        d0, d1, d2, d3 = coords[0, q0] - x, coords[0, q1] - x, coords[0, q2] - x, \
            coords[0, q3] - x
        s0, s1, s2, s3 = d0 * d0, d1 * d1, d2 * d2, d3 * d3
        for f in range(1, coords.shape[0]):
            x = coords[f, p]
            d0, d1, d2, d3 = coords[f, q0] - x, coords[f, q1] - x, coords[f, q2] - x, \
                coords[f, q3] - x
            s0 += d0 * d0
            s1 += d1 * d1
            s2 += d2 * d2
            s3 += d3 * d3
        # a differing category flips two one-hot coordinates: +1 + 1
        s0 += 2.0 * m0
        s1 += 2.0 * m1
        s2 += 2.0 * m2
        s3 += 2.0 * m3
        best = min(best, min(s0, s1), min(s2, s3))
    return best


#: A group holding at least this share of the rows gets its candidates by index, not by walking.
_INDEXED_SHARE = 0.25


@compiled
def _scan(coords, packed, lane_bits, low, groups, m2, out):  # pragma: no cover - compiled
    n = groups.size
    counts = np.bincount(groups)
    cand = np.empty(2 * m2, np.int64)
    # Rows of a big group: its other-group rows, in order, form one array, and a row's
    # candidates are the m2 entries on either side of where the row would sit in it (Alg. 3
    # lines 6 and 8). No walking, no skipping: a few loads per candidate.
    other = np.empty(n, np.int64)
    indexed = counts >= _INDEXED_SHARE * n
    for j in np.flatnonzero(indexed):
        n_other = 0
        for q in range(n):
            other[n_other] = q  # kept only if n_other moves on: a select, not a branch
            n_other += groups[q] != j
        before = 0  # other-group rows before p
        for p in range(n):
            if groups[p] != j:
                before += 1
                continue
            out[p] = _min_sqdist(coords, packed, lane_bits, low, p, other, max(0, before - m2),
                                 min(n_other, before + m2))
    # Rows of small groups walk outwards, jumping over each run of their own group in one
    # step: a row costs O(m2). The walk selects rather than branches on the group, as the
    # groups of neighbouring rows are as good as random to a branch predictor.
    run_first = np.empty(n, np.int64)
    run_last = np.empty(n, np.int64)
    for p in range(n):
        run_first[p] = run_first[p - 1] if p and groups[p] == groups[p - 1] else p
    for p in range(n - 1, -1, -1):
        run_last[p] = run_last[p + 1] if p < n - 1 and groups[p] == groups[p + 1] else p
    for p in range(n):
        if indexed[groups[p]]:
            continue
        k = 0
        q = p - 1
        while q >= 0 and k < m2:
            same = groups[q] == groups[p]
            cand[k] = q  # kept only if k moves on
            k += 0 if same else 1
            q = run_first[q] - 1 if same else q - 1
        end = k + m2
        q = p + 1
        while q < n and k < end:
            same = groups[q] == groups[p]
            cand[k] = q
            k += 0 if same else 1
            q = run_last[q] + 1 if same else q + 1
        out[p] = _min_sqdist(coords, packed, lane_bits, low, p, cand, 0, k)


def nearest_other_group_sqdist(
    coords: NDArray[np.float64],
    packed: NDArray[np.uint64],
    lane_bits: int,
    groups: NDArray[np.intp],
    m2: int,
) -> NDArray[np.float64]:
    """Alg. 3 lines 3-10: each row's smallest squared distance to nearby other-group rows.

    The rows come sorted by their projection; a row is compared with the ``m2`` nearest rows
    of another group on each side.

    Parameters
    ----------
    coords : ndarray of shape (1 + n_numeric, n)
        The label, then the scaled numeric columns, of the rows in projection order.
    packed : ndarray of shape (n_words, n)
        Their packed categorical codes
        (:attr:`fairmonitor.metrics._hfm.exact.FeatureSpace.packed`).
    lane_bits : int
        Lane width of ``packed``.
    groups : ndarray of shape (n,)
        Group code of each row.
    m2 : int
        Rows of other groups measured on each side. Rows of the row's own group are skipped
        without counting, as the reference code does; ties in the projection are ordered by
        position.

    Returns
    -------
    ndarray of shape (n,)
        Squared distances; ``inf`` for a row with no other-group row at all.

    Examples
    --------
    Rows 0 and 1 form one group, row 2 another; with ``m2=1`` row 0 skips row 1 and measures
    row 2, so every row finds its exact nearest other-group row here:

    >>> coords = np.array([[0.0, 0.0, 1.0], [0.0, 0.5, 1.0]])
    >>> packed = np.zeros((0, 3), dtype=np.uint64)
    >>> nearest_other_group_sqdist(coords, packed, 8, np.array([0, 0, 1]), 1).tolist()
    [2.0, 1.25, 1.25]
    """
    coords = np.ascontiguousarray(coords, dtype=np.float64)
    packed = np.ascontiguousarray(packed, dtype=np.uint64)
    groups = np.ascontiguousarray(groups, dtype=np.int64)
    if coords.shape[0] < 1 or not coords.shape[1] == packed.shape[1] == groups.size:
        raise ValueError("coords, packed and groups must have one column per row, and coords "
                         "at least the label")
    top = sum(1 << (k + lane_bits - 1) for k in range(0, 64, lane_bits))  # each lane's top bit
    out = np.empty(groups.size)
    _scan(coords, packed, int(lane_bits), np.uint64(~top & (2**64 - 1)), groups, int(m2), out)
    return out
