# cython: language_level=3, autotestdict=False
"""The regression intervals' compiled kernels: the cells' Poisson draws and KS/W1 per draw.

:func:`~fairmonitor.metrics._regression._resample.cell_intervals` draws every (group, bin)
cell's Poisson count for every draw, then reads KS and the worst Wasserstein-1 pair of each
draw. In numpy the draws were ``rng.poisson`` over a (draws, groups, bins) array of rates
(numpy's sampler recomputing a rate's constants, ``exp(-lam)`` or PTRS's square root, logs and
divisions, at every draw) and a multiplication; the statistics a chain of (draws, groups,
bins) temporaries (cumulative sums, division, differences, ``abs``) and every ordered pair of
groups (both (i, j) and (j, i)).

- :func:`poisson_scaled` draws **the same numbers as** ``scale * rng.poisson(lam, size=(draws,
  lam.size))``, bit for bit, from the same generator state, and leaves the generator where
  numpy's call would: it is numpy's sampler (``random_poisson``: the multiplication method
  below a rate of 10, Hormann's PTRS from 10, numpy's own ``loggam``) reading the generator's
  ``next_double`` in the same order, with each cell's constants computed once (by the same
  libm functions numpy's C calls) instead of once a draw, the uniforms read ahead in blocks
  (never more than the remaining samples certainly consume) and the cells of rate 0, which
  read none, set apart from the loop.
- :func:`cell_statistics` is ``_cell_statistics``'s numpy formulation within rounding (a W1
  sum in four running sums, where numpy's matrix-vector product sums in its own order: a few
  units in the last place), one pass a draw, each unordered pair once.

``tests/metrics/test_regression_kernels.py`` compares both with the numpy formulations.
"""

import numpy as np

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.math cimport NAN, exp, fabs, floor, isnan, log, sqrt
from libc.stdint cimport int64_t
from numpy.random cimport bitgen_t

__all__ = ["cell_statistics", "poisson_scaled"]

# numpy's random_loggam coefficients (numpy/random/src/distributions/distributions.c)
cdef double[10] _LOGGAM = [8.333333333333333e-02, -2.777777777777778e-03,
                           7.936507936507937e-04, -5.952380952380952e-04,
                           8.417508417508418e-04, -1.917526917526918e-03,
                           6.410256410256410e-03, -2.955065359477124e-02,
                           1.796443723688307e-01, -1.39243221690590e+00]


cdef double _loggam(double x) noexcept nogil:
    """numpy's ``random_loggam`` (a Stirling series, not libm's ``lgamma``), step for step."""
    cdef double x0, x2, gl, gl0
    cdef int64_t k, n
    if x == 1.0 or x == 2.0:
        return 0.0
    n = <int64_t>(7 - x) if x < 7.0 else 0
    x0 = x + n
    x2 = (1.0 / x0) * (1.0 / x0)
    gl0 = _LOGGAM[9]
    for k in range(8, -1, -1):
        gl0 *= x2
        gl0 += _LOGGAM[k]
    gl = gl0 / x0 + 0.5 * 1.8378770664093453e+00 + (x0 - 0.5) * log(x0) - x0
    if x < 7.0:
        for k in range(1, n + 1):
            gl -= log(x0 - 1.0)
            x0 -= 1.0
    return gl


cdef struct _Rate:
    double lam, enlam, a, b, vr, loglam, loginv


# Uniforms are read ahead of the sampler in blocks (one tight loop of ``next_double`` calls,
# then the sampler reads memory): never more than the draws left will certainly consume, so
# the generator ends exactly where numpy's call leaves it, whatever the bit generator.
cdef enum:
    _BLOCK = 2048


cdef struct _Stream:
    bitgen_t *bg
    Py_ssize_t pos, filled
    int64_t later  # uniforms the samples after the current one will consume at least
    double buf[_BLOCK]


cdef inline double _next(_Stream *s) noexcept nogil:
    cdef Py_ssize_t i, n
    if s.pos == s.filled:
        # the current sample consumes this uniform; the later ones at least `later`
        n = <Py_ssize_t>min(<int64_t>_BLOCK, 1 + s.later)
        for i in range(n):
            s.buf[i] = s.bg.next_double(s.bg.state)
        s.pos, s.filled = 0, n
    s.pos += 1
    return s.buf[s.pos - 1]


cdef int64_t _ptrs(_Stream *bg, _Rate *r) noexcept nogil:
    """numpy's ``random_poisson_ptrs`` with the rate's constants precomputed."""
    cdef double U, V, us
    cdef int64_t k
    while True:
        U = _next(bg) - 0.5
        V = _next(bg)
        us = 0.5 - fabs(U)
        k = <int64_t>floor((2 * r.a / us + r.b) * U + r.lam + 0.43)
        if us >= 0.07 and V <= r.vr:
            return k
        if k < 0 or (us < 0.013 and V > us):
            continue
        if (log(V) + r.loginv - log(r.a / (us * us) + r.b)
                <= -r.lam + k * r.loglam - _loggam(k + 1)):
            return k


cdef int64_t _mult(_Stream *bg, double enlam) noexcept nogil:
    """numpy's ``random_poisson_mult`` given ``exp(-lam)``."""
    cdef double prod = 1.0
    cdef int64_t k = 0
    while True:
        prod *= _next(bg)
        if prod > enlam:
            k += 1
        else:
            return k


cdef void _rates(const double[::1] lam, _Rate *out) noexcept nogil:
    cdef Py_ssize_t c
    cdef double b
    for c in range(lam.shape[0]):
        # libm, as numpy's C sampler (numpy's ufuncs may round exp/log differently)
        b = 0.931 + 2.53 * sqrt(lam[c])
        out[c].lam = lam[c]
        out[c].enlam = exp(-lam[c])
        out[c].b = b
        out[c].a = -0.059 + 0.02483 * b
        out[c].vr = 0.9277 - 3.6224 / (b - 2)
        out[c].loginv = log(1.1239 + 1.1328 / (b - 3.4))
        out[c].loglam = log(lam[c]) if lam[c] > 0 else 0.0


def poisson_scaled(rng, const double[::1] lam, const double[::1] scale, Py_ssize_t draws):
    """Return ``scale * rng.poisson(lam, size=(draws, lam.size))``: the same draws, bit for bit.

    ``rng`` is a :class:`numpy.random.Generator`; it is advanced as numpy's call advances it.

    >>> lam, scale = np.array([0.0, 3.0, 40.0]), np.array([1.0, 2.0, 0.5])
    >>> a = poisson_scaled(np.random.default_rng(0), lam, scale, 50)
    >>> bool((a == scale * np.random.default_rng(0).poisson(lam, size=(50, 3))).all())
    True
    """
    cdef Py_ssize_t m = lam.shape[0], d, c
    if scale.shape[0] != m:
        raise ValueError(f"lam and scale differ in length: {m} and {scale.shape[0]}")
    if m and (not np.all(np.isfinite(lam)) or np.min(lam) < 0):
        raise ValueError("lam must be finite and non-negative")
    out_arr = np.empty((max(draws, 0), m))
    cdef double[:, ::1] out = out_arr
    rates_arr = np.empty(m * sizeof(_Rate), dtype=np.uint8)
    cdef unsigned char[::1] rates_bytes = rates_arr
    cdef _Rate *rates = <_Rate *>&rates_bytes[0] if m else NULL
    cdef Py_ssize_t[::1] live = np.flatnonzero(np.asarray(lam)).astype(np.intp)
    cdef _Stream *stream = <_Stream *>PyMem_Malloc(sizeof(_Stream))
    if stream == NULL:
        raise MemoryError()
    stream.bg = <bitgen_t *>PyCapsule_GetPointer(rng.bit_generator.capsule, "BitGenerator")
    stream.pos = stream.filled = 0
    try:
        if m:
            _rates(lam, rates)
            with rng.bit_generator.lock, nogil:
                _draw(stream, rates, scale, live, out)
    finally:
        PyMem_Free(stream)
    return out_arr


cdef inline int64_t _least(double lam) noexcept nogil:
    """The uniforms a sample at this rate consumes at least (PTRS 2, multiplication 1)."""
    return 2 if lam >= 10 else (0 if lam == 0 else 1)


cdef void _draw(_Stream *stream, _Rate *rates, const double[::1] scale,
                const Py_ssize_t[::1] live, double[:, ::1] out) noexcept nogil:
    """Each draw's samples in numpy's order; only the ``live`` cells (rate > 0) read uniforms.

    A zero rate's sample is 0 and reads none: its cell is ``scale * 0`` every draw (NaN for a
    NaN scale, as numpy's product), written first, so the loop branches on live cells only.
    """
    cdef Py_ssize_t d, c, j, m = out.shape[1]
    cdef int64_t k, per_draw = 0
    for j in range(live.shape[0]):
        per_draw += _least(rates[live[j]].lam)
    stream.later = per_draw * out.shape[0]
    for d in range(out.shape[0]):
        for c in range(m):
            out[d, c] = scale[c] * 0.0
        for j in range(live.shape[0]):
            c = live[j]
            stream.later -= _least(rates[c].lam)
            if rates[c].lam >= 10:
                k = _ptrs(stream, &rates[c])
            else:
                k = _mult(stream, rates[c].enlam)
            out[d, c] = scale[c] * <double>k


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
