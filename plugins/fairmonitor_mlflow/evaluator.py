"""The ``fairness`` MLflow evaluator: a thin adapter over :func:`fairmonitor.evaluate_window`.

Registered through the ``mlflow.model_evaluator`` entry point, so after installing fairmonitor::

    mlflow.models.evaluate(model_uri, data=df, targets="label", model_type="classifier",
                           evaluators=["fairness"],
                           evaluator_config={"fairness": {"sensitive_features": ["sex"]}})

It parses the config (:mod:`.config`), builds the windows (:mod:`.window`), computes the same
report the monitor computes (:mod:`.reporting`), logs metrics and tags (:mod:`.tracking`) and
artifacts (:mod:`.artifacts`), and returns them as an ``EvaluationResult``. No metric code lives
here.
"""

from __future__ import annotations

import logging
import tempfile
import warnings
from typing import Any

from mlflow.models.evaluation import EvaluationResult, ModelEvaluator

from .artifacts import log_artifacts, write_artifacts
from .config import parse_config
from .multiclass import build_multiclass_window, multiclass_classes
from .regression import build_regression_window
from .reporting import compute_report, robustness_status
from .tracking import (
    ArtifactWarning,
    log_metrics,
    result_metrics,
    status_tags,
    step_metrics,
    sync_active_run,
)
from .truncation import TRUNCATED_TAG, TruncatedDatasetWarning, truncation_message
from .window import build_window

__all__ = ["FairnessEvaluator"]

log = logging.getLogger(__name__)

#: ``model_type`` values the evaluator accepts (None: static predictions without a type).
SUPPORTED_MODEL_TYPES = ("classifier", "regressor", None)


class FairnessEvaluator(ModelEvaluator):
    """Fairness metrics of a classifier per sensitive attribute, as an MLflow evaluator.

    The constructor takes no arguments and keeps no state (MLflow instantiates every
    registered evaluator on each ``evaluate`` call); each call's state lives in locals.
    """

    name = "fairness"

    @classmethod
    def can_evaluate(cls, *, model_type: Any, evaluator_config: Any, **kwargs: Any) -> bool:
        """Accept a classifier or a regressor, when ``sensitive_features`` is configured.

        So the evaluator never runs uninvited inside an ``evaluate`` call that selects every
        registered evaluator (``evaluators=None``), and another model type (a ranker, a
        question-answering model) is declined with a logged reason instead of a misleading
        error. A regressor gets the regression metrics (``docs/regression.md``).
        """
        if not (isinstance(evaluator_config, dict)
                and evaluator_config.get("sensitive_features")):
            return False
        if model_type not in SUPPORTED_MODEL_TYPES:
            # MLflow then says only that no evaluator could run: say why, once, with the fix
            log.warning(
                "the fairness evaluator declines model_type=%r: it evaluates "
                "model_type='classifier' (a positive class: selection rates, TPR/FPR, scores "
                "in [0, 1]) and model_type='regressor' (continuous predictions: error parity, "
                "prediction distributions). For a ranker, evaluate a classifier view: threshold "
                "the output into a 0/1 `predictions` column (and give scores in [0, 1] as "
                "`score_column`) with model_type='classifier'.", model_type)
            return False
        return True

    def evaluate(self, *, model_type: Any, dataset: Any, run_id: str, evaluator_config: Any,
                 model: Any = None, extra_metrics: Any = None, custom_artifacts: Any = None,
                 predictions: str | None = None, **kwargs: Any) -> EvaluationResult:
        """Evaluate fairness on ``dataset``, log metrics, tags and artifacts to ``run_id``.

        The metrics are computed first and always returned: a failing table, plot, report or
        artifact upload is left out, warned about once (:class:`ArtifactWarning`) and named in
        the run tag ``fairness.failures``.
        """
        config = parse_config(evaluator_config)
        if model_type == "regressor":  # continuous predictions and targets (issue 29)
            built = build_regression_window(dataset, model, config, predictions=predictions)
        elif (classes := multiclass_classes(dataset, model, config)) is not None:
            built = build_multiclass_window(dataset, model, config, classes,
                                            predictions=predictions)
        else:  # binary (or a multiclass model evaluated for its pos_label)
            built = build_window(dataset, model, config, predictions=predictions)
        truncated = truncation_message(dataset, len(dataset.features_data), run_id)
        if truncated:
            log.warning(truncated)
            # stacklevel 1: the warning is the evaluator's (a caller-level attribution would
            # land in mlflow's module, which warning filters for mlflow's noise may hide)
            warnings.warn(truncated, TruncatedDatasetWarning, stacklevel=1)
        report = compute_report(built, config)
        scalars = result_metrics(report, built.window.missing_counts)
        model_id = kwargs.get("model_id")
        failures: list[str] = []
        artifacts: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="fairmonitor-") as tmp:
            written = write_artifacts(report, built, config, scalars, tmp, failures)
            try:
                artifacts = log_artifacts(run_id, tmp, written)
            except Exception as exc:  # the artifact store is down: keep the metrics
                failures.append(f"artifact upload: {type(exc).__name__}: {exc}")
        if failures:
            text = ("fairness artifacts left out (the metrics are complete): "
                    + "; ".join(failures) + ". See the run tag fairness.failures; fix the "
                    "cause (or turn the failing part off) and re-run the evaluation.")
            log.warning(text)
            warnings.warn(text, ArtifactWarning, stacklevel=2)
        # with a model_id, mlflow.models.evaluate logs the returned metrics itself (to the run
        # and the LoggedModel); logging them here too would duplicate every history entry
        tags = status_tags(report, robustness_status(report, built), failures)
        if truncated:
            tags[TRUNCATED_TAG] = f"true: {truncated}"[:5000]
        log_metrics(run_id, {} if model_id else scalars, step_metrics(report), tags,
                    model_id=model_id, dataset=dataset)
        if model_id:  # MLflow logs the returned metrics itself: once per metric, the dataset
            sync_active_run(run_id)  # was re-sent with each (the run object predates it)
        return EvaluationResult(metrics=scalars, artifacts=artifacts, run_id=run_id)
