"""fairmonitor's MLflow evaluator plugin: ``mlflow.models.evaluate(..., evaluators=["fairness"])``.

The evaluator is registered through the ``mlflow.model_evaluator`` entry point of the
``fairmonitor`` distribution; this package also offers :func:`validation_thresholds` (the
configured thresholds as ``mlflow.models.MetricThreshold`` objects) and :func:`parse_config`.
"""

from .config import ALLOWED_KEYS, FairnessConfig, parse_config
from .tracking import ArtifactWarning
from .truncation import TruncatedDatasetWarning
from .validation import validation_thresholds

__all__ = ["ALLOWED_KEYS", "ArtifactWarning", "FairnessConfig", "FairnessEvaluator",
           "TruncatedDatasetWarning", "parse_config", "validation_thresholds"]


def __getattr__(name: str):  # the evaluator imports mlflow (2-5 s); load it on first use
    if name == "FairnessEvaluator":
        from .evaluator import FairnessEvaluator

        return FairnessEvaluator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
