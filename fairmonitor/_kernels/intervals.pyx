# cython: language_level=3, autotestdict=False
"""The intervals' compiled kernels: bootstrap draws, curves, errors, pair sums; rate maxima.

:func:`~fairmonitor.metrics._score_intervals.score_gap_interval` reads, per group, a (draws,
bins) array of bootstrap counts and turns it into curves, errors and per-pair sums. In numpy
each step was a pass over a block temporary (the CDF's cumulative sum and division; MADD's
``np.add.reduceat``; ABPC's mixed-type product and division; the error's subtraction,
``np.nan_to_num`` (four passes), cast and ``var`` (four passes); per pair the noise, two masked
copies, ``abs`` and a sum). Compiled, each is one pass that writes only what is read again. The
report's fine histogram of cells (:func:`cell_histogram`) is one pass instead of a division, a
cast, a minimum and a weighted ``np.bincount``; the rate intervals' joint maxima
(:func:`pair_maxima`) one pass instead of six (draws, pairs) temporaries, their pair bounds
(:func:`pair_score_bounds`) and chance extremes (:func:`rate_extremes`) one pass each instead
of a gather and ~20 small temporaries (per call ~10 us of work under ~40 us of numpy calls).

Cython, compiled at install (``setup.py``): importing this module loads no JIT compiler.

**Equal to the numpy code within rounding, not to the bit** (issue 27: no copy of numpy's
private summation order). Each kernel performs numpy's float operations but sums a row in
turn in float64 (:func:`_sum`), where numpy sums pairwise in the array's dtype. Totals of
counts are whole numbers, exact either way; the other row sums (an L1 gap over at most a few
hundred bins) differ from numpy's by a few units in the last place of their dtype, far below
the bootstrap's Monte Carlo error (~2% of a bound's half-width). No fast-math; division by
zero gives IEEE's quotient (``cdivision``); ``var`` is the mean, then the mean squared
deviation, as numpy's.

``tests/metrics/test_intervals.py`` keeps the numpy versions as oracles and compares with a
stated tolerance (``rtol`` 1e-12 in float64, 1e-6 in float32).
"""

import math

import numpy as np

from libc.float cimport DBL_MAX
from libc.math cimport INFINITY, ceil, fabs, fabsf, floor, hypot, sqrt

# the dtypes of counts and curves: float32 (the bootstrap's draws) or float64 (a hat)
ctypedef fused real:
    float
    double

__all__ = ["cdf_curves", "cell_histogram", "coarse_curves", "coarse_gap_maxima", "density_curves",
           "errors", "pair_changes", "pair_derivatives", "pair_gap_maxima", "pair_gaps",
           "pair_maxima", "pair_maxima_cols", "pair_score_bounds", "poisson_counts",
           "rate_extremes", "scaled", "wilson_bounds"]

cdef double _BIG = DBL_MAX  # np.nan_to_num's replacement of +inf


def _real(a):
    """``a`` C-contiguous, as float32 if it is float32 and as float64 otherwise."""
    a = np.asarray(a)
    return np.ascontiguousarray(a, dtype=np.float32 if a.dtype == np.float32 else np.float64)


# ------------------------------------------------------------------------------ row sums

cdef inline double _sum(const real* a, Py_ssize_t n) noexcept nogil:
    """Sum ``a[:n]`` in float64, in turn.

    A plain sum, not numpy's pairwise order: the summands here are whole counts (exact in
    float64 up to 2^53, so every order gives the same total) or at most a few hundred
    absolute differences of curves in [0, 1] (float64 accumulation: a relative error of at
    most ~n 2^-53, far below the bootstrap's Monte Carlo error).
    """
    cdef Py_ssize_t i
    cdef double res = 0.0
    for i in range(n):
        res += a[i]
    return res


# ------------------------------------------------------------------------------ Poisson draws

cdef void _guide(const double* table, Py_ssize_t low, Py_ssize_t high, double u_min,
                 double step, Py_ssize_t n_guide, Py_ssize_t* guide) noexcept nogil:
    """``guide[j]``: the smallest ``k`` in ``[low, high]`` with ``table[k] >= u_min + j step``.

    The index of Chen and Asau's indexed search: one sweep of the table for all buckets.
    """
    cdef Py_ssize_t j, k = low
    for j in range(n_guide):
        while k < high and table[k] < u_min + j * step:
            k += 1
        guide[j] = k


cdef void _poisson_bin(double rate, double mode, double pmf, double cdf,
                       const double[:, ::1] uniforms, Py_ssize_t b, double* table,
                       Py_ssize_t* guide, float[:, ::1] out) noexcept nogil:
    """One bin's draws: the smallest ``k`` with ``u <= F(k)``, over the bin's CDF table.

    The table is built once per bin from the mode, down ``F(k - 1) = F(k) - p(k)``, ``p(k -
    1) = p(k) (k / rate)`` until it falls below the bin's smallest uniform, and up ``p(k) =
    p(k - 1) (rate / k)``, ``F(k) = F(k - 1) + p(k)`` until it reaches the largest. Each draw
    then starts from its bucket's guide (as many buckets between the extreme uniforms as
    draws or table steps, whichever is more) and
    steps to the smallest ``k`` with ``u <= F(k)``: a step or two a draw instead of a
    bisection's ~log2(sqrt(rate)) mispredicted branches. The same table and the same inverse
    as a walk from the mode per draw, so the same counts, bit for bit.
    """
    cdef Py_ssize_t n_draws = uniforms.shape[0], d, k, j, low, high, at, last, n_guide
    cdef double bottom, u, u_min = 1.0, u_max = 0.0, k_low, p_low, k_high, p_high, step
    # 8 standard deviations from the mode (probability < 1e-15) the table stops: only a u
    # within the CDF's round-off of 0 or 1 gets there
    bottom = floor(max(mode - 8.0 * sqrt(rate) - 40.0, 0.0))
    last = <Py_ssize_t>(ceil(mode + 8.0 * sqrt(rate) + 40.0) - bottom)
    at = <Py_ssize_t>(mode - bottom)
    for d in range(n_draws):
        u_min = min(u_min, uniforms[d, b])
        u_max = max(u_max, uniforms[d, b])
    table[at] = cdf
    low, k_low, p_low = at, mode, pmf
    while low > 0 and u_min <= table[low]:
        table[low - 1] = table[low] - p_low
        p_low *= k_low / rate
        k_low -= 1.0
        low -= 1
    high, k_high, p_high = at, mode, pmf
    while high < last and u_max > table[high]:
        k_high += 1.0
        p_high *= rate / k_high
        table[high + 1] = table[high] + p_high
        high += 1
    n_guide = max(n_draws, high - low + 1)  # a bucket a draw or a table step: O(1) a draw
    step = (u_max - u_min) / n_guide if u_max > u_min else 1.0
    _guide(table, low, high, u_min, step, n_guide, guide)
    for d in range(n_draws):
        u = uniforms[d, b]
        j = min(max(<Py_ssize_t>((u - u_min) / step), 0), n_guide - 1)
        k = guide[j]
        # exact whatever the rounding of the bucket: down while the step below still holds
        # u, up while this step is below it. The first step up is taken without a branch
        # (a bucket spans about one table step: 0 or 1 step, unpredictably); table[high] >= u.
        # Each test evaluates both sides (&, not `and`): one branch, almost never taken, where
        # `k > low and ...` branched on k's value, a misprediction in ~40% of draws at rates
        # below 1 (2.2 -> 1.3 ms for 128,000 draws at rate 0.5). table[-1] exists for that
        # (poisson_counts), read at k == low and never used.
        while (k > low) & (u <= table[k - 1]):
            k -= 1
        k += (k < high) & (u > table[k])
        while (k < high) & (u > table[k]):
            k += 1
        out[d, b] = <float>(bottom + k)


cdef void _poisson_rows(const double[::1] lam, const double[::1] mode, const double[::1] pmf,
                        const double[::1] cdf, const double[:, ::1] uniforms, double* table,
                        Py_ssize_t* guide, float[:, ::1] out) noexcept nogil:
    cdef Py_ssize_t b, d
    cdef double rate
    for b in range(uniforms.shape[1]):
        rate = lam[b]
        if rate <= 0.0 or rate != rate:  # none (NaN: no count)
            for d in range(uniforms.shape[0]):
                out[d, b] = 0.0 if rate <= 0.0 else <float>rate
            continue
        _poisson_bin(rate, mode[b], pmf[b], cdf[b], uniforms, b, table, guide, out)


def poisson_counts(lam, uniforms):
    """Poisson(``lam[..., b]``) draws by inversion of ``uniforms`` (..., draws, R), float32.

    ``lam`` (R,) with ``uniforms`` (draws, R), or ``lam`` (G, R) with ``uniforms`` (G, draws,
    R): several groups in one call, the same counts as one call per group.

    Each bin's CDF table is built once, from the mode (where the pmf and CDF are exact:
    log-gamma and the regularized incomplete gamma) down and up to the bin's extreme
    uniforms; each draw then searches it from a guide (indexed search). Whole counts, never
    negative: ``scipy.stats.poisson.ppf`` of the uniforms but on a rounding boundary.

    >>> poisson_counts(np.array([0.0, 3.0]), np.array([[0.5, 0.01], [0.5, 0.99]])).tolist()
    [[0.0, 0.0], [0.0, 8.0]]
    """
    from scipy import special

    lam = np.ascontiguousarray(lam, dtype=np.float64)
    uniforms = np.ascontiguousarray(uniforms, dtype=np.float64)
    out = np.empty(uniforms.shape, dtype=np.float32)
    lams, us, outs = (lam[None], uniforms[None], out[None]) if lam.ndim == 1 else \
        (lam, uniforms, out)
    mode = np.floor(lams)
    with np.errstate(divide="ignore", invalid="ignore"):
        pmf = np.exp(mode * np.log(lams) - lams - special.gammaln(mode + 1.0))
    cdf = np.ascontiguousarray(special.pdtr(mode, lams), dtype=np.float64)
    finite = lams[np.isfinite(lams)]
    # the table spans at most 16 sqrt(lam) + 82 counts (bottom clipped at 0: below that),
    # from t[1]: the search reads one entry below its table
    table = np.empty(int(16.0 * math.sqrt(max(finite.max(initial=0.0), 0.0))) + 101)
    guide = np.empty(max(uniforms.shape[uniforms.ndim - 2], table.size), dtype=np.intp)
    cdef double[::1] t = table
    cdef Py_ssize_t[::1] g = guide
    cdef Py_ssize_t k
    if uniforms.shape[uniforms.ndim - 2]:
        for k in range(lams.shape[0]):
            _poisson_rows(lams[k], mode[k], pmf[k], cdf[k], us[k], &t[1], &g[0], outs[k])
    return out


# ----------------------------------------------------------------------------- curves

def scaled(x, factor):
    """``x * factor`` in float64, for 2-D ``x`` and one factor per column.

    Or 3-D ``x`` (groups, rows, R) with ``factor`` (groups, R): each group's rows times its
    own factors (``x.astype(float64) * factor[:, None, :]``, without the two temporaries).
    numpy's mixed-type product casts ``x`` through a buffer: ~5x slower.

    >>> scaled(np.array([[1.0, 2.0]], dtype=np.float32), np.array([0.5, 3.0])).tolist()
    [[0.5, 6.0]]
    >>> scaled(np.ones((2, 1, 2), dtype=np.float32), np.array([[1.0, 2.0], [3.0, 4.0]])).tolist()
    [[[1.0, 2.0]], [[3.0, 4.0]]]
    """
    x = _real(x)
    out = np.empty(x.shape)
    factor = np.ascontiguousarray(factor, dtype=np.float64)
    cdef Py_ssize_t g
    if x.ndim == 3:  # a group at a time, its own factors
        if factor.shape != (x.shape[0], x.shape[2]):
            raise ValueError("3-D x needs factor of shape (groups, R)")
        for g in range(x.shape[0]):
            if x.dtype == np.float32:
                _scaled_rows[float](x[g], factor[g], out[g])
            else:
                _scaled_rows[double](x[g], factor[g], out[g])
        return out
    if x.dtype == np.float32:
        _scaled_rows[float](x, factor, out)
    else:
        _scaled_rows[double](x, factor, out)
    return out


cdef void _scaled_rows(const real[:, ::1] x, const double[::1] factor,
                       double[:, ::1] out) noexcept nogil:
    cdef Py_ssize_t d, b
    for d in range(x.shape[0]):
        for b in range(x.shape[1]):
            out[d, b] = <double>x[d, b] * factor[b]


cdef void _cdf_rows(const real[:, ::1] counts, real[:, ::1] out) noexcept nogil:
    cdef Py_ssize_t n_draws = counts.shape[0], r = counts.shape[1], d, b
    cdef real c, total
    if r < 2:
        return
    for d in range(n_draws):
        c = counts[d, 0]
        out[d, 0] = c
        for b in range(1, r - 1):
            c += counts[d, b]
            out[d, b] = c
        total = <real>_sum(&counts[d, 0], r)  # then each running sum over the row's total
        for b in range(r - 1):
            out[d, b] = out[d, b] / total


def cdf_curves(counts):
    """``np.cumsum(counts, axis=-1)[:, :-1] / counts.sum(axis=-1, keepdims=True)`` (2-D).

    >>> cdf_curves(np.array([[1.0, 1.0, 2.0]])).tolist()
    [[0.25, 0.5]]
    """
    counts = _real(counts)
    out = np.empty((counts.shape[0], counts.shape[1] - 1), dtype=counts.dtype)
    if counts.shape[1] < 2:
        pass
    elif counts.dtype == np.float32:
        _cdf_rows[float](counts, out)
    else:
        _cdf_rows[double](counts, out)
    return out


cdef void _coarse_rows(const real[:, ::1] counts, const Py_ssize_t[::1] starts,
                       const Py_ssize_t[::1] slots, double[:, ::1] out) noexcept nogil:
    cdef Py_ssize_t n_draws = counts.shape[0], r = counts.shape[1], d, k, j, lo, n
    cdef Py_ssize_t n_seg = starts.shape[0]
    cdef const real* row
    cdef real v
    cdef double total
    for d in range(n_draws):
        row = &counts[d, 0]
        for j in range(out.shape[1]):
            out[d, j] = 0.0
        for k in range(n_seg):  # np.add.reduceat: each segment's sum
            lo = starts[k]
            n = (starts[k + 1] if k + 1 < n_seg else r) - lo
            v = <real>_sum(row + lo, n)
            out[d, slots[k]] = v
        total = _sum(row, r)  # then over the row's total, in float64
        for j in range(out.shape[1]):
            out[d, j] = out[d, j] / total


def coarse_curves(counts, starts, slots, m):
    """MADD's coarse histograms as probabilities, float64 (2-D ``counts``).

    ``coarse = zeros((D, m)); coarse[:, slots] = np.add.reduceat(counts, starts, axis=-1)``,
    divided by ``counts.sum(axis=-1, keepdims=True)``.

    >>> coarse_curves(np.array([[1.0, 1.0, 2.0]]), np.array([0, 2]), np.array([0, 1]),
    ...               2).tolist()
    [[0.5, 0.5]]
    """
    counts = _real(counts)
    out = np.empty((counts.shape[0], int(m)))
    starts = np.ascontiguousarray(starts, dtype=np.intp)
    slots = np.ascontiguousarray(slots, dtype=np.intp)
    if counts.dtype == np.float32:
        _coarse_rows[float](counts, starts, slots, out)
    else:
        _coarse_rows[double](counts, starts, slots, out)
    return out


cdef void _density_rows(const double[:, ::1] dens, const real[:, ::1] counts,
                        double[:, ::1] out) noexcept nogil:
    cdef Py_ssize_t d, b
    cdef double total
    for d in range(counts.shape[0]):
        total = _sum(&counts[d, 0], counts.shape[1])
        for b in range(dens.shape[1]):
            out[d, b] = dens[d, b] / total


def density_curves(dens, counts):
    """``dens / counts.sum(axis=-1, keepdims=True)`` (2-D, float64 ``dens``).

    >>> density_curves(np.array([[1.0, 3.0]]), np.array([[2.0, 2.0]])).tolist()
    [[0.25, 0.75]]
    """
    dens = np.ascontiguousarray(dens, dtype=np.float64)
    out = np.empty(dens.shape)
    counts = _real(counts)
    if counts.dtype == np.float32:
        _density_rows[float](dens, counts, out)
    else:
        _density_rows[double](dens, counts, out)
    return out


# ----------------------------------------------------------------------------- errors

cdef void _row_totals(const real[:, ::1] counts, double[::1] out) noexcept nogil:
    cdef Py_ssize_t d
    for d in range(counts.shape[0]):
        out[d] = _sum(&counts[d, 0], counts.shape[1])


cdef void _error_rows(const real[:, ::1] curves, const double* totals, const double[::1] hat,
                      float[:, ::1] err, double[::1] var, double[:, ::1] x,
                      double[::1] total) noexcept nogil:
    cdef Py_ssize_t n_draws = curves.shape[0], g = curves.shape[1], d, b
    cdef double c, v, dev
    for b in range(g):
        total[b] = 0.0
        var[b] = 0.0
    for d in range(n_draws):
        for b in range(g):
            c = <double>curves[d, b]
            if totals != NULL:
                c = c / totals[d]
            v = c - hat[b]
            if v != v:  # np.nan_to_num
                v = 0.0
            elif v > _BIG:
                v = _BIG
            elif v < -_BIG:
                v = -_BIG
            x[d, b] = v
            err[d, b] = <float>v
            total[b] += v  # the draws' sum per bin, row after row as numpy's axis-0 sum
    for b in range(g):
        total[b] = total[b] / n_draws  # the mean
    for d in range(n_draws):
        for b in range(g):
            dev = x[d, b] - total[b]
            var[b] += dev * dev
    for b in range(g):
        var[b] = var[b] / n_draws


def errors(curves, hat, counts=None):
    """``e = np.nan_to_num(curves - hat)``: ``(e.astype(float32), e.var(axis=0))``.

    With ``counts``, the curves are ``curves / counts.sum(axis=-1, keepdims=True)`` (ABPC's
    densities, :func:`density_curves`), without an array of them. Several groups at once:
    ``curves`` (G, draws, R), ``hat`` (G, R), ``counts`` (G, draws, R) give (G, draws, R)
    errors and (G, R) variances, each group's the numbers of its own call.

    >>> err, var = errors(np.array([[1.0], [3.0]]), np.array([1.0]))
    >>> err.tolist(), var.tolist()
    ([[0.0], [2.0]], [1.0])
    """
    curves = _real(curves)
    hat = np.ascontiguousarray(hat, dtype=np.float64)
    err = np.empty(curves.shape, dtype=np.float32)
    var = np.empty(curves.shape[:curves.ndim - 2] + curves.shape[curves.ndim - 1:])
    x = np.empty(curves.shape[curves.ndim - 2:])
    total = np.empty(curves.shape[curves.ndim - 1])
    totals = np.empty(curves.shape[curves.ndim - 2])
    if counts is not None:
        counts = _real(counts)
    stacked = curves.ndim == 3
    cdef Py_ssize_t g
    for g in range(curves.shape[0] if stacked else 1):
        _errors_of(curves[g] if stacked else curves, hat[g] if stacked else hat,
                   None if counts is None else (counts[g] if stacked else counts),
                   err[g] if stacked else err, var[g] if stacked else var, x, total, totals)
    return err, var


cdef _errors_of(curves, hat, counts, err, var, x, total, double[::1] totals):
    """:func:`errors` of one group into ``err`` and ``var`` (``x``, ``total``: scratch)."""
    cdef double* by = NULL
    if counts is not None:
        if counts.dtype == np.float32:
            _row_totals[float](counts, totals)
        else:
            _row_totals[double](counts, totals)
        if totals.shape[0]:
            by = &totals[0]
    if curves.dtype == np.float32:
        _error_rows[float](curves, by, hat, err, var, x, total)
    else:
        _error_rows[double](curves, by, hat, err, var, x, total)


# ---------------------------------------------------------------------------- pair sums

cdef void _pairs_rows(const double[:, ::1] hats, const double[:, ::1] var,
                      const float[:, :, ::1] err, const Py_ssize_t[::1] left,
                      const Py_ssize_t[::1] right, double kappa, bint changes, double* sign,
                      double* fold_mask, double* dhs, double[:, ::1] deriv,
                      double[:, ::1] moved, double[::1] values) noexcept nogil:
    cdef Py_ssize_t k, a, c, d, b, bins = hats.shape[1], n_draws = err.shape[1]
    cdef double dh, se, floor_, value
    for k in range(left.shape[0]):
        a, c = left[k], right[k]
        value = 0.0
        for b in range(bins):  # each bin's sign, 0 where |d| is within kappa SEs of 0
            dh = hats[a, b] - hats[c, b]
            dhs[b] = dh
            value += fabs(dh)
            se = sqrt(var[a, b] + var[c, b])
            floor_ = se if (se != se or se > 1e-12) else 1e-12
            if fabs(dh) <= kappa * floor_:
                sign[b] = 0.0
            else:
                sign[b] = 1.0 if dh > 0 else (-1.0 if dh < 0 else (0.0 if dh == 0 else dh))
            fold_mask[b] = 1.0 if sign[b] == 0.0 else 0.0  # a sign of 0 folds, whatever made it
        values[k] = value
        d = 0
        while d + 4 <= n_draws:  # four draws at once: independent sums, each in bin order
            _pair_draws4(&err[a, d, 0], &err[c, d, 0], bins, sign, fold_mask,
                         &deriv[d, k], deriv.shape[1])
            d += 4
        while d < n_draws:
            _pair_draw(&err[a, d, 0], &err[c, d, 0], bins, sign, fold_mask, &deriv[d, k])
            d += 1
        if changes:
            _pair_changes_of(err, a, c, dhs, moved, k)


cdef void _pair_changes_of(const float[:, :, ::1] err, Py_ssize_t a, Py_ssize_t c,
                           const double* dhs, double[:, ::1] moved, Py_ssize_t k) noexcept nogil:
    """``moved[:, k]``: every draw's change of the pair ``(a, c)``'s gap, four draws a pass."""
    cdef Py_ssize_t d = 0, bins = err.shape[2], n_draws = err.shape[1]
    while d + 4 <= n_draws:
        _pair_changes4(&err[a, d, 0], &err[c, d, 0], bins, dhs, &moved[d, k], moved.shape[1])
        d += 4
    while d < n_draws:
        _pair_change(&err[a, d, 0], &err[c, d, 0], bins, dhs, &moved[d, k])
        d += 1


cdef inline void _pair_draw(const float* ea, const float* ec, Py_ssize_t bins,
                            const double* sign, const double* fold_mask,
                            double* deriv) noexcept nogil:
    """One draw's derivative: a folded bin adds |x| to ``fold``, a settled one ``sign x`` to
    ``lin``; the other sum adds +0.0, which leaves it unchanged (neither sum is ever -0.0):
    the same sums as a branch, without its mispredictions."""
    cdef Py_ssize_t b
    cdef double fold = 0.0, lin = 0.0
    cdef float x
    for b in range(bins):
        x = ea[b] - ec[b]  # the noise, in float32 as the errors are
        fold += fabsf(x) if fold_mask[b] != 0.0 else 0.0
        lin += 0.0 if fold_mask[b] != 0.0 else sign[b] * x
    deriv[0] = fold + lin


cdef inline void _pair_change(const float* ea, const float* ec, Py_ssize_t bins,
                              const double* dhs, double* moved) noexcept nogil:
    """One draw's change of the pair's L1 gap, ``sum_b |d + x| - |d|``, in bin order."""
    cdef Py_ssize_t b
    cdef double mv = 0.0
    cdef float x
    for b in range(bins):
        x = ea[b] - ec[b]
        mv += fabs(dhs[b] + <double>x) - fabs(dhs[b])
    moved[0] = mv


cdef inline void _pair_draws4(const float* ea, const float* ec, Py_ssize_t bins,
                              const double* sign, const double* fold_mask, double* deriv,
                              Py_ssize_t stride) noexcept nogil:
    """:func:`_pair_draw` of four consecutive draws (rows ``bins`` apart), interleaved."""
    cdef Py_ssize_t b
    cdef double f0 = 0.0, f1 = 0.0, f2 = 0.0, f3 = 0.0, l0 = 0.0, l1 = 0.0, l2 = 0.0
    cdef double l3 = 0.0, s
    cdef bint folded
    cdef float x0, x1, x2, x3
    for b in range(bins):
        s, folded = sign[b], fold_mask[b] != 0.0
        x0 = ea[b] - ec[b]
        x1 = ea[bins + b] - ec[bins + b]
        x2 = ea[2 * bins + b] - ec[2 * bins + b]
        x3 = ea[3 * bins + b] - ec[3 * bins + b]
        f0 += fabsf(x0) if folded else 0.0
        f1 += fabsf(x1) if folded else 0.0
        f2 += fabsf(x2) if folded else 0.0
        f3 += fabsf(x3) if folded else 0.0
        l0 += 0.0 if folded else s * x0
        l1 += 0.0 if folded else s * x1
        l2 += 0.0 if folded else s * x2
        l3 += 0.0 if folded else s * x3
    deriv[0], deriv[stride], deriv[2 * stride], deriv[3 * stride] = (f0 + l0, f1 + l1,
                                                                      f2 + l2, f3 + l3)


cdef inline void _pair_changes4(const float* ea, const float* ec, Py_ssize_t bins,
                                const double* dhs, double* moved,
                                Py_ssize_t stride) noexcept nogil:
    """:func:`_pair_change` of four consecutive draws, interleaved."""
    cdef Py_ssize_t b
    cdef double m0 = 0.0, m1 = 0.0, m2 = 0.0, m3 = 0.0, dh, adh
    for b in range(bins):
        dh = dhs[b]
        adh = fabs(dh)
        m0 += fabs(dh + <double>(ea[b] - ec[b])) - adh
        m1 += fabs(dh + <double>(ea[bins + b] - ec[bins + b])) - adh
        m2 += fabs(dh + <double>(ea[2 * bins + b] - ec[2 * bins + b])) - adh
        m3 += fabs(dh + <double>(ea[3 * bins + b] - ec[3 * bins + b])) - adh
    moved[0], moved[stride], moved[2 * stride], moved[3 * stride] = m0, m1, m2, m3


def pair_derivatives(hats, variances, err, left, right, kappa, changes=True):
    """Every pair's derivative and change per draw: ``(deriv, moved, values)``.

    For groups ``a = left[k]``, ``c = right[k]`` with ``d = hats[a] - hats[c]`` and
    ``noise = err[a] - err[c]`` (float32): ``deriv[:, k]`` is
    ``|noise[:, near]|.sum(1) + noise[:, ~near] @ sign(d[~near])`` with ``near = |d| <= kappa
    max(sqrt(var_a + var_c), 1e-12)``, ``moved[:, k]`` is ``sum_b |d + noise| - |d|`` and
    ``values[k] = |d|.sum()``, for all pairs in one call (float64 sums). ``changes=False``
    leaves ``moved`` unset (:func:`pair_changes` makes it for the pairs that need it).

    >>> e = np.array([[[0.5, 0.0]], [[0.0, 0.0]]], dtype=np.float32)
    >>> deriv, moved, values = pair_derivatives(np.array([[0.0, 1.0], [0.0, 0.0]]),
    ...     np.ones((2, 2)), e, np.array([0]), np.array([1]), 3.0)
    >>> deriv.tolist(), moved.tolist(), values.tolist()
    ([[0.5]], [[0.5]], [1.0])
    """
    hats = np.ascontiguousarray(hats, dtype=np.float64)
    variances = np.ascontiguousarray(variances, dtype=np.float64)
    err = np.ascontiguousarray(err, dtype=np.float32)
    left = np.ascontiguousarray(left, dtype=np.intp)
    right = np.ascontiguousarray(right, dtype=np.intp)
    deriv = np.empty((err.shape[1], left.shape[0]))
    moved = np.empty((err.shape[1], left.shape[0]))
    values = np.empty(left.shape[0])
    signs = np.empty((3, max(hats.shape[1], 1)))
    cdef double[:, ::1] sg = signs
    _pairs_rows(hats, variances, err, left, right, float(kappa), bool(changes), &sg[0, 0],
                &sg[1, 0], &sg[2, 0], deriv, moved, values)
    return deriv, moved, values


def pair_changes(hats, err, left, right):
    """``moved`` of :func:`pair_derivatives` alone: ``sum_b |d + noise| - |d|`` per draw.

    >>> e = np.array([[[0.5, 0.0]], [[0.0, 0.0]]], dtype=np.float32)
    >>> pair_changes(np.array([[0.0, 1.0], [0.0, 0.0]]), e, np.array([0]), np.array([1])
    ...              ).tolist()
    [[0.5]]
    """
    hats = np.ascontiguousarray(hats, dtype=np.float64)
    err = np.ascontiguousarray(err, dtype=np.float32)
    left = np.ascontiguousarray(left, dtype=np.intp)
    right = np.ascontiguousarray(right, dtype=np.intp)
    moved = np.empty((err.shape[1], left.shape[0]))
    dh = np.empty(max(hats.shape[1], 1))
    cdef double[::1] dhs = dh
    cdef double[:, ::1] mv = moved
    cdef const float[:, :, ::1] e = err
    cdef const double[:, ::1] h = hats
    cdef const Py_ssize_t[::1] lf = left
    cdef const Py_ssize_t[::1] rt = right
    cdef Py_ssize_t k, a, c, b, bins = hats.shape[1]
    with nogil:
        for k in range(lf.shape[0]):
            a, c = lf[k], rt[k]
            for b in range(bins):
                dhs[b] = h[a, b] - h[c, b]
            _pair_changes_of(e, a, c, &dhs[0], mv, k)
    return moved


cdef void _gap_rows(const real[:, ::1] a, const real[:, ::1] b,
                    real[::1] out) noexcept nogil:
    cdef Py_ssize_t d, k
    cdef double acc
    for d in range(a.shape[0]):
        acc = 0.0
        for k in range(a.shape[1]):
            acc += fabs(<double>a[d, k] - <double>b[d, k])
        out[d] = <real>acc


def pair_gaps(a, b):
    """``np.abs(a - b).sum(axis=1)`` of two (draws, G) curves of one dtype (summed in float64).

    >>> pair_gaps(np.array([[0.5, 0.25]]), np.array([[0.25, 0.5]])).tolist()
    [0.5]
    """
    a = _real(a)
    b = np.ascontiguousarray(b, dtype=a.dtype)
    out = np.zeros(a.shape[0], dtype=a.dtype)
    if a.dtype == np.float32:
        _gap_rows[float](a, b, out)
    else:
        _gap_rows[double](a, b, out)
    return out


cdef void _gap_max_rows(const real[:, :, ::1] curves, const Py_ssize_t[::1] left,
                        const Py_ssize_t[::1] right, real[::1] out) noexcept nogil:
    cdef Py_ssize_t d, k, b
    cdef double acc, top
    cdef const real* x
    cdef const real* y
    for d in range(curves.shape[1]):
        top = -INFINITY
        for k in range(left.shape[0]):
            x, y = &curves[left[k], d, 0], &curves[right[k], d, 0]
            acc = 0.0
            for b in range(curves.shape[2]):
                acc += fabs(<double>x[b] - <double>y[b])
            if acc > top or acc != acc:  # np.max: NaN wins
                top = acc
        out[d] = <real>top


def pair_gap_maxima(curves, left, right):
    """Per draw, the largest L1 gap over the pairs: ``max_k |C[l_k] - C[r_k]|.sum(-1)``.

    ``curves`` (groups, draws, G) in one dtype; the null's chance level for every pair in one
    call (:func:`pair_gaps` a pair at a time, then the max).

    >>> c = np.array([[[0.0, 0.5]], [[0.5, 0.5]], [[1.0, 1.0]]])
    >>> pair_gap_maxima(c, np.array([0, 0]), np.array([1, 2])).tolist()
    [1.5]
    """
    curves = np.asarray(curves)
    curves = np.ascontiguousarray(
        curves, dtype=np.float32 if curves.dtype == np.float32 else np.float64)
    left = np.ascontiguousarray(left, dtype=np.intp)
    right = np.ascontiguousarray(right, dtype=np.intp)
    out = np.empty(curves.shape[1], dtype=curves.dtype)
    if curves.dtype == np.float32:
        _gap_max_rows[float](curves, left, right, out)
    else:
        _gap_max_rows[double](curves, left, right, out)
    return out


# ----------------------------------------------------------------------- cells, rate maxima

cdef int _cells_into(const long long[::1] count, const double[::1] total, Py_ssize_t res,
                     double[::1] out) noexcept nogil:
    """Add each cell's count to its bin; -1 if a cell's mean score is negative."""
    # cells come in score order, so runs of them share a bin: the bin's running sum stays in
    # a register for the run (the same additions in the same order as bincount's)
    cdef Py_ssize_t k, b, current = -1
    cdef double running = 0.0
    for k in range(count.shape[0]):
        b = <Py_ssize_t>(total[k] / <double>count[k] * <double>res)
        if b < 0:
            return -1
        b = min(b, res - 1)
        if b != current:
            if current >= 0:
                out[current] = running
            current, running = b, out[b]
        running += <double>count[k]
    if current >= 0:
        out[current] = running
    return 0


def cell_histogram(count, total, res):
    """Fine histogram of cells (each at its mean score ``total / count``), float64.

    ``np.bincount(np.minimum((total / count * res).astype(np.intp), res - 1), weights=count,
    minlength=res)``: each bin adds its cells' counts in order from 0.0.

    >>> cell_histogram(np.array([2, 1]), np.array([0.2, 0.9]), 4).tolist()
    [2.0, 0.0, 0.0, 1.0]
    """
    out = np.zeros(int(res))
    if _cells_into(np.ascontiguousarray(count, dtype=np.int64),
                   np.ascontiguousarray(total, dtype=np.float64), int(res), out) < 0:
        raise ValueError("a cell's mean score is negative")
    return out


cdef void _pair_max_cols(const double[:, ::1] e, const Py_ssize_t[::1] left,
                         const Py_ssize_t[::1] right, const double[::1] inv_se,
                         const double[::1] shift, double[::1] near, double[::1] far
                         ) noexcept nogil:
    """Pair by pair, over the draws: ``e`` (cells, draws), each cell's errors contiguous.

    The inner loop runs over the draws (independent, ``a > b ? a : b``: vectorized). The
    maxima are the same numbers in any order; NaN is excluded by the caller.
    """
    cdef Py_ssize_t d, k, n_draws = e.shape[1]
    cdef const double* a
    cdef const double* b
    cdef double t, s, w, h
    for d in range(n_draws):
        near[d] = -INFINITY
        far[d] = -INFINITY
    for k in range(left.shape[0]):
        a, b, w, h = &e[left[k], 0], &e[right[k], 0], inv_se[k], shift[k]
        for d in range(n_draws):
            t = (a[d] - b[d]) * w
            s = t - h
            near[d] = t if t > near[d] else near[d]
            far[d] = s if s > far[d] else far[d]


cdef void _pair_max_rows(const double[:, ::1] z, const double[::1] scale,
                         const Py_ssize_t[::1] left, const Py_ssize_t[::1] right,
                         const double[::1] inv_se, const double[::1] shift, double* e,
                         double[::1] near, double[::1] far) noexcept nogil:
    cdef Py_ssize_t d, k, c, pairs = left.shape[0], cells = z.shape[1]
    cdef double top, top_shifted, t, s
    cdef const double* row
    for d in range(z.shape[0]):
        row = &z[d, 0]
        for c in range(cells):  # each group's error once per draw, not once per pair
            e[c] = row[c] * scale[c]
        top, top_shifted = -INFINITY, -INFINITY
        for k in range(pairs):
            # times the reciprocal: a multiplication instead of a division per pair and draw
            t = (e[left[k]] - e[right[k]]) * inv_se[k]
            if t > top or t != t:  # np.max: NaN wins
                top = t
            s = t - shift[k]
            if s > top_shifted or s != s:
                top_shifted = s
        near[d], far[d] = top, top_shifted


def pair_maxima(z, scale, left, right, se, shift):
    """Per draw ``max_k T_k`` and ``max_k (T_k - shift_k)``, the rate intervals' joint maxima.

    ``T_k = (e_l - e_r) / se_k`` and ``e = z * scale`` (the joint critical value of
    :mod:`fairmonitor.metrics._rate_intervals`).

    numpy's ``draws = z * scale``, the two gathers, the difference, the division, ``t - shift``
    and the two maxima each made a (draws, pairs) temporary; here one pass, each group's error
    computed once per draw and the division a product with ``1 / se`` (within an ulp of
    numpy's quotient; the tests allow rtol 1e-12).

    >>> z = np.array([[1.0, -1.0], [0.5, 2.0]])
    >>> near, far = pair_maxima(z, np.ones(2), np.array([0, 1]), np.array([1, 0]),
    ...                         np.full(2, 2.0), np.array([0.0, 1.0]))
    >>> near.tolist(), far.tolist()
    ([1.0, 0.75], [1.0, -0.25])
    """
    z = np.ascontiguousarray(z, dtype=np.float64)
    near, far = np.empty(z.shape[0]), np.empty(z.shape[0])
    with np.errstate(divide="ignore"):  # se 0: an infinite T, as numpy's quotient gives
        inv_se = np.ascontiguousarray(1.0 / np.asarray(se, dtype=np.float64))
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    shift = np.ascontiguousarray(shift, dtype=np.float64)
    left = np.ascontiguousarray(left, dtype=np.intp)
    right = np.ascontiguousarray(right, dtype=np.intp)
    if (np.isfinite(scale).all() and np.isfinite(inv_se).all() and np.isfinite(shift).all()
            and np.isfinite(z).all()):
        # no NaN can arise: a pass per pair over each cell's contiguous errors (the same
        # products, differences and maxima as the rows' loop)
        e_cols = np.ascontiguousarray(z.T) * scale[:, None]
        _pair_max_cols(e_cols, left, right, inv_se, shift, near, far)
        return near, far
    errors = np.empty(max(z.shape[1], 1))
    cdef double[::1] e = errors
    _pair_max_rows(z, np.ascontiguousarray(scale, dtype=np.float64),
                   np.ascontiguousarray(left, dtype=np.intp),
                   np.ascontiguousarray(right, dtype=np.intp), inv_se,
                   np.ascontiguousarray(shift, dtype=np.float64), &e[0], near, far)
    return near, far


cdef void _pair_max_cols2(const double[:, ::1] e, const Py_ssize_t[::1] left,
                          const Py_ssize_t[::1] right, const double[::1] inv_se,
                          const double[::1] shift, const double[::1] apart, double[::1] near,
                          double[::1] far, double[::1] far_apart) noexcept nogil:
    """:func:`_pair_max_cols` with a second shift: the same ``t`` for both (one pass)."""
    cdef Py_ssize_t d, k, n_draws = e.shape[1]
    cdef const double* a
    cdef const double* b
    cdef double t, s, u, w, h, g
    for d in range(n_draws):
        near[d] = -INFINITY
        far[d] = -INFINITY
        far_apart[d] = -INFINITY
    for k in range(left.shape[0]):
        a, b, w, h, g = &e[left[k], 0], &e[right[k], 0], inv_se[k], shift[k], apart[k]
        for d in range(n_draws):
            t = (a[d] - b[d]) * w
            s = t - h
            u = t - g
            near[d] = t if t > near[d] else near[d]
            far[d] = s if s > far[d] else far[d]
            far_apart[d] = u if u > far_apart[d] else far_apart[d]


def pair_maxima_cols(z_cols, scale, left, right, inv_se, shift, apart=None):
    """:func:`pair_maxima` from draws already by cell, ``z_cols`` (cells, draws), finite inputs.

    ``inv_se`` is ``1 / se`` (as :func:`pair_maxima` computes it). The caller checks that
    every input is finite (then no NaN can arise, as in :func:`pair_maxima`'s column pass):
    the same products, differences and maxima, so the same numbers. With ``apart`` (a second
    shift) also ``max_k (T_k - apart_k)``, from the same ``T``: what a second call with the
    same draws would give, without recomputing ``T``.

    >>> z = np.array([[1.0, -1.0], [0.5, 2.0]])
    >>> near, far = pair_maxima_cols(np.ascontiguousarray(z.T), np.ones(2), np.array([0, 1]),
    ...                              np.array([1, 0]), np.full(2, 0.5), np.array([0.0, 1.0]))
    >>> near.tolist(), far.tolist()
    ([1.0, 0.75], [1.0, -0.25])
    """
    e_cols = np.asarray(z_cols) * np.asarray(scale, dtype=np.float64)[:, None]
    n_draws = e_cols.shape[1]
    near, far = np.empty(n_draws), np.empty(n_draws)
    left = np.ascontiguousarray(left, dtype=np.intp)
    right = np.ascontiguousarray(right, dtype=np.intp)
    inv_se = np.ascontiguousarray(inv_se, dtype=np.float64)
    shift = np.ascontiguousarray(shift, dtype=np.float64)
    if apart is None:
        _pair_max_cols(e_cols, left, right, inv_se, shift, near, far)
        return near, far
    far_apart = np.empty(n_draws)
    _pair_max_cols2(e_cols, left, right, inv_se, shift,
                    np.ascontiguousarray(apart, dtype=np.float64), near, far, far_apart)
    return near, far, far_apart


# ------------------------------------------------------------------------ Wilson's bounds

cdef inline double _np_min(double a, double b) noexcept nogil:
    """``np.minimum``: NaN if either is."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a <= b else b


cdef inline double _np_max(double a, double b) noexcept nogil:
    """``np.maximum``: NaN if either is."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a >= b else b


cdef inline double _np_clip01(double a) noexcept nogil:
    """``np.clip(a, 0, 1)``: NaN stays NaN."""
    if a < 0.0:
        return 0.0
    if a > 1.0:
        return 1.0
    return a


cdef inline bint _rare(double x, double n) noexcept nogil:
    """The rare-count test of ``_rate_intervals._rare_bound`` (Clopper-Pearson's bound)."""
    return x >= 1 and ((x <= 10 and x <= 0.1 * n) or x <= 2 or (x <= 3 and n > 50))


cdef bint _wilson_rows(const double[::1] x, const double[::1] n, double z, double[::1] lo,
                       double[::1] hi) noexcept nogil:
    cdef Py_ssize_t k
    cdef double z2 = z * z, p, centre, half, xk, nk
    cdef bint rare = False
    for k in range(x.shape[0]):
        xk, nk = x[k], n[k]
        p = xk / nk
        centre = (xk + z2 / 2.0) / (nk + z2)
        half = z * sqrt(xk * (nk - xk) / nk + z2 / 4.0) / (nk + z2)
        lo[k] = _np_clip01(0.0 if xk <= 0 else _np_min(centre - half, p))
        hi[k] = _np_clip01(1.0 if xk >= nk else _np_max(centre + half, p))
        rare = rare or _rare(xk, nk) or _rare(nk - xk, nk)
    return rare


def wilson_bounds(x, n, double z):
    """Wilson's score bounds of ``x / n`` at one normal quantile ``z``, and whether any count
    is rare (then :func:`~fairmonitor.metrics._rate_intervals.wilson_interval` applies its
    exact-bound fix and these bounds are not final).

    The arithmetic of ``wilson_interval``'s numpy expressions, element by element (the same
    IEEE operations in the same order: the same bounds), without its ~25 array temporaries.

    >>> lo, hi, rare = wilson_bounds(np.array([20.0]), np.array([40.0]), 1.959964)
    >>> round(float(lo[0]), 4), round(float(hi[0]), 4), rare
    (0.352, 0.648, False)
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    n = np.ascontiguousarray(n, dtype=np.float64)
    lo, hi = np.empty(x.shape), np.empty(x.shape)
    rare = _wilson_rows(x.reshape(-1), n.reshape(-1), z, lo.reshape(-1), hi.reshape(-1))
    return lo, hi, bool(rare)


cdef inline void _newcombe(double p1, double p2, double l1, double u2, double u1, double l2,
                           double* lower, double* upper) noexcept nogil:
    """Newcombe's bounds of ``p1 - p2`` from the Wilson bounds (``l1``, ``u2``: the lower's)."""
    cdef double d = p1 - p2
    lower[0] = d - hypot(p1 - l1, u2 - p2)
    upper[0] = d + hypot(u1 - p1, p2 - l2)


cdef inline void _mover_r(double p1, double p2, double l1, double u2, double u1, double l2,
                          double* lower, double* upper) noexcept nogil:
    """MOVER-R's bounds of ``p1 / p2`` from the Wilson bounds (as :func:`_newcombe`)."""
    cdef double pp = p1 * p2, qa, qc, qb, qe, low, up, ratio
    # lower root of A r^2 - 2 pp r + C, rationalized (A = u2 (2 p2 - u2) may be <= 0)
    qa, qc = u2 * (2.0 * p2 - u2), l1 * (2.0 * p1 - l1)
    low = 0.0 if qc <= 0 else qc / (pp + sqrt(_np_max(pp * pp - qa * qc, 0.0)))
    # upper root of B r^2 - 2 pp r + E, B = l2 (2 p2 - l2) > 0 when p2 > 0
    qb, qe = l2 * (2.0 * p2 - l2), u1 * (2.0 * p1 - u1)
    up = (pp + sqrt(_np_max(pp * pp - qb * qe, 0.0))) / qb if qb > 0 else INFINITY
    ratio = p1 / p2
    lower[0] = _np_min(low, ratio)
    upper[0] = _np_max(up, ratio)


cdef void _pair_score_rows(const double* p, const double* lo_l, const double* lo_u,
                           const double* up_l, const double* up_u, const Py_ssize_t[::1] fam,
                           const Py_ssize_t[::1] left, const Py_ssize_t[::1] right,
                           Py_ssize_t width, bint ratio, double[::1] lower, double[::1] upper
                           ) noexcept nogil:
    cdef Py_ssize_t k, a, b
    for k in range(fam.shape[0]):
        a, b = fam[k] * width + left[k], fam[k] * width + right[k]
        if ratio:
            _mover_r(p[a], p[b], lo_l[a], lo_u[b], up_u[a], up_l[b], &lower[k], &upper[k])
        else:
            _newcombe(p[a], p[b], lo_l[a], lo_u[b], up_u[a], up_l[b], &lower[k], &upper[k])


def pair_score_bounds(p, lo_lower, lo_upper, up_lower, up_upper, fam, left, right,
                      bint ratio):
    """Each pair's Newcombe (``ratio``: MOVER-R) bounds of ``p_fl - p_fr`` (``p_fl / p_fr``).

    ``p`` and the Wilson bounds are (families, groups) arrays; pair ``k`` is groups
    ``left[k]`` and ``right[k]`` of family ``fam[k]``. ``lo_lower``, ``lo_upper`` are
    Wilson's interval at the lower bound's quantile, ``up_lower``, ``up_upper`` at the upper
    bound's. Newcombe's hybrid score interval (1998, method 10) is
    ``d - hypot(p1 - l1, u2 - p2)`` and ``d + hypot(u1 - p1, p2 - l2)``. MOVER-R's (Donner &
    Zou 2012) bounds are the roots of its quadratics, rationalized so that they stay finite
    when ``p1`` is 0 (lower 0); with ``p2 = 0`` the upper bound is infinite; each holds the
    ratio itself. One pass over the pairs (numpy: a gather and ~20 array temporaries); the
    tests compare with the formulas in numpy, to the bit.

    >>> lo, hi = pair_score_bounds(np.array([0.5, 0.25]), np.array([0.4, 0.2]),
    ...                            np.array([0.6, 0.3]), np.array([0.4, 0.2]),
    ...                            np.array([0.6, 0.3]), [0], [0], [1], False)
    >>> [round(float(v), 4) for v in (lo[0], hi[0])]
    [0.1382, 0.3618]
    """
    arrays = [np.ascontiguousarray(a, dtype=np.float64)
              for a in (p, lo_lower, lo_upper, up_lower, up_upper)]
    cdef Py_ssize_t width = arrays[0].shape[arrays[0].ndim - 1] if arrays[0].ndim else 1
    cdef double[::1] pv = arrays[0].reshape(-1), ll = arrays[1].reshape(-1)
    cdef double[::1] lu = arrays[2].reshape(-1), ul = arrays[3].reshape(-1)
    cdef double[::1] uu = arrays[4].reshape(-1)
    cdef const Py_ssize_t[::1] f = np.ascontiguousarray(fam, dtype=np.intp)
    cdef const Py_ssize_t[::1] i = np.ascontiguousarray(left, dtype=np.intp)
    cdef const Py_ssize_t[::1] j = np.ascontiguousarray(right, dtype=np.intp)
    lower, upper = np.empty(f.shape[0]), np.empty(f.shape[0])
    if f.shape[0] and pv.shape[0]:
        _pair_score_rows(&pv[0], &ll[0], &lu[0], &ul[0], &uu[0], f, i, j, width, ratio, lower,
                         upper)
    return lower, upper


cdef void _extreme_cols(const double[:, ::1] cols, const double[::1] sd, double rate,
                        double[::1] hi, double[::1] lo) noexcept nogil:
    """Group by group over the draws (contiguous, ``a > b ? a : b``: vectorized)."""
    cdef Py_ssize_t d, k, n_draws = cols.shape[1]
    cdef const double* z
    cdef double v, w
    for d in range(n_draws):
        hi[d] = -INFINITY
        lo[d] = INFINITY
    for k in range(cols.shape[0]):
        z, w = &cols[k, 0], sd[k]
        for d in range(n_draws):
            v = _np_clip01(rate + z[d] * w)
            hi[d] = v if v > hi[d] else hi[d]
            lo[d] = v if v < lo[d] else lo[d]


def rate_extremes(cols, sd, double rate):
    """Per draw, the largest and smallest of the rates ``clip(rate + z * sd, 0, 1)``.

    The Gaussian form of binomial rates at a shared ``rate`` (the rate intervals' chance
    level): ``cols`` (groups, draws) the standard normals by group, ``sd`` (groups,) each
    group's standard error; finite inputs and at least one group (the caller's: then no NaN
    can arise). numpy's product, sum and clip, and the extremes of each draw (numpy: three
    (draws, groups) temporaries and a transpose); the same numbers.

    >>> hi, lo = rate_extremes(np.array([[1.0, 0.5], [-1.0, 2.0]]), np.array([0.1, 0.2]), 0.5)
    >>> hi.tolist(), lo.tolist()
    ([0.6, 0.9], [0.3, 0.55])
    """
    cols = np.ascontiguousarray(cols, dtype=np.float64)
    if not cols.shape[0]:
        raise ValueError("no groups: the extremes of an empty set of rates are undefined")
    hi, lo = np.empty(cols.shape[1]), np.empty(cols.shape[1])
    _extreme_cols(cols, np.ascontiguousarray(sd, dtype=np.float64), rate, hi, lo)
    return hi, lo


# ------------------------------------------------------------------ MADD's null pair gaps

cdef void _running_totals(const float[:, :, ::1] counts, double[:, :, ::1] run
                          ) noexcept nogil:
    """``run[g, d, b]``: the sum of ``counts[g, d, :b]`` from 0.0 in bin order (as ``_sum``)."""
    cdef Py_ssize_t g, d, b
    cdef double acc
    for g in range(counts.shape[0]):
        for d in range(counts.shape[1]):
            acc = 0.0
            run[g, d, 0] = acc
            for b in range(counts.shape[2]):
                acc += counts[g, d, b]
                run[g, d, b + 1] = acc


cdef void _coarse_gap_max_rows(const double[:, :, ::1] run, const Py_ssize_t[::1] left,
                               const Py_ssize_t[::1] right, const Py_ssize_t[::1] first,
                               const Py_ssize_t[::1] starts, double[::1] out) noexcept nogil:
    cdef Py_ssize_t d, k, s, lo, hi, r = run.shape[2] - 1
    cdef double acc, top, a, b, total_x, total_y
    cdef const double* x
    cdef const double* y
    for d in range(run.shape[1]):
        top = -INFINITY
        for k in range(left.shape[0]):
            x, y = &run[left[k], d, 0], &run[right[k], d, 0]
            total_x, total_y = x[r], y[r]
            acc = 0.0
            for s in range(first[k], first[k + 1]):  # the pair's segments, in slot order
                lo = starts[s]
                hi = starts[s + 1] if s + 1 < first[k + 1] else r
                a = <double>(<float>(x[hi] - x[lo])) / total_x
                b = <double>(<float>(y[hi] - y[lo])) / total_y
                acc += fabs(a - b)
            if acc > top or acc != acc:  # np.max: NaN wins
                top = acc
        out[d] = top


def coarse_gap_maxima(counts, left, right, first, starts):
    """Per draw, the largest L1 gap of the pairs' coarse histograms (MADD's null gaps).

    ``counts`` (K, draws, R) float32; pair ``k`` compares groups ``left[k]`` and ``right[k]``
    over the segments ``starts[first[k]:first[k + 1]]`` of the fine bins (its bins, in
    order). What ``coarse_curves`` of each group, ``pair_gaps`` of each pair and the maximum
    over the pairs compute, with the same float operations (an empty coarse bin adds 0).

    A segment's count is a difference of running totals (one pass per group and draw), not a
    sum of its bins per pair: the null draws are whole numbers, whose float64 sums are exact
    in any order, so each count is the same number (other counts: within rounding). The
    per-pair sums were chains of dependent additions, ~1,000 cycles a pair and draw.

    >>> c = np.array([[[1.0, 1.0, 2.0]], [[2.0, 1.0, 1.0]]], dtype=np.float32)
    >>> coarse_gap_maxima(c, [0], [1], [0, 2], [0, 2]).tolist()
    [0.5]
    """
    counts = np.ascontiguousarray(counts, dtype=np.float32)
    run = np.empty((*counts.shape[:2], counts.shape[2] + 1))
    _running_totals(counts, run)
    out = np.empty(counts.shape[1])
    _coarse_gap_max_rows(run, np.ascontiguousarray(left, dtype=np.intp),
                         np.ascontiguousarray(right, dtype=np.intp),
                         np.ascontiguousarray(first, dtype=np.intp),
                         np.ascontiguousarray(starts, dtype=np.intp), out)
    return out
