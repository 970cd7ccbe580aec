"""MADD, the Model Absolute Density Distance (Verger et al., JEDM 2024; spec ``madd.md``).

MADD compares the groups' histograms of scores: with ``m`` equal bins on [0, 1] and per-group
bin proportions ``d_a``, ``d_b``, ``MADD = sum_k |d_a[k] - d_b[k]|`` in [0, 2] (twice the total
variation distance of the binned score distributions).

Choices made here (spec §7-§8):

- **Binning is numpy's** ``np.histogram(p, bins=m, range=(0, 1))`` with ``m = floor(1/h)``:
  edges ``np.linspace(0, 1, m + 1)``, bins left-closed, the last one closed at 1. A fixed
  bandwidth therefore gives exactly the value of the reference package maddlib.
- **``bandwidth="auto"``** is the paper's Algorithm 1: MADD on the grid ``h = 1/m``,
  ``m = max_bins..1``, then the interval of ``h`` of width >= 0.45 * h_sup spanning >= 50 grid
  steps (extended when shorter) whose MADD values have the smallest standard deviation; the
  value is their mean. ``compat="maddlib"`` reproduces the package's variant
  instead (fixed minimum width 0.05, intervals with too few points skipped, the package's
  ``floor(1 / (1/m))`` bin counts).
- **Fast "auto"**: each group is sorted once and all ``sum(m + 1)`` edges of the grid are
  located by one merge walk, which reproduces ``np.histogram``'s counts exactly, edge ties
  included; the interval search uses cumulative sums (O(N^2) instead of O(N^3)) and skips the
  rows that cannot hold the answer; a pair is one compiled call.
- **Scores outside [0, 1], NaN and inf are errors**; the package silently drops them.
- **More than two groups**: MADD on every pair (each pair with its own bandwidth search),
  aggregated by ``"max"`` (default) or ``"mean"``. ``"max"`` scores only the pairs that an
  upper bound cannot rule out (:mod:`.pairs`: the triangle inequality through reference
  distributions, and for ``"auto"`` the largest mean over the intervals the search may pick);
  the value and the worst pair are the all-pairs ones, bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError, dataclass, replace
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._validation import check_option, check_positive_int, check_scores, warn_undefined
from ...exceptions import InvalidInputError
from ...utils.groups import Groups, encode_groups
from .. import _worst_pair
from .._pairwise import AGGREGATIONS, Aggregation, PairwiseMatrix
from . import pairs as _pairs
from .bandwidth import (
    _STD_TIE,
    COMPAT_MIN_LENGTH,
    LENGTH_FRACTION,
    MIN_POINTS,
    _edge_shares,
    _first_ends,
    _Grid,
    _grid,
    _null_terms,
    madd_h_sup,
)

__all__ = ["MADDPair", "MADDResult", "madd"]

#: Bandwidth grid sizes accepted for "auto" (the interval search is O(N^2) a pair).
MAX_BINS_RANGE = (MIN_POINTS + 1, 1000)
#: Smallest fixed bandwidth (maddlib refuses h < 1e-6, i.e. more than 10^6 bins).
MAX_FIXED_BINS = 10**6

Compat = Literal["maddlib"]


@dataclass(frozen=True, slots=True)
class MADDPair:
    """MADD between two groups, with the bandwidth behind the value.

    Attributes
    ----------
    groups : tuple
        The two group labels.
    counts : tuple of int
        Rows per group.
    value : float
        MADD in [0, 2]; for ``"auto"``, the mean MADD over the stable interval.
    n_bins : int
        Number of bins: the fixed one, or for ``"auto"`` the grid point of the stable interval
        whose MADD is closest to ``value`` (reuse it as a fixed bandwidth to track this pair).
    bandwidth : float
        Effective bandwidth ``1 / n_bins`` (the bin width).
    interval : tuple of float or None
        ``"auto"`` only: the stable interval ``(h_lo, h_hi)``; every bandwidth ``h_lo <= h <
        h_hi`` gives one of the bin counts whose MADD was averaged (maddlib's convention).
    interval_std : float or None
        ``"auto"`` only: standard deviation of MADD over the stable interval.
    h_sup : float
        The paper's order of the optimal bandwidth, ``(1/sqrt(n_a) + 1/sqrt(n_b)) ** (2/3)``.
    null_expected : float
        Approximate expected MADD if both groups had the same score distribution (the noise
        floor of the estimator at these sizes and bins): ``sqrt(2/pi) * sum_k sqrt(p_k (1 - p_k)
        (1/n_a + 1/n_b))`` with pooled bin proportions ``p_k``, averaged over the interval for
        ``"auto"``.
    """

    groups: tuple[Any, Any]
    counts: tuple[int, int]
    value: float
    n_bins: int
    bandwidth: float
    interval: tuple[float, float] | None
    interval_std: float | None
    h_sup: float
    null_expected: float


class MADDResult:
    """Result of :func:`madd`: the headline value and the bandwidths behind it.

    ``float(result)`` is ``result.value``. ``n_bins``, ``bandwidth``, ``interval``, ``h_sup``
    and ``null_expected`` are those of ``worst``, the pair with the largest MADD (the only pair
    with two groups); every pair is in ``pairs`` and the full matrix in ``matrix``.

    With ``agg="max"`` the worst pair is found without scoring every pair (``docs/metrics.md``,
    "Many groups"); ``pairs`` and ``matrix`` are then computed when first read (every pair,
    once), and :meth:`pair` scores one pair on demand. Read-only.

    Attributes
    ----------
    value : float
        MADD in [0, 2] aggregated over pairs of groups; NaN (with a warning) when fewer than
        two groups remain.
    agg : {'max', 'mean'}
        How pairs were aggregated.
    attribute : str
        Sensitive attribute name (``"a:b"`` for an intersection).
    worst : MADDPair or None
        The pair with the largest MADD (the first in ``pairs`` order among ties).
    pairs : tuple of MADDPair
        Every pair of groups, ``(labels[i], labels[j])`` for ``i < j`` row by row.
    matrix : PairwiseMatrix or None
        Symmetric K x K matrix of pairwise MADD.
    group_labels : tuple
        The compared groups' labels, in matrix order.
    """

    # ``pairs`` and ``matrix`` are slots left unset until first read (then __getattr__ scores
    # every pair): a duck-typed reader scanning the slots finds the matrix as before
    __slots__ = ("value", "agg", "attribute", "worst", "pairs", "matrix", "_source")

    def __init__(self, value: float, agg: str, attribute: str, worst: MADDPair | None,
                 pairs: tuple[MADDPair, ...] | None = (), matrix: PairwiseMatrix | None = None,
                 *, source: Any = None) -> None:
        for name, item in (("value", value), ("agg", agg), ("attribute", attribute),
                           ("worst", worst), ("_source", source)):
            object.__setattr__(self, name, item)
        if source is None:
            object.__setattr__(self, "pairs", pairs)
            object.__setattr__(self, "matrix", matrix)

    def __getattr__(self, name: str) -> Any:
        if name in ("pairs", "matrix") and self._source is not None:
            pairs, matrix = self._source.every_pair()  # every pair, once
            object.__setattr__(self, "pairs", pairs)
            object.__setattr__(self, "matrix", matrix)
            return pairs if name == "pairs" else matrix
        raise AttributeError(f"'MADDResult' object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __getstate__(self) -> dict[str, Any]:
        # the set slots (a lazy result carries its scorer, whose scores travel with it)
        return {name: getattr(self, name) for name in self.__slots__
                if name not in ("pairs", "matrix") or self._source is None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, item in state.items():
            object.__setattr__(self, name, item)

    def __repr__(self) -> str:
        return (f"MADDResult(value={self.value!r}, agg={self.agg!r}, "
                f"attribute={self.attribute!r}, worst={self.worst!r})")

    def __float__(self) -> float:
        return float(self.value)

    @property
    def group_labels(self) -> tuple[Any, ...]:
        """The compared groups' labels, in matrix order (no pair is scored)."""
        if self._source is not None:
            return tuple(self._source.labels)
        return () if self.matrix is None else tuple(self.matrix.labels)

    def pair(self, a: Any, b: Any) -> MADDPair:
        """Return the MADD of groups labelled ``a`` and ``b`` (scored once, on demand).

        >>> r = madd([0.1, 0.2, 0.8, 0.9], sensitive_features=[0, 0, 1, 1], n_bins=10)
        >>> r.pair(0, 1).value
        2.0
        """
        index = {label: k for k, label in enumerate(self.group_labels)}
        i, j = sorted((index[a], index[b]))
        if self._source is not None:
            return self._source.pair(i, j)
        k = len(index)  # the pairs are stored row by row
        return self.pairs[i * k - i * (i + 1) // 2 + (j - i - 1)]

    @property
    def n_bins(self) -> int | None:
        """Bins behind the worst pair's value."""
        return None if self.worst is None else self.worst.n_bins

    @property
    def bandwidth(self) -> float | None:
        """Effective bandwidth (bin width) behind the worst pair's value."""
        return None if self.worst is None else self.worst.bandwidth

    @property
    def interval(self) -> tuple[float, float] | None:
        """Stable bandwidth interval of the worst pair (``"auto"`` only)."""
        return None if self.worst is None else self.worst.interval

    @property
    def h_sup(self) -> float | None:
        """The paper's optimal-bandwidth order for the worst pair's group sizes."""
        return None if self.worst is None else self.worst.h_sup

    @property
    def null_expected(self) -> float | None:
        """Approximate MADD of the worst pair under identical distributions (noise floor)."""
        return None if self.worst is None else self.worst.null_expected


# Options


class _Plan(NamedTuple):
    auto: bool
    n_bins: int  # fixed mode: the bin count; auto: the grid size
    compat: str | None


def _plan(bandwidth: Any, n_bins: Any, compat: Any, max_bins: Any) -> _Plan:
    check_option(compat, "compat", (None, "maddlib"), func="madd")
    if n_bins is not None:
        if not (isinstance(bandwidth, str) and bandwidth == "auto"):
            raise InvalidInputError(
                f"madd: pass either `bandwidth` or `n_bins`, not both; got bandwidth={bandwidth!r}"
                f" and n_bins={n_bins!r}."
            )
        m = check_positive_int(n_bins, "n_bins")
        if m > MAX_FIXED_BINS:
            raise InvalidInputError(
                f"`n_bins` must be at most {MAX_FIXED_BINS}; got {m}. Finer bins only add noise."
            )
        return _Plan(False, m, compat)
    if isinstance(bandwidth, str):
        check_option(bandwidth, "bandwidth", ("auto",), func="madd")
        lo, hi = MAX_BINS_RANGE
        grid = check_positive_int(max_bins, "max_bins", minimum=lo)
        if grid > hi:
            raise InvalidInputError(f"`max_bins` must be at most {hi}; got {grid}.")
        return _Plan(True, grid, compat)
    if isinstance(bandwidth, bool) or not isinstance(bandwidth, int | float | np.number):
        raise InvalidInputError(
            f"`bandwidth` must be 'auto' or a number in (0, 1]; got {bandwidth!r}."
        )
    h = float(bandwidth)
    if not (0.0 < h <= 1.0):  # also rejects NaN
        raise InvalidInputError(
            f"`bandwidth` must be in (0, 1] (the bin width on [0, 1]); got {bandwidth!r}."
        )
    if h < 1.0 / MAX_FIXED_BINS:
        raise InvalidInputError(
            f"`bandwidth` must be at least {1.0 / MAX_FIXED_BINS:g} (at most {MAX_FIXED_BINS} "
            f"bins); got {bandwidth!r}."
        )
    # float division then floor, exactly as the reference package: h=0.3 -> 3 bins.
    return _Plan(False, int(np.floor(1.0 / h)), compat)


# ---------------------------------------------------------------------------------------------
class _Prepared(NamedTuple):
    index: int
    n: int
    counts: NDArray[np.int64] | None  # fixed: the per-bin counts
    # "auto": every bin's share counts / n (every m of the grid concatenated, once per group),
    # and the rows below each grid edge (the null terms' counts, for the interval's bins only)
    share: NDArray[np.float64] | None = None
    below: NDArray[np.int64] | None = None


# ---------------------------------------------------------------------------------------------
# Pairwise kernels


def _fixed_pair(a: _Prepared, b: _Prepared, m: int) -> MADDPair:
    # the package's arithmetic exactly: proportions c / c.sum(), then np.sum(|d_a - d_b|)
    value = float(np.sum(np.abs(a.counts / a.n - b.counts / b.n)))
    null = float(np.sum(_null_terms(a.counts, b.counts, a.n, b.n)))
    return MADDPair((a.index, b.index), (a.n, b.n), value, m, 1.0 / m, None, None,
                    madd_h_sup(a.n, b.n), null)


def _auto_pair(a: _Prepared, b: _Prepared, grid: _Grid, compat: str | None,
               labels: tuple[Any, Any] | None = None) -> MADDPair:
    """MADD "auto" of groups ``a`` and ``b`` (labelled ``labels``, else by their index)."""
    from ..._kernels.madd import auto_pair

    h_sup = madd_h_sup(a.n, b.n)
    if compat == "maddlib":
        first_end = _first_ends(grid.h, COMPAT_MIN_LENGTH, extend=False)
    else:
        first_end = _first_ends(grid.h, LENGTH_FRACTION * h_sup, extend=True)
    # one compiled call: the curve (MADD per m), the interval, its mean and null terms
    i, j, variance, value, null, rep = auto_pair(
        a.share, b.share, a.below, b.below, a.n, b.n,
        math.sqrt(2 / math.pi * (1 / a.n + 1 / b.n)), (grid.lo, grid.hi, grid.start, grid.stop),
        first_end, _STD_TIE)
    m = int(grid.bins[rep])
    # the grid point h_j = 1/m stands for every h in [1/m, 1/(m-1)): all give m bins
    upper = float(grid.h[j + 1]) if j + 1 < grid.h.size else 1.0
    return MADDPair((a.index, b.index) if labels is None else labels, (a.n, b.n), value, m,
                    1.0 / m, (float(grid.h[i]), upper), math.sqrt(max(variance, 0.0)), h_sup,
                    null)


def _histograms_by_group(groups: Groups, scores: NDArray[np.float64], m: int
                         ) -> NDArray[np.int64]:
    """``np.histogram(group's scores, bins=m, range=(0, 1))`` of every group at once.

    One compiled pass with numpy's uniform-bin index computation (scale, truncate, then
    correct against the exact edges, so the counts are np.histogram's to the last row),
    counted at ``group * m + bin``: no argsort to split the groups.
    """
    from ..._kernels.madd import histograms_by_group

    return histograms_by_group(np.ascontiguousarray(scores, dtype=np.float64),
                               np.ascontiguousarray(groups.codes), m, groups.n_groups,
                               np.linspace(0.0, 1.0, m + 1))


class _Scorer:
    """Each pair scored on demand, once, as the all-pairs loop does; the groups prepared once.

    The source behind a :class:`MADDResult` whose pairs were not all scored. After the search
    :meth:`release` drops "auto"'s prepared groups (~1 MB of bin shares a group); a pair asked
    for later prepares its two groups again (:meth:`every_pair` all of them, in one block) from
    ``scores``, which is kept by reference (the caller's array: read, never written).
    """

    def __init__(self, groups: Groups, scores: NDArray[np.float64], plan: _Plan) -> None:
        self.groups, self.scores, self.plan = groups, scores, plan
        self.labels = groups.labels
        self.grid = _grid(plan.n_bins, plan.compat) if plan.auto else None
        self._prepared: list[_Prepared] | None = None
        self.shares: NDArray[np.float64] | None = None  # "auto": a row of bin shares a group
        self.scored: dict[tuple[int, int], MADDPair] = {}
        self._one: dict[int, _Prepared] = {}  # groups prepared alone, after release()
        self._parts: list[NDArray[np.float64]] | None = None

    @property
    def prepared(self) -> list[_Prepared]:
        """Every group's histogram ("auto": bin shares and edge positions)."""
        if self._prepared is None:
            self._prepared, self.shares = _prepared_groups(self.groups, self.scores, self.plan,
                                                           self.grid)
        return self._prepared

    def release(self) -> None:
        """Drop "auto"'s prepared groups (prepared again if another pair is asked for)."""
        if self.grid is not None:
            self._prepared = self.shares = None
        self._one, self._parts = {}, None

    def _sorted_parts(self) -> list[NDArray[np.float64]]:
        """Each group's scores, sorted (split and sorted once, kept until :meth:`release`)."""
        if self._parts is None:
            # a summary's groups arrive sorted: check in O(n) instead of sorting again
            self._parts = [part if bool(np.all(part[1:] >= part[:-1])) else np.sort(part)
                           for part in self.groups.split(self.scores)]
        return self._parts

    def _group(self, i: int) -> _Prepared:
        """Return group ``i`` prepared: from the block, or alone.

        Alone after :meth:`release`, or while the worst pair of "auto" is searched (only the
        pairs scored need their full shares).
        """
        if self._prepared is not None:
            return self._prepared[i]
        if i not in self._one:
            assert self.grid is not None  # a fixed bandwidth keeps its histograms
            ordered = self._sorted_parts()[i]
            out = (np.empty(self.grid.lo.size),
                   np.empty(self.grid.edges.size,
                            dtype=np.int32 if self.scores.size < 2**31 else np.int64))
            self._one[i] = _Prepared(i, int(ordered.size), None,
                                     *_edge_shares(ordered, self.grid, out))
        return self._one[i]

    def pair(self, i: int, j: int) -> MADDPair:
        """Return the MADD of groups ``i < j`` (by index)."""
        if (i, j) not in self.scored:
            a, b = self._group(i), self._group(j)
            labels = (self.labels[i], self.labels[j])
            self.scored[i, j] = (
                replace(_fixed_pair(a, b, self.plan.n_bins), groups=labels) if self.grid is None
                else _auto_pair(a, b, self.grid, self.plan.compat, labels))
        return self.scored[i, j]

    def every_pair(self) -> tuple[tuple[MADDPair, ...], PairwiseMatrix]:
        """Return every pair (row by row) and the matrix."""
        k = self.groups.n_groups
        # every group in one block, unless every pair is scored already (after worst() on
        # few groups): preparing again would sort every group a second time for nothing
        made = self._prepared is None and len(self.scored) < k * (k - 1) // 2
        if made:
            _ = self.prepared
        matrix = np.zeros((k, k))
        pairs = []
        for i in range(k):
            for j in range(i + 1, k):
                pairs.append(self.pair(i, j))
                matrix[i, j] = matrix[j, i] = pairs[-1].value
        if made:  # made for this call: not kept beside the pairs
            self.release()
        return tuple(pairs), PairwiseMatrix("madd", self.groups.name, self.groups.labels,
                                            self.groups.counts, matrix)

    def worst(self) -> MADDPair:
        """Return the worst pair, scoring only the pairs that may be it (:mod:`.pairs`)."""
        k = self.groups.n_groups
        if k <= (_worst_pair.SMALL if self.grid is None else _pairs.AUTO_SMALL):
            return max(self.every_pair()[0], key=lambda p: p.value)

        def value(i: int, j: int) -> float:
            return self.pair(i, j).value

        if self.grid is None:
            prepared = self.prepared
            sizes = np.array([p.n for p in prepared], dtype=np.int64)
            proportions = np.stack([p.counts / p.n for p in prepared])
            found = _pairs.worst_fixed(proportions, sizes, value)
        else:  # the groups' full shares only for the pairs scored (:meth:`_group`)
            found = _pairs.worst_auto(self._sorted_parts(), np.asarray(self.groups.counts),
                                      self.grid, self.plan.compat, value)
        return self.pair(*found.pair)


def _prepared_groups(groups: Groups, scores: NDArray[np.float64], plan: _Plan,
                     grid: _Grid | None
                     ) -> tuple[list[_Prepared], NDArray[np.float64] | None]:
    """Prepare every group once: its histogram, or "auto"'s shares (and their block)."""
    if grid is None:
        hist = _histograms_by_group(groups, scores, plan.n_bins)
        return [_Prepared(k, int(n), hist[k]) for k, n in enumerate(groups.counts)], None
    # every group's shares and edge positions in two blocks: one allocation each (numpy asks
    # for huge pages from 4 MiB), not two fresh ~1 MB arrays a group to fault in page by page
    shares = np.empty((groups.n_groups, grid.lo.size))
    below = np.empty((groups.n_groups, grid.edges.size),
                     dtype=np.int32 if scores.size < 2**31 else np.int64)
    prepared = []
    for k, part in enumerate(groups.split(scores)):
        # a summary's groups arrive sorted: check in O(n) instead of sorting again
        ordered = part if bool(np.all(part[1:] >= part[:-1])) else np.sort(part)
        prepared.append(_Prepared(k, int(part.size), None,
                                  *_edge_shares(ordered, grid, (shares[k], below[k]))))
    return prepared, shares


def _prepare(groups: Groups, scores: NDArray[np.float64], plan: _Plan) -> _Scorer | None:
    """Return the groups' scorer (None, after a warning, with fewer than two groups)."""
    reason = groups.two_group_reason()
    if reason is not None:
        warn_undefined("madd", reason)
        return None
    return _Scorer(groups, scores, plan)


def _madd_matrix(
    y_score: ArrayLike,
    *,
    sensitive_features: Any,
    bandwidth: float | str = "auto",
    n_bins: int | None = None,
    compat: Compat | None = None,
    max_bins: int = 499,
    min_group_size: int = 1,
) -> PairwiseMatrix | None:
    """Return the K x K matrix of pairwise MADD (None, with a warning, under two groups)."""
    scorer = _evaluate(y_score, sensitive_features, bandwidth, n_bins, compat, max_bins,
                       min_group_size)[1]
    return None if scorer is None else scorer.every_pair()[1]


def _evaluate(y_score: ArrayLike, sensitive_features: Any, bandwidth: Any, n_bins: Any,
              compat: Any, max_bins: Any, min_group_size: int
              ) -> tuple[Groups, _Scorer | None]:
    scores = check_scores(y_score, "y_score", copy=False)  # read only: no copy of the input
    plan = _plan(bandwidth, n_bins, compat, max_bins)
    groups = encode_groups(sensitive_features, n_samples=scores.size,
                           min_group_size=min_group_size)
    return groups, _prepare(groups, scores, plan)


def madd(
    y_score: ArrayLike,
    *,
    sensitive_features: Any,
    agg: Aggregation = "max",
    bandwidth: float | str = "auto",
    n_bins: int | None = None,
    compat: Compat | None = None,
    max_bins: int = 499,
    min_group_size: int = 1,
) -> MADDResult:
    r"""Model Absolute Density Distance: L1 distance between the groups' score histograms.

    .. math:: \mathrm{MADD}(a, b) = \sum_{k=1}^{m} \left| \frac{1}{n_a}\sum_{i \in a}
              1_{I_k}(p_i) - \frac{1}{n_b}\sum_{i \in b} 1_{I_k}(p_i) \right|

    with ``m = floor(1/h)`` equal bins ``I_k`` on [0, 1]. 0 means the groups' binned score
    distributions coincide; 2 means they share no bin.

    Parameters
    ----------
    y_score : array-like of shape (n_samples,)
        Scores (probabilities of the positive class) in [0, 1].
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    agg : {'max', 'mean'}, default='max'
        With more than two groups: the worst pair, or the unweighted mean over all pairs.
    bandwidth : 'auto' or float in (0, 1], default='auto'
        A float ``h`` uses ``floor(1/h)`` bins (bin width ``1/floor(1/h)``), exactly as the
        reference package. ``'auto'`` runs the paper's optimal bandwidth interval search
        (Algorithm 1) for every pair and returns the mean MADD over the stable interval.
    n_bins : int, optional
        Number of bins, instead of ``bandwidth``.
    compat : {None, 'maddlib'}, default=None
        ``'maddlib'`` makes ``'auto'`` reproduce the maddlib package's ``MADD(h="auto")``
        (see Notes). Fixed bandwidths are identical in both modes.
    max_bins : int, default=499
        ``'auto'`` searches ``h = 1/m`` for ``m = 1..max_bins`` (the paper used 1000, maddlib
        499); between 51 and 1000.
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.

    Returns
    -------
    result : MADDResult
        ``result.value`` (also ``float(result)``) in [0, 2], the bins and bandwidth behind it,
        the stable interval, ``h_sup``, the noise floor ``null_expected`` and every pair. The
        value is NaN, with an :class:`~fairmonitor.exceptions.UndefinedMetricWarning`, when
        fewer than two groups remain.

    Raises
    ------
    InvalidInputError
        Scores outside [0, 1], NaN or infinite; misaligned arrays; a bad option.

    Notes
    -----
    Bin ``k`` is ``[edges[k], edges[k+1])`` with ``edges = np.linspace(0, 1, m + 1)``, the last
    bin closed at 1, as ``np.histogram``: with 10 bins, 0.3 falls in ``[0.2, 0.3)`` because the
    edge is 0.30000000000000004. A bin count ``m`` implies the bin width ``1/m``, not ``h``.

    ``'auto'`` (paper §4.3, spec §1.5): MADD is computed for ``h = 1/m``, ``m = max_bins..1``
    (ascending ``h``). An interval ``[h_i, h_j]`` is eligible if it is at least
    ``0.45 * h_sup`` wide, ``h_sup = ((sqrt(n_a) + sqrt(n_b)) / sqrt(n_a n_b))^(2/3)``, and
    ``j - i >= 50`` (51 grid points: the package's count of the paper's "at least 50 values";
    a start whose minimal-width interval is shorter is extended, as the paper says). The
    eligible interval with the smallest population standard deviation of MADD wins (ties: the
    first); its mean MADD is the value. ``interval`` is ``(h_i, h_{j+1})``: every bandwidth in
    it gives one of the bin counts averaged. ``n_bins`` and ``bandwidth`` of the result are the
    interval's grid point whose MADD is closest to that mean.

    ``compat='maddlib'`` reproduces maddlib 1.1.0's ``MADD(h="auto")``, which differs from the
    paper: minimum width 0.05 whatever the group sizes; starts whose minimal interval holds
    fewer than 51 points are skipped rather than extended; bin counts are
    ``int(floor(1 / (1/m)))``, which repeats some ``m`` and skips others (93, 99, ...). The two
    modes can differ by about 0.01.

    Deliberate deviations from the reference package: scores outside [0, 1] (beyond 1e-9),
    NaN and inf raise instead of being silently dropped; groups are aligned by row position,
    never by DataFrame index; more than two groups are compared pairwise.

    MADD is biased upwards on small groups (``null_expected``); compare values only at
    comparable group sizes and bandwidths, or use a permutation test.

    Cost: fixed bandwidth, one pass binning every group at once (numpy's histogram rule).
    ``'auto'``, one sort and ~0.3 ms per group, ~0.1 ms per pair of groups (the 499-point
    curve and the interval search, compiled: 40 groups at 10^5 rows take ~0.2 s). With
    ``agg='max'`` only the pairs an upper bound cannot rule out are scored (the triangle
    inequality through three reference distributions; ``result.pairs`` and ``result.matrix``
    score the others when first read): a fixed bandwidth at 400 groups scores ~10% of the
    pairs; ``'auto'`` adds each pair's own curve at the coarse bin counts to the bound, so
    few pairs are scored even where many groups are small (``docs/metrics.md``, "Many
    groups").

    Examples
    --------
    >>> scores = [0.1, 0.2, 0.33, 0.5, 0.2]
    >>> groups = ["a", "a", "a", "b", "b"]
    >>> result = madd(scores, sensitive_features=groups, bandwidth=0.05)
    >>> round(result.value, 12), result.n_bins
    (1.333333333333, 20)
    >>> float(madd([0.2, 0.2, 0.8, 0.8], sensitive_features=[0, 0, 1, 1], n_bins=10))
    2.0
    """
    check_option(agg, "agg", AGGREGATIONS, func="madd")
    groups, scorer = _evaluate(y_score, sensitive_features, bandwidth, n_bins, compat,
                               max_bins, min_group_size)
    if scorer is None:
        return MADDResult(float("nan"), agg, groups.name, None, (), None)
    if agg == "max":  # the worst pair without scoring every pair; the others when asked for
        worst = scorer.worst()
        if len(scorer.scored) == scorer.groups.n_groups * (scorer.groups.n_groups - 1) // 2:
            pairs, matrix = scorer.every_pair()
            return MADDResult(worst.value, agg, groups.name, worst, pairs, matrix)
        scorer.release()
        return MADDResult(worst.value, agg, groups.name, worst, None, None, source=scorer)
    pairs, matrix = scorer.every_pair()
    worst = max(pairs, key=lambda p: p.value)
    return MADDResult(matrix.aggregate(agg), agg, groups.name, worst, pairs, matrix)
