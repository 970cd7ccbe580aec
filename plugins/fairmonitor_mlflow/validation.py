"""Map the evaluator's ``thresholds`` to ``mlflow.models.MetricThreshold`` objects.

With them a CI job fails a model on unfairness::

    result = mlflow.models.evaluate(..., evaluators=["fairness"],
                                    evaluator_config={"fairness": cfg})
    mlflow.validate_evaluation_results(validation_thresholds(cfg), result)  # raises on a breach

Semantics match :class:`fairmonitor.Threshold` exactly: an upper bound fails when the value is
strictly above it (MLflow passes ``value <= threshold`` when lower is better), a lower bound when
strictly below. MLflow also fails a NaN value and a missing key; ``result=`` restricts the map
to the keys the evaluation produced (e.g. when ``intersection`` groups were too small).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from fairmonitor.exceptions import ConfigError

from .config import FairnessConfig, parse_config
from .tracking import PREFIX, safe_name

__all__ = ["validation_thresholds"]


def validation_thresholds(
    config: Mapping[str, Any] | FairnessConfig,
    *,
    level: Literal["critical", "warning"] = "critical",
    result: Any = None,
) -> dict[str, Any]:
    """``{"fairness/<metric>/<attribute>": MetricThreshold}`` for every configured threshold.

    Parameters
    ----------
    config : dict or FairnessConfig
        The fairness evaluator's config (the same dict passed in ``evaluator_config``).
    level : {'critical', 'warning'}, default='critical'
        Which bound fails validation. A threshold without that level is left out.
    result : mlflow.models.EvaluationResult, optional
        Keep only keys present in this result's metrics.

    Returns
    -------
    thresholds : dict of str to mlflow.models.MetricThreshold
        One entry per (thresholded metric, attribute): each sensitive feature, and the
        intersection only where a threshold names it (``attribute: "a:b"``); a threshold
        naming an attribute overrides the general one there.

    Examples
    --------
    >>> t = validation_thresholds({"sensitive_features": ["sex"], "thresholds": {
    ...     "demographic_parity_difference": {"warning": 0.05, "critical": 0.1}}})
    >>> [(k, v.threshold, v.greater_is_better) for k, v in t.items()]
    [('fairness/demographic_parity_difference/sex', 0.1, False)]
    """
    from mlflow.models import MetricThreshold

    if level not in ("critical", "warning"):
        raise ConfigError(f"level: must be 'critical' or 'warning'; got {level!r}.")
    cfg = config if isinstance(config, FairnessConfig) else parse_config(config)
    keep = None if result is None else set(result.metrics)
    out = {}
    singles = set(cfg.sensitive_features)
    for metric in dict.fromkeys(t.metric for t in cfg.thresholds):
        for attr in cfg.attributes:
            # the most specific threshold wins, as in the report's statuses
            matching = [t for t in cfg.thresholds
                        if t.applies_to(metric, attr, intersection=attr not in singles)]
            if not matching:
                continue
            t = max(matching, key=lambda t: t.attribute is not None)
            bound = getattr(t, level)
            key = f"{PREFIX}/{metric}/{safe_name(attr)}"
            if bound is not None and (keep is None or key in keep):
                out[key] = MetricThreshold(threshold=float(bound),
                                           greater_is_better=t.bound == "lower")
    return out
