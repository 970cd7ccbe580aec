"""A group-label permutation test for label-free fairness metrics.

Why: every distribution estimator (ABCC, ABPC, MADD) is positive on finite samples even when
the groups share one score distribution, and this floor grows as groups shrink (spec 001 §6.6:
for two groups of 100, ABCC ≈ 0.023 and ABPC ≈ 0.15 under perfect parity). An alert on
"value > 0" fires on noise. Shuffling the group labels keeps the scores and the group sizes and
destroys any link between them: the metric's values on shuffled labels are what it reads by
chance alone at these sizes. The test reports that null's mean (the floor) and a p-value.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import (
    check_1d,
    check_option,
    check_positive_int,
    renamed_keyword,
    warn_undefined,
)
from ..exceptions import GroupExclusionWarning, InvalidInputError, UndefinedMetricWarning
from ..utils.groups import encode_groups

__all__ = ["PermutationResult", "permutation_test"]

Alternative = Literal["greater", "less"]

#: Relative tolerance when comparing a null value with the observed one: a relabelling that
#: reproduces the observed split must count as "as extreme" despite summation-order round-off.
_TIES = 1e-12


@dataclass(frozen=True, slots=True)
class PermutationResult:
    """Outcome of :func:`permutation_test`.

    Attributes
    ----------
    observed : float
        The metric on the real group labels (also ``.value``).
    null_mean, null_std : float
        Mean and standard deviation of the metric over shuffled labels: the value expected by
        chance at these group sizes (the estimator's small-sample floor) and its spread.
    p_value : float
        ``(1 + #{null at least as unfair as observed}) / (1 + n_resamples)``.
    n_resamples : int
        Shuffles with a defined metric value.
    null_distribution : ndarray of shape (n_resamples,)
        The null values themselves (e.g. for a quantile as an alert threshold).
    """

    observed: float
    null_mean: float
    null_std: float
    p_value: float
    n_resamples: int
    null_distribution: NDArray[np.float64] = field(repr=False, compare=False)

    @property
    def value(self) -> float:
        """The observed metric value (the headline number a report reads)."""
        return self.observed


def _label_free() -> dict[str, tuple[Callable[..., Any], Alternative]]:
    """Return the metrics the test accepts by name, with their unfair side.

    Kept here rather than read from :data:`fairmonitor.METRICS`, which sits above this package
    (metrics import nothing above them); a common test checks that this table agrees with the
    registry's label-free, one-array metrics and their directions.
    """
    from ._abpc_abcc import abcc, abpc
    from ._madd import madd
    from ._parity import demographic_parity_difference, demographic_parity_ratio, without_labels

    # the parity metrics take an unread y_true first (as fairlearn's): called without it
    return {
        "abcc": (abcc, "greater"),
        "abpc": (abpc, "greater"),
        "madd": (madd, "greater"),
        "demographic_parity_difference": (without_labels(demographic_parity_difference),
                                          "greater"),
        "demographic_parity_ratio": (without_labels(demographic_parity_ratio), "less"),
    }


def _resolve(metric: Callable[..., Any] | str) -> tuple[Callable[..., Any], str, Alternative]:
    """Return the function, its name and which side is unfair, from a callable or a metric name."""
    known = _label_free()
    if isinstance(metric, str):
        if metric not in known:
            raise InvalidInputError(
                f"unknown metric {metric!r} for permutation_test: it takes a label-free metric "
                f"computed from one array of scores or predictions, one of {sorted(known)}, or "
                "any such callable."
            )
        func, side = known[metric]
        return func, metric, side
    if not callable(metric):
        raise InvalidInputError(
            f"`metric` must be a metric function or a label-free metric name; got {metric!r}."
        )
    for name, (func, side) in known.items():
        if func is metric or getattr(func, "func", None) is metric:  # the function itself
            return func, name, side
    # an unregistered callable: assume larger is less fair (override with `alternative`)
    return metric, getattr(metric, "__name__", "metric"), "greater"


def _value(result: Any) -> float:
    """Return the headline number of a metric's result: a float, or a result's ``.value``."""
    return float(getattr(result, "value", result))


@renamed_keyword("rng", "random_state")
def permutation_test(
    metric: Callable[..., Any] | str,
    y_score_or_pred: ArrayLike,
    *,
    sensitive_features: Any,
    n_resamples: int = 200,
    alternative: Alternative | None = None,
    random_state: np.random.Generator | int | None = None,
    min_group_size: int = 1,
    **metric_options: Any,
) -> PermutationResult:
    """Compare a fairness metric with its values under randomly shuffled group labels.

    Parameters
    ----------
    metric : callable or str
        A label-free metric, e.g. :func:`abcc`, :func:`abpc` or
        :func:`demographic_parity_difference`, or its registry name. Called as
        ``metric(y_score_or_pred, sensitive_features=..., **metric_options)``.
    y_score_or_pred : array-like of shape (n_samples,)
        What the metric reads: scores or hard predictions.
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    n_resamples : int, default=200
        Number of shuffles. The smallest attainable p-value is ``1 / (1 + n_resamples)``.
    alternative : {'greater', 'less'} or None, default=None
        Which side is unfair: 'greater' for lower-is-fairer metrics (the default, and for
        unregistered callables), 'less' for higher-is-fairer ones such as
        ``demographic_parity_ratio``; None takes it from the registry.
    random_state : numpy.random.Generator, int or None
        Seed or generator for the shuffles; a fixed seed gives a reproducible result. Also
        passed to a metric that takes one (``random_state``, or ``rng`` for a user's metric).
        (``rng=``, its old name, is accepted until fairmonitor 0.3 with a FutureWarning.)
    min_group_size : int, default=1
        Groups with fewer rows are left out (with the metric's warning) before shuffling.
    **metric_options
        Passed to the metric (e.g. ``agg="mean"``, ``bandwidth=0.05``).

    Returns
    -------
    result : PermutationResult
        ``observed`` (also ``.value``), ``null_mean``, ``null_std``, ``p_value``,
        ``n_resamples``. All NaN if the observed metric is undefined (it warns why).

    Notes
    -----
    Shuffling keeps every group's size, so the null distribution is exactly the metric's
    sampling distribution under parity *for these group sizes*: its mean is the estimator's
    small-sample floor (ABCC shrinks like sqrt(1/n_i + 1/n_j), ABPC like n^-0.4), which is
    what a fair model reads. The p-value counts the observed labelling as one of the
    permutations (Phipson & Smyth 2010), so it is never 0. Shuffles where the metric is
    undefined are dropped; their warnings are silenced. Cost: ``n_resamples + 1`` metric calls.

    Examples
    --------
    >>> from fairmonitor.metrics import abcc
    >>> y = [0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9]
    >>> r = permutation_test(abcc, y, sensitive_features=list("aaaabbbb"), random_state=0)
    >>> round(r.observed, 6), r.p_value < 0.05, r.null_mean < r.observed
    (0.5, True, True)
    """
    func, name, default_side = _resolve(metric)
    side = check_option(alternative or default_side, "alternative", ("greater", "less"),
                        func="permutation_test")
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    gen = np.random.default_rng(random_state)
    values = check_1d(y_score_or_pred, "y_score_or_pred")
    accepted = frozenset(inspect.signature(func).parameters)
    if "min_group_size" in accepted:
        metric_options["min_group_size"] = min_group_size
    if "random_state" in accepted:
        metric_options["random_state"] = gen
    elif "rng" in accepted:  # a user's metric with the old name
        metric_options["rng"] = gen
    observed = _value(func(values, sensitive_features=sensitive_features, **metric_options))
    if np.isnan(observed):  # the metric has warned why
        return PermutationResult(observed, np.nan, np.nan, np.nan, 0, np.empty(0))
    # shuffle codes of the kept groups only (the metric already left the small ones out)
    groups = encode_groups(sensitive_features, n_samples=len(values))
    kept = groups.counts[groups.codes] >= min_group_size
    values, codes = values[kept], groups.codes[kept]
    metric_options.pop("min_group_size", None)
    null = np.empty(n_resamples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        warnings.simplefilter("ignore", GroupExclusionWarning)
        for r in range(n_resamples):
            null[r] = _value(func(values, sensitive_features=gen.permutation(codes),
                                  **metric_options))
    null = null[~np.isnan(null)]
    if null.size == 0:
        warn_undefined(f"permutation_test({name})", "the metric is undefined on every shuffle")
        return PermutationResult(observed, np.nan, np.nan, np.nan, 0, null)
    slack = _TIES * max(abs(observed), 1e-300)
    extreme = null >= observed - slack if side == "greater" else null <= observed + slack
    p_value = (1.0 + np.count_nonzero(extreme)) / (1.0 + null.size)
    spread = float(null.std(ddof=1)) if null.size > 1 else 0.0
    return PermutationResult(observed, float(null.mean()), spread, float(p_value), int(null.size),
                             null)
