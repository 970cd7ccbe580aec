# cython: language_level=3, autotestdict=False
"""The regression intervals' compiled kernel: KS and W1 of every draw's cells.

:func:`~fairmonitor.metrics._regression._resample.cell_intervals` draws every (group, bin)
cell's Poisson count for every draw (the score intervals' sampler,
``_kernels/intervals.poisson_counts``), then reads KS and the worst Wasserstein-1 pair of each
draw. In numpy the statistics were a chain of (draws, groups, bins) temporaries (cumulative
sums, division, differences, ``abs``) over every ordered pair of groups (both (i, j) and
(j, i)).

:func:`cell_statistics` is ``_cell_statistics``'s numpy formulation within rounding (a W1
sum in four running sums, where numpy's matrix-vector product sums in its own order: a few
units in the last place), one pass a draw, each unordered pair once.
``tests/metrics/test_regression_kernels.py`` compares it with the numpy formulation.
"""

import numpy as np

from libc.math cimport NAN, fabs, isnan

__all__ = ["cell_statistics"]


cdef double _l1(const double *f, const double *g, const double *dx, Py_ssize_t n
                ) noexcept nogil:
    """``sum |f - g| dx`` in four running sums (independent additions: the loop is not
    bound by one addition's latency; the rounding differs from numpy's by a few ulps)."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t b = 0
    while b + 4 <= n:
        s0 = s0 + fabs(f[b] - g[b]) * dx[b]
        s1 = s1 + fabs(f[b + 1] - g[b + 1]) * dx[b + 1]
        s2 = s2 + fabs(f[b + 2] - g[b + 2]) * dx[b + 2]
        s3 = s3 + fabs(f[b + 3] - g[b + 3]) * dx[b + 3]
        b += 4
    while b < n:
        s0 = s0 + fabs(f[b] - g[b]) * dx[b]
        b += 1
    return (s0 + s1) + (s2 + s3)


cdef void _one_draw(const double[:, ::1] mass, const double[::1] dx, double[:, ::1] cdf,
                    double[::1] pooled, double *ks, double *w1) noexcept nogil:
    """KS (groups vs pooled) and the worst W1 pair of one draw's (groups, bins) weights."""
    cdef Py_ssize_t g, h, b, n_groups = mass.shape[0], bins = mass.shape[1]
    cdef double run, total, best_ks = NAN, best_w1 = NAN, v, s
    for b in range(bins):
        pooled[b] = 0.0
    for g in range(n_groups):
        run = 0.0
        for b in range(bins):
            run = run + mass[g, b]
            cdf[g, b] = run
            pooled[b] = pooled[b] + run
    total = pooled[bins - 1]
    for b in range(bins):
        pooled[b] = pooled[b] / total
    for g in range(n_groups):
        total = cdf[g, bins - 1]
        for b in range(bins):
            cdf[g, b] = cdf[g, b] / total
            v = fabs(cdf[g, b] - pooled[b])
            if not isnan(v) and (isnan(best_ks) or v > best_ks):
                best_ks = v
    for g in range(n_groups):
        for h in range(g, n_groups):  # the diagonal too: numpy's nanmax read it (0 or NaN)
            s = _l1(&cdf[g, 0], &cdf[h, 0], &dx[0] if bins > 1 else NULL, bins - 1)
            if not isnan(s) and (isnan(best_w1) or s > best_w1):
                best_w1 = s
    ks[0] = best_ks
    w1[0] = best_w1


def cell_statistics(const double[:, :, ::1] mass, const double[::1] dx, double scale):
    """Return (draws, 3): KS, worst W1 pair and W1 / ``scale`` of each draw's (groups, bins).

    ``_cell_statistics``'s numpy formulation within rounding (NaN where every value is NaN).

    >>> m = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    >>> cell_statistics(m, np.array([2.0]), 4.0).tolist()
    [[0.5, 2.0, 0.5]]
    """
    cdef Py_ssize_t d, draws = mass.shape[0], n_groups = mass.shape[1], bins = mass.shape[2]
    if dx.shape[0] != max(bins - 1, 0):
        raise ValueError(f"dx has {dx.shape[0]} widths for {bins} bins")
    out_arr = np.full((draws, 3), np.nan)
    if bins == 0 or n_groups == 0:
        return out_arr
    cdef double[:, ::1] out = out_arr
    cdef double[:, ::1] cdf = np.empty((n_groups, bins))
    cdef double[::1] pooled = np.empty(bins)
    with nogil:
        for d in range(draws):
            _one_draw(mass[d], dx, cdf, pooled, &out[d, 0], &out[d, 1])
            out[d, 2] = out[d, 1] / scale
    return out_arr
