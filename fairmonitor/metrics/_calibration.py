"""Calibration within groups: whether a score means the same risk in every group.

:func:`calibration_difference` is the largest between-group difference in calibration-in-the-
large, ``mean(score) - mean(y)`` per group: 0 when every group's scores are, on average, its
observed positive rate. It is the first condition of Kleinberg, Mullainathan and Raghavan
(2016, "well-calibrated within groups") and the group-wise version of the calibration gap in
the evaluator's per-group table. It is a mean, so a group over-confident at low scores and
under-confident at high ones can read 0: a binned calibration error per group would see that,
at the price of a binning choice and much more noise on small groups.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import (
    check_binary,
    check_same_length,
    check_sample_weight,
    check_scores,
    format_labels,
    warn_undefined,
)
from ..utils.groups import encode_groups, require_two_groups

__all__ = ["calibration_difference", "calibration_from_sums"]


def calibration_from_sums(attribute: str, labels: tuple[Any, ...], weight: NDArray[np.float64],
                          score_sum: NDArray[np.float64], label_sum: NDArray[np.float64],
                          excluded: Mapping[Any, int]) -> float:
    """Return the gap from per-group (weighted) row totals, score sums and label sums.

    Shared with :mod:`fairmonitor.summaries`, whose merged counts give the same value.

    >>> calibration_from_sums("g", ("a", "b"), np.array([4.0, 4.0]), np.array([2.0, 2.0]),
    ...                       np.array([2.0, 1.0]), {})
    0.25
    """
    reason = require_two_groups(attribute, labels, excluded)
    if reason is not None:
        return warn_undefined("calibration_difference", reason)
    with np.errstate(invalid="ignore", divide="ignore"):
        error = (score_sum - label_sum) / weight
    defined = error[weight > 0]
    if defined.size < 2:
        empty = format_labels(lab for lab, w in zip(labels, weight, strict=True) if w <= 0)
        return warn_undefined("calibration_difference", f"fewer than two groups of "
                              f"'{attribute}' have weight (zero-weight groups: {empty})")
    return float(defined.max() - defined.min())


def calibration_difference(
    y_true: ArrayLike, y_score: ArrayLike, *, sensitive_features: Any, min_group_size: int = 1,
    sample_weight: ArrayLike | None = None,
) -> float:
    r"""Largest between-group difference in calibration-in-the-large.

    .. math:: \max_g c_g - \min_g c_g, \qquad
              c_g = \overline{s}_g - \overline{y}_g

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Hard 0/1 labels.
    y_score : array-like of shape (n_samples,)
        Scores in [0, 1] (probabilities of the positive class).
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.
    sample_weight : array-like of shape (n_samples,), optional
        Per-row weights: weighted means.

    Returns
    -------
    difference : float
        In [0, 2] (in practice [0, 1]); 0 when every group is calibrated in the large to the
        same degree. NaN (with a warning) if fewer than two groups remain.

    Examples
    --------
    Group a is calibrated (mean score 0.5, half positives); group b's mean score 0.5 meets a
    positive rate of 0.25: it is over-confident by 0.25.

    >>> calibration_difference([1, 0, 1, 0, 1, 0, 0, 0], [.5] * 8,
    ...                        sensitive_features=list("aaaabbbb"))
    0.25
    """
    scores = check_scores(y_score)
    true = check_binary(y_true, "y_true")
    check_same_length(y_true=true, y_score=scores)
    groups = encode_groups(sensitive_features, n_samples=scores.size,
                           min_group_size=min_group_size)
    w = check_sample_weight(sample_weight, scores.size)
    w = np.ones(scores.size) if w is None else w
    kept = groups.codes >= 0
    codes = groups.codes[kept]

    def total(values: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.bincount(codes, weights=values[kept], minlength=groups.n_groups)

    return calibration_from_sums(groups.name, groups.labels, total(w), total(scores * w),
                                 total(true * w), groups.excluded)
