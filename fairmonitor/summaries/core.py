"""Mergeable window summaries: per (attribute, group) counts, scores and a row sample.

A :class:`WindowSummary` holds, for every sensitive attribute (and the intersection) and every
group: the row count, the confusion counts, the score summary and a row sample. Two summaries of
disjoint rows merge by addition (:meth:`WindowSummary.merge`, associative and commutative), and
:func:`fairmonitor.report.evaluate_summary` evaluates a summary into the same ``WindowReport``
as :func:`~fairmonitor.report.evaluate_window`, which itself computes through a summary.

Score summary of a group (spec: issue 17):

- **raw**: the group's scores, sorted, while the group has at most ``spec.max_raw`` rows (or
  always, ``max_raw=None``, as ``evaluate_window`` does: the window holds the rows anyway).
  Every score metric is then the raw-row value with every option.
- **cells**: above ``max_raw``, the count of the scores in each cell between consecutive
  edges of the union of ``linspace(0, 1, m + 1)`` for every ``m <= max_bins`` (MADD
  ``"auto"``'s candidates) and the dyadic grid ``k / 2**DYADIC_BITS``, the sum of their
  positions in the cell to ``1 / 2**STEP_BITS`` of its width (integer steps), and bounds of
  the scores in the cell (:class:`CompactCells`). MADD (auto and every fixed ``m <=
  max_bins``) is then exact: each of its bins is a union of cells. ABCC is exact in every
  cell where the two CDFs cannot cross (count + sum give the integral of a CDF over a cell)
  up to the sums' steps, and bounded in the others: the summary certifies its error
  (``AbccFromCells.error``, which the bounds tighten and the steps widen by ~1e-9). ABPC's
  linear binning onto ``2**k`` cells, ``k < DYADIC_BITS``, follows from counts and sums too
  (every grid centre is a dyadic edge), within the error the steps can move it (certified
  too, ``.error`` of its detail). Counts and steps are integers: merging cells is exact.

Row sample: per group, the ``spec.sample_size`` rows with the smallest hash of their content
(a bottom-k sample: deterministic, and the sample of merged summaries is the sample of the
union). HFM, CFair and robustness read it when the rows themselves are gone; their values are
then estimates (see :func:`fairmonitor.report.evaluate_summary`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import check_scores
from ..exceptions import InvalidInputError
from ..metrics.shared import madd_grid as _grid
from ..utils.groups import INTERSECTION_SEPARATOR, Groups, encode_attributes, outcome_counts
from ..utils.rowkeys import row_keys as _row_keys

__all__ = ["CONTENT_VERSION", "DYADIC_BITS", "STEP_BITS", "SUMMARY_VERSION", "AttributeSummary",
           "CompactCells", "DerivedGroups", "GroupSummary", "SummarySpec", "WindowSummary",
           "cell_edges", "merge_all", "summarize"]

#: Format version of a serialized summary; bumped when the layout of the bytes changes (4: a
#: coarser attribute's groups stored as their counts only, their scores and row sample
#: derived from the intersection's groups on read; 5: cells as step sums, compressed).
#: Formats 3 and 4 are still read (their cells converted to step sums on load).
SUMMARY_VERSION = 5
#: What a summary's numbers mean (the spec's fingerprint hashes it): 4 since cells keep their
#: sums as steps (format 5); a summary of formats 3 and 4 (content 3) is converted on load
#: and then merges with format 5's.
CONTENT_VERSION = 4
#: The cells include every edge ``k / 2**DYADIC_BITS``: ABPC grids up to 2**13 cells bin exactly.
DYADIC_BITS = 14


@dataclass(frozen=True)
class SummarySpec:
    """What a summary keeps; summaries merge only under the same spec (its fingerprint).

    Parameters
    ----------
    max_raw : int or None, default=65536
        Groups with at most this many rows keep their raw sorted scores (8 bytes a score in
        memory, ~6 serialized): every score metric is then the raw-row value. Larger ones
        keep cells (:class:`CompactCells`: ~3-4 bytes serialized per non-empty cell, at most
        ~96k cells whatever the rows: a group of 10^5 rows costs ~2 bytes a row, a third of
        its raw scores' bytes), from which MADD comes exactly and ABCC and ABPC within the
        errors their details certify (the cells' steps add ~1e-9 to ABCC's and ~5e-8 to
        ABPC's; ABCC's, from cells where two groups' CDFs cross, measured up to ~5e-7 at
        10^5-10^6 rows a group). Lower it to trade exactness for bytes. None keeps raw
        scores always.
    max_bins : int, default=499
        MADD ``"auto"``'s grid (the cells reproduce every ``m <= max_bins``).
    sample_size : int, default=256
        Rows kept per group for the row metrics (HFM, CFair, robustness); 0 keeps none.
    """

    max_raw: int | None = 1 << 16
    max_bins: int = 499
    sample_size: int = 256

    @property
    def fingerprint(self) -> str:
        """Hash of everything that decides what a summary's numbers mean.

        >>> SummarySpec().fingerprint == SummarySpec().fingerprint != SummarySpec(500).fingerprint
        True
        """
        return self.fingerprint_of(CONTENT_VERSION)

    def fingerprint_of(self, content: int) -> str:
        """Return the fingerprint this spec had under content version ``content`` (older ones)."""
        fields = {"version": content, "max_raw": self.max_raw, "max_bins": self.max_bins,
                  "sample_size": self.sample_size, "dyadic_bits": DYADIC_BITS,
                  "hash": "splitmix64-crc32-v1"}
        if content >= 4:
            fields["step_bits"] = STEP_BITS
        text = json.dumps(fields)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=4)
def cell_edges(max_bins: int) -> NDArray[np.float64]:
    """Sorted distinct edges of the cells: MADD's grid edges and the dyadic grid.

    >>> e = cell_edges(499)
    >>> bool(e[0] == 0.0 and e[-1] == 1.0 and np.all(np.diff(e) > 0)), e.size > 80_000
    (True, True)
    """
    edges = np.union1d(_grid(max_bins, None).edges,
                       np.arange((1 << DYADIC_BITS) + 1) / float(1 << DYADIC_BITS))
    edges.flags.writeable = False
    return edges


def _cells_of(sorted_scores: NDArray[np.float64], edges: NDArray[np.float64]) -> Cells:
    """Non-empty cells of sorted scores: index, count, sum, min, max.

    Cell k is ``[e_k, e_k+1)``, the last one closed at 1; a cell's scores are one run of the
    sorted scores. One compiled walk of the scores (:func:`fairmonitor._kernels.cells.
    cells_of_sorted`), whatever their number: what summarizing a group and merging raw
    parts both use.

    >>> index, count, total, low, high = _cells_of(np.array([0.1, 0.1, 0.7, 1.0]),
    ...                                            cell_edges(499))
    >>> count.tolist(), total.tolist(), high.tolist()
    ([2, 1, 1], [0.2, 0.7, 1.0], [0.1, 0.7, 1.0])
    """
    from .._kernels.cells import cells_of_sorted

    return cells_of_sorted(np.ascontiguousarray(sorted_scores, dtype=np.float64), edges)


#: A group's non-empty cells: index, count, sum, min and max of the scores in each.
Cells = tuple[NDArray[np.int32], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64],
              NDArray[np.float64]]

#: Steps of a cell's width in which :class:`CompactCells` stores its bounds (uint8: 0..255).
QUANTA = 255
#: A score's position in its cell is kept to ``1 / 2**STEP_BITS`` of the cell's width (the
#: cells' sums: :class:`CompactCells`).
STEP_BITS = 16


def _step_bounds(index: NDArray[np.integer[Any]], kmin: NDArray[np.int64],
                 kmax: NDArray[np.int64], edges: NDArray[np.float64]
                 ) -> tuple[NDArray[np.uint8], NDArray[np.uint8]]:
    """Bounds of cells whose scores' steps lie in ``[kmin, kmax]``, quantized outward.

    A score at step ``k`` lies in ``[left + k u, left + (k + 1) u]`` up to its quotient's
    rounding; a step more on each side covers that (compiled: ``quantize_bounds`` of
    ``max(left + (kmin - 1) u, left)`` and ``min(left + (kmax + 2) u, right)``). Monotone in
    ``kmin`` and ``kmax``, so the bounds of merged cells (min of ``qlo``, max of ``qhi``) are
    those of the union.
    """
    from .._kernels.cells import step_bounds

    return step_bounds(np.ascontiguousarray(index), np.ascontiguousarray(kmin, dtype=np.int64),
                       np.ascontiguousarray(kmax, dtype=np.int64), edges, STEP_BITS)


class CompactCells:
    """A group's non-empty cells, compact; reads as the tuple ``(index, count, sum, min, max)``.

    What is kept, per non-empty cell:

    - :attr:`index`: which cell (int32, ascending);
    - :attr:`count`: the scores in the cell, of any integer dtype;
    - :attr:`ksum`: the sum of the scores' **steps** (int64): a score ``x`` of cell ``[l,
      r)`` is at step ``floor((x - l) * 2**STEP_BITS / (r - l))``, so the cell's sum is known
      to within ``u = (r - l) / 2**STEP_BITS`` a score (:attr:`total` decodes it as if
      each score sat in the middle of its step). Integers: merging adds them exactly, so a
      merged summary's cells are the whole's, bit for bit, in any order; and they cost ~2
      bytes a cell serialized instead of a float64's 8;
    - :attr:`qlo`, :attr:`qhi`: bounds of the scores in the cell, uint8 steps of 1/255 of the
      cell's width, rounded outward from the scores' smallest and largest step
      (:func:`_step_bounds`; a cell of one score: from its step alone, so they are not
      stored). Only ABCC's certified error on cells where two CDFs may cross reads them.

    The sums' error is certified: ABCC's and ABPC's errors from cells add what it can move
    them (:attr:`step_error`, the sum of ``count * u`` over the cells, divided by the rows:
    ~1e-10 of a group's scores). MADD and the counts read :attr:`count` only: exact.

    Indexing, slicing or iterating gives the tuple form a field at a time (cached): ``index``
    int32, ``count`` int64, ``sum`` float64 (decoded), ``min`` and ``max`` float64 (the
    quantized bounds).

    Examples
    --------
    >>> edges = cell_edges(499)
    >>> c = _compact_sorted(np.array([0.1, 0.1, 0.7]), edges)
    >>> index, count, total, low, high = c
    >>> count.tolist(), bool(abs(total[0] - 0.2) <= c.step_error), bool(low[0] <= 0.1 <= high[0])
    ([2, 1], True, True)
    """

    __slots__ = ("_error", "_fields", "_total", "count", "edges", "index", "ksum", "qhi", "qlo")

    def __init__(self, edges: NDArray[np.float64], index: NDArray[np.integer[Any]],
                 count: NDArray[np.integer[Any]], ksum: NDArray[np.int64],
                 qlo: NDArray[np.uint8], qhi: NDArray[np.uint8]) -> None:
        self.edges = edges
        self.index = index.astype(np.int32, copy=False)
        self.count, self.ksum, self.qlo, self.qhi = count, ksum, qlo, qhi
        self._total: NDArray[np.float64] | None = None
        self._error: float | None = None
        self._fields: list[NDArray[Any] | None] = [None] * 5

    @property
    def size(self) -> int:
        """Non-empty cells."""
        return int(self.index.size)

    @property
    def bitmap(self) -> NDArray[np.uint8]:
        """Bit ``k`` (``k % 8`` of byte ``k // 8``) set where cell ``k`` is not empty."""
        mark = np.zeros(self.edges.size - 1, dtype=bool)
        mark[self.index] = True
        return np.packbits(mark, bitorder="little")

    @property
    def total(self) -> NDArray[np.float64]:
        """The cells' sums, decoded: ``count * left + (ksum + count / 2) * u`` (cached)."""
        if self._total is None:
            left, right = self.edges[self.index], self.edges[self.index + 1]
            count = self.count.astype(np.float64)
            self._total = count * left + (self.ksum + 0.5 * count) * np.ldexp(
                right - left, -STEP_BITS)
        return self._total

    @property
    def step_error(self) -> float:
        """Largest ``sum |decoded - true|`` over the cells: ``sum(count * u)``.

        Each score is within ``u / 2`` of its step's middle (plus its quotient's rounding):
        ``u`` a score bounds both.
        """
        if self._error is None:  # once: every pair of groups reads it
            widths = self.edges[self.index + 1] - self.edges[self.index]
            self._error = float(np.ldexp(np.einsum("i,i->", self.count.astype(np.float64),
                                                   widths), -STEP_BITS))
        return self._error

    @property
    def nbytes(self) -> int:
        """Bytes held: the stored arrays (not the decoded fields)."""
        return int(self.index.nbytes + self.count.nbytes + self.ksum.nbytes
                   + self.qlo.nbytes + self.qhi.nbytes)

    def _field(self, k: int) -> NDArray[Any]:
        field_ = self._fields[k]
        if field_ is None:
            if k == 0:
                field_ = self.index
            elif k == 1:
                field_ = self.count.astype(np.int64, copy=False)
            elif k == 2:
                field_ = self.total
            else:  # both bounds in one compiled pass, only when they are read
                from .._kernels.cells import decode_bounds

                self._fields[3], self._fields[4] = decode_bounds(self.index, self.qlo,
                                                                 self.qhi, self.edges)
                field_ = self._fields[k]
            self._fields[k] = field_
        return field_  # type: ignore[return-value]

    def __len__(self) -> int:
        return 5

    def __getitem__(self, k: int | slice) -> Any:
        if isinstance(k, slice):
            return tuple(self._field(j) for j in range(5)[k])
        return self._field(range(5)[k])

    def __iter__(self) -> Any:
        return (self._field(k) for k in range(5))

    def __repr__(self) -> str:
        return f"CompactCells({self.size} cells)"


def _compact_sorted(sorted_scores: NDArray[np.float64], edges: NDArray[np.float64]
                    ) -> CompactCells:
    """Return the cells of sorted scores: counts, step sums and bounds (one compiled walk)."""
    from .._kernels.cells import steps_of_sorted

    index, count, ksum, kmin, kmax = steps_of_sorted(
        np.ascontiguousarray(sorted_scores, dtype=np.float64), edges, STEP_BITS)
    qlo, qhi = _step_bounds(index, kmin, kmax, edges)
    return CompactCells(edges, index, count, ksum, qlo, qhi)


@dataclass(frozen=True, eq=False)
class GroupSummary:
    """One group's counts, score summary and row sample.

    Attributes
    ----------
    n : int
        Rows.
    predicted_positive : int or None
        Rows predicted 1 (None without predictions).
    confusion : tuple of int or None
        ``(tp, fp, fn, tn)`` (None without labels).
    moments : tuple of float or None
        ``(sum, sum of squares, min, max)`` of the scores (None without scores).
    scores : ndarray or None
        Raw sorted scores (raw mode).
    cells : CompactCells or None
        The non-empty cells (cells mode): compact arrays, read as the tuple ``(index,
        count, sum, min, max)``, min and max being bounds of the scores quantized outward to
        1/255 of the cell's width (see :class:`CompactCells`).
    sample_keys : ndarray of uint64
        Hash keys of the sampled rows, ascending.
    sample : mapping of str to ndarray
        The sampled rows' columns (``y_true``, ``y_pred``, ``y_score``, ``x:<feature>``).
    """

    n: int
    predicted_positive: int | None
    confusion: tuple[int, int, int, int] | None
    moments: tuple[float, float, float, float] | None
    scores: NDArray[np.float64] | None
    cells: CompactCells | None
    sample_keys: NDArray[np.uint64]
    sample: Mapping[str, NDArray[Any]]

    def sparse_cells(self, edges: NDArray[np.float64]) -> Cells | CompactCells:
        """Return the non-empty cells, as ``(index, count, sum, min, max)``.

        Raw scores are binned on the fly (with their exact min and max).
        """
        return self.cells if self.cells is not None else _cells_of(
            self.scores, edges)  # type: ignore[arg-type]


def _merge_optional(a: Any, b: Any, add: Any) -> Any:
    if (a is None) != (b is None):
        raise InvalidInputError(
            "summaries with and without the same inputs (labels, predictions or scores) cannot "
            "merge; summarize both with the same columns"
        )
    return None if a is None else add(a, b)


def _merge_group(a: GroupSummary, b: GroupSummary, spec: SummarySpec) -> GroupSummary:
    n = a.n + b.n
    moments = _merge_optional(a.moments, b.moments, lambda x, y: (
        x[0] + y[0], x[1] + y[1], min(x[2], y[2]), max(x[3], y[3])))
    scores = cells = None
    if a.moments is not None:
        if a.scores is not None and b.scores is not None and (
                spec.max_raw is None or n <= spec.max_raw):
            # two sorted runs: timsort ("stable") merges them in O(n), a multiset: order-free
            scores = np.sort(np.concatenate([a.scores, b.scores]), kind="stable")
        else:
            cells = _merge_many_cells([a, b], cell_edges(spec.max_bins))
    keys = np.concatenate([a.sample_keys, b.sample_keys])
    # equal keys mean equal sampled columns (the key hashes them), so which of two equal-key
    # rows is kept does not change the sample: merge(a, b) == merge(b, a)
    order = np.argsort(keys, kind="stable")[: spec.sample_size]
    sample = {c: np.concatenate([a.sample[c], b.sample[c]])[order] for c in a.sample}
    if set(a.sample) != set(b.sample):
        raise InvalidInputError(
            f"row samples with different columns cannot merge: {sorted(a.sample)} vs "
            f"{sorted(b.sample)}; summarize both windows with the same feature columns"
        )
    return GroupSummary(
        n, _merge_optional(a.predicted_positive, b.predicted_positive, int.__add__),
        _merge_optional(a.confusion, b.confusion,
                        lambda x, y: tuple(int(p + q) for p, q in zip(x, y, strict=True))),
        moments, scores, cells, keys[order], sample)


class GroupTable:
    """What every kind of attribute summary reads off its ``groups`` (labels sorted).

    Shared by :class:`AttributeSummary` and the regression summary's attribute
    (:mod:`.regression`): a group is anything with its row count ``n``.
    """

    groups: Mapping[Any, Any]

    @property
    def labels(self) -> tuple[Any, ...]:
        """Group labels, sorted as :func:`~fairmonitor.metrics.encode_groups` sorts them."""
        return tuple(self.groups)

    @property
    def counts(self) -> NDArray[np.intp]:
        """Rows per group."""
        return np.array([g.n for g in self.groups.values()], dtype=np.intp)


@dataclass(frozen=True, eq=False)
class AttributeSummary(GroupTable):
    """The groups of one sensitive attribute (or intersection), labels sorted.

    ``parent``: ``(intersection, position)`` when the groups are derived from the
    intersection's (every row of group ``g`` is in an intersection group whose label has
    ``g`` at ``position``): :attr:`groups` is then a :class:`DerivedGroups`, which stores each
    group's counts and makes its scores and row sample on read from the intersection's
    groups, and the serialized summary stores only the counts (format 4).
    """

    name: str
    groups: Mapping[Any, GroupSummary]
    parent: tuple[str, int] | None = None

    @property
    def raw(self) -> bool:
        """True if every group keeps raw scores (all score metrics exact, every option)."""
        return all(g.scores is not None for g in self.groups.values())


def _head(g: GroupSummary) -> GroupSummary:
    """Return a group's counts and moments only: what a derived attribute stores of it."""
    return GroupSummary(g.n, g.predicted_positive, g.confusion, g.moments, None, None,
                        np.zeros(0, dtype=np.uint64), {c: v[:0] for c, v in g.sample.items()})


class DerivedGroups(Mapping[Any, GroupSummary]):
    """A coarser attribute's groups, their scores and row sample made on read from the cells.

    The cells are the intersection's groups (``source``); group ``g`` of the coarser
    attribute is the union of the cells whose label has ``g`` at ``position``. Stored per
    group (``heads``): the row count, confusion counts and score moments, as summarized from
    the group's own rows. Made on first read (:func:`_derive_group`, then cached):

    - raw scores (group of at most ``max_raw`` rows, so every cell of it raw too): the cells'
      scores sorted together, the very array summarizing the group's rows gives;
    - cells, every cell of the group raw: the same sorted array binned, as summarizing does
      (identical bits);
    - cells, some cell of the group holding cells (a cell above ``max_raw`` rows): the cells
      merged as :func:`merge_all` merges: the cells the group's own rows give, bit for bit
      (integer counts and step sums, bounds from the steps);
    - row sample: the smallest keys of the cells' samples, which hold the group's smallest
      keys (each cell keeps its own ``sample_size`` smallest): the group's own sample.

    ``cache`` holds groups already made (:func:`summarize` passes those it has).

    Raises
    ------
    InvalidInputError
        The counts do not add up to the cells' (corrupted bytes).
    """

    def __init__(self, heads: Mapping[Any, GroupSummary], source: AttributeSummary,
                 position: int, spec: SummarySpec,
                 cache: Mapping[Any, GroupSummary] | None = None) -> None:
        self.heads, self.source, self.position, self.spec = dict(heads), source, position, spec
        self.members: dict[Any, list[Any]] = {label: [] for label in self.heads}
        for label in source.groups:
            if label[position] not in self.members:
                raise InvalidInputError(
                    f"the intersection's group {label!r} has no group of its attribute: "
                    "the summary is corrupted; re-summarize the window")
            self.members[label[position]].append(label)
        for label, head in self.heads.items():
            if sum(source.groups[m].n for m in self.members[label]) != head.n:
                raise InvalidInputError(
                    f"group {label!r} counts {head.n} rows but its intersection groups do not: "
                    "the summary is corrupted; re-summarize the window")
        self._cache = dict(cache or {})

    def __getitem__(self, label: Any) -> GroupSummary:
        group = self._cache.get(label)
        if group is None:
            group = _derive_group(self.heads[label],
                                  [self.source.groups[m] for m in self.members[label]],
                                  self.spec)
            self._cache[label] = group
        return group

    def __iter__(self) -> Any:
        return iter(self.heads)

    def __len__(self) -> int:
        return len(self.heads)

    def __repr__(self) -> str:
        return f"DerivedGroups({list(self.heads)!r} from {self.source.name!r})"


def _merged_sample(head: GroupSummary, groups: list[GroupSummary], spec: SummarySpec
                   ) -> dict[str, Any]:
    """Return the row sample of the union of ``groups``: its ``spec.sample_size`` smallest keys."""
    keys = np.concatenate([g.sample_keys for g in groups])
    order = np.argsort(keys, kind="stable")[: spec.sample_size]
    sample = {c: np.concatenate([g.sample[c] for g in groups])[order] for c in head.sample}
    return {"sample_keys": keys[order], "sample": sample}


def _derive_group(head: GroupSummary, cells: list[GroupSummary], spec: SummarySpec
                  ) -> GroupSummary:
    """One group of a derived attribute, from its stored counts and its cells (see above)."""
    scores = merged = None
    if head.moments is not None:
        if all(c.scores is not None for c in cells):
            # sorted runs: timsort ("stable") merges them in O(n log runs)
            scores = np.sort(np.concatenate([c.scores for c in cells]),  # type: ignore[misc]
                             kind="stable")
            if spec.max_raw is not None and head.n > spec.max_raw:
                edges = cell_edges(spec.max_bins)
                scores, merged = None, _compact_sorted(scores, edges)
        else:
            merged = _merge_many_cells(cells, cell_edges(spec.max_bins))
    return replace(head, scores=scores, cells=merged, **_merged_sample(head, cells, spec))


def _derived(name: str, heads: Mapping[Any, GroupSummary],
             attributes: Mapping[str, AttributeSummary], parent: tuple[str, int],
             spec: SummarySpec, cache: Mapping[Any, GroupSummary] | None = None
             ) -> AttributeSummary:
    return AttributeSummary(name, DerivedGroups(heads, attributes[parent[0]], parent[1], spec,
                                                cache), parent)


def _heads(attr: AttributeSummary) -> Mapping[Any, GroupSummary]:
    groups = attr.groups
    return groups.heads if isinstance(groups, DerivedGroups) else {
        label: _head(g) for label, g in groups.items()}


def _merge_heads(groups: list[GroupSummary]) -> GroupSummary:
    """Add many groups' counts and moments, left to right (as merges add)."""
    first = groups[0]
    pos = None if first.predicted_positive is None else sum(
        g.predicted_positive for g in groups)  # type: ignore[misc]
    conf = None if first.confusion is None else tuple(
        int(sum(g.confusion[k] for g in groups)) for k in range(4))  # type: ignore[index]
    moments = None
    if first.moments is not None:
        total = squares = 0.0
        for g in groups:
            total += g.moments[0]  # type: ignore[index]
            squares += g.moments[1]  # type: ignore[index]
        moments = (total, squares, min(g.moments[2] for g in groups),  # type: ignore[index]
                   max(g.moments[3] for g in groups))  # type: ignore[index]
    return replace(first, n=sum(g.n for g in groups), predicted_positive=pos, confusion=conf,
                   moments=moments)


def _merge_attributes(name: str, parts: list[AttributeSummary],
                      merged: Mapping[str, AttributeSummary], spec: SummarySpec
                      ) -> AttributeSummary:
    """One attribute of many summaries, merged: derived again if every part is derived."""
    parent = parts[0].parent
    by_label: dict[Any, list[GroupSummary]] = {}
    derive = parent is not None and all(p.parent == parent for p in parts)
    for p in parts:
        for label, g in (_heads(p) if derive else p.groups).items():
            by_label.setdefault(label, []).append(g)
    if derive:
        heads = {label: _merge_heads(gs) for label, gs in sorted(by_label.items())}
        return _derived(name, heads, merged, parent, spec)  # type: ignore[arg-type]
    return AttributeSummary(name, {label: _merge_groups(gs, spec)
                                   for label, gs in sorted(by_label.items())})


def _parents_first(attributes: Mapping[str, AttributeSummary]) -> list[str]:
    """Return the attributes' names, those others derive from first."""
    return sorted(attributes, key=lambda name: attributes[name].parent is not None)


@dataclass(frozen=True, eq=False)
class WindowSummary:
    """A window's mergeable summary. Build with :func:`summarize`; combine with :meth:`merge`.

    Examples
    --------
    >>> s = summarize({"g": ["a", "a", "b", "b"]}, y_pred=[1, 0, 1, 1])
    >>> s.attributes["g"].groups["b"].predicted_positive
    2
    >>> s.merge(s).n_rows
    8
    """

    spec: SummarySpec
    n_rows: int
    attributes: Mapping[str, AttributeSummary]
    inputs: tuple[str, ...]  # which of y_true, y_pred, y_score the rows had
    features: tuple[str, ...] = ()
    model: str = ""
    version: str = ""
    start: datetime | None = None
    end: datetime | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def merge(self, other: WindowSummary) -> WindowSummary:
        """Return the summary of both windows' rows. Associative and commutative.

        Raises
        ------
        InvalidInputError
            The summaries were made under different specs (fingerprints), or with different
            attributes or inputs.
        """
        _check_compatible(self, other)
        attributes: dict[str, AttributeSummary] = {}
        for name in _parents_first(self.attributes):
            mine, theirs = self.attributes[name], other.attributes[name]
            if mine.parent is not None and mine.parent == theirs.parent:
                attributes[name] = _merge_attributes(name, [mine, theirs], attributes,
                                                     self.spec)
                continue
            merged = dict(mine.groups)
            for label, group in theirs.groups.items():
                merged[label] = (_merge_group(merged[label], group, self.spec)
                                 if label in merged else group)
            attributes[name] = AttributeSummary(name, dict(sorted(merged.items())))
        attributes = {name: attributes[name] for name in self.attributes}
        starts = [t for t in (self.start, other.start) if t is not None]
        ends = [t for t in (self.end, other.end) if t is not None]
        return replace(self, n_rows=self.n_rows + other.n_rows, attributes=attributes,
                       start=min(starts) if starts else None, end=max(ends) if ends else None)

    def without_labels(self) -> WindowSummary:
        """Return the same rows without their labels (confusion counts and sampled labels dropped).

        What the label-free metrics read: it merges with summaries made without labels.

        >>> s = summarize({"g": ["a", "b"]}, y_pred=[1, 0], y_true=[1, 1])
        >>> s.inputs, s.without_labels().inputs
        (('y_true', 'y_pred'), ('y_pred',))
        """
        if "y_true" not in self.inputs:
            return self
        def unlabelled(g: GroupSummary) -> GroupSummary:
            return replace(g, confusion=None,
                           sample={c: v for c, v in g.sample.items() if c != "y_true"})

        attributes: dict[str, AttributeSummary] = {}
        for name in _parents_first(self.attributes):
            attr = self.attributes[name]
            if attr.parent is not None:
                attributes[name] = _derived(name, {label: unlabelled(g) for label, g in
                                                   _heads(attr).items()},
                                            attributes, attr.parent, self.spec)
            else:
                attributes[name] = AttributeSummary(name, {
                    label: unlabelled(g) for label, g in attr.groups.items()})
        attributes = {name: attributes[name] for name in self.attributes}
        return replace(self, attributes=attributes,
                       inputs=tuple(i for i in self.inputs if i != "y_true"))

    def nbytes(self) -> int:
        """Bytes of the arrays stored (scores, cells, samples), 64 a group for its counts.

        A derived attribute (:class:`DerivedGroups`) stores its groups' counts only.
        """
        total = 0
        for attr in self.attributes.values():
            if isinstance(attr.groups, DerivedGroups):
                total += 64 * len(attr.groups)
                continue
            for g in attr.groups.values():
                total += 64 + g.sample_keys.nbytes + sum(c.nbytes for c in g.sample.values())
                if g.scores is not None:
                    total += g.scores.nbytes
                if g.cells is not None:
                    total += g.cells.nbytes
        return total


def _check_compatible(a: WindowSummary, b: WindowSummary) -> None:
    if a.spec.fingerprint != b.spec.fingerprint:
        raise InvalidInputError(
            f"cannot merge summaries made under different specs (fingerprint "
            f"{a.spec.fingerprint} {a.spec} vs {b.spec.fingerprint} "
            f"{b.spec}); re-summarize one of them with the other's SummarySpec"
        )
    if list(a.attributes) != list(b.attributes) or a.inputs != b.inputs:
        raise InvalidInputError(
            f"cannot merge summaries of different attributes or inputs: "
            f"{list(a.attributes)} {a.inputs} vs {list(b.attributes)} "
            f"{b.inputs}; summarize both windows with the same columns"
        )


def _merge_many_cells(groups: list[GroupSummary], edges: NDArray[np.float64]) -> CompactCells:
    """Merge many groups' cells (and raw scores) at once, on dense per-cell arrays.

    Every part adds into dense per-cell arrays, part after part: one compiled pass per part
    (:func:`fairmonitor._kernels.cells.add_steps`) that reads its arrays as stored or loaded
    (narrow counts, uint8 bounds). Counts and step sums are integers and the bounds a min and
    a max of steps quantized monotonically, so the merge is exact: the cells of merged parts
    are the cells of their rows summarized at once, bit for bit, in any order.

    Raw parts are binned into cells first (:func:`_compact_sorted`; sorted already), or, if
    they hold fewer scores than there are cells, sorted together and binned once.

    Raises
    ------
    InvalidInputError
        A part's indices do not match its arrays (corrupted bytes).
    """
    from .._kernels.cells import add_steps

    size = edges.size - 1
    count = np.zeros(size, dtype=np.int64)
    ksum = np.zeros(size, dtype=np.int64)
    qlo = np.full(size, QUANTA, dtype=np.uint8)
    qhi = np.zeros(size, dtype=np.uint8)
    parts = [g.cells for g in groups if g.cells is not None]
    raw = [g.scores for g in groups if g.cells is None]
    if raw and sum(r.size for r in raw) <= size:  # few scores: sort them together, bin once
        raw = [np.sort(np.concatenate(raw))]
    parts += [_compact_sorted(r, edges) for r in raw]
    for p in parts:
        if add_steps(count, ksum, qlo, qhi, p.index, p.count, p.ksum.astype(np.int64,
                     copy=False), p.qlo, p.qhi) != p.size:
            raise InvalidInputError(
                "a summary's cells do not match their indices: the data is corrupted; "
                "re-summarize the window")
    index = np.flatnonzero(count)
    return CompactCells(edges, index, count[index], ksum[index], qlo[index], qhi[index])


def _merge_groups(groups: list[GroupSummary], spec: SummarySpec) -> GroupSummary:
    """Many groups at once: what folding :func:`_merge_group` gives, in one pass per array."""
    if len(groups) == 1:
        return groups[0]
    head = _merge_heads(groups)
    scores = cells = None
    if head.moments is not None:
        if all(g.scores is not None for g in groups) and (
                spec.max_raw is None or head.n <= spec.max_raw):
            scores = np.sort(np.concatenate([g.scores for g in groups]), kind="stable")
        else:
            cells = _merge_many_cells(groups, cell_edges(spec.max_bins))
    return replace(head, scores=scores, cells=cells, **_merged_sample(head, groups, spec))


def merge_all(summaries: list[WindowSummary]) -> WindowSummary:
    """Merge many summaries at once (e.g. the 24 hours of a day).

    The same summary as folding :meth:`WindowSummary.merge` over them (moments' float sums
    up to round-off; cells exactly), at the cost of one pass per group instead of one per
    summary.

    >>> h = [summarize({"g": ["a", "b"]}, y_pred=[1, 0]) for _ in range(3)]
    >>> merge_all(h).attributes["g"].groups["a"].predicted_positive
    3
    """
    if not summaries:
        raise InvalidInputError("merge_all needs at least one summary")
    first = summaries[0]
    for other in summaries[1:]:
        _check_compatible(first, other)
    attributes: dict[str, AttributeSummary] = {}
    for name in _parents_first(first.attributes):
        attributes[name] = _merge_attributes(name, [s.attributes[name] for s in summaries],
                                             attributes, first.spec)
    attributes = {name: attributes[name] for name in first.attributes}
    starts = [s.start for s in summaries if s.start is not None]
    ends = [s.end for s in summaries if s.end is not None]
    return replace(first, n_rows=sum(s.n_rows for s in summaries), attributes=attributes,
                   start=min(starts) if starts else None, end=max(ends) if ends else None)


# --------------------------------------------------------------------------- building


def _feature_columns(X: Any) -> dict[str, NDArray[Any]]:
    if X is None:
        return {}
    if hasattr(X, "columns"):
        return {f"x:{c}": np.asarray(X[c]) for c in X.columns}
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise InvalidInputError(f"X must be 2-D (rows x features); got shape {arr.shape}")
    return {f"x:{j}": arr[:, j] for j in range(arr.shape[1])}


def _group_rows(codes: NDArray[np.integer[Any]], counts: NDArray[np.intp],
                score: NDArray[np.float64] | None, *, need_rows: bool
                ) -> tuple[NDArray[np.float64] | None, NDArray[np.intp] | None]:
    """``score`` laid out group after group (each group's rows in row order), and the rows.

    The stable argsort of the codes, by counting (compiled, O(n)): no sort, and no row
    index unless ``need_rows`` (the row sample needs it).
    """
    from .._kernels.groups import group_layout, group_order, signed_codes

    codes = signed_codes(codes)
    kept = int(counts.sum())
    order = group_order(codes, counts, np.empty(kept, dtype=np.intp)) if need_rows else None
    if score is None:
        return None, order
    return group_layout(codes, counts, np.ascontiguousarray(score), np.empty(kept)), order


def _smallest(keys: NDArray[np.uint64], k: int) -> NDArray[np.intp]:
    """Positions of the ``k`` smallest keys, ascending (O(n): a partition, then k sorted)."""
    if k == 0:
        return np.zeros(0, dtype=np.intp)
    if keys.size > k:
        part = np.argpartition(keys, k - 1)[:k]
        return part[np.argsort(keys[part], kind="stable")]
    return np.argsort(keys, kind="stable")


def summarize(
    sensitive_features: Any,
    *,
    y_pred: Any = None,
    y_score: Any = None,
    y_true: Any = None,
    X: Any = None,
    threshold: float = 0.5,
    intersection: bool = True,
    spec: SummarySpec | None = None,
    groups: Mapping[str, Groups] | None = None,
    model: str = "",
    version: str = "",
    start: datetime | None = None,
    end: datetime | None = None,
) -> WindowSummary:
    """Summarize one window's rows per sensitive attribute and group.

    Parameters
    ----------
    sensitive_features : mapping of str to array-like, DataFrame or array-like
        One column per attribute; with several, the intersection is summarized too.
    y_pred, y_score, y_true : array-like, optional
        As :class:`~fairmonitor.report.Window`; ``y_pred`` defaults to ``y_score >=
        threshold``.
    X : DataFrame or 2-D array, optional
        Features, kept in the row sample only.
    spec : SummarySpec, optional
        What to keep (default ``SummarySpec()``).
    groups : mapping of str to Groups, optional
        Already encoded attributes (from :func:`~fairmonitor.utils.groups.encode_attributes`).

    Returns
    -------
    summary : WindowSummary

    Examples
    --------
    >>> s = summarize({"sex": ["F", "F", "M"]}, y_score=[0.2, 0.9, 0.6], y_true=[0, 1, 1])
    >>> g = s.attributes["sex"].groups["F"]
    >>> g.n, g.confusion, g.scores.tolist()
    (2, (1, 0, 0, 1), [0.2, 0.9])
    """
    spec = spec or SummarySpec()
    if groups is None:
        groups = encode_attributes(sensitive_features, intersection=intersection)
    n = next(iter(groups.values())).codes.size
    pred, score, true = _checked_outputs(y_pred, y_score, y_true, threshold, n)
    sampled = {k: v for k, v in (("y_true", true), ("y_pred", pred), ("y_score", score))
               if v is not None}
    features = _feature_columns(X)
    sampled.update(features)
    # no sample, no hashing (evaluate_window has the rows themselves)
    keys = _row_keys(sampled, n) if spec.sample_size else None
    edges = cell_edges(spec.max_bins) if spec.max_raw is not None else None
    attributes = {name: _summarize_attribute(name, g, pred, true, score, keys, sampled, spec,
                                             edges)
                  for name, g in groups.items()}
    for name, parent in _derivable(groups).items():
        attributes[name] = _as_derived(attributes[name], attributes, parent, spec)
    inputs = tuple(k for k, v in (("y_true", true), ("y_pred", pred), ("y_score", score))
                   if v is not None)
    return WindowSummary(spec, n, attributes, inputs, tuple(features), model, version, start, end)


def _derivable(groups: Mapping[str, Groups]) -> dict[str, tuple[str, int]]:
    """Find the attributes whose groups are unions of the intersection's: ``{name: (inter, i)}``.

    With several attributes and their intersection (the last, named after them), attribute
    ``i`` is derived from it when every row's group is the ``i``-th part of its intersection
    group's label (rows left out, code -1, left out of both): checked on the codes, one
    pass, so groups passed in from elsewhere (``groups=``) are never derived wrongly.
    """
    from .._kernels.groups import signed_codes

    names = list(groups)
    parent = names[-1]
    others = names[:-1]
    if len(others) < 2 or parent != INTERSECTION_SEPARATOR.join(others):
        return {}
    inter = groups[parent]
    if any(not isinstance(label, tuple) or len(label) != len(others) for label in inter.labels):
        return {}
    inter_codes = signed_codes(inter.codes)
    out = {}
    for i, name in enumerate(others):
        where = {label: j for j, label in enumerate(groups[name].labels)}
        if any(label[i] not in where for label in inter.labels):
            continue
        codes = signed_codes(groups[name].codes)
        # position -1 (the last) maps a left-out row (code -1) to -1; in the codes' own dtype
        # (a byte a row for < 128 groups: no 8-byte temporary of every row)
        lookup = np.array([where[label[i]] for label in inter.labels] + [-1], dtype=codes.dtype)
        if np.array_equal(lookup[inter_codes], codes):
            out[name] = (parent, i)
    return out


def _as_derived(attr: AttributeSummary, attributes: Mapping[str, AttributeSummary],
                parent: tuple[str, int], spec: SummarySpec) -> AttributeSummary:
    """``attr`` as derived from its intersection, keeping the groups it would derive the same.

    A group whose cells are all raw derives the very arrays summarizing its rows gave (kept,
    no work on read); one with a cell above ``max_raw`` derives the merge of the cells, which
    the summary then gives too, so a summary and its stored bytes give the same numbers.
    """
    source = attributes[parent[0]]
    raw_cells = {label: g.moments is None or g.scores is not None
                 for label, g in source.groups.items()}
    same = {label[parent[1]]: True for label in source.groups}
    for label, raw in raw_cells.items():
        same[label[parent[1]]] &= raw
    cache = {label: g for label, g in attr.groups.items() if same.get(label, False)}
    return _derived(attr.name, {label: _head(g) for label, g in attr.groups.items()},
                    attributes, parent, spec, cache)


def _checked_outputs(y_pred: Any, y_score: Any, y_true: Any, threshold: float, n: int
                     ) -> tuple[NDArray[np.int8] | None, NDArray[np.float64] | None,
                                NDArray[np.int8] | None]:
    """Return ``pred, score, true`` checked, ``n`` rows each.

    ``pred`` defaults to the scores at ``threshold``.
    """
    # read only: the scores are laid out group by group into the summary's own buffers
    score = None if y_score is None else check_scores(y_score, "y_score", copy=False)
    if y_pred is None and score is not None:
        y_pred = (score >= threshold).astype(np.int8)
    # 0/1 as int8: 1 byte a row, not 8 (the window may hold 10^7 rows); int8 input is not copied
    pred = None if y_pred is None else np.asarray(y_pred).astype(np.int8, copy=False)
    true = None if y_true is None else np.asarray(y_true).astype(np.int8, copy=False)
    for name, arr in (("y_pred", pred), ("y_score", score), ("y_true", true)):
        if arr is not None and arr.size != n:
            raise InvalidInputError(
                f"`{name}` has {arr.size} rows but `sensitive_features` has {n}; pass arrays "
                "aligned row by row")
    return pred, score, true


def _summarize_attribute(name: str, g: Groups, pred: NDArray[np.int8] | None,
                         true: NDArray[np.int8] | None, score: NDArray[np.float64] | None,
                         keys: NDArray[np.uint64] | None, sampled: Mapping[str, NDArray[Any]],
                         spec: SummarySpec, edges: NDArray[np.float64] | None
                         ) -> AttributeSummary:
    """Return the summary of one attribute's groups."""
    k = g.n_groups
    codes = g.codes
    pos = conf = None
    if pred is not None:
        both = outcome_counts(codes, k, pred, true)
        pos = both[:, 1] + both[:, 3]  # predicted 1, either label
        if true is not None:
            conf = both[:, [3, 1, 2, 0]]  # (tp, fp, fn, tn)
    # each group's scores in one buffer, group after group (views of it are the groups'
    # raw scores: no copy per group), and the rows behind them when a sample is drawn
    grouped, order = _group_rows(codes, g.counts, score, need_rows=keys is not None)
    bounds = np.r_[0, np.cumsum(g.counts)]
    # a group summarized as cells must not pin the buffer through a small raw neighbour
    raw_only = spec.max_raw is None or all(int(c) <= spec.max_raw for c in g.counts)
    per_group = {}
    for j, label in enumerate(g.labels):
        moments = scores = cells = None
        if grouped is not None:
            moments, scores, cells = _score_summary(grouped[bounds[j]:bounds[j + 1]], spec,
                                                    edges, raw_only)
        if keys is None or order is None:
            group_keys, chosen = np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.intp)
        else:
            rows = order[bounds[j]:bounds[j + 1]]
            group_keys = keys[rows]
            pick = _smallest(group_keys, spec.sample_size)
            group_keys, chosen = group_keys[pick], rows[pick]
        per_group[label] = GroupSummary(
            int(g.counts[j]), None if pos is None else int(pos[j]),
            None if conf is None else tuple(int(v) for v in conf[j]),
            moments, scores, cells, group_keys,
            {c: v[chosen] for c, v in sampled.items()})
    return AttributeSummary(name, per_group)


def _score_summary(part: NDArray[np.float64], spec: SummarySpec,
                   edges: NDArray[np.float64] | None, raw_only: bool
                   ) -> tuple[tuple[float, float, float, float], Any, Any]:
    """Return a group's score moments, and its raw scores or its cells (the other None).

    ``part`` (the group's stretch of the shared buffer) is sorted in place.
    """
    part.sort()
    # einsum, not np.dot: BLAS threads stall on a busy machine
    moments = (float(part.sum()), float(np.einsum("i,i->", part, part)), float(part[0]),
               float(part[-1]))
    if spec.max_raw is None or part.size <= spec.max_raw:
        return moments, (part if raw_only else part.copy()), None
    return moments, None, _compact_sorted(part, edges)  # type: ignore[arg-type]
