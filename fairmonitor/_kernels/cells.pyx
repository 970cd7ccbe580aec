# cython: language_level=3
"""Compiled kernels (Cython) of making, merging and evaluating cell summaries.

A day merged from 24 hourly summaries of 40 intersection groups holds ~10^5 cells per group
and ~800 pairs of groups, so the cell passes dominate its cost: four of numpy's indexed loops
(``np.add.at`` and co.) per part when merging, a dozen full passes over the cells and a few
dozen small temporaries per ABCC pair, two weighted ``np.bincount`` per ABPC density.
Compiled, each is one pass; ABCC's pairs share their passes over blocks of cells
(:func:`abcc_pairs`); the merge reads the parts' compact cells as stored or loaded
(:func:`add_compact`: a bitmap, narrow counts, uint8 bounds), decoding nothing; the
bounds are quantized (:func:`quantize_bounds`) and decoded (:func:`decode_bounds`) here too.

**One implementation, its own summation.** These kernels serve every path (summaries of any
size, merges, Spark partitions); the numpy formulations they replaced are the oracles of
``tests/summaries/test_compiled.py``, compared within a stated tolerance (counts exactly).
Every sum over an array is :c:func:`_sum`: blocks of 128 values, each summed in 8 lanes
(which the C compiler vectorizes), the blocks' sums added in order, so the error grows with
``n / 128``, not ``n``; ABCC's blocked pairs (:func:`abcc_pairs`) sum the same blocks in the
same order as a single pair (:func:`abcc_pair`), so both give the same bits by construction.
Minima and maxima follow numpy's rule (the second operand on ties, NaN propagates).
Compiled without fast-math (``setup.py``): IEEE results, NaN and inf included.
"""

import numpy as np

cimport cython
from libc.math cimport ceil, fabs, floor
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t

ctypedef fused count_t:
    uint8_t
    uint16_t
    uint32_t
    int32_t
    int64_t

ctypedef fused index_t:
    int32_t
    int64_t

cdef enum:
    # values per block of _sum (and of abcc_pairs' passes)
    BLOCK = 128
    # counts whose share c / n abcc_curves looks up instead of dividing
    SHARES = 1024

#: Counts whose share ``c / n`` :func:`abcc_curves` looks up instead of dividing.
_SHARES = SHARES


cdef inline double _min(double a, double b) noexcept nogil:
    """``np.minimum(a, b)`` of floats (and ``.at``, ``np.clip``): ``b`` on ties, NaN wins."""
    return a if (a < b) | (a != a) else b


cdef inline double _max(double a, double b) noexcept nogil:
    """``np.maximum(a, b)`` of floats (and ``.at``, ``np.clip``): ``b`` on ties, NaN wins."""
    return a if (a > b) | (a != a) else b


cdef inline double _block_sum(const double* a, Py_ssize_t n) noexcept nogil:
    """Sum of ``a[:n]``, ``n <= BLOCK``: 8 lanes (vectorized), then the lanes and the tail."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0, s5 = 0.0, s6 = 0.0
    cdef double s7 = 0.0
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        s0 += a[i]
        s1 += a[i + 1]
        s2 += a[i + 2]
        s3 += a[i + 3]
        s4 += a[i + 4]
        s5 += a[i + 5]
        s6 += a[i + 6]
        s7 += a[i + 7]
        i += 8
    cdef double total = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while i < n:
        total += a[i]
        i += 1
    return total


cdef double _sum(const double* a, Py_ssize_t n) noexcept nogil:
    """Sum of ``a[:n]``: blocks of ``BLOCK`` values (:c:func:`_block_sum`) added in order."""
    cdef double total = 0.0
    cdef Py_ssize_t lo = 0
    while lo < n:
        total += _block_sum(a + lo, min(BLOCK, n - lo))
        lo += BLOCK
    return total


def array_sum(const double[::1] a):
    """The kernels' sum of an array (:c:func:`_sum`), for the tests.

    >>> array_sum(np.arange(300.0))
    44850.0
    """
    if a.shape[0] == 0:
        return 0.0
    return _sum(&a[0], a.shape[0])


# --------------------------------------------------------------------------- merging


def add_cells(int64_t[::1] count, double[::1] total, double[::1] low, double[::1] high,
              const int32_t[::1] index, const int64_t[::1] c, const double[::1] t,
              const double[::1] lo, const double[::1] hi):
    """Add one part's exact cells (raw scores binned) into dense per-cell arrays, in place.

    What ``np.add.at(count, index, c)``, ``np.add.at(total, index, t)``,
    ``np.minimum.at(low, index, lo)`` and ``np.maximum.at(high, index, hi)`` give, in one
    pass (a part's cell indices are distinct, so each cell takes one value per part). The
    merge adds raw parts so, with their exact min and max, and quantizes the bounds once at
    the end (quantizing is monotone: the same steps as quantizing each part's).
    """
    cdef Py_ssize_t k, i
    with nogil:
        for k in range(index.shape[0]):
            i = index[k]
            count[i] += c[k]
            total[i] += t[k]
            low[i] = _min(low[i], lo[k])
            high[i] = _max(high[i], hi[k])


def _bit_tables():
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


def add_compact(int64_t[::1] count, double[::1] total, uint8_t[::1] qlo, uint8_t[::1] qhi,
                const uint8_t[::1] bitmap, const count_t[::1] c, const double[::1] t,
                const uint8_t[::1] ql, const uint8_t[::1] qh,
                const uint32_t[:, ::1] positions, const int64_t[::1] bit_counts,
                uint32_t[::1] scratch):
    """Add one part's compact cells (:class:`~.core.CompactCells`) into dense arrays, in place.

    Reads the part's arrays as stored: its ``bitmap`` (bit ``k % 8`` of byte ``k // 8``: cell
    ``k`` is not empty), counts ``c`` of any integer dtype, sums ``t``, uint8 bounds ``ql``,
    ``qh``; ``qlo`` takes the min and ``qhi`` the max, per cell: what :func:`add_cells` gives
    on the decoded cells, from ~11 bytes a cell instead of 36.

    Two passes: the bitmap to the cells' indices in ``scratch`` (uint32, at least ``8 *
    bitmap.size + 8``), eight table entries a byte (``positions``, ``bit_counts``:
    :data:`_BIT_POSITIONS`, :data:`_BIT_COUNTS`) with no branch (a bit-by-bit walk
    mispredicts on every other cell: ~3x slower); then the updates. Returns the cells read,
    or -1 if the bitmap marks more or fewer cells than the arrays hold, or cells beyond the
    grid (corrupted bytes): nothing is written out of bounds.
    """
    cdef Py_ssize_t n = c.shape[0], k = 0, j, q, m
    cdef uint32_t base, i
    cdef uint8_t b
    if scratch.shape[0] < 8 * bitmap.shape[0] + 8:
        return -1
    if t.shape[0] != n or ql.shape[0] != n or qh.shape[0] != n:
        return -1
    with nogil:
        for j in range(bitmap.shape[0]):
            b = bitmap[j]
            base = <uint32_t>(8 * j)
            for q in range(8):
                scratch[k + q] = base + positions[b, q]
            k += bit_counts[b]
    # ascending: the last is the largest
    if k != n or (k and scratch[k - 1] >= <uint32_t>count.shape[0]):
        return -1
    with nogil:
        for m in range(n):
            i = scratch[m]
            count[i] += c[m]
            total[i] += t[m]
            qlo[i] = min(qlo[i], ql[m])
            qhi[i] = max(qhi[i], qh[m])
    return n


cdef inline double _bound(int q, double left, double right, double step) noexcept nogil:
    """Return bound ``q`` of a cell: ``left + q * step``, ``step = (right - left) / 255``.

    255 is ``right`` exactly (and 0 is ``left``).
    """
    return right if q == 255 else left + <double>q * step


def quantize_bounds(const index_t[::1] index, const double[::1] low, const double[::1] high,
                    const double[::1] edges):
    """Bounds of cells ``index`` quantized outward: the largest ``qlo``, smallest ``qhi``.

    ``_bound(qlo) <= low`` and ``_bound(qhi) >= high`` in float64, with the decoding formula
    itself: the floor / ceil of the quotient is a first guess (it can be a step off after
    rounding, and many steps in a cell one ulp wide, where the bounds round to its edges),
    then stepped until the inequality holds and as far in as it still holds. Scores lie in
    their cell, so 0 and 255 always hold. Both are monotone in their bound, so the bounds of
    merged cells (min of ``qlo``, max of ``qhi``) are the union's quantized.
    """
    cdef Py_ssize_t n = index.shape[0], k, c
    out_lo = np.empty(n, dtype=np.uint8)
    out_hi = np.empty(n, dtype=np.uint8)
    cdef uint8_t[::1] qlo = out_lo, qhi = out_hi
    cdef double left, right, step, x, y, guess
    cdef int q
    with nogil:
        for k in range(n):
            c = index[k]
            left, right = edges[c], edges[c + 1]
            step = (right - left) / 255
            x, y = low[k], high[k]
            guess = floor((x - left) / step)
            q = 0 if not guess > 0 else 255 if guess > 255 else <int>guess  # NaN: 0
            while q > 0 and _bound(q, left, right, step) > x:
                q -= 1
            while q < 255 and _bound(q + 1, left, right, step) <= x:
                q += 1
            qlo[k] = q
            guess = ceil((y - left) / step)
            q = 0 if not guess > 0 else 255 if guess > 255 else <int>guess
            while q < 255 and _bound(q, left, right, step) < y:
                q += 1
            while q > 0 and _bound(q - 1, left, right, step) >= y:
                q -= 1
            qhi[k] = q
    return out_lo, out_hi


cdef inline uint8_t _quantize_low(double x, double left, double right,
                                  double step) noexcept nogil:
    """The largest ``q`` with ``_bound(q) <= x`` (``quantize_bounds``' lower search)."""
    cdef double guess = floor((x - left) / step)
    cdef int q = 0 if not guess > 0 else 255 if guess > 255 else <int>guess  # NaN: 0
    while q > 0 and _bound(q, left, right, step) > x:
        q -= 1
    while q < 255 and _bound(q + 1, left, right, step) <= x:
        q += 1
    return <uint8_t>q


cdef inline uint8_t _quantize_high(double y, double left, double right,
                                   double step) noexcept nogil:
    """The smallest ``q`` with ``_bound(q) >= y`` (``quantize_bounds``' upper search)."""
    cdef double guess = ceil((y - left) / step)
    cdef int q = 0 if not guess > 0 else 255 if guess > 255 else <int>guess
    while q < 255 and _bound(q, left, right, step) < y:
        q += 1
    while q > 0 and _bound(q - 1, left, right, step) >= y:
        q -= 1
    return <uint8_t>q


def step_bounds(const index_t[::1] index, const int64_t[::1] kmin, const int64_t[::1] kmax,
                const double[::1] edges, int bits):
    """Bounds of cells whose scores lie at steps ``kmin..kmax``, quantized outward, one pass.

    ``low = max(left + (kmin - 1) * u, left)``, ``high = min(left + (kmax + 2) * u,
    right)`` with ``u = (right - left) * 2**-bits`` (a step more each side: a score's
    quotient can round it into the next step), then :func:`quantize_bounds`' search; the
    same steps as ``quantize_bounds`` of those floats (``core._step_bounds`` in numpy).
    """
    cdef Py_ssize_t n = index.shape[0], k, c
    out_lo = np.empty(n, dtype=np.uint8)
    out_hi = np.empty(n, dtype=np.uint8)
    cdef uint8_t[::1] qlo = out_lo, qhi = out_hi
    cdef double left, right, step, u, scale = 1.0 / <double>(<int64_t>1 << bits)
    with nogil:
        for k in range(n):
            c = index[k]
            left, right = edges[c], edges[c + 1]
            step = (right - left) / 255
            u = (right - left) * scale
            qlo[k] = _quantize_low(_max(left + <double>(kmin[k] - 1) * u, left), left, right,
                                   step)
            qhi[k] = _quantize_high(_min(left + <double>(kmax[k] + 2) * u, right), left,
                                    right, step)
    return out_lo, out_hi


def decode_cells(const int64_t[::1] gaps, const int64_t[::1] count, const int64_t[::1] ksum,
                 const uint8_t[::1] qlo2, const uint8_t[::1] qhi2, const int64_t[::1] sizes,
                 const double[::1] edges, int bits):
    """The stored cells of an attribute's groups (format 5) back to index and bounds, one pass.

    ``gaps``: per cell the gap from the previous non-empty cell's index (each group from -1);
    ``qlo2``, ``qhi2``: the bounds of the cells counting two scores or more, in order; a
    cell of one score gets its step's bounds (:func:`step_bounds`). Returns ``(index, qlo,
    qhi)``, or None if the arrays do not fit (a gap below 1, an index beyond the grid, a
    count below 1, more or fewer stored bounds than cells of 2+ scores: corrupted bytes).
    """
    cdef Py_ssize_t n = gaps.shape[0], groups = sizes.shape[0], g, m, at = 0, j = 0
    cdef Py_ssize_t last = edges.shape[0] - 1, stored = qlo2.shape[0]
    index_ = np.empty(n, dtype=np.int32)
    qlo_ = np.empty(n, dtype=np.uint8)
    qhi_ = np.empty(n, dtype=np.uint8)
    cdef int32_t[::1] index = index_
    cdef uint8_t[::1] qlo = qlo_, qhi = qhi_
    cdef int64_t running, k
    cdef double left, right, step, u, scale = 1.0 / <double>(<int64_t>1 << bits)
    cdef bint valid = count.shape[0] == n and ksum.shape[0] == n and qhi2.shape[0] == stored
    if not valid:
        return None
    with nogil:
        for g in range(groups):
            running = -1
            if sizes[g] < 0 or at + sizes[g] > n:
                valid = False
                break
            for m in range(at, at + sizes[g]):
                running += gaps[m]
                if gaps[m] < 1 or running >= last or count[m] < 1:
                    valid = False
                    break
                index[m] = <int32_t>running
                if count[m] > 1:
                    if j >= stored:
                        valid = False
                        break
                    qlo[m], qhi[m] = qlo2[j], qhi2[j]
                    j += 1
                else:
                    left, right = edges[running], edges[running + 1]
                    step = (right - left) / 255
                    u = (right - left) * scale
                    k = ksum[m]
                    qlo[m] = _quantize_low(_max(left + <double>(k - 1) * u, left), left, right,
                                           step)
                    qhi[m] = _quantize_high(_min(left + <double>(k + 2) * u, right), left,
                                            right, step)
            if not valid:
                break
            at += sizes[g]
    if not valid or at != n or j != stored:
        return None
    return index_, qlo_, qhi_


def decode_bounds(const int32_t[::1] index, const uint8_t[::1] qlo, const uint8_t[::1] qhi,
                  const double[::1] edges):
    """Decode bounds ``qlo``, ``qhi`` of cells ``index`` as floats (``_bound``), one pass."""
    cdef Py_ssize_t n = index.shape[0], k, c
    out_low = np.empty(n)
    out_high = np.empty(n)
    cdef double[::1] low = out_low, high = out_high
    cdef double left, right, step
    with nogil:
        for k in range(n):
            c = index[k]
            left, right = edges[c], edges[c + 1]
            step = (right - left) / 255
            low[k] = _bound(qlo[k], left, right, step)
            high[k] = _bound(qhi[k], left, right, step)
    return out_low, out_high


cdef inline Py_ssize_t _cell_of(const double[::1] edges, double x, Py_ssize_t cell,
                                Py_ssize_t last) noexcept nogil:
    """The cell from ``cell`` on holding ``x``: ``edges[c] <= x < edges[c + 1]``, at most ``last``.

    One comparison where ``x`` stays in ``cell`` (many scores a cell), else a binary search
    of the edges beyond it (few scores: no walk over ~10^5 empty cells).
    """
    if cell >= last or edges[cell + 1] > x:
        return cell
    cdef Py_ssize_t lo = cell + 1, hi = last + 1, mid  # the first edge > x in [lo, hi)
    while lo < hi:
        mid = (lo + hi) >> 1
        if edges[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


cdef inline Py_ssize_t _run_end(const double[::1] scores, const double[::1] edges, Py_ssize_t i,
                                Py_ssize_t cell, Py_ssize_t last) noexcept nogil:
    """The end of the run of sorted scores from ``i`` in ``cell``: up to its right edge (the
    last cell: every score left)."""
    cdef Py_ssize_t n = scores.shape[0], j = i + 1
    if cell >= last:
        return n
    cdef double bound = edges[cell + 1]
    while j < n and scores[j] < bound:
        j += 1
    return j


def cells_of_sorted(const double[::1] scores, const double[::1] edges):
    """The non-empty cells of sorted scores: index, count, sum, min and max of each.

    Cell k holds ``edges[k] <= x < edges[k + 1]``, the last one closed at 1. One walk of the
    scores; the cells are found by a binary search of the edges when a score leaves its
    cell. A cell's sum is the kernels' sum of its run of scores (:func:`array_sum`); sorted,
    its min is the run's first score and its max the last.
    """
    cdef Py_ssize_t n = scores.shape[0], last = edges.shape[0] - 2
    cdef Py_ssize_t size = min(n, last + 1)
    index_ = np.empty(size, dtype=np.int32)
    count_ = np.empty(size, dtype=np.int64)
    total_ = np.empty(size)
    low_ = np.empty(size)
    high_ = np.empty(size)
    cdef int32_t[::1] index = index_
    cdef int64_t[::1] count = count_
    cdef double[::1] total = total_, low = low_, high = high_
    cdef Py_ssize_t k = 0, cell = 0, i = 0, j
    cdef double x
    with nogil:
        while i < n:
            x = scores[i]
            cell = _cell_of(edges, x, cell, last)
            j = _run_end(scores, edges, i, cell, last)
            index[k] = <int32_t>cell
            count[k] = j - i
            total[k] = _sum(&scores[i], j - i)
            low[k] = x
            high[k] = scores[j - 1]
            k += 1
            i = j
    return index_[:k], count_[:k], total_[:k], low_[:k], high_[:k]


def steps_of_sorted(const double[::1] scores, const double[::1] edges, int bits):
    """The non-empty cells of sorted scores in steps: index, count, step sum, min and max step.

    A score ``x`` of cell ``[l, r)`` is at step ``k = floor((x - l) * 2**bits / (r - l))``,
    clipped to ``[0, 2**bits - 1]``: ``x`` lies within ``(k + 1/2) * u`` of ``l``, ``u = (r -
    l) / 2**bits``, up to half a step (plus the quotient's rounding, which can move ``k`` by
    one only where ``x`` is within an ulp of a step's edge). A cell keeps the sum of its
    scores' steps (an integer: merging adds them exactly) and their smallest and largest
    step. Cells as :func:`cells_of_sorted` finds them (the same walk).
    """
    cdef Py_ssize_t n = scores.shape[0], last = edges.shape[0] - 2
    cdef Py_ssize_t size = min(n, last + 1)
    index_ = np.empty(size, dtype=np.int32)
    count_ = np.empty(size, dtype=np.int64)
    ksum_ = np.empty(size, dtype=np.int64)
    kmin_ = np.empty(size, dtype=np.int64)
    kmax_ = np.empty(size, dtype=np.int64)
    cdef int32_t[::1] index = index_
    cdef int64_t[::1] count = count_, ksum = ksum_, kmin = kmin_, kmax = kmax_
    cdef Py_ssize_t k = 0, cell = 0, i = 0, j, m
    cdef double x, left, scale, q
    cdef double top = <double>((<int64_t>1 << bits) - 1)
    cdef int64_t step, total, low, high
    with nogil:
        while i < n:
            x = scores[i]
            cell = _cell_of(edges, x, cell, last)
            j = _run_end(scores, edges, i, cell, last)
            left = edges[cell]
            scale = <double>(<int64_t>1 << bits) / (edges[cell + 1] - left)
            total, low, high = 0, <int64_t>top, 0
            for m in range(i, j):
                q = floor((scores[m] - left) * scale)
                step = 0 if not q > 0 else <int64_t>top if q > top else <int64_t>q
                total += step
                low = min(low, step)
                high = max(high, step)
            index[k] = <int32_t>cell
            count[k] = j - i
            ksum[k] = total
            kmin[k] = low
            kmax[k] = high
            k += 1
            i = j
    return index_[:k], count_[:k], ksum_[:k], kmin_[:k], kmax_[:k]


def add_steps(int64_t[::1] count, int64_t[::1] ksum, uint8_t[::1] qlo, uint8_t[::1] qhi,
              const int32_t[::1] index, const count_t[::1] c, const int64_t[::1] k,
              const uint8_t[::1] ql, const uint8_t[::1] qh):
    """Add one part's cells (:class:`~.core.CompactCells`) into dense arrays, in place.

    Counts and step sums add (integers: exactly, in any order), ``qlo`` takes the min and
    ``qhi`` the max. Returns the cells read, or -1 if the indices are not ascending within
    the grid or the arrays' lengths differ (corrupted bytes): nothing is written out of
    bounds.
    """
    cdef Py_ssize_t n = index.shape[0], m, size = count.shape[0]
    cdef int32_t i, previous = -1
    cdef bint valid = True
    if c.shape[0] != n or k.shape[0] != n or ql.shape[0] != n or qh.shape[0] != n:
        return -1
    with nogil:
        for m in range(n):  # checked first: a corrupted part adds nothing
            i = index[m]
            valid = valid & (i > previous) & (i < size)
            previous = i
    if not valid:
        return -1
    with nogil:
        for m in range(n):
            i = index[m]
            count[i] += c[m]
            ksum[i] += k[m]
            qlo[i] = min(qlo[i], ql[m])
            qhi[i] = max(qhi[i], qh[m])
    return n


# --------------------------------------------------------------------------- ABCC's table


def mark_cells(mark, const int32_t[::1] index):
    """``mark[index] = True`` (``mark`` bool): numpy's fancy assignment costs ~6x more."""
    cdef uint8_t[::1] marks = mark.view(np.uint8)
    cdef Py_ssize_t k
    with nogil:
        for k in range(index.shape[0]):
            marks[index[k]] = 1


def table_cells(mark, const double[::1] edges):
    """``_AbccTable``'s cells from their marks, in one pass: cells, left, right, gaps, extended.

    What ``cells = np.flatnonzero(mark)``, ``left, right = edges[cells], edges[cells + 1]``,
    ``gaps = left - np.r_[0.0, right[:-1]]`` and ``extended = right - np.r_[0.0,
    right[:-1]]`` give (five numpy passes and their temporaries).
    """
    cdef const uint8_t[::1] marks = mark.view(np.uint8)
    cdef Py_ssize_t size = 0, k, q = 0
    with nogil:
        for k in range(marks.shape[0]):
            size += marks[k] != 0
    cells_ = np.empty(size, dtype=np.intp)
    left_, right_, gaps_, extended_ = (np.empty(size) for _ in range(4))
    cdef Py_ssize_t[::1] cells = cells_
    cdef double[::1] left = left_, right = right_, gaps = gaps_, extended = extended_
    cdef double previous = 0.0
    with nogil:
        for k in range(marks.shape[0]):
            if marks[k]:
                cells[q] = k
                left[q], right[q] = edges[k], edges[k + 1]
                gaps[q] = edges[k] - previous
                extended[q] = edges[k + 1] - previous
                previous = edges[k + 1]
                q += 1
    return cells_, left_, right_, gaps_, extended_


def abcc_curves(const int32_t[::1] index, const int64_t[::1] count, const double[::1] total,
                const Py_ssize_t[::1] cells, const double[::1] right,
                const double[::1] extended, int64_t n, double[::1] F, double[::1] m,
                double[::1] G, int32_t[::1] pos):
    """One group's ``F``, ``m`` and ``G`` on the attribute's cells (``_AbccTable``), in place.

    ``index``, ``count``, ``total``: the group's cells, counts and sums; ``cells``: the
    table's cells (ascending, a superset of ``index``). ``pos`` (int32, a row like ``F``)
    receives, per table cell, the group's position of that cell, -1 where the group has none.
    The formulas: ``F = (cumsum(c) - c) / n``, ``m = c / n``, ``G = F * extended + (c * right
    - t) / n`` on the dense float arrays ``c`` and ``t``; no dense copy is made: between the
    group's cells ``c`` and ``t`` are 0.

    Divisions bound the pass (three a cell); fewer: the running count is an exact integer,
    so ``cumsum(c) - c`` is the previous cell's running count and ``F`` the previous quotient
    (one division per non-empty cell, none per empty one); ``c / n`` of small counts comes
    from a table of the same quotients; in an empty cell ``G`` is ``F * extended``.
    """
    cdef double nf = <double>n
    cdef double shares[SHARES]
    cdef Py_ssize_t c, k, p = 0, size = F.shape[0], used = index.shape[0]
    cdef int64_t whole
    cdef double running = 0.0, quotient = 0.0, cf, t
    with nogil:
        for c in range(SHARES):
            shares[c] = <double>c / nf
        for k in range(size):
            if p < used and index[p] == cells[k]:
                whole = count[p]
                cf = <double>whole
                t = total[p]
                pos[k] = <int32_t>p
                p += 1
                F[k] = quotient  # (running + c - c) / nf: the sum is exact, so running / nf
                running = running + cf
                quotient = running / nf
                m[k] = shares[whole] if whole < SHARES else cf / nf
                G[k] = F[k] * extended[k] + (cf * right[k] - t) / nf
            else:
                pos[k] = -1
                F[k] = quotient
                m[k] = 0.0
                G[k] = quotient * extended[k]


cdef inline double _spread(double mass, double mu, double lo, double hi) noexcept nogil:
    """Largest mean absolute deviation x mass of scores in [lo, hi] with mean mu."""
    mu = _min(_max(mu, lo), hi)
    cdef double width = hi - lo
    return 2 * mass * (mu - lo) * (hi - mu) / width if width > 0 else 0.0


cdef struct Group:
    # one group's side of a pair: its rows, its position of each table cell (-1: none), its
    # cells' counts and sums, and their bounds: uint8 steps (compact cells) or floats (raw)
    double n
    const int32_t* pos
    const int64_t* count
    const double* total
    const uint8_t* qlo
    const uint8_t* qhi
    const double* low
    const double* high
    bint steps


cdef Group _group(int64_t n, const int32_t[::1] pos, const int64_t[::1] count,
                  const double[::1] total, const uint8_t[::1] qlo, const uint8_t[::1] qhi,
                  const double[::1] low, const double[::1] high):
    """The pointers of one group's arrays (empty arrays: NULL; the memoryviews keep them)."""
    cdef Group g
    g.n = <double>n
    g.pos = &pos[0] if pos.shape[0] else NULL
    g.count = &count[0] if count.shape[0] else NULL
    g.total = &total[0] if total.shape[0] else NULL
    g.steps = qlo.shape[0] > 0
    g.qlo = &qlo[0] if qlo.shape[0] else NULL
    g.qhi = &qhi[0] if qhi.shape[0] else NULL
    g.low = &low[0] if low.shape[0] else NULL
    g.high = &high[0] if high.shape[0] else NULL
    return g


cdef void _dense(const Group* g, Py_ssize_t c, const double* left, const double* right,
                 double* out) noexcept nogil:
    """Group ``g``'s count, sum, min, max in table cell ``c`` into ``out[0:4]``.

    The bounds: decoded from the uint8 steps (``decode_bounds``' formula on the same cell
    edges) for compact cells, else the raw scores' exact min and max. A cell the group has no
    score in: no count or sum, the cell's edges.
    """
    cdef int32_t p = g.pos[c]
    cdef double edge, r, quantum
    if p >= 0:
        out[0] = <double>g.count[p]
        out[1] = g.total[p]
        if g.steps:
            edge, r = left[c], right[c]
            quantum = (r - edge) / 255
            out[2] = _bound(g.qlo[p], edge, r, quantum)
            out[3] = _bound(g.qhi[p], edge, r, quantum)
        else:
            out[2] = g.low[p]
            out[3] = g.high[p]
    else:
        out[0] = 0.0
        out[1] = 0.0
        out[2] = left[c]
        out[3] = right[c]


cdef void _estimate(double dq, double lo_edge, double r, const double* a, const double* b,
                    double na, double nb, double* estimate, double* error) noexcept nogil:
    """One ambiguous cell's ABCC estimate and its certified error (``compute._abcc_cells``).

    ``a``, ``b``: each group's count, sum, min, max in the cell (:c:func:`_dense`).
    """
    cdef double ja = a[0] / na, jb = b[0] / nb
    cdef double signed = dq * (r - lo_edge) + (a[0] * r - a[1]) / na - (b[0] * r - b[1]) / nb
    cdef double lo = fabs(signed)
    cdef double hi = (r - lo_edge) * _max(fabs(dq - jb), fabs(dq + ja))
    cdef double mid = (lo + hi) / 2, mid_err = (hi - lo) / 2
    cdef double mu_a = _min(_max(a[1] / a[0] if a[0] > 0 else lo_edge, lo_edge), r)
    cdef double mu_b = _min(_max(b[1] / b[0] if b[0] > 0 else lo_edge, lo_edge), r)
    cdef double first = _min(mu_a, mu_b), second = _max(mu_a, mu_b)
    cdef double between = dq + ja if mu_a <= mu_b else dq - jb
    cdef double step = (fabs(dq) * (first - lo_edge) + fabs(between) * (second - first)
                        + fabs(dq + ja - jb) * (r - second))
    cdef double step_err = _spread(ja, mu_a, a[2], a[3]) + _spread(jb, mu_b, b[2], b[3])
    if step_err < mid_err:
        estimate[0], error[0] = step, step_err
    else:
        estimate[0], error[0] = mid, mid_err


cdef void _ambiguous(const double* F_i, const double* F_j, const double* gaps,
                     const double* left, const double* right, const Group* gi, const Group* gj,
                     const Py_ssize_t* ia, Py_ssize_t namb, double* scratch,
                     double* out) noexcept nogil:
    """The flat stretches before the ambiguous cells ``ia[:namb]``, their estimates and errors.

    ``out[0:3]``: the three sums a pair adds (flat stretches, estimates, errors); ``scratch``
    holds at least ``3 * namb`` floats.
    """
    cdef double* estimate = scratch + namb
    cdef double* error = scratch + 2 * namb
    cdef double a[4]
    cdef double b[4]
    cdef double dq
    cdef Py_ssize_t q, c
    for q in range(namb):
        c = ia[q]
        dq = F_i[c] - F_j[c]
        scratch[q] = fabs(dq * gaps[c])
        _dense(gi, c, left, right, a)
        _dense(gj, c, left, right, b)
        _estimate(dq, left[c], right[c], a, b, gi.n, gj.n, &estimate[q], &error[q])
    out[0] = _sum(scratch, namb)
    out[1] = _sum(estimate, namb)
    out[2] = _sum(error, namb)


def ambiguous_part(const double[::1] F_i, const double[::1] F_j, const double[::1] gaps,
                   const double[::1] left, const double[::1] right, int64_t n_i, int64_t n_j,
                   const int32_t[::1] pos_i, const int64_t[::1] count_i,
                   const double[::1] total_i, const uint8_t[::1] qlo_i,
                   const uint8_t[::1] qhi_i, const double[::1] low_i, const double[::1] high_i,
                   const int32_t[::1] pos_j, const int64_t[::1] count_j,
                   const double[::1] total_j, const uint8_t[::1] qlo_j,
                   const uint8_t[::1] qhi_j, const double[::1] low_j, const double[::1] high_j,
                   const Py_ssize_t[::1] ia, Py_ssize_t namb, double[::1] scratch):
    """The ambiguous cells' part of an ABCC pair: ``(flat, estimate, error)`` sums.

    ``ia[:namb]``: the pair's ambiguous cells (ascending); ``scratch`` at least ``namb``
    floats (more are allocated here if needed). ``pos_*`` (from :func:`abcc_curves`), the
    counts, sums and bounds: each group's (:func:`_dense`'s inputs).
    """
    cdef Group gi = _group(n_i, pos_i, count_i, total_i, qlo_i, qhi_i, low_i, high_i)
    cdef Group gj = _group(n_j, pos_j, count_j, total_j, qlo_j, qhi_j, low_j, high_j)
    cdef double out[3]
    cdef double[::1] work = scratch
    if namb == 0:
        return 0.0, 0.0, 0.0
    if scratch.shape[0] < 3 * namb:
        work = np.empty(3 * namb)
    with nogil:
        _ambiguous(&F_i[0], &F_j[0], &gaps[0], &left[0], &right[0], &gi, &gj, &ia[0], namb,
                   &work[0], out)
    return out[0], out[1], out[2]


cdef inline bint _is_ambiguous(double d0, double m_i, double m_j) noexcept nogil:
    # F_a - F_b stays within [d0 - m_b, d0 + m_a] in a cell: ambiguous if that holds 0
    return (d0 < m_j) & (d0 > -m_i)


cdef Py_ssize_t _fixed_areas(const double* F_i, const double* F_j, const double* m_i,
                             const double* m_j, const double* G_i, const double* G_j,
                             Py_ssize_t n, double* area) noexcept nogil:
    """``|G_i - G_j|`` of ``n`` cells into ``area``, 0 where ambiguous; returns how many are.

    No branch in the loop: it vectorizes.
    """
    cdef Py_ssize_t k, found = 0
    cdef double d0
    cdef bint amb
    for k in range(n):
        d0 = F_i[k] - F_j[k]
        amb = _is_ambiguous(d0, m_i[k], m_j[k])
        area[k] = 0.0 if amb else fabs(G_i[k] - G_j[k])
        found += amb
    return found


def abcc_pair(const double[::1] F_i, const double[::1] F_j, const double[::1] m_i,
              const double[::1] m_j, const double[::1] G_i, const double[::1] G_j,
              const double[::1] gaps, const double[::1] left, const double[::1] right,
              int64_t n_i, int64_t n_j, const int32_t[::1] pos_i, const int64_t[::1] count_i,
              const double[::1] total_i, const uint8_t[::1] qlo_i, const uint8_t[::1] qhi_i,
              const double[::1] low_i, const double[::1] high_i, const int32_t[::1] pos_j,
              const int64_t[::1] count_j, const double[::1] total_j,
              const uint8_t[::1] qlo_j, const uint8_t[::1] qhi_j, const double[::1] low_j,
              const double[::1] high_j, double[::1] area, Py_ssize_t[::1] ia):
    """``_AbccTable.pair``: ABCC of two groups from the table, and its certified error.

    ``area`` and ``ia`` are scratch arrays as long as the table (no allocation per pair but
    the ambiguous cells' estimates). The fixed cells' areas are summed block by block as
    :func:`abcc_pairs` sums them: the same bits.
    """
    cdef Py_ssize_t size = F_i.shape[0], namb = 0, lo, n, k
    cdef double exact = 0.0
    cdef double out[3]
    if size == 0:
        return 0.0, 0.0
    cdef Group gi = _group(n_i, pos_i, count_i, total_i, qlo_i, qhi_i, low_i, high_i)
    cdef Group gj = _group(n_j, pos_j, count_j, total_j, qlo_j, qhi_j, low_j, high_j)
    with nogil:
        lo = 0
        while lo < size:
            n = min(BLOCK, size - lo)
            if _fixed_areas(&F_i[lo], &F_j[lo], &m_i[lo], &m_j[lo], &G_i[lo], &G_j[lo], n,
                            &area[lo]):
                for k in range(lo, lo + n):
                    if _is_ambiguous(F_i[k] - F_j[k], m_i[k], m_j[k]):
                        ia[namb] = k
                        namb += 1
            exact += _block_sum(&area[lo], n)
            lo += BLOCK
    if namb == 0:
        return exact, 0.0
    work = np.empty(3 * namb)
    cdef double[::1] scratch = work
    with nogil:
        _ambiguous(&F_i[0], &F_j[0], &gaps[0], &left[0], &right[0], &gi, &gj, &ia[0], namb,
                   &scratch[0], out)
    return exact + out[0] + out[1], out[2]


def abcc_pairs(const double[:, ::1] F, const double[:, ::1] m, const double[:, ::1] G,
               const Py_ssize_t[::1] first, const Py_ssize_t[::1] second, Py_ssize_t block,
               Py_ssize_t cap):
    """Sum the fixed cells of many pairs in one call, ``block`` blocks of cells at a time.

    ``F``, ``m``, ``G``: the table, a row per group. Blocks of ``BLOCK`` (128) cells are read
    ``block`` at a time for every pair in turn (the six rows a pair reads, ~5 MB for 10^5
    cells, then come from cache). The fixed cells' areas are computed without a branch
    (vectorized), and the ambiguous cells are listed in a second pass over the blocks that
    hold any (~1% of a pair's cells when its groups share a distribution). Each pair's
    ``exact`` is :func:`abcc_pair`'s, to the bit (the same blocks summed in the same order).
    Returns ``exact`` per pair and the ambiguous cells, ``ambiguous[p, :count[p]]``
    (``count[p] > cap``: not all kept, the caller runs that pair alone).
    """
    cdef Py_ssize_t pairs = first.shape[0], size = F.shape[1]
    cdef Py_ssize_t leaves = (size + BLOCK - 1) // BLOCK
    exact_ = np.zeros(pairs)
    ambiguous_ = np.empty((pairs, max(cap, 1)), dtype=np.intp)
    count_ = np.zeros(pairs, dtype=np.intp)
    cdef double[::1] exact = exact_
    cdef Py_ssize_t[:, ::1] ambiguous = ambiguous_
    cdef Py_ssize_t[::1] count = count_
    cdef double area[BLOCK]
    cdef Py_ssize_t b0, b1, p, i, j, namb, leaf, lo, n, k
    block = max(block, 1)
    b0 = 0
    with nogil:
        while b0 < leaves:
            b1 = min(leaves, b0 + block)
            for p in range(pairs):
                i, j = first[p], second[p]
                namb = count[p]
                for leaf in range(b0, b1):
                    lo = leaf * BLOCK
                    n = min(BLOCK, size - lo)
                    if _fixed_areas(&F[i, lo], &F[j, lo], &m[i, lo], &m[j, lo], &G[i, lo],
                                    &G[j, lo], n, area):
                        for k in range(lo, lo + n):
                            if _is_ambiguous(F[i, k] - F[j, k], m[i, k], m[j, k]):
                                if namb < cap:
                                    ambiguous[p, namb] = k
                                namb += 1
                    exact[p] += _block_sum(area, n)
                count[p] = namb
            b0 = b1
    return exact_, ambiguous_, count_


# --------------------------------------------------------------------------- MADD, ABPC


def counts_below(const index_t[::1] index, const count_t[::1] count, const Py_ssize_t[::1] slot,
                 Py_ssize_t wanted):
    """MADD's counts below its bin edges ``where`` (ascending) from a group's cells.

    Per ``where[j]``: the sum of ``count`` over the cells ``index < where[j]``. ``slot[k]``:
    the wanted edges ``<= k``, for every grid cell ``k`` (``where[j] > k`` iff ``j >=
    slot[k]``), so each cell's count goes to its slot and a cumulative sum over the
    ``wanted`` slots gives the counts: two branch-free passes. Integer sums: exact.
    """
    result = np.zeros(wanted + 1, dtype=np.int64)
    cdef int64_t[::1] out = result
    cdef Py_ssize_t p, j
    cdef int64_t running = 0
    with nogil:
        for p in range(index.shape[0]):
            out[slot[index[p]]] += count[p]
        for j in range(wanted):
            running += out[j]
            out[j] = running
    return result[:wanted]


def linear_binning_cells(const int32_t[::1] index, const int64_t[::1] count,
                         const double[::1] total, const double[::1] edges, Py_ssize_t cells):
    """``compute._binned`` of cells: their linear-binning weights on ``cells`` KDE cells.

    Each fine cell's count and sum split between the two KDE cells around its midpoint: what
    the two weighted ``np.bincount`` of the former numpy code give, added elementwise. Each
    KDE cell's run of consecutive fine cells adds in a register, written once at the run's
    end (cells in any order are still right: a KDE cell met again reads back its sum).
    """
    first_ = np.zeros(cells)
    second_ = np.zeros(cells)
    cdef double[::1] first = first_, second = second_
    cdef double g = <double>cells, mid, c, frac_sum, run_first = 0.0, run_second = 0.0
    cdef Py_ssize_t at_first = -1, at_second = -1, k, left_i, b
    with nogil:
        for k in range(index.shape[0]):
            mid = (edges[index[k]] + edges[index[k] + 1]) / 2
            left_i = <Py_ssize_t>floor(mid * g - 0.5)  # one KDE cell per fine cell
            c = <double>count[k]
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
    return first_ + second_
