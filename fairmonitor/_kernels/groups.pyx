# cython: language_level=3
"""Compiled group-encoding kernels (Cython): one pass over the rows where numpy makes several.

A window is encoded once (:func:`~fairmonitor.utils.groups.encode_attributes`) and every
metric reads the codes, so this is the part of a window's cost that grows with its rows
whatever the metrics. The kernels serve every column, short or long (one implementation: the
numpy formulations they replaced are the tests' oracles):

- :func:`identity_codes` factorizes an object column (strings, as pandas hands them out) by
  the identity of its objects: an object array is a C array of ``PyObject *``, and rows
  holding the same object hold the same value. A hash table of the K distinct pointers
  gives every row a code in one pass (~3 ns a row), and only the K distinct objects are
  compared as values afterwards: the dict pass over 10^6 Python strings it replaces costs
  ~45 ms a column. Columns whose equal strings are distinct objects (no interning) still
  give the same codes, through the value pass over the distinct objects.
- :func:`cross_codes` derives an intersection's codes from its attributes' codes (mixed
  radix), counting each cell in the same pass: no ``int64`` temporary per row.
- :func:`group_layout` and :func:`group_order` lay rows out group after group (a stable
  counting sort, O(n)) instead of a stable argsort of the codes.
- :func:`outcome_counts`: rows per group and (label, prediction), the confusion counts every
  parity metric and summary reads, in one pass.

Codes come in any signed integer type (the narrowest that holds them: int8 for < 128 groups);
the ``def`` functions are fused over int8/16/32/64 and dispatch on the arrays' dtypes. Every
loop runs without the GIL. Integer results: equal to numpy's by construction.
"""

import ctypes

import numpy as np

cimport cython
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint64_t

ctypedef fused code_t:
    int8_t
    int16_t
    int32_t
    int64_t

ctypedef fused other_t:
    int8_t
    int16_t
    int32_t
    int64_t

ctypedef fused wide_t:
    int32_t
    int64_t

ctypedef fused count_t:
    int32_t
    int64_t

#: Fibonacci hashing's multiplier (2^64 / golden ratio): spreads aligned pointers over the
#: table's slots (their low 4 bits are always zero).
cdef uint64_t _SPREAD = 0x9E3779B97F4A7C15ULL

#: Signed integer dtypes the kernels take; other codes are widened to int64 first.
_CODE_TYPES = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))


def signed_codes(codes):
    """Return ``codes`` as the kernels take them: contiguous, of a signed integer dtype.

    No copy when they are (int8/16/32/64, C-contiguous); other integer types are widened to
    int64.

    >>> signed_codes(np.array([0, 1], dtype=np.uint8)).dtype
    dtype('int64')
    """
    codes = np.ascontiguousarray(codes)
    return codes if codes.dtype in _CODE_TYPES else codes.astype(np.int64)


cdef Py_ssize_t _identity_pass(const uint64_t[::1] words, Py_ssize_t capacity, Py_ssize_t most,
                               int32_t[::1] codes, int64_t[::1] table, uint64_t[::1] keys,
                               int64_t[::1] first) noexcept nogil:
    """Codes of ``words`` by first occurrence, with a table of ``capacity`` slots.

    Returns the number of distinct words (their first rows in ``first``), or -1 when more
    than ``most`` (at most ``capacity // 2``) distinct words turn up: the caller retries with
    a larger table, or gives up.
    """
    cdef uint64_t mask = <uint64_t>(capacity - 1)
    cdef uint64_t w, slot
    cdef int64_t t
    cdef Py_ssize_t i, k = 0
    for i in range(words.shape[0]):
        w = words[i]
        slot = ((w * _SPREAD) >> 32) & mask
        while True:
            t = table[slot]
            if t >= 0:
                if keys[t] == w:
                    codes[i] = <int32_t>t
                    break
                slot = (slot + 1) & mask  # linear probing
            else:
                if k == most:
                    return -1
                table[slot] = k
                keys[k] = w
                first[k] = i
                codes[i] = <int32_t>k
                k += 1
                break
    return k


def identity_codes(col, limit=None):
    """Codes of an object column's rows by object identity, and each object's first row.

    ``limit``: give up (return None) once more than about ``limit`` distinct objects turn up
    (default: :func:`distinct_codes`', a quarter of the rows). Identity pays only where rows
    share objects; a column that holds a new object per row (pandas 3 hands out arrow
    strings so, and database drivers their text) would otherwise build a table of every row
    (4 GB at 10^7 rows) and then compare every row's value anyway. The caller then
    factorizes by value.

    >>> a, b = "x" * 3, "y" * 3
    >>> codes, first = identity_codes(np.array([a, b, a, a], dtype=object))
    >>> codes.tolist(), first.tolist()
    ([0, 1, 0, 0], [0, 1])
    >>> identity_codes(np.array([f"{i % 2}x" for i in range(8)], dtype=object), limit=4) is None
    True
    """
    if col.dtype != object or col.ndim != 1:
        raise TypeError("identity_codes takes a 1-D object array")
    col = np.ascontiguousarray(col)
    # the pointers themselves, read in place: valid while `col` (which holds a reference to
    # every object) is alive, i.e. for this function's duration
    words = np.frombuffer((ctypes.c_size_t * col.size).from_address(col.ctypes.data),
                          dtype=np.uintp) if col.size else np.zeros(0, np.uintp)
    return distinct_codes(words, limit)


def distinct_codes(words, limit=None):
    """Codes of 64-bit words by first occurrence (pointers or hashes), or None past ``limit``.

    ``limit`` defaults to a quarter of the words (+ 64): past it, coding by these words saves
    little over coding the values themselves, and the table would grow with the rows.

    >>> codes, first = distinct_codes(np.array([7, 3, 7], dtype=np.uint64), 10)
    >>> codes.tolist(), first.tolist()
    ([0, 1, 0], [0, 1])
    """
    words = np.ascontiguousarray(words)
    words = words.view(np.uint64) if words.itemsize == 8 else words.astype(np.uint64)
    if limit is None:
        limit = words.size // 4 + 64
    codes = np.empty(words.size, dtype=np.int32)
    cdef Py_ssize_t capacity = 256, most, k
    while True:
        most = min(capacity // 2, limit + 1)
        table = np.full(capacity, -1, np.int64)
        keys = np.empty(most, np.uint64)
        first = np.empty(most, np.int64)
        k = _identity_pass(words, capacity, most, codes, table, keys, first)
        if k >= 0:
            return codes, first[:k].copy()
        if most > limit:  # more than `limit` distinct words
            return None
        capacity *= 16


def count_codes(const code_t[::1] codes, Py_ssize_t k):
    """``np.bincount(codes, minlength=k)`` without bincount's ``intp`` copy of narrow codes.

    Negative codes (rows of excluded groups) are skipped.

    >>> count_codes(np.array([1, -1, 1, 0], dtype=np.int8), 3).tolist()
    [1, 2, 0]
    """
    out = np.zeros(k, np.int64)
    cdef int64_t[::1] counts = out
    cdef Py_ssize_t i
    cdef code_t c
    cdef bint bad = False
    with nogil:
        for i in range(codes.shape[0]):
            c = codes[i]
            if c >= 0:
                if c >= k:
                    bad = True
                    break
                counts[c] += 1
    if bad:
        _out_of_range("count_codes", k)
    return out


def cross_codes(const code_t[::1] left, const other_t[::1] right, int64_t k_right, int64_t radix,
                wide_t[::1] out):
    """``out = left * k_right + right`` and the count of every cell ``0..radix-1``.

    >>> out = np.empty(3, dtype=np.int32)
    >>> cross_codes(np.array([0, 1, 1], dtype=np.int8), np.array([1, 0, 1], dtype=np.int8),
    ...             2, 4, out).tolist(), out.tolist()
    ([0, 1, 1, 1], [1, 2, 3])
    """
    if right.shape[0] != left.shape[0] or out.shape[0] != left.shape[0]:
        raise ValueError("cross_codes: left, right and out differ in length")
    result = np.zeros(radix, np.int64)
    cdef int64_t[::1] counts = result
    cdef Py_ssize_t i
    cdef int64_t c
    cdef bint bad = False
    with nogil:
        for i in range(left.shape[0]):
            c = <int64_t>left[i] * k_right + <int64_t>right[i]
            if c < 0 or c >= radix:
                bad = True
                break
            out[i] = <wide_t>c
            counts[c] += 1
    if bad:
        _out_of_range("cross_codes", radix)
    return result


def remap_codes(const code_t[::1] codes, const other_t[::1] remap, other_t[::1] out):
    """``out[i] = remap[codes[i]]`` without numpy's ``intp`` copy of the index.

    >>> remap_codes(np.array([2, 0], dtype=np.int32), np.array([5, 6, 7], dtype=np.int8),
    ...             np.empty(2, dtype=np.int8)).tolist()
    [7, 5]
    """
    if out.shape[0] != codes.shape[0]:
        raise ValueError("remap_codes: codes and out differ in length")
    cdef Py_ssize_t i, k = remap.shape[0]
    cdef code_t c
    cdef bint bad = False
    with nogil:
        for i in range(codes.shape[0]):
            c = codes[i]
            if c < 0 or c >= k:
                bad = True
                break
            out[i] = remap[c]
    if bad:
        _out_of_range("remap_codes", k)
    return out.base


def _out_of_range(name, k):
    raise ValueError(f"{name}: a code lies outside 0..{k - 1}: the codes and their "
                     "counts do not match")


cdef int64_t[::1] _group_starts(const count_t[::1] counts, Py_ssize_t size):
    """Where each group's rows start when laid out group after group; then the total.

    ``counts.size + 1`` entries, the last the total, checked against ``size`` (the output's).
    """
    at = np.zeros(counts.shape[0] + 1, np.int64)
    cdef int64_t[::1] starts = at
    cdef Py_ssize_t j
    for j in range(counts.shape[0]):
        if counts[j] < 0:
            raise ValueError("a group's count is negative")
        starts[j + 1] = starts[j] + counts[j]
    if starts[counts.shape[0]] != size:
        raise ValueError(f"the groups' counts add up to {starts[counts.shape[0]]}, "
                         f"not the {size} rows laid out")
    return starts


def group_order(const code_t[::1] codes, const count_t[::1] counts, int64_t[::1] out):
    """Stable-argsort ``codes`` (kept rows, code >= 0) by counting: O(n), no sort.

    ``counts``: rows per group (``out`` holds their total). Codes beyond the groups, or more
    rows of a group than its count, raise ValueError (nothing is written out of bounds).

    >>> group_order(np.array([1, 0, -1, 1], dtype=np.int8), np.array([1, 2]),
    ...             np.empty(3, dtype=np.intp)).tolist()
    [1, 0, 3]
    """
    cdef int64_t[::1] at = _group_starts(counts, out.shape[0])
    cdef int64_t[::1] end = np.asarray(at)[1:].copy()
    cdef Py_ssize_t i, k = counts.shape[0]
    cdef code_t c
    cdef bint bad = False
    with nogil:
        for i in range(codes.shape[0]):
            c = codes[i]
            if c >= 0:
                if c >= k or at[c] >= end[c]:
                    bad = True
                    break
                out[at[c]] = i
                at[c] += 1
    if bad:
        _out_of_range("group_order", k)
    return out.base


def group_layout(const code_t[::1] codes, const count_t[::1] counts, const double[::1] values,
                 double[::1] out):
    """``values`` laid out group after group, each group's rows in row order (stable).

    Checked as :func:`group_order`.

    >>> group_layout(np.array([1, 0, 1], dtype=np.int8), np.array([1, 2]),
    ...              np.array([0.5, 0.25, 0.75]), np.empty(3)).tolist()
    [0.25, 0.5, 0.75]
    """
    if values.shape[0] != codes.shape[0]:
        raise ValueError("group_layout: codes and values differ in length")
    cdef int64_t[::1] at = _group_starts(counts, out.shape[0])
    cdef int64_t[::1] end = np.asarray(at)[1:].copy()
    cdef Py_ssize_t i, k = counts.shape[0]
    cdef code_t c
    cdef bint bad = False
    with nogil:
        for i in range(codes.shape[0]):
            c = codes[i]
            if c >= 0:
                if c >= k or at[c] >= end[c]:
                    bad = True
                    break
                out[at[c]] = values[i]
                at[c] += 1
    if bad:
        _out_of_range("group_layout", k)
    return out.base


def outcome_counts(const code_t[::1] codes, Py_ssize_t k, const int8_t[::1] pred,
                   const int8_t[::1] true):
    """Rows per (group, ``2 * label + prediction``); ``true`` empty when there are no labels.

    Column 3 is the true positives, 1 the false positives, 2 the false negatives, 0 the true
    negatives (0 and 1 only, without labels). Rows of excluded groups (code -1) are skipped.

    >>> outcome_counts(np.array([0, 0, 1, -1], dtype=np.int8), 2,
    ...                np.array([1, 0, 1, 1], dtype=np.int8),
    ...                np.array([1, 1, 0, 0], dtype=np.int8)).tolist()
    [[0, 0, 1, 1], [0, 1, 0, 0]]
    """
    if pred.shape[0] != codes.shape[0] or (true.shape[0] and true.shape[0] != codes.shape[0]):
        raise ValueError("outcome_counts: codes, pred and true differ in length")
    result = np.zeros((k, 4), np.int64)
    cdef int64_t[:, ::1] counts = result
    cdef bint labelled = true.shape[0] > 0
    cdef Py_ssize_t i
    cdef code_t c
    cdef int cell
    cdef bint bad = False
    with nogil:
        for i in range(codes.shape[0]):
            c = codes[i]
            if c >= 0:
                cell = pred[i]
                if labelled:
                    cell |= true[i] << 1
                if c >= k or (pred[i] & ~1) or (labelled and (true[i] & ~1)):
                    bad = True
                    break
                counts[c, cell] += 1
    if bad:
        raise ValueError(f"outcome_counts: a code outside 0..{k - 1}, or a prediction or "
                         "label other than 0 and 1")
    return result
