"""A stable 64-bit key per row: equal rows get equal keys in any process, on any machine.

Python's ``hash`` of a string changes between processes; these keys do not, so a window's row
sample (:func:`fairmonitor.summaries.summarize`, the rows with the smallest keys) is the same
wherever and however often it is made, and Spark's executors pick the same HFM query rows
(:mod:`fairmonitor.spark._hfm_partition`).

>>> keys = row_keys({"a": np.array([1, 2, 1]), "b": np.array(["x", "y", "x"])}, 3)
>>> bool(keys[0] == keys[2]), bool(keys[0] == keys[1])
(True, False)
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["column_bits", "row_keys", "splitmix"]


def splitmix(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's finalizer: every input bit flips about half the output bits."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def column_bits(col: NDArray[Any]) -> NDArray[np.uint64]:
    """Give a uint64 per value, equal for equal values in any process (no Python ``hash``)."""
    col = np.asarray(col)
    if col.dtype.kind in "biu":
        return col.astype(np.int64).view(np.uint64)
    if col.dtype.kind == "f":
        return (col.astype(np.float64) + 0.0).view(np.uint64)  # -0.0 hashes as 0.0
    uniques, inverse = np.unique(col.astype(str), return_inverse=True)
    crc = np.array([zlib.crc32(u.encode()) for u in uniques], dtype=np.uint64)
    return crc[inverse.reshape(-1)]


def row_keys(columns: Mapping[str, NDArray[Any]], n: int) -> NDArray[np.uint64]:
    """Mix every column's bits into one key per row, column after column."""
    key = np.zeros(n, dtype=np.uint64)
    for col in columns.values():
        with np.errstate(over="ignore"):
            key = splitmix(key ^ column_bits(col))
    return key
