"""The intervals' compiled kernels (numba): bootstrap curves, errors, pair sums; rate maxima.

:func:`~fairmonitor.metrics._intervals.score_gap_interval` reads, per group, a (draws, bins)
array of bootstrap counts and turns it into curves, errors and per-pair sums. In numpy each
step was a pass over a block temporary (the CDF's cumulative
sum and division; MADD's ``np.add.reduceat``; ABPC's mixed-type product and division; the
error's subtraction, ``np.nan_to_num`` (four passes), cast and ``var`` (four passes); per pair
the noise, two masked copies, ``abs`` and a sum). Compiled, each is one pass that writes only
what is read again. The report's fine histogram of cells (:func:`cell_histogram`) is one pass
instead of a division, a cast, a minimum and a weighted ``np.bincount``.

**Bit for bit the numpy results.** No fast-math (LLVM neither reassociates nor fuses a
multiply-add then), every float operation is the one numpy performed, in the same order and
the same precision (float32 where the numpy code computed in float32):

* Sums along a C-ordered row (a curve's total, MADD's coarse bins, a null gap's L1 sum) are
  numpy's pairwise summation in the array's dtype (:func:`_pairwise`, MADD's walk of it:
  halves rounded down to multiples of 8 down to leaves of at most 128 terms, 8 accumulators
  per leaf); a segment of
  ``np.add.reduceat`` is its first term plus the pairwise sum of the rest; a cumulative sum
  adds in turn.
* numpy's masked copy ``noise[:, near_zero]`` is Fortran-ordered, so its sum over the bins
  adds column after column (not pairwise): :func:`pair_terms` adds them so, and hands BLAS the
  same Fortran-ordered float32 array for the product with the signs (BLAS's summation order is
  the library's: that product stays numpy's).
* Sums over the draws (the error's variance) add row after row from 0.0, as numpy reduces a
  C-ordered array over its first axis; ``var`` is the mean, then the mean squared deviation.
* Where a sum is one chain of additions, four draws are summed side by side (four
  independent chains, each in numpy's order): the latency of an addition is hidden, not the
  order changed.
* Division by zero gives IEEE's quotient (:func:`_quotient`: numba raises instead).

``tests/metrics/test_intervals.py`` keeps the numpy versions as oracles, and the whole score
interval against a numpy re-implementation of the former code path.

Imported only when a score interval is computed, so ``import fairmonitor`` does not load numba.
"""

from __future__ import annotations

import math

import numpy as np

from ._madd.compiled import _leaf, _walk
from ._numba import compiled

__all__ = ["cdf_curves", "cell_histogram", "coarse_curves", "density_curves",
           "errors", "pair_gaps", "pair_maxima", "pair_terms", "poisson_counts", "scaled"]

#: numpy's pairwise summation: leaves of at most this many terms, 8 accumulators each.
_LEAF = 128
#: Depth of :func:`_pairwise`'s explicit stack: each split halves the terms (64 holds any row).
_DEPTH = 64
_BIG = np.finfo(np.float64).max  # np.nan_to_num's replacement of +inf


@compiled
def _pairwise(a, lo, n, zero, sums, nodes):  # pragma: no cover - compiled
    """Sum ``a[lo:lo + n]`` (1-D) pairwise as numpy does, in ``a``'s dtype, to the last bit.

    MADD's walk of numpy's recursion (:func:`~._madd.compiled._walk`), with this row's
    ``zero`` and work space: one implementation of numpy's summation for every kernel.
    """
    return _walk(a, a, lo, n, False, zero, nodes, sums)


def _work(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Allocate the stack of :func:`_pairwise` for sums of ``dtype``."""
    return np.empty(_DEPTH, dtype=dtype), np.empty((3, _DEPTH), dtype=np.int64)


@compiled
def _quotient(a, b):  # pragma: no cover - compiled
    """Divide ``a / b`` in their dtype, IEEE's inf or NaN when ``b == 0`` (numba raises)."""
    if b != 0:
        return a / b
    if a != a or a == 0:
        return np.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


@compiled
def _divide(values, total, out):  # pragma: no cover - compiled
    """``out = values / total`` (1-D, may be ``values`` itself), IEEE's quotient at 0.

    The test is made once, not per value: the loop without a branch vectorizes.
    """
    if total != 0:
        for j in range(out.size):
            out[j] = values[j] / total
    else:
        for j in range(out.size):
            out[j] = _quotient(values[j], total)


@compiled
def _first_at_least(table, lo, hi, u):  # pragma: no cover - compiled
    """Find the smallest ``k`` in ``[lo, hi]`` with ``table[k] >= u`` (``hi`` if none).

    The inverse CDF over a non-decreasing table, by bisection.
    """
    while lo < hi:
        mid = (lo + hi) // 2
        if table[mid] >= u:
            hi = mid
        else:
            lo = mid + 1
    return lo


@compiled
def _poisson_rows(lam, mode, pmf, cdf, uniforms, table, out):  # pragma: no cover
    """Each draw's count, the smallest ``k`` with ``u <= F(k)``, over the bin's CDF table.

    The table is built once per bin from the mode, down ``F(k - 1) = F(k) - p(k)``, ``p(k -
    1) = p(k) (k / rate)`` until it falls below the bin's smallest uniform, and up ``p(k) =
    p(k - 1) (rate / k)``, ``F(k) = F(k - 1) + p(k)`` until it reaches the largest; then each
    draw bisects it. The same table values and the same inverse as a walk from the mode per
    draw (which cost ``~sqrt(rate)`` steps a draw: 60 at a bin of 4,000 rows), so the same
    counts, bit for bit.
    """
    n_draws, r = uniforms.shape
    for b in range(r):
        rate = lam[b]
        if rate <= 0.0 or rate != rate:  # none (NaN: no count, as the walk gave)
            for d in range(n_draws):
                out[d, b] = 0.0 if rate <= 0.0 else rate
            continue
        # 8 standard deviations from the mode (probability < 1e-15) the table stops: only a
        # u within the CDF's round-off of 0 or 1 gets there
        bottom = math.floor(max(mode[b] - 8.0 * math.sqrt(rate) - 40.0, 0.0))
        last = int(math.ceil(mode[b] + 8.0 * math.sqrt(rate) + 40.0) - bottom)
        at = int(mode[b] - bottom)
        u_min, u_max = 1.0, 0.0
        for d in range(n_draws):
            u_min = min(u_min, uniforms[d, b])
            u_max = max(u_max, uniforms[d, b])
        table[at] = cdf[b]
        low, k_low, p_low = at, mode[b], pmf[b]
        while low > 0 and u_min <= table[low]:
            table[low - 1] = table[low] - p_low
            p_low *= k_low / rate
            k_low -= 1.0
            low -= 1
        high, k_high, p_high = at, mode[b], pmf[b]
        while high < last and u_max > table[high]:
            k_high += 1.0
            p_high *= rate / k_high
            table[high + 1] = table[high] + p_high
            high += 1
        for d in range(n_draws):
            u = uniforms[d, b]
            if rate < 64.0:  # a few steps from the mode: walk them (cheaper than bisecting)
                k = at
                while k > low and u <= table[k - 1]:
                    k -= 1
                while k < high and u > table[k]:
                    k += 1
            elif u <= table[at]:
                k = _first_at_least(table, low, at, u)
            else:
                k = _first_at_least(table, at + 1, high, u)
            out[d, b] = bottom + k


def poisson_counts(lam: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Poisson(``lam[b]``) draws by inversion of ``uniforms`` (draws, R), as float32 counts.

    The inverse CDF walked from the mode, where the pmf and CDF are exact (log-gamma and the
    regularized incomplete gamma), each step's value computed
    once per bin, not once per draw; a third of numpy's per-element
    Poisson (which redoes its PTRS set-up for every element of a varying ``lam``). Whole
    counts, never negative.
    """
    from scipy import special

    lam = np.asarray(lam, dtype=np.float64)
    mode = np.floor(lam)
    with np.errstate(divide="ignore", invalid="ignore"):
        pmf = np.exp(mode * np.log(lam) - lam - special.gammaln(mode + 1.0))
    cdf = special.pdtr(mode, lam)
    out = np.empty(uniforms.shape, dtype=np.float32)
    finite = lam[np.isfinite(lam)]
    # the walk spans at most 16 sqrt(lam) + 82 counts (bottom clipped at 0: below that)
    table = np.empty(int(16.0 * math.sqrt(max(finite.max(initial=0.0), 0.0))) + 100)
    _poisson_rows(lam, mode, pmf, cdf, uniforms, table, out)
    return out


@compiled
def _scaled_rows(x, factor, out):  # pragma: no cover - compiled
    for d in range(x.shape[0]):
        for b in range(x.shape[1]):
            out[d, b] = np.float64(x[d, b]) * factor[b]


def scaled(x: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """``x * factor`` in float64, for 2-D ``x`` and one factor per column.

    numpy's mixed-type product casts ``x`` through a buffer: ~5x slower.
    """
    out = np.empty(x.shape)
    _scaled_rows(x, factor, out)
    return out


@compiled
def _cdf_rows(counts, out, zero, sums, nodes):  # pragma: no cover - compiled
    n_draws, r = counts.shape
    if r < 2:
        return
    quad = n_draws - n_draws % 4
    for d in range(0, quad, 4):  # four running sums at a time: independent addition chains
        c0, c1, c2, c3 = counts[d, 0], counts[d + 1, 0], counts[d + 2, 0], counts[d + 3, 0]
        out[d, 0], out[d + 1, 0], out[d + 2, 0], out[d + 3, 0] = c0, c1, c2, c3
        for b in range(1, r - 1):
            c0 += counts[d, b]
            c1 += counts[d + 1, b]
            c2 += counts[d + 2, b]
            c3 += counts[d + 3, b]
            out[d, b], out[d + 1, b], out[d + 2, b], out[d + 3, b] = c0, c1, c2, c3
    for d in range(quad, n_draws):
        c = counts[d, 0]
        out[d, 0] = c
        for b in range(1, r - 1):
            c += counts[d, b]
            out[d, b] = c
    for d in range(n_draws):  # then each running sum over the row's total, in place
        row = out[d, :r - 1]
        _divide(row, _pairwise(counts[d], 0, r, zero, sums, nodes), row)


def cdf_curves(counts: np.ndarray) -> np.ndarray:
    """``np.cumsum(counts, axis=-1)[:, :-1] / counts.sum(axis=-1, keepdims=True)`` (2-D)."""
    out = np.empty((counts.shape[0], counts.shape[1] - 1), dtype=counts.dtype)
    _cdf_rows(counts, out, counts.dtype.type(0), *_work(counts.dtype))
    return out


@compiled
def _coarse_rows(counts, starts, slots, out, zero, sums, nodes):  # pragma: no cover
    n_draws, r = counts.shape
    out[:] = 0.0
    quad = n_draws - n_draws % 4
    for d in range(0, quad, 4):  # four rows at a time: a short segment's sums are 4 chains
        a, b, c, e = counts[d], counts[d + 1], counts[d + 2], counts[d + 3]
        for k in range(starts.size):  # np.add.reduceat: the first term, then the rest's sum
            lo = starts[k] + 1
            n = (starts[k + 1] if k + 1 < starts.size else r) - lo
            va, vb, vc, ve = a[lo - 1], b[lo - 1], c[lo - 1], e[lo - 1]
            if n >= 8:  # leaves (8 accumulators each) or the tree: one row at a time
                if n <= _LEAF:  # called directly: a call with the stack costs ~40 ns
                    va += _leaf(a, lo, n, zero)
                    vb += _leaf(b, lo, n, zero)
                    vc += _leaf(c, lo, n, zero)
                    ve += _leaf(e, lo, n, zero)
                else:
                    va += _pairwise(a, lo, n, zero, sums, nodes)
                    vb += _pairwise(b, lo, n, zero, sums, nodes)
                    vc += _pairwise(c, lo, n, zero, sums, nodes)
                    ve += _pairwise(e, lo, n, zero, sums, nodes)
            elif n > 0:  # numpy's short sum: from 0, term after term
                ra, rb, rc, re = zero, zero, zero, zero
                for i in range(lo, lo + n):
                    ra += a[i]
                    rb += b[i]
                    rc += c[i]
                    re += e[i]
                va += ra
                vb += rb
                vc += rc
                ve += re
            j = slots[k]
            out[d, j], out[d + 1, j], out[d + 2, j], out[d + 3, j] = va, vb, vc, ve
    for d in range(quad, n_draws):
        row = counts[d]
        for k in range(starts.size):
            lo = starts[k] + 1
            n = (starts[k + 1] if k + 1 < starts.size else r) - lo
            v = row[lo - 1]
            if n > _LEAF:
                v += _pairwise(row, lo, n, zero, sums, nodes)
            elif n > 0:
                v += _leaf(row, lo, n, zero)
            out[d, slots[k]] = v
    for d in range(n_draws):  # then over each row's total, in float64
        _divide(out[d], np.float64(_pairwise(counts[d], 0, r, zero, sums, nodes)), out[d])


def coarse_curves(counts: np.ndarray, starts: np.ndarray, slots: np.ndarray,
                  m: int) -> np.ndarray:
    """MADD's coarse histograms as probabilities, float64 (2-D ``counts``).

    ``coarse = zeros((D, m)); coarse[:, slots] = np.add.reduceat(counts, starts, axis=-1)``,
    divided by ``counts.sum(axis=-1, keepdims=True)``.
    """
    out = np.empty((counts.shape[0], m))
    _coarse_rows(counts, starts, slots, out, counts.dtype.type(0), *_work(counts.dtype))
    return out


@compiled
def _density_rows(dens, counts, out, zero, sums, nodes):  # pragma: no cover - compiled
    r = counts.shape[1]
    for d in range(counts.shape[0]):
        _divide(dens[d], np.float64(_pairwise(counts[d], 0, r, zero, sums, nodes)), out[d])


def density_curves(dens: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``dens / counts.sum(axis=-1, keepdims=True)`` (2-D, float64 ``dens``)."""
    out = np.empty(dens.shape)
    _density_rows(dens, counts, out, counts.dtype.type(0), *_work(counts.dtype))
    return out


@compiled
def _error_rows(curves, totals, hat, err, var):  # pragma: no cover - compiled
    n_draws, g = curves.shape
    x = np.empty((n_draws, g))
    total = np.zeros(g)
    for d in range(n_draws):
        for b in range(g):
            c = np.float64(curves[d, b])
            if totals is not None:  # compiled away without totals
                c = _quotient(c, totals[d])
            v = c - hat[b]
            if v != v:  # np.nan_to_num
                v = 0.0
            elif v == math.inf:
                v = _BIG
            elif v == -math.inf:
                v = -_BIG
            x[d, b] = v
            err[d, b] = v
            total[b] += v  # the draws' sum per bin, row after row as numpy's axis-0 sum
    mean = total / n_draws
    squares = np.zeros(g)
    for d in range(n_draws):
        for b in range(g):
            dev = x[d, b] - mean[b]
            squares[b] += dev * dev
    for b in range(g):
        var[b] = squares[b] / n_draws


def errors(curves: np.ndarray, hat: np.ndarray, counts: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """``e = np.nan_to_num(curves - hat)``: ``(e.astype(float32), e.var(axis=0))``.

    With ``counts``, the curves are ``curves / counts.sum(axis=-1, keepdims=True)`` (ABPC's
    densities, :func:`density_curves`), without an array of them.
    """
    err = np.empty(curves.shape, dtype=np.float32)
    var = np.empty(curves.shape[1])
    totals = None
    if counts is not None:
        totals = np.empty(counts.shape[0])
        _row_totals(counts, totals, counts.dtype.type(0), *_work(counts.dtype))
    _error_rows(curves, totals, hat, err, var)
    return err, var


@compiled
def _row_totals(counts, out, zero, sums, nodes):  # pragma: no cover - compiled
    for d in range(counts.shape[0]):
        out[d] = _pairwise(counts[d], 0, counts.shape[1], zero, sums, nodes)


@compiled
def _pair_rows(hat_i, hat_j, var_i, var_j, err_i, err_j, kappa, sums, nodes):  # pragma: no cover
    g = hat_i.size
    gap = np.empty(g)
    near = np.empty(g, dtype=np.bool_)
    n_near = 0
    for b in range(g):
        d_hat = hat_i[b] - hat_j[b]
        gap[b] = abs(d_hat)
        se = math.sqrt(var_i[b] + var_j[b])
        floor = se if (se != se or se > 1e-12) else 1e-12  # np.maximum: NaN propagates
        near[b] = gap[b] <= kappa * floor
        n_near += near[b]
    value = _pairwise(gap, 0, g, 0.0, sums, nodes)
    near_idx = np.empty(n_near, dtype=np.intp)
    settled_idx = np.empty(g - n_near, dtype=np.intp)
    sign = np.empty(g - n_near, dtype=np.float32)
    a = b2 = 0
    for b in range(g):
        if near[b]:
            near_idx[a] = b
            a += 1
        else:
            settled_idx[b2] = b
            d_hat = hat_i[b] - hat_j[b]
            sign[b2] = 1.0 if d_hat > 0 else (-1.0 if d_hat < 0 else (0.0 if d_hat == 0
                                                                       else np.nan))
            b2 += 1
    n_draws = err_i.shape[0]
    folded = np.zeros(n_draws, dtype=np.float32)
    settled = np.empty((g - n_near, n_draws), dtype=np.float32)  # transposed: Fortran order
    zero = np.float32(0.0)
    for d in range(0, n_draws - n_draws % 4, 4):
        # column after column, as numpy reduces a Fortran array; four draws at a time, so
        # that four independent sums hide the latency of each addition
        a0, a1, a2, a3 = zero, zero, zero, zero
        for k in range(n_near):
            b = near_idx[k]
            a0 += abs(err_i[d, b] - err_j[d, b])
            a1 += abs(err_i[d + 1, b] - err_j[d + 1, b])
            a2 += abs(err_i[d + 2, b] - err_j[d + 2, b])
            a3 += abs(err_i[d + 3, b] - err_j[d + 3, b])
        folded[d], folded[d + 1], folded[d + 2], folded[d + 3] = a0, a1, a2, a3
    for d in range(n_draws - n_draws % 4, n_draws):
        for k in range(n_near):
            b = near_idx[k]
            folded[d] += abs(err_i[d, b] - err_j[d, b])
    for k in range(g - n_near):
        b = settled_idx[k]
        for d in range(n_draws):
            settled[k, d] = err_i[d, b] - err_j[d, b]
    # each draw's change of the L1 sum, sum |d + noise| - |d| (the bootstrap's value minus
    # the hat, for the upper bound), in float64 bin after bin
    moved = np.zeros(n_draws)
    for b in range(g):
        d_hat = hat_i[b] - hat_j[b]
        for d in range(n_draws):
            moved[d] += abs(d_hat + np.float64(err_i[d, b] - err_j[d, b])) - abs(d_hat)
    return folded, settled.T, sign, value, moved


def pair_terms(hat_i: np.ndarray, hat_j: np.ndarray, var_i: np.ndarray, var_j: np.ndarray,
               err_i: np.ndarray, err_j: np.ndarray, kappa: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, np.ndarray]:
    """Compute a pair's derivative terms: ``(folded, settled, sign, value, signed)``.

    With ``d = hat_i - hat_j``, ``noise = err_i - err_j`` and ``near = |d| <= kappa *
    max(sqrt(var_i + var_j), 1e-12)``: ``folded = |noise[:, near]|.sum(axis=1)`` (float32),
    ``settled = noise[:, ~near]``, ``sign = sign(d[~near])`` as float32, ``value =
    |d|.sum()`` and ``moved = (|d + noise| - |d|)`` summed over the bins in turn (float64;
    ``noise`` cast from float32). The derivative is ``folded + settled @ sign``; ``moved`` is
    each bootstrap draw's value minus the hat's.

    numpy's masked copy along the second axis is Fortran-ordered: its sum adds the columns in
    turn (not pairwise) and BLAS multiplies it column-major, so ``settled`` is the same
    Fortran-ordered array (BLAS then sums in the same order).
    """
    folded, settled, sign, value, moved = _pair_rows(
        hat_i, hat_j, var_i, var_j, err_i, err_j, float(kappa), *_work(np.dtype(np.float64)))
    return folded, settled, sign, float(value), moved


@compiled
def _gap_rows(a, b, out, zero, sums, nodes):  # pragma: no cover - compiled
    g = a.shape[1]
    buf = np.empty(g, dtype=a.dtype)
    for d in range(a.shape[0]):
        for k in range(g):
            buf[k] = abs(a[d, k] - b[d, k])
        out[d] = zero + _pairwise(buf, 0, g, zero, sums, nodes)


def pair_gaps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.abs(a - b).sum(axis=1)`` of two (draws, G) curves of one dtype."""
    out = np.empty(a.shape[0], dtype=a.dtype)
    _gap_rows(a, b, out, a.dtype.type(0), *_work(a.dtype))
    return out


@compiled
def _cells_into(count, total, res, out):  # pragma: no cover - compiled
    # cells come in score order, so runs of them share a bin: the bin's running sum stays in
    # a register for the run (the same additions in the same order as bincount's)
    current, running = -1, 0.0
    for k in range(count.size):
        b = min(int(total[k] / count[k] * res), res - 1)
        if b < 0:
            raise ValueError("a cell's mean score is negative")
        if b != current:
            if current >= 0:
                out[current] = running
            current, running = b, out[b]
        running += count[k]
    if current >= 0:
        out[current] = running


def cell_histogram(count: np.ndarray, total: np.ndarray, res: int) -> np.ndarray:
    """Fine histogram of cells (each at its mean score ``total / count``), float64.

    ``np.bincount(np.minimum((total / count * res).astype(np.intp), res - 1), weights=count,
    minlength=res)``: each bin adds its cells' counts in order from 0.0.
    """
    out = np.zeros(res)
    _cells_into(np.asarray(count), np.asarray(total, dtype=np.float64), res, out)
    return out


@compiled
def _pair_max_rows(z, scale, left, right, se, shift, near, far):  # pragma: no cover
    n_draws, pairs = z.shape[0], left.size
    for d in range(n_draws):
        top, top_shifted = -np.inf, -np.inf
        for k in range(pairs):
            t = (z[d, left[k]] * scale[left[k]] - z[d, right[k]] * scale[right[k]]) / se[k]
            if t > top or t != t:  # np.max: NaN wins
                top = t
            s = t - shift[k]
            if s > top_shifted or s != s:
                top_shifted = s
        near[d], far[d] = top, top_shifted


def pair_maxima(z: np.ndarray, scale: np.ndarray, left: np.ndarray, right: np.ndarray,
                se: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per draw ``max_k T_k`` and ``max_k (T_k - shift_k)``, the rate intervals' joint maxima.

    ``T_k = (e_l - e_r) / se_k`` and ``e = z * scale`` (the joint critical value of
    :mod:`._rate_intervals`).

    numpy's ``draws = z * scale``, the two gathers, the difference, the division, ``t - shift``
    and the two maxima each made a (draws, pairs) temporary; here one pass, the same float
    operations in the same order (bit for bit numpy's).

    >>> z = np.array([[1.0, -1.0], [0.5, 2.0]])
    >>> near, far = pair_maxima(z, np.ones(2), np.array([0, 1]), np.array([1, 0]),
    ...                         np.full(2, 2.0), np.array([0.0, 1.0]))
    >>> near.tolist(), far.tolist()
    ([1.0, 0.75], [1.0, -0.25])
    """
    near, far = np.empty(z.shape[0]), np.empty(z.shape[0])
    _pair_max_rows(z, scale, left.astype(np.intp), right.astype(np.intp),
                   np.ascontiguousarray(se, dtype=np.float64),
                   np.ascontiguousarray(shift, dtype=np.float64), near, far)
    return near, far
