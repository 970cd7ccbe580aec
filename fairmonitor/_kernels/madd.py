"""MADD's compiled kernels (numba): "auto"'s groups and pairs, fixed-bandwidth bins.

"auto" works on a grid of ~125k bins (every bin of every ``m`` in 1..499). A group costs two
passes: :func:`edges_below` locates the ~79k distinct edges among its sorted scores by a
galloping merge walk (O(E + n), not a binary search per edge), and :func:`bin_shares` turns the
positions into every bin's share ``count / n`` in one pass. A pair costs one call,
:func:`auto_pair`: the MADD curve (one pairwise sum of ``|share_a - share_b|`` per ``m``, no
array of gaps), Algorithm 1's search over every interval ``[i, j]`` of the curve
(:func:`stable_interval_search`), the mean over the interval and its null terms. Per pair the
numpy steps cost more in call overhead than in arithmetic, hence the single call.

The search skips most of the ~10^5 intervals: a row (start ``i``) whose shortest interval
``[i, first]`` already has too many squared deviations cannot hold the answer, and a prefix-sum
floor of them (:func:`_deviations_floor`, with a bound on its round-off) tells so in O(1);
only the remaining rows (a few dozen) are computed, with the table's arithmetic.

**Bit for bit the numpy results.** No fast-math (LLVM neither reassociates nor fuses a
multiply-add then); :func:`_tree_sum` is numpy's own pairwise summation (8 accumulators,
blocks of 128, halves rounded to multiples of 8, started from the identity 0.0), so each curve
value is the bits ``np.sum`` gives for that slice, i.e. the bits of a fixed-bandwidth
:func:`~fairmonitor.metrics.madd` call; the shares are numpy's IEEE division ``counts / n``;
the search runs the same operations on each interval it computes in the same order as the
former numpy table (a cumulative sum of ``values - values[i]`` and of its square from ``i``,
divided by the size, mean squared subtracted), so the chosen interval and its standard
deviation are unchanged; the mean is ``np.mean``'s (the pairwise sum over the size) and the
null terms ``np.add.reduceat``'s (each segment's first term plus the pairwise sum of the rest).
``tests/metrics/test_madd.py`` keeps the numpy versions as oracles.

A fixed bandwidth costs one pass over the rows: :func:`histograms_by_group` bins every score
with ``np.histogram``'s rule (the counts are numpy's to the last row, edge ties included) at its
group's offset, instead of splitting the scores by group and histogramming each part (numpy's
histogram alone makes ~8 passes over block temporaries).

numba is already a dependency (HFM's ApproxDist); this module is imported only when a MADD
``"auto"`` pair is evaluated or a fixed-bandwidth MADD bins many rows, so ``import fairmonitor``
does not load numba.
"""

from __future__ import annotations

import numpy as np

from . import compiled


@compiled
def _leaf(a, lo, n, zero):  # pragma: no cover - compiled
    """Sum ``n <= 128`` values as numpy does: 8 accumulators, then the rest in turn.

    In the dtype of ``a`` and ``zero`` (the empty sum: numpy sums float32 in float32). Unsigned
    indices: numba adds no negative-index wraparound to the loads (~30% faster).
    """
    i = np.uintp(lo)
    stop = np.uintp(lo + n)
    if n < 8:
        res = zero
        while i < stop:
            res += a[i]
            i += np.uintp(1)
        return res
    r0, r1, r2, r3 = a[i], a[i + np.uintp(1)], a[i + np.uintp(2)], a[i + np.uintp(3)]
    r4, r5, r6, r7 = a[i + np.uintp(4)], a[i + np.uintp(5)], a[i + np.uintp(6)], a[i + np.uintp(7)]
    i += np.uintp(8)
    end = stop - np.uintp(n % 8)
    while i < end:
        r0 += a[i]
        r1 += a[i + np.uintp(1)]
        r2 += a[i + np.uintp(2)]
        r3 += a[i + np.uintp(3)]
        r4 += a[i + np.uintp(4)]
        r5 += a[i + np.uintp(5)]
        r6 += a[i + np.uintp(6)]
        r7 += a[i + np.uintp(7)]
        i += np.uintp(8)
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < stop:
        res += a[i]
        i += np.uintp(1)
    return res


@compiled
def _block_sum(a, lo, n):  # pragma: no cover - compiled
    """:func:`_leaf` of float64 values."""
    return _leaf(a, lo, n, 0.0)


@compiled
def _gap(a, b, i):  # pragma: no cover - compiled
    """One MADD term ``|a[i] - b[i]|``."""
    return abs(a[i] - b[i])


@compiled
def _gap_leaf(a, b, lo, n, zero):  # pragma: no cover - compiled
    """:func:`_leaf` of the gaps ``|a - b|``, without an array of them."""
    i = np.uintp(lo)
    stop = np.uintp(lo + n)
    if n < 8:
        res = zero
        while i < stop:
            res += _gap(a, b, i)
            i += np.uintp(1)
        return res
    r0, r1 = _gap(a, b, i), _gap(a, b, i + np.uintp(1))
    r2, r3 = _gap(a, b, i + np.uintp(2)), _gap(a, b, i + np.uintp(3))
    r4, r5 = _gap(a, b, i + np.uintp(4)), _gap(a, b, i + np.uintp(5))
    r6, r7 = _gap(a, b, i + np.uintp(6)), _gap(a, b, i + np.uintp(7))
    i += np.uintp(8)
    end = stop - np.uintp(n % 8)
    while i < end:
        r0 += _gap(a, b, i)
        r1 += _gap(a, b, i + np.uintp(1))
        r2 += _gap(a, b, i + np.uintp(2))
        r3 += _gap(a, b, i + np.uintp(3))
        r4 += _gap(a, b, i + np.uintp(4))
        r5 += _gap(a, b, i + np.uintp(5))
        r6 += _gap(a, b, i + np.uintp(6))
        r7 += _gap(a, b, i + np.uintp(7))
        i += np.uintp(8)
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < stop:
        res += _gap(a, b, i)
        i += np.uintp(1)
    return res


#: Depth of the explicit stack of :func:`_tree_sum`: each split at least halves ``n`` up to 8
#: summands, so 64 levels hold any array.
_DEPTH = 64


@compiled
def _stack():  # pragma: no cover - compiled
    """Work space of :func:`_tree_sum` (allocated once by its callers, not once per sum)."""
    return np.empty((3, _DEPTH), dtype=np.int64), np.empty(_DEPTH)


@compiled
def _walk(a, b, lo, n, gap, zero, nodes, sums):  # pragma: no cover - compiled
    """Sum ``a[lo:lo + n]`` (or ``|a - b|``) by numpy's pairwise summation, to the last bit.

    numpy splits ``n > 128`` summands at ``n // 2`` rounded down to a multiple of 8 and adds
    the two halves' sums; blocks of at most 128 are :func:`_leaf` (:func:`_gap_leaf`). The
    sums are in the dtype of ``a``, ``zero`` and ``sums`` (float32 sums float32, as numpy;
    the intervals' bootstrap rows are float32). The recursion runs on an explicit stack
    (``nodes``: start, size, halves pushed; ``sums``: the finished sums): numba's on-disk
    cache mishandles a recursive function reached along two call paths (a segmentation fault
    when the cached caller loads).
    """
    if n <= 128:
        return _gap_leaf(a, b, lo, n, zero) if gap else _leaf(a, lo, n, zero)
    half = n // 2
    half -= half % 8
    if n - half <= 128:  # two blocks (most m up to ~240): no stack
        if gap:
            return _gap_leaf(a, b, lo, half, zero) + _gap_leaf(a, b, lo + half, n - half, zero)
        return _leaf(a, lo, half, zero) + _leaf(a, lo + half, n - half, zero)
    top, done = 0, 0  # nodes[:, :top + 1] pending (start, size, halves pushed); sums[:done]
    nodes[0, 0], nodes[1, 0], nodes[2, 0] = lo, n, 0
    while top >= 0:
        start, m = nodes[0, top], nodes[1, top]
        if m <= 128:
            sums[done] = _gap_leaf(a, b, start, m, zero) if gap else _leaf(a, start, m, zero)
            done += 1
            top -= 1
            continue
        half = m // 2
        half -= half % 8
        pushed = nodes[2, top]
        nodes[2, top] = pushed + 1
        if pushed < 2:  # the left half, then the right half
            top += 1
            nodes[0, top] = start if pushed == 0 else start + half
            nodes[1, top] = half if pushed == 0 else m - half
            nodes[2, top] = 0
        else:  # both halves summed: left + right, as numpy returns them
            done -= 1
            sums[done - 1] = sums[done - 1] + sums[done]
            top -= 1
    return sums[0]


@compiled
def _tree_sum(a, b, lo, n, gap, stack):  # pragma: no cover - compiled
    """:func:`_walk` of float64 values, on the work space ``stack`` (:func:`_stack`)."""
    nodes, sums = stack
    return _walk(a, b, lo, n, gap, 0.0, nodes, sums)


@compiled
def _pairwise_sum(a, lo, n):  # pragma: no cover - compiled
    """``np.sum(a[lo:lo + n])`` with numpy's pairwise summation, to the last bit."""
    if n <= 128:  # no work space needed
        return _block_sum(a, lo, n)
    return _tree_sum(a, a, lo, n, False, _stack())


@compiled
def edges_below(sorted_scores, edges, below):  # pragma: no cover - compiled
    """``np.searchsorted(sorted_scores, edges, side="left")`` for ascending ``edges``.

    One merge walk instead of a binary search per edge: the position only moves forward, by a
    galloping search from where the previous edge left it, so the cost is O(E + n) at worst
    and ~E log(n / E) when the scores outnumber the edges, with the scores read in order.
    The same integers: the number of scores ``< edge``, into ``below``.
    """
    n = sorted_scores.size
    p = 0  # scores[:p] < the current edge
    for k in range(edges.size):
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
        below[k] = p


@compiled
def bin_shares(below, where, start, bins, n, share):  # pragma: no cover - compiled
    """Every bin's share ``count / n`` of every m (numpy's ``counts / n``), into ``share``.

    The ``q``-th m's edges are ``where[start[q] + q:][:bins[q] + 1]`` (places in the edges of
    ``below``, the rows below each edge); each bin's count is the difference of its edges'.
    One pass, no array of counts; the division is IEEE's on float64 operands, as numpy's, so
    the bits are the same.
    """
    size = np.float64(n)
    one = np.uintp(1)
    for q in range(start.size):
        # unsigned indices: no negative-index wraparound on the loads (~20% faster)
        cell = np.uintp(start[q])
        edge = cell + np.uintp(q)
        left = below[np.uintp(where[edge])]
        for k in range(np.uintp(bins[q])):
            right = below[np.uintp(where[edge + k + one])]
            share[cell + k] = np.float64(right - left) / size
            left = right


@compiled
def madd_curve(share_a, share_b, start, stop):  # pragma: no cover - compiled
    """MADD at every bin count of the grid: ``np.sum(|d_a - d_b|)`` over each m's bins.

    ``share_*`` are a group's bin proportions ``counts / n`` (computed once per group, the
    bits of numpy's division).
    """
    curve = np.empty(start.size)
    stack = _stack()
    for q in range(start.size):
        # 0.0 + ...: numpy's add.reduce starts from the identity
        curve[q] = 0.0 + _tree_sum(share_a, share_b, start[q], stop[q] - start[q], True, stack)
    return curve


#: Unit round-off of float64.
_EPS = 2.0 ** -53


@compiled
def _prefix_sums(values):  # pragma: no cover - compiled
    """Prefix sums of ``values - mean`` and of its square, and a bound on their round-off.

    ``ss(i, j)`` (:func:`_deviations_floor`) is the sum of squared deviations of
    ``values[i..j]`` from their mean in O(1), within ``slack`` of the exact one: the rounding
    of the centring, the prefix sums and the final operations each stay below a few
    ``n**2 * eps * max|x|**2`` (the classic bound of a recursive sum of ``n`` terms); the
    factor 32 leaves room to spare.
    """
    n = values.size
    centre = 0.0
    for t in range(n):
        centre += values[t]
    centre /= np.float64(n)
    p1 = np.empty(n + 1)
    p2 = np.empty(n + 1)
    p1[0] = 0.0
    p2[0] = 0.0
    largest = 0.0
    for t in range(n):
        x = values[t] - centre
        p1[t + 1] = p1[t] + x
        p2[t + 1] = p2[t] + x * x
        largest = max(largest, abs(x))
    slack = 32.0 * np.float64(n) * np.float64(n) * _EPS * largest * largest
    return p1, p2, slack


@compiled
def _deviations_floor(p1, p2, slack, i, j):  # pragma: no cover - compiled
    """Bound the sum of squared deviations of ``values[i..j]`` from below (see above)."""
    s1 = p1[j + 1] - p1[i]
    return (p2[j + 1] - p2[i]) - s1 * s1 / np.float64(j + 1 - i) - slack


@compiled
def _cannot_reach(floor, skip_above):  # pragma: no cover - compiled
    """Whether a variance floor stays above ``skip_above`` beyond the round-off of the rows."""
    return floor - (1e-9 * abs(floor) + 1e-13) > skip_above


@compiled
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
            if j == first and _cannot_reach(var * (size / np.float64(n - i)), skip_above):
                return np.inf
            if var < smallest:
                smallest = var
    return smallest


@compiled
def stable_interval_search(values, first_end, tie):  # pragma: no cover - compiled
    """``(row, col, variance)`` of the first interval within ``tie`` of the smallest std.

    Start ``i`` runs over ``first_end``'s indices, end ``j`` from ``first_end[i]`` to the last
    point; the smallest variance is found first, then the first interval (row-major) whose
    variance is at most ``(sqrt(best) + tie)**2``, exactly as the numpy table did. Rows that
    cannot come within the tie bound of the best so far are skipped: first in O(1), by the
    prefix-sum floor of ``[i, first]`` (rows of small ``h`` are long, and computing them up to
    ``first`` alone was most of the search), then while the row runs (see :func:`_row`). The
    answer lies in the first row whose smallest variance is within the final bound; only the
    rows that are computed use the table's arithmetic, so the result is unchanged.
    """
    n = values.size
    p1, p2, slack = _prefix_sums(values)
    row_var = np.empty(n)
    row_min = np.full(first_end.size, np.inf)
    best = np.inf
    # last start first: MADD flattens towards large h, so a small variance turns up early
    # and prunes most of the long rows of small h (the answer does not depend on the order)
    for i in range(first_end.size - 1, -1, -1):
        first = first_end[i]
        if first >= n:
            continue
        bound = (np.sqrt(max(best, 0.0)) + tie) ** 2
        # var[i..j] >= ss[i..first] / (n - i) for every end j, as in _row
        if _cannot_reach(_deviations_floor(p1, p2, slack, i, first) / np.float64(n - i), bound):
            continue
        row_min[i] = _row(values, i, first, n, bound, row_var)
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


@compiled
def first_ends(h, min_length, extend, min_points):  # pragma: no cover - compiled
    """Each start's first admissible end (``h.size`` when skipped), as ``_stable_interval``.

    The starts are the ``h <= h[-1] - min_length`` (a prefix: ``h`` ascends); ``reach`` is
    ``searchsorted(h, h[i] + min_length, side="right") - 1``, found by a forward walk since it
    grows with ``i``.
    """
    n = h.size
    limit = h[n - 1] - min_length
    n_starts = 0
    for k in range(n):
        if h[k] <= limit:
            n_starts += 1
    out = np.empty(n_starts, dtype=np.int64)
    reach = 0  # h[:reach] <= h[i] + min_length
    for i in range(n_starts):
        x = h[i] + min_length
        while reach < n and h[reach] <= x:
            reach += 1
        last = reach - 1
        if extend:
            out[i] = max(last, i + min_points)
        else:
            out[i] = last if last - i >= min_points else n
    return out


@compiled
def _reduceat_sum(a, lo, n):  # pragma: no cover - compiled
    """One segment of ``np.add.reduceat``: its first value plus the pairwise sum of the rest."""
    return a[lo] + _pairwise_sum(a, lo + 1, n - 1)


@compiled
def _interval_null(below_a, below_b, n_a, n_b, scale, grid, i, j):  # pragma: no cover
    """``np.mean`` over the interval's m of the summed null terms, numpy's bits (see madd.py).

    ``below_*`` are the groups' rows below each edge; ``grid`` is ``(lo, hi, start, stop)``.
    """
    left, right, start, stop = grid
    lo = start[i]
    terms = np.empty(stop[j] - lo)
    pool = np.float64(n_a + n_b)
    for k in range(terms.size):
        cell = lo + k
        pooled = (below_a[right[cell]] - below_a[left[cell]]) + (
            below_b[right[cell]] - below_b[left[cell]])
        p = np.float64(pooled) / pool
        terms[k] = np.sqrt(p * (1.0 - p)) * scale
    per_m = np.empty(j + 1 - i)
    for q in range(i, j + 1):
        per_m[q - i] = _reduceat_sum(terms, start[q] - lo, stop[q] - start[q])
    return (0.0 + _pairwise_sum(per_m, 0, per_m.size)) / np.float64(per_m.size)


@compiled
def auto_pair(share_a, share_b, below_a, below_b, n_a, n_b, scale, grid, first_end, tie
              ):  # pragma: no cover - compiled
    """MADD "auto" of one pair: ``(i, j, variance, value, null, rep)``, or ``i = -1``.

    The curve, Algorithm 1's interval ``[i, j]`` with its variance, the mean MADD over it
    (``np.mean``'s bits: the identity plus the pairwise sum, divided by the size), the mean
    null term (``scale`` is ``sqrt(2/pi * (1/n_a + 1/n_b))``) and ``rep``, the first grid
    point whose MADD is closest to the mean (``np.argmin``). ``share_*`` and ``below_*`` are
    each group's :func:`bin_shares` and :func:`edges_below`, ``grid`` the grid's ``(lo, hi,
    start, stop)``. One call per pair: the numpy steps it replaces cost more in call overhead
    than in arithmetic.
    """
    curve = madd_curve(share_a, share_b, grid[2], grid[3])
    i, j, variance = stable_interval_search(curve, first_end, tie)
    if i < 0:
        return i, j, variance, np.nan, np.nan, -1
    size = j + 1 - i
    value = (0.0 + _pairwise_sum(curve, i, size)) / np.float64(size)
    rep = i
    for q in range(i + 1, j + 1):
        if abs(curve[q] - value) < abs(curve[rep] - value):
            rep = q
    null = _interval_null(below_a, below_b, n_a, n_b, scale, grid, i, j)
    return i, j, variance, value, null, rep


#: A row whose ``x * m`` lies this far from an integer is in bin ``floor(x * m)`` without
#: comparing it to the edges: numpy's corrections need ``x`` on the other side of an edge, and
#: the rounding of ``x * m`` and of the edges moves them by at most ``~4e-16 * m`` bins.
_EDGE_MARGIN = 1e-6


@compiled
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


#: numpy's pairwise summation, as other kernel modules outside this home call it (the score
#: bootstrap's, ``metrics/_intervals_compiled.py``): a leaf of at most 128 terms, the walk.
pairwise_leaf = _leaf
pairwise_walk = _walk
