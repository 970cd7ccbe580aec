"""MADD's compiled kernels (Cython): "auto"'s groups and pairs, fixed-bandwidth bins.

"auto" works on a grid of ~125k bins (every bin of every ``m`` in 1..499). A group costs two
passes: :func:`edges_below` locates the ~79k distinct edges among its sorted scores by a
galloping merge walk (O(E + n), not a binary search per edge), and :func:`bin_shares` turns the
positions into every bin's share ``count / n`` in one pass. A pair costs one call,
:func:`auto_pair`: the MADD curve (one sum of ``|share_a - share_b|`` per ``m``, no array of
gaps), Algorithm 1's search over every interval ``[i, j]`` of the curve
(:func:`stable_interval_search`), the mean over the interval and its null terms. Per pair the
numpy steps cost more in call overhead than in arithmetic, hence the single call.

The search skips most of the ~10^5 intervals: a row (start ``i``) whose shortest interval
``[i, first]`` already has too many squared deviations cannot hold the answer, and a prefix-sum
floor of them (``_deviations_floor``, with a bound on its round-off) tells so in O(1); only the
remaining rows (a few dozen) are computed, each as a running sum from its start (the former
numpy table's cumulative sums, so the chosen interval is the table's).

Sums: each curve value (at most ``max_bins`` terms) and each mean over an interval are summed
with four running partial sums (independent additions keep the FPU busy), an error below
``n / 4`` units of round-off of the sum, ~1e-14 for the curve's <= 1000 terms; the tests
compare with numpy's sums to 1e-12. The shares are IEEE's ``count / n``, as numpy's division.

Many groups (``agg="max"``): :func:`reference_curves` gives a group's curves to a few
reference vectors and its coarse shares in one pass, :func:`auto_pair_bounds` every pair's
upper bound from them (``_madd/pairs.py`` has the argument).

A fixed bandwidth costs one pass over the rows: :func:`histograms_by_group` bins every score
with ``np.histogram``'s rule (the counts are numpy's to the last row, edge ties included) at its
group's offset, instead of splitting the scores by group and histogramming each part.

Compiled ahead of time by ``setup.py`` (no fast-math: IEEE results, NaN and inf kept).
"""

import numpy as np

from libc.math cimport INFINITY, NAN, fabs, sqrt
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t

ctypedef fused count_t:  # rows below each edge: int32 in the raw path's block, int64 else
    int32_t
    int64_t

ctypedef fused code_t:  # group codes, as narrow as the number of groups allows
    int8_t
    int16_t
    int32_t
    int64_t


cdef inline double _sum(const double* a, Py_ssize_t n) noexcept nogil:
    """Sum of ``a[:n]`` with four partial sums."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t k = 0
    while k + 4 <= n:
        s0 += a[k]
        s1 += a[k + 1]
        s2 += a[k + 2]
        s3 += a[k + 3]
        k += 4
    while k < n:
        s0 += a[k]
        k += 1
    return (s0 + s1) + (s2 + s3)


cdef inline double _gap_sum(const double* a, const double* b, Py_ssize_t n) noexcept nogil:
    """Sum of ``|a[k] - b[k]|`` over ``k < n`` with four partial sums, no array of gaps."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t k = 0
    while k + 4 <= n:
        s0 += fabs(a[k] - b[k])
        s1 += fabs(a[k + 1] - b[k + 1])
        s2 += fabs(a[k + 2] - b[k + 2])
        s3 += fabs(a[k + 3] - b[k + 3])
        k += 4
    while k < n:
        s0 += fabs(a[k] - b[k])
        k += 1
    return (s0 + s1) + (s2 + s3)


# ------------------------------------------------------------------ a group: edges and shares


def edges_below(const double[::1] sorted_scores, const double[::1] edges, count_t[::1] below):
    """``np.searchsorted(sorted_scores, edges, side="left")`` for ascending ``edges``.

    One merge walk instead of a binary search per edge: the position only moves forward, by a
    galloping search from where the previous edge left it, so the cost is O(E + n) at worst
    and ~E log(n / E) when the scores outnumber the edges, with the scores read in order.
    The same integers: the number of scores ``< edge``, into ``below``.
    """
    cdef Py_ssize_t n = sorted_scores.shape[0], p = 0, k, lo, hi, step, mid
    cdef double e
    with nogil:
        for k in range(edges.shape[0]):  # scores[:p] < the current edge
            e = edges[k]
            if p < n and sorted_scores[p] < e:
                lo = p  # scores[lo] < e; find the first hi with scores[hi] >= e (or n)
                step = 1
                hi = lo + 1
                while hi < n and sorted_scores[hi] < e:
                    lo = hi
                    step *= 2
                    hi = lo + step
                if hi > n:
                    hi = n
                while hi - lo > 1:
                    mid = (lo + hi) >> 1
                    if sorted_scores[mid] < e:
                        lo = mid
                    else:
                        hi = mid
                p = hi
            below[k] = <count_t>p


def bin_shares(const count_t[::1] below, const int32_t[::1] where, const int64_t[::1] start,
               const int64_t[::1] bins, Py_ssize_t n, double[::1] share):
    """Every bin's share ``count / n`` of every m (numpy's ``counts / n``), into ``share``.

    The ``q``-th m's edges are ``where[start[q] + q:][:bins[q] + 1]`` (places in the edges of
    ``below``, the rows below each edge); each bin's count is the difference of its edges'.
    One pass, no array of counts; IEEE division of float64 operands, numpy's bits.
    """
    cdef double size = <double>n
    cdef Py_ssize_t q, k, cell, edge
    cdef int64_t left, right
    with nogil:
        for q in range(start.shape[0]):
            cell = start[q]
            edge = cell + q
            left = below[where[edge]]
            for k in range(bins[q]):
                right = below[where[edge + k + 1]]
                share[cell + k] = <double>(right - left) / size
                left = right


# ------------------------------------------------------------------ a pair: curve and search


cdef void _curve(const double* share_a, const double* share_b, const int64_t* start,
                 const int64_t* stop, Py_ssize_t size, double* curve) noexcept nogil:
    cdef Py_ssize_t q
    for q in range(size):
        curve[q] = _gap_sum(share_a + start[q], share_b + start[q], stop[q] - start[q])


def madd_curve(const double[::1] share_a, const double[::1] share_b, const int64_t[::1] start,
               const int64_t[::1] stop):
    """MADD at every bin count of the grid: the sum of ``|d_a - d_b|`` over each m's bins.

    ``share_*`` are a group's bin proportions ``counts / n`` (computed once per group).
    """
    curve = np.empty(start.shape[0])
    cdef double[::1] out = curve
    if start.shape[0]:
        with nogil:
            _curve(&share_a[0], &share_b[0], &start[0], &stop[0], start.shape[0], &out[0])
    return curve


#: Unit round-off of float64.
cdef double _EPS = 2.0 ** -53


cdef double _prefix_sums(const double* values, Py_ssize_t n, double* p1,
                         double* p2) noexcept nogil:
    """Prefix sums of ``values - mean`` and of its square; returns a bound on their round-off.

    ``ss(i, j)`` (:func:`_deviations_floor`) is the sum of squared deviations of
    ``values[i..j]`` from their mean in O(1), within the returned slack of the exact one: the
    rounding of the centring, the prefix sums and the final operations each stay below a few
    ``n**2 * eps * max|x|**2`` (the classic bound of a recursive sum of ``n`` terms); the
    factor 32 leaves room to spare.
    """
    cdef double centre = 0.0, largest = 0.0, x
    cdef Py_ssize_t t
    for t in range(n):
        centre += values[t]
    centre /= <double>n
    p1[0] = 0.0
    p2[0] = 0.0
    for t in range(n):
        x = values[t] - centre
        p1[t + 1] = p1[t] + x
        p2[t + 1] = p2[t] + x * x
        largest = max(largest, fabs(x))
    return 32.0 * <double>n * <double>n * _EPS * largest * largest


cdef inline double _deviations_floor(const double* p1, const double* p2, double slack,
                                     Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    """Bound the sum of squared deviations of ``values[i..j]`` from below (see above)."""
    cdef double s1 = p1[j + 1] - p1[i]
    return (p2[j + 1] - p2[i]) - s1 * s1 / <double>(j + 1 - i) - slack


cdef inline bint _cannot_reach(double floor, double skip_above) noexcept nogil:
    """Whether a variance floor stays above ``skip_above`` beyond the round-off of the rows."""
    return floor - (1e-9 * fabs(floor) + 1e-13) > skip_above


cdef double _row(const double* values, Py_ssize_t i, Py_ssize_t first, Py_ssize_t n,
                 double skip_above, double* out) noexcept nogil:
    """Variances of ``values[i..j]`` into ``out[j]`` for ``j < n``, the table's arithmetic.

    Returns the row's smallest variance over ``j >= first``, or +inf without finishing the row
    when no such interval can come within ``skip_above``: every interval ``[i, j]`` holds
    ``[i, first]``, and the squared deviations of a superset from its own mean are at least
    those of the subset from its own, so ``var[i..j] >= var[i..first] * (first + 1 - i) /
    (n - i)``. The margin absorbs the round-off of the two computed variances (values <= 2).
    """
    cdef double vi = values[i], s1 = 0.0, s2 = 0.0, smallest = INFINITY, d, size, m1, var
    cdef Py_ssize_t j
    for j in range(i, n):
        d = values[j] - vi
        s1 += d
        s2 += d * d
        size = <double>(j + 1 - i)
        m1 = s1 / size
        var = s2 / size - m1 * m1
        out[j] = var
        if j >= first:
            if j == first and _cannot_reach(var * (size / <double>(n - i)), skip_above):
                return INFINITY
            if var < smallest:
                smallest = var
    return smallest


cdef double _search(const double* values, Py_ssize_t n, const int64_t* first_end,
                    Py_ssize_t starts, double tie, double* work, Py_ssize_t* row,
                    Py_ssize_t* col) noexcept nogil:
    """:func:`stable_interval_search` on ``work`` (``4 n + 2 + starts`` doubles)."""
    cdef double* p1 = work
    cdef double* p2 = work + n + 1
    cdef double* row_var = work + 2 * n + 2
    cdef double* row_min = work + 3 * n + 2
    cdef double slack = _prefix_sums(values, n, p1, p2), best = INFINITY, bound
    cdef Py_ssize_t i, j, first
    for i in range(starts):
        row_min[i] = INFINITY
    # last start first: MADD flattens towards large h, so a small variance turns up early
    # and prunes most of the long rows of small h (the answer does not depend on the order)
    for i in range(starts - 1, -1, -1):
        first = first_end[i]
        if first >= n:
            continue
        bound = (sqrt(max(best, 0.0)) + tie) ** 2
        # var[i..j] >= ss[i..first] / (n - i) for every end j, as in _row
        if _cannot_reach(_deviations_floor(p1, p2, slack, i, first) / <double>(n - i), bound):
            continue
        row_min[i] = _row(values, i, first, n, bound, row_var)
        if row_min[i] < best:
            best = row_min[i]
    bound = (sqrt(max(best, 0.0)) + tie) ** 2
    for i in range(starts):
        if row_min[i] <= bound:
            _row(values, i, first_end[i], n, INFINITY, row_var)
            for j in range(first_end[i], n):
                if row_var[j] <= bound:
                    row[0] = i
                    col[0] = j
                    return row_var[j]
    row[0] = -1  # unreachable when some first_end < n
    col[0] = -1
    return INFINITY


def stable_interval_search(const double[::1] values, const int64_t[::1] first_end, double tie):
    """``(row, col, variance)`` of the first interval within ``tie`` of the smallest std.

    Start ``i`` runs over ``first_end``'s indices, end ``j`` from ``first_end[i]`` to the last
    point; the smallest variance is found first, then the first interval (row-major) whose
    variance is at most ``(sqrt(best) + tie)**2``, exactly as the numpy table did. Rows that
    cannot come within the tie bound of the best so far are skipped: first in O(1), by the
    prefix-sum floor of ``[i, first]`` (rows of small ``h`` are long, and computing them up to
    ``first`` alone was most of the search), then while the row runs (see ``_row``). The
    answer lies in the first row whose smallest variance is within the final bound; only the
    rows that are computed use the table's arithmetic, so the result is unchanged.
    """
    cdef Py_ssize_t n = values.shape[0], starts = first_end.shape[0], row = -1, col = -1
    cdef double variance = INFINITY
    work_array = np.empty(4 * n + 2 + starts)
    cdef double[::1] work = work_array
    if n and starts:
        with nogil:
            variance = _search(&values[0], n, &first_end[0], starts, tie, &work[0], &row, &col)
    return row, col, variance


def first_ends(const double[:] h, double min_length, bint extend, Py_ssize_t min_points):
    """Each start's first admissible end (``h.size`` when skipped), as ``_stable_interval``.

    The starts are the ``h <= h[-1] - min_length`` (a prefix: ``h`` ascends); ``reach`` is
    ``searchsorted(h, h[i] + min_length, side="right") - 1``, found by a forward walk since it
    grows with ``i``.
    """
    cdef Py_ssize_t n = h.shape[0], n_starts = 0, reach = 0, k, i, last
    cdef double limit = h[n - 1] - min_length, x
    for k in range(n):
        if h[k] <= limit:
            n_starts += 1
    ends = np.empty(n_starts, dtype=np.int64)
    cdef int64_t[::1] out = ends
    with nogil:
        for i in range(n_starts):  # h[:reach] <= h[i] + min_length
            x = h[i] + min_length
            while reach < n and h[reach] <= x:
                reach += 1
            last = reach - 1
            if extend:
                out[i] = max(last, i + min_points)
            else:
                out[i] = last if last - i >= min_points else n
    return ends


cdef double _interval_null(const count_t* below_a, const count_t* below_b, double pool,
                           double scale, const int64_t* left, const int64_t* right,
                           const int64_t* start, const int64_t* stop, Py_ssize_t i,
                           Py_ssize_t j, double* terms, double* per_m) noexcept nogil:
    """Mean over the interval's m of the summed null terms (see madd.py's ``_null_terms``).

    ``below_*`` are the groups' rows below each edge; ``left``, ``right`` each bin's edges.
    """
    cdef Py_ssize_t lo = start[i], k, cell, q
    cdef double p
    for k in range(stop[j] - lo):
        cell = lo + k
        p = <double>((below_a[right[cell]] - below_a[left[cell]])
                     + (below_b[right[cell]] - below_b[left[cell]])) / pool
        terms[k] = sqrt(p * (1.0 - p)) * scale
    for q in range(i, j + 1):
        per_m[q - i] = _sum(terms + (start[q] - lo), stop[q] - start[q])
    return _sum(per_m, j + 1 - i) / <double>(j + 1 - i)


cdef Py_ssize_t _closest(const double* curve, Py_ssize_t i, Py_ssize_t j, double value,
                         double tie) noexcept nogil:
    """The first ``q`` in ``[i, j]`` whose ``|curve[q] - value|`` is within ``tie`` of the least.

    Points the same distance away in exact arithmetic (a flat curve has many) differ by
    round-off only: the tie settles them by the first, whatever order the sums were taken in.
    """
    cdef double least = INFINITY
    cdef Py_ssize_t q
    for q in range(i, j + 1):
        least = min(least, fabs(curve[q] - value))
    for q in range(i, j + 1):
        if fabs(curve[q] - value) <= least + tie:
            return q
    return i


def auto_pair(const double[::1] share_a, const double[::1] share_b,
              const count_t[::1] below_a, const count_t[::1] below_b, Py_ssize_t n_a,
              Py_ssize_t n_b, double scale, tuple grid, const int64_t[::1] first_end,
              double tie):
    """MADD "auto" of one pair: ``(i, j, variance, value, null, rep)``, or ``i = -1``.

    The curve, Algorithm 1's interval ``[i, j]`` with its variance, the mean MADD over it, the
    mean null term (``scale`` is ``sqrt(2/pi * (1/n_a + 1/n_b))``) and ``rep``, the first grid
    point whose MADD is closest to the mean (within ``tie``: ``_closest``). ``share_*`` and ``below_*`` are
    each group's :func:`bin_shares` and :func:`edges_below`, ``grid`` the grid's ``(lo, hi,
    start, stop)``. One call per pair: the numpy steps it replaces cost more in call overhead
    than in arithmetic.
    """
    cdef const int64_t[::1] left = grid[0]
    cdef const int64_t[::1] right = grid[1]
    cdef const int64_t[::1] start = grid[2]
    cdef const int64_t[::1] stop = grid[3]
    cdef Py_ssize_t size = start.shape[0], starts = first_end.shape[0], i = -1, j = -1, q
    cdef Py_ssize_t rep = -1
    cdef double variance = INFINITY, value = NAN, null = NAN
    # work space: the curve, the search's, and the null terms of at most every bin and m
    work_array = np.empty(size + 4 * size + 2 + starts + left.shape[0] + size)
    cdef double[::1] work = work_array
    cdef double* curve = &work[0]
    if size == 0 or starts == 0:
        return i, j, variance, value, null, rep
    with nogil:
        _curve(&share_a[0], &share_b[0], &start[0], &stop[0], size, curve)
        variance = _search(curve, size, &first_end[0], starts, tie, curve + size, &i, &j)
        if i >= 0:
            value = _sum(curve + i, j + 1 - i) / <double>(j + 1 - i)
            rep = _closest(curve, i, j, value, tie)
            null = _interval_null(&below_a[0], &below_b[0], <double>(n_a + n_b), scale,
                                  &left[0], &right[0], &start[0], &stop[0], i, j,
                                  curve + 5 * size + 2 + starts,
                                  curve + 5 * size + 2 + starts + left.shape[0])
    return i, j, variance, value, null, rep


# ------------------------------------------------------------------ fixed bandwidth


#: A row whose ``x * m`` lies this far from an integer is in bin ``floor(x * m)`` without
#: comparing it to the edges: numpy's corrections need ``x`` on the other side of an edge, and
#: the rounding of ``x * m`` and of the edges moves them by at most ``~4e-16 * m`` bins.
cdef double _EDGE_MARGIN = 1e-6


def histograms_by_group(const double[::1] scores, const code_t[::1] codes, Py_ssize_t m,
                        Py_ssize_t k, const double[::1] edges):
    """``np.histogram(scores[codes == g], bins=m, range=(0, 1))[0]`` for every group ``g < k``.

    One pass, no split: each row's bin by numpy's uniform-bin rule (``x * m`` truncated, the
    last bin closed at 1, then one step down if ``x < edges[j]`` and one step up if ``x >=
    edges[j + 1]`` except in the last bin, with ``edges = np.linspace(0, 1, m + 1)``), counted
    at ``code * m + bin``; rows with a negative code (excluded groups) are skipped. Scores must
    lie in [0, 1] and ``m <= 10**6`` (any ``m`` below ~10^9 keeps the margin argument exact).

    The edge comparisons run only for rows with ``x * m`` within ``_EDGE_MARGIN`` of an integer
    (where a correction can apply); elsewhere the truncation is numpy's bin.
    """
    counts = np.zeros(k * m, dtype=np.int64)
    cdef int64_t[::1] out = counts
    cdef Py_ssize_t last = m - 1, j
    cdef double fm = <double>m, lo = _EDGE_MARGIN, hi = 1.0 - _EDGE_MARGIN, x, t, f
    cdef Py_ssize_t i
    cdef code_t c
    with nogil:
        for i in range(scores.shape[0]):
            c = codes[i]
            if c < 0:
                continue
            x = scores[i]
            t = x * fm  # (x - 0) / (1 - 0) * m: numpy's float64 arithmetic, bit for bit
            j = <Py_ssize_t>t  # signed: one instruction each way (t lies in [0, m])
            f = t - <double>j  # exact: the fractional part of t
            if not (lo < f < hi):  # near an edge (or x == 1): numpy's corrections, exactly
                if j == m:
                    j = last
                if x < edges[j]:
                    j -= 1
                if j != last and x >= edges[j + 1]:
                    j += 1
            out[<Py_ssize_t>c * m + j] += 1
    return counts.reshape(k, m)


# ------------------------------------------------------------------ many groups: bounds of pairs
#
# The worst pair of "auto" among K groups (``_madd/pairs.py`` gives the argument): per group,
# its curve to a few reference vectors (:func:`reference_curves`), and per pair an upper bound
# of its "auto" value from those curves and its own curve at the coarse grid points
# (:func:`auto_pair_bounds`). Bounds only: their sums need not be the exact pair's.

def reference_curves(const count_t[::1] below, const int32_t[::1] where,
                     const int64_t[::1] start, const int64_t[::1] bins, Py_ssize_t n,
                     const double[:, ::1] refs, Py_ssize_t tail, double[::1] tail_share,
                     double[:, ::1] curves):
    """A group's L1 distance to each reference at every grid point, and its coarse shares.

    ``below`` is the group's :func:`edges_below` (the last entry ``n``), ``where``, ``start``
    and ``bins`` the grid's. ``curves[r, q] = sum_k |count_k / n - refs[r, start[q] + k]|``
    over the bins ``k`` of grid point ``q`` (one pass, no array of shares; the shares as
    ``count * (1 / n)``, within an ulp of numpy's: these curves only bound); the shares of the
    grid points ``q >= tail`` (the coarse ones, at the end of the grid) go to ``tail_share``
    from ``start[tail]`` on, numpy's ``count / n`` bits.
    """
    cdef Py_ssize_t n_refs = refs.shape[0], q, k, r, cell, edge, base = 0
    cdef double size = <double>n, inverse = 1.0 / <double>n, share, acc
    cdef int64_t left, right
    if tail < start.shape[0]:
        base = start[tail]
    with nogil:
        for q in range(start.shape[0]):
            cell = start[q]
            edge = cell + q
            left = below[where[edge]]
            for k in range(bins[q]):  # the counts first, into the tail's row or curves' last
                right = below[where[edge + k + 1]]
                if q >= tail:
                    tail_share[cell + k - base] = <double>(right - left) / size
                left = right
            for r in range(n_refs):
                acc = 0.0
                left = below[where[edge]]
                for k in range(bins[q]):
                    right = below[where[edge + k + 1]]
                    share = <double>(right - left) * inverse
                    left = right
                    acc += fabs(share - refs[r, cell + k])
                curves[r, q] = acc


cdef double _interval_bound(const double* upper, Py_ssize_t n, const int64_t* first,
                            Py_ssize_t starts, double enough, double* prefix,
                            double* after) noexcept nogil:
    """``max_i max(mean(upper[i..first[i]]), max_{t > first[i]} upper[t])``, or sooner.

    The largest mean of ``upper`` over an interval ``[i, j]`` with ``j >= first[i]`` (a start
    with ``first[i] >= n`` has none): such a mean is a weighted mean of the mean over ``[i,
    first[i]]`` and of the points after it. Returns as soon as the maximum so far reaches
    ``enough`` (``INFINITY``: the maximum).
    """
    cdef Py_ssize_t t, i, f
    cdef double best = -INFINITY, mean
    prefix[0] = 0.0
    for t in range(n):
        prefix[t + 1] = prefix[t] + upper[t]
    after[n] = -INFINITY
    for t in range(n - 1, -1, -1):
        after[t] = upper[t] if upper[t] > after[t + 1] else after[t + 1]
    for i in range(starts):
        f = first[i]
        if f >= n:
            continue
        mean = (prefix[f + 1] - prefix[i]) / <double>(f + 1 - i)
        if mean > best:
            best = mean
        if after[f + 1] > best:
            best = after[f + 1]
        if best >= enough:
            break
    return best


cdef inline double _widened(double bound) noexcept nogil:
    """``_worst_pair.widen``: the bound plus its round-off margins."""
    return bound + (1e-9 * fabs(bound) + 1e-9)


def auto_pair_bounds(const double[:, :, ::1] curves, const double[:, ::1] tail_share,
                     Py_ssize_t tail, const int64_t[::1] start, const int64_t[::1] bins,
                     const int64_t[::1] rows, const int64_t[::1] cols,
                     const int64_t[::1] level, const int64_t[:, ::1] firsts,
                     const int64_t[::1] checks, double floor):
    """Upper bounds of the "auto" MADD of the pairs ``(rows[p], cols[p])``, not widened.

    ``curves[g]`` is group ``g``'s :func:`reference_curves`: per grid point ``q`` the pair's
    curve is at most ``min(2, min_r curves[a, r, q] + curves[b, r, q])`` (the triangle
    inequality through reference ``r``). From the coarsest grid point down to each of
    ``checks`` (descending, all ``>= tail``; ``start.size`` checks before any) the pair's own
    curve, from ``tail_share``, replaces it, and the bound is the largest mean of the curve's
    bound over the pair's admissible intervals (``firsts[level[p]]``, each start's first end,
    ``start.size`` when none); a pair whose widened bound is below ``floor`` stops there, with
    that bound. The coarse grid points come first: they cost a few bins each.
    """
    cdef Py_ssize_t n_pairs = rows.shape[0], n = start.shape[0], n_refs = curves.shape[1]
    cdef Py_ssize_t n_starts = firsts.shape[1], n_checks = checks.shape[0], p, q, r, c, done
    cdef Py_ssize_t a, b, base = 0
    cdef double value, bound, enough
    out_array = np.empty(n_pairs)
    work_array = np.empty(3 * n + 2)
    cdef double[::1] out = out_array
    cdef double[::1] work = work_array
    cdef double* upper = &work[0]
    cdef const double* ca
    cdef const double* cb
    if n_pairs == 0 or n == 0:
        return out_array
    if tail < n:
        base = start[tail]
    with nogil:
        for p in range(n_pairs):
            a = rows[p]
            b = cols[p]
            for q in range(n):
                upper[q] = 2.0
            for r in range(n_refs):
                ca = &curves[a, r, 0]
                cb = &curves[b, r, 0]
                for q in range(n):
                    value = ca[q] + cb[q]
                    if value < upper[q]:
                        upper[q] = value
            done = n  # the own curve is in upper[done:]
            bound = INFINITY
            for c in range(max(n_checks, 1)):
                if n_checks:
                    for q in range(done - 1, checks[c] - 1, -1):
                        value = _gap_sum(&tail_share[a, start[q] - base],
                                         &tail_share[b, start[q] - base], bins[q])
                        if value < upper[q]:
                            upper[q] = value
                    done = checks[c]
                # the last check's bound is the maximum (it orders the search); before, a
                # bound that reaches the floor need not be finished
                enough = INFINITY if c + 1 >= n_checks else floor
                bound = _interval_bound(upper, n, &firsts[level[p], 0], n_starts, enough,
                                        upper + n, upper + 2 * n + 1)
                if _widened(bound) < floor:
                    break
            out[p] = bound
    return out_array
