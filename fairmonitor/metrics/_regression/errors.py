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

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._validation import check_option, warn_undefined
from ...exceptions import InvalidInputError
from ._common import Prepared, RegressionGap, prepare
from ._resample import N_RESAMPLES, group_moments, moment_intervals

__all__ = ["ERROR_METRICS", "ErrorParity", "bounded_group_loss", "errors_from_sums",
           "error_values", "mae_difference", "mae_ratio", "mean_residual_difference",
           "regression_errors", "rmse_difference", "rmse_ratio"]

Loss = Literal["mae", "rmse", "mean_residual"]
_NAN = float("nan")
#: the metrics one call of :func:`regression_errors` computes, in its result's field order
ERROR_METRICS = ("mae_difference", "rmse_difference", "mean_residual_difference", "mae_ratio",
                 "rmse_ratio", "bounded_group_loss")
_PER_GROUP = {"mae_difference": "mae", "rmse_difference": "rmse",
              "mean_residual_difference": "mean_residual", "mae_ratio": "mae",
              "rmse_ratio": "rmse"}


@dataclass(frozen=True)
class ErrorParity:
    """Every error-parity metric of one attribute, from one pass (and one resampling).

    Each field is the :class:`RegressionGap` of the metric of that name; ``float()`` of a
    field is its value.
    """

    mae_difference: RegressionGap
    rmse_difference: RegressionGap
    mean_residual_difference: RegressionGap
    mae_ratio: RegressionGap
    rmse_ratio: RegressionGap
    bounded_group_loss: RegressionGap


def _row_values(weight: NDArray[np.float64], residual: NDArray[np.float64]
                ) -> NDArray[np.float64]:
    """Per row: weight, weighted |r|, r^2 and r (what the group losses are sums of)."""
    return np.c_[weight, weight * np.abs(residual), weight * residual * residual,
                 weight * residual]


def _losses(sums: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
    """Each group's MAE, RMSE and mean residual from its sums (... x groups x 4), pooled last.

    Leading axes are resampling draws: every draw at once, each value as one draw alone.
    """
    sums = np.concatenate([sums, sums.sum(axis=-2, keepdims=True)], axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"mae": sums[..., 1] / sums[..., 0], "rmse": np.sqrt(sums[..., 2] / sums[..., 0]),
                "mean_residual": sums[..., 3] / sums[..., 0]}


def error_values(residual: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per row, unweighted: 1, |r|, r^2 and r (a window summary's error sums are their sums).

    >>> error_values(np.array([-2.0])).tolist()
    [[1.0, 2.0, 4.0, -2.0]]
    """
    return _row_values(np.ones(residual.size), residual)


def _extremes(values: NDArray[np.float64]
              ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Largest and smallest finite value over the last axis, and whether two are finite."""
    finite = np.isfinite(values)
    top = np.where(finite, values, -np.inf).max(axis=-1)
    low = np.where(finite, values, np.inf).min(axis=-1)
    return top, low, finite.sum(axis=-1) >= 2


def _gap(values: NDArray[np.float64], ratio: bool) -> NDArray[np.float64]:
    top, low, defined = _extremes(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = np.where(top > 0, low / top, _NAN) if ratio else top - low
    return np.where(defined, gap, _NAN)


def _statistics(losses: dict[str, NDArray[np.float64]], bound: float | None,
                loss: Loss) -> NDArray[np.float64]:
    """Return the six metrics' values (:data:`ERROR_METRICS` order, last axis) from losses.

    Leading axes of the losses (before groups) are draws, as in :func:`_losses`.
    """
    out = [_gap(losses[_PER_GROUP[m]][..., :-1], m.endswith("ratio"))
           for m in ERROR_METRICS[:-1]]
    groups = losses[loss][..., :-1]
    limit = losses[loss][..., -1] if bound is None else bound  # default: the pooled loss
    top, _, defined = _extremes(groups)
    excess = top - limit
    out.append(np.where(defined, np.where(excess > 0.0, excess, 0.0), _NAN))
    return np.stack(out, axis=-1)


def _reason(metric: str, values: NDArray[np.float64], p: Prepared) -> str | None:
    defined = values[np.isfinite(values)]
    if defined.size < 2:
        return f"fewer than two groups of '{p.name}' have weight"
    if metric.endswith("ratio") and defined.max() <= 0:
        return "every group's error is 0 (a ratio of zeros)"
    return None


def _gap_result(metric: str, value: float, losses: dict[str, NDArray[np.float64]],
                p: Prepared, loss: Loss, detail: Any, interval: Any, warn: bool
                ) -> RegressionGap:
    per_group = losses[loss if metric == "bounded_group_loss" else _PER_GROUP[metric]][:-1]
    reason = _reason(metric, per_group, p)
    if reason is not None:
        return RegressionGap(warn_undefined(metric, reason) if warn else _NAN, metric,
                             p.per_group(per_group), p.counts())
    finite = np.where(np.isfinite(per_group), per_group, np.nan)
    low, high = int(np.nanargmin(finite)), int(np.nanargmax(finite))
    extremes = ((p.labels[high],) if metric == "bounded_group_loss"
                else (p.labels[low], p.labels[high]))
    return RegressionGap(value, metric, p.per_group(per_group), p.counts(), extremes,
                         interval, detail if metric == "bounded_group_loss" else None)


def regression_errors(y_true: ArrayLike, y_pred: ArrayLike, *, sensitive_features: Any,
                      bound: float | None = None, loss: Loss = "mae", min_group_size: int = 1,
                      sample_weight: ArrayLike | None = None,
                      confidence_level: float | None = None, n_resamples: int = N_RESAMPLES,
                      random_state: Any = None, only: str | None = None) -> ErrorParity:
    """Compute every error-parity metric of one attribute at once (what the report calls).

    One pass over the rows gives each group's MAE, RMSE and mean residual; the six metrics
    (:data:`ERROR_METRICS`) read them, and one resampling gives all their intervals.

    Parameters
    ----------
    y_true, y_pred, sensitive_features, min_group_size, sample_weight, confidence_level,
    n_resamples, random_state
        As :func:`mae_difference`.
    bound, loss
        As :func:`bounded_group_loss`.
    only : str, optional
        Warn about this metric only when undefined (the single-metric functions); default:
        every undefined one.

    Returns
    -------
    result : ErrorParity

    Examples
    --------
    >>> r = regression_errors([0] * 4, [1, 1, 2, 2], sensitive_features=list("aabb"))
    >>> float(r.mae_difference), float(r.mae_ratio), float(r.bounded_group_loss)
    (1.0, 0.5, 0.5)
    """
    _check_loss(bound, loss)
    p = prepare(y_true, y_pred, sensitive_features, min_group_size=min_group_size,
                sample_weight=sample_weight)
    if p.reason is not None:
        return _undefined(p, only)
    assert p.y_true is not None
    values = _row_values(p.weight, p.y_pred - p.y_true)
    if confidence_level is None:  # the sums only
        sums = np.stack([np.bincount(p.codes, weights=values[:, j], minlength=p.n_groups)
                         for j in range(4)], axis=1)
        second = None
    else:
        sums, second = group_moments(values, p.codes, p.n_groups)
    return _from_sums(p, sums, second, bound=bound, loss=loss,
                      confidence_level=confidence_level, n_resamples=n_resamples,
                      random_state=random_state, only=only)


def _check_loss(bound: float | None, loss: str) -> None:
    check_option(loss, "loss", ("mae", "rmse", "mean_residual"), func="regression_errors")
    if bound is not None and not np.isfinite(bound):
        raise InvalidInputError(f"bound must be a finite number; got {bound!r}")


def _undefined(p: Prepared, only: str | None) -> ErrorParity:
    wanted = ERROR_METRICS if only is None else (only,)
    return ErrorParity(**{m: RegressionGap(warn_undefined(m, p.reason) if m in wanted else _NAN,
                                           m, counts=p.counts()) for m in ERROR_METRICS})


def _from_sums(p: Prepared, sums: NDArray[np.float64], second: NDArray[np.float64] | None, *,
               bound: float | None, loss: Loss, confidence_level: float | None,
               n_resamples: int, random_state: Any, only: str | None) -> ErrorParity:
    """Return the six metrics from the kept groups' sums of (w, |r|, r^2, r), products."""
    wanted = ERROR_METRICS if only is None else (only,)
    losses = _losses(sums)
    values = _statistics(losses, bound, loss)
    intervals: list[Any] = [None] * len(ERROR_METRICS)
    if confidence_level is not None:
        assert second is not None
        intervals = moment_intervals(
            lambda s: _statistics(_losses(s), bound, loss), sums, second,
            p.counts_array().astype(float), level=confidence_level,
            n_resamples=n_resamples, random_state=random_state, vectorized=True)
    detail = {"bound": float(losses[loss][-1]) if bound is None else float(bound),
              "bound_source": "pooled" if bound is None else "option", "loss": loss}
    return ErrorParity(**{m: _gap_result(m, float(values[k]), losses, p, loss, detail,
                                         intervals[k], m in wanted)
                          for k, m in enumerate(ERROR_METRICS)})


def errors_from_sums(sums: NDArray[np.float64], second: NDArray[np.float64] | None,
                     groups: Any, *, bound: float | None = None, loss: Loss = "mae",
                     confidence_level: float | None = None, n_resamples: int = N_RESAMPLES,
                     random_state: Any = None, only: str | None = None) -> ErrorParity:
    """:func:`regression_errors` from each group's sums (a window summary's), not its rows.

    Parameters
    ----------
    sums : ndarray of shape (groups, 4)
        Per group of ``groups`` (in its label order), the sums of :func:`error_values`: rows,
        ``|r|``, ``r^2`` and ``r``.
    second : ndarray of shape (groups, 4, 4) or None
        Per group, the sums of the products of those values (the intervals read them; None
        without ``confidence_level``).
    groups : Groups
        One stand-in row per group (``codes`` ``0..K-1``, ``counts`` the groups' rows),
        groups below ``min_group_size`` already coded -1
        (:func:`~fairmonitor.utils.groups.exclude_small`).
    bound, loss, confidence_level, n_resamples, random_state, only
        As :func:`regression_errors`.

    Returns
    -------
    result : ErrorParity
        What :func:`regression_errors` gives on the rows behind the sums (the same arithmetic
        on the same sums: equal up to the sums' round-off; the same draws).

    Examples
    --------
    >>> from fairmonitor.utils.groups import contiguous_groups
    >>> sums = np.array([[2.0, 2.0, 2.0, 2.0], [2.0, 4.0, 8.0, 4.0]])
    >>> r = errors_from_sums(sums, None, contiguous_groups(("a", "b"), np.array([1, 1]), "g"))
    >>> float(r.mae_difference), float(r.mae_ratio)
    (1.0, 0.5)
    """
    _check_loss(bound, loss)
    kept = groups.codes >= 0
    p = Prepared(codes=np.zeros(0, dtype=np.intp), labels=groups.labels, weight=np.zeros(0),
                 y_pred=np.zeros(0), y_true=np.zeros(0), name=groups.name,
                 reason=groups.two_group_reason(), sizes=np.asarray(groups.counts))
    if p.reason is not None:
        return _undefined(p, only)
    return _from_sums(p, sums[kept], None if second is None else second[kept], bound=bound,
                      loss=loss, confidence_level=confidence_level, n_resamples=n_resamples,
                      random_state=random_state, only=only)


def _one(metric: str, y_true: ArrayLike, y_pred: ArrayLike, **kwargs: Any) -> RegressionGap:
    return getattr(regression_errors(y_true, y_pred, only=metric, **kwargs), metric)


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
    return _one("mae_difference", y_true, y_pred, sensitive_features=sensitive_features,
                min_group_size=min_group_size, sample_weight=sample_weight,
                confidence_level=confidence_level, n_resamples=n_resamples,
                random_state=random_state)


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
    return _one("rmse_difference", y_true, y_pred, sensitive_features=sensitive_features,
                min_group_size=min_group_size, sample_weight=sample_weight,
                confidence_level=confidence_level, n_resamples=n_resamples,
                random_state=random_state)


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
    return _one("mean_residual_difference", y_true, y_pred, sensitive_features=sensitive_features,
                min_group_size=min_group_size, sample_weight=sample_weight,
                confidence_level=confidence_level, n_resamples=n_resamples,
                random_state=random_state)


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
    return _one("mae_ratio", y_true, y_pred, sensitive_features=sensitive_features,
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
    return _one("rmse_ratio", y_true, y_pred, sensitive_features=sensitive_features,
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
    return _one("bounded_group_loss", y_true, y_pred, sensitive_features=sensitive_features,
                bound=bound, loss=loss, min_group_size=min_group_size,
                sample_weight=sample_weight, confidence_level=confidence_level,
                n_resamples=n_resamples, random_state=random_state)
