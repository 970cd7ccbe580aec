"""The metrics of a summary: parity from counts; MADD, ABCC and ABPC from the score summaries.

Where every group of an attribute keeps raw sorted scores (:attr:`AttributeSummary.raw`), the
score metrics are the metric functions themselves on those scores (:func:`pseudo_rows`), with
every option. Where some group keeps cells, this module computes them from the cells:

- MADD: each bin of ``linspace(0, 1, m + 1)``, ``m <= max_bins``, is a union of cells, so
  the bin counts, hence MADD (fixed or ``"auto"``), are exact.
- ABCC = ``∫|F_a - F_b|``: in a cell, ``∫ F = F(left) * width + (count * right - sum) / n``
  exactly, so a cell where ``F_a - F_b`` keeps its sign contributes exactly; where it may
  change sign (the CDFs cross inside the cell) the contribution lies between ``|∫(F_a -
  F_b)|`` and ``width * max |F_a - F_b|``: the midpoint is used and half the gap is added to
  the certified error (:class:`AbccFromCells`).
- ABPC: linear binning onto ``G`` KDE cells needs, per fine cell, the count and the sum of the
  positions within the KDE cell: both follow from count and sum when no KDE centre falls
  inside a fine cell, which the dyadic edges guarantee for ``G < 2**DYADIC_BITS``; the
  smoothing is then the raw path's (``kde.density_from_binned``). The sums are known to
  their scores' steps (:class:`~.core.CompactCells`): the value comes with the error that
  can cause (:class:`AbccFromCells`, ~1e-8).
  The Scott/Silverman bandwidth comes from the moments.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import check_option, check_positive_int, warn_undefined
from ..exceptions import GroupExclusionWarning, InvalidInputError
from ..metrics.shared import (
    AGGREGATIONS,
    MADD_AUTO_SMALL,
    WORST_PAIR_SMALL,
    GroupRates,
    MADDResult,
    PairwiseMatrix,
    calibration_from_sums,
)
from ..metrics.shared import MADDPrepared as _Prepared
from ..metrics.shared import abcc_abpc_pairs as _pairs
from ..metrics.shared import kde as _kde
from ..metrics.shared import madd_auto_pair as _auto_pair
from ..metrics.shared import madd_fixed_pair as _fixed_pair
from ..metrics.shared import madd_grid as _grid
from ..metrics.shared import madd_plan as _plan
from ..metrics.shared import madd_shares_below as _shares_below
from ..metrics.shared import madd_worst_auto as _worst_auto
from ..metrics.shared import madd_worst_fixed as _worst_fixed
from ..metrics.shared import rate as _rate
from ..metrics.shared import w1_sorted as _w1_sorted
from ..utils.groups import Groups, contiguous_groups
from ..utils.groups import exclude_small as _exclude_small
from .core import DYADIC_BITS, AttributeSummary, GroupSummary, cell_edges

__all__ = ["AbccFromCells", "abcc_from_summary", "abpc_from_summary", "group_rates_from_summary",
           "madd_from_summary", "pseudo_rows"]


@dataclass(frozen=True, slots=True)
class AbccFromCells:
    """ABCC (or ABPC) computed from cell summaries, with its certified error bound.

    ``value`` is within ``error`` of the raw-row value (plus float round-off, ~1e-12).
    """

    value: float
    error: float

    def __float__(self) -> float:
        return float(self.value)


def _kept(attr: AttributeSummary, min_group_size: int) -> Groups:
    """Return the groups left after ``min_group_size``, with the raw path's warning."""
    min_group_size = check_positive_int(min_group_size, "min_group_size")  # as encode_groups
    counts = attr.counts
    codes = np.arange(counts.size, dtype=np.intp)  # one stand-in row per group
    return _exclude_small(codes, list(attr.labels), counts, attr.name, min_group_size)


def group_rates_from_summary(attr: AttributeSummary, min_group_size: int = 1) -> GroupRates:
    """:func:`~fairmonitor.metrics.group_rates` from the summary's counts: the same rates."""
    kept = _kept(attr, min_group_size)
    groups = [attr.groups[label] for label in kept.labels]
    if any(g.predicted_positive is None for g in groups):
        raise InvalidInputError("the summary has no predictions (y_pred or y_score)")
    n = np.array([g.n for g in groups], dtype=float)
    pos = np.array([g.predicted_positive for g in groups], dtype=float)
    tpr = fpr = ppv = None
    if groups and groups[0].confusion is not None:
        conf = np.array([g.confusion for g in groups], dtype=float).reshape(-1, 4)
        tp, fp, fn, tn = conf.T
        tpr, fpr, ppv = _rate(tp, tp + fn), _rate(fp, fp + tn), _rate(tp, tp + fp)
        return GroupRates(attr.name, kept.labels, kept.counts, _rate(pos, n), tpr, fpr,
                          kept.excluded, ppv, tp + fn, fp + tn, tp + fp)
    return GroupRates(attr.name, kept.labels, kept.counts, _rate(pos, n), tpr, fpr,
                      kept.excluded, ppv)


def calibration_from_summary(attr: AttributeSummary, *, min_group_size: int = 1,
                             **_: Any) -> float:
    """:func:`~fairmonitor.metrics.calibration_difference` from score sums and label counts."""
    kept = _kept(attr, min_group_size)
    groups = [attr.groups[label] for label in kept.labels]
    if any(g.moments is None for g in groups) or any(g.confusion is None for g in groups):
        raise InvalidInputError("calibration_difference needs scores and labels")
    n = np.array([g.n for g in groups], dtype=float)
    score_sum = np.array([g.moments[0] for g in groups], dtype=float)  # type: ignore[index]
    positives = np.array([g.confusion[0] + g.confusion[2] for g in groups],  # type: ignore
                         dtype=float)
    return calibration_from_sums(attr.name, kept.labels, n, score_sum, positives,
                                 kept.excluded)


def pseudo_rows(attr: AttributeSummary) -> tuple[NDArray[np.float64], Groups]:
    """Scores laid out group after group, and their groups: the metric functions' inputs.

    Only for raw attributes; a metric of the scores depends on each group's multiset of
    scores only, so these rows give the raw rows' values.
    """
    parts = [g.scores for g in attr.groups.values()]
    if any(p is None for p in parts):
        raise InvalidInputError(f"attribute '{attr.name}' keeps cells, not raw scores")
    return _joined(parts), contiguous_groups(attr.labels, attr.counts, attr.name)


def _joined(parts: list[NDArray[np.float64]]) -> NDArray[np.float64]:
    """``np.concatenate(parts)``, or the buffer they are consecutive views of (no copy).

    :func:`~fairmonitor.summaries.summarize` lays a window's scores out group after group in
    one buffer per attribute and keeps views of it: the rows are already there.
    """
    base = parts[0].base
    if isinstance(base, np.ndarray) and base.ndim == 1 and base.dtype == np.float64 \
            and base.flags.c_contiguous and all(p.base is base for p in parts) \
            and base.size == sum(p.size for p in parts):
        at = base.__array_interface__["data"][0]
        for p in parts:
            if p.__array_interface__["data"][0] != at or p.strides != base.strides:
                break
            at += p.nbytes
        else:
            return base
    return np.concatenate(parts)


def _two_groups(metric: str, kept: Groups) -> bool:
    reason = kept.two_group_reason()
    if reason is not None:
        warn_undefined(metric, reason)
        return False
    return True


def _need_scores(attr: AttributeSummary) -> None:
    if any(g.moments is None for g in attr.groups.values()):
        raise InvalidInputError("the summary has no scores (y_score)")


# --------------------------------------------------------------------------- MADD


@functools.lru_cache(maxsize=16)
def _bin_edges_among_cells(max_bins_cells: int, n_bins: int, compat: str | None,
                           auto: bool) -> NDArray[np.intp] | None:
    """Where MADD's bin edges lie among the cell edges; None if some are not cell edges.

    The bin edges: every m of ``"auto"``'s grid, or ``n_bins``'. Cached: ~2 ms a call, the
    same for every attribute and window.
    """
    edges = cell_edges(max_bins_cells)
    wanted = _grid(n_bins, compat).edges if auto else np.linspace(0.0, 1.0, n_bins + 1)
    where = np.searchsorted(edges, wanted)
    if where.max() >= edges.size or not np.array_equal(edges[where], wanted):
        return None
    where.flags.writeable = False
    return where


@functools.lru_cache(maxsize=16)
def _edge_slots(max_bins_cells: int, n_bins: int, compat: str | None,
                auto: bool) -> NDArray[np.intp]:
    """Per cell: how many of MADD's bin edges (:func:`_bin_edges_among_cells`) are ``<=`` it.

    What :func:`fairmonitor._kernels.cells.counts_below` reads. Cached: the same for every
    attribute.
    """
    where = _bin_edges_among_cells(max_bins_cells, n_bins, compat, auto)
    slot = np.searchsorted(where, np.arange(cell_edges(max_bins_cells).size - 1),  # type: ignore
                           side="right")
    slot.flags.writeable = False
    return slot


def madd_from_summary(attr: AttributeSummary, *, max_bins_cells: int, agg: str = "max",
                      bandwidth: float | str = "auto", n_bins: int | None = None,
                      compat: str | None = None, max_bins: int = 499,
                      min_group_size: int = 1) -> MADDResult:
    """:func:`~fairmonitor.metrics.madd` from cells (exact for every m <= ``max_bins_cells``)."""
    check_option(agg, "agg", AGGREGATIONS, func="madd")
    _need_scores(attr)
    plan = _plan(bandwidth, n_bins, compat, max_bins)
    grid = _grid(plan.n_bins, plan.compat) if plan.auto else None
    where = _bin_edges_among_cells(max_bins_cells, plan.n_bins, plan.compat, plan.auto)
    if where is None:
        raise InvalidInputError(
            f"madd: the summary's cells resolve bin counts up to {max_bins_cells}; this call "
            f"needs {plan.n_bins}. Summarize with SummarySpec(max_bins={plan.n_bins}) or keep "
            "raw scores (max_raw=None)")
    kept = _kept(attr, min_group_size)
    if not _two_groups("madd", kept):
        return MADDResult(float("nan"), agg, attr.name, None, (), None)
    scorer = _CellScorer(attr, kept, plan, max_bins_cells, where, grid)
    if agg == "max":  # the worst pair without scoring every pair, as madd() on rows
        worst = scorer.worst()
        k = len(kept.labels)
        if len(scorer.scored) < k * (k - 1) // 2:
            scorer.release()
            return MADDResult(worst.value, agg, attr.name, worst, None, None, source=scorer)
        pairs, pm = scorer.every_pair()
        return MADDResult(worst.value, agg, attr.name, worst, pairs, pm)
    pairs, pm = scorer.every_pair()
    worst = max(pairs, key=lambda p: p.value)
    return MADDResult(pm.aggregate(agg), agg, attr.name, worst, pairs, pm)


class _CellScorer:
    """MADD's pairs of a summary's groups, each scored once, on demand; groups prepared once.

    The cells' counterpart of the row path's scorer (``metrics/_madd/madd.py``): the same
    ``pair``/``every_pair``/``labels`` interface that a lazy
    :class:`~fairmonitor.metrics.MADDResult` reads, the same pair functions (so the values
    are the all-pairs loop's to the last bit), and :meth:`worst` finds the largest pair with
    the same bounds (``madd_worst_fixed`` / ``madd_worst_auto``). A group's histogram ("auto":
    its bin shares, ~1 MB) comes from its cells' counts below each of MADD's edges;
    :meth:`release` drops them and a pair asked for later prepares its two groups again.
    """

    def __init__(self, attr: AttributeSummary, kept: Groups, plan: Any, max_bins_cells: int,
                 where: NDArray[np.intp], grid: Any) -> None:
        self.groups = [attr.groups[label] for label in kept.labels]
        self.labels, self.counts, self.name = kept.labels, kept.counts, attr.name
        self.plan, self.grid, self.where = plan, grid, where
        self.edges = cell_edges(max_bins_cells)
        self.slot = _edge_slots(max_bins_cells, plan.n_bins, plan.compat, plan.auto)
        self.prepared: dict[int, _Prepared] = {}
        self.scored: dict[tuple[int, int], Any] = {}

    def _group(self, k: int) -> _Prepared:
        """Group ``k``'s histogram (or "auto"'s shares), from its cells, once."""
        if k not in self.prepared:
            from .._kernels.cells import counts_below

            g = self.groups[k]
            # values < each wanted edge: the counts of the cells below it, two compiled
            # passes (the counts as stored: no decoding)
            cells = g.sparse_cells(self.edges)
            count = g.cells.count if g.cells is not None else cells[1]
            below = counts_below(cells[0], count, self.slot, self.where.size)
            below[-1] = g.n  # the last bin is closed at 1
            self.prepared[k] = (
                _Prepared(k, g.n, np.diff(below)) if self.grid is None
                else _Prepared(k, g.n, None, *_shares_below(below, self.grid, g.n)))
        return self.prepared[k]

    def release(self) -> None:
        """Drop the prepared groups (prepared again if another pair is asked for)."""
        self.prepared = {}

    def pair(self, i: int, j: int) -> Any:
        """Return the MADD of groups ``i < j`` (by index)."""
        if (i, j) not in self.scored:
            a, b = self._group(i), self._group(j)
            labels = (self.labels[i], self.labels[j])
            self.scored[i, j] = (
                replace(_fixed_pair(a, b, self.plan.n_bins), groups=labels)
                if self.grid is None else _auto_pair(a, b, self.grid, self.plan.compat, labels))
        return self.scored[i, j]

    def every_pair(self) -> tuple[tuple[Any, ...], PairwiseMatrix]:
        """Return every pair (row by row) and the matrix."""
        size = len(self.labels)
        matrix = np.zeros((size, size))
        pairs = []
        for i in range(size):
            for j in range(i + 1, size):
                pairs.append(self.pair(i, j))
                matrix[i, j] = matrix[j, i] = pairs[-1].value
        return tuple(pairs), PairwiseMatrix("madd", self.name, self.labels, self.counts,
                                            matrix)

    def worst(self) -> Any:
        """Return the worst pair, scoring only the pairs an upper bound cannot rule out."""
        size = len(self.labels)
        if size <= (WORST_PAIR_SMALL if self.grid is None else MADD_AUTO_SMALL):
            return max(self.every_pair()[0], key=lambda p: p.value)
        prepared = [self._group(k) for k in range(size)]
        sizes = np.array([p.n for p in prepared], dtype=np.int64)

        def value(i: int, j: int) -> float:
            return float(self.pair(i, j).value)

        if self.grid is None:
            found = _worst_fixed(np.stack([p.counts / p.n for p in prepared]), sizes, value)
        else:
            found = _worst_auto(np.stack([p.share for p in prepared]), sizes, self.grid,
                                self.plan.compat, value)
        return self.pair(*found.pair)


# --------------------------------------------------------------------------- ABCC




def _steps(g: GroupSummary) -> float:
    """How far the group's cell sums can move a CDF's integral: ``step_error / n`` (raw: 0).

    Each score is known to a step of its cell (:class:`~.core.CompactCells`), so the
    integral of the group's CDF over a cell, ``(count * right - sum) / n`` beyond its left
    part, is within the cell's ``count * u / n``: summed over the cells, this.
    """
    return 0.0 if g.cells is None else g.cells.step_error / g.n


_NO_BOUNDS, _NO_STEPS = np.zeros(0), np.zeros(0, dtype=np.uint8)


def _abcc_fields(g: GroupSummary, edges: NDArray[np.float64]) -> tuple[NDArray[Any], ...]:
    """Read what :class:`_AbccTable` needs of a group: index, count, sum, then its bounds.

    The bounds as ``(qlo, qhi, low, high)``: compact cells' uint8 steps with no floats, or
    raw scores' exact min and max with no steps (the kernels decode steps where given).
    """
    if g.cells is not None:
        c = g.cells
        return c[0], c[1], c[2], c.qlo, c.qhi, _NO_BOUNDS, _NO_BOUNDS
    index, count, total, low, high = g.sparse_cells(edges)
    return index, count, total, _NO_STEPS, _NO_STEPS, low, high


class _AbccTable:
    """Every group's CDF on the attribute's cells, for the ABCC of any pair of groups at once.

    The cells are the union of the groups' non-empty cells; each cell is extended to the
    previous one's right edge (both CDFs are flat in between). Per group: ``F`` its CDF at
    each cell's left edge, ``m`` its mass in the cell, ``G`` the integral of its CDF over the
    extended cell (``F * width + (count * right - sum) / n``, exact). A pair then costs one
    pass over the cells: where ``F_a - F_b`` keeps its sign in a cell (the cell is *fixed*)
    the area is ``|G_a - G_b|``, exactly; in the few other (*ambiguous*) cells the CDFs may
    cross, and two estimates with certified errors are computed (the midpoint of ``|∫(F_a -
    F_b)|`` and ``width * max |F_a - F_b|``; each group's mass moved to its mean in the cell,
    off by at most its mean absolute deviation there, bounded from the cell's count, sum and
    bounds), each cell taking the tighter.

    Compiled (:mod:`fairmonitor._kernels.cells`; the numpy formulation is the tests'
    oracle). :meth:`pairs` computes every pair in one call, blocks of cells at a time: no
    Python call per pair but for its ambiguous cells, and a branch-free pass that vectorizes
    (~2.5x faster than one pair at a time, at 40 groups of ~10^5 cells).
    """

    #: Blocks of 128 cells per pass of :meth:`pairs`: every pair reads them before the next
    #: (40 groups x 3 rows x 8 bytes x ~1000 cells stay within a core's L2 cache; the timing
    #: hardly depends on it).
    BLOCK = 8
    #: Ambiguous cells kept per pair in :meth:`pairs` (groups of one distribution cross
    #: in ~1% of their cells); a pair with more runs alone.
    CAP = 8192

    def __init__(self, groups: list[GroupSummary], edges: NDArray[np.float64]) -> None:
        from .._kernels.cells import (
            abcc_curves,
            mark_cells,
            table_cells,
        )

        # per group: its cells, counts, sums and bounds; compact cells' bounds stay quantized
        # (uint8), decoded in the kernels for the ambiguous cells only (the only ones read)
        self.sparse = [_abcc_fields(g, edges) for g in groups]
        self.n = [g.n for g in groups]
        mark = np.zeros(edges.size - 1, dtype=np.bool_)
        for part in self.sparse:
            mark_cells(mark, part[0])
        cells, self.left, self.right, self.gaps, extended = table_cells(mark, edges)
        self.cells = cells
        # a row per group (F[k] is group k's): what the blocks of pairs() read; pos[k]: group
        # k's position of each table cell (-1: none), where its ambiguous cells are looked up
        self.F, self.m, self.G = (np.empty((len(groups), cells.size)) for _ in range(3))
        self.pos = np.empty((len(groups), cells.size), dtype=np.int32)
        for k, (part, n) in enumerate(zip(self.sparse, self.n, strict=True)):
            abcc_curves(part[0], part[1], part[2], cells, self.right, extended, n, self.F[k],
                        self.m[k], self.G[k], self.pos[k])
        # scratch of the pairs: the fixed cells' areas, the ambiguous cells' positions
        self._area = np.empty(cells.size)
        self._ia = np.empty(cells.size, dtype=np.intp)

    def _groups(self, i: int, j: int) -> tuple[Any, ...]:
        return (self.n[i], self.n[j], self.pos[i], *self.sparse[i][1:], self.pos[j],
                *self.sparse[j][1:])

    def pair(self, i: int, j: int) -> tuple[float, float]:
        """ABCC of groups i and j, and its certified error."""
        from .._kernels.cells import abcc_pair

        return abcc_pair(self.F[i], self.F[j], self.m[i], self.m[j], self.G[i], self.G[j],
                         self.gaps, self.left, self.right, *self._groups(i, j), self._area,
                         self._ia)

    def pairs(self, wanted: list[tuple[int, int]]) -> dict[tuple[int, int], tuple[float, float]]:
        """:meth:`pair` of every pair in ``wanted`` (the same bits), in one blocked pass."""
        from .._kernels.cells import abcc_pairs
        from .._kernels.cells import ambiguous_part as _ambiguous_part

        size = self.cells.size
        if len(wanted) < 2 or not size:
            return {(i, j): self.pair(i, j) for i, j in wanted}
        first, second = (np.array(side, dtype=np.intp) for side in zip(*wanted, strict=True))
        exact, ambiguous, count = abcc_pairs(self.F, self.m, self.G, first, second, self.BLOCK,
                                             self.CAP)
        out = {}
        for p, (i, j) in enumerate(wanted):
            if count[p] > self.CAP:  # its ambiguous cells were not all kept
                out[i, j] = self.pair(i, j)
            elif count[p]:
                flat, estimate, error = _ambiguous_part(
                    self.F[i], self.F[j], self.gaps, self.left, self.right,
                    *self._groups(i, j), ambiguous[p], count[p], self._area)
                out[i, j] = (exact[p] + flat + estimate, error)
            else:
                out[i, j] = (float(exact[p]), 0.0)
        return out


def abcc_from_summary(attr: AttributeSummary, *, max_bins_cells: int, agg: str = "max",
                      min_group_size: int = 1) -> AbccFromCells:
    """:func:`~fairmonitor.metrics.abcc` from raw scores or cells, with the certified error."""
    check_option(agg, "agg", AGGREGATIONS, func="abcc")
    _need_scores(attr)
    kept = _kept(attr, min_group_size)
    if not _two_groups("abcc", kept):
        return AbccFromCells(float("nan"), 0.0)
    edges = cell_edges(max_bins_cells)
    groups = [attr.groups[label] for label in kept.labels]
    errors = np.zeros((len(groups), len(groups)))
    table: list[Any] = []  # the table and its pairs, at the first pair with cells

    def pair(i: int, j: int) -> float:
        a, b = groups[i], groups[j]
        if a.scores is not None and b.scores is not None:
            return _w1_sorted(a.scores, b.scores)
        if not table:  # every pair with cells at once: blocks of cells shared by the pairs
            table.append(_AbccTable(groups, edges))
            table.append(table[0].pairs([
                (p, q) for p in range(len(groups)) for q in range(p + 1, len(groups))
                if groups[p].scores is None or groups[q].scores is None]))
        value, error = table[1][i, j]
        # the sums' steps: a fixed cell's area moves by at most their shift, an ambiguous
        # cell's estimate and its error by at most three times it (its mean moves the
        # step estimate once and its spread bound by twice the shift)
        errors[i, j] = error + 3.0 * (_steps(a) + _steps(b))
        return value

    pm = _pairs("abcc", kept, list(range(len(groups))), pair)
    value = pm.aggregate(agg)
    # max: the max of values each within its error; mean: the mean error
    upper = errors[np.triu_indices(len(groups), 1)]
    return AbccFromCells(value, float(upper.max() if agg == "max" else upper.mean()))


# --------------------------------------------------------------------------- ABPC


def _binned(g: GroupSummary, edges: NDArray[np.float64], cells: int) -> NDArray[np.float64]:
    if g.scores is not None:  # raw: the raw path's binning itself
        return _kde.linear_binning(g.scores, cells)
    # each fine cell's count and sum split between the two KDE cells around its midpoint:
    # one compiled pass (the former two weighted np.bincount, the tests' oracle)
    from .._kernels.cells import linear_binning_cells

    index, count, total = g.cells[:3]  # type: ignore[index]
    return linear_binning_cells(index, count, total, edges, cells)


def _bandwidth(g: GroupSummary, bw: str | float) -> tuple[float, str | None]:
    total, squares, lo, hi = g.moments  # type: ignore[misc]
    n = g.n
    if not isinstance(bw, str):
        return float(bw), None
    if n < 2:
        return float("nan"), f"has a single score; the {bw} bandwidth rule needs at least 2"
    if lo == hi:
        return float("nan"), (f"has constant scores (all {lo:.6g}), so the {bw} bandwidth is "
                              "0 and the density is a spike; pass an absolute bandwidth (e.g. "
                              "bandwidth=0.05) or use abcc")
    std = math.sqrt(max(squares - total * total / n, 0.0) / (n - 1))
    factor = n ** -0.2 if bw == "scott" else (0.75 * n) ** -0.2
    h = std * factor
    floor = _kde.min_bandwidth(compat=False)
    if h < floor:
        return float("nan"), (f"has nearly constant scores (std {std:.3g}): its {bw} "
                              f"bandwidth {h:.3g} is below {floor:.3g}; pass an absolute "
                              "bandwidth or use abcc")
    return h, None


#: ``4 / sqrt(2 pi)``: twice the L1 norm of a unit Gaussian's derivative (``2 phi(0)``), what
#: moving a unit of mass by ``d`` changes the KDE by at most (``d * 2 phi(0) / h``, measured
#: 0.7979 / h on the reflected grid); twice: a margin for the grid's discretization.
_ABPC_SHIFT = 4.0 / math.sqrt(2.0 * math.pi)


def abpc_from_summary(attr: AttributeSummary, *, max_bins_cells: int, agg: str = "max",
                      bandwidth: str | float = "scott", compat: str | None = None,
                      min_group_size: int = 1) -> AbccFromCells | float:
    """:func:`~fairmonitor.metrics.abpc` from raw scores or cells (the default estimator).

    Returns the value with its certified error (:class:`AbccFromCells`; NaN where
    undefined): a cell's sum is known to its scores' steps, which moves the linear binning's
    mass by at most ``step_error / n`` of a group, and its density by ``_ABPC_SHIFT / h``
    times that in L1 (ABPC's mean over the grid).
    """
    check_option(agg, "agg", AGGREGATIONS, func="abpc")
    if compat is not None:
        raise InvalidInputError(
            "abpc: compat='paper' evaluates scipy's KDE on raw scores; summaries with cells "
            "cannot; keep raw scores (SummarySpec(max_raw=None))")
    _need_scores(attr)
    bw = _kde.check_bandwidth(bandwidth, compat=False)
    kept = _kept(attr, min_group_size)
    if not _two_groups("abpc", kept):
        return float("nan")
    edges = cell_edges(max_bins_cells)
    groups = [attr.groups[label] for label in kept.labels]
    widths, why = [], {}
    for label, g in zip(kept.labels, groups, strict=True):
        h, cause = _bandwidth(g, bw)
        widths.append(h)
        if cause is not None:
            why[label] = cause
    keep = [k for k, label in enumerate(kept.labels) if label not in why]
    causes = "; ".join(f"group {lab!r} of '{attr.name}' {c}" for lab, c in why.items())
    if len(keep) < 2:
        return warn_undefined("abpc", causes)
    if why:
        warnings.warn(f"abpc: left out {len(why)} group(s) without a density estimate: {causes}",
                      GroupExclusionWarning, stacklevel=2)
    cache: dict[tuple[int, int], NDArray[np.float64]] = {}

    def density(k: int, cells: int) -> NDArray[np.float64]:
        if (k, cells) not in cache:
            g = groups[k]
            if g.scores is None and cells >= 1 << DYADIC_BITS:
                raise InvalidInputError(
                    f"abpc: group {kept.labels[k]!r} of '{attr.name}' needs a {cells}-cell KDE "
                    f"grid (bandwidth {widths[k]:.3g}); its cells resolve grids below "
                    f"{1 << DYADIC_BITS}. Pass a larger bandwidth or keep raw scores")
            cache[k, cells] = _kde.density_from_binned(_binned(g, edges, cells), widths[k], g.n)
        return cache[k, cells]

    errors: list[float] = []

    def pair(i: int, j: int) -> float:
        cells = _kde.grid_size(min(widths[i], widths[j]))
        errors.append(_ABPC_SHIFT * (_steps(groups[i]) / widths[i]
                                     + _steps(groups[j]) / widths[j]))
        return float(np.abs(density(i, cells) - density(j, cells)).mean())

    value = _pairs("abpc", kept, keep, pair).aggregate(agg)  # type: ignore[arg-type]
    # max: the max of values each within its error; mean: the mean error
    error = (max(errors) if agg == "max" else float(np.mean(errors))) if errors else 0.0
    return AbccFromCells(value, error)
