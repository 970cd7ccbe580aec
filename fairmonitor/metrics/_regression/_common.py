"""What every regression metric shares: checked inputs, kept groups, the result object.

The rows of excluded groups (``min_group_size``) leave every computation once, here; the
metric modules then work on group codes ``0..K-1`` and per-row weights (``sample_weight``, or
ones), which is also what the resampling of :mod:`._resample` draws from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._validation import check_continuous, check_same_length, check_sample_weight
from ...utils.groups import encode_groups, plain
from .._intervals import Interval


@dataclass(frozen=True)
class RegressionGap:
    """The result of a regression fairness metric.

    Attributes
    ----------
    value : float
        The metric's value (also ``float(result)``); NaN when undefined.
    metric : str
        The metric's name.
    by_group : mapping of group label to float
        The per-group quantity behind the value: each group's MAE, RMSE, mean residual, loss,
        KS distance to the pooled predictions.
    counts : mapping of group label to int
        Rows per kept group.
    extremes : tuple or None
        The groups that set the value (the pair of a gap or a ratio, the worst group).
    interval : Interval or None
        Confidence interval and chance level, when ``confidence_level`` was given.
    detail : object
        More of the computation (MADD's result, the scale or range used).
    """

    value: float
    metric: str
    by_group: Mapping[Any, float] = field(default_factory=dict)
    counts: Mapping[Any, int] = field(default_factory=dict)
    extremes: tuple[Any, ...] | None = None
    interval: Interval | None = None
    detail: Any = None

    def __float__(self) -> float:
        return float(self.value)


@dataclass(frozen=True)
class Prepared:
    """The kept rows of one regression window: group codes, weights and the arrays."""

    codes: NDArray[np.intp]
    labels: tuple[Any, ...]
    weight: NDArray[np.float64]
    y_pred: NDArray[np.float64]
    y_true: NDArray[np.float64] | None
    name: str
    reason: str | None  # why a between-group metric is undefined, or None
    #: rows per kept group when the rows themselves are not here (a summary's sums)
    sizes: NDArray[np.intp] | None = None

    @property
    def n_groups(self) -> int:
        """Number of kept groups."""
        return len(self.labels)

    def per_group(self, values: NDArray[np.float64]) -> dict[Any, float]:
        """``{label: value}`` of a per-group array, labels as plain Python values."""
        return {plain(lab) if not isinstance(lab, tuple) else lab: float(v)
                for lab, v in zip(self.labels, values, strict=True)}

    def counts_array(self) -> NDArray[np.intp]:
        """Rows per kept group, in label order."""
        if self.sizes is not None:
            return self.sizes
        return np.bincount(self.codes, minlength=self.n_groups)

    def counts(self) -> dict[Any, int]:
        """Rows per kept group."""
        return {k: int(v) for k, v in self.per_group(self.counts_array().astype(float)).items()}


def prepare(y_true: ArrayLike | None, y_pred: ArrayLike, sensitive_features: Any, *,
            min_group_size: int, sample_weight: ArrayLike | None) -> Prepared:
    """Check the inputs, encode the groups and keep the rows of the kept groups."""
    pred = check_continuous(y_pred, "y_pred")
    true = None if y_true is None else check_continuous(y_true, "y_true")
    if true is not None:
        check_same_length(y_true=true, y_pred=pred)
    groups = encode_groups(sensitive_features, n_samples=pred.size,
                           min_group_size=min_group_size)
    w = check_sample_weight(sample_weight, pred.size)
    kept = groups.codes >= 0
    if kept.all():
        keep: Any = slice(None)
    else:
        keep = kept
    weight = np.ones(pred.size) if w is None else w
    return Prepared(codes=groups.codes[keep].astype(np.intp, copy=False), labels=groups.labels,
                    weight=weight[keep],
                    y_pred=pred[keep], y_true=None if true is None else true[keep],
                    name=groups.name, reason=groups.two_group_reason())


def group_means(codes: NDArray[np.intp], n_groups: int, values: NDArray[np.float64],
                weight: NDArray[np.float64]) -> NDArray[np.float64]:
    """Weighted mean of ``values`` per group (NaN for a group of zero weight)."""
    total = np.bincount(codes, weights=weight, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(codes, weights=weight * values, minlength=n_groups) / total
