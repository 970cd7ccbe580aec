"""Fairness metrics as pure numpy/scipy functions.

Arrays come first and positionally (``y_true``, ``y_pred`` or ``y_score``, ``X``); everything
from ``sensitive_features`` on is keyword-only. Results are floats, or small frozen dataclasses
when a metric has more than one number to say. Undefined values are NaN plus an
:class:`~fairmonitor.exceptions.UndefinedMetricWarning` naming the cause.

This package imports no pandas, mlflow, prometheus_client or apscheduler.
"""

# --- cfair ---
# --- distributional (ABCC / ABPC) ---
from ..utils.groups import Groups, encode_groups, sensitive_columns
from ._abpc_abcc.areas import abcc, abpc

# --- calibration ---
from ._calibration import calibration_difference
from ._cfair.cfair import CounterpartResult, counterpart_fairness
from ._cfair.matcher import CounterpartMatcher, PairMatcher, fit_matcher
from ._cfair.regression import CounterpartPredictionGap, counterpart_prediction_gap
from ._cfair.stats import CounterpartComparison

# --- hfm ---
from ._hfm.hfm import HFMAttribute, HFMResult, hfm

# --- madd ---
from ._madd import MADDPair, MADDResult, madd, madd_h_sup
from ._matrix import pairwise_matrix
from ._pairwise import PairwiseMatrix
from ._parity import (
    GroupRates,
    demographic_parity_difference,
    demographic_parity_ratio,
    equal_opportunity_difference,
    equalized_odds_difference,
    group_rates,
    predictive_parity_difference,
    without_labels,
)

# --- permutation test ---
from ._permutation import PermutationResult, permutation_test

# --- regression ---
from ._regression import (
    ErrorParity,
    PredictionDistribution,
    RegressionGap,
    bounded_group_loss,
    mae_difference,
    mae_ratio,
    mean_residual_difference,
    prediction_distribution,
    prediction_ks_distance,
    prediction_madd,
    prediction_wasserstein,
    prediction_wasserstein_scaled,
    regression_errors,
    rmse_difference,
    rmse_ratio,
)

# --- robustness ---

__all__ = [
    "CounterpartComparison",
    "CounterpartMatcher",
    "CounterpartPredictionGap",
    "CounterpartResult",
    "ErrorParity",
    "GroupRates",
    "Groups",
    "HFMAttribute",
    "HFMResult",
    "MADDPair",
    "MADDResult",
    "PairMatcher",
    "PairwiseMatrix",
    "PermutationResult",
    "PredictionDistribution",
    "RegressionGap",
    "abcc",
    "abpc",
    "bounded_group_loss",
    "calibration_difference",
    "counterpart_fairness",
    "counterpart_prediction_gap",
    "demographic_parity_difference",
    "demographic_parity_ratio",
    "encode_groups",
    "equal_opportunity_difference",
    "equalized_odds_difference",
    "fit_matcher",
    "group_rates",
    "hfm",
    "madd",
    "madd_h_sup",
    "mae_difference",
    "mae_ratio",
    "mean_residual_difference",
    "pairwise_matrix",
    "permutation_test",
    "prediction_distribution",
    "prediction_ks_distance",
    "prediction_madd",
    "prediction_wasserstein",
    "prediction_wasserstein_scaled",
    "predictive_parity_difference",
    "regression_errors",
    "rmse_difference",
    "rmse_ratio",
    "sensitive_columns",
    "without_labels",
]
