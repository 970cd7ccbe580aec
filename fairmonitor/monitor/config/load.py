"""Reading a monitor config: YAML text or file in, :class:`~.model.MonitorConfig` out."""

from __future__ import annotations

import os
from pathlib import Path

from ...exceptions import ConfigError
from .durations import format_duration
from .model import MonitorConfig
from .reader import Reader, fail
from .schema import read_monitor

__all__ = ["check_config", "load_config", "preflight", "sqlite_file"]


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
      models.credit.source: required; give e.g. {kind: sql, url: ...} (kinds: sql, files, spark)
      models.credit.sensitive_features: required; give a list of column names
      models.credit.metrics: required; give a list of metric names
      models.credit: give at least one of 'score' or 'prediction' (column names)
      models.credit.window: must be a duration like '30s', '5m', '1h' or '1d'; got '1 hour'
    """
    import yaml

    text, base = _read_text(source, base_dir)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"monitor config is not valid YAML: {exc}") from None
    r = Reader()
    cfg = read_monitor(r, {} if data is None else data, base)
    r.raise_if_errors("monitor config")
    assert cfg is not None
    return cfg


def check_config(source: str | os.PathLike[str]) -> list[str]:
    """Validate a config (``fairmonitor monitor --check``) and summarise it, one line each.

    Raises :class:`ConfigError` exactly like :func:`load_config`.
    """
    from ..redact import mask_url

    cfg = load_config(source)
    problems = preflight(cfg)
    if problems:
        fail("monitor config", problems)
    lines = [f"config OK: {len(cfg.models)} model(s); metrics on http://{cfg.listen_address}"
             f"/metrics; checkpoint {cfg.checkpoint.path or mask_url(cfg.checkpoint.url)}; "
             f"MLflow spool {cfg.mlflow_spool or 'none (in memory)'}"]
    for m in cfg.models.values():
        where = mask_url(m.source.url) if m.source.kind == "sql" else m.source.path
        lines.append(
            f"{m.name}: {m.mode} {format_duration(m.window)} windows every "
            f"{format_duration(m.every)}, labels after {format_duration(m.labels_after)}, "
            f"{len(m.metrics)} metric(s), {len(m.thresholds)} threshold(s), "
            f"{m.source.kind} source {where}, model {m.model_uri or '-'}, MLflow "
            f"{mask_url(m.tracking_uri)}"
        )
    return lines


def sqlite_file(url: str | None) -> Path | None:
    """Return the file of a SQLite URL (None for other databases and in-memory SQLite)."""
    if not url or not url.startswith("sqlite") or ":///" not in url:
        return None
    rest = url.split(":///", 1)[1].split("?", 1)[0]
    if not rest or rest.startswith((":memory:", "file:")):
        return None
    return Path(rest)


def preflight(cfg: MonitorConfig) -> list[str]:
    """Return what ``--check`` can find wrong without running: files that are not there.

    A missing SQLite source file is an error (the monitor never creates one: an empty database
    would only hide a wrong path), as is a missing prediction directory.
    """
    problems = []
    for m in cfg.models.values():
        at = f"models.{m.name}.source"
        db = sqlite_file(m.source.url) if m.source.kind == "sql" else None
        if db is not None and not db.is_file():
            problems.append(f"{at}.url: SQLite file not found: {db} (relative paths resolve "
                            "against the config file's directory; the monitor never creates "
                            "it)")
        if m.source.kind == "files" and m.source.path is not None and not m.source.path.is_dir():
            problems.append(f"{at}.path: directory not found: {m.source.path}")
    files = [("checkpoint.path", cfg.checkpoint.path), ("mlflow_spool", cfg.mlflow_spool)]
    for key, path in files:
        if path is None:
            continue
        # the nearest existing ancestor must be a writable directory
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            problems.append(f"{key}: {parent} is a file, not a directory: cannot create {path}")
        elif not os.access(parent, os.W_OK):
            problems.append(f"{key}: directory {parent} is not writable: cannot create {path}")
    return problems
