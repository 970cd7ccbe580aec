"""The one report path: the metric registry, thresholds and :func:`evaluate_window`.

The MLflow evaluator and the monitor both call :func:`evaluate_window`, so offline and online
numbers cannot disagree. ``registry`` is the table of metrics every layer reads, ``thresholds``
the alerting bounds, ``evaluate`` the window and its report.
"""

from .defaults import MIN_CONDITION_SIZE, MIN_GROUP_SIZE
from .evaluate import Window, WindowReport, evaluate_summary, evaluate_window, safe_name
from .registry import METRICS, MetricSpec, get_metric
from .thresholds import Threshold

__all__ = [
    "METRICS", "MIN_CONDITION_SIZE", "MIN_GROUP_SIZE", "MetricSpec", "Threshold", "Window",
    "WindowReport", "evaluate_summary", "evaluate_window", "get_metric", "safe_name",
]
