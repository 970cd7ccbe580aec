"""Turn MLflow's evaluation inputs (dataset, model, config) into a :class:`fairmonitor.Window`.

The rules, in the order they apply:

* **Sensitive columns** come from the evaluation data (``dataset.features_data``, or the target
  or predictions column if named so). They are removed from the model's input unless
  ``model_uses_sensitive=True``; so is ``score_column``.
* **Hard predictions** are the model's ``predict`` output (through the underlying estimator when
  MLflow can unwrap it, as MLflow's own classifier evaluator does, so pyfunc schema enforcement
  does not reject noisy inputs), or the static ``predictions`` column. Labels are mapped to 0/1
  with ``pos_label``; an output that holds scores in [0, 1] is thresholded at ``threshold``.
* **Scores** come from ``score_column``, else from ``predict_proba`` (the unwrapped estimator's,
  or a ``predict_proba`` method of a custom ``PythonModel``), else from a predict output that
  already holds scores; otherwise there are none and score metrics are not offered.
* **The model's inputs** are the columns it declares, as MLflow's pyfunc reads them (its
  signature, else scikit-learn's ``feature_names_in_``): extra columns of the data are not
  passed, a declared sensitive column needs ``model_uses_sensitive=True``, and an absent one is
  an error naming it. A model that declares nothing gets every non-sensitive column.
* **Features** (``Window.X`` of the feature-space metrics) are ``features`` or the model's
  non-sensitive input columns.
* **The model** is given only when robustness is on, in a second window over the same rows
  whose ``X`` is the model's input; sensitive columns of a model that uses them stay in that
  input, frozen (never perturbed). Two windows, because the robustness noise must go through
  every model input while the feature-space metrics must not see the sensitive columns.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fairmonitor import Window
from fairmonitor._validation import check_scores
from fairmonitor.exceptions import ConfigError, InvalidInputError
from fairmonitor.report.registry import METRICS
from fairmonitor.utils.groups import column_values

from .config import FairnessConfig

__all__ = ["BuiltWindow", "build_window", "model_metrics"]

log = logging.getLogger(__name__)

_BINARY_VALUES = {0, 1}


@dataclass(frozen=True)
class BuiltWindow:
    """The windows of one evaluation, where their inputs came from, and what was left out.

    Attributes
    ----------
    window : Window
        Every metric that does not call the model; ``X`` holds the ``features``.
    robust_window : Window or None
        The same rows for the metrics that call the model: ``X`` holds the model's input
        columns and ``predict`` the model. None when robustness is off or there is no model.
    robust_options : dict
        Keyword options for those metrics (sensitive model inputs are frozen, never perturbed).
    sources : dict of str to str
        Where each input came from, for the report.
    skipped : dict of str to str
        Metrics left out on purpose, with the reason.
    task : str
        The report's task (the registry's ``task``): ``"binary"`` or ``"regression"``.
    """

    window: Window
    robust_window: Window | None
    robust_options: dict[str, Any]
    sources: dict[str, str]
    skipped: dict[str, str] = field(default_factory=dict)
    #: the model's task: ``"binary"``, or ``"regression"`` (:mod:`.regression`)
    task: str = "binary"


def _frame(dataset: Any) -> Any:
    import pandas as pd

    data = dataset.features_data
    if not isinstance(data, pd.DataFrame):
        data = pd.DataFrame(np.asarray(data), columns=list(dataset.feature_names))
    # a RangeIndex: predictions, scores and the clean-value fill of the robustness model align
    # with it row by row
    return data.reset_index(drop=True)


class _Columns:
    """Column lookup over the features, the target and the predictions of the dataset."""

    def __init__(self, dataset: Any, frame: Any) -> None:
        self.frame = frame
        self.extra = {}
        if getattr(dataset, "targets_name", None) is not None:
            self.extra[str(dataset.targets_name)] = dataset.labels_data
        if getattr(dataset, "predictions_name", None) is not None:
            self.extra[str(dataset.predictions_name)] = dataset.predictions_data

    @property
    def available(self) -> list[str]:
        return [str(c) for c in self.frame.columns] + list(self.extra)

    def get(self, name: str, key: str) -> NDArray[Any]:
        if name in self.frame.columns:
            if key == "sensitive_features":  # text as a few shared objects: fast to encode
                return column_values(self.frame[name])
            return np.asarray(self.frame[name].to_numpy())
        if name in self.extra:
            return np.asarray(self.extra[name])
        raise ConfigError(
            f"{key}: column {name!r} is not in the evaluation data; available columns: "
            f"{self.available}. (Columns left out by `feature_names=` never reach evaluators: "
            "keep them in the data and drop `feature_names`.)"
        )


def _underlying(model: Any) -> tuple[Any, Any]:
    """Return the raw estimator MLflow wraps (sklearn, xgboost...) and a custom PythonModel."""
    raw = None
    get_raw = getattr(model, "get_raw_model", None)
    if get_raw is not None:
        try:
            raw = get_raw()
        except Exception:  # NotImplementedError for flavours without a raw model
            raw = None
    python_model = None
    unwrap = getattr(model, "unwrap_python_model", None)
    if unwrap is not None:
        try:
            python_model = unwrap()
        except Exception:  # MlflowException: not a PythonModel flavour
            python_model = None
    elif hasattr(model, "python_model"):  # MLflow's wrapper around a plain callable
        python_model = model.python_model
    return raw, python_model


def _proba_function(*candidates: Any) -> tuple[Callable[[Any], Any] | None, Any]:
    """Return the first ``predict_proba`` as a one-argument function, and its ``classes_``."""
    for obj in candidates:
        fn = getattr(obj, "predict_proba", None)
        if fn is None:
            continue
        if "context" in inspect.signature(fn).parameters:  # PythonModel style (context, input)
            return (lambda X, fn=fn: fn(None, X)), getattr(obj, "classes_", None)
        return fn, getattr(obj, "classes_", None)
    return None, None


def _one_column(output: Any, predictions: str | None, what: str) -> NDArray[Any]:
    if hasattr(output, "columns"):  # a DataFrame
        cols = list(output.columns)
        if predictions is not None and predictions in cols:
            output = output[predictions]
        elif len(cols) == 1:
            output = output[cols[0]]
        else:
            raise InvalidInputError(
                f"the model's {what} output has columns {cols}; name the prediction column with "
                "`predictions=` in mlflow.models.evaluate."
            )
    arr = np.asarray(output)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    return arr


def _is_scores(values: NDArray[Any]) -> bool:
    """Tell whether ``values`` are probabilities rather than 0/1 or class labels."""
    if values.dtype == bool or not np.issubdtype(values.dtype, np.number):
        return False
    v = values.astype(float)
    return bool(np.isfinite(v).all() and (v >= 0).all() and (v <= 1).all()
                and ((v != 0) & (v != 1)).any())


def _to_binary(values: NDArray[Any], config: FairnessConfig, name: str) -> NDArray[np.int8]:
    """Map class labels to 1 (``pos_label``) and 0 (every other class), or raise."""
    pos = config.pos_label
    classes = np.unique(values)
    listed = [c.item() if hasattr(c, "item") else c for c in classes][:8]
    present = bool(np.any(classes == pos))
    if len(classes) > 2 and not config.pos_label_given:
        raise ConfigError(
            f"pos_label: found {len(classes)} classes in {name} {listed}; fairness metrics "
            "compare one positive class with the rest: set pos_label to the class of interest."
        )
    if not present and not set(listed) <= _BINARY_VALUES:
        raise ConfigError(
            f"pos_label: {pos!r} is not among the values of {name} {listed}; set pos_label to "
            "the positive class."
        )
    return (values == pos).astype(np.int8)


def _scores_from_proba(proba: Any, classes: Any, config: FairnessConfig) -> NDArray[np.float64]:
    arr = np.asarray(proba, dtype=float)
    if arr.ndim == 1:
        return arr
    if classes is not None:
        matches = np.flatnonzero(np.asarray(classes) == config.pos_label)
        if matches.size == 0:
            raise ConfigError(
                f"pos_label: {config.pos_label!r} is not one of the model's classes "
                f"{list(np.asarray(classes).tolist())}; set pos_label to the positive class."
            )
        return arr[:, int(matches[0])]
    if arr.shape[1] != 2:
        raise InvalidInputError(
            f"predict_proba returned {arr.shape[1]} columns and the model has no `classes_`; "
            "give the positive-class scores with `score_column`."
        )
    return arr[:, 1]


class _LabelModel:
    """``model(X) -> 0/1`` over a frame of the model's input columns (what robustness calls)."""

    def __init__(self, predict: Callable[[Any], Any], model_columns: list[str],
                 config: FairnessConfig, predictions: str | None) -> None:
        self.predict_fn, self.model_columns = predict, model_columns
        self.config, self.predictions = config, predictions

    def __call__(self, X: Any) -> NDArray[np.int8]:
        import pandas as pd

        if not isinstance(X, pd.DataFrame):
            X = pd.DataFrame(np.asarray(X), columns=self.model_columns)
        out = _one_column(self.predict_fn(X[self.model_columns]), self.predictions, "predict")
        if _is_scores(out):
            return (out.astype(float) >= self.config.threshold).astype(np.int8)
        return _to_binary(out, self.config, "the model's predictions")


def _declared_inputs(model: Any, raw: Any) -> tuple[list[str], str] | None:
    """Return the input columns the model declares.

    As MLflow's pyfunc schema enforcement reads them: its signature's column names, else the
    estimator's ``feature_names_in_`` (scikit-learn).
    """
    metadata = getattr(model, "metadata", None)
    try:
        schema = metadata.get_input_schema() if metadata is not None else None
    except Exception:  # a flavour without a schema accessor
        schema = None
    if schema is not None and getattr(schema, "has_input_names", lambda: False)():
        return [str(c) for c in schema.input_names()], "signature"
    names = getattr(raw, "feature_names_in_", None)
    if names is not None:
        return [str(c) for c in names], "feature_names_in_"
    return None


def _select_inputs(declared: tuple[list[str], str], frame: Any,
                   config: FairnessConfig) -> list[str]:
    """Return the model's input columns out of the evaluation data, or an error saying the fix."""
    names, where = declared
    uses = [c for c in names if c in config.sensitive_features]
    if uses and not config.model_uses_sensitive:
        raise ConfigError(
            f"the model's {where} takes the sensitive column(s) {uses} as input: set "
            "`model_uses_sensitive=True` (they then stay in the model's input, and robustness "
            "holds them fixed), or evaluate a model trained without them.")
    absent = [c for c in names if c not in frame.columns]
    if absent:
        raise ConfigError(
            f"the model's {where} needs column(s) {absent}, which are not in the evaluation "
            f"data (columns: {[str(c) for c in frame.columns]}); add them to the data. "
            "(`features` only chooses the columns of the feature-space metrics.)")
    return names


def _about_columns(exc: Exception) -> bool:
    text = str(exc).lower()
    return any(w in text for w in ("feature names", "columns are missing", "column",
                                   "features"))


def model_metrics() -> list[str]:
    """Registry names of a classifier's metrics that call the model (the robustness ones).

    A regressor's (``task="regression"``) run on its own window (:mod:`.regression`).
    """
    return [s.name for s in METRICS.values() if "predict" in s.inputs
            and s.task != "regression"]


def _check_requested(config: FairnessConfig, windows: tuple[Window, Window | None],
                     no_model_reason: str) -> None:
    fixes = {
        "y_true": "pass `targets=` to mlflow.models.evaluate",
        "y_pred": "give a model or a `predictions=` column",
        "y_score": ("set `score_column` to a column of positive-class scores, or use a model "
                    "with `predict_proba`"),
        "X": "set `features` to the feature columns",
        "predict": no_model_reason,
    }
    what = {"y_score": "scores", "y_true": "labels", "predict": "a model to call",
            "X": "feature columns", "y_pred": "predictions"}
    for name in config.metrics or ():
        spec = METRICS[name]
        window = windows[1] if "predict" in spec.inputs and windows[1] is not None else windows[0]
        missing = [i for i in spec.inputs if window.get(i) is None]
        if missing:
            raise ConfigError(
                f"metrics: {name!r} needs {what[missing[0]]}, which this evaluation does not "
                f"have; {fixes[missing[0]]}, or drop {name!r} from `metrics`."
            )


def _robustness_reason(model: Any, config: FairnessConfig) -> str:
    """Why robustness is not computed, or '' when it is."""
    if model is None:
        reason = "no model to call (static predictions): robustness needs the model"
        if config.robustness_enabled:
            log.warning("robustness is configured but skipped: %s", reason)
        return reason
    if config.robustness_enabled is False:
        return "robustness disabled in the config (robustness=False)"
    return ""


def _score_column(cols: _Columns, config: FairnessConfig,
                  sources: dict[str, str]) -> NDArray[np.float64] | None:
    """Return the configured ``score_column``, checked, or None without one."""
    if config.score_column is None:
        return None
    sources["y_score"] = f"column {config.score_column!r}"
    return check_scores(cols.get(config.score_column, "score_column"),
                        f"score_column {config.score_column!r}")


def _call_model(model: Any, frame: Any, model_columns: list[str], config: FairnessConfig,
                predictions: str | None, y_score: Any, sources: dict[str, str]
                ) -> tuple[list[str], NDArray[Any], Any, _LabelModel]:
    """Return the model's input columns, its output, the scores and the model robustness calls.

    ``y_score`` (the ``score_column``'s scores, or None) is kept if given, else taken from the
    model's ``predict_proba`` (or ``decision_function``, when configured).
    """
    raw, python_model = _underlying(model)
    declared = _declared_inputs(model, raw)
    if declared is not None:
        model_columns = _select_inputs(declared, frame, config)
        sources["model inputs"] = "the model's " + declared[1]
    predict_fn = raw.predict if raw is not None and hasattr(raw, "predict") else model.predict
    label_model = _LabelModel(predict_fn, model_columns, config, predictions)
    output = _predict_output(predict_fn, frame, model_columns, predictions)
    sources["y_pred"] = "model.predict"
    if y_score is None:
        y_score = _model_scores(model, raw, python_model, frame[model_columns], config, sources)
    return model_columns, output, y_score, label_model


def _predict_output(predict_fn: Callable[[Any], Any], frame: Any, model_columns: list[str],
                    predictions: str | None) -> NDArray[Any]:
    """Return the model's ``predict`` output column; a column mismatch says the fix."""
    try:
        return _one_column(predict_fn(frame[model_columns]), predictions, "predict")
    except (KeyError, ValueError) as exc:
        if not _about_columns(exc):
            raise
        raise ConfigError(
            f"the model rejected its input columns {model_columns}: {exc}. The evaluator "
            "gives the model every non-sensitive column of the data (the model declares "
            "none: no signature, no feature_names_in_); drop the columns it was not trained "
            "on from the data, set `model_uses_sensitive=True` if it takes the sensitive "
            "columns, and use `features` to choose the feature-space metrics' columns."
        ) from exc


def _model_scores(model: Any, raw: Any, python_model: Any, inputs: Any, config: FairnessConfig,
                  sources: dict[str, str]) -> NDArray[np.float64] | None:
    """Return the model's positive-class scores, or None.

    From ``predict_proba``, else from ``decision_function`` when the config asks for it.
    """
    # MLflow's sklearn wrapper (``_model_impl``) also exposes the estimator's predict_proba
    proba_fn, classes = _proba_function(raw, python_model, getattr(model, "_model_impl", None))
    if proba_fn is not None:
        sources["y_score"] = "model.predict_proba"
        return check_scores(_scores_from_proba(proba_fn(inputs), classes, config),
                            "predict_proba output")
    decision = getattr(raw, "decision_function", None)
    if decision is None:
        return None
    if not config.decision_function:
        sources["y_score"] = ("none: the model has decision_function but no "
                              "predict_proba; set decision_function=True to use it")
        return None
    margin = np.asarray(decision(inputs), dtype=float)
    if margin.ndim != 1:
        raise ConfigError(
            f"decision_function: the model returns {margin.shape[1]} columns "
            "(multiclass); give positive-class scores with `score_column`.")
    # the logistic map keeps the order of the margins; it does not calibrate them
    from scipy.special import expit  # 1 / (1 + exp(-x)) without overflow

    sources["y_score"] = "sigmoid(model.decision_function)"
    return check_scores(expit(margin), "decision_function")


def _static_output(dataset: Any, y_score: Any, sources: dict[str, str]) -> NDArray[Any] | None:
    """Return the ``predictions`` column without a model (None: scores only), or raise."""
    if dataset.predictions_data is not None:
        sources["y_pred"] = f"column {dataset.predictions_name!r}"
        return _one_column(dataset.predictions_data, None, "predictions")
    if y_score is not None:
        return None
    raise ConfigError(
        "the evaluation has no model and no predictions: pass a model, or "
        "`predictions=` naming a column of model outputs, or set `score_column`."
    )


def _hard_predictions(output: NDArray[Any] | None, y_score: Any, config: FairnessConfig,
                      sources: dict[str, str]) -> tuple[NDArray[np.int8] | None, Any]:
    """Return the 0/1 predictions and the scores.

    An output holding scores is thresholded, and is the scores if there are none yet.
    """
    if output is None:
        return None, y_score
    if not _is_scores(output):
        return _to_binary(output, config, "the predictions"), y_score
    if y_score is None:
        y_score, sources["y_score"] = output.astype(float), sources["y_pred"]
    sources["y_pred"] += f" >= threshold {config.threshold}"
    return (output.astype(float) >= config.threshold).astype(np.int8), y_score


def _built(frame: Any, features: list[str], model_columns: list[str], label_model: Any,
           common: dict[str, Any], reason: str, config: FairnessConfig,
           sources: dict[str, str]) -> BuiltWindow:
    """Return the windows (the robustness one unless ``reason`` says why not), checked."""
    window = Window(X=frame[features] if features else None, **common)
    robust_window, options = None, {}
    if not reason:
        robust_window = Window(X=frame[model_columns], predict=label_model, **common)
        if config.model_uses_sensitive:  # model inputs, but never perturbed (robustness spec)
            options["column_kinds"] = {c: "frozen" for c in config.sensitive_features}
    skipped = {name: reason for name in model_metrics()} if reason else {}
    _check_requested(config, (window, robust_window), reason or "give a model")
    sources["X"] = f"columns {features}" if features else "none"
    sources["robustness"] = "on" if not reason else f"skipped: {reason}"
    return BuiltWindow(window=window, robust_window=robust_window, robust_options=options,
                       sources=sources, skipped=skipped)


def build_window(dataset: Any, model: Any, config: FairnessConfig, *,
                 predictions: str | None = None) -> BuiltWindow:
    """Build the windows of one ``mlflow.models.evaluate`` call.

    Parameters
    ----------
    dataset : mlflow.data.evaluation_dataset.EvaluationDataset
        The evaluation data MLflow passes to evaluators.
    model : PyFuncModel, MLflow's wrapper of a callable, or None
        None in static-predictions mode (``predictions=`` names a column of the data).
    config : FairnessConfig
        The validated evaluator config.
    predictions : str, optional
        The output column of a model returning a multi-column DataFrame.

    Returns
    -------
    built : BuiltWindow
        The windows, where each input came from, and the metrics left out on purpose.

    Raises
    ------
    ConfigError
        A configured column is missing (the message lists the available columns), a requested
        metric needs an input this evaluation lacks, or ``pos_label`` does not fit the labels.
    """
    frame = _frame(dataset)
    cols = _Columns(dataset, frame)
    sensitive = {c: cols.get(c, "sensitive_features") for c in config.sensitive_features}
    for name in config.features or ():
        cols.get(name, "features")
    sources: dict[str, str] = {}
    y_score = _score_column(cols, config, sources)
    weights = None
    if config.sample_weight is not None:
        weights = cols.get(config.sample_weight, "sample_weight")
        sources["sample_weight"] = f"column {config.sample_weight!r}"
    not_inputs = {config.score_column, config.sample_weight}
    model_columns = [c for c in frame.columns if c not in not_inputs
                     and (config.model_uses_sensitive or c not in config.sensitive_features)]
    label_model = None
    if model is not None:
        model_columns, output, y_score, label_model = _call_model(
            model, frame, model_columns, config, predictions, y_score, sources)
    else:
        output = _static_output(dataset, y_score, sources)
    features = list(config.features or [c for c in model_columns if c not in sensitive])
    y_pred, y_score = _hard_predictions(output, y_score, config, sources)
    y_true = None
    if dataset.labels_data is not None:
        y_true = _to_binary(np.asarray(dataset.labels_data), config, "the targets")
        sources["y_true"] = f"column {dataset.targets_name!r}"
    common = {"sensitive_features": sensitive, "y_pred": y_pred, "y_score": y_score,
              "y_true": y_true, "threshold": config.threshold, "missing": config.missing,
              "sample_weight": weights}
    return _built(frame, features, model_columns, label_model, common,
                  _robustness_reason(model, config), config, sources)
