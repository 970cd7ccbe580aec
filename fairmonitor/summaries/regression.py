"""Mergeable window summaries of a regression model (``task: regression``).

A :class:`RegressionSummary` holds, for every sensitive attribute (and the intersection) and
every group:

- **error sums** (with targets): the sums of ``1, |r|, r^2, r`` over the group's rows
  (``r = y_pred - y_true``) and of their pairwise products (a 4 x 4 matrix). Every error-parity
  metric (MAE, RMSE, mean residual: gaps and ratios; bounded group loss) is a function of the
  sums, and its interval (the Poisson bootstrap's Gaussian form, the permutation null) of the
  sums and products: merging adds them, so a merged summary gives the rows' values (up to the
  sums' float round-off, ~1e-12 relative) and the rows' intervals.
- **the predictions**, as the classification summaries keep scores
  (:mod:`fairmonitor.summaries.core`): the group's raw sorted predictions while it has at
  most ``spec.max_raw`` rows (every distribution metric is then the row path's value, every
  option), else **cells** on a grid fixed for every window: a cell holds the predictions
  whose float64 bits agree in sign, exponent and the top :data:`GRID_BITS` bits of the
  mantissa (a relative width of ``2**-GRID_BITS``, whatever the predictions' units), and
  keeps their count, sum, min and max. From cells the KS distance and the Wasserstein-1
  distance are bounded below and above (:func:`fairmonitor.metrics.shared.
  regression_distribution_from_cells`): the value is the bounds' midpoint, and
  ``detail["error"]`` the certified half-width, 0 where a cell holds one value.
- **MADD's histogram**: with a configured ``value_range``, the predictions mapped to [0, 1]
  and clipped are summarized as scores by :func:`~fairmonitor.summaries.summarize` (raw, or
  the classification cells, which resolve every MADD grid up to ``max_bins`` exactly), so
  ``prediction_madd`` is exact at every size; the clipped rows are counted per group.

Summaries merge under the same :class:`~fairmonitor.summaries.SummarySpec`, attributes,
inputs and ``value_range`` (:func:`merge_all`); :func:`to_bytes` and :func:`from_bytes`
store them (and the classification summaries: they dispatch on the summary's kind).
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from .._validation import check_continuous
from ..exceptions import InvalidInputError
from ..metrics import (
    RegressionGap,
    prediction_distribution,
    prediction_madd,
    regression_errors,
)
from ..metrics.shared import (
    regression_distribution_from_cells,
    regression_error_values,
    regression_errors_from_sums,
    regression_group_moments,
)
from ..utils.groups import Groups, contiguous_groups, encode_attributes, exclude_small
from . import compute as _compute
from . import core as _core
from . import serialize as _serialize
from .core import GroupTable, SummarySpec, WindowSummary

__all__ = ["GRID_BITS", "FloatCells", "RegressionAttribute", "RegressionGroup",
           "RegressionSummary", "from_bytes", "merge_all", "regression_result",
           "summarize_regression", "to_bytes"]

#: Mantissa bits kept by a cell's key: cells of relative width 2**-10 (0.1%) of the values
#: (8 bits made the certified W1 error ~13x larger, for ~30% fewer bytes:
#: benchmarks/bench_regression_summaries.py).
GRID_BITS = 10
_SHIFT = 52 - GRID_BITS
_MAGIC = b"FMRSUM\x00\x01"
_FORMAT = 1


class FloatCells(NamedTuple):
    """A group's non-empty cells, in increasing order: key, count, sum, min and max."""

    key: NDArray[np.int64]
    count: NDArray[np.int64]
    total: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]


def cell_keys(values: NDArray[np.float64]) -> NDArray[np.int64]:
    """Return each value's cell: its float64 bits, ordered as the values, top bits kept.

    Non-decreasing in the value (negative numbers' bits flipped to sort first), the same in
    every window: cells of any two summaries line up.

    >>> k = cell_keys(np.array([-2.0, -1.0, 0.0, 1.0, 1.0001, 1.01, 2.0]))
    >>> bool(np.all(np.diff(k) >= 0)), int(k[3] == k[4]), int(k[4] == k[5])
    (True, 1, 0)
    """
    bits = np.ascontiguousarray(values + 0.0, dtype=np.float64).view(np.int64)  # -0.0 -> 0.0
    ordered = bits ^ ((bits >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))
    return ordered >> _SHIFT


def _cells_of(values: NDArray[np.float64]) -> FloatCells:
    """Cells of sorted values (one pass)."""
    keys = cell_keys(values)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], values.size]
    return FloatCells(keys[starts], (ends - starts).astype(np.int64),
                      np.add.reduceat(values, starts), values[starts], values[ends - 1])


def _merge_cells(parts: list[FloatCells]) -> FloatCells:
    """Add cells: counts and sums add, min and max combine (exact but for the sums' order)."""
    key = np.concatenate([p.key for p in parts])
    unique, inverse = np.unique(key, return_inverse=True)
    count = np.bincount(inverse, weights=np.concatenate([p.count for p in parts]),
                        minlength=unique.size).astype(np.int64)
    total = np.bincount(inverse, weights=np.concatenate([p.total for p in parts]),
                        minlength=unique.size)
    low, high = np.full(unique.size, np.inf), np.full(unique.size, -np.inf)
    np.minimum.at(low, inverse, np.concatenate([p.low for p in parts]))
    np.maximum.at(high, inverse, np.concatenate([p.high for p in parts]))
    return FloatCells(unique, count, total, low, high)


@dataclass(frozen=True, eq=False)
class RegressionGroup:
    """One group's error sums and prediction summary.

    Attributes
    ----------
    n : int
        Rows.
    errors : ndarray of shape (4,) or None
        Sums of ``1, |r|, r^2, r`` (None without targets).
    products : ndarray of shape (4, 4) or None
        Sums of their pairwise products (the intervals' covariances).
    values : ndarray or None
        Raw sorted predictions (at most ``max_raw`` rows).
    cells : FloatCells or None
        The predictions' cells (more than ``max_raw`` rows).
    clipped : int
        Rows whose prediction lies outside the summary's ``value_range``.
    """

    n: int
    errors: NDArray[np.float64] | None
    products: NDArray[np.float64] | None
    values: NDArray[np.float64] | None
    cells: FloatCells | None
    clipped: int = 0

    def as_cells(self) -> FloatCells:
        """Return the predictions' cells (raw values binned on the fly)."""
        return self.cells if self.cells is not None else _cells_of(self.values)  # type: ignore


@dataclass(frozen=True, eq=False)
class RegressionAttribute(GroupTable):
    """The groups of one sensitive attribute (or intersection), labels sorted."""

    name: str
    groups: Mapping[Any, RegressionGroup]

    @property
    def raw(self) -> bool:
        """True if every group keeps its raw predictions (every metric exact)."""
        return all(g.values is not None for g in self.groups.values())


@dataclass(frozen=True, eq=False)
class RegressionSummary:
    """A regression window's mergeable summary (:func:`summarize_regression`).

    Examples
    --------
    >>> s = summarize_regression({"g": ["a", "a", "b"]}, y_pred=[1.0, 2.0, 4.0],
    ...                          y_true=[1.0, 1.0, 1.0])
    >>> m = s.merge(s)
    >>> m.n_rows, m.attributes["g"].groups["a"].errors.tolist()
    (6, [4.0, 2.0, 2.0, 2.0])
    """

    spec: SummarySpec
    n_rows: int
    attributes: Mapping[str, RegressionAttribute]
    inputs: tuple[str, ...]  # y_pred, and y_true when the rows had targets
    value_range: tuple[float, float] | None = None
    #: the predictions mapped to [0, 1] by ``value_range``, summarized as scores (MADD)
    mapped: WindowSummary | None = None
    model: str = ""
    version: str = ""
    start: datetime | None = None
    end: datetime | None = None
    features: tuple[str, ...] = ()  # no row sample: no regression metric reads rows
    task: str = "regression"

    def merge(self, other: RegressionSummary) -> RegressionSummary:
        """Return the summary of both windows' rows (:func:`merge_all` of the two)."""
        return merge_all([self, other])  # type: ignore[return-value]

    def without_labels(self) -> RegressionSummary:
        """Return the same rows without their targets (the error sums dropped)."""
        if "y_true" not in self.inputs:
            return self
        attributes = {name: RegressionAttribute(name, {
            label: replace(g, errors=None, products=None) for label, g in a.groups.items()})
            for name, a in self.attributes.items()}
        return replace(self, attributes=attributes, inputs=("y_pred",))

    def nbytes(self) -> int:
        """Bytes of the arrays held."""
        total = 0 if self.mapped is None else self.mapped.nbytes()
        for a in self.attributes.values():
            for g in a.groups.values():
                total += 64 + 160 * (g.errors is not None)
                total += g.values.nbytes if g.values is not None else sum(
                    x.nbytes for x in g.cells)  # type: ignore[union-attr]
        return total


# --------------------------------------------------------------------------- building


def summarize_regression(sensitive_features: Any = None, *, y_pred: Any, y_true: Any = None,
                         intersection: bool = True, spec: SummarySpec | None = None,
                         groups: Mapping[str, Groups] | None = None,
                         value_range: tuple[float, float] | None = None, model: str = "",
                         version: str = "", start: datetime | None = None,
                         end: datetime | None = None) -> RegressionSummary:
    """Summarize one regression window's rows per sensitive attribute and group.

    Parameters
    ----------
    sensitive_features : mapping of str to array-like, DataFrame or array-like
        One column per attribute (or ``groups``, already encoded).
    y_pred, y_true : array-like of float
        Predictions and targets (targets optional: the error sums need them).
    spec : SummarySpec, optional
        ``max_raw`` (raw predictions up to it per group, cells above), ``max_bins`` (the MADD
        grid the mapped predictions resolve); ``sample_size`` is not used (no row metric).
    value_range : (float, float), optional
        ``prediction_madd``'s range: the mapped predictions are summarized for MADD.

    Returns
    -------
    summary : RegressionSummary

    Examples
    --------
    >>> s = summarize_regression({"g": ["a", "b", "b"]}, y_pred=[3.0, 1.0, 2.0])
    >>> s.attributes["g"].groups["b"].values.tolist()
    [1.0, 2.0]
    """
    spec = spec or SummarySpec()
    if groups is None:
        groups = encode_attributes(sensitive_features, intersection=intersection)
    pred = check_continuous(y_pred, "y_pred")
    true = None if y_true is None else check_continuous(y_true, "y_true")
    n = next(iter(groups.values())).codes.size
    for name, arr in (("y_pred", pred), ("y_true", true)):
        if arr is not None and arr.size != n:
            raise InvalidInputError(f"`{name}` has {arr.size} rows but `sensitive_features` "
                                    f"has {n}; pass arrays aligned row by row")
    rows = None if true is None else regression_error_values(pred - true)
    mapped, outside = None, None
    if value_range is not None:
        lo, hi = (float(v) for v in value_range)
        if not hi > lo:
            raise InvalidInputError(f"value_range must be (lo, hi) with lo < hi; got "
                                    f"{value_range!r}")
        value_range = (lo, hi)
        scaled = (pred - lo) / (hi - lo)
        outside = ((scaled < 0) | (scaled > 1)).astype(float)
        mapped = _core.summarize(None, y_score=np.clip(scaled, 0.0, 1.0), groups=groups,
                                 spec=SummarySpec(spec.max_raw, spec.max_bins, 0))
    attributes = {name: _attribute(name, g, pred, rows, outside, spec)
                  for name, g in groups.items()}
    return RegressionSummary(spec, n, attributes, ("y_pred",) if true is None
                             else ("y_true", "y_pred"), value_range, mapped, model, version,
                             start, end)


def _attribute(name: str, g: Groups, pred: NDArray[np.float64], rows: NDArray[Any] | None,
               outside: NDArray[np.float64] | None, spec: SummarySpec) -> RegressionAttribute:
    k = g.n_groups
    codes = g.codes.astype(np.intp, copy=False)
    sums = second = None
    if rows is not None:
        sums, second = regression_group_moments(rows, codes, k)
    clipped = (np.zeros(k) if outside is None
               else np.bincount(codes, weights=outside, minlength=k))
    order = np.lexsort((pred, codes))  # group after group, each sorted
    bounds = np.r_[0, np.cumsum(g.counts)]
    out = {}
    for j, label in enumerate(g.labels):
        values = pred[order[bounds[j]:bounds[j + 1]]]
        raw = spec.max_raw is None or values.size <= spec.max_raw
        out[label] = RegressionGroup(
            int(g.counts[j]), None if sums is None else sums[j],
            None if second is None else second[j], values if raw else None,
            None if raw else _cells_of(values), int(clipped[j]))
    return RegressionAttribute(name, out)


# --------------------------------------------------------------------------- merging


def _check(a: RegressionSummary, b: Any) -> None:
    if not isinstance(b, RegressionSummary):
        raise InvalidInputError("cannot merge a regression summary with a classification one")
    if a.spec.fingerprint != b.spec.fingerprint:
        raise InvalidInputError(
            f"cannot merge summaries made under different specs ({a.spec} vs {b.spec}); "
            "re-summarize one of them with the other's SummarySpec")
    if list(a.attributes) != list(b.attributes) or a.inputs != b.inputs \
            or a.value_range != b.value_range:
        raise InvalidInputError(
            f"cannot merge summaries of different attributes, inputs or value ranges: "
            f"{list(a.attributes)} {a.inputs} {a.value_range} vs {list(b.attributes)} "
            f"{b.inputs} {b.value_range}; summarize both windows with the same settings")


def _add(parts: list[Any]) -> Any:
    if parts[0] is None:
        return None
    total = parts[0].copy()
    for p in parts[1:]:
        total += p
    return total


def _merge_groups(groups: list[RegressionGroup], spec: SummarySpec) -> RegressionGroup:
    if len(groups) == 1:
        return groups[0]
    n = sum(g.n for g in groups)
    values = cells = None
    if all(g.values is not None for g in groups) and (spec.max_raw is None or n <= spec.max_raw):
        values = np.sort(np.concatenate([g.values for g in groups]))  # type: ignore[misc]
    else:
        cells = _merge_cells([g.as_cells() for g in groups])
    return RegressionGroup(n, _add([g.errors for g in groups]),
                           _add([g.products for g in groups]), values, cells,
                           sum(g.clipped for g in groups))


def merge_all(summaries: list[Any]) -> Any:
    """Merge many summaries at once: regression ones here, classification ones by the core's.

    The summary of the union of the rows: error sums and products add, raw predictions join
    (cells once a group passes ``max_raw``), cells add, the mapped predictions merge as
    scores do. Associative and commutative up to the sums' round-off.

    >>> h = [summarize_regression({"g": ["a", "b"]}, y_pred=[1.0, 2.0]) for _ in range(3)]
    >>> merge_all(h).attributes["g"].groups["b"].values.tolist()
    [2.0, 2.0, 2.0]
    """
    if not summaries:
        raise InvalidInputError("merge_all needs at least one summary")
    first = summaries[0]
    if not isinstance(first, RegressionSummary):
        return _core.merge_all(summaries)
    for other in summaries[1:]:
        _check(first, other)
    attributes = {}
    for name in first.attributes:
        by_label: dict[Any, list[RegressionGroup]] = {}
        for s in summaries:
            for label, g in s.attributes[name].groups.items():
                by_label.setdefault(label, []).append(g)
        attributes[name] = RegressionAttribute(name, {
            label: _merge_groups(gs, first.spec) for label, gs in sorted(by_label.items())})
    starts = [s.start for s in summaries if s.start is not None]
    ends = [s.end for s in summaries if s.end is not None]
    mapped = None if first.mapped is None else _core.merge_all([s.mapped for s in summaries])
    return replace(first, n_rows=sum(s.n_rows for s in summaries), attributes=attributes,
                   mapped=mapped, start=min(starts) if starts else None,
                   end=max(ends) if ends else None)


# --------------------------------------------------------------------------- evaluation


def _kept(attr: RegressionAttribute, min_group_size: int) -> Groups:
    """Return the groups kept by ``min_group_size`` (a stand-in row a group), warning."""
    counts = attr.counts
    return exclude_small(np.arange(counts.size, dtype=np.intp), list(attr.labels), counts,
                         attr.name, max(int(min_group_size), 1))


def _pseudo_rows(attr: RegressionAttribute) -> tuple[NDArray[np.float64], Groups]:
    """Return a raw attribute's predictions group after group, and their groups."""
    values = np.concatenate([g.values for g in attr.groups.values()])  # type: ignore[misc]
    return values, contiguous_groups(attr.labels, attr.counts, attr.name)


def _errors(summary: RegressionSummary, attr: RegressionAttribute, kw: dict[str, Any]) -> Any:
    if "y_true" not in summary.inputs:
        raise InvalidInputError("the summary has no targets (y_true)")
    kept = _kept(attr, kw.pop("min_group_size", 1))
    groups = list(attr.groups.values())
    sums = np.array([g.errors for g in groups], dtype=float)
    second = np.array([g.products for g in groups], dtype=float)
    return regression_errors_from_sums(sums, second, kept, **kw)


def _distribution(attr: RegressionAttribute, kw: dict[str, Any]) -> Any:
    if attr.raw:  # the rows' multiset: the metric function itself, every option
        values, groups = _pseudo_rows(attr)
        return prediction_distribution(values, sensitive_features=groups, **kw)
    kept = _kept(attr, kw.pop("min_group_size", 1))
    wanted = set(kept.labels)
    chosen = [g.as_cells() for label, g in attr.groups.items() if label in wanted]
    keys = np.unique(np.concatenate([c.key for c in chosen]))
    shape = (len(chosen), keys.size)
    count, total = np.zeros(shape), np.zeros(shape)
    low, high = np.full(shape, np.inf), np.full(shape, -np.inf)
    for j, c in enumerate(chosen):
        at = np.searchsorted(keys, c.key)
        count[j, at], total[j, at], low[j, at], high[j, at] = c.count, c.total, c.low, c.high
    return regression_distribution_from_cells(count, total, low, high, kept, **kw)


def _madd(summary: RegressionSummary, attr: RegressionAttribute, kw: dict[str, Any]) -> Any:
    wanted = kw.get("value_range")
    wanted = None if wanted is None else tuple(float(v) for v in wanted)
    if summary.mapped is not None and wanted == summary.value_range:
        # the classification machinery on the mapped predictions: exact at every size
        lo, hi = summary.value_range  # type: ignore[misc]
        result = _compute.madd_from_summary(
            summary.mapped.attributes[attr.name], max_bins_cells=summary.spec.max_bins,
            bandwidth=kw.get("bandwidth", "auto"), min_group_size=kw.get("min_group_size", 1))
        pair = None if result.worst is None else tuple(result.worst.groups)
        return _regression_gap(float(result.value), pair, {
            "madd": result, "range": (lo, hi), "range_source": "option",
            "clipped": sum(g.clipped for g in attr.groups.values())})
    if attr.raw:
        values, groups = _pseudo_rows(attr)
        return prediction_madd(values, sensitive_features=groups, **kw)
    raise InvalidInputError(
        "prediction_madd on a summary of cells needs the value_range it was summarized with "
        f"(summarized with {summary.value_range}, asked {wanted}); set "
        "options.prediction_madd.value_range")


def _regression_gap(value: float, pair: Any, detail: Any) -> RegressionGap:
    return RegressionGap(value, "prediction_madd", extremes=pair, detail=detail)


def regression_result(func: Any, summary: RegressionSummary, attr: str,
                      kwargs: Mapping[str, Any]) -> Any:
    """Return ``func``'s result (a regression metric family's function) from the summary.

    ``func`` is :func:`~fairmonitor.metrics.regression_errors`,
    :func:`~fairmonitor.metrics.prediction_distribution` or
    :func:`~fairmonitor.metrics.prediction_madd`; ``kwargs`` the keywords it takes (as the
    report passes them on rows; ``sample_weight`` is not: a summary's rows are unweighted).

    >>> from fairmonitor.metrics import regression_errors
    >>> s = summarize_regression({"g": ["a", "b"]}, y_pred=[1.0, 3.0], y_true=[0.0, 0.0])
    >>> float(regression_result(regression_errors, s, "g", {}).mae_difference)
    2.0
    """
    a = summary.attributes[attr]
    kw = dict(kwargs)
    if func is regression_errors:
        return _errors(summary, a, kw)
    if func is prediction_distribution:
        return _distribution(a, kw)
    if func is prediction_madd:
        return _madd(summary, a, kw)
    raise InvalidInputError(f"{getattr(func, '__name__', func)!r} is not computed from a "
                            "regression summary")


# --------------------------------------------------------------------------- bytes


def to_bytes(summary: Any) -> bytes:
    """Serialize a regression summary (a classification one by the core's format).

    Header (JSON: spec, identity, groups), then the arrays (``numpy.save`` each), then a
    CRC-32 trailer, as the classification format.

    >>> s = summarize_regression({"g": ["a", "b"]}, y_pred=[1.0, 2.0], y_true=[1.0, 1.0])
    >>> back = from_bytes(to_bytes(s))
    >>> back.attributes["g"].groups["b"].errors.tolist(), back.inputs
    ([1.0, 1.0, 1.0, 1.0], ('y_true', 'y_pred'))
    """
    if not isinstance(summary, RegressionSummary):
        return _serialize.to_bytes(summary)
    arrays: list[NDArray[Any]] = []

    def put(a: Any) -> int | None:
        if a is None:
            return None
        arrays.append(np.asarray(a))
        return len(arrays) - 1

    attributes = []
    for a in summary.attributes.values():
        entries = []
        for label, g in a.groups.items():
            entries.append({"label": _label(label), "n": g.n, "clipped": g.clipped,
                            "errors": put(g.errors), "products": put(g.products),
                            "values": put(g.values),
                            "cells": None if g.cells is None else [put(x) for x in g.cells]})
        attributes.append({"name": a.name, "groups": entries})
    spec = summary.spec
    header = {"format": _FORMAT, "spec": {"max_raw": spec.max_raw, "max_bins": spec.max_bins,
                                          "sample_size": spec.sample_size},
              "grid_bits": GRID_BITS, "n_rows": summary.n_rows, "inputs": list(summary.inputs),
              "value_range": summary.value_range, "model": summary.model,
              "version": summary.version, "start": _time(summary.start),
              "end": _time(summary.end), "attributes": attributes,
              "mapped": put(None if summary.mapped is None else np.frombuffer(
                  _serialize.to_bytes(summary.mapped), dtype=np.uint8))}
    out = io.BytesIO()
    np.savez(out, *arrays)
    text = json.dumps(header, separators=(",", ":")).encode()
    body = _MAGIC + struct.pack("<Q", len(text)) + text + out.getvalue()
    return body + struct.pack("<I", zlib.crc32(body))


def from_bytes(data: bytes) -> Any:
    """Load a summary written by :func:`to_bytes` (either kind).

    Raises
    ------
    InvalidInputError
        Not a summary, or corrupted (checksum), or made with another cell grid.
    """
    data = bytes(data)
    if data[:len(_MAGIC)] != _MAGIC:
        return _serialize.from_bytes(data)
    if len(data) < len(_MAGIC) + 12 or zlib.crc32(data[:-4]) != struct.unpack(
            "<I", data[-4:])[0]:
        raise InvalidInputError("regression window summary checksum mismatch: the data is "
                                "corrupted or truncated; re-summarize the window")
    (size,) = struct.unpack_from("<Q", data, len(_MAGIC))
    start = len(_MAGIC) + 8
    header = json.loads(data[start:start + size].decode())
    if header.get("format") != _FORMAT or header.get("grid_bits") != GRID_BITS:
        raise InvalidInputError("regression window summary of another format or cell grid; "
                                "re-summarize the window")
    with np.load(io.BytesIO(data[start + size:-4]), allow_pickle=False) as npz:
        arrays = [npz[f"arr_{k}"] for k in range(len(npz.files))]

    def get(k: int | None) -> Any:
        return None if k is None else arrays[k]

    attributes = {}
    for a in header["attributes"]:
        attributes[a["name"]] = RegressionAttribute(a["name"], {
            _unlabel(g["label"]): RegressionGroup(
                g["n"], get(g["errors"]), get(g["products"]), get(g["values"]),
                None if g["cells"] is None else FloatCells(*(get(k) for k in g["cells"])),
                g["clipped"]) for g in a["groups"]})
    mapped = get(header["mapped"])
    value_range = header["value_range"]
    return RegressionSummary(
        SummarySpec(**header["spec"]), header["n_rows"], attributes, tuple(header["inputs"]),
        None if value_range is None else tuple(value_range),
        None if mapped is None else _serialize.from_bytes(mapped.tobytes()), header["model"],
        header["version"], _when(header["start"]), _when(header["end"]))


def _label(value: Any) -> Any:
    """Return a group label as JSON, tuples (intersections) kept apart."""
    if isinstance(value, tuple):
        return {"t": [_label(v) for v in value]}
    return {"v": value.item() if hasattr(value, "item") else value}


def _unlabel(tagged: Mapping[str, Any]) -> Any:
    return tuple(_unlabel(v) for v in tagged["t"]) if "t" in tagged else tagged["v"]


def _time(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def _when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)

