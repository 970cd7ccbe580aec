"""Exact cross-group nearest-neighbour distances for HFM (paper 000, Eqs. 4-5), by blocked GEMM.

For one sensitive attribute, HFM needs for every row ``k`` the distance ``delta_k`` to its
nearest row carrying a *different* value of that attribute, in the space ``z = (label, x)``,
once with the true labels and once with the predictions. This module computes every such
distance exactly, for every attribute and both label versions, in one pass over the row pairs:

* Rows are grouped into *cells*: same value of every attribute, same true label, same predicted
  label. Rows sharing every attribute value (a *tuple*) are never candidates for each other,
  so a big tuple's rows skip its own columns: about ``sum_t n_t (n - n_t)`` pairs, not ``n**2``.
  Rows of small tuples share blocks, so an attribute with thousands of values costs no more
  Python iterations than a binary one.
* For a block of rows, one GEMM gives ``|x_j|**2 - 2 x_i . x_j`` against every column; an
  argmin per cell (a loop, or a segmented reduction when cells are many) keeps the nearest
  feature-space row of each cell. Within a cell both labels are constant, so the label term
  cannot change that choice.
* Per attribute and label version, the best cell among the allowed ones (another value of the
  attribute) is picked, and the winning pair's distance is **recomputed directly** from the
  coordinates: the GEMM identity loses digits by cancellation (an exact duplicate would come
  out as ~1e-7 instead of 0), the direct difference does not.

Features are kept compactly (:class:`FeatureSpace`, built from the user's ``X`` by
:func:`feature_space`): scaled numeric columns plus integer codes of categorical columns. Two
rows that differ in one categorical column differ in two of its one-hot coordinates, so they add
exactly 2 to the squared distance; the dense one-hot matrix is built only for the GEMM.
"""

from __future__ import annotations

import logging
import numbers
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._validation import check_finite, first_rows
from ...exceptions import InvalidInputError
from ...utils.groups import factorize

__all__ = ["FeatureSpace", "exact_cross_group_distances", "feature_space", "missing_values",
           "scale_columns"]

log = logging.getLogger(__name__)

#: Float64 elements of the GEMM output block (64 MiB): big enough for BLAS to run at full speed,
#: small enough to leave memory to the rest of a monitor process.
_BLOCK_ELEMENTS = 1 << 23

#: An attribute tuple (rows sharing every attribute value) with at least this many rows gets
#: blocks that skip its own columns; smaller tuples share blocks against all columns.
_OWN_BLOCK_ROWS = 256

#: Up to this many cells per block, one argmin per cell; beyond, a segmented reduction.
_LOOP_CELLS = 64


def _pack(codes: NDArray[np.intp], levels: tuple[int, ...]) -> tuple[NDArray[np.uint64], int]:
    """Pack categorical codes into 64-bit words of 8-, 16- or 32-bit lanes.

    One XOR then compares every categorical column of two rows at once (see
    :func:`_count_lanes`, and its compiled twin in :mod:`fairmonitor._kernels.hfm`); reading one
    word instead
    of one code per column is what makes the per-pair cost of ApproxDist small.
    """
    n = codes.shape[0]
    if not levels:
        return np.empty((0, n), dtype=np.uint64), 8
    bits = next(b for b in (8, 16, 32) if max(levels) <= 1 << b)
    lanes = 64 // bits
    width = -(-codes.shape[1] // lanes) * lanes
    padded = np.zeros((n, width), dtype=f"<u{bits // 8}")
    padded[:, : codes.shape[1]] = codes
    return np.ascontiguousarray(padded.view("<u8").T), bits


def _count_lanes(t: NDArray[np.uint64], bits: int) -> NDArray[np.uint64]:
    """Return the number of non-zero ``bits``-wide lanes in each 64-bit word."""
    shift = bits // 2
    while shift:  # fold every lane onto its lowest bit (bits never reach the next lane's bit 0)
        t |= t >> np.uint64(shift)
        shift //= 2
    ones = np.uint64(sum(1 << k for k in range(0, 64, bits)))
    t &= ones
    return (t * ones) >> np.uint64(64 - bits)  # the top lane sums all lanes' bits


@dataclass(frozen=True, slots=True)
class FeatureSpace:
    """Non-sensitive features as scaled numeric columns plus categorical codes.

    Attributes
    ----------
    columns : ndarray of shape (n_numeric, n)
        Numeric features, one row per feature (min-max scaled, or raw if scaling is off).
    codes : ndarray of shape (n, n_categorical)
        Category index of each categorical feature.
    levels : tuple of int
        Number of categories of each categorical feature (its one-hot width).
    packed : ndarray of shape (n_words, n)
        ``codes`` packed into 64-bit words of ``lane_bits``-bit lanes.
    lane_bits : int
        Lane width of ``packed``.
    """

    columns: NDArray[np.float64]
    codes: NDArray[np.intp]
    levels: tuple[int, ...]
    packed: NDArray[np.uint64]
    lane_bits: int

    @classmethod
    def build(cls, numeric: NDArray[np.float64], codes: NDArray[np.intp],
              levels: tuple[int, ...]) -> FeatureSpace:
        """From ``(n, n_numeric)`` numeric features and ``(n, n_categorical)`` codes."""
        packed, bits = _pack(codes, levels)
        return cls(np.ascontiguousarray(numeric.T), codes, levels, packed, bits)

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return self.columns.shape[1]

    @property
    def n_dims(self) -> int:
        """Dimension of the one-hot feature space (the paper's ``n_x``)."""
        return self.columns.shape[0] + sum(self.levels)

    def take(self, rows: NDArray[np.intp]) -> FeatureSpace:
        """Return the rows ``rows``, in that order."""
        return FeatureSpace(self.columns[:, rows], self.codes[rows], self.levels,
                            self.packed[:, rows], self.lane_bits)

    def sqdist(self, i: NDArray[np.intp], j: NDArray[np.intp],
               label: NDArray[np.float64]) -> NDArray[np.float64]:
        """Squared Euclidean distance between rows ``i`` and ``j`` of ``z = (label, x)``.

        ``i`` and ``j`` broadcast against each other. Both exact and approximate paths call
        this one function, so a pair's distance is bit-for-bit the same in both.
        """
        out = label[j] - label[i]
        out *= out
        for col in self.columns:
            d = col[j] - col[i]
            d *= d
            out += d
        if self.levels:
            mismatches = 0
            for word in self.packed:
                mismatches = mismatches + _count_lanes(word[j] ^ word[i], self.lane_bits)
            # a differing category flips two one-hot coordinates: +1 + 1
            out += 2.0 * mismatches
        return out

    def dense(self) -> NDArray[np.float64]:
        """Return the full ``(n, n_dims)`` matrix: numeric columns, then one-hot blocks."""
        n, n_num = self.n_samples, self.columns.shape[0]
        out = np.zeros((n, self.n_dims))
        out[:, :n_num] = self.columns.T
        start = n_num
        for c, width in enumerate(self.levels):
            out[np.arange(n), start + self.codes[:, c]] = 1.0
            start += width
        return out

    def project(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        """``x . w`` for every row, ``w`` given over the one-hot space (length ``n_dims``)."""
        n_num = self.columns.shape[0]
        # a multiply-add per column, not ``w @ columns``: a BLAS call would wake OpenBLAS's
        # threads, which then spin on the cores ApproxDist's own threads need
        g = np.zeros(self.n_samples)
        for weight, col in zip(w[:n_num], self.columns, strict=True):
            g += weight * col
        start = n_num
        for c, width in enumerate(self.levels):
            g += w[start : start + width][self.codes[:, c]]
            start += width
        return g


def _feature_columns(X: Any) -> list[tuple[str, NDArray[Any]]]:
    if X is None:
        raise InvalidInputError("`X` is required; HFM measures distances between rows' "
                                "non-sensitive features. Got None.")
    if hasattr(X, "columns"):  # DataFrame, by duck typing
        return [(str(c), np.asarray(X[c])) for c in X.columns]
    if isinstance(X, Mapping):
        return [(str(k), np.asarray(v)) for k, v in X.items()]
    arr = np.asarray(X)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise InvalidInputError(f"`X` must be 2-dimensional (rows x features); got shape "
                                f"{arr.shape}.")
    return [(f"x{j}", arr[:, j]) for j in range(arr.shape[1])]


def _is_numeric(col: NDArray[Any], name: str) -> bool:
    if col.dtype.kind in "biuf":
        return True
    if col.dtype.kind == "O":
        # one type() per element; isinstance against the numbers ABC is ~10x slower
        return all(issubclass(t, numbers.Real) for t in set(map(type, col)))
    if col.dtype.kind in "US":
        return False
    raise InvalidInputError(f"feature '{name}' of `X` has dtype {col.dtype}; HFM takes numbers "
                            "or categories (strings). Convert it, e.g. dates to a number of days.")


_MISSING_TYPES = {"NoneType", "NAType", "NaTType"}  # None, pandas.NA, pandas.NaT


def missing_values(col: NDArray[Any]) -> NDArray[np.bool_]:
    """Where an object array holds None, NaN, ``pandas.NA`` or ``pandas.NaT``."""
    if col.dtype.kind != "O":
        return np.zeros(col.shape, dtype=bool)
    names = {t.__name__ for t in set(map(type, col))}
    if not (names & _MISSING_TYPES or "float" in names):
        return np.zeros(col.shape, dtype=bool)
    return np.array([type(v).__name__ in _MISSING_TYPES or (isinstance(v, float) and v != v)
                     for v in col], dtype=bool)


def scale_columns(num: NDArray[np.float64], lo: NDArray[np.float64], span: NDArray[np.float64]
                  ) -> NDArray[np.float64]:
    """Min-max scale the columns of ``num`` given each column's minimum and ``max - min``.

    Elementwise, so rows scaled apart (a Spark partition's, with the minima and spans of all
    rows) get the same bits as rows scaled together.
    """
    # a constant column carries no distance; map it to 0 rather than divide by zero
    return np.where(span > 0, (num - lo) / np.where(span > 0, span, 1.0), 0.0)


def feature_space(X: Any, *, scale: bool) -> FeatureSpace:
    """Build the feature space of ``X``: numeric columns (min-max scaled) and categories.

    ``X`` is a DataFrame (duck-typed by ``.columns``), a mapping of columns or a 1-/2-D array.
    Numeric columns (and object columns holding only numbers) are numbers; string columns are
    categories, one-hot encoded implicitly.
    """
    columns = _feature_columns(X)
    if not columns:
        raise InvalidInputError("`X` has no feature columns; HFM needs at least one "
                                "non-sensitive feature.")
    lengths = {len(col) for _, col in columns}
    if len(lengths) > 1:
        raise InvalidInputError(f"feature columns of `X` differ in length ({sorted(lengths)}).")
    n = lengths.pop()
    numeric, codes, levels = [], [], []
    for name, col in columns:
        if col.ndim != 1:
            raise InvalidInputError(f"feature '{name}' of `X` must be 1-D; got shape "
                                    f"{col.shape}.")
        if _is_numeric(col, name):
            values = col.astype(np.float64)
            check_finite(values, f"X['{name}']")
            numeric.append(values)
            continue
        missing = missing_values(col)
        if missing.any():
            raise InvalidInputError(
                f"categorical feature '{name}' of `X` has {int(missing.sum())} missing values "
                f"(rows {first_rows(missing)}); fill them with an explicit category such as "
                "'unknown', or drop those rows.")
        if col.dtype.kind == "O" and not all(issubclass(t, str) for t in set(map(type, col))):
            col = col.astype(str)  # categories by their text: 1 and "1" are one category
        uniques, inverse = factorize(col)
        codes.append(inverse)
        levels.append(uniques.size)
    num = np.column_stack(numeric) if numeric else np.empty((n, 0))
    if scale and num.shape[1]:
        num = scale_columns(num, num.min(axis=0), np.ptp(num, axis=0))
    cat = np.column_stack(codes).astype(np.intp) if codes else np.empty((n, 0), dtype=np.intp)
    return FeatureSpace.build(num, cat, tuple(levels))


def _segments(sorted_keys: NDArray[np.intp], n_keys: int) -> NDArray[np.intp]:
    """Start offsets (length ``n_keys + 1``) of each key's run in a sorted key array."""
    return np.searchsorted(sorted_keys, np.arange(n_keys + 1))


def _cell_argmin(g: NDArray[np.float64], lo: NDArray[np.intp], hi: NDArray[np.intp]
                 ) -> NDArray[np.intp]:
    """Column of the minimum of every row of ``g`` within each segment ``[lo[k], hi[k])``.

    The segments tile the columns of ``g``. Few segments: one ``argmin`` each. Many (small)
    segments: a segmented min, then the first column equal to it, without a Python loop.
    """
    if lo.size <= _LOOP_CELLS:
        arg = np.empty((g.shape[0], lo.size), dtype=np.intp)
        for k in range(lo.size):
            arg[:, k] = g[:, lo[k]:hi[k]].argmin(axis=1) + lo[k]
        return arg
    mins = np.minimum.reduceat(g, lo, axis=1)
    column = np.where(g == np.repeat(mins, hi - lo, axis=1), np.arange(g.shape[1]), g.shape[1])
    return np.minimum.reduceat(column, lo, axis=1)


def _plan(tuple_start: NDArray[np.intp], n: int) -> list[tuple[NDArray[np.intp], int, int]]:
    """Row blocks as ``(rows, skip_lo, skip_hi)``; columns in ``[skip_lo, skip_hi)`` are skipped.

    A big attribute tuple gets blocks of its own that skip its own columns (its rows are
    never candidates for each other). The rows of small tuples share blocks against every
    column, so a thousand-valued attribute costs no more Python iterations than a binary one.
    """
    blocks, small = [], []
    for rs, re in zip(tuple_start[:-1].tolist(), tuple_start[1:].tolist(), strict=True):
        if re - rs >= _OWN_BLOCK_ROWS:
            step = max(1, _BLOCK_ELEMENTS // max(n - (re - rs), 1))
            blocks += [(np.arange(b, min(b + step, re)), rs, re) for b in range(rs, re, step)]
        elif re > rs:
            small.append(np.arange(rs, re))
    if small:
        rows = np.concatenate(small)
        step = max(1, _BLOCK_ELEMENTS // n)
        blocks += [(rows[b:b + step], 0, 0) for b in range(0, rows.size, step)]
    return blocks


def exact_cross_group_distances(
    space: FeatureSpace,
    label_true: NDArray[np.float64],
    label_pred: NDArray[np.float64],
    attributes: NDArray[np.intp],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Nearest cross-group distance of every row, per attribute, with true and predicted labels.

    Parameters
    ----------
    space : FeatureSpace
        The non-sensitive features.
    label_true, label_pred : ndarray of shape (n,)
        Class codes ``0..K-1`` (as floats) of the labels and the predictions.
    attributes : ndarray of shape (n, n_attributes)
        Group code of each row for each attribute; ``-1`` leaves the row out of that attribute
        (neither measured nor a candidate). Every attribute must have two kept groups.

    Returns
    -------
    delta_true, delta_pred : ndarray of shape (n_attributes, n)
        ``min ||z_k - z_l||`` over rows ``l`` of another group, with ``z = (label, x)``;
        NaN for rows left out of an attribute.
    """
    started = time.perf_counter()
    n_all, n_attr = attributes.shape
    delta = np.full((2, n_attr, n_all), np.nan)
    # rows left out of every attribute play no part at all
    used = np.flatnonzero((attributes >= 0).any(axis=1))
    n_classes = int(max(label_true.max(), label_pred.max())) + 1
    tuples, tuple_of_row = np.unique(attributes[used], axis=0, return_inverse=True)
    tuple_of_row = tuple_of_row.reshape(-1)
    cell_key = (tuple_of_row * n_classes + label_true[used].astype(np.intp)) * n_classes \
        + label_pred[used].astype(np.intp)
    cell_keys, cell_of_row = np.unique(cell_key, return_inverse=True)
    cell_of_row = cell_of_row.reshape(-1)
    # sorting by cell also sorts by tuple: the tuple is the cell key's leading digit
    order = used[np.argsort(cell_of_row, kind="stable")]
    sorted_cells = np.sort(cell_of_row)
    n, n_cells = used.size, cell_keys.size
    cell_start = _segments(sorted_cells, n_cells)
    cell_codes = tuples[cell_keys // (n_classes * n_classes)]  # (n_cells, n_attr)
    cell_labels = (((cell_keys // n_classes) % n_classes).astype(np.float64),
                   (cell_keys % n_classes).astype(np.float64))
    row_codes = tuples[np.sort(tuple_of_row)]  # (n, n_attr), sorted rows

    sorted_space = space.take(order)
    dense = sorted_space.dense()
    sq = np.einsum("ij,ij->i", dense, dense)
    minus2_t = np.ascontiguousarray((-2.0 * dense).T)  # (d, n): column slices stay BLAS-able
    labels = (label_true[order], label_pred[order])
    blocks = _plan(_segments(np.sort(tuple_of_row), tuples.shape[0]), n)
    log.info("hfm exact: %d rows, %d feature dims, %d attributes, %d cells, %d blocks", n,
             dense.shape[1], n_attr, n_cells, len(blocks))
    buffer = np.empty(_BLOCK_ELEMENTS + n)
    for done, (rows, rs, re) in enumerate(blocks, 1):
        # the cells outside the skipped range tile the columns [0, rs) + [re, n)
        others = np.flatnonzero((cell_start[1:] <= rs) | (cell_start[:-1] >= re))
        shift = np.where(cell_start[others] >= re, re - rs, 0)
        lo, hi = cell_start[others] - shift, cell_start[others + 1] - shift
        nb, n_cols = rows.size, n - (re - rs)
        g = buffer[: nb * n_cols].reshape(nb, n_cols)
        np.matmul(dense[rows], minus2_t[:, :rs], out=g[:, :rs])
        np.matmul(dense[rows], minus2_t[:, re:], out=g[:, rs:])
        g[:, :rs] += sq[:rs]
        g[:, rs:] += sq[re:]
        arg = _cell_argmin(g, lo, hi)
        # squared feature distances, accurate to ~1e-14 absolute: enough to pick the winner
        approx = np.take_along_axis(g, arg, axis=1) + sq[rows, None]
        arg += np.where(arg >= rs, re - rs, 0)  # back to sorted row positions
        for s in range(n_attr):
            mine, theirs = row_codes[rows, s], cell_codes[others, s]
            allowed = (theirs[None, :] != mine[:, None]) & (theirs >= 0)[None, :]
            measured = mine >= 0
            for v in range(2):
                lab = labels[v]
                total = approx + (lab[rows, None] - cell_labels[v][others]) ** 2
                total[~allowed] = np.inf
                best = np.take_along_axis(arg, total.argmin(axis=1)[:, None], axis=1)[:, 0]
                d2 = sorted_space.sqdist(rows[measured], best[measured], lab)
                delta[v, s, order[rows[measured]]] = np.sqrt(d2)
        log.debug("hfm exact: block %d/%d done", done, len(blocks))
    log.info("hfm exact: done in %.2f s", time.perf_counter() - started)
    return delta[0], delta[1]
