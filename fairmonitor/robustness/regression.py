"""Noise robustness of a regressor's fairness gaps: the robustness ratio's protocol, continuous.

The classification protocol (:func:`~fairmonitor.robustness.robustness_ratio`) thresholds the
model's output and follows rate gaps. A regressor's output stays continuous; the gaps followed
are the error-parity gap ``mae_difference`` (needs the targets, never perturbed) and the
distributional gap ``prediction_ks_distance`` (the predictions alone):

    Delta_k = mean_j M(f, X~_j^(k)) - M(f, X)        R_k = mean_j M(f, X~_j^(k)) / M(f, X)

over ``K`` noisy copies per level ``k``, with the same noise model, common random numbers,
subsample and one batched predict call per level as the classification protocol. The gaps are
computed by :mod:`fairmonitor.metrics`' own functions on every copy, so a copy's gap is
exactly the metric's value on that copy.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import (
    check_continuous,
    check_positive_int,
    check_same_length,
    warn_undefined,
)
from ..exceptions import UndefinedMetricWarning
from ..metrics import mae_difference, prediction_ks_distance
from ..utils.groups import Groups, encode_groups
from .inputs import as_predict, check_levels, check_X, resolve_sensitive, subsample
from .noise import build_noise_model, infer_column_kinds

__all__ = ["REGRESSION_GAPS", "RegressionRobustness", "regression_robustness"]

#: The gaps followed under noise, by metric name.
REGRESSION_GAPS = ("mae_difference", "prediction_ks_distance")
_DEFAULT_LEVELS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


@dataclass(frozen=True)
class RegressionRobustness:
    """How a regressor's fairness gaps move under input noise, on one attribute.

    Per gap (``mae_difference``, ``prediction_ks_distance``; keys of the mappings): ``clean``
    the gap on the clean rows, ``gaps`` its mean over the noisy copies per level, ``gap_se``
    their standard error, ``ratios`` ``gaps / clean`` and ``deltas`` ``gaps - clean``; the
    summaries ``max_ratio`` and ``max_delta`` over the levels (NaN with the reason in
    ``reasons`` when the gap is undefined, e.g. MAE without targets).
    """

    attribute: str
    levels: tuple[float, ...]
    clean: Mapping[str, float]
    gaps: Mapping[str, NDArray[np.float64]]
    gap_se: Mapping[str, NDArray[np.float64]]
    ratios: Mapping[str, NDArray[np.float64]]
    deltas: Mapping[str, NDArray[np.float64]]
    reasons: Mapping[str, str]
    n_rows_used: int

    def _summary(self, field: str, metric: str) -> float:
        values = getattr(self, field)[metric]
        finite = values[np.isfinite(values)]
        return float(finite.max()) if finite.size else math.nan

    @property
    def mae_ratio_max(self) -> float:
        """Largest ratio of the noisy MAE gap to the clean one over the levels."""
        return self._summary("ratios", "mae_difference")

    @property
    def mae_delta_max(self) -> float:
        """Largest increase of the MAE gap under noise (target units)."""
        return self._summary("deltas", "mae_difference")

    @property
    def ks_ratio_max(self) -> float:
        """Largest ratio of the noisy prediction KS gap to the clean one over the levels."""
        return self._summary("ratios", "prediction_ks_distance")

    @property
    def ks_delta_max(self) -> float:
        """Largest increase of the prediction KS gap under noise."""
        return self._summary("deltas", "prediction_ks_distance")


def _gaps(pred: NDArray[np.float64], y: NDArray[np.float64] | None, groups: Any,
          min_group_size: int) -> NDArray[np.float64]:
    """Both gaps of one set of predictions, by the metric functions (NaN when undefined)."""
    with warnings.catch_warnings():  # undefined gaps are reported once, by the caller
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        ks = float(prediction_ks_distance(pred, sensitive_features=groups,
                                          min_group_size=min_group_size))
        mae = (math.nan if y is None else float(mae_difference(
            y, pred, sensitive_features=groups, min_group_size=min_group_size)))
    return np.array([mae, ks])


def _predict(call: Any, X: Any, rows: int) -> NDArray[np.float64]:
    out = np.asarray(call(X))
    if out.ndim == 2:
        out = out[:, 0]
    return check_continuous(out.reshape(rows), "the model's predictions")


def _ratios(gaps: NDArray[np.float64], clean: NDArray[np.float64]
            ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.where(clean > 0, gaps / clean, np.where(gaps > 0, np.inf, 1.0))
    ratios = np.where(np.isfinite(clean) & np.isfinite(gaps), ratios, np.nan)
    return ratios, gaps - clean


def regression_robustness(predict: Any, X: Any, *, sensitive_features: Any,
                          y_true: Any = None, levels: Any = _DEFAULT_LEVELS,
                          n_repeats: int = 10, noise: str = "laplace", scale: str = "std",
                          random_state: Any = None, max_rows: int | None = 20_000,
                          column_kinds: Mapping[Any, str] | None = None,
                          min_group_size: int = 1,
                          round_integers: bool = False) -> RegressionRobustness:
    """Follow a regressor's MAE gap and prediction KS gap as its inputs carry more noise.

    Parameters
    ----------
    predict : callable or model
        ``predict(X) -> predictions`` (continuous), or an object with ``.predict``.
    X : DataFrame or 2-D array
        Reference rows as the model takes them.
    sensitive_features : str, list of str, array-like or dict
        As :func:`~fairmonitor.robustness.robustness_ratio`: column names of X (passed
        unperturbed) or arrays aligned with X (not passed to the model).
    y_true : array-like of float, optional
        Targets (never perturbed); without them the MAE gap is NaN with the reason.
    levels, n_repeats, noise, scale, random_state, max_rows, column_kinds, min_group_size
        As :func:`~fairmonitor.robustness.robustness_ratio`.
    round_integers : bool, default=False
        Round noisy integer columns back to their dtype (e.g. for a strict MLflow signature;
        the monitor's model versions set it).

    Returns
    -------
    result : RegressionRobustness

    Examples
    --------
    A model whose predictions do not depend on the noisy column: nothing moves.

    >>> import pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame({"a": rng.normal(size=300), "b": rng.normal(size=300)})
    >>> g = np.where(X["b"] > 0, "x", "y")
    >>> res = regression_robustness(lambda d: 2.0 * (d["b"] > 0), X, sensitive_features=g,
    ...                             column_kinds={"b": "frozen"}, levels=(0.5, 1.0))
    >>> round(res.clean["prediction_ks_distance"], 3), round(abs(res.ks_delta_max), 9)
    (0.51, 0.0)
    """
    call = as_predict(predict)
    levels_t = check_levels(levels)
    K = check_positive_int(n_repeats, "n_repeats")
    X = check_X(X)
    if isinstance(sensitive_features, Groups):  # the report's encoding: the codes are groups
        sensitive_features = {sensitive_features.name: sensitive_features.codes}
    sf, frozen = resolve_sensitive(X, sensitive_features)
    y = None if y_true is None else check_continuous(y_true, "y_true")
    if y is not None:
        check_same_length(X=X, y_true=y)
    kinds = infer_column_kinds(X, overrides=column_kinds, frozen=frozen)
    model = build_noise_model(X, kinds, distribution=noise, scale=scale,
                              round_integers=round_integers)
    sample_rng, noise_rng, _ = np.random.default_rng(
        0 if random_state is None else random_state).spawn(3)
    X, sf, _, index = subsample(X, sf, None, max_rows, sample_rng)
    y = None if y is None else y[index]
    n = len(index)
    groups = encode_groups(sf, n_samples=n)
    clean = _gaps(_predict(call, X, n), y, groups, min_group_size)
    draws = model.draw(noise_rng, K, n)
    per_level = []
    for level in levels_t:
        pred = _predict(call, model.stack(X, draws, level, 0, K), K * n).reshape(K, n)
        per_level.append(np.array([_gaps(p, y, groups, min_group_size) for p in pred]))
    runs = np.array(per_level)  # levels x repeats x gaps
    mean = runs.mean(axis=1)
    se = runs.std(axis=1, ddof=1) / math.sqrt(K) if K > 1 else np.full_like(mean, math.nan)
    ratios, deltas = _ratios(mean, clean[None, :])
    return _result(groups.name, levels_t, clean, mean, se, ratios, deltas, y is None, n)


def _result(name: str, levels: tuple[float, ...], clean: NDArray[np.float64],
            mean: NDArray[np.float64], se: NDArray[np.float64], ratios: NDArray[np.float64],
            deltas: NDArray[np.float64], no_targets: bool, n: int) -> RegressionRobustness:
    reasons = {}
    for k, metric in enumerate(REGRESSION_GAPS):
        if metric == "mae_difference" and no_targets:  # not an error: the KS gap is followed
            reasons[metric] = "no targets: the MAE gap needs y_true"
        elif not math.isfinite(clean[k]):
            reasons[metric] = "the clean gap is undefined (fewer than two groups)"
            warn_undefined(f"robustness of {metric}", reasons[metric])

    def by_metric(values: NDArray[np.float64]) -> Mapping[str, Any]:
        return MappingProxyType({m: values[..., k] for k, m in enumerate(REGRESSION_GAPS)})

    return RegressionRobustness(
        attribute=name, levels=levels,
        clean=MappingProxyType({m: float(clean[k]) for k, m in enumerate(REGRESSION_GAPS)}),
        gaps=by_metric(mean), gap_se=by_metric(se), ratios=by_metric(ratios),
        deltas=by_metric(deltas), reasons=MappingProxyType(reasons), n_rows_used=n)

