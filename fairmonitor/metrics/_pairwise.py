"""Pairwise between-group comparison shared by the distribution-level metrics.

A distribution metric (ABCC, ABPC, MADD) compares two groups. With K groups it is evaluated on
every unordered pair once, into a symmetric K x K matrix, then aggregated: ``"max"`` (the worst
pair, the default, what an alert should look at) or ``"mean"`` (the unweighted mean over the
K(K-1)/2 pairs, the rule of Han et al., paper 001 §5.1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import check_option, check_scores, warn_undefined
from ..utils.groups import Groups, encode_groups

__all__ = ["AGGREGATIONS", "PairwiseMatrix", "aggregate_pairs", "pairwise_over_groups",
           "scores_and_groups"]

Aggregation = Literal["max", "mean"]
AGGREGATIONS: tuple[Aggregation, ...] = ("max", "mean")


@dataclass(frozen=True, slots=True)
class PairwiseMatrix:
    """A metric evaluated on every pair of groups.

    Attributes
    ----------
    metric : str
        The metric's registry name.
    attribute : str
        The sensitive attribute (``"a:b"`` for an intersection).
    labels : tuple
        Group labels, in matrix order.
    counts : ndarray of shape (K,)
        Rows per group.
    matrix : ndarray of shape (K, K)
        Symmetric, zero diagonal; ``matrix[i, j]`` compares groups ``i`` and ``j``.
    """

    metric: str
    attribute: str
    labels: tuple[Any, ...]
    counts: NDArray[np.intp]
    matrix: NDArray[np.float64]

    def aggregate(self, agg: Aggregation = "max") -> float:
        """Collapse the matrix to one number by ``agg`` (``"max"`` or ``"mean"``)."""
        return aggregate_pairs(self.matrix, agg, metric=self.metric)

    def worst_pair(self) -> tuple[Any, Any]:
        """Labels of the pair with the largest value."""
        iu = np.triu_indices(len(self.labels), k=1)
        k = int(np.nanargmax(self.matrix[iu]))
        return self.labels[iu[0][k]], self.labels[iu[1][k]]


def aggregate_pairs(matrix: NDArray[np.float64], agg: Aggregation, *, metric: str = "") -> float:
    """Aggregate the upper triangle of a pairwise matrix.

    >>> m = np.array([[0, .2, .4], [.2, 0, .3], [.4, .3, 0]])
    >>> aggregate_pairs(m, "max"), round(aggregate_pairs(m, "mean"), 12)
    (0.4, 0.3)
    """
    check_option(agg, "agg", AGGREGATIONS, func=metric)
    k = matrix.shape[0]
    if k < 2:
        return warn_undefined(metric or "metric", "fewer than two groups")
    upper = matrix[np.triu_indices(k, k=1)]
    return float(upper.max() if agg == "max" else upper.mean())


def scores_and_groups(metric: str, y_score: ArrayLike, sensitive_features: Any,
                      min_group_size: int) -> tuple[NDArray[np.float64], Groups] | None:
    """Return validated scores and their groups, or None (after the warning) with < 2 groups.

    The scores may be the caller's own float64 array (``check_scores(copy=False)``): read them,
    never write into them.
    """
    scores = check_scores(y_score, copy=False)
    groups = encode_groups(sensitive_features, n_samples=scores.size,
                           min_group_size=min_group_size)
    reason = groups.two_group_reason()
    if reason is not None:
        warn_undefined(metric, reason)
        return None
    return scores, groups


def pairwise_over_groups(
    metric: str,
    groups: Groups,
    values: NDArray[Any],
    prepare: Callable[[NDArray[Any]], Any],
    distance: Callable[[Any, Any], float],
) -> PairwiseMatrix | None:
    """Evaluate ``distance(prepare(group_i), prepare(group_j))`` for every pair of groups.

    ``prepare`` runs once per group (sort, histogram, KDE grid), so a K-group matrix costs K
    preparations and K(K-1)/2 cheap comparisons. Returns None (after an
    :class:`~fairmonitor.exceptions.UndefinedMetricWarning`) when fewer than two groups remain.
    """
    reason = groups.two_group_reason()
    if reason is not None:
        warn_undefined(metric, reason)
        return None
    prepared = [prepare(part) for part in groups.split(values)]
    k = groups.n_groups
    matrix = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            matrix[i, j] = matrix[j, i] = distance(prepared[i], prepared[j])
    return PairwiseMatrix(metric, groups.name, groups.labels, groups.counts, matrix)
