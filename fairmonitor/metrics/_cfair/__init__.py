"""CFair (paper 002): counterpart fairness.

``cfair`` is the metric; ``matcher`` fits the propensity model and the learned metric once
(reusable across windows), ``matching`` finds counterparts, ``features`` encodes the inputs and
``stats`` holds the paired tests and rate gaps.
"""

from .cfair import CounterpartResult, counterpart_fairness
from .matcher import CounterpartMatcher, PairMatcher, fit_matcher
from .regression import CounterpartPredictionGap, counterpart_prediction_gap
from .stats import CounterpartComparison

__all__ = [
    "CounterpartComparison", "CounterpartMatcher", "CounterpartPredictionGap",
    "CounterpartResult", "PairMatcher", "counterpart_fairness", "counterpart_prediction_gap",
    "fit_matcher",
]
