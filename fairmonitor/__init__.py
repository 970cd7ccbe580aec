"""fairmonitor: fairness as a monitored production signal.

The core API is pure numpy/scipy: the metrics (:mod:`fairmonitor.metrics`), the report layer
(:class:`Window`, :func:`evaluate_window`) and thresholds. ``import fairmonitor`` never imports
mlflow, prometheus_client or apscheduler; the MLflow evaluator and the monitor do, lazily.
"""

from importlib.metadata import PackageNotFoundError, version

from .exceptions import (
    ConfigError,
    FairmonitorError,
    GroupExclusionWarning,
    InvalidInputError,
    UndefinedMetricWarning,
    WindowUnavailableError,
)
from .report.evaluate import Window, WindowReport, evaluate_summary, evaluate_window
from .report.registry import METRICS, MetricSpec, get_metric
from .report.thresholds import Threshold

try:
    __version__ = version("fairmonitor")
except PackageNotFoundError:  # running from a checkout without installing
    __version__ = "0.0.0+unknown"

__all__ = [
    "ConfigError",
    "FairmonitorError",
    "GroupExclusionWarning",
    "InvalidInputError",
    "METRICS",
    "MetricSpec",
    "PredictionLogger",
    "Threshold",
    "UndefinedMetricWarning",
    "Window",
    "WindowReport",
    "WindowUnavailableError",
    "__version__",
    "evaluate_summary",
    "evaluate_window",
    "get_metric",
]


def __getattr__(name: str) -> object:
    # PredictionLogger needs SQLAlchemy: load it on first use so `import fairmonitor` stays light
    if name == "PredictionLogger":
        from .monitor.sources.logger import PredictionLogger

        return PredictionLogger
    raise AttributeError(f"module 'fairmonitor' has no attribute {name!r}")
