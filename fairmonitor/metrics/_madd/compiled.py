"""MADD's compiled kernels (numba): "auto"'s curve and interval search, fixed-bandwidth bins.

A pair of groups costs two things whatever the rows: the MADD curve (one sum per bin count
``m``, 499 of them) and Algorithm 1's search over every interval ``[i, j]`` of the curve
(~10^5 intervals). In numpy the search is a dozen passes over an ``N x N`` table (~10 ms a
pair, 95% of a 10^4-row window with an intersection of 10 groups) and the curve 499 Python-level
``np.sum`` calls (~1 ms). Compiled, both are one pass over registers, well under 1 ms.

**Bit for bit the numpy results.** No fast-math (LLVM neither reassociates nor fuses a
multiply-add then); :func:`_pairwise_sum` is numpy's own pairwise summation (8 accumulators,
blocks of 128, halves rounded to multiples of 8, started from the identity 0.0), so each curve
value is the bits ``np.sum`` gives for that slice, i.e. the bits of a fixed-bandwidth
:func:`~fairmonitor.metrics.madd` call; the search runs the same operations on each interval
in the same order as the former numpy table (a cumulative sum of ``values - values[i]`` and of
its square from ``i``, divided by the size, mean squared subtracted), so the chosen interval and
its standard deviation are unchanged. ``tests/metrics/test_madd.py`` keeps the numpy versions
as oracles.

A fixed bandwidth costs one pass over the rows: :func:`histograms_by_group` bins every score
with ``np.histogram``'s rule (the counts are numpy's to the last row, edge ties included) at its
group's offset, instead of splitting the scores by group and histogramming each part (numpy's
histogram alone makes ~8 passes over block temporaries).

numba is already a dependency (HFM's ApproxDist); this module is imported only when a MADD
``"auto"`` pair is evaluated or a fixed-bandwidth MADD bins many rows, so ``import fairmonitor``
does not load numba.
"""

from __future__ import annotations

import numba
import numpy as np


def _compiled(func):  # type: ignore[no-untyped-def]
    """``numba.njit``, caching the machine code on disk where it can (as ``_hfm.accele``)."""
    try:
        return numba.njit(cache=True, nogil=True)(func)
    except RuntimeError:  # no writable cache location: compile once per process instead
        return numba.njit(nogil=True)(func)


@_compiled
def _pairwise_sum(a, lo, n):  # pragma: no cover - compiled
    """``np.sum(a[lo:lo + n])`` with numpy's pairwise summation, to the last bit."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    if n <= 128:
        r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
        r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
        i = 8
        end = n - (n % 8)
        while i < end:
            r0 += a[lo + i]
            r1 += a[lo + i + 1]
            r2 += a[lo + i + 2]
            r3 += a[lo + i + 3]
            r4 += a[lo + i + 4]
            r5 += a[lo + i + 5]
            r6 += a[lo + i + 6]
            r7 += a[lo + i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += a[lo + i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_sum(a, lo, n2) + _pairwise_sum(a, lo + n2, n - n2)


@_compiled
def bin_counts(below, lo, hi):  # pragma: no cover - compiled
    """``below[hi] - below[lo]``: every bin's count of every m, without two gathered copies."""
    out = np.empty(lo.size, dtype=np.int64)
    for k in range(lo.size):
        out[k] = below[hi[k]] - below[lo[k]]
    return out


@_compiled
def madd_curve(share_a, share_b, start, stop, scratch):  # pragma: no cover - compiled
    """MADD at every bin count of the grid: ``np.sum(|d_a - d_b|)`` over each m's bins.

    ``share_*`` are a group's bin proportions ``counts / n`` (computed once per group, the
    bits of numpy's division); ``scratch`` (as long) receives the per-bin terms.
    """
    for k in range(share_a.size):
        scratch[k] = abs(share_a[k] - share_b[k])
    curve = np.empty(start.size)
    for q in range(start.size):
        # 0.0 + ...: numpy's add.reduce starts from the identity
        curve[q] = 0.0 + _pairwise_sum(scratch, start[q], stop[q] - start[q])
    return curve


@_compiled
def _row(values, i, first, n, skip_above, out):  # pragma: no cover - compiled
    """Variances of ``values[i..j]`` into ``out[j]`` for ``j < n``, the table's arithmetic.

    Returns the row's smallest variance over ``j >= first``, or +inf without finishing the row
    when no such interval can come within ``skip_above``: every interval ``[i, j]`` holds
    ``[i, first]``, and the squared deviations of a superset from its own mean are at least
    those of the subset from its own, so ``var[i..j] >= var[i..first] * (first + 1 - i) /
    (n - i)``. The margin absorbs the round-off of the two computed variances (values <= 2).
    """
    vi = values[i]
    s1 = 0.0
    s2 = 0.0
    smallest = np.inf
    for j in range(i, n):
        d = values[j] - vi
        s1 += d
        s2 += d * d
        size = np.float64(j + 1 - i)
        m1 = s1 / size
        var = s2 / size - m1 * m1
        out[j] = var
        if j >= first:
            if j == first:
                floor = var * (size / np.float64(n - i))
                if floor - (1e-9 * abs(floor) + 1e-13) > skip_above:
                    return np.inf
            if var < smallest:
                smallest = var
    return smallest


@_compiled
def stable_interval_search(values, first_end, tie):  # pragma: no cover - compiled
    """``(row, col, variance)`` of the first interval within ``tie`` of the smallest std.

    Start ``i`` runs over ``first_end``'s indices, end ``j`` from ``first_end[i]`` to the last
    point; the smallest variance is found first, then the first interval (row-major) whose
    variance is at most ``(sqrt(best) + tie)**2``, exactly as the numpy table did. Rows that
    cannot come within the tie bound of the best so far are cut short (see :func:`_row`); the
    answer lies in the first row whose smallest variance is within the final bound.
    """
    n = values.size
    row_var = np.empty(n)
    row_min = np.full(first_end.size, np.inf)
    best = np.inf
    # last start first: MADD flattens towards large h, so a small variance turns up early
    # and prunes most of the long rows of small h (the answer does not depend on the order)
    for i in range(first_end.size - 1, -1, -1):
        if first_end[i] >= n:
            continue
        bound = (np.sqrt(max(best, 0.0)) + tie) ** 2
        row_min[i] = _row(values, i, first_end[i], n, bound, row_var)
        if row_min[i] < best:
            best = row_min[i]
    bound = (np.sqrt(max(best, 0.0)) + tie) ** 2
    for i in range(first_end.size):
        if row_min[i] <= bound:
            _row(values, i, first_end[i], n, np.inf, row_var)
            for j in range(first_end[i], n):
                if row_var[j] <= bound:
                    return i, j, row_var[j]
    return -1, -1, np.inf  # unreachable when some first_end < n


#: A row whose ``x * m`` lies this far from an integer is in bin ``floor(x * m)`` without
#: comparing it to the edges: numpy's corrections need ``x`` on the other side of an edge, and
#: the rounding of ``x * m`` and of the edges moves them by at most ``~4e-16 * m`` bins.
_EDGE_MARGIN = 1e-6


@_compiled
def histograms_by_group(scores, codes, m, k, edges):  # pragma: no cover - compiled
    """``np.histogram(scores[codes == g], bins=m, range=(0, 1))[0]`` for every group ``g < k``.

    One pass, no split: each row's bin by numpy's uniform-bin rule (``x * m`` truncated, the
    last bin closed at 1, then one step down if ``x < edges[j]`` and one step up if ``x >=
    edges[j + 1]`` except in the last bin, with ``edges = np.linspace(0, 1, m + 1)``), counted
    at ``code * m + bin``; rows with a negative code (excluded groups) are skipped. Scores must
    lie in [0, 1] and ``m <= 10**6`` (any ``m`` below ~10^9 keeps the margin argument exact).

    The edge comparisons run only for rows with ``x * m`` within ``_EDGE_MARGIN`` of an integer
    (where a correction can apply); elsewhere the truncation is numpy's bin. Unsigned indices:
    numba adds no negative-index wraparound to the loads.
    """
    um = np.uintp(m)
    last = um - np.uintp(1)
    fm = np.float64(m)
    lo = _EDGE_MARGIN
    hi = 1.0 - _EDGE_MARGIN
    counts = np.zeros(k * m, dtype=np.int64)
    for i in range(scores.size):
        c = codes[i]
        if c < 0:
            continue
        x = scores[i]
        t = x * fm  # (x - 0) / (1 - 0) * m: numpy's float64 arithmetic, bit for bit
        j = np.uintp(t)
        f = t - np.float64(j)  # exact: the fractional part of t
        if not (lo < f < hi):  # near an edge (or x == 1): numpy's corrections, exactly
            if j == um:
                j = last
            if x < edges[j]:
                j -= np.uintp(1)
            if j != last and x >= edges[j + np.uintp(1)]:
                j += np.uintp(1)
        counts[np.uintp(c) * um + j] += 1
    return counts.reshape(k, m)
