"""Multiclass classifiers: every class one-vs-rest, without ``pos_label`` (issue 29).

A classifier with more than two classes, evaluated without ``pos_label``, gets a multiclass
window (:class:`fairmonitor.Window` with ``classes``): the class labels of its ``predict`` (or
the static ``predictions`` column) and of the targets, and its ``predict_proba`` columns as
per-class scores. :func:`fairmonitor.evaluate_window` then evaluates each class against the
rest and reports ``fairness/<metric>__class_<c>/<attribute>`` per class beside
``fairness/<metric>/<attribute>``, the worst class. ``pos_label`` keeps the one-class
evaluation of :mod:`.window`.

The classes are the model's ``classes_`` (the order of its ``predict_proba`` columns), else
the sorted values of the targets and the static predictions; a model without ``classes_``
gives no scores (their columns could not be named), so the score metrics are skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fairmonitor._validation import check_scores
from fairmonitor.exceptions import ConfigError

from .config import FairnessConfig
from .window import (
    BuiltWindow,
    _built,
    _Columns,
    _declared_inputs,
    _frame,
    _is_scores,
    _one_column,
    _predict_output,
    _proba_function,
    _robustness_reason,
    _select_inputs,
    _static_output,
    _underlying,
)

__all__ = ["build_multiclass_window", "multiclass_classes"]


def _plain(values: Any) -> tuple[Any, ...]:
    return tuple(v.item() if isinstance(v, np.generic) else v for v in values)


def _model_classes(model: Any) -> tuple[Any, ...] | None:
    """Return the ``classes_`` of the estimator MLflow wraps (or its PythonModel), if any."""
    raw, python_model = _underlying(model)
    for obj in (raw, python_model, getattr(model, "_model_impl", None)):
        classes = getattr(obj, "classes_", None)
        if classes is not None:
            return _plain(np.asarray(classes))
    return None


def multiclass_classes(dataset: Any, model: Any, config: FairnessConfig
                       ) -> tuple[Any, ...] | None:
    """Return the classes of a multiclass evaluation, or None for a binary one.

    Multiclass: no ``pos_label`` in the config and more than two classes among the model's
    ``classes_``, else among the targets and the static predictions (unless those are scores
    in [0, 1], which the binary evaluation thresholds).
    """
    if config.pos_label_given:
        return None
    classes = _model_classes(model) if model is not None else None
    if classes is None:
        seen: set[Any] = set()
        for data in (dataset.labels_data, dataset.predictions_data):
            values = None if data is None else np.asarray(data).reshape(-1)
            if values is not None and not _is_scores(values):  # scores are thresholded
                seen |= set(_plain(np.unique(values)))
        classes = tuple(sorted(seen, key=str)) if len(seen) > 2 else None
    return classes if classes is not None and len(classes) > 2 else None


class _ClassModel:
    """``model(X) -> class labels`` over a frame of the model's input columns (robustness)."""

    def __init__(self, predict: Callable[[Any], Any], model_columns: list[str],
                 predictions: str | None) -> None:
        self.predict_fn, self.model_columns, self.predictions = predict, model_columns, predictions

    def __call__(self, X: Any) -> NDArray[Any]:
        import pandas as pd

        if not isinstance(X, pd.DataFrame):
            X = pd.DataFrame(np.asarray(X), columns=self.model_columns)
        return _one_column(self.predict_fn(X[self.model_columns]), self.predictions, "predict")


def _class_scores(model: Any, inputs: Any, classes: tuple[Any, ...],
                  sources: dict[str, str]) -> NDArray[np.float64] | None:
    """Return ``predict_proba``'s columns in the order of ``classes``, or None."""
    raw, python_model = _underlying(model)
    proba_fn, proba_classes = _proba_function(raw, python_model,
                                              getattr(model, "_model_impl", None))
    if proba_fn is None or proba_classes is None:
        sources["y_score"] = ("none: multiclass scores need predict_proba and the model's "
                              "classes_ (the order of its columns)")
        return None
    proba = np.asarray(proba_fn(inputs), dtype=float)
    order = [_plain(np.asarray(proba_classes)).index(c) for c in classes]
    sources["y_score"] = "model.predict_proba (one column per class)"
    return check_scores(proba[:, order].reshape(-1), "predict_proba output").reshape(
        len(proba), len(classes))


def build_multiclass_window(dataset: Any, model: Any, config: FairnessConfig,
                            classes: tuple[Any, ...], *,
                            predictions: str | None = None) -> BuiltWindow:
    """Build the multiclass windows of one ``mlflow.models.evaluate`` call.

    As :func:`.window.build_window` (the same columns, model inputs, features and robustness
    window), with class labels as predictions and targets and one score column per class.

    Raises
    ------
    ConfigError
        ``score_column`` is set (it names one column; multiclass scores are one per class), or
        as :func:`.window.build_window`.
    """
    if config.score_column is not None:
        raise ConfigError(
            f"score_column: {config.score_column!r} is one column, and this multiclass "
            f"evaluation (classes {list(classes)[:8]}) scores every class from the model's "
            "predict_proba; drop score_column, or set pos_label to evaluate that one class.")
    frame = _frame(dataset)
    cols = _Columns(dataset, frame)
    sensitive = {c: cols.get(c, "sensitive_features") for c in config.sensitive_features}
    for name in config.features or ():
        cols.get(name, "features")
    sources: dict[str, str] = {"task": f"multiclass, classes {list(classes)}"}
    weights = None
    if config.sample_weight is not None:
        weights = cols.get(config.sample_weight, "sample_weight")
        sources["sample_weight"] = f"column {config.sample_weight!r}"
    model_columns = [c for c in frame.columns if c != config.sample_weight
                     and (config.model_uses_sensitive or c not in config.sensitive_features)]
    y_score, label_model = None, None
    if model is not None:
        raw, _ = _underlying(model)
        declared = _declared_inputs(model, raw)
        if declared is not None:
            model_columns = _select_inputs(declared, frame, config)
            sources["model inputs"] = "the model's " + declared[1]
        predict_fn = raw.predict if raw is not None and hasattr(raw, "predict") else model.predict
        output = _predict_output(predict_fn, frame, model_columns, predictions)
        sources["y_pred"] = "model.predict"
        y_score = _class_scores(model, frame[model_columns], classes, sources)
        label_model = _ClassModel(predict_fn, model_columns, predictions)
    else:
        output = _static_output(dataset, None, sources)
    y_true = None
    if dataset.labels_data is not None:
        y_true = np.asarray(dataset.labels_data)
        sources["y_true"] = f"column {dataset.targets_name!r}"
    features = list(config.features or [c for c in model_columns if c not in sensitive])
    common = {"sensitive_features": sensitive, "y_pred": output, "y_score": y_score,
              "y_true": y_true, "missing": config.missing, "sample_weight": weights,
              "classes": classes}
    return _built(frame, features, model_columns, label_model, common,
                  _robustness_reason(model, config), config, sources)
