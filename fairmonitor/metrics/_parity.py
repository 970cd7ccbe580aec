"""Classical group-parity metrics on hard predictions: DP difference/ratio, EO, equal opportunity.

Every function reduces to per-group rates from the per-group confusion counts
(:func:`~fairmonitor.utils.groups.outcome_counts`: one compiled pass over the rows, whatever
the number of groups; the same counts the summaries keep), then a max-minus-min or
min-over-max. This is what
fairlearn's ``MetricFrame(...).difference()`` / ``.ratio()`` compute with
``method="between_groups"``, and the tests check equality with fairlearn 0.15.

Where fairlearn silently scores an undefined rate as 0 (a group with no positives has no true
positive rate), these functions leave that group out of the gap with a
:class:`~fairmonitor.exceptions.GroupExclusionWarning`, and return NaN with an
:class:`~fairmonitor.exceptions.UndefinedMetricWarning` if fewer than two groups remain.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import (
    check_binary,
    check_option,
    check_positive_int,
    check_same_length,
    check_sample_weight,
    format_labels,
    warn_undefined,
    y_true_first,
)
from ..exceptions import GroupExclusionWarning, InvalidInputError
from ..utils.groups import Groups, encode_groups, outcome_counts, require_two_groups

__all__ = [
    "GroupRates",
    "check_method",
    "demographic_parity_difference",
    "demographic_parity_ratio",
    "equal_opportunity_difference",
    "equalized_odds_difference",
    "group_rates",
    "parity_from_rates",
    "predictive_parity_difference",
    "without_labels",
]


@dataclass(frozen=True, slots=True)
class GroupRates:
    """Per-group counts and rates of hard predictions.

    Attributes
    ----------
    attribute : str
        Sensitive attribute name (``"a:b"`` for an intersection).
    labels : tuple
        Group labels.
    counts : ndarray of shape (K,)
        Rows per group.
    selection_rate : ndarray of shape (K,)
        Share of rows predicted 1.
    true_positive_rate, false_positive_rate : ndarray of shape (K,) or None
        NaN for a group with no actual positives (negatives); None without ``y_true``.
    precision : ndarray of shape (K,) or None
        Positive predictive value, P(y = 1 | yhat = 1); NaN for a group with no positive
        prediction; None without ``y_true``.
    excluded : dict
        Group label -> rows, for groups left out by ``min_group_size``.
    positives, negatives, predicted : ndarray of shape (K,) or None
        Rows (not weight) each rate conditions on: actual positives (TPR), actual negatives
        (FPR), predicted positives (precision); None without ``y_true``. What
        ``min_condition_size`` counts.
    """

    attribute: str
    labels: tuple[Any, ...]
    counts: NDArray[np.intp]
    selection_rate: NDArray[np.float64]
    true_positive_rate: NDArray[np.float64] | None = None
    false_positive_rate: NDArray[np.float64] | None = None
    excluded: Mapping[Any, int] = field(default_factory=dict)
    precision: NDArray[np.float64] | None = None
    positives: NDArray[np.float64] | None = None
    negatives: NDArray[np.float64] | None = None
    predicted: NDArray[np.float64] | None = None


def _rate(numerator: NDArray[np.float64], denominator: NDArray[np.float64]) -> NDArray[np.float64]:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / np.maximum(denominator, 1), np.nan)


def _encode(y_pred: NDArray[np.float64], sensitive_features: Any, min_group_size: int) -> Groups:
    return encode_groups(sensitive_features, n_samples=len(y_pred), min_group_size=min_group_size)


def group_rates(
    y_true: ArrayLike | None, y_pred: ArrayLike, *, sensitive_features: Any,
    min_group_size: int = 1, sample_weight: ArrayLike | None = None,
) -> GroupRates:
    """Per-group counts, selection rates and (with labels) true/false positive rates.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or None
        Hard 0/1 labels, or None for selection rates only.
    y_pred : array-like of shape (n_samples,)
        Hard 0/1 predictions.
    sensitive_features : array-like, DataFrame or dict
        Group membership (several columns: their intersection).
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.
    sample_weight : array-like of shape (n_samples,), optional
        Per-row weights: every rate becomes a weighted share (``sum w yhat / sum w``, as
        fairlearn's ``sample_params``). ``min_group_size`` still counts rows, not weight.

    Returns
    -------
    rates : GroupRates

    Examples
    --------
    >>> r = group_rates([1, 0, 1, 0], [1, 0, 0, 0], sensitive_features=["a", "a", "b", "b"])
    >>> r.selection_rate.tolist(), r.true_positive_rate.tolist()
    ([0.5, 0.0], [1.0, 0.0])
    """
    pred = check_binary(y_pred, "y_pred")
    groups = _encode(pred, sensitive_features, min_group_size)
    w = check_sample_weight(sample_weight, pred.size)
    true = None
    if y_true is not None:
        true = check_binary(y_true, "y_true")
        check_same_length(y_true=true, y_pred=pred)
    # rows per group and outcome (tn, fp, fn, tp), counted once: the rates' own sums when
    # unweighted, and what min_condition_size counts (rows, not weight) either way
    rows = outcome_counts(groups.codes, groups.n_groups, pred, true).astype(float)
    if w is None:
        sums = rows
    else:  # the same cells, each row weighted
        kept = groups.codes >= 0
        cell = pred.astype(np.intp) if true is None else pred.astype(np.intp) + 2 * true.astype(
            np.intp)
        at = groups.codes[kept].astype(np.intp) * 4 + cell[kept]
        sums = np.bincount(at, weights=w[kept], minlength=4 * groups.n_groups).reshape(-1, 4)
    n, predicted = sums.sum(axis=1), sums[:, 1] + sums[:, 3]
    if true is None:
        return GroupRates(groups.name, groups.labels, groups.counts, _rate(predicted, n),
                          None, None, groups.excluded, None)
    tp, fp = sums[:, 3], sums[:, 1]
    pos, neg = sums[:, 2] + tp, sums[:, 0] + fp
    return GroupRates(groups.name, groups.labels, groups.counts, _rate(predicted, n),
                      _rate(tp, pos), _rate(fp, neg), groups.excluded, _rate(tp, predicted),
                      rows[:, 2] + rows[:, 3], rows[:, 0] + rows[:, 1], rows[:, 1] + rows[:, 3])


#: What each rate conditions on, in the words of a warning.
_CONDITIONS = {"true positive rate": "actual positives", "false positive rate":
               "actual negatives", "precision": "predicted positives"}


def _gap(metric: str, rates: GroupRates, values: NDArray[np.float64], what: str,
         *, ratio: bool = False, support: NDArray[np.float64] | None = None,
         min_condition_size: int = 1) -> float:
    """Return the max-minus-min (or min-over-max) of per-group ``values``.

    Undefined groups and those with fewer than ``min_condition_size`` rows in ``support`` (the
    rows the rate conditions on) are skipped, each with a warning.
    """
    undefined = np.isnan(values)
    if support is not None and min_condition_size > 1:
        few = ~undefined & (support < min_condition_size)
        if few.any():
            names = format_labels(lab for lab, u in zip(rates.labels, few, strict=True) if u)
            warnings.warn(
                f"{metric}: left out group(s) {names} of '{rates.attribute}' with fewer than "
                f"{min_condition_size} {_CONDITIONS[what]}, which its {what} conditions on "
                f"(min_condition_size={min_condition_size})", GroupExclusionWarning,
                stacklevel=3)
        values = np.where(few, np.nan, values)
    else:
        few = np.zeros(values.shape, dtype=bool)
    if undefined.any():
        names = format_labels(lab for lab, u in zip(rates.labels, undefined, strict=True) if u)
        warnings.warn(
            f"{metric}: left out group(s) {names} of '{rates.attribute}' whose {what} is "
            "undefined (no rows of that class in the group)",
            GroupExclusionWarning,
            stacklevel=3,
        )
    defined = values[~(undefined | few)]
    if defined.size < 2:
        return warn_undefined(metric, f"fewer than two groups of '{rates.attribute}' have a "
                              f"defined {what}")
    if not ratio:
        return float(defined.max() - defined.min())
    if defined.max() == 0:
        return warn_undefined(metric, f"every group has {what} 0, so min/max is 0/0")
    return float(defined.min() / defined.max())


def check_method(method: str, func: str) -> None:
    """Refuse a ``method`` other than ``'between_groups'``, saying why.

    fairlearn's ``method='to_overall'`` compares each group with all rows together; the
    monitor's thresholds, intervals and chance levels are built for the gap between groups,
    so only that one is computed.

    >>> check_method("between_groups", "demographic_parity_difference")
    """
    check_option(method, "method", ("between_groups", "to_overall"), func=func)
    if method == "to_overall":
        raise InvalidInputError(
            f"{func}: method='to_overall' (fairlearn's gap to the overall rate) is not "
            "offered; fairmonitor's parity metrics are the gap between groups "
            "(method='between_groups', the default in both).")


@y_true_first()
def demographic_parity_difference(
    y_true: ArrayLike | None, y_pred: ArrayLike, *, sensitive_features: Any,
    method: str = "between_groups", sample_weight: ArrayLike | None = None,
    min_group_size: int = 1,
) -> float:
    r"""Largest difference in selection rate between groups.

    .. math:: \Delta DP = \max_g P(\hat Y = 1 \mid G = g) - \min_g P(\hat Y = 1 \mid G = g)

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or None
        Labels; not read (the selection rate needs none), but checked to be as long as
        ``y_pred``. Taken first as in fairlearn, so that every parity metric is called
        ``f(y_true, y_pred, *, sensitive_features)``.
    y_pred : array-like of shape (n_samples,)
        Hard 0/1 predictions.
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    method : {'between_groups'}, default='between_groups'
        fairlearn's parameter; only its default is offered (see :func:`check_method`).
    sample_weight : array-like of shape (n_samples,), optional
        Per-row weights; rates become weighted shares (see :func:`group_rates`).
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.

    Returns
    -------
    difference : float
        In [0, 1]; 0 is parity. NaN (with a warning) if fewer than two groups remain.

    Warns
    -----
    FutureWarning
        Called in the old form ``demographic_parity_difference(y_pred, *,
        sensitive_features)`` (accepted until fairmonitor 0.3).

    See Also
    --------
    abcc : the same idea over the whole score distribution, free of a threshold.

    Examples
    --------
    >>> demographic_parity_difference(None, [1, 1, 0, 1, 0, 0], sensitive_features=list("aaabbb"))
    0.3333333333333333
    """
    rates = _selection_rates("demographic_parity_difference", y_true, y_pred,
                             sensitive_features, method, sample_weight, min_group_size)
    return parity_from_rates("demographic_parity_difference", rates)


@y_true_first()
def demographic_parity_ratio(
    y_true: ArrayLike | None, y_pred: ArrayLike, *, sensitive_features: Any,
    method: str = "between_groups", sample_weight: ArrayLike | None = None,
    min_group_size: int = 1,
) -> float:
    """Smallest selection rate divided by the largest.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or None
        Labels; not read (the selection rate needs none), but checked to be as long as
        ``y_pred``. Taken first as in fairlearn, so that every parity metric is called
        ``f(y_true, y_pred, *, sensitive_features)``.
    y_pred : array-like of shape (n_samples,)
        Hard 0/1 predictions.
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    method : {'between_groups'}, default='between_groups'
        fairlearn's parameter; only its default is offered (see :func:`check_method`).
    sample_weight : array-like of shape (n_samples,), optional
        Per-row weights; rates become weighted shares (see :func:`group_rates`).
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.

    Returns
    -------
    ratio : float
        In [0, 1]; 1 is parity (the "four-fifths rule" flags < 0.8). NaN with a warning when
        every group's selection rate is 0.

    Warns
    -----
    FutureWarning
        Called in the old form ``demographic_parity_ratio(y_pred, *, sensitive_features)``
        (accepted until fairmonitor 0.3).

    Examples
    --------
    >>> demographic_parity_ratio(None, [1, 1, 0, 1, 0, 0], sensitive_features=list("aaabbb"))
    0.5
    """
    rates = _selection_rates("demographic_parity_ratio", y_true, y_pred, sensitive_features,
                             method, sample_weight, min_group_size)
    return parity_from_rates("demographic_parity_ratio", rates)


def equalized_odds_difference(
    y_true: ArrayLike, y_pred: ArrayLike, *, sensitive_features: Any,
    method: str = "between_groups", sample_weight: ArrayLike | None = None,
    min_group_size: int = 1, min_condition_size: int = 1,
) -> float:
    """Return the larger of the between-group gaps in true positive rate and false positive rate.

    Equals fairlearn's ``equalized_odds_difference(..., agg="worst_case")``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Hard 0/1 labels.
    y_pred : array-like of shape (n_samples,)
        Hard 0/1 predictions.
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    method : {'between_groups'}, default='between_groups'
        fairlearn's parameter; only its default is offered (see :func:`check_method`).
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.
    sample_weight : array-like of shape (n_samples,), optional
        Per-row weights; rates become weighted shares (see :func:`group_rates`).
    min_condition_size : int, default=1
        Per rate, groups with fewer actual positives (TPR) or actual negatives (FPR) are left
        out of that rate's gap with a warning.

    Returns
    -------
    difference : float
        In [0, 1]; 0 is equalized odds.

    Examples
    --------
    >>> equalized_odds_difference([1, 0, 1, 0], [1, 1, 0, 0], sensitive_features=list("aabb"))
    1.0
    """
    check_method(method, "equalized_odds_difference")
    rates = group_rates(y_true, y_pred, sensitive_features=sensitive_features,
                        min_group_size=min_group_size, sample_weight=sample_weight)
    return parity_from_rates("equalized_odds_difference", rates, min_condition_size)


def equal_opportunity_difference(
    y_true: ArrayLike, y_pred: ArrayLike, *, sensitive_features: Any,
    method: str = "between_groups", sample_weight: ArrayLike | None = None,
    min_group_size: int = 1, min_condition_size: int = 1,
) -> float:
    """Largest between-group gap in true positive rate (recall of the positive class).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Hard 0/1 labels.
    y_pred : array-like of shape (n_samples,)
        Hard 0/1 predictions.
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    method : {'between_groups'}, default='between_groups'
        fairlearn's parameter; only its default is offered (see :func:`check_method`).
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.
    sample_weight : array-like of shape (n_samples,), optional
        Per-row weights; rates become weighted shares (see :func:`group_rates`).
    min_condition_size : int, default=1
        Groups with fewer actual positives (the rows a true positive rate conditions on; rows,
        not weight) are left out with a warning: ``min_group_size`` counts all the group's
        rows, and a group of 500 rows with 5 positives has a TPR of steps of 0.2.

    Returns
    -------
    difference : float
        In [0, 1]; 0 is equal opportunity.

    Examples
    --------
    >>> equal_opportunity_difference([1, 1, 1, 1], [1, 1, 1, 0], sensitive_features=list("aabb"))
    0.5
    """
    check_method(method, "equal_opportunity_difference")
    rates = group_rates(y_true, y_pred, sensitive_features=sensitive_features,
                        min_group_size=min_group_size, sample_weight=sample_weight)
    return parity_from_rates("equal_opportunity_difference", rates, min_condition_size)


def predictive_parity_difference(
    y_true: ArrayLike, y_pred: ArrayLike, *, sensitive_features: Any, min_group_size: int = 1,
    sample_weight: ArrayLike | None = None, min_condition_size: int = 1,
) -> float:
    """Largest between-group gap in precision, P(y = 1 | yhat = 1) (predictive parity).

    Chouldechova (2017): a positive prediction should mean the same risk in every group.
    With different base rates it cannot hold together with equalized odds, so read it beside
    :func:`equalized_odds_difference`, not instead of it.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Hard 0/1 labels.
    y_pred : array-like of shape (n_samples,)
        Hard 0/1 predictions.
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.
    sample_weight : array-like of shape (n_samples,), optional
        Per-row weights; rates become weighted shares (see :func:`group_rates`).
    min_condition_size : int, default=1
        Groups with fewer predicted positives (what precision conditions on) are left out
        with a warning.

    Returns
    -------
    difference : float
        In [0, 1]; 0 is predictive parity. A group without a positive prediction has no
        precision and is left out with a warning; NaN if fewer than two groups have one.

    Examples
    --------
    Group a: 2 of its 2 positive predictions right; group b: 1 of 2.

    >>> predictive_parity_difference([1, 1, 0, 1, 0, 0], [1, 1, 0, 1, 1, 0],
    ...                              sensitive_features=list("aaabbb"))
    0.5
    """
    rates = group_rates(y_true, y_pred, sensitive_features=sensitive_features,
                        min_group_size=min_group_size, sample_weight=sample_weight)
    return parity_from_rates("predictive_parity_difference", rates, min_condition_size)


@functools.cache
def without_labels(func: Callable[..., float]) -> Callable[..., float]:
    """Return ``func`` with its unread ``y_true`` bound to None (one object per ``func``).

    The demographic parity metrics take ``y_true`` first, as in fairlearn, but read only the
    predictions; what calls a metric on one array (the registry, :func:`permutation_test`)
    calls this: ``without_labels(demographic_parity_difference)(y_pred, *,
    sensitive_features)``.

    >>> dp = without_labels(demographic_parity_difference)
    >>> dp([1, 1, 0, 1, 0, 0], sensitive_features=list("aaabbb"))
    0.3333333333333333
    >>> dp is without_labels(demographic_parity_difference)
    True
    """
    bound = functools.partial(func, None)

    def call(*args: Any, **kwargs: Any) -> float:
        return bound(*args, **kwargs)

    # a function, not the partial: it keeps ``func``'s name (the registry reads the rate family
    # from it) and shows the signature without ``y_true``
    call.__name__ = call.__qualname__ = func.__name__
    call.__doc__ = func.__doc__
    call.__signature__ = inspect.signature(bound)  # type: ignore[attr-defined]
    call.func = func  # type: ignore[attr-defined]  # as a partial's: what it wraps
    return call


def _selection_rates(metric: str, y_true: ArrayLike | None, y_pred: ArrayLike,
                     sensitive_features: Any, method: str, sample_weight: ArrayLike | None,
                     min_group_size: int) -> GroupRates:
    """Return the selection rates of the demographic parity metrics (``y_true`` unread)."""
    check_method(method, metric)
    if y_true is not None:
        check_same_length(y_true=y_true, y_pred=y_pred)
    return group_rates(None, y_pred, sensitive_features=sensitive_features,
                       min_group_size=min_group_size, sample_weight=sample_weight)


def parity_from_rates(metric: str, rates: GroupRates, min_condition_size: int = 1) -> float:
    """Return the parity metric ``metric`` from per-group rates (as the public functions do).

    Shared with :mod:`fairmonitor.summaries`, which builds the rates from merged counts, so
    both give the same value and the same warnings. ``min_condition_size`` leaves out, per
    rate, the groups with fewer rows of what it conditions on (see
    :func:`equal_opportunity_difference`).

    >>> r = group_rates(None, [1, 0, 0, 0], sensitive_features=["a", "a", "b", "b"])
    >>> parity_from_rates("demographic_parity_difference", r)
    0.5
    """
    min_condition_size = check_positive_int(min_condition_size, "min_condition_size")
    reason = require_two_groups(rates.attribute, rates.labels, rates.excluded)
    if reason is not None:
        return warn_undefined(metric, reason)
    if metric == "demographic_parity_difference":
        return _gap(metric, rates, rates.selection_rate, "selection rate")
    if metric == "demographic_parity_ratio":
        return _gap(metric, rates, rates.selection_rate, "selection rate", ratio=True)
    if rates.true_positive_rate is None or rates.false_positive_rate is None:
        raise InvalidInputError(f"{metric} needs labels (y_true)")
    if metric == "predictive_parity_difference":
        if rates.precision is None:
            raise InvalidInputError(f"{metric} needs labels (y_true)")
        return _gap(metric, rates, rates.precision, "precision", support=rates.predicted,
                    min_condition_size=min_condition_size)
    tpr = _gap(metric, rates, rates.true_positive_rate, "true positive rate",
               support=rates.positives, min_condition_size=min_condition_size)
    if metric == "equal_opportunity_difference":
        return tpr
    fpr = _gap(metric, rates, rates.false_positive_rate, "false positive rate",
               support=rates.negatives, min_condition_size=min_condition_size)
    return float(max(tpr, fpr)) if not (np.isnan(tpr) or np.isnan(fpr)) else float("nan")
