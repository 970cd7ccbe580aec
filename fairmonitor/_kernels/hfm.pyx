"""AcceleDist's scan (paper 000, Alg. 3 lines 3-11), compiled with Cython.

The scan is a data-dependent loop: from every row, walk outwards in projection order, skip rows
of the row's own group, and measure up to ``m2`` rows of other groups on each side. numpy can
only run it as gathers of ``(2 m2, n)`` candidate blocks and elementwise passes over them
(~70 ns per pair on Adult); compiled, a pair costs under 10 ns, which is what makes
ApproxDist worth having at 10^5 rows (the paper's point). The scan releases the GIL: ApproxDist
runs one direction per thread.

The pair distance is
:meth:`FeatureSpace.sqdist <fairmonitor.metrics._hfm.exact.FeatureSpace.sqdist>`'s,
term by term in the same order (label, numeric columns, then 2 per differing category), with no
fast-math: every pair's squared distance is bit-for-bit the exact path's.
"""

import numpy as np

from libc.math cimport INFINITY
from libc.stdint cimport int64_t, uint64_t

__all__ = ["nearest_other_group_sqdist"]

#: A group holding at least this share of the rows gets its candidates by index, not by walking.
cdef double _INDEXED_SHARE = 0.25


cdef inline uint64_t _differing_lanes(uint64_t x, int lane_bits, uint64_t low) noexcept nogil:
    """Count the non-zero ``lane_bits``-wide lanes of ``x``, branch-free.

    ``low`` has every bit of every lane set but the lane's top bit. The count is exact, like
    that of the exact path's vectorised :func:`fairmonitor.metrics._hfm.exact._count_lanes`.
    """
    # (x & low) + low carries into a lane's top bit iff the lane's other bits are not all 0;
    # or-ing x adds the top bit itself: the top bit of each lane now says "lane != 0"
    cdef uint64_t top = (((x & low) + low) | x) & ~low
    cdef uint64_t ones = (~low) >> (lane_bits - 1)  # bit 0 of every lane
    # the lowest bits, multiplied by ones, sum into the top lane (modulo 2^64, as intended)
    return ((top >> (lane_bits - 1)) * ones) >> (64 - lane_bits)


cdef struct _Rows:
    # the rows in projection order: coords[f * n + q] (label, then numeric columns), packed
    # categorical codes packed[w * n + q]
    const double* coords
    Py_ssize_t n_coords
    const uint64_t* packed
    Py_ssize_t n_words
    Py_ssize_t n
    int lane_bits
    uint64_t low


cdef double _min_sqdist(const _Rows* rows, Py_ssize_t p, const int64_t* cand, Py_ssize_t start,
                        Py_ssize_t stop) noexcept nogil:
    """Smallest squared distance from row ``p`` to the rows ``cand[start:stop]``."""
    cdef double best = INFINITY, x, d0, d1, d2, d3, s0, s1, s2, s3
    cdef Py_ssize_t last = stop - 1, c, w, f, n = rows.n
    cdef int64_t q0, q1, q2, q3, m0, m1, m2, m3
    cdef uint64_t code
    cdef const uint64_t* word
    cdef const double* coord
    # Four candidates at a time: four independent sums keep the FPU busy, where one sum's
    # chain of dependent additions stalls it. Each sum still adds its terms in
    # FeatureSpace.sqdist's order (label, numeric columns, categories): bit-for-bit exact.
    # Past the end, the last candidate repeats, which leaves the minimum alone.
    for c in range(start, stop, 4):
        q0 = cand[c]
        q1 = cand[min(c + 1, last)]
        q2 = cand[min(c + 2, last)]
        q3 = cand[min(c + 3, last)]
        m0 = m1 = m2 = m3 = 0  # differing categories
        for w in range(rows.n_words):
            word = rows.packed + w * n
            code = word[p]
            m0 += <int64_t>_differing_lanes(word[q0] ^ code, rows.lane_bits, rows.low)
            m1 += <int64_t>_differing_lanes(word[q1] ^ code, rows.lane_bits, rows.low)
            m2 += <int64_t>_differing_lanes(word[q2] ^ code, rows.lane_bits, rows.low)
            m3 += <int64_t>_differing_lanes(word[q3] ^ code, rows.lane_bits, rows.low)
        # The categories' term 2 m is added last, to non-negative terms: rounding cannot make
        # the sum smaller than 2 m. A block whose 2 m are all >= best cannot lower it: skip
        # its numeric columns (on Adult, most candidates differ in several categories).
        if 2.0 * <double>min(min(m0, m1), min(m2, m3)) >= best:
            continue
        coord = rows.coords
        x = coord[p]
        d0 = coord[q0] - x
        d1 = coord[q1] - x
        d2 = coord[q2] - x
        d3 = coord[q3] - x
        s0 = d0 * d0
        s1 = d1 * d1
        s2 = d2 * d2
        s3 = d3 * d3
        for f in range(1, rows.n_coords):
            coord = rows.coords + f * n
            x = coord[p]
            d0 = coord[q0] - x
            d1 = coord[q1] - x
            d2 = coord[q2] - x
            d3 = coord[q3] - x
            s0 += d0 * d0
            s1 += d1 * d1
            s2 += d2 * d2
            s3 += d3 * d3
        # a differing category flips two one-hot coordinates: +1 + 1
        s0 += 2.0 * <double>m0
        s1 += 2.0 * <double>m1
        s2 += 2.0 * <double>m2
        s3 += 2.0 * <double>m3
        best = min(best, min(s0, s1), min(s2, s3))
    return best


cdef void _indexed(const _Rows* rows, const int64_t* groups, int64_t j, Py_ssize_t m2,
                   int64_t* other, double* out) noexcept nogil:
    """Rows of the big group ``j``: candidates by index among the other groups' rows.

    Its other-group rows, in order, form one array, and a row's candidates are the ``m2``
    entries on either side of where the row would sit in it (Alg. 3 lines 6 and 8). No
    walking, no skipping: a few loads per candidate.
    """
    cdef Py_ssize_t n = rows.n, n_other = 0, before = 0, q, p
    for q in range(n):
        other[n_other] = q  # kept only if n_other moves on: a select, not a branch
        n_other += groups[q] != j
    for p in range(n):  # before: other-group rows before p
        if groups[p] != j:
            before += 1
            continue
        out[p] = _min_sqdist(rows, p, other, max(0, before - m2), min(n_other, before + m2))


cdef void _walk(const _Rows* rows, const int64_t* groups, const bint* indexed, Py_ssize_t m2,
                int64_t* cand, int64_t* run_first, int64_t* run_last, double* out) noexcept nogil:
    """Rows of small groups walk outwards, jumping over each run of their own group in one step.

    A row costs O(m2). The walk selects rather than branches on the group, as the groups of
    neighbouring rows are as good as random to a branch predictor.
    """
    cdef Py_ssize_t n = rows.n, p, q, k, end
    cdef bint same
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
        out[p] = _min_sqdist(rows, p, cand, 0, k)


cdef void _scan(const _Rows* rows, const int64_t* groups, Py_ssize_t n_groups, Py_ssize_t m2,
                int64_t* counts, bint* indexed, int64_t* work, double* out) noexcept nogil:
    """Alg. 3's scan; ``work`` holds ``2 n + 2 m2`` integers."""
    cdef Py_ssize_t n = rows.n, p, j
    for j in range(n_groups):
        counts[j] = 0
    for p in range(n):
        counts[groups[p]] += 1
    for j in range(n_groups):
        indexed[j] = <double>counts[j] >= _INDEXED_SHARE * <double>n
        if indexed[j]:
            _indexed(rows, groups, j, m2, work, out)
    _walk(rows, groups, indexed, m2, work + 2 * n, work, work + n, out)


def nearest_other_group_sqdist(coords, packed, lane_bits, groups, m2):
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
        Group code (``>= 0``) of each row.
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
    if coords.ndim != 2 or packed.ndim != 2 or coords.shape[0] < 1 \
            or not coords.shape[1] == packed.shape[1] == groups.size:
        raise ValueError("coords, packed and groups must have one column per row, and coords "
                         "at least the label")
    if groups.size and groups.min() < 0:
        raise ValueError("groups must be codes >= 0 (leave excluded rows out)")
    cdef Py_ssize_t n = groups.size, k = int(groups.max()) + 1 if groups.size else 0
    cdef Py_ssize_t radius = max(int(m2), 0)
    bits = int(lane_bits)
    top = sum(1 << (lane + bits - 1) for lane in range(0, 64, bits))  # each lane's top bit
    result = np.empty(n)
    counts = np.empty(k, dtype=np.int64)
    indexed = np.empty(k, dtype=np.intc)
    work = np.empty(2 * n + 2 * radius, dtype=np.int64)
    cdef double[::1] out = result
    cdef const double[:, ::1] c = coords
    cdef const uint64_t[:, ::1] w = packed
    cdef const int64_t[::1] g = groups
    cdef int64_t[::1] counts_view = counts
    cdef int[::1] indexed_view = indexed
    cdef int64_t[::1] work_view = work
    cdef _Rows rows
    if n == 0:
        return result
    rows.coords = &c[0, 0]
    rows.n_coords = c.shape[0]
    rows.packed = &w[0, 0] if w.shape[0] else NULL
    rows.n_words = w.shape[0]
    rows.n = n
    rows.lane_bits = bits
    rows.low = ~top & ((1 << 64) - 1)
    with nogil:
        _scan(&rows, &g[0], k, radius, &counts_view[0], <bint*>&indexed_view[0],
              &work_view[0], &out[0])
    return result
