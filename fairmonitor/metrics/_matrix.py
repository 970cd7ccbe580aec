"""The full pairwise matrix of a distribution metric, for reports and plots.

Each distribution-metric family registers a private builder in :data:`_MATRIX_BUILDERS` with
the contract ``builder(y_score, *, sensitive_features, min_group_size, **options) ->
PairwiseMatrix | None`` (None after an :class:`~fairmonitor.exceptions.UndefinedMetricWarning`
when fewer than two groups can be compared). The metric functions themselves aggregate the same
matrix, so ``abcc(..., agg=a) == pairwise_matrix(..., metric="abcc").aggregate(a)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from numpy.typing import ArrayLike

from .._validation import check_option
from ..exceptions import InvalidInputError
from ._abpc_abcc.areas import _abcc_matrix, _abpc_matrix
from ._madd.madd import _madd_matrix
from ._pairwise import PairwiseMatrix

__all__ = ["pairwise_matrix"]

#: metric name -> matrix builder; a family adds itself with one line.
_MATRIX_BUILDERS: dict[str, Callable[..., PairwiseMatrix | None]] = {
    "abcc": _abcc_matrix,
    "abpc": _abpc_matrix,
    "madd": _madd_matrix,
}


def pairwise_matrix(y_score: ArrayLike, *, sensitive_features: Any, metric: str = "abcc",
                    min_group_size: int = 1, **options: Any) -> PairwiseMatrix | None:
    """Evaluate a distribution metric on every pair of groups.

    Parameters
    ----------
    y_score : array-like of shape (n_samples,)
        Scores in [0, 1].
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    metric : str, default='abcc'
        A distribution metric: ``'abcc'``, ``'abpc'`` (and any other family registered here).
    min_group_size : int, default=1
        Groups with fewer rows are left out with a warning.
    **options
        The metric's own options (e.g. ``bandwidth`` for ``'abpc'``); ``agg`` does not apply.

    Returns
    -------
    pairs : PairwiseMatrix or None
        Symmetric K x K matrix with a zero diagonal, its group labels and counts; None (with an
        :class:`~fairmonitor.exceptions.UndefinedMetricWarning`) if fewer than two groups can
        be compared.

    Examples
    --------
    >>> pm = pairwise_matrix([0.1, 0.2, 0.5, 0.6, 0.9, 1.0],
    ...                      sensitive_features=["a", "a", "b", "b", "c", "c"])
    >>> pm.labels, pm.matrix.round(6).tolist()
    (('a', 'b', 'c'), [[0.0, 0.4, 0.8], [0.4, 0.0, 0.4], [0.8, 0.4, 0.0]])
    >>> pm.worst_pair(), round(pm.aggregate("mean"), 6)
    (('a', 'c'), 0.533333)
    """
    check_option(metric, "metric", tuple(_MATRIX_BUILDERS), func="pairwise_matrix")
    builder = _MATRIX_BUILDERS[metric]
    accepted = set(inspect.signature(builder).parameters) - {"y_score", "sensitive_features"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise InvalidInputError(
            f"pairwise_matrix(metric={metric!r}) got unknown option(s) {unknown}; "
            f"{metric} accepts {sorted(accepted)}."
        )
    return builder(y_score, sensitive_features=sensitive_features,
                   min_group_size=min_group_size, **options)
