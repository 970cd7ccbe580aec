"""Compiled kernels (numba) of merging and evaluating cell summaries, bit for bit numpy's.

A day merged from 24 hourly summaries of 40 intersection groups holds ~10^5 cells per group
and ~800 pairs of groups, so the cell passes dominate its cost: four of numpy's indexed loops
(``np.add.at`` and co.) per part when merging, a dozen full passes over the cells and a few
dozen small temporaries per ABCC pair, two weighted ``np.bincount`` per ABPC density.
Compiled, each is one pass; ABCC's pairs share their passes over blocks of cells
(:func:`abcc_pairs`); the merge reads the parts' compact cells as stored or loaded
(:func:`add_compact`: a bitmap, narrow counts, uint8 bounds), decoding nothing; the
bounds are quantized (:func:`quantize_bounds`) and decoded (:func:`decode_bounds`) here too.

**Bit for bit the numpy results.** No fast-math (LLVM neither reassociates nor fuses a
multiply-add then); every expression evaluates the same IEEE operations in the same order as
the numpy code it replaces; sums over arrays use numpy's pairwise summation (MADD's
:func:`.madd._pairwise_sum`, after numpy's ``0.0 +``);
sequential accumulations (cumulative sums, ``np.bincount`` weights, ``np.add.at``) run in the
same order; minima and maxima follow numpy's rule (the second operand on ties, NaN
propagates), so signed zeros come out as numpy's too. ``tests/summaries/test_compiled.py``
keeps the numpy versions as oracles.

numba is already a dependency (HFM's ApproxDist); this module is imported only when cells are
made, merged or evaluated, so ``import fairmonitor`` does not load numba.
"""

from __future__ import annotations

import numpy as np

from . import compiled
from .madd import _pairwise_sum


@compiled
def _min(a, b):  # pragma: no cover - compiled
    """``np.minimum(a, b)`` of floats (and ``.at``, ``np.clip``): ``b`` on ties, NaN wins."""
    return a if (a < b) | (a != a) else b  # | not or: one select, no branch


@compiled
def _max(a, b):  # pragma: no cover - compiled
    """``np.maximum(a, b)`` of floats (and ``.at``, ``np.clip``): ``b`` on ties, NaN wins."""
    return a if (a > b) | (a != a) else b  # | not or: one select, no branch


@compiled
def _sum(a, n):  # pragma: no cover - compiled
    """``float(a[:n].sum())``: numpy's add.reduce starts from the identity 0.0."""
    # an int64 start, not the literal 0: numba links a cached recursive callee typed with a
    # literal argument to an unresolved symbol (a crash when the cache is loaded)
    start = n - n
    return 0.0 + _pairwise_sum(a, start, n)


@compiled
def add_cells(count, total, low, high, index, c, t, lo, hi):  # pragma: no cover - compiled
    """Add one part's exact cells (raw scores binned) into dense per-cell arrays, in place.

    The bits of ``np.add.at(count, index, c)``, ``np.add.at(total, index, t)``,
    ``np.minimum.at(low, index, lo)`` and ``np.maximum.at(high, index, hi)`` in that order,
    in one pass (a part's cell indices are distinct, so each cell takes one value per part).
    The merge adds raw parts so, with their exact min and max, and quantizes the bounds once
    at the end (quantizing is monotone: the same steps as quantizing each part's).
    """
    for k in range(index.size):
        i = index[k]
        count[i] += c[k]
        total[i] += t[k]
        low[i] = _min(low[i], lo[k])
        high[i] = _max(high[i], hi[k])


def _bit_tables() -> tuple[np.ndarray, np.ndarray]:
    """Per byte value: the positions of its set bits, lowest first (then 0s), and how many."""
    values = np.arange(256)
    bits = (values[:, None] >> np.arange(8)) & 1
    positions = np.zeros((256, 8), dtype=np.uint32)
    for b in range(256):
        where = np.flatnonzero(bits[b])
        positions[b, :where.size] = where
    return positions, bits.sum(axis=1).astype(np.int64)


#: ``_BIT_POSITIONS[b, :_BIT_COUNTS[b]]``: the set bits of byte ``b`` (bitmap walk, no branch).
_BIT_POSITIONS, _BIT_COUNTS = _bit_tables()
#: The tables, as the merge's Python side reads a part's bitmap.
BIT_POSITIONS, BIT_COUNTS = _BIT_POSITIONS, _BIT_COUNTS


@compiled
def add_compact(count, total, qlo, qhi, bitmap, c, t, ql, qh, positions, bit_counts,
                scratch):  # pragma: no cover - compiled
    """Add one part's compact cells (:class:`~.core.CompactCells`) into dense arrays, in place.

    Reads the part's arrays as stored: its ``bitmap`` (bit ``k % 8`` of byte ``k // 8``: cell
    ``k`` is not empty), counts ``c`` of any integer dtype, sums ``t``, uint8 bounds ``ql``,
    ``qh``; ``qlo`` takes the min and ``qhi`` the max, per cell. The bits of the former
    ``add_cells`` on the decoded cells (``np.add.at`` of the counts and sums in the cells'
    order, ``np.minimum.at`` / ``np.maximum.at`` of the bounds, whose decoding grows with
    ``q`` in each cell), from ~11 bytes a cell instead of 36.

    Two passes: the bitmap to the cells' indices in ``scratch`` (uint32, at least ``8 *
    bitmap.size + 8``), eight table entries a byte (``positions``, ``bit_counts``:
    :data:`_BIT_POSITIONS`, :data:`_BIT_COUNTS`) with no branch (a bit-by-bit walk
    mispredicts on every other cell: ~3x slower); then the updates, indexed by unsigned
    integers (no wraparound test: ~25% faster). Returns the cells read, or -1 if the bitmap
    marks more or fewer cells than the arrays hold, or cells beyond the grid (corrupted
    bytes): nothing is written out of bounds.
    """
    n = c.size
    if scratch.size < 8 * bitmap.size + 8:
        return -1
    k = 0
    for j in range(bitmap.size):
        b = bitmap[j]
        base = np.uint32(8 * j)
        for q in range(8):
            scratch[k + q] = base + positions[b, q]
        k += bit_counts[b]
    if k != n or (k and scratch[k - 1] >= count.size):  # ascending: the last is the largest
        return -1
    for m in range(n):
        i = scratch[m]
        count[i] += c[m]
        total[i] += t[m]
        qlo[i] = min(qlo[i], ql[m])
        qhi[i] = max(qhi[i], qh[m])
    return n


@compiled
def _bound(q, left, right, step):  # pragma: no cover - compiled
    """Return bound ``q`` of a cell: ``left + q * step``, ``step = (right - left) / 255``.

    255 is ``right`` exactly (and 0 is ``left``).
    """
    return right if q == 255 else left + np.float64(q) * step


@compiled
def quantize_bounds(index, low, high, edges):  # pragma: no cover - compiled
    """Bounds of cells ``index`` quantized outward: the largest ``qlo``, smallest ``qhi``.

    ``_bound(qlo) <= low`` and ``_bound(qhi) >= high`` in float64, with the decoding formula
    itself: the floor / ceil of the quotient is a first guess (it can be a step off after
    rounding, and many steps in a cell one ulp wide, where the bounds round to its edges),
    then stepped until the inequality holds and as far in as it still holds. Scores lie in
    their cell, so 0 and 255 always hold. Both are monotone in their bound, so the bounds of
    merged cells (min of ``qlo``, max of ``qhi``) are the union's quantized.
    """
    n = index.size
    qlo = np.empty(n, dtype=np.uint8)
    qhi = np.empty(n, dtype=np.uint8)
    for k in range(n):
        c = index[k]
        left, right = edges[c], edges[c + 1]
        step = (right - left) / 255
        x, y = low[k], high[k]
        guess = np.floor((x - left) / step)
        q = 0 if not guess > 0 else 255 if guess > 255 else np.int64(guess)  # NaN: 0
        while q > 0 and _bound(q, left, right, step) > x:
            q -= 1
        while q < 255 and _bound(q + 1, left, right, step) <= x:
            q += 1
        qlo[k] = q
        guess = np.ceil((y - left) / step)
        q = 0 if not guess > 0 else 255 if guess > 255 else np.int64(guess)
        while q < 255 and _bound(q, left, right, step) < y:
            q += 1
        while q > 0 and _bound(q - 1, left, right, step) >= y:
            q -= 1
        qhi[k] = q
    return qlo, qhi


@compiled
def decode_bounds(index, qlo, qhi, edges):  # pragma: no cover - compiled
    """Decode bounds ``qlo``, ``qhi`` of cells ``index`` as floats (:func:`_bound`), one pass."""
    low = np.empty(index.size)
    high = np.empty(index.size)
    for k in range(index.size):
        c = index[k]
        left, right = edges[c], edges[c + 1]
        step = (right - left) / 255
        low[k] = _bound(qlo[k], left, right, step)
        high[k] = _bound(qhi[k], left, right, step)
    return low, high


@compiled
def cells_of_sorted(scores, edges):  # pragma: no cover - compiled
    """``core._cells_of``: the non-empty cells of sorted scores, in one walk of both arrays.

    Cell k holds ``edges[k] <= x < edges[k + 1]``, the last one closed at 1 (the rule of
    ``_cells_of``'s two searches). A cell's sum has ``np.add.reduceat``'s bits: its first
    score, plus numpy's pairwise sum of the others. One pass over the scores and the edges
    instead of ~10^5 binary searches among ~10^5 scores (the cost of binning a day of raw
    hourly groups).
    """
    n = scores.size
    last = edges.size - 2
    out = min(n, last + 1)
    index = np.empty(out, dtype=np.int32)
    count = np.empty(out, dtype=np.int64)
    total = np.empty(out)
    low = np.empty(out)
    high = np.empty(out)
    k = 0
    cell = 0
    i = 0
    while i < n:
        x = scores[i]
        while cell < last and edges[cell + 1] <= x:
            cell += 1
        j = n  # the run of scores in this cell: up to its right edge (the last: all)
        if cell < last:
            j = i + 1
            bound = edges[cell + 1]
            while j < n and scores[j] < bound:
                j += 1
        index[k] = cell
        count[k] = j - i
        # reduceat: the first element, then + numpy's pairwise sum of the rest, whose
        # fewer-than-8 case starts from -0.0 (MADD's copy starts from 0.0: the sign of a
        # sum of zeros differs, and scores may be -0.0)
        rest = j - i - 1
        if rest >= 8:
            total[k] = x + _pairwise_sum(scores, i + 1, rest)
        elif rest:
            tail = -0.0
            for q in range(i + 1, j):
                tail += scores[q]
            total[k] = x + tail
        else:
            total[k] = x
        low[k] = x
        high[k] = scores[j - 1]
        k += 1
        i = j
    return index[:k], count[:k], total[:k], low[:k], high[:k]


@compiled
def mark_cells(mark, index):  # pragma: no cover - compiled
    """``mark[index] = True``: numpy's fancy assignment costs ~6x more from int32 indices."""
    for k in range(index.size):
        mark[index[k]] = True


@compiled
def table_cells(mark, edges):  # pragma: no cover - compiled
    """``_AbccTable``'s cells from their marks, in one pass: cells, left, right, gaps, extended.

    The bits of ``cells = np.flatnonzero(mark)``, ``left, right = edges[cells],
    edges[cells + 1]``, ``gaps = left - np.r_[0.0, right[:-1]]`` and ``extended = right -
    np.r_[0.0, right[:-1]]`` (five numpy passes and their temporaries).
    """
    size = 0
    for k in range(mark.size):
        size += mark[k]
    cells = np.empty(size, dtype=np.intp)
    left, right = np.empty(size), np.empty(size)
    gaps, extended = np.empty(size), np.empty(size)
    q = 0
    previous = 0.0
    for k in range(mark.size):
        if mark[k]:
            cells[q] = k
            left[q], right[q] = edges[k], edges[k + 1]
            gaps[q] = edges[k] - previous
            extended[q] = edges[k + 1] - previous
            previous = edges[k + 1]
            q += 1
    return cells, left, right, gaps, extended


#: Counts whose share ``c / n`` :func:`abcc_curves` looks up instead of dividing.
_SHARES = 1024


@compiled
def abcc_curves(index, count, total, cells, right, extended, n, F, m, G, pos
                ):  # pragma: no cover - compiled
    """One group's ``F``, ``m`` and ``G`` on the attribute's cells (``_AbccTable``), in place.

    ``index``, ``count``, ``total``: the group's cells, counts and sums; ``cells``: the
    table's cells (ascending, a superset of ``index``). ``pos`` (int32, a row like ``F``)
    receives, per table cell, the group's position of that cell, -1 where the group has none:
    what :func:`_dense` looks the ambiguous cells up in (the former ``where[index]``, searched
    per ambiguous cell, cost ~40 ns a cell). The bits of ``F = (cumsum(c) - c) / n``, ``m =
    c / n``, ``G = F * extended + (c * right - t) / n`` on the dense float arrays ``c`` and
    ``t``; no dense copy is made: between the group's cells ``c`` and ``t`` are 0.

    Divisions bound the pass (three a cell); fewer, the same bits: the running count is an
    exact integer, so ``cumsum(c) - c`` is the previous cell's running count and ``F`` the
    previous quotient (one division per non-empty cell, none per empty one); ``c / n`` of
    small counts comes from a table of the same quotients; in an empty cell ``(0 * right -
    0) / n`` is +0.0, so ``G`` is ``F * extended`` (``+ 0.0`` changes no non-negative value).
    """
    nf = np.float64(n)
    shares = np.empty(_SHARES)
    for c in range(_SHARES):
        shares[c] = np.float64(c) / nf
    running = 0.0
    quotient = 0.0  # running / nf: F of the next cell
    p = 0
    for k in range(F.size):
        if p < index.size and index[p] == cells[k]:
            whole = count[p]
            c = np.float64(whole)
            t = total[p]
            pos[k] = p
            p += 1
            F[k] = quotient  # (running + c - c) / nf: the sum is exact, so running / nf
            # numpy's cumsum: out[0] = c[0], then sequential adds (0.0 + c[0] is c[0]: c >= 0)
            running = c if k == 0 else running + c
            quotient = running / nf
            m[k] = shares[whole] if whole < _SHARES else c / nf
            G[k] = F[k] * extended[k] + (c * right[k] - t) / nf
        else:
            pos[k] = -1
            F[k] = quotient
            m[k] = 0.0
            G[k] = quotient * extended[k]


@compiled
def _spread(mass, mu, lo, hi):  # pragma: no cover - compiled
    """``compute._spread`` of one cell: ``np.clip`` then ``2 * mass * (mu - lo) * ...``."""
    mu = _min(_max(mu, lo), hi)
    width = hi - lo
    return 2 * mass * (mu - lo) * (hi - mu) / width if width > 0 else 0.0


@compiled
def _dense(pos, part_count, part_total, part_qlo, part_qhi, part_low, part_high, ia, namb, left,
           right, out_count, out_total, out_low, out_high):  # pragma: no cover - compiled
    """``_AbccTable._dense``: a group's count, sum, min, max in the ambiguous cells ``ia``.

    ``pos``: the group's position of each table cell, -1 if none (:func:`abcc_curves`). The
    bounds: decoded from ``part_qlo``, ``part_qhi`` (compact cells: :func:`decode_bounds`'
    formula on the same cell edges, so its bits) when they are not empty, else read from
    ``part_low``, ``part_high`` (raw scores binned: their exact min and max). Only the
    ambiguous cells' bounds are read (~1-5% of the cells): decoding every cell's cost more
    than the pairs. A cell the group has no score in: no count or sum, the cell's edges.
    """
    for q in range(namb):
        c = ia[q]
        p = pos[c]
        if p >= 0:
            out_count[q] = np.float64(part_count[p])
            out_total[q] = part_total[p]
            if part_qlo.size:
                edge, r = left[c], right[c]
                quantum = (r - edge) / 255
                out_low[q] = _bound(part_qlo[p], edge, r, quantum)
                out_high[q] = _bound(part_qhi[p], edge, r, quantum)
            else:
                out_low[q] = part_low[p]
                out_high[q] = part_high[p]
        else:
            out_count[q] = 0.0
            out_total[q] = 0.0
            out_low[q] = left[c]
            out_high[q] = right[c]


@compiled
def _ambiguous_part(F_i, F_j, gaps, left, right, n_i, n_j, pos_i, count_i, total_i, qlo_i,
                    qhi_i, low_i, high_i, pos_j, count_j, total_j, qlo_j, qhi_j, low_j, high_j,
                    ia, namb, scratch):  # pragma: no cover - compiled
    """Find the flat stretches before the ambiguous cells ``ia[:namb]`` and their estimates.

    Returns the three sums ``_AbccTable.pair`` adds (flat stretches, estimates, errors);
    ``scratch`` holds at least ``namb`` floats.
    """
    d = np.empty(namb)
    for q in range(namb):
        c = ia[q]
        d[q] = F_i[c] - F_j[c]
        scratch[q] = abs(d[q] * gaps[c])
    flat = _sum(scratch, namb)
    ca, sa, la, ha = np.empty(namb), np.empty(namb), np.empty(namb), np.empty(namb)
    cb, sb, lb, hb = np.empty(namb), np.empty(namb), np.empty(namb), np.empty(namb)
    _dense(pos_i, count_i, total_i, qlo_i, qhi_i, low_i, high_i, ia, namb, left, right, ca, sa,
           la, ha)
    _dense(pos_j, count_j, total_j, qlo_j, qhi_j, low_j, high_j, ia, namb, left, right, cb, sb,
           lb, hb)
    na, nb = np.float64(n_i), np.float64(n_j)
    estimate = np.empty(namb)
    error = np.empty(namb)
    for q in range(namb):  # compute._ambiguous, one cell at a time
        c = ia[q]
        dq, lo_edge, r = d[q], left[c], right[c]
        ja, jb = ca[q] / na, cb[q] / nb
        signed = dq * (r - lo_edge) + (ca[q] * r - sa[q]) / na - (cb[q] * r - sb[q]) / nb
        lower, upper = dq - jb, dq + ja
        lo = abs(signed)
        hi = (r - lo_edge) * _max(abs(lower), abs(upper))
        mid, mid_err = (lo + hi) / 2, (hi - lo) / 2
        mu_a = _min(_max(sa[q] / ca[q] if ca[q] > 0 else lo_edge, lo_edge), r)
        mu_b = _min(_max(sb[q] / cb[q] if cb[q] > 0 else lo_edge, lo_edge), r)
        first, second = _min(mu_a, mu_b), _max(mu_a, mu_b)
        between = dq + ja if mu_a <= mu_b else dq - jb
        step = (abs(dq) * (first - lo_edge) + abs(between) * (second - first)
                + abs(dq + ja - jb) * (r - second))
        step_err = _spread(ja, mu_a, la[q], ha[q]) + _spread(jb, mu_b, lb[q], hb[q])
        if step_err < mid_err:
            estimate[q], error[q] = step, step_err
        else:
            estimate[q], error[q] = mid, mid_err
    return flat, _sum(estimate, namb), _sum(error, namb)


@compiled
def _fixed_cells(F_i, F_j, m_i, m_j, G_i, G_j, lo, n, area, ia, namb):  # pragma: no cover
    """Areas of the fixed cells ``lo .. lo + n``, and the ambiguous ones listed.

    ``|G_i - G_j|`` into ``area[:n]`` where fixed; 0 there and the cell appended to ``ia``
    (from ``namb``, up to its size) where ambiguous. Returns the new count of ambiguous
    cells (it goes on counting beyond ``ia``'s size).
    """
    for k in range(n):
        c = lo + k
        d0 = F_i[c] - F_j[c]
        # F_a - F_b stays within [d0 - m_b, d0 + m_a] in a cell: ambiguous if that holds 0
        if d0 < m_j[c] and d0 > -m_i[c]:  # -m exactly: the former table's minus_m
            if namb < ia.size:
                ia[namb] = c
            namb += 1
            area[k] = 0.0
        else:
            area[k] = abs(G_i[c] - G_j[c])
    return namb


@compiled
def abcc_pair(F_i, F_j, m_i, m_j, G_i, G_j, gaps, left, right, n_i, n_j,
              pos_i, count_i, total_i, qlo_i, qhi_i, low_i, high_i, pos_j, count_j, total_j,
              qlo_j, qhi_j, low_j, high_j, area, ia):  # pragma: no cover - compiled
    """``_AbccTable.pair``: ABCC of two groups from the table and its certified error.

    ``area`` and ``ia`` are scratch arrays as long as the table (no allocation per pair but
    the few ambiguous cells').
    """
    size = F_i.size
    start = size - size  # an int64, not the literal 0 (see _sum)
    namb = _fixed_cells(F_i, F_j, m_i, m_j, G_i, G_j, start, size, area, ia, start)
    exact = _sum(area, size)
    if namb == 0:
        return exact, 0.0
    flat, estimate, error = _ambiguous_part(
        F_i, F_j, gaps, left, right, n_i, n_j, pos_i, count_i, total_i, qlo_i, qhi_i, low_i,
        high_i, pos_j, count_j, total_j, qlo_j, qhi_j, low_j, high_j, ia, namb, area)
    return exact + flat + estimate, error


@compiled
def _tree_sum(leaf_sums, leaf_at, lo, n):  # pragma: no cover - compiled
    """``_pairwise_sum`` of an array of which only the sums of its leaves are known.

    The same recursion (halves rounded down to multiples of 8, leaves of at most 128
    elements), each leaf ``(lo, n)`` read as ``leaf_sums[leaf_at[lo]]``: the same bits.
    """
    if n <= 128:
        return leaf_sums[leaf_at[lo]]
    n2 = n // 2
    n2 -= n2 % 8
    return _tree_sum(leaf_sums, leaf_at, lo, n2) + _tree_sum(leaf_sums, leaf_at, lo + n2,
                                                             n - n2)


@compiled
def abcc_pairs(F, m, G, first, second, leaf_lo, leaf_n, leaf_at, block, cap
               ):  # pragma: no cover - compiled
    """Sum the fixed cells of many pairs in one call, leaf by leaf of the pairwise summation.

    ``F``, ``m``, ``G``: the table, a row per group. Blocks of ``block`` leaves are read for
    every pair in turn (the six rows a pair reads, ~5 MB for 10^5 cells, then come from
    cache). Within a leaf (<= 128 cells) the fixed cells' areas are computed without a
    branch, which vectorizes (~1.5x faster than :func:`_fixed_cells`), and the ambiguous
    cells are listed in a second pass over the leaves that hold any (~1% of a pair's cells
    when its groups share a distribution). Each leaf is summed as the whole-array sum sums
    it, then the leaves combine as its recursion does (:func:`_tree_sum`): every pair's
    ``exact`` has the bits of :func:`abcc_pair`'s. Returns ``exact`` per pair and the
    ambiguous cells, ``ambiguous[p, :count[p]]`` (``count[p] > cap``: not all kept, the
    caller runs that pair alone).
    """
    pairs = first.size
    size = F.shape[1]
    leaves = leaf_lo.size
    sums = np.empty((pairs, leaves))
    ambiguous = np.empty((pairs, cap), dtype=np.intp)
    count = np.zeros(pairs, dtype=np.intp)
    area = np.empty(128)
    for b0 in range(0, leaves, block):
        b1 = min(leaves, b0 + block)
        for p in range(pairs):
            i, j = first[p], second[p]
            namb = count[p]
            for leaf in range(b0, b1):
                lo, n = leaf_lo[leaf], leaf_n[leaf]
                Fi, Fj, mi, mj, Gi, Gj = F[i, lo:lo + n], F[j, lo:lo + n], m[i, lo:lo + n], \
                    m[j, lo:lo + n], G[i, lo:lo + n], G[j, lo:lo + n]
                found = 0
                for k in range(n):  # _fixed_cells' test; 0.0 where ambiguous
                    d0 = Fi[k] - Fj[k]
                    amb = (d0 < mj[k]) & (d0 > -mi[k])
                    area[k] = 0.0 if amb else abs(Gi[k] - Gj[k])
                    found += amb
                if found:
                    for k in range(n):
                        d0 = Fi[k] - Fj[k]
                        if (d0 < mj[k]) & (d0 > -mi[k]):
                            if namb < cap:
                                ambiguous[p, namb] = lo + k
                            namb += 1
                sums[p, leaf] = _pairwise_sum(area, lo - lo, n)
            count[p] = namb
    exact = np.empty(pairs)
    start = size - size
    for p in range(pairs):
        exact[p] = 0.0 + _tree_sum(sums[p], leaf_at, start, size)
    return exact, ambiguous, count


@compiled
def counts_below(index, count, slot, wanted):  # pragma: no cover - compiled
    """MADD's counts below its bin edges ``where`` (ascending) from a group's cells.

    Per ``where[j]``: the sum of ``count`` over the cells ``index < where[j]``. ``slot[k]``:
    the wanted edges ``<= k``, for every grid cell ``k`` (``where[j] > k`` iff ``j >=
    slot[k]``), so each cell's count goes to its slot and a cumulative sum over the
    ``wanted`` slots gives the counts: two branch-free passes (~2x faster than walking the
    cells and the edges together, and no pass over the whole grid as the former dense
    cumulative sum and gather). Integer sums: any order gives the same values.
    """
    out = np.zeros(wanted + 1, dtype=np.int64)
    for p in range(index.size):
        out[slot[index[p]]] += count[p]
    running = np.int64(0)
    for j in range(wanted):
        running += out[j]
        out[j] = running
    return out[:wanted]


@compiled
def linear_binning_cells(index, count, total, edges, cells):  # pragma: no cover - compiled
    """``compute._binned`` of cells: their linear-binning weights on ``cells`` KDE cells.

    The bits of the two weighted ``np.bincount`` (each a sequential accumulation from 0.0 in
    the cells' order) added elementwise. The cells ascend, so their KDE cells never decrease:
    each KDE cell's run of fine cells adds in a register, written once at the run's end (the
    same additions in the same order; no store-to-load chain through memory per cell).
    """
    first = np.zeros(cells)
    second = np.zeros(cells)
    g = np.float64(cells)
    at_first, run_first = -1, 0.0
    at_second, run_second = -1, 0.0
    for k in range(index.size):
        mid = (edges[index[k]] + edges[index[k] + 1]) / 2
        left_i = np.intp(np.floor(mid * g - 0.5))  # one KDE cell per fine cell
        c = np.float64(count[k])
        frac_sum = g * total[k] - (0.5 + left_i) * c  # sum of (x * G - 0.5 - left)
        b = min(max(left_i, 0), cells - 1)
        if b != at_first:
            if at_first >= 0:
                first[at_first] = run_first
            at_first, run_first = b, first[b]
        run_first += c - frac_sum
        b = min(max(left_i + 1, 0), cells - 1)
        if b != at_second:
            if at_second >= 0:
                second[at_second] = run_second
            at_second, run_second = b, second[b]
        run_second += frac_sum
    if at_first >= 0:
        first[at_first] = run_first
        second[at_second] = run_second
    return first + second


#: The ambiguous cells' part of an ABCC pair, as the blocked pairs' Python side calls it.
ambiguous_part = _ambiguous_part
