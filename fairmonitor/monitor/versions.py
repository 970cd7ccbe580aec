"""Evaluate newly logged or newly aliased model versions on reference data.

For a model configured with an MLflow model (``models:/name@alias``, ``models:/name/3`` or a
registered name) and ``reference`` data, :func:`detect_new_versions` asks the registry which
versions exist (the aliased one, the fixed one, or all of them) and returns those not yet
evaluated according to the checkpoint. :func:`evaluate_version` loads a version with
``mlflow.pyfunc.load_model`` and evaluates it on the reference rows, with the model itself
available to the metrics (``predict``, for noise robustness) and its ``predict_proba`` scores
when the underlying model has one; a ``task: regression`` version's continuous ``predict`` is
its predictions and the label column its targets (the regression metrics, noise robustness
included). MLflow is imported inside the functions only.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validation import check_continuous
from ..report.evaluate import Window, WindowReport, evaluate_window
from ..report.registry import METRICS, metric_task
from . import multiclass as _multiclass
from .checkpoint import Checkpoint
from .merge import merge_reports

if TYPE_CHECKING:
    import pandas as pd

    from .config import ModelConfig, MonitorConfig

__all__ = ["NewVersion", "VersionResult", "detect_new_versions", "evaluate_new_versions",
           "evaluate_version", "mark_version_evaluated", "read_reference"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NewVersion:
    """A registered model version that has not been evaluated on reference data yet."""

    model: str
    name: str
    version: str
    alias: str | None
    uri: str


@dataclass(frozen=True)
class VersionResult:
    """The reference evaluation of one model version (``report`` None if it failed)."""

    model: str
    version: str
    uri: str
    report: WindowReport | None
    errors: Mapping[str, str] = field(default_factory=dict)


def _client(model_cfg: ModelConfig, client: Any) -> Any:
    if client is not None:
        return client
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=model_cfg.tracking_uri,
                        registry_uri=model_cfg.tracking_uri)


def detect_new_versions(model_cfg: ModelConfig, checkpoint: Checkpoint, *,
                        client: Any = None) -> list[NewVersion]:
    """Versions of the model's registered model not evaluated yet, oldest first.

    ``models:/name@alias`` gives the version the alias points at now (so moving the alias to
    a new version makes it new); ``models:/name/3`` gives version 3; a bare name gives every
    version. Registry errors (e.g. an unreachable server) propagate; the caller retries later.
    """
    name = model_cfg.registered_model
    if name is None:
        return []
    client = _client(model_cfg, client)
    if model_cfg.model_alias:
        found = [client.get_model_version_by_alias(name, model_cfg.model_alias)]
    elif model_cfg.model_version:
        found = [client.get_model_version(name, model_cfg.model_version)]
    else:
        found = sorted(client.search_model_versions(f"name='{name}'"),
                       key=lambda mv: int(mv.version))
    done = checkpoint.load(model_cfg.name).versions
    return [NewVersion(model_cfg.name, name, str(mv.version), model_cfg.model_alias,
                       f"models:/{name}/{mv.version}")
            for mv in found if str(mv.version) not in done]


def mark_version_evaluated(checkpoint: Checkpoint, model: str, version: str) -> None:
    """Record in the checkpoint that ``version`` of ``model`` has been evaluated."""
    state = checkpoint.load(model)
    checkpoint.save(model, dataclasses.replace(state, versions=state.versions | {version}))


def read_reference(path: str | Path) -> pd.DataFrame:
    """Read reference data from a ``.parquet`` or ``.csv`` (``.csv.gz``) file."""
    import pandas as pd

    path = Path(path)
    if path.name.endswith((".csv", ".csv.gz")):
        return pd.read_csv(path)
    return pd.read_parquet(path)


def _binary_predictions(raw: Any, threshold: float) -> np.ndarray[Any, Any]:
    out = np.asarray(raw)
    if out.ndim == 2:  # one column of labels, or class probabilities
        out = out[:, -1] if out.shape[1] > 1 else out[:, 0]
    if out.dtype.kind == "f" and not np.isin(out, (0.0, 1.0)).all():
        return (out >= threshold).astype(np.int8)  # the model returned probabilities
    return out.astype(np.int8)


def _available(window: Window, task: str = "binary") -> list[str]:
    """Registry metrics of the model's ``task`` whose inputs the window has.

    ``evaluate_window``'s default choice; a metric of another task would be NaN.
    """
    kind = metric_task(task)
    return [name for name, spec in METRICS.items()
            if spec.task == kind and all(window.get(i) is not None for i in spec.inputs)]


def _inputs(model_cfg: ModelConfig, model: Any, frame: pd.DataFrame, label: str | None,
            score: str | None) -> list[str]:
    """Return the model's input columns.

    Its signature's, else ``reference.features``, else every column that is not sensitive,
    label, score or prediction.
    """
    schema = model.metadata.get_input_schema() if model.metadata else None
    if schema is not None and schema.has_input_names():
        return list(schema.input_names())
    ref = model_cfg.reference
    if ref is not None and ref.features:
        return list(ref.features)
    named = {label, score, model_cfg.prediction, *model_cfg.sensitive_features}
    return [c for c in frame.columns if c not in named]


def _scores(model: Any, model_input: pd.DataFrame, frame: pd.DataFrame,
            score: str | None) -> Any:
    """Return the underlying model's ``predict_proba`` scores, else the reference's scores."""
    raw = model.get_raw_model() if hasattr(model, "get_raw_model") else None
    if hasattr(raw, "predict_proba"):
        return np.asarray(raw.predict_proba(model_input))[:, -1]
    if score and score in frame.columns:
        return frame[score].to_numpy()
    return None


def _multiclass_outputs(model_cfg: ModelConfig, model: Any, model_input: pd.DataFrame,
                        frame: pd.DataFrame, label: str | None
                        ) -> tuple[Callable[[Any], Any], dict[str, Any]]:
    """Return a multiclass model's ``predict`` (class labels) and its window's outputs.

    Scores: the underlying model's ``predict_proba`` in the order of the classes, else the
    reference's per-class ``scores`` columns. Labels: the configured classes; a missing or
    unknown label in reference data is an error (:func:`.multiclass.model_classes`).
    """
    classes = tuple(model_cfg.classes or ())

    def predict(X: Any) -> Any:
        return _multiclass.model_classes(model.predict(X), classes, "the model's predict")

    raw = model.get_raw_model() if hasattr(model, "get_raw_model") else None
    y_score = _multiclass.model_scores(raw, model_input, classes)
    columns = _multiclass.score_columns(model_cfg)
    if y_score is None and columns and set(columns) <= set(frame.columns):
        y_score = frame[columns].to_numpy(dtype=float)
    y_true = None
    if label is not None and label in frame.columns:
        y_true = _multiclass.model_classes(frame[label].to_numpy(dtype=object), classes,
                                           f"reference column {label!r}")
    return predict, dict(y_pred=predict(model_input), y_score=y_score, y_true=y_true,
                         classes=classes)


def _regression_outputs(model: Any, model_input: pd.DataFrame, frame: pd.DataFrame,
                        label: str | None) -> tuple[Callable[[Any], Any], dict[str, Any]]:
    """Return a regressor's ``predict`` (continuous, one column) and its window's outputs.

    The targets are the reference's label column (checked continuous), if it has one.
    """
    def predict(X: Any) -> np.ndarray[Any, Any]:
        out = np.asarray(model.predict(X))
        out = out.reshape(len(X), -1)[:, 0] if out.ndim == 2 else out  # one output column
        return check_continuous(out, "the model's predictions")

    y_true = None
    if label is not None and label in frame.columns:
        y_true = check_continuous(frame[label].to_numpy(), f"reference column {label!r}")
    return predict, dict(y_pred=predict(model_input), y_true=y_true)


def _model_options(model_cfg: ModelConfig, calls_model: list[str],
                   frozen: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Return the configured options, with the defaults of the metrics that call the model.

    Those freeze the sensitive columns and round integer columns back (defaults the config
    overrides).
    """
    options = {m: dict(model_cfg.options.get(m, {})) for m in METRICS}
    for m in calls_model:
        opts = options[m]
        opts["column_kinds"] = {**frozen, **opts.get("column_kinds", {})}
        opts.setdefault("round_integers", True)
    return options


def evaluate_version(
    model_cfg: ModelConfig,
    model_uri: str,
    reference_frame: pd.DataFrame,
    *,
    version: str = "",
    rng: Any = None,
) -> WindowReport:
    """Evaluate one model version on reference data, model in hand.

    The model's inputs are the columns named by its MLflow signature (else
    ``reference.features``, else every column that is not sensitive, label, score or
    prediction). ``y_pred`` comes from the model, ``y_score`` from the underlying model's
    ``predict_proba`` (else the reference's score column), ``y_true`` from the label column.
    Feature-space metrics see the inputs without the sensitive columns; metrics that call the
    model (noise robustness) see the full inputs with the sensitive columns frozen
    (``column_kinds``), so noise perturbs features, never group membership, and noisy integer
    columns are rounded back (``round_integers``) to satisfy the model's signature. Both are
    defaults that ``options`` in the config override.
    """
    import mlflow.pyfunc
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    ref = model_cfg.reference
    label = (ref.label if ref else None) or model_cfg.label
    score_col = (ref.score if ref else None) or model_cfg.score
    sensitive = list(model_cfg.sensitive_features)
    with _use_tracking_uri(model_cfg.tracking_uri):
        model = mlflow.pyfunc.load_model(model_uri)
    inputs = _inputs(model_cfg, model, reference_frame, label, score_col)
    model_input = reference_frame[inputs]
    features = [c for c in inputs if c not in sensitive]

    if model_cfg.task == "multiclass":  # class labels, every class one-vs-rest
        predict, outputs = _multiclass_outputs(model_cfg, model, model_input, reference_frame,
                                               label)
    elif model_cfg.task == "regression":  # continuous predictions and targets
        predict, outputs = _regression_outputs(model, model_input, reference_frame, label)
    else:
        def predict(X: Any) -> np.ndarray[Any, Any]:
            return _binary_predictions(model.predict(X), model_cfg.decision_threshold)

        outputs = dict(
            y_pred=predict(model_input),
            y_score=_scores(model, model_input, reference_frame, score_col),
            y_true=reference_frame[label].to_numpy() if label in reference_frame.columns
            else None, threshold=model_cfg.decision_threshold)
    common = dict(
        sensitive_features={c: reference_frame[c] for c in sensitive}, **outputs,
        model=model_cfg.name, version=version, missing=getattr(model_cfg, "missing", "group"))
    window = Window(**common, X=reference_frame[features] if features else None,
                    predict=predict)
    metrics = (list(ref.metrics) if ref and ref.metrics is not None
               else _available(window, model_cfg.task))
    calls_model = [m for m in metrics if METRICS[m].needs_model]
    frozen = {c: "frozen" for c in inputs if c in sensitive}
    settings = model_cfg.evaluation.replace(
        options=_model_options(model_cfg, calls_model, frozen),
        rng=np.random.default_rng(model_cfg.seed) if rng is None else rng)
    if not frozen or not calls_model:
        return evaluate_window(window, metrics=metrics, evaluation=settings)
    # the model reads sensitive columns: give the model-calling metrics the full inputs
    others = [m for m in metrics if m not in calls_model]
    with_model = evaluate_window(Window(**common, X=model_input, predict=predict),
                                 metrics=calls_model, evaluation=settings)
    if not others:
        return with_model
    return merge_reports(evaluate_window(window, metrics=others, evaluation=settings),
                         with_model)


def _stage(exc: BaseException) -> str:
    """``mlflow`` for registry/artifact-store failures, ``data`` for everything else."""
    mlflowish = type(exc).__module__.split(".")[0] in ("mlflow", "requests", "urllib3")
    return "mlflow" if mlflowish or isinstance(exc, OSError) else "data"


def evaluate_new_versions(
    config: MonitorConfig,
    checkpoint: Checkpoint,
    *,
    client: Any = None,
    on_report: Callable[[NewVersion, WindowReport], object] | None = None,
    on_result: Sequence[Callable[[VersionResult], object]] = (),
) -> list[VersionResult]:
    """Detect and evaluate every new version of every model with reference data.

    Never raises. A registry that cannot be reached (stage ``mlflow``), or a version that
    cannot be loaded (``mlflow``) or evaluated (``data``), is logged at WARNING, returned with
    its error, and retried on the next call: it is not marked evaluated. A version whose
    metrics were computed is marked evaluated (even if some metric was undefined or failed:
    that would not change) and handed to ``on_report(new_version, report)`` and to each
    ``on_result(version_result)``; a hook that raises is logged and recorded under its stage
    (``export`` for ``on_report``, the hook's ``stage`` attribute or ``export`` otherwise).
    """
    results = []
    references: dict[Path, pd.DataFrame] = {}
    for cfg in config.models.values():
        if cfg.reference is None:
            continue
        try:
            new = detect_new_versions(cfg, checkpoint, client=client)
        except Exception as exc:
            log.warning("%s: cannot list model versions of %s: %s", cfg.name, cfg.model_uri, exc)
            results.append(VersionResult(cfg.name, "", cfg.model_uri or "", None,
                                         MappingProxyType({"mlflow": f"{exc}"})))
            continue
        for nv in new:
            try:
                if cfg.reference.path not in references:
                    references[cfg.reference.path] = read_reference(cfg.reference.path)
                report = evaluate_version(cfg, nv.uri, references[cfg.reference.path],
                                          version=nv.version)
            except Exception as exc:
                log.warning("%s: evaluating %s on reference data failed: %s", cfg.name, nv.uri,
                            exc)
                results.append(VersionResult(cfg.name, nv.version, nv.uri, None,
                                             MappingProxyType({_stage(exc): f"{exc}"})))
                continue
            mark_version_evaluated(checkpoint, cfg.name, nv.version)
            result = VersionResult(cfg.name, nv.version, nv.uri, report)
            hooks: list[tuple[str, Callable[[], object]]] = []
            if on_report is not None:
                hooks.append(("export", lambda nv=nv, report=report: on_report(nv, report)))
            for hook in on_result:
                hooks.append((str(getattr(hook, "stage", "export")),
                              lambda hook=hook, result=result: hook(result)))
            errors = {}
            for stage, call in hooks:
                try:
                    call()
                except Exception as exc:  # a sink must not stop the monitor
                    log.warning("%s hook failed on %s: %s", stage, nv.uri, exc)
                    errors[stage] = f"{type(exc).__name__}: {exc}"
            if errors:
                result = dataclasses.replace(result, errors=MappingProxyType(errors))
            results.append(result)
    return results
