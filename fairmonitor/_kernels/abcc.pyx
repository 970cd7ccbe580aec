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
* Sums run in blocks of ``_BLOCK`` terms, each with two to four running partial sums
  (independent additions keep the FPU busy), the blocks' totals added in turn: an error below
  ``(_BLOCK + n / _BLOCK)`` units of round-off of the sum, ~1e-12 relative at 10^7 rows and
  usually far less;
  the tests compare with numpy's sums (pairwise) to a stated tolerance. Where every partial
  sum is exact (multiples of a power of two below 2^53) the value is exact.
* :func:`linear_binning` adds the rows' left weights ``1 - frac`` and right weights ``frac``
  in row order, each into its own grid, then the two grids.
* :func:`std`'s sums are compensated: a group's bandwidth does not depend on its rows' order.

Compiled ahead of time by ``setup.py`` (no fast-math: IEEE results, NaN and inf kept).
"""

import numpy as np

from libc.math cimport fabs, sqrt
from libc.stdint cimport int64_t, uint64_t

__all__ = ["is_sorted", "linear_binning", "mean_abs_gap", "std", "w1_units"]

cdef enum:
    _BLOCK = 1024  # terms per block of a sum (four partial sums each; totals added in turn)


cdef double _gap_sum(const double[:] x, const double[:] y) noexcept nogil:
    """Sum of ``|x[k] - y[k]|`` over every row: blocks of four partial sums."""
    cdef Py_ssize_t n = x.shape[0], lo = 0, k, stop
    cdef double total = 0.0, s0, s1, s2, s3
    while lo < n:
        stop = min(lo + _BLOCK, n)
        s0 = s1 = s2 = s3 = 0.0
        k = lo
        while k + 4 <= stop:
            s0 += fabs(x[k] - y[k])
            s1 += fabs(x[k + 1] - y[k + 1])
            s2 += fabs(x[k + 2] - y[k + 2])
            s3 += fabs(x[k + 3] - y[k + 3])
            k += 4
        while k < stop:
            s0 += fabs(x[k] - y[k])
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


# Two loops in C with SSE2 vectors (x86-64's baseline: the build targets no newer instruction
# set, so the compiler alone does not vectorize them), a scalar loop elsewhere or for the tail.
cdef extern from *:
    """
    #if defined(__SSE2__) || defined(_M_X64)
    #include <emmintrin.h>
    #define FM_SSE2 1
    #endif

    /* s += t, the rounding error of the addition carried into c (Knuth's TwoSum) */
    static CYTHON_INLINE void fm_two_sum(double* s, double* c, double t) {
        double u = *s + t, b = u - *s;
        *c += (*s - (u - b)) + (t - b);
        *s = u;
    }

    /* Sum of x[k] (squared: of (x[k] - center)**2) over k < n, compensated: four running
       sums, each carrying the rounding error of every addition (six additions a term, none
       on a sum's critical path), then the lanes' sums, carried too. */
    static double fm_exact_sum(int squared, const double* x, Py_ssize_t n, double center) {
        double s[4] = {0.0, 0.0, 0.0, 0.0}, c[4] = {0.0, 0.0, 0.0, 0.0};
        double total = 0.0, carry = 0.0, t;
        Py_ssize_t k = 0;
        int lane;
    #ifdef FM_SSE2
        __m128d s0 = _mm_setzero_pd(), s1 = _mm_setzero_pd();
        __m128d c0 = _mm_setzero_pd(), c1 = _mm_setzero_pd(), m = _mm_set1_pd(center);
        __m128d t0, t1, u0, u1, b0, b1;
        for (; k + 4 <= n; k += 4) {
            t0 = _mm_loadu_pd(x + k);
            t1 = _mm_loadu_pd(x + k + 2);
            if (squared) {
                t0 = _mm_sub_pd(t0, m);
                t1 = _mm_sub_pd(t1, m);
                t0 = _mm_mul_pd(t0, t0);
                t1 = _mm_mul_pd(t1, t1);
            }
            u0 = _mm_add_pd(s0, t0);
            u1 = _mm_add_pd(s1, t1);
            b0 = _mm_sub_pd(u0, s0);
            b1 = _mm_sub_pd(u1, s1);
            c0 = _mm_add_pd(c0, _mm_add_pd(_mm_sub_pd(s0, _mm_sub_pd(u0, b0)), _mm_sub_pd(t0, b0)));
            c1 = _mm_add_pd(c1, _mm_add_pd(_mm_sub_pd(s1, _mm_sub_pd(u1, b1)), _mm_sub_pd(t1, b1)));
            s0 = u0;
            s1 = u1;
        }
        _mm_storeu_pd(s, s0);
        _mm_storeu_pd(s + 2, s1);
        _mm_storeu_pd(c, c0);
        _mm_storeu_pd(c + 2, c1);
    #endif
        for (; k < n; k++) {
            t = x[k] - center;
            fm_two_sum(&s[k & 3], &c[k & 3], squared ? t * t : x[k]);
        }
        for (lane = 0; lane < 4; lane++) {
            fm_two_sum(&total, &carry, s[lane]);
            carry += c[lane];
        }
        return total + carry;
    }

    /* Nonzero if some i in [lo, hi) has x[i] < x[i - 1]: no early exit, two vectors a step */
    static Py_ssize_t fm_descents(const double* x, Py_ssize_t lo, Py_ssize_t hi) {
        Py_ssize_t i = lo, count = 0;
    #ifdef FM_SSE2
        __m128d bad0 = _mm_setzero_pd(), bad1 = _mm_setzero_pd();
        for (; i + 4 <= hi; i += 4) {
            bad0 = _mm_or_pd(bad0, _mm_cmplt_pd(_mm_loadu_pd(x + i), _mm_loadu_pd(x + i - 1)));
            bad1 = _mm_or_pd(bad1, _mm_cmplt_pd(_mm_loadu_pd(x + i + 2),
                                                _mm_loadu_pd(x + i + 1)));
        }
        count = _mm_movemask_pd(_mm_or_pd(bad0, bad1)) != 0;
    #endif
        for (; i < hi; i++) count += x[i] < x[i - 1];
        return count;
    }
    """
    double fm_exact_sum(int squared, const double* x, Py_ssize_t n, double center) nogil
    Py_ssize_t fm_descents(const double* x, Py_ssize_t lo, Py_ssize_t hi) nogil


def mean_abs_gap(const double[:] a, const double[:] b):
    """``np.abs(a - b).mean()`` of two equally long arrays."""
    cdef double total
    with nogil:
        total = _gap_sum(a, b)
    return total / <double>a.shape[0]


def std(const double[:] values, Py_ssize_t ddof):
    """``values.std(ddof=ddof)`` (``values.size > ddof``) with no temporary.

    numpy's definition: the mean, then the sum of the squared deviations from it divided by
    ``n - ddof``, then the square root. Both sums are compensated (``fm_exact_sum``), so the
    bandwidth does not depend on the order of a group's rows (identical groups in another
    order give ABPC exactly 0); the compensation costs about a nanosecond a row.
    """
    cdef Py_ssize_t n = values.shape[0]
    cdef double mean, squares
    cdef const double[::1] x = np.ascontiguousarray(values)  # a copy of strided input only
    with nogil:
        mean = fm_exact_sum(False, &x[0], n, 0.0) / <double>n
        squares = fm_exact_sum(True, &x[0], n, mean)
    return sqrt(squares / <double>(n - ddof))


def is_sorted(const double[:] values):
    """Tell whether ascending; blocks of 1024 without an early exit, so the loop vectorizes."""
    cdef Py_ssize_t n = values.shape[0], lo, i
    cdef const double* x
    if n < 2:
        return True
    if values.strides[0] != sizeof(double):  # strided: element by element
        for i in range(1, n):
            if values[i] < values[i - 1]:
                return False
        return True
    x = &values[0]
    with nogil:
        lo = 1
        while lo < n and not fm_descents(x, lo, min(lo + 1024, n)):
            lo += 1024
    return lo >= n


def linear_binning(const double[:] scores, Py_ssize_t cells):
    """:func:`~fairmonitor.metrics._abpc_abcc.kde.linear_binning`'s weights.

    Per row: ``u = x * cells - 0.5``, ``left = floor(u)``, ``frac = u - left``; weight ``1 -
    frac`` to cell ``clip(left)``, ``frac`` to ``clip(left + 1)``. Scores must lie in [0, 1]
    (weights non-negative). The left and the right weights accumulate apart (two independent
    chains of additions where neighbouring rows share cells), then add up cell by cell.
    """
    weights = np.zeros(cells)
    right_weights = np.zeros(cells)
    cdef double[::1] w = weights
    cdef double[::1] right = right_weights
    cdef double g = <double>cells, u, frac
    cdef Py_ssize_t top = cells - 1, i, j
    with nogil:
        for i in range(scores.shape[0]):
            u = scores[i] * g - 0.5  # >= -0.5
            j = <Py_ssize_t>u  # floor(u) by truncation (one instruction, unlike libm's floor)
            if u < <double>j:
                j -= 1
            frac = u - <double>j
            w[min(max(j, 0), top)] += 1.0 - frac
            right[min(max(j + 1, 0), top)] += frac
        for j in range(cells):
            w[j] += right[j]
    return weights
