"""ABCC's and ABPC's compiled kernels (Cython): the W1 pass over two sorted groups, the binning.

Both were block-wise numpy passes: ABCC's sum over one pair of groups ~15 passes over block
temporaries (a division and a floor per step, two gathers, two products, two sums), ABPC's
binning of one group ~10 (floor, fraction, two clips, two weighted ``np.bincount`` calls, the
additions into the grid), and its bandwidth rule's ``std`` four passes and an n-long temporary.
Compiled, each is one pass over the rows (``std`` two) with nothing n-long allocated: at 10^6
rows with an intersection of 10 groups, ABCC's 56 pairs and ABPC's binning take a few sorts'
time instead of ~16.

* W1's step arithmetic is integer (uint64), exact up to ``lcm(n, m) < 2^64`` units; y's step
  index advances by at most one per x-step (``uy >= ux``), so a comparison per step replaces
  the division.
* Sums run in blocks of ``_BLOCK`` terms, each with four partial sums (independent additions
  keep the FPU busy), the blocks' totals added in turn: an error below ``(_BLOCK / 4 + n /
  _BLOCK)`` units of round-off of the sum, ~1e-12 relative at 10^7 rows and usually far less;
  the tests compare with numpy's sums (pairwise) to a stated tolerance. Where every partial
  sum is exact (multiples of a power of two below 2^53) the value is exact.
* :func:`linear_binning` adds each row's left weight ``1 - frac`` and right weight ``frac``
  into the grid in row order.
* :func:`std`'s sums are compensated: a group's bandwidth does not depend on its rows' order.

Compiled ahead of time by ``setup.py`` (no fast-math: IEEE results, NaN and inf kept).
"""

import numpy as np

from libc.math cimport fabs, floor, sqrt
from libc.stdint cimport int64_t, uint64_t

__all__ = ["is_sorted", "linear_binning", "mean_abs_gap", "std", "w1_units"]

cdef enum:
    _BLOCK = 1024  # terms per block of a sum (four partial sums each; totals added in turn)
    _VALUE = 0  # the terms a sum adds (see _term)
    _SQUARED = 1
    _GAP = 2


cdef inline double _term(int kind, double x, double y, double center) noexcept nogil:
    """``x``, ``(x - center)**2`` or ``|x - y|``."""
    cdef double d
    if kind == _VALUE:
        return x
    if kind == _SQUARED:
        d = x - center
        return d * d
    return fabs(x - y)


cdef double _sum(int kind, const double[:] x, const double[:] y, double center) noexcept nogil:
    """Sum of the terms (``_term``) of every row: blocks of four partial sums."""
    cdef Py_ssize_t n = x.shape[0], lo = 0, k, stop
    cdef double total = 0.0, s0, s1, s2, s3
    while lo < n:
        stop = min(lo + _BLOCK, n)
        s0 = s1 = s2 = s3 = 0.0
        k = lo
        while k + 4 <= stop:
            s0 += _term(kind, x[k], y[k], center)
            s1 += _term(kind, x[k + 1], y[k + 1], center)
            s2 += _term(kind, x[k + 2], y[k + 2], center)
            s3 += _term(kind, x[k + 3], y[k + 3], center)
            k += 4
        while k < stop:
            s0 += _term(kind, x[k], y[k], center)
            k += 1
        total += (s0 + s1) + (s2 + s3)
        lo = stop
    return total


def w1_units(const double[:] x, const double[:] y, uint64_t ux, uint64_t uy):
    """``∫|Q_x − Q_y|`` in units of ``1 / lcm``: x has the more points, ``ux = lcm / x.size``.

    x-step k spans the units ``[k ux, (k + 1) ux)``; y's step there is ``q = k ux // uy`` up to
    y's next breakpoint ``(q + 1) uy`` (the first term), and ``q + 1`` after it (the second;
    zero length where the x-step ends first, or where y has no next value). Each length is an
    integer ``<= ux``, exact in float64.
    """
    cdef Py_ssize_t n = x.shape[0], lo = 0, k, stop
    cdef uint64_t last = <uint64_t>(y.shape[0] - 1), q = 0, nxt = uy, start = 0
    cdef double whole = <double>(<int64_t>ux), total = 0.0, s0, s1, length, xv
    with nogil:
        while lo < n:
            stop = min(lo + _BLOCK, n)
            s0 = s1 = 0.0
            for k in range(lo, stop):
                if start >= nxt:  # ux <= uy: y advances by at most one step
                    q += 1
                    nxt += uy
                length = <double>(<int64_t>min(nxt - start, ux))
                xv = x[k]
                s0 += fabs(xv - y[q]) * length
                s1 += fabs(xv - y[min(q + 1, last)]) * (whole - length)  # exact: integers
                start += ux
            total += s0 + s1
            lo = stop
    return total


cdef double _exact_sum(int kind, const double[:] x, double center) noexcept nogil:
    """Sum of the terms (``_term``, ``_VALUE`` or ``_SQUARED``) of every row, compensated.

    Two running sums, each with the rounding error of every addition carried along (Knuth's
    TwoSum, six additions a term, none on the sum's critical path): the result is the correctly
    rounded sum but in rare halfway cases, so it does not depend on the order of the rows.
    """
    cdef Py_ssize_t n = x.shape[0], k = 0
    cdef double s0 = 0.0, s1 = 0.0, c0 = 0.0, c1 = 0.0, t0, t1, u0, u1, b0, b1
    while k + 2 <= n:
        t0 = _term(kind, x[k], 0.0, center)
        t1 = _term(kind, x[k + 1], 0.0, center)
        u0 = s0 + t0
        u1 = s1 + t1
        b0 = u0 - s0
        b1 = u1 - s1
        c0 += (s0 - (u0 - b0)) + (t0 - b0)
        c1 += (s1 - (u1 - b1)) + (t1 - b1)
        s0 = u0
        s1 = u1
        k += 2
    if k < n:
        t0 = _term(kind, x[k], 0.0, center)
        u0 = s0 + t0
        b0 = u0 - s0
        c0 += (s0 - (u0 - b0)) + (t0 - b0)
        s0 = u0
    t0 = s0 + s1  # the two sums' own rounding, carried too
    b0 = t0 - s0
    return t0 + ((s0 - (t0 - b0)) + (s1 - b0) + (c0 + c1))


def mean_abs_gap(const double[:] a, const double[:] b):
    """``np.abs(a - b).mean()`` of two equally long arrays."""
    cdef double total
    with nogil:
        total = _sum(_GAP, a, b, 0.0)
    return total / <double>a.shape[0]


def std(const double[:] values, Py_ssize_t ddof):
    """``values.std(ddof=ddof)`` (``values.size > ddof``) with no temporary.

    numpy's definition: the mean, then the sum of the squared deviations from it divided by
    ``n - ddof``, then the square root. Both sums are compensated (``_exact_sum``), so the
    bandwidth does not depend on the order of a group's rows (identical groups in another
    order give ABPC exactly 0); two passes either way, the compensation costs little.
    """
    cdef Py_ssize_t n = values.shape[0]
    cdef double mean, squares
    with nogil:
        mean = _exact_sum(_VALUE, values, 0.0) / <double>n
        squares = _exact_sum(_SQUARED, values, mean)
    return sqrt(squares / <double>(n - ddof))


def is_sorted(const double[:] values):
    """Tell whether ascending; blocks of 1024 without an early exit, so the loop vectorizes."""
    cdef Py_ssize_t n = values.shape[0], lo, i
    cdef bint ascending = True
    with nogil:
        for lo in range(1, n, 1024):
            for i in range(lo, min(lo + 1024, n)):
                ascending &= values[i] >= values[i - 1]
            if not ascending:
                break
    return bool(ascending)


def linear_binning(const double[:] scores, Py_ssize_t cells):
    """:func:`~fairmonitor.metrics._abpc_abcc.kde.linear_binning`'s weights.

    Per row: ``u = x * cells - 0.5``, ``left = floor(u)``, ``frac = u - left``; weight ``1 -
    frac`` to cell ``clip(left)``, ``frac`` to ``clip(left + 1)``. Scores must lie in [0, 1]
    (weights non-negative).
    """
    weights = np.zeros(cells)
    cdef double[::1] w = weights
    cdef double g = <double>cells, u, left, frac
    cdef Py_ssize_t top = cells - 1, i, j, a, b
    with nogil:
        for i in range(scores.shape[0]):
            u = scores[i] * g - 0.5
            left = floor(u)
            frac = u - left
            j = <Py_ssize_t>left
            a = min(max(j, 0), top)
            b = min(max(j + 1, 0), top)
            w[a] += 1.0 - frac
            w[b] += frac
    return weights
