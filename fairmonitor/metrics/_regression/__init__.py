"""Fairness of regression models: error parity, distributional parity, bounded group loss.

``errors`` holds the per-group error metrics (MAE, RMSE, mean residual: differences and
ratios) and the bounded group loss; ``distribution`` the parity of the prediction's
distribution (KS to the pooled predictions, Wasserstein-1 between groups, MADD on a fixed
range); ``regression_errors`` and ``prediction_distribution`` compute each family at once (the
report's calls); ``_resample`` their intervals (Poisson bootstrap) and chance levels
(permutations);
``_common`` the checked inputs and :class:`RegressionGap`, the result of every one.
"""

from ._common import RegressionGap
from .distribution import (
    DISTRIBUTION_METRICS,
    PredictionDistribution,
    prediction_distribution,
    prediction_ks_distance,
    prediction_madd,
    prediction_wasserstein,
    prediction_wasserstein_scaled,
)
from .errors import (
    ERROR_METRICS,
    ErrorParity,
    bounded_group_loss,
    mae_difference,
    mae_ratio,
    mean_residual_difference,
    regression_errors,
    rmse_difference,
    rmse_ratio,
)

__all__ = ["DISTRIBUTION_METRICS", "ERROR_METRICS", "ErrorParity", "PredictionDistribution",
           "RegressionGap", "bounded_group_loss", "mae_difference", "mae_ratio",
           "mean_residual_difference", "prediction_distribution", "prediction_ks_distance",
           "prediction_madd", "prediction_wasserstein", "prediction_wasserstein_scaled",
           "regression_errors", "rmse_difference", "rmse_ratio"]
