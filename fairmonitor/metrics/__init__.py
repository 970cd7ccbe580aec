"""Fairness metrics as pure numpy/scipy functions.

Arrays come first and positionally (``y_true``, ``y_pred`` or ``y_score``, ``X``); everything
from ``sensitive_features`` on is keyword-only. Results are floats, or small frozen dataclasses
when a metric has more than one number to say. Undefined values are NaN plus an
:class:`~fairmonitor.exceptions.UndefinedMetricWarning` naming the cause.

This package imports no pandas, mlflow, prometheus_client or apscheduler.
"""

from ._groups import Groups, encode_groups, sensitive_columns
from ._pairwise import PairwiseMatrix
from ._parity import (
    GroupRates,
    demographic_parity_difference,
    demographic_parity_ratio,
    equal_opportunity_difference,
    equalized_odds_difference,
    group_rates,
)

# --- distributional (ABCC / ABPC) ---
from ._distributional import abcc, abpc
from ._matrix import pairwise_matrix
# --- madd ---
from ._madd import MADDPair, MADDResult, madd, madd_h_sup
# --- permutation test ---
from ._permutation import PermutationResult, permutation_test
# --- hfm ---
from ._manifold import HFMAttribute, HFMResult, hfm
# --- cfair ---
from ._counterpart import CounterpartResult, counterpart_fairness
from ._counterpart_stats import CounterpartComparison
from ._matcher import CounterpartMatcher, PairMatcher, fit_matcher
# --- robustness ---

__all__ = sorted(
    name for name in dir() if not name.startswith("_") and name not in {"annotations"}
)
