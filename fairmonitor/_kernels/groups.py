"""Compiled group-encoding kernels (numba): one pass over the rows where numpy makes several.

A window is encoded once (:func:`~fairmonitor.utils.groups.encode_attributes`) and every
metric reads the codes, so this is the part of a window's cost that grows with its rows
whatever the metrics. Three kernels:

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

numba is already a dependency (HFM, MADD); this module is imported only for columns of at
least ``fairmonitor.utils.groups.COMPILED_MIN_ROWS`` rows, so ``import fairmonitor`` does not
load numba (:mod:`fairmonitor._kernels`).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import compiled

#: Fibonacci hashing's multiplier (2^64 / golden ratio): spreads aligned pointers over the
#: table's slots (their low 4 bits are always zero).
_SPREAD = np.uint64(0x9E3779B97F4A7C15)


@compiled
def _identity_pass(words, capacity, most, codes):  # pragma: no cover - compiled
    """Codes of ``words`` by first occurrence, with a table of ``capacity`` slots.

    Returns the number of distinct words and the row of each one's first occurrence, or -1
    when more than ``most`` (at most ``capacity // 2``) distinct words turn up (the caller
    retries with a larger table, or gives up: growing inside the loop keeps numba from
    keeping the table in registers).
    """
    table = np.full(capacity, -1, np.int64)
    keys = np.empty(most, np.uint64)
    first = np.empty(most, np.int64)
    mask = np.uint64(capacity - 1)
    k = 0
    for i in range(words.size):
        w = np.uint64(words[i])  # a pointer (size_t) widened: 32-bit platforms too
        slot = ((w * _SPREAD) >> np.uint64(32)) & mask
        while True:
            t = table[slot]
            if t >= 0:
                if keys[t] == w:
                    codes[i] = t
                    break
                slot = (slot + np.uint64(1)) & mask  # linear probing
            else:
                if k == most:
                    return -1, first
                table[slot] = k
                keys[k] = w
                first[k] = i
                codes[i] = k
                k += 1
                break
    return k, first


def identity_codes(col: NDArray[Any], limit: int | None = None
                   ) -> tuple[NDArray[np.int32], NDArray[np.int64]] | None:
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


def distinct_codes(words: NDArray[Any], limit: int | None = None
                   ) -> tuple[NDArray[np.int32], NDArray[np.int64]] | None:
    """Codes of 64-bit words by first occurrence (pointers or hashes), or None past ``limit``.

    ``limit`` defaults to a quarter of the words (+ 64): past it, coding by these words saves
    little over coding the values themselves, and the table would grow with the rows.

    >>> codes, first = distinct_codes(np.array([7, 3, 7], dtype=np.uint64), 10)
    >>> codes.tolist(), first.tolist()
    ([0, 1, 0], [0, 1])
    """
    if limit is None:
        limit = words.size // 4 + 64
    codes = np.empty(words.size, dtype=np.int32)
    capacity = 256
    while True:
        most = min(capacity // 2, limit + 1)
        k, first = _identity_pass(words, capacity, most, codes)
        if k >= 0:
            return codes, first[:k].copy()
        if most > limit:  # more than `limit` distinct words
            return None
        capacity *= 16


@compiled
def count_codes(codes, k):  # pragma: no cover - compiled
    """``np.bincount(codes, minlength=k)`` without bincount's ``intp`` copy of narrow codes.

    Negative codes (rows of excluded groups) are skipped.
    """
    counts = np.zeros(k, np.int64)
    for i in range(codes.size):
        c = codes[i]
        if c >= 0:
            counts[c] += 1
    return counts


@compiled
def cross_codes(left, right, k_right, radix, out):  # pragma: no cover - compiled
    """``out = left * k_right + right`` and the count of every cell ``0..radix-1``."""
    counts = np.zeros(radix, np.int64)
    for i in range(left.size):
        c = np.int64(left[i]) * k_right + np.int64(right[i])
        out[i] = c
        counts[c] += 1
    return counts


@compiled
def remap_codes(codes, remap, out):  # pragma: no cover - compiled
    """``out[i] = remap[codes[i]]`` without numpy's ``intp`` copy of the index."""
    for i in range(codes.size):
        out[i] = remap[codes[i]]
    return out


@compiled
def _group_starts(counts):  # pragma: no cover - compiled
    """Where each group's rows start when laid out group after group."""
    at = np.zeros(counts.size, np.int64)
    for j in range(1, counts.size):
        at[j] = at[j - 1] + counts[j - 1]
    return at


@compiled
def group_order(codes, counts, out):  # pragma: no cover - compiled
    """Stable-argsort ``codes`` (kept rows, code >= 0) by counting: O(n), no sort."""
    at = _group_starts(counts)
    for i in range(codes.size):
        c = codes[i]
        if c >= 0:
            out[at[c]] = i
            at[c] += 1
    return out


@compiled
def group_layout(codes, counts, values, out):  # pragma: no cover - compiled
    """``values`` laid out group after group, each group's rows in row order (stable)."""
    at = _group_starts(counts)
    for i in range(codes.size):
        c = codes[i]
        if c >= 0:
            out[at[c]] = values[i]
            at[c] += 1
    return out


@compiled
def outcome_counts(codes, k, pred, true):  # pragma: no cover - compiled
    """Rows per (group, ``2 * label + prediction``); ``true`` empty when there are no labels."""
    counts = np.zeros((k, 4), np.int64)
    labelled = true.size > 0
    for i in range(codes.size):
        c = codes[i]
        if c >= 0:
            cell = np.int64(pred[i])
            if labelled:
                cell += 2 * np.int64(true[i])
            counts[c, cell] += 1
    return counts
