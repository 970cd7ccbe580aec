"""Distributional parity of a regressor's predictions, whatever the targets say.

Statistical parity for regression (Agarwal, Dudik and Wu, "Fair Regression", ICML 2019) asks
the distribution of the prediction to be the same in every group. Measured three ways:

- :func:`prediction_ks_distance`: the Kolmogorov-Smirnov distance between each group's
  prediction CDF and the pooled one, ``max_g sup_x |F_g(x) - F(x)|`` (the paper's measure; in
  [0, 1], unit-free);
- :func:`prediction_wasserstein`: the Wasserstein-1 distance between groups (ABCC's quantity,
  the area between two CDFs), the largest over pairs, in the prediction's units: how far, on
  average, one group's predictions would have to move to match another's;
  :func:`prediction_wasserstein_scaled` divides it by a scale (a configured one, e.g. the
  reference data's interquartile range, else the window's pooled IQR);
- :func:`prediction_madd`: MADD on the predictions mapped to [0, 1] by a fixed range
  ``value_range`` (from the config or the reference data: then values are comparable across
  windows; without it, the window's own min and max).

Every CDF is read on the pooled predictions sorted once: a group's CDF is the cumulative sum of
its rows' weights in that order, so a resampling draw (:mod:`._resample`) changes the weights
only and never sorts again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._validation import check_continuous, warn_undefined
from .._madd import madd
from ._common import Prepared, RegressionGap, prepare
from ._resample import N_RESAMPLES, cell_intervals

__all__ = ["DISTRIBUTION_METRICS", "PredictionDistribution", "distribution_from_cells",
           "prediction_distribution",
           "prediction_ks_distance", "prediction_madd", "prediction_wasserstein",
           "prediction_wasserstein_scaled"]

_NAN = float("nan")


class _Sorted:
    """The kept rows sorted by prediction once, with each distinct value's position."""

    def __init__(self, p: Prepared) -> None:
        order = np.argsort(p.y_pred, kind="stable")
        values = p.y_pred[order]
        self.codes, self.weight, self.n_groups = p.codes[order], p.weight[order], p.n_groups
        new = np.r_[True, values[1:] != values[:-1]]
        self.rank = np.cumsum(new) - 1  # index of each row's distinct value
        self.points = values[new]
        self.dx = np.diff(self.points)

    def cdfs(self, weight: NDArray[np.float64], codes: NDArray[np.intp]
             ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Return each group's CDF (K, m) and the pooled CDF (m,) at the distinct values."""
        m = self.points.size
        mass = np.bincount(codes * m + self.rank, weights=weight,
                           minlength=self.n_groups * m).reshape(self.n_groups, m)
        cum = np.cumsum(mass, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            groups = cum / cum[:, -1:]
        pooled = cum.sum(axis=0)
        return groups, pooled / pooled[-1]


def _ks(s: _Sorted, weight: NDArray[np.float64], codes: NDArray[np.intp],
        cdfs: Any = None) -> NDArray[np.float64]:
    groups, pooled = s.cdfs(weight, codes) if cdfs is None else cdfs
    return np.abs(groups - pooled).max(axis=1)


def _w1_pairs(s: _Sorted, weight: NDArray[np.float64], codes: NDArray[np.intp],
              cdfs: Any = None) -> NDArray[np.float64]:
    """Return the (K, K) matrix of Wasserstein-1 distances between the groups."""
    groups, _ = s.cdfs(weight, codes) if cdfs is None else cdfs
    k = s.n_groups
    out = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            # a plain sum, not BLAS: its threads spin on a busy machine
            out[i, j] = out[j, i] = float((np.abs(groups[i, :-1] - groups[j, :-1]) * s.dx).sum())
    return out


#: The intervals read the CDFs at no more than this many points (quantile bins of the pooled
#: predictions); the values themselves read every distinct prediction.
MAX_BINS = 256


def _cells(s: _Sorted, max_bins: int = MAX_BINS
           ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Rows and weight per (group, quantile bin), and the bins' widths (their last values)."""
    m = s.points.size
    bins = min(m, max_bins)
    index = s.rank * bins // m
    last = (np.arange(1, bins + 1) * m + bins - 1) // bins - 1  # last distinct value per bin
    flat = s.codes * bins + index
    size = s.n_groups * bins
    counts = np.bincount(flat, minlength=size).reshape(s.n_groups, bins).astype(float)
    mass = np.bincount(flat, weights=s.weight, minlength=size).reshape(s.n_groups, bins)
    return counts, mass, np.diff(s.points[last])


def _cell_statistics(mass: NDArray[np.float64], dx: NDArray[np.float64],
                     scale: float) -> NDArray[np.float64]:
    """KS, W1 and scaled W1 from (... x group x bin) weights, as the values read the rows.

    Leading axes are draws: every draw of a resampling at once, one compiled pass a draw
    (``_kernels/regression.pyx``: each group's CDF as the cumulative share of its weight, KS
    against the pooled CDF, W1 ``|F_i - F_j| @ dx`` over each unordered pair once).

    >>> _cell_statistics(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([2.0]), 4.0).tolist()
    [0.5, 2.0, 0.5]
    """
    from ..._kernels.regression import cell_statistics

    groups, bins = mass.shape[-2:]
    flat = np.ascontiguousarray(mass, dtype=float).reshape(-1, groups, bins)
    out = cell_statistics(flat, np.ascontiguousarray(dx, dtype=float), float(scale))
    return out.reshape(*mass.shape[:-2], 3)


#: the metrics one call of :func:`prediction_distribution` computes, in its field order
DISTRIBUTION_METRICS = ("prediction_ks_distance", "prediction_wasserstein",
                        "prediction_wasserstein_scaled")


@dataclass(frozen=True)
class PredictionDistribution:
    """The distributional parity metrics of one attribute, from one sort and one resampling.

    Each field is the :class:`RegressionGap` of the metric of that name.
    """

    prediction_ks_distance: RegressionGap
    prediction_wasserstein: RegressionGap
    prediction_wasserstein_scaled: RegressionGap


def _iqr(values: NDArray[np.float64]) -> float:
    q1, q3 = np.quantile(values, [0.25, 0.75])
    return float(q3 - q1)


def _results(p: Prepared, s: _Sorted, scale: float, source: str, intervals: list[Any],
             only: str | None) -> PredictionDistribution:
    cdfs = s.cdfs(s.weight, s.codes)  # once, for both
    ks = _ks(s, s.weight, s.codes, cdfs)
    pairs = _w1_pairs(s, s.weight, s.codes, cdfs)
    worst = int(np.nanargmax(ks))
    i, j = np.unravel_index(int(np.nanargmax(pairs)), pairs.shape)
    pair = (p.labels[min(i, j)], p.labels[max(i, j)])
    out = {"prediction_ks_distance": RegressionGap(
        float(ks[worst]), "prediction_ks_distance", p.per_group(ks), p.counts(),
        (p.labels[worst],), intervals[0])}
    for k, (metric, by) in enumerate((("prediction_wasserstein", 1.0),
                                      ("prediction_wasserstein_scaled", scale)), start=1):
        if not (np.isfinite(by) and by > 0):
            value = (warn_undefined(metric, f"the scale ({source}) is {by:g}; give a positive "
                                            "`scale`") if only in (None, metric) else _NAN)
            out[metric] = RegressionGap(value, metric, counts=p.counts())
            continue
        detail = {"pairs": {(p.labels[a], p.labels[b]): float(pairs[a, b] / by)
                            for a in range(p.n_groups) for b in range(a + 1, p.n_groups)}}
        if k == 2:
            detail.update(scale=scale, scale_source=source)
        out[metric] = RegressionGap(float(pairs[i, j] / by), metric,
                                    p.per_group(np.nanmax(pairs, axis=1) / by), p.counts(),
                                    pair, intervals[k], detail)
    return PredictionDistribution(**out)


def prediction_distribution(y_pred: ArrayLike, *, sensitive_features: Any,
                            scale: float | None = None, min_group_size: int = 1,
                            sample_weight: ArrayLike | None = None,
                            confidence_level: float | None = None,
                            n_resamples: int = N_RESAMPLES, random_state: Any = None,
                            only: str | None = None) -> PredictionDistribution:
    """Compute every distributional parity metric of one attribute at once (the report's call).

    The predictions are sorted once; the KS distances and the Wasserstein-1 distances read the
    same CDFs, and one resampling gives all their intervals.

    Parameters
    ----------
    y_pred, sensitive_features, min_group_size, sample_weight, confidence_level, n_resamples,
    random_state
        As :func:`prediction_ks_distance`.
    scale : float, optional
        As :func:`prediction_wasserstein_scaled`.
    only : str, optional
        Warn about this metric only when undefined; default: every undefined one.

    Returns
    -------
    result : PredictionDistribution

    Examples
    --------
    >>> r = prediction_distribution([1, 2, 11, 12], sensitive_features=list("aabb"), scale=20)
    >>> float(r.prediction_ks_distance), float(r.prediction_wasserstein_scaled)
    (0.5, 0.5)
    """
    p = prepare(None, y_pred, sensitive_features, min_group_size=min_group_size,
                sample_weight=sample_weight)
    reason = p.reason
    if reason is None and np.count_nonzero(np.bincount(
            p.codes, weights=p.weight, minlength=p.n_groups) > 0) < 2:
        reason = f"fewer than two groups of '{p.name}' have weight"
    if reason is not None:
        return PredictionDistribution(**{
            m: RegressionGap(warn_undefined(m, reason) if only in (None, m) else _NAN, m,
                             counts=p.counts()) for m in DISTRIBUTION_METRICS})
    source = "option" if scale is not None else "window IQR"
    used = float(scale) if scale is not None else _iqr(p.y_pred)
    s = _Sorted(p)
    intervals: list[Any] = [None] * 3
    if confidence_level is not None:
        divisor = used if np.isfinite(used) and used > 0 else _NAN
        counts, mass, dx = _cells(s)
        intervals = cell_intervals(lambda cells: _cell_statistics(cells, dx, divisor), counts,
                                   mass, level=confidence_level, n_resamples=n_resamples,
                                   random_state=random_state)
    return _results(p, s, used, source, intervals, only)


# --------------------------------------------------------------------------- from cells


class _CellCdfs:
    """Each kept group's and the pooled CDF just below (``a``) and at the top (``b``) of cells.

    A cell holds predictions in ``[lo, hi]`` (its pooled min and max); between cells both
    CDFs are flat. ``count`` and ``total`` (groups x cells) are the rows and the sum of the
    predictions of each group in each cell.
    """

    def __init__(self, count: NDArray[np.float64], total: NDArray[np.float64],
                 low: NDArray[np.float64], high: NDArray[np.float64]) -> None:
        self.lo, self.hi = low.min(axis=0), high.max(axis=0)
        n = count.sum(axis=1, keepdims=True)
        self.b = np.cumsum(count, axis=1) / n
        self.a = self.b - count / n
        pooled = count.sum(axis=0)
        self.pb = np.cumsum(pooled) / pooled.sum()
        self.pa = self.pb - pooled / pooled.sum()
        width = self.hi - self.lo
        # the integral of each group's CDF over its cell [lo, hi]: exact from count and sum
        # (a row at x adds (hi - x) / n); 0 on a cell of one value (no round-off from sums)
        inside = self.a * width + (count * self.hi - total) / n
        self.integral = np.where(width > 0, inside, 0.0)
        self.width = width


def _ks_bounds(c: _CellCdfs) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per group, bounds of the KS distance to the pooled CDF.

    The values at the cells' ends are attained (``|b_g - b|``; ``|a_g - a|`` is the previous
    cell's); inside a cell of several values the CDFs rise from ``a`` to ``b`` in unknown
    ways, so ``|F_g - F| <= max(b_g - a, b - a_g)`` there.
    """
    low = np.maximum(np.abs(c.a - c.pa), np.abs(c.b - c.pb))
    high = np.where(c.width > 0, np.maximum(low, np.maximum(c.b - c.pa, c.pb - c.a)), low)
    return low.max(axis=1), high.max(axis=1)


def _w1_bounds(c: _CellCdfs, i: int, j: int) -> tuple[float, float]:
    """Bounds of the Wasserstein-1 distance between groups i and j.

    Between cells the CDFs are flat: exact. Inside a cell ``D = integral(F_i - F_j)`` is
    exact; where ``F_i - F_j`` cannot change sign (``a_i >= b_j`` or ``b_i <= a_j``) the
    cell contributes ``|D|``, else between ``|D|`` and ``min(D + 2 w (b_j - a_i),
    -D + 2 w (b_i - a_j))`` (``integral |f| = D + 2 integral f^- = -D + 2 integral f^+``).
    """
    between = float((np.abs(c.b[i, :-1] - c.b[j, :-1]) * (c.lo[1:] - c.hi[:-1])).sum())
    d = c.integral[i] - c.integral[j]
    up_i, up_j = c.b[i] - c.a[j], c.b[j] - c.a[i]  # the largest F_i - F_j, F_j - F_i
    sure = (up_i <= 0) | (up_j <= 0) | (c.width == 0)
    upper = np.minimum(d + 2 * c.width * up_j, -d + 2 * c.width * up_i)
    upper = np.where(sure, np.abs(d), np.maximum(upper, np.abs(d)))
    return between + float(np.abs(d).sum()), between + float(upper.sum())


def _fold(count: NDArray[np.float64], points: NDArray[np.float64], max_bins: int = MAX_BINS
          ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Cells folded into at most ``max_bins`` consecutive bins, and the bins' widths.

    :func:`_cells` on cells instead of distinct values: bin ``k * bins // m`` of cell k, the
    bin's CDF read at its last cell's top (``points``).
    """
    m = points.size
    bins = min(m, max_bins)
    index = np.arange(m) * bins // m
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    last = np.r_[starts[1:], m] - 1
    return np.add.reduceat(count, starts, axis=1), np.diff(points[last])


def distribution_from_cells(count: NDArray[np.float64], total: NDArray[np.float64],
                            low: NDArray[np.float64], high: NDArray[np.float64], groups: Any,
                            *, scale: float | None = None,
                            confidence_level: float | None = None,
                            n_resamples: int = N_RESAMPLES, random_state: Any = None,
                            only: str | None = None) -> PredictionDistribution:
    """:func:`prediction_distribution` from cells of the predictions, with certified errors.

    Parameters
    ----------
    count, total : ndarray of shape (kept groups, cells)
        Rows and the sum of their predictions, per kept group and cell; cells in increasing
        order of their values, each holding at least one row of some group.
    low, high : ndarray of shape (kept groups, cells)
        Per group and cell, the smallest and largest prediction (``inf``, ``-inf`` where the
        group has none).
    groups : Groups
        The kept groups (labels, counts, name, exclusions), as
        :func:`~fairmonitor.utils.groups.exclude_small` gives them.
    scale, confidence_level, n_resamples, random_state, only
        As :func:`prediction_distribution`; without ``scale`` the scaled Wasserstein distance
        is NaN (the window's interquartile range is not known from cells).

    Returns
    -------
    result : PredictionDistribution
        Each value lies within ``detail["error"]`` of the value on the rows behind the cells
        (plus float round-off): the KS distance and the Wasserstein-1 distance are bounded
        from below and above in every cell (the CDFs are known exactly at the cells' ends,
        and each group's CDF integral over a cell from its count and sum); the value is the
        midpoint of the bounds, ``error`` the largest half-width. A cell of one value is
        exact, so cells of distinct values give the rows' values. The intervals read the
        cells folded into at most 256 bins (the row path's quantile bins of distinct values).

    Examples
    --------
    One value per cell: the rows' values, error 0.

    >>> from fairmonitor.utils.groups import contiguous_groups
    >>> count = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    >>> x = np.array([1.0, 2.0, 11.0, 12.0])
    >>> low = np.where(count > 0, x, np.inf)
    >>> high = np.where(count > 0, x, -np.inf)
    >>> g = contiguous_groups(("a", "b"), np.array([2, 2]), "g")
    >>> r = distribution_from_cells(count, count * x, low, high, g, scale=20.0)
    >>> float(r.prediction_wasserstein), r.prediction_wasserstein.detail["error"]
    (10.0, 0.0)
    """
    p = Prepared(codes=np.zeros(0, dtype=np.intp), labels=groups.labels, weight=np.zeros(0),
                 y_pred=np.zeros(0), y_true=None, name=groups.name,
                 reason=groups.two_group_reason(), sizes=np.asarray(groups.counts))
    if p.reason is not None:
        return PredictionDistribution(**{
            m: RegressionGap(warn_undefined(m, p.reason) if only in (None, m) else _NAN, m,
                             counts=p.counts()) for m in DISTRIBUTION_METRICS})
    c = _CellCdfs(count, total, low, high)
    ks_lo, ks_hi = _ks_bounds(c)
    k = p.n_groups
    w_lo, w_hi = np.zeros((k, k)), np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            w_lo[i, j], w_hi[i, j] = _w1_bounds(c, i, j)
    intervals: list[Any] = [None] * 3
    by = _NAN if scale is None else float(scale)
    if confidence_level is not None:
        folded, dx = _fold(count, c.hi)
        intervals = cell_intervals(
            lambda cells: _cell_statistics(cells, dx, by if np.isfinite(by) and by > 0
                                           else _NAN),
            folded, folded, level=confidence_level, n_resamples=n_resamples,
            random_state=random_state)
    return _cell_results(p, (ks_lo, ks_hi), (w_lo + w_lo.T, w_hi + w_hi.T), by,
                         "option" if scale is not None else "none (cells)", intervals, only)


def _cell_results(p: Prepared, ks: tuple[NDArray[np.float64], NDArray[np.float64]],
                  w1: tuple[NDArray[np.float64], NDArray[np.float64]], scale: float,
                  source: str, intervals: list[Any], only: str | None
                  ) -> PredictionDistribution:
    """Return the results of :func:`distribution_from_cells`: bounds' midpoints, half-widths."""
    mid, half = (ks[0] + ks[1]) / 2, (ks[1] - ks[0]) / 2
    worst = int(np.argmax(mid))
    out = {"prediction_ks_distance": RegressionGap(
        float(mid[worst]), "prediction_ks_distance", p.per_group(mid), p.counts(),
        (p.labels[worst],), intervals[0], {"error": float(half.max())})}
    pairs, spread = (w1[0] + w1[1]) / 2, (w1[1] - w1[0]) / 2
    i, j = np.unravel_index(int(np.argmax(pairs)), pairs.shape)
    for k, (metric, by) in enumerate((("prediction_wasserstein", 1.0),
                                      ("prediction_wasserstein_scaled", scale)), start=1):
        if not (np.isfinite(by) and by > 0):
            why = ("give `scale`: the window's interquartile range is not kept by a summary "
                   "of cells" if source.startswith("none") else
                   f"the scale ({source}) is {by:g}; give a positive `scale`")
            out[metric] = RegressionGap(warn_undefined(metric, why) if only in (None, metric)
                                        else _NAN, metric, counts=p.counts())
            continue
        detail: dict[str, Any] = {
            "pairs": {(p.labels[a], p.labels[b]): float(pairs[a, b] / by)
                      for a in range(p.n_groups) for b in range(a + 1, p.n_groups)},
            "error": float(spread.max() / by)}
        if k == 2:
            detail.update(scale=scale, scale_source=source)
        out[metric] = RegressionGap(float(pairs[i, j] / by), metric,
                                    p.per_group(pairs.max(axis=1) / by), p.counts(),
                                    (p.labels[min(i, j)], p.labels[max(i, j)]), intervals[k],
                                    detail)
    return PredictionDistribution(**out)


def _one(metric: str, y_pred: ArrayLike, **kwargs: Any) -> RegressionGap:
    return getattr(prediction_distribution(y_pred, only=metric, **kwargs), metric)


def prediction_ks_distance(y_pred: ArrayLike, *, sensitive_features: Any,
                           min_group_size: int = 1, sample_weight: ArrayLike | None = None,
                           confidence_level: float | None = None,
                           n_resamples: int = N_RESAMPLES,
                           random_state: Any = None) -> RegressionGap:
    """Largest Kolmogorov-Smirnov distance between a group's predictions and the pooled ones.

    ``max_g sup_x |F_g(x) - F(x)|``, with ``F_g`` the (weighted) empirical CDF of group g's
    predictions and ``F`` that of all kept rows: the statistic ``scipy.stats.ks_2samp`` gives
    on (group, pooled). 0 when every group's predictions are distributed alike (statistical
    parity), 1 at most.

    Parameters
    ----------
    y_pred : array-like of shape (n_samples,)
        Predictions (finite numbers).
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.
    sample_weight : array-like of shape (n_samples,), optional
        Per-row weights: weighted CDFs.
    confidence_level, n_resamples, random_state
        As :func:`~fairmonitor.metrics.mae_difference`.

    Returns
    -------
    result : RegressionGap
        Each group's distance to the pooled CDF in ``by_group``, the worst group in
        ``extremes``.

    Examples
    --------
    Group a predicts 1 and 2, group b 3 and 4: the pooled CDF is 1/2 at 2, group a's 1.

    >>> r = prediction_ks_distance([1, 2, 3, 4], sensitive_features=list("aabb"))
    >>> float(r), r.by_group
    (0.5, {'a': 0.5, 'b': 0.5})
    """
    return _one("prediction_ks_distance", y_pred, sensitive_features=sensitive_features,
                min_group_size=min_group_size, sample_weight=sample_weight,
                confidence_level=confidence_level, n_resamples=n_resamples,
                random_state=random_state)


def prediction_wasserstein(y_pred: ArrayLike, *, sensitive_features: Any,
                           min_group_size: int = 1, sample_weight: ArrayLike | None = None,
                           confidence_level: float | None = None,
                           n_resamples: int = N_RESAMPLES,
                           random_state: Any = None) -> RegressionGap:
    """Largest Wasserstein-1 distance between two groups' predictions, in prediction units.

    ``max_{g,h} integral |F_g(x) - F_h(x)| dx``: how far, on average, one group's
    predictions would have to move to be distributed as another's
    (``scipy.stats.wasserstein_distance`` of the two groups; ABCC's quantity on scores).

    Parameters
    ----------
    y_pred : array-like of shape (n_samples,)
        Predictions (finite numbers).
    sensitive_features, min_group_size, sample_weight, confidence_level, n_resamples,
    random_state
        As :func:`prediction_ks_distance`.

    Returns
    -------
    result : RegressionGap
        Each group's largest distance to another group in ``by_group``, the worst pair in
        ``extremes``, every pair in ``detail["pairs"]``.

    Examples
    --------
    Group b's predictions are group a's moved up by 10:

    >>> float(prediction_wasserstein([1, 2, 11, 12], sensitive_features=list("aabb")))
    10.0
    """
    return _one("prediction_wasserstein", y_pred, sensitive_features=sensitive_features,
                min_group_size=min_group_size, sample_weight=sample_weight,
                confidence_level=confidence_level, n_resamples=n_resamples,
                random_state=random_state)


def prediction_wasserstein_scaled(y_pred: ArrayLike, *, sensitive_features: Any,
                                  scale: float | None = None, min_group_size: int = 1,
                                  sample_weight: ArrayLike | None = None,
                                  confidence_level: float | None = None,
                                  n_resamples: int = N_RESAMPLES,
                                  random_state: Any = None) -> RegressionGap:
    """:func:`prediction_wasserstein` divided by a scale: unit-free, comparable across models.

    Parameters
    ----------
    y_pred : array-like of shape (n_samples,)
        Predictions (finite numbers).
    scale : float, optional
        The prediction scale to divide by, e.g. the interquartile range of the reference
        data's predictions or targets (configure it: then every window divides by the same
        number). Default: the interquartile range of this window's pooled predictions, which
        moves with the window.
    sensitive_features, min_group_size, sample_weight, confidence_level, n_resamples,
    random_state
        As :func:`prediction_ks_distance`.

    Returns
    -------
    result : RegressionGap
        As :func:`prediction_wasserstein`, in units of ``scale``; ``detail["scale"]`` and
        ``detail["scale_source"]`` say which scale was used.

    Examples
    --------
    >>> r = prediction_wasserstein_scaled([1, 2, 11, 12], sensitive_features=list("aabb"),
    ...                                   scale=20.0)
    >>> float(r), r.detail["scale_source"]
    (0.5, 'option')
    """
    return _one("prediction_wasserstein_scaled", y_pred, sensitive_features=sensitive_features,
                scale=scale, min_group_size=min_group_size, sample_weight=sample_weight,
                confidence_level=confidence_level, n_resamples=n_resamples,
                random_state=random_state)


def prediction_madd(y_pred: ArrayLike, *, sensitive_features: Any,
                    value_range: tuple[float, float] | None = None,
                    bandwidth: float | str = "auto", min_group_size: int = 1) -> RegressionGap:
    """MADD of the predictions mapped to [0, 1] by a fixed range.

    Each prediction becomes ``(y - lo) / (hi - lo)``, clipped to [0, 1] (the count of clipped
    rows is in ``detail["clipped"]``), and :func:`~fairmonitor.metrics.madd` compares the
    groups' histograms. With ``value_range`` fixed (the config's, or the reference data's
    range), the bins are the same in every window and the values comparable; without it the
    window's own min and max are used (``detail["range_source"] == "window"``).

    Parameters
    ----------
    y_pred : array-like of shape (n_samples,)
        Predictions (finite numbers).
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    value_range : (float, float), optional
        ``(lo, hi)`` with ``lo < hi``: the predictions' range mapped onto [0, 1].
    bandwidth : 'auto' or float, default='auto'
        As :func:`~fairmonitor.metrics.madd`.
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.

    Returns
    -------
    result : RegressionGap
        ``value`` in [0, 2]; ``detail`` holds MADD's own result, the range and its source.

    Examples
    --------
    Disjoint groups within the range [0, 100], 10 bins:

    >>> r = prediction_madd([5, 15, 85, 95], sensitive_features=list("aabb"),
    ...                     value_range=(0, 100), bandwidth=0.1)
    >>> float(r)
    2.0
    """
    pred = check_continuous(y_pred, "y_pred")
    source = "option" if value_range is not None else "window"
    lo, hi = (float(v) for v in (value_range or (pred.min(), pred.max())))
    if not hi > lo:
        return RegressionGap(warn_undefined(
            "prediction_madd", f"the value range ({source}) [{lo:g}, {hi:g}] is empty; give "
            "value_range=(lo, hi) with lo < hi"), "prediction_madd")
    mapped = (pred - lo) / (hi - lo)
    clipped = int(np.count_nonzero((mapped < 0) | (mapped > 1)))
    result = madd(np.clip(mapped, 0.0, 1.0), sensitive_features=sensitive_features,
                  bandwidth=bandwidth, min_group_size=min_group_size)
    pair = None if result.worst is None else tuple(result.worst.groups)
    return RegressionGap(float(result.value), "prediction_madd", extremes=pair,
                         detail={"madd": result, "range": (lo, hi), "range_source": source,
                                 "clipped": clipped})
