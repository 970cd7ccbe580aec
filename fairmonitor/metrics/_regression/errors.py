"""Error parity of a regressor: how differently large its errors are across groups.

Per group ``g`` (weighted means with ``sample_weight``), with residual ``r = y_pred - y_true``:

- ``MAE_g = mean |r|``, ``RMSE_g = sqrt(mean r^2)``, ``MR_g = mean r`` (signed: > 0 the model
  over-predicts the group, < 0 it under-predicts it);
- the *difference* of each is ``max_g - min_g`` (0 is parity), the *ratio* of MAE and RMSE is
  ``min_g / max_g`` (1 is parity; a signed mean residual has no meaningful ratio);
- the bounded group loss (Agarwal, Dudik and Wu, "Fair Regression", ICML 2019) compares each
  group's loss with a bound ``zeta`` the user sets: the metric is the worst excess,
  ``max(0, max_g L_g - zeta)``, 0 when every group is within the bound.

These are fairlearn's ``MetricFrame(metrics=mean_absolute_error, ...).difference()`` and
``.ratio()`` (``root_mean_squared_error`` for RMSE), which the tests check to 1e-12.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._validation import check_option, warn_undefined
from ._common import Prepared, RegressionGap, group_means, prepare
from ._resample import N_RESAMPLES, Statistic, resample_interval

__all__ = ["bounded_group_loss", "mae_difference", "mae_ratio", "mean_residual_difference",
           "rmse_difference", "rmse_ratio"]

Loss = Literal["mae", "rmse", "mean_residual"]
_NAN = float("nan")


def _row_losses(p: Prepared, loss: Loss) -> NDArray[np.float64]:
    assert p.y_true is not None
    residual = p.y_pred - p.y_true
    if loss == "mae":
        return np.abs(residual)
    if loss == "rmse":  # squared errors; the group mean's square root is taken afterwards
        return residual * residual
    return residual


def _group_stats(loss: Loss, values: NDArray[np.float64], n_groups: int
                 ) -> Any:
    """Return ``(weight, codes) -> per-group loss`` (RMSE: root of the mean square)."""
    def per_group(weight: NDArray[np.float64], codes: NDArray[np.intp]) -> NDArray[np.float64]:
        means = group_means(codes, n_groups, values, weight)
        return np.sqrt(means) if loss == "rmse" else means
    return per_group


def _aggregate(per_group: NDArray[np.float64], agg: str, bound: float | None) -> float:
    defined = per_group[np.isfinite(per_group)]
    if agg == "bound":
        return max(0.0, float(defined.max()) - float(bound)) if defined.size >= 2 else _NAN
    if defined.size < 2:
        return _NAN
    if agg == "difference":
        return float(defined.max() - defined.min())
    top = float(defined.max())
    return float(defined.min()) / top if top > 0 else _NAN


def _pooled(loss: Loss, values: NDArray[np.float64], weight: NDArray[np.float64]) -> float:
    """Return the loss of every kept row together (the default bound)."""
    mean = float(np.average(values, weights=weight))
    return float(np.sqrt(mean)) if loss == "rmse" else mean


def _statistic(loss: Loss, values: NDArray[np.float64], n_groups: int, agg: str,
               bound: float | None) -> Statistic:
    stats = _group_stats(loss, values, n_groups)
    if agg == "bound" and bound is None:  # against the pooled loss of the same draw
        return lambda weight, codes: _aggregate(stats(weight, codes), agg,
                                                _pooled(loss, values, weight))
    return lambda weight, codes: _aggregate(stats(weight, codes), agg, bound)


def _undefined_reason(per_group: NDArray[np.float64], agg: str, p: Prepared) -> str | None:
    if p.reason is not None:
        return p.reason
    defined = per_group[np.isfinite(per_group)]
    if defined.size < 2:
        return f"fewer than two groups of '{p.name}' have weight"
    if agg == "ratio" and defined.max() <= 0:
        return "every group's error is 0 (a ratio of zeros)"
    return None


def _error_metric(metric: str, loss: Loss, agg: str, y_true: ArrayLike, y_pred: ArrayLike,
                  sensitive_features: Any, *, min_group_size: int, sample_weight: Any,
                  confidence_level: float | None, n_resamples: int, random_state: Any,
                  bound: float | None = None) -> RegressionGap:
    """Compute an error-parity metric or the bounded group loss (their shared body)."""
    p = prepare(y_true, y_pred, sensitive_features, min_group_size=min_group_size,
                sample_weight=sample_weight)
    if p.reason is not None:
        return RegressionGap(warn_undefined(metric, p.reason), metric, counts=p.counts())
    values = _row_losses(p, loss)
    per_group = _group_stats(loss, values, p.n_groups)(p.weight, p.codes)
    by_group, counts = p.per_group(per_group), p.counts()
    reason = _undefined_reason(per_group, agg, p)
    if reason is not None:
        return RegressionGap(warn_undefined(metric, reason), metric, by_group, counts)
    if agg == "bound" and bound is None:
        bound = _pooled(loss, values, p.weight)
        source = "pooled"
    else:
        source = "option"
    value = _aggregate(per_group, agg, bound)
    finite = np.where(np.isfinite(per_group), per_group, np.nan)
    low, high = int(np.nanargmin(finite)), int(np.nanargmax(finite))
    extremes = (p.labels[high],) if agg == "bound" else (p.labels[low], p.labels[high])
    interval = None
    if confidence_level is not None:
        fixed = bound if source == "option" else None
        interval = resample_interval(_statistic(loss, values, p.n_groups, agg, fixed), p.codes,
                                     p.n_groups, p.weight, level=confidence_level,
                                     n_resamples=n_resamples, random_state=random_state)
    return RegressionGap(value, metric, by_group, counts, extremes, interval,
                         detail={"bound": bound, "bound_source": source, "loss": loss}
                         if agg == "bound" else None)


def mae_difference(y_true: ArrayLike, y_pred: ArrayLike, *, sensitive_features: Any,
                   min_group_size: int = 1, sample_weight: ArrayLike | None = None,
                   confidence_level: float | None = None, n_resamples: int = N_RESAMPLES,
                   random_state: Any = None) -> RegressionGap:
    """Largest between-group gap in mean absolute error, in the target's units.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        Targets and predictions (finite numbers).
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.
    sample_weight : array-like of shape (n_samples,), optional
        Per-row weights: weighted means per group.
    confidence_level : float, optional
        When given, ``result.interval`` holds the percentile interval of a stratified
        bootstrap and the permutation chance level (:mod:`._resample`).
    n_resamples : int, default=200
        Bootstrap draws (and permutations) of the interval.
    random_state : numpy.random.Generator, int or None
        Randomness of the interval.

    Returns
    -------
    result : RegressionGap
        ``result.value`` (also ``float(result)``), each group's quantity in ``by_group``, the
        two groups that set it in ``extremes``. NaN with an
        :class:`~fairmonitor.exceptions.UndefinedMetricWarning` if fewer than two groups
        remain.

    Examples
    --------
    Group a's errors are 1 and 1, group b's 0 and 2: both have MAE 1.

    >>> float(mae_difference([0, 0, 0, 0], [1, -1, 0, 2], sensitive_features=list("aabb")))
    0.0
    """
    return _error_metric("mae_difference", "mae", "difference", y_true, y_pred,
                         sensitive_features, min_group_size=min_group_size,
                         sample_weight=sample_weight, confidence_level=confidence_level,
                         n_resamples=n_resamples, random_state=random_state)


def rmse_difference(y_true: ArrayLike, y_pred: ArrayLike, *, sensitive_features: Any,
                    min_group_size: int = 1, sample_weight: ArrayLike | None = None,
                    confidence_level: float | None = None, n_resamples: int = N_RESAMPLES,
                    random_state: Any = None) -> RegressionGap:
    """Largest between-group gap in root mean squared error, in the target's units.

    Parameters
    ----------
    y_true, y_pred, sensitive_features, min_group_size, sample_weight, confidence_level,
    n_resamples, random_state
        As :func:`mae_difference`.

    Returns
    -------
    result : RegressionGap
        As :func:`mae_difference`.

    Examples
    --------
    Group a: errors 1, 1 (RMSE 1); group b: 0, 2 (RMSE sqrt(2)).

    >>> round(float(rmse_difference([0] * 4, [1, -1, 0, 2], sensitive_features=list("aabb"))), 4)
    0.4142
    """
    return _error_metric("rmse_difference", "rmse", "difference", y_true, y_pred,
                         sensitive_features, min_group_size=min_group_size,
                         sample_weight=sample_weight, confidence_level=confidence_level,
                         n_resamples=n_resamples, random_state=random_state)


def mean_residual_difference(y_true: ArrayLike, y_pred: ArrayLike, *, sensitive_features: Any,
                             min_group_size: int = 1, sample_weight: ArrayLike | None = None,
                             confidence_level: float | None = None,
                             n_resamples: int = N_RESAMPLES,
                             random_state: Any = None) -> RegressionGap:
    """Largest between-group gap in mean residual ``y_pred - y_true`` (over-prediction).

    Each group's signed mean residual is in ``by_group`` (> 0: over-predicted); ``extremes``
    is (most under-predicted group, most over-predicted group).

    Parameters
    ----------
    y_true, y_pred, sensitive_features, min_group_size, sample_weight, confidence_level,
    n_resamples, random_state
        As :func:`mae_difference`.

    Returns
    -------
    result : RegressionGap
        As :func:`mae_difference`.

    Examples
    --------
    Group a is over-predicted by 1 on average, group b under-predicted by 0.5.

    >>> r = mean_residual_difference([0, 0, 0, 0], [1, 1, -1, 0], sensitive_features=list("aabb"))
    >>> float(r), r.by_group, r.extremes
    (1.5, {'a': 1.0, 'b': -0.5}, ('b', 'a'))
    """
    return _error_metric("mean_residual_difference", "mean_residual", "difference", y_true,
                         y_pred, sensitive_features, min_group_size=min_group_size,
                         sample_weight=sample_weight, confidence_level=confidence_level,
                         n_resamples=n_resamples, random_state=random_state)


def mae_ratio(y_true: ArrayLike, y_pred: ArrayLike, *, sensitive_features: Any,
              min_group_size: int = 1, sample_weight: ArrayLike | None = None,
              confidence_level: float | None = None, n_resamples: int = N_RESAMPLES,
              random_state: Any = None) -> RegressionGap:
    """Smallest group MAE over the largest (1 is parity, 0 one group is never wrong).

    Parameters
    ----------
    y_true, y_pred, sensitive_features, min_group_size, sample_weight, confidence_level,
    n_resamples, random_state
        As :func:`mae_difference`.

    Returns
    -------
    result : RegressionGap
        As :func:`mae_difference`.

    Examples
    --------
    >>> float(mae_ratio([0, 0, 0, 0], [1, 1, 2, 2], sensitive_features=list("aabb")))
    0.5
    """
    return _error_metric("mae_ratio", "mae", "ratio", y_true, y_pred, sensitive_features,
                         min_group_size=min_group_size, sample_weight=sample_weight,
                         confidence_level=confidence_level, n_resamples=n_resamples,
                         random_state=random_state)


def rmse_ratio(y_true: ArrayLike, y_pred: ArrayLike, *, sensitive_features: Any,
               min_group_size: int = 1, sample_weight: ArrayLike | None = None,
               confidence_level: float | None = None, n_resamples: int = N_RESAMPLES,
               random_state: Any = None) -> RegressionGap:
    """Smallest group RMSE over the largest (1 is parity).

    Parameters
    ----------
    y_true, y_pred, sensitive_features, min_group_size, sample_weight, confidence_level,
    n_resamples, random_state
        As :func:`mae_difference`.

    Returns
    -------
    result : RegressionGap
        As :func:`mae_difference`.

    Examples
    --------
    >>> float(rmse_ratio([0, 0, 0, 0], [1, -1, 2, -2], sensitive_features=list("aabb")))
    0.5
    """
    return _error_metric("rmse_ratio", "rmse", "ratio", y_true, y_pred, sensitive_features,
                         min_group_size=min_group_size, sample_weight=sample_weight,
                         confidence_level=confidence_level, n_resamples=n_resamples,
                         random_state=random_state)


def bounded_group_loss(y_true: ArrayLike, y_pred: ArrayLike, *, sensitive_features: Any,
                       bound: float | None = None, loss: Loss = "mae", min_group_size: int = 1,
                       sample_weight: ArrayLike | None = None,
                       confidence_level: float | None = None, n_resamples: int = N_RESAMPLES,
                       random_state: Any = None) -> RegressionGap:
    """Worst excess of a group's loss over a bound: ``max(0, max_g L_g - bound)``.

    With ``bound`` configured this is fairlearn's bounded group loss constraint
    ``L_g <= zeta`` read as a gauge; without one each group is held to the pooled loss.

    Bounded group loss asks every group's loss to stay below ``bound`` (in the loss's units:
    the target's for MAE and RMSE); 0 means every group does, a positive value is by how much
    the worst group exceeds it. Each group's loss is in ``by_group``, the worst group in
    ``extremes``.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        Targets and predictions (finite numbers).
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    bound : float, optional
        The largest acceptable loss of any group (``zeta``), in the loss's units. Default: the
        pooled loss of all kept rows, so the value is how much worse than the model's overall
        loss its worst group is (0 when the groups' losses are equal).
    loss : {'mae', 'rmse', 'mean_residual'}, default='mae'
        The per-group loss.
    min_group_size, sample_weight, confidence_level, n_resamples, random_state
        As :func:`mae_difference`.

    Returns
    -------
    result : RegressionGap

    Examples
    --------
    Group a's MAE is 1, group b's 2; with a bound of 1.5, group b exceeds it by 0.5.

    >>> r = bounded_group_loss([0] * 4, [1, 1, 2, 2], sensitive_features=list("aabb"), bound=1.5)
    >>> float(r), r.extremes
    (0.5, ('b',))

    Without a bound, against the pooled MAE 1.5:

    >>> float(bounded_group_loss([0] * 4, [1, 1, 2, 2], sensitive_features=list("aabb")))
    0.5
    """
    check_option(loss, "loss", ("mae", "rmse", "mean_residual"), func="bounded_group_loss")
    if bound is not None and not np.isfinite(bound):
        from ...exceptions import InvalidInputError

        raise InvalidInputError(f"bound must be a finite number; got {bound!r}")
    return _error_metric("bounded_group_loss", loss, "bound", y_true, y_pred,
                         sensitive_features, min_group_size=min_group_size,
                         sample_weight=sample_weight, confidence_level=confidence_level,
                         n_resamples=n_resamples, random_state=random_state,
                         bound=None if bound is None else float(bound))
