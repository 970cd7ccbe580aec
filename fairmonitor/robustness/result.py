"""The result of :func:`~fairmonitor.robustness.robustness_ratio`.

Gaps per noise level, ratios and their summaries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import stats as st

__all__ = ["RobustnessResult"]


@dataclass(frozen=True, slots=True)
class RobustnessResult:
    """Fairness gaps under input noise, per level and metric, with their summaries.

    Per-level arrays are aligned with ``levels`` (the clean level 0 is not included: R_0 = 1).
    Mappings are keyed by metric name (``metrics``). Everything is read-only.

    Attributes
    ----------
    value : float
        Headline: ``max_ratio`` of the first metric.
    metrics, attribute, levels : tuple, str, tuple of float
        Metric names, the sensitive attribute (``"a:b"`` for an intersection), noise levels.
    gaps, gap_se : mapping of str to ndarray
        Mean gap over the repeats at each level, and its standard error ``sd / sqrt(K_used)``.
    clean_gaps, clean_gap_se : mapping of str to float
        Gap on the clean rows (SE 0 unless ``stochastic``).
    ratios, ratio_se, ratios_floored, deltas, delta_se : mapping of str to ndarray
        ``R_k``, its delta-method SE, ``gap_k / max(clean, noise_floor)``, ``Delta_k`` and its
        SE.
    noise_floor : mapping of str to float
        Typical gap of a perfectly fair model on samples of these group sizes (spec §5.5).
    ratio_at_max_level, max_ratio, argmax_level, auc_ratio, max_delta, frac_levels_worse
        Summaries per metric; ``auc_ratio = trapz([1, R_1..R_L], [0, k_1..k_L]) / k_L``.
    robust : mapping of str to bool
        False if some level is significantly worse: ``Delta_k > max(tol_abs, 1.96 SE)``
        (``R_k > 1`` with ``strict=True``); False when the metric is undefined.
    reason : mapping of str to str
        Why ratios are inf/NaN (clean gap 0 or below the floor, metric undefined); '' if none.
    flip_rate, flip_rate_gap : ndarray
        Share of predictions changed by the noise; its max-minus-min over groups.
    flip_rate_by_group : ndarray of shape (L, G)
        Per-group flip rates (means over repeats); ``group_labels`` names the G groups.
    group_rates : mapping of str to ndarray of shape (L + 1, G)
        ``selection_rate`` (and ``true_positive_rate``, ``false_positive_rate`` with labels)
        per group, row 0 clean, then one row per level (means over repeats).
    accuracy, clean_accuracy : ndarray or None, float or None
        Accuracy per level and on clean rows, when ``y_true`` is given.
    repeats_used : ndarray of int
        Repeats per level after early stopping.
    n_rows_used, n_rows_total, subsampled, sample_index
        The evaluated (stratified) sample and its row positions in X.
    n_predict_calls, n_rows_scored : int
        Model calls made and rows scored, clean call included.
    column_kinds : mapping
        Column -> continuous | categorical | frozen, as used.
    noise, scale, categorical_scheme, categorical_rates, crn, stochastic
        The noise specification (``categorical_rates`` per level).
    """

    value: float
    metrics: tuple[str, ...]
    attribute: str
    levels: tuple[float, ...]
    gaps: Mapping[str, NDArray[np.float64]]
    gap_se: Mapping[str, NDArray[np.float64]]
    clean_gaps: Mapping[str, float]
    clean_gap_se: Mapping[str, float]
    ratios: Mapping[str, NDArray[np.float64]]
    ratio_se: Mapping[str, NDArray[np.float64]]
    ratios_floored: Mapping[str, NDArray[np.float64]]
    deltas: Mapping[str, NDArray[np.float64]]
    delta_se: Mapping[str, NDArray[np.float64]]
    noise_floor: Mapping[str, float]
    ratio_at_max_level: Mapping[str, float]
    max_ratio: Mapping[str, float]
    argmax_level: Mapping[str, float]
    auc_ratio: Mapping[str, float]
    max_delta: Mapping[str, float]
    frac_levels_worse: Mapping[str, float]
    robust: Mapping[str, bool]
    reason: Mapping[str, str]
    flip_rate: NDArray[np.float64]
    flip_rate_gap: NDArray[np.float64]
    flip_rate_by_group: NDArray[np.float64]
    group_rates: Mapping[str, NDArray[np.float64]]
    group_labels: tuple[Any, ...]
    accuracy: NDArray[np.float64] | None
    clean_accuracy: float | None
    repeats_used: NDArray[np.intp]
    n_rows_used: int
    n_rows_total: int
    subsampled: bool
    sample_index: NDArray[np.intp]
    n_predict_calls: int
    n_rows_scored: int
    column_kinds: Mapping[Any, str]
    noise: str
    scale: str
    categorical_scheme: str
    categorical_rates: NDArray[np.float64]
    crn: bool
    stochastic: bool

    # Float views of the first metric's summaries: the registry's ``field``s.
    @property
    def max_ratio_value(self) -> float:
        """``max_ratio`` of the first metric."""
        return self.max_ratio[self.metrics[0]]

    @property
    def ratio_at_max_level_value(self) -> float:
        """``ratio_at_max_level`` of the first metric."""
        return self.ratio_at_max_level[self.metrics[0]]

    @property
    def auc_ratio_value(self) -> float:
        """``auc_ratio`` of the first metric."""
        return self.auc_ratio[self.metrics[0]]

    @property
    def max_delta_value(self) -> float:
        """``max_delta`` of the first metric."""
        return self.max_delta[self.metrics[0]]

    @property
    def robust_value(self) -> float:
        """1.0 if the first metric is robust, 0.0 if not, NaN if it is undefined."""
        m = self.metrics[0]
        return math.nan if math.isnan(self.clean_gaps[m]) else float(self.robust[m])

    @property
    def flip_rate_max(self) -> float:
        """Largest share of changed predictions over the levels."""
        return float(np.max(self.flip_rate))

    @property
    def flip_rate_gap_max(self) -> float:
        """Largest between-group difference in flip rate over the levels (NaN if < 2 groups)."""
        return st._nanmax(self.flip_rate_gap)
