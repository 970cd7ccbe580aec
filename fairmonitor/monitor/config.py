"""Monitor configuration: YAML in, frozen validated dataclasses out.

Validation reads the whole file before failing, so one :class:`~fairmonitor.exceptions.ConfigError`
lists every problem, one per line, each naming the dotted key path, the bad value and what is
allowed (pve-exporter's ``ConfigInvalid``, nannyml's scheduling messages). Metric names are
checked against :data:`fairmonitor.METRICS`; thresholds become
:class:`fairmonitor.thresholds.Threshold` objects with the registry's ``default_bound``.

The schema, with defaults (``load_config`` of this text works as is)::

    listen_address: 127.0.0.1:9464       # the Prometheus endpoint
    checkpoint: fairmonitor-checkpoint.json   # a path (JSON) or a SQLAlchemy URL (a table)
    mlflow_spool: fairmonitor-mlflow-pending.jsonl  # MLflow values not yet written, kept
                                          #   across restarts; default: beside a checkpoint
                                          #   file (none with a SQL checkpoint); null: memory
    catch_up: 100                         # at most this many missed windows per model and phase
    timezone: UTC                         # windows are aligned on the Unix epoch in UTC
    models:
      credit:                             # monitor name = the `model` value in the source
        model: models:/credit@champion    # or models:/credit/3, a registered name, or
                                          #   {name: credit, version: 3} / {name:, alias:}
        tracking_uri: sqlite:///mlflow.db
        source: {kind: sql, url: "sqlite:///predictions.db", table: predictions}
        sensitive_features: [sex]
        prediction: prediction            # and/or score: score; label: label
        window: 1h
        every: 5m                         # omitted: tumbling windows
        labels_after: 24h                 # label metrics wait this long after the window end
        metrics: [demographic_parity_difference]
        thresholds:
          demographic_parity_difference: {warning: 0.1, critical: 0.2}

Relative file paths resolve against the config file's directory; URLs are left as written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from .._registry import METRICS
from ..exceptions import ConfigError
from ..thresholds import Threshold
from ._parse import Reader

__all__ = [
    "CheckpointConfig", "ModelConfig", "MonitorConfig", "ReferenceConfig", "SourceConfig",
    "check_config", "load_config", "parse_duration",
]

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_LISTEN_ADDRESS = "127.0.0.1:9464"
DEFAULT_CHECKPOINT = "fairmonitor-checkpoint.json"
DEFAULT_MLFLOW_SPOOL = "fairmonitor-mlflow-pending.jsonl"
DURATION_HELP = "a duration like '30s', '5m', '1h' or '1d'"
_DURATION = re.compile(r"^(\d+)\s*([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_duration(text: Any) -> timedelta:
    """``"5m"`` -> ``timedelta(minutes=5)``; units s, m, h, d.

    >>> parse_duration("90s"), parse_duration("1d")
    (datetime.timedelta(seconds=90), datetime.timedelta(days=1))
    """
    match = _DURATION.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"must be {DURATION_HELP}; got {text!r}")
    return timedelta(**{_UNITS[match[2]]: int(match[1])})


def format_duration(delta: timedelta) -> str:
    """The inverse of :func:`parse_duration`, with the largest exact unit (``"90m"``, ``"1d"``)."""
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class SourceConfig:
    """Where a model's logged predictions are read from (see :mod:`.sources`)."""

    kind: Literal["sql", "files"]
    url: str | None = None
    table: str = "predictions"
    path: Path | None = None
    pattern: str = "**/*.parquet"
    timestamp_column: str = "timestamp"
    model_column: str | None = "model"
    version_column: str | None = "version"
    features_column: str | None = "features"


@dataclass(frozen=True)
class CheckpointConfig:
    """Where monitor progress is kept: a JSON file or a table in a SQL store."""

    kind: Literal["file", "sql"]
    path: Path | None = None
    url: str | None = None
    table: str = "fairmonitor_checkpoint"


@dataclass(frozen=True)
class ReferenceConfig:
    """Reference data on which each new model version is evaluated."""

    path: Path
    metrics: tuple[str, ...] | None = None
    label: str | None = None
    score: str | None = None
    prediction: str | None = None
    features: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ModelConfig:
    """Everything the monitor needs to know about one model."""

    name: str
    source: SourceConfig
    sensitive_features: tuple[str, ...]
    window: timedelta
    every: timedelta
    mode: Literal["tumbling", "sliding"]
    metrics: tuple[str, ...]
    registered_model: str | None = None
    model_version: str | None = None
    model_alias: str | None = None
    tracking_uri: str = DEFAULT_TRACKING_URI
    experiment: str = ""
    label: str | None = None
    score: str | None = None
    prediction: str | None = None
    features: tuple[str, ...] | None = None
    decision_threshold: float = 0.5
    labels_after: timedelta = timedelta(0)
    start: datetime | None = None
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    min_group_size: int = 1
    intersection: bool = True
    seed: int = 0
    thresholds: tuple[Threshold, ...] = ()
    reference: ReferenceConfig | None = None

    @property
    def model_uri(self) -> str | None:
        """``models:/name@alias``, ``models:/name/version``, ``models:/name`` or None."""
        if self.registered_model is None:
            return None
        if self.model_alias:
            return f"models:/{self.registered_model}@{self.model_alias}"
        if self.model_version:
            return f"models:/{self.registered_model}/{self.model_version}"
        return f"models:/{self.registered_model}"

    @property
    def label_metrics(self) -> tuple[str, ...]:
        """The configured metrics that need ground truth."""
        return tuple(m for m in self.metrics if METRICS[m].needs_labels)

    @property
    def label_free_metrics(self) -> tuple[str, ...]:
        """The configured metrics computable as soon as the window closes."""
        return tuple(m for m in self.metrics if not METRICS[m].needs_labels)

    @property
    def needs_features(self) -> bool:
        """True if some configured metric reads the feature matrix."""
        return any(METRICS[m].needs_features for m in self.metrics)


@dataclass(frozen=True)
class MonitorConfig:
    """The whole monitor: models plus global settings."""

    models: Mapping[str, ModelConfig]
    checkpoint: CheckpointConfig
    mlflow_spool: Path | None = None
    listen_address: str = DEFAULT_LISTEN_ADDRESS
    catch_up: int = 100
    timezone: str = "UTC"
    tick: timedelta = timedelta(minutes=1)

    @property
    def host(self) -> str:
        """Host part of ``listen_address`` (brackets of an IPv6 address removed)."""
        return self.listen_address.rsplit(":", 1)[0].strip("[]")

    @property
    def port(self) -> int:
        """Port part of ``listen_address``."""
        return int(self.listen_address.rsplit(":", 1)[1])


def _read_text(source: str | os.PathLike[str], base_dir: Path | None) -> tuple[str, Path]:
    is_path = isinstance(source, os.PathLike) or (
        "\n" not in source and (source.endswith((".yml", ".yaml")) or Path(source).is_file()))
    if not is_path:
        return str(source), base_dir or Path.cwd()
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read monitor config {str(path)!r}: {exc.strerror}.") from None
    return text, base_dir or path.resolve().parent


def load_config(source: str | os.PathLike[str], *, base_dir: Path | None = None) -> MonitorConfig:
    """Read and validate a monitor config from a YAML file path or YAML text.

    Parameters
    ----------
    source : str or path-like
        A path (a ``Path``, or a string naming an existing file or ending in ``.yml``/``.yaml``)
        or the YAML text itself.
    base_dir : Path, optional
        Where relative file paths resolve; default: the config file's directory (or the
        current directory for text).

    Returns
    -------
    MonitorConfig

    Raises
    ------
    ConfigError
        Listing every problem on its own line; ``err.errors`` holds the lines.

    Examples
    --------
    >>> cfg = load_config('''
    ... models:
    ...   credit:
    ...     source: {kind: sql, url: "sqlite:///predictions.db"}
    ...     sensitive_features: [sex]
    ...     prediction: prediction
    ...     window: 1h
    ...     every: 15m
    ...     metrics: [demographic_parity_difference]
    ... ''')
    >>> m = cfg.models["credit"]
    >>> m.mode, m.every, cfg.port
    ('sliding', datetime.timedelta(seconds=900), 9464)
    >>> load_config("models: {credit: {window: 1 hour}}")
    Traceback (most recent call last):
    ...
    fairmonitor.exceptions.ConfigError: monitor config has 5 errors:
      models.credit.source: required; give {kind: sql, url: ...} or {kind: files, path: ...}
      models.credit.sensitive_features: required; give a list of column names
      models.credit: give at least one of 'score' or 'prediction' (column names)
      models.credit.metrics: required; give a list of metric names
      models.credit.window: must be a duration like '30s', '5m', '1h' or '1d'; got '1 hour'
    """
    import yaml

    text, base = _read_text(source, base_dir)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"monitor config is not valid YAML: {exc}") from None
    from ._schema import read_monitor

    r = Reader()
    cfg = read_monitor(r, {} if data is None else data, base)
    r.raise_if_errors("monitor config")
    assert cfg is not None
    return cfg


def check_config(source: str | os.PathLike[str]) -> list[str]:
    """Validate a config (``fairmonitor monitor --check``) and summarise it, one line each.

    Raises :class:`ConfigError` exactly like :func:`load_config`.
    """
    cfg = load_config(source)
    lines = [f"config OK: {len(cfg.models)} model(s); metrics on http://{cfg.listen_address}"
             f"/metrics; checkpoint {cfg.checkpoint.path or cfg.checkpoint.url}; MLflow spool "
             f"{cfg.mlflow_spool or 'none (in memory)'}"]
    for m in cfg.models.values():
        where = m.source.url if m.source.kind == "sql" else m.source.path
        lines.append(
            f"{m.name}: {m.mode} {format_duration(m.window)} windows every "
            f"{format_duration(m.every)}, labels after {format_duration(m.labels_after)}, "
            f"{len(m.metrics)} metric(s), {len(m.thresholds)} threshold(s), "
            f"{m.source.kind} source {where}, model {m.model_uri or '-'}"
        )
    return lines
