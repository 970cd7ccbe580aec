"""Reading each section of the monitor YAML into the dataclasses of :mod:`.config`.

Every reader records problems on the shared :class:`~._parse.Reader` and returns a best-effort
value, so that one pass reports every error of the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ...report.evidence import CALIBRATIONS, Budget
from ...report.reading import (
    THRESHOLD_KEYS,
    check_task_metrics,
    read_classes,
    read_confidence_level,
    read_group_minimums,
    read_missing,
    read_options,
    read_task,
    read_thresholds,
)
from ...report.registry import METRICS
from ...report.thresholds import Threshold
from ...utils.groups import INTERSECTION_SEPARATOR
from .durations import format_duration
from .model import (
    DEFAULT_CHECKPOINT,
    DEFAULT_LISTEN_ADDRESS,
    DEFAULT_MLFLOW_SPOOL,
    DEFAULT_TRACKING_URI,
    AlertWindows,
    CheckpointConfig,
    ModelConfig,
    MonitorConfig,
    ReferenceConfig,
    RollupConfig,
    SourceConfig,
)
from .reader import Reader, fmt_allowed

__all__ = ["read_monitor"]

_MODEL_URI = re.compile(r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/@]+)|/(?P<version>\d+))?$")
_TOP_KEYS = ("listen_address", "checkpoint", "mlflow_spool", "catch_up", "timezone", "tick",
             "mlflow_timeout", "models")
_MODEL_KEYS = (
    "model", "tracking_uri", "experiment", "source", "sensitive_features", "label", "score",
    "prediction", "features", "decision_threshold", "window", "every", "mode", "labels_after",
    "relabel_within", "min_label_coverage",
    "start", "metrics", "options", "min_group_size", "min_condition_size",
    "confidence_level", "intersection", "seed",
    "thresholds",
    "reference", "team", "owner", "missing", "rollups", "summaries", "alerting",
    "alert_windows", "task", "classes", "scores",
)
_SOURCE_KEYS = ("kind", "url", "table", "path", "pattern", "timestamp_column", "model_column",
                "version_column", "features_column", "timeout", "master", "remote",
                "date_column")
#: read by the shared reader (report/reading.py), as the evaluator reads them
_THRESHOLD_KEYS = THRESHOLD_KEYS
_REFERENCE_KEYS = ("path", "metrics", "label", "score", "prediction", "features")
_ALERTING_KEYS = ("budget",)
_BUDGET_KEYS = ("false_pages", "per", "null_fraction", "alternative_fraction", "calibration")



def read_monitor(r: Reader, data: Any, base: Path) -> MonitorConfig | None:
    """Read the whole monitor config; None if its top level is not a mapping."""
    if not isinstance(data, Mapping):
        r.error("", f"the top level must be a mapping with keys {fmt_allowed(_TOP_KEYS)}; "
                    f"got {data!r}")
        return None
    r.keys("", data, _TOP_KEYS)
    address = r.get(data, "listen_address", str, DEFAULT_LISTEN_ADDRESS)
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        r.error("listen_address", f"must be 'host:port' with a port in 0..65535; got {address!r}")
    timezone = r.get(data, "timezone", str, "UTC")
    if timezone != "UTC":
        r.error("timezone", f"must be one of ['UTC']; got {timezone!r}")
    catch_up = r.positive_int(data, "catch_up", 100)
    checkpoint = _checkpoint(r, data.get("checkpoint", DEFAULT_CHECKPOINT), base)
    spool = _mlflow_spool(r, data, checkpoint, base)
    raw_models = data.get("models")
    models: dict[str, ModelConfig] = {}
    if not isinstance(raw_models, Mapping) or not raw_models:
        r.error("models", "required; give a mapping of model name to its settings, e.g. "
                          "models: {credit: {...}}")
    else:
        for name, raw in raw_models.items():
            model = _model(r, f"models.{name}", str(name), raw, base)
            if model is not None:
                models[str(name)] = model
    tick = r.duration(data, "tick", None)
    if tick is None:
        tick = min((m.every for m in models.values()), default=timedelta(minutes=1))
    mlflow_timeout = r.duration(data, "mlflow_timeout", timedelta(seconds=10))
    return MonitorConfig(models=MappingProxyType(models), checkpoint=checkpoint,
                         mlflow_spool=spool, listen_address=address, catch_up=catch_up,
                         timezone=timezone, tick=tick, mlflow_timeout=mlflow_timeout)


def sqlite_beside(url: str, base: Path) -> str:
    """Return a relative SQLite URL made absolute against ``base`` (the config file's directory).

    One rule for every relative path in the config (files, checkpoint, spool, SQLite URLs of
    sources, checkpoints and MLflow): it resolves against the config file's directory, never
    the working directory.

    >>> sqlite_beside("sqlite:///predictions.db", Path("/etc/fairmonitor"))
    'sqlite:////etc/fairmonitor/predictions.db'
    >>> sqlite_beside("sqlite:////var/lib/p.db", Path("/etc"))
    'sqlite:////var/lib/p.db'
    >>> sqlite_beside("sqlite://", Path("/etc"))  # in memory
    'sqlite://'
    """
    head, sep, rest = url.partition(":///")
    if not sep or not head.startswith("sqlite") or not rest or rest.startswith(("/", ":memory:",
                                                                                  "file:")):
        return url
    return f"{head}:///{base / rest}"


def _mlflow_spool(r: Reader, data: Mapping[str, Any], checkpoint: CheckpointConfig,
                  base: Path) -> Path | None:
    """Return the spool file: as given, else beside a checkpoint file; None keeps it in memory."""
    if "mlflow_spool" not in data:
        # a SQL checkpoint says the monitor may have no writable disk: no default file then
        return (checkpoint.path.with_name(DEFAULT_MLFLOW_SPOOL)
                if checkpoint.kind == "file" and checkpoint.path is not None else None)
    raw = r.get(data, "mlflow_spool", str, None, nullable=True)
    return base / raw if raw else None


def _checkpoint(r: Reader, raw: Any, base: Path) -> CheckpointConfig:
    if isinstance(raw, str):
        raw = {"kind": "sql", "url": raw} if "://" in raw else {"kind": "file", "path": raw}
    if not isinstance(raw, Mapping):
        r.error("checkpoint", f"must be a file path, a SQLAlchemy URL or a mapping; got {raw!r}")
        return CheckpointConfig("file", path=base / DEFAULT_CHECKPOINT)
    r.keys("checkpoint", raw, ("kind", "path", "url", "table", "lease"))
    kind = r.choice(raw, "kind", ("file", "sql"), "file", path="checkpoint")
    lease = r.duration(raw, "lease", None, path="checkpoint")
    if kind == "sql":
        return CheckpointConfig("sql", url=sqlite_beside(r.url(raw, "url", "checkpoint"), base),
                                table=r.get(raw, "table", str, "fairmonitor_checkpoint",
                                            path="checkpoint"), lease=lease)
    path = r.get(raw, "path", str, DEFAULT_CHECKPOINT, path="checkpoint")
    if (base / path).is_dir():
        r.error("checkpoint.path", f"is a directory: {str(base / path)!r}; give a file path "
                                   f"such as {str(base / path / DEFAULT_CHECKPOINT)!r}")
    return CheckpointConfig("file", path=base / path, lease=lease)


def _model(r: Reader, at: str, name: str, raw: Any, base: Path) -> ModelConfig | None:
    if not isinstance(raw, Mapping):
        r.error(at, f"must be a mapping with keys {fmt_allowed(_MODEL_KEYS)}; got {raw!r}")
        return None
    r.keys(at, raw, _MODEL_KEYS)
    reg, version, alias = _registered_model(r, at, raw.get("model"))
    source = _source(r, f"{at}.source", raw.get("source"), base)
    sensitive = r.names(raw, "sensitive_features", at, required=True)
    metrics = r.names(raw, "metrics", at, required=True)
    task = read_task(r, raw, at, metrics)
    classes, class_scores = read_classes(r, raw, at, task)
    label, score, prediction = _columns(r, at, raw, class_scores=bool(class_scores))
    if task == "multiclass":
        _multiclass_limits(r, at, raw)
    for i, metric in enumerate(metrics):
        _check_metric(r, f"{at}.metrics[{i}]", metric, label=label,
                      score=score or next(iter(class_scores.values()), None))
    window, every, mode, labels_after = _timing(r, at, raw, label)
    options = read_options(r, f"{at}.options", raw.get("options"))
    reference = _reference(r, f"{at}.reference", raw.get("reference"), base, task)
    if reference is not None and reg is None:
        r.error(f"{at}.reference", "needs 'model' (the MLflow model whose versions to evaluate)")
    attributes = list(sensitive)
    if raw.get("intersection", True) and len(sensitive) > 1:
        attributes.append(INTERSECTION_SEPARATOR.join(sensitive))
    thresholds = read_thresholds(r, f"{at}.thresholds", raw.get("thresholds"),
                                 _monitored(metrics, reference), attributes)
    rollups = _rollups(r, f"{at}.rollups", raw.get("rollups"), window, every)
    max_raw, sample_size = _summaries(r, f"{at}.summaries", raw.get("summaries"))
    budget = _alerting(r, f"{at}.alerting", raw.get("alerting"), thresholds)
    if task == "regression":
        _regression_model(r, at, raw, score, prediction)
    threshold = r.get(raw, "decision_threshold", float, 0.5, path=at)
    if not 0.0 <= threshold <= 1.0:
        r.error(f"{at}.decision_threshold", f"must be in [0, 1]; got {threshold!r}")
    return ModelConfig(
        name=name, source=source, sensitive_features=sensitive, window=window, every=every,
        mode=mode, metrics=metrics, registered_model=reg, model_version=version,
        model_alias=alias, label=label, score=score, prediction=prediction,
        decision_threshold=float(threshold), labels_after=labels_after, options=options,
        thresholds=thresholds, reference=reference, rollups=rollups,
        summary_max_raw=max_raw, summary_sample_size=sample_size, budget=budget,
        task=task, classes=classes, class_scores=class_scores,
        **_model_rest(r, at, name, raw, base, label, labels_after, sensitive))


def _regression_model(r: Reader, at: str, raw: Mapping[str, Any], score: str | None,
                      prediction: str | None) -> None:
    """Check a regression model: a continuous ``prediction`` column, no score column.

    A new version's ``reference`` evaluation takes its predictions from the version's own
    ``predict`` (continuous), so a reference score column is refused too.
    """
    if prediction is None:
        r.error(f"{at}.prediction", "task: regression needs 'prediction' (the column of "
                                    "continuous predictions)")
    if score is not None:
        r.error(f"{at}.score", "task: regression reads 'prediction', not 'score'; drop 'score'")
    reference = raw.get("reference")
    if isinstance(reference, Mapping) and reference.get("score") is not None:
        r.error(f"{at}.reference.score", "task: regression reads 'prediction' (the version's "
                                         "own predict), not a score; drop 'score'")


def _columns(r: Reader, at: str, raw: Mapping[str, Any], *, class_scores: bool = False
             ) -> tuple[str | None, str | None, str | None]:
    """Return the label, score and prediction columns (a score or a prediction is needed).

    ``class_scores``: a multiclass model's per-class ``scores`` are given (they count as
    scores).
    """
    label, score, prediction = (r.get(raw, k, str, None, path=at)
                                for k in ("label", "score", "prediction"))
    if score is None and prediction is None and not class_scores:
        r.error(at, "give at least one of 'score' or 'prediction' (column names)")
    return label, score, prediction


def _multiclass_limits(r: Reader, at: str, raw: Mapping[str, Any]) -> None:
    """Report the keys a multiclass model cannot use (one score column, binary-only paths)."""
    why = {"score": "names one column; a multiclass model gives one per class in 'scores'",
           "decision_threshold": "thresholds a binary score; the predicted class is the "
                                 "'prediction' column, else the most probable class"}
    for key, text in why.items():
        if raw.get(key) is not None:
            r.error(f"{at}.{key}", f"{text} (task: multiclass)")
    reference = raw.get("reference")
    if isinstance(reference, Mapping) and reference.get("score") is not None:
        r.error(f"{at}.reference.score", "names one column; a multiclass version's scores are "
                                         "its predict_proba, else the reference's 'scores' "
                                         "columns (task: multiclass)")


def _timing(r: Reader, at: str, raw: Mapping[str, Any], label: str | None
            ) -> tuple[timedelta, timedelta, str, timedelta]:
    """``window``, ``every``, ``mode`` and ``labels_after``, checked against each other."""
    window = r.duration(raw, "window", None, path=at, required=True) or timedelta(hours=1)
    every = r.duration(raw, "every", None, path=at) or window
    mode = r.choice(raw, "mode", ("tumbling", "sliding"),
                    "tumbling" if every == window else "sliding", path=at)
    if mode == "tumbling" and every != window:
        r.error(f"{at}.every", "tumbling windows advance by their size "
                               f"({format_duration(window)}); got {format_duration(every)}; "
                               "drop 'every' or set mode: sliding")
    if every > window:
        r.error(f"{at}.every", f"must not exceed window ({format_duration(window)}); got "
                               f"{format_duration(every)}")
    labels_after = r.duration(raw, "labels_after", timedelta(0), path=at, allow_zero=True)
    assert labels_after is not None
    if labels_after and label is None:
        r.error(f"{at}.labels_after", "is set but no 'label' column is configured")
    return window, every, mode, labels_after


def _monitored(metrics: Sequence[str], reference: ReferenceConfig | None) -> set[str]:
    """Return the metrics a threshold may govern: the windows' and the reference evaluation's."""
    if reference is None:
        return set(metrics)
    return set(metrics) | set(METRICS if reference.metrics is None else reference.metrics)


def _model_rest(r: Reader, at: str, name: str, raw: Mapping[str, Any], base: Path,
                label: str | None, labels_after: timedelta,
                sensitive: Sequence[str]) -> dict[str, Any]:
    """Return the model's other keys, read in this order (errors are reported in file order)."""
    out: dict[str, Any] = dict(
        tracking_uri=sqlite_beside(
            r.get(raw, "tracking_uri", str, DEFAULT_TRACKING_URI, path=at), base),
        experiment=r.get(raw, "experiment", str, f"fairmonitor-{name}", path=at),
        features=r.names(raw, "features", at) or None,
        start=_start(r, f"{at}.start", raw.get("start")),
        relabel_within=(r.duration(raw, "relabel_within", labels_after, path=at, allow_zero=True)
                        if label is not None else timedelta(0)))
    out["min_group_size"], out["min_condition_size"] = read_group_minimums(r, raw, at)
    out.update(
        min_label_coverage=_coverage(r, at, raw.get("min_label_coverage", 0.5)),
        intersection=r.get(raw, "intersection", bool, True, path=at),
        seed=r.get(raw, "seed", int, 0, path=at),
        team=r.get(raw, "team", str, None, path=at),
        owner=r.get(raw, "owner", str, None, path=at),
        missing=read_missing(r, raw.get("missing"), f"{at}.missing", sensitive),
        confidence_level=read_confidence_level(r, raw, at),
        alert_windows=_alert_windows(r, f"{at}.alert_windows", raw.get("alert_windows")))
    return out


def _alert_windows(r: Reader, at: str, raw: Any) -> AlertWindows:
    """``alert_windows: {warning, critical, undefined}``: windows before each alert fires."""
    if raw is None:
        return AlertWindows()
    if not isinstance(raw, Mapping):
        r.error(at, f"must be a mapping {{warning, critical, undefined}} of window counts; "
                    f"got {raw!r}")
        return AlertWindows()
    r.keys(at, raw, ("warning", "critical", "undefined"))
    return AlertWindows(*(r.positive_int(raw, k, getattr(AlertWindows, k), path=at)
                          for k in ("warning", "critical", "undefined")))


def _alerting(r: Reader, at: str, raw: Any, thresholds: Sequence[Threshold]) -> Budget | None:
    """Read the model's false-page budget from its ``alerting:`` key.

    ``alerting: {budget: {false_pages, per, null_fraction, alternative_fraction,
    calibration}}``; ``Budget()`` when a threshold uses ``compare: budget`` and none is given.
    (Not ``null:``: YAML reads that key as null.)
    """
    uses_budget = any(t.compare == "budget" for t in thresholds)
    if raw is None:
        return Budget() if uses_budget else None
    if not isinstance(raw, Mapping):
        r.error(at, f"must be a mapping with keys {fmt_allowed(_ALERTING_KEYS)}; got {raw!r}")
        return None
    r.keys(at, raw, _ALERTING_KEYS)
    spec = raw.get("budget")
    if spec is None:
        return Budget() if uses_budget else None
    at = f"{at}.budget"
    if not isinstance(spec, Mapping):
        r.error(at, f"must be a mapping with keys {fmt_allowed(_BUDGET_KEYS)}, e.g. "
                    f"{{false_pages: 1, per: 90d}}; got {spec!r}")
        return None
    if None in spec:
        r.error(f"{at}.null", "YAML reads the key `null` as null: write `null_fraction`")
        spec = {k: v for k, v in spec.items() if k is not None}
    r.keys(at, spec, _BUDGET_KEYS)
    default = Budget()
    values = {key: r.get(spec, key, float, getattr(default, key), path=at)
              for key in ("false_pages", "null_fraction", "alternative_fraction")}
    per = r.duration(spec, "per", timedelta(days=default.days), path=at)
    calibration = r.choice(spec, "calibration", CALIBRATIONS, default.calibration, path=at)
    ok = True
    for key, v in values.items():
        if not (math.isfinite(v) and v > 0):
            r.error(f"{at}.{key}", f"must be a positive number; got {v!r}")
            ok = False
    if ok and values["null_fraction"] >= values["alternative_fraction"]:
        r.error(f"{at}.null_fraction",
                "must be below 'alternative_fraction' (the indifference zone's ends, as "
                f"fractions of the threshold); got {values['null_fraction']} and "
                f"{values['alternative_fraction']}")
        ok = False
    if not ok or per is None:
        return None
    return Budget(days=per / timedelta(days=1), calibration=calibration, **values)


def _rollups(r: Reader, at: str, raw: Any, window: timedelta,
             every: timedelta) -> tuple[RollupConfig, ...]:
    """``rollups``: longer windows merged from the stored summaries of the model's windows.

    Each entry is a duration (a tumbling rollup, ``1d``) or ``{window, every}`` (sliding, e.g.
    a day every hour). Both must be whole multiples of the model's window, which must be
    tumbling: overlapping windows cannot be added up.
    """
    if raw is None or raw == []:
        return ()
    if not isinstance(raw, list):
        raw = [raw]
    if every != window:
        r.error(at, f"need tumbling windows (every = window) to merge; the model's windows "
                    f"slide ({format_duration(window)} every {format_duration(every)}); use a "
                    f"tumbling window of {format_duration(every)} and a rollup "
                    f"{{window: {format_duration(window)}, every: {format_duration(every)}}}")
        return ()
    out: list[RollupConfig] = []
    for i, entry in enumerate(raw):
        where = f"{at}[{i}]"
        if isinstance(entry, str | int) and not isinstance(entry, bool):
            entry = {"window": entry}
        if not isinstance(entry, Mapping):
            r.error(where, f"must be a duration such as 1d or a mapping {{window, every}}; "
                           f"got {entry!r}")
            continue
        r.keys(where, entry, ("window", "every"))
        length = r.duration(entry, "window", None, path=where, required=True)
        if length is None:
            continue
        step = r.duration(entry, "every", None, path=where) or length
        given = (("window", length), ("every", step)) if "every" in entry else \
            (("window", length),)
        bad = [f"{k} {format_duration(v)}" for k, v in given if v % window or v < window]
        if bad:
            r.error(where, f"{' and '.join(bad)}: must be whole multiples of the model's "
                           f"window ({format_duration(window)})")
            continue
        if length == window:
            r.error(where, f"window {format_duration(length)} is the model's own window; give "
                           "a longer one")
            continue
        if step > length:
            r.error(f"{where}.every", f"must not exceed window ({format_duration(length)}); "
                                      f"got {format_duration(step)}")
            continue
        name = format_duration(length) if step == length else \
            f"{format_duration(length)}_every_{format_duration(step)}"
        if any(o.name == name for o in out):
            r.error(where, f"rollup {name!r} is listed more than once")
            continue
        out.append(RollupConfig(name, length, step))
    return tuple(out)


def _summaries(r: Reader, at: str, raw: Any) -> tuple[int, int]:
    """``summaries: {max_raw, sample_size}``: what each stored window summary keeps."""
    if raw is None:
        return 8192, 256
    if not isinstance(raw, Mapping):
        r.error(at, f"must be a mapping {{max_raw, sample_size}}; got {raw!r}")
        return 8192, 256
    r.keys(at, raw, ("max_raw", "sample_size"))
    max_raw = r.positive_int(raw, "max_raw", 8192, path=at)
    sample = r.get(raw, "sample_size", int, 256, path=at)
    if sample < 0:
        r.error(f"{at}.sample_size", f"must be 0 (no row metrics on rollups) or more; "
                                     f"got {sample!r}")
        sample = 256
    return max_raw, int(sample)


def _coverage(r: Reader, at: str, raw: Any) -> float:
    """``min_label_coverage``: the labelled fraction a window must reach by ``labels_after``."""
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw <= 1:
        r.error(f"{at}.min_label_coverage", f"must be a fraction in [0, 1], e.g. 0.5; got "
                f"{raw!r}")
        return 0.5
    return float(raw)


def _check_metric(r: Reader, at: str, metric: str, *, label: str | None,
                  score: str | None, reference: bool = False) -> None:
    spec = METRICS.get(metric)
    if spec is None:
        r.error(at, f"unknown metric {metric!r}; allowed: {fmt_allowed(METRICS)}")
    elif spec.needs_labels and label is None:
        r.error(at, f"{metric!r} needs labels; set 'label' to the label column")
    elif spec.needs_scores and score is None and not reference:
        r.error(at, f"{metric!r} needs scores; set 'score' to the score column")
    elif spec.needs_model and not reference:
        r.error(at, f"{metric!r} calls the model, which production windows do not; list it "
                    "under 'reference.metrics' instead")


def _registered_model(r: Reader, at: str, raw: Any) -> tuple[str | None, str | None, str | None]:
    if raw is None:
        return None, None, None
    if isinstance(raw, str):
        if not raw.startswith("models:/"):
            return raw, None, None
        match = _MODEL_URI.match(raw)
        if match is None:
            r.error(f"{at}.model", "must be 'models:/<name>@<alias>', 'models:/<name>/<version>',"
                                   f" a registered model name or a mapping; got {raw!r}")
            return None, None, None
        return match["name"], match["version"], match["alias"]
    if not isinstance(raw, Mapping):
        r.error(f"{at}.model", f"must be a string or a mapping {{name, version | alias}}; "
                               f"got {raw!r}")
        return None, None, None
    r.keys(f"{at}.model", raw, ("name", "version", "alias"))
    name = r.get(raw, "name", str, None, path=f"{at}.model", required=True)
    version = raw.get("version")
    alias = r.get(raw, "alias", str, None, path=f"{at}.model")
    if version is not None and alias is not None:
        r.error(f"{at}.model", "give 'version' or 'alias', not both")
    if version is not None and not (isinstance(version, int | str) and str(version).isdigit()):
        r.error(f"{at}.model.version", f"must be a version number; got {version!r}")
    return name, None if version is None else str(version), alias


def _source(r: Reader, at: str, raw: Any, base: Path) -> SourceConfig:
    if not isinstance(raw, Mapping):
        r.error(at, "required; give e.g. {kind: sql, url: ...} (kinds: sql, files, spark)"
                if raw is None else f"must be a mapping; got {raw!r}")
        return SourceConfig("sql", url="sqlite://")
    r.keys(at, raw, _SOURCE_KEYS)
    kind = r.choice(raw, "kind", ("sql", "files", "spark"), None, path=at, required=True)
    opt = {k: r.get(raw, k, str, None, path=at, nullable=True) for k in
           ("model_column", "version_column", "features_column") if k in raw}
    common = dict(timestamp_column=r.get(raw, "timestamp_column", str, "timestamp", path=at),
                  timeout=r.duration(raw, "timeout", timedelta(minutes=5), path=at), **opt)
    if kind == "spark":
        table = r.get(raw, "table", str, None, path=at)
        where = r.get(raw, "path", str, None, path=at)
        if (table is None) == (where is None):
            r.error(at, "kind spark: give 'table' (a Hive, Unity Catalog or Delta table) or "
                        "'path' (Parquet files), not both")
        master = r.get(raw, "master", str, None, path=at)
        remote = r.get(raw, "remote", str, None, path=at)
        date_column = r.get(raw, "date_column", str, None, path=at)
        if master is not None and remote is not None:
            r.error(at, "kind spark: give 'master' or 'remote' (Spark Connect), not both")
        if remote is not None and not remote.startswith("sc://"):
            r.error(f"{at}.remote", f"must be a Spark Connect URL like 'sc://host:15002'; "
                                    f"got {remote!r}")
        # a relative Parquet path resolves against the config file, as every path here
        path = str(base / where) if where is not None and "://" not in where else where
        return SourceConfig("spark", table=table or "", path=Path(path) if path and
                            "://" not in path else None,
                            url=path if path and "://" in path else None,
                            master=master, remote=remote, date_column=date_column,
                            **common)
    if kind == "files":
        path = r.get(raw, "path", str, None, path=at, required=True) or "."
        pattern = r.get(raw, "pattern", str, "**/*.parquet", path=at)
        if not pattern.endswith((".parquet", ".csv", ".csv.gz")):
            r.error(f"{at}.pattern", f"must match .parquet or .csv files; got {pattern!r}")
        return SourceConfig("files", path=base / path, pattern=pattern, **common)
    return SourceConfig("sql", url=sqlite_beside(r.url(raw, "url", at), base),
                        table=r.get(raw, "table", str, "predictions", path=at), **common)


def _reference(r: Reader, at: str, raw: Any, base: Path, task: str = "binary"
               ) -> ReferenceConfig | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = {"path": raw}
    if not isinstance(raw, Mapping):
        r.error(at, f"must be a file path or a mapping; got {raw!r}")
        return None
    r.keys(at, raw, _REFERENCE_KEYS)
    path = base / (r.get(raw, "path", str, None, path=at, required=True) or ".")
    if not path.is_file():
        r.error(f"{at}.path", f"file not found: {str(path)!r}")
    metrics = r.names(raw, "metrics", at) if raw.get("metrics") is not None else None
    label = r.get(raw, "label", str, None, path=at)
    for i, metric in enumerate(metrics or ()):
        _check_metric(r, f"{at}.metrics[{i}]", metric, label=label or "?", score=None,
                      reference=True)
    check_task_metrics(r, task, metrics or (), f"{at}.metrics")
    return ReferenceConfig(path=path, metrics=metrics, label=label,
                           score=r.get(raw, "score", str, None, path=at),
                           prediction=r.get(raw, "prediction", str, None, path=at),
                           features=r.names(raw, "features", at) or None)


def _start(r: Reader, at: str, raw: Any) -> datetime | None:
    if raw is None:
        return None
    if isinstance(raw, datetime):
        value = raw
    elif isinstance(raw, date):
        value = datetime(raw.year, raw.month, raw.day)
    else:
        try:
            value = datetime.fromisoformat(str(raw))
        except ValueError:
            r.error(at, f"must be an ISO 8601 time like 2026-11-22T00:00:00Z; got {raw!r}")
            return None
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if value.year >= 9000:  # window arithmetic near datetime.max overflows
        r.error(at, f"must be before 9000-01-01; got {raw!r}")
        return None
    return value
