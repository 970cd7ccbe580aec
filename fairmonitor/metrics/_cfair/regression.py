r"""CFair for a regressor: how far apart the predictions of look-alike individuals lie.

CFair's counterpart DP gap (:func:`~fairmonitor.metrics.counterpart_fairness`) is
``|mean_i d_i|`` with ``d_i = f(x_i) - f(x_i')`` over the counterpart pairs: a signed mean, in
which over- and under-predicted pairs cancel. A regressor's counterpart gap is the mean
*absolute* difference (spec ``cfair.md`` §8, "regression via unit-scale CDP"),

.. math:: \mathrm{CG} = \frac{1}{N}\sum_{i=1}^N |f(x_i) - f(x_i')|

in the prediction's units, and ``CG / (hi - lo)`` scaled by a documented value range (the
config's or the reference data's ``value_range``; without one, the window's own min and max,
which move with the window). The matching is CFair's own (same propensity model, caliper,
Mahalanobis counterparts, ``matcher`` reuse); with several comparisons the worst is reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validation import check_continuous, warn_undefined
from ...exceptions import InvalidInputError
from .cfair import CounterpartResult, counterpart_fairness

__all__ = ["CounterpartPredictionGap", "counterpart_prediction_gap"]

_NAN = float("nan")


@dataclass(frozen=True)
class CounterpartPredictionGap:
    """A regressor's counterpart gap on one attribute (the worst comparison's figures).

    Attributes
    ----------
    value : float
        Mean ``|f(x) - f(x')|`` over the counterpart pairs, in prediction units.
    scaled : float
        ``value / (hi - lo)`` with ``value_range = (hi, lo)``; in [0, 1] for predictions
        inside the range.
    signed : float
        Mean ``f(x) - f(x')`` (group minus reference) of the same pairs: CFair's signed CDP.
    value_range : tuple of float
        The ``(lo, hi)`` used to scale.
    range_source : str
        ``"option"`` (given) or ``"window"`` (the window's min and max).
    n_pairs : int
        Pairs of the worst comparison.
    group, reference : object
        The worst comparison's group and reference.
    by_comparison : dict
        ``{(group, reference): value}`` of every comparison with pairs.
    cfair : CounterpartResult
        The matching and CFair's own figures (status, reasons, ``matcher`` to reuse).
    """

    value: float
    scaled: float
    signed: float
    value_range: tuple[float, float]
    range_source: str
    n_pairs: int
    group: Any
    reference: Any
    by_comparison: dict[Any, float] = field(default_factory=dict)
    cfair: CounterpartResult | None = None

    def __float__(self) -> float:
        return float(self.value)


def _range(f: np.ndarray, value_range: Sequence[float] | None) -> tuple[float, float, str]:
    if value_range is None:
        return float(f.min()), float(f.max()), "window"
    lo, hi = (float(v) for v in value_range)
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        raise InvalidInputError(f"value_range must be two finite numbers lo < hi; got "
                                f"{value_range!r}")
    return lo, hi, "option"


def counterpart_prediction_gap(X: Any, y_pred: ArrayLike, *, sensitive_features: Any,
                               value_range: Sequence[float] | None = None,
                               **cfair_options: Any) -> CounterpartPredictionGap:
    """Mean absolute prediction difference between look-alike individuals (CFair, regression).

    Parameters
    ----------
    X : 2-D array, dict of columns or DataFrame
        Non-protected input features, as :func:`counterpart_fairness` takes them.
    y_pred : array-like of shape (n_samples,)
        The regressor's predictions (finite numbers).
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    value_range : (lo, hi), optional
        The documented range of the predictions that ``scaled`` divides by (from the config or
        the reference data: then comparable across windows); default the window's min and
        max.
    **cfair_options
        Passed to :func:`counterpart_fairness` (``caliper``, ``reference``, ``compare``,
        ``min_pairs``, ``matcher``, ``min_group_size``, ``random_state``, ...).

    Returns
    -------
    result : CounterpartPredictionGap
        NaN with an :class:`~fairmonitor.exceptions.UndefinedMetricWarning` when CFair finds
        no comparison with ``min_pairs`` pairs (``result.cfair.status`` says why).

    Examples
    --------
    Two groups of identical rows; the model adds 2 to group ``"a"``'s predictions:

    >>> x = np.tile(np.arange(40.0), 2)[:, None]
    >>> group = np.repeat(["a", "b"], 40)
    >>> pred = x[:, 0] + 2.0 * (group == "a")
    >>> r = counterpart_prediction_gap(x, pred, sensitive_features=group, reference="b",
    ...                                value_range=(0, 50))
    >>> r.value, r.scaled, r.signed, r.n_pairs
    (2.0, 0.04, 2.0, 40)
    """
    f = check_continuous(y_pred, "y_pred")
    lo, hi, source = _range(f, value_range)
    res = counterpart_fairness(X, None, f, sensitive_features=sensitive_features,
                               **cfair_options)
    gaps = {}
    for c in res.comparisons:
        if c.status == "ok" and c.pairs is not None and len(c.pairs):
            pairs = np.asarray(c.pairs)
            d = f[pairs[:, 0]] - f[pairs[:, 1]]  # protected minus reference, as CFair
            gaps[(c.group, c.reference)] = (float(np.abs(d).mean()), float(d.mean()),
                                            len(pairs))
    if not gaps:  # counterpart_fairness has warned why (UndefinedMetricWarning)
        return CounterpartPredictionGap(_NAN, _NAN, _NAN, (lo, hi), source, res.n_pairs,
                                        res.group, res.reference, {}, res)
    (group, reference), (value, signed, n) = max(gaps.items(), key=lambda kv: kv[1][0])
    scaled = value / (hi - lo) if hi > lo else warn_undefined(
        "counterpart_prediction_gap_scaled", "every prediction of the window is equal (a "
        "zero range); give `value_range`")
    return CounterpartPredictionGap(value, scaled, signed, (lo, hi), source, n, group,
                                    reference, {k: v[0] for k, v in gaps.items()}, res)
