"""Where production windows come from: the :class:`WindowSource` protocol and two built-ins.

A source returns the logged rows of one model whose timestamp lies in ``[start, end)`` as a
pandas DataFrame, with the timestamp column as timezone-aware UTC. When it cannot (database
down, table or directory missing, unreadable file) it raises
:class:`~fairmonitor.exceptions.WindowUnavailableError`; the job then retries the window on the
next tick instead of skipping it. An empty frame means "no rows", which is not an error.

Built-ins:

- :class:`SQLSource`: a table in any SQLAlchemy database (SQLite by default, PostgreSQL, ...),
  e.g. the one :class:`~fairmonitor.monitor.sources.logger.PredictionLogger` writes. Timestamps are
  stored as UTC; a ``features`` JSON column can be expanded into one column per feature.
- :class:`FileSource`: a directory of Parquet or CSV files partitioned by time. Layouts:

  * Hive-style partitions ``dt=2026-11-22/hour=13/part-0.parquet`` (also ``date=``; ``hour=``
    optional): a file holds rows of that day or hour only, so other files are not read;
    a ``model=<name>`` directory holds rows of that model only;
  * files named with a UTC timestamp, ``preds-2026-11-22T13-00-00.csv`` or
    ``20261122T1300.parquet``: a file holds rows from its timestamp up to the next file's;
    a date alone (``preds-2026-11-22.csv``) means that day;
  * anything else is read whole and filtered by the timestamp column.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import MemorySource, WindowSource, expand_json_column, to_utc
from .deadline import DeadlineSource, engine_options, existing_sqlite
from .files import FileSource
from .sql import SQLSource

if TYPE_CHECKING:
    from ..config import ModelConfig, MonitorConfig

__all__ = [
    "DeadlineSource", "FileSource", "MemorySource", "SQLSource", "WindowSource", "build_source",
    "build_sources", "engine_options", "expand_json_column", "needed_columns", "to_utc",
]


def build_source(model_cfg: ModelConfig) -> WindowSource:
    """Return the source a model's config describes."""
    src = model_cfg.source
    common = dict(timestamp_column=src.timestamp_column, model_column=src.model_column,
                  features_column=src.features_column,
                  expand_features=model_cfg.needs_features and src.features_column is not None)
    timeout = src.timeout.total_seconds()
    if src.kind == "spark":
        from .spark import SparkSource

        data = src.table or str(src.url or src.path)
        return DeadlineSource(SparkSource(data, timestamp_column=src.timestamp_column,
                                          model_column=src.model_column or "",
                                          columns=needed_columns(model_cfg),
                                          date_column=src.date_column,
                                          version_column=src.version_column,
                                          master=src.master, remote=src.remote), timeout)
    if src.kind == "files":
        assert src.path is not None
        return DeadlineSource(FileSource(src.path, src.pattern, **common),  # type: ignore[arg-type]
                              timeout)
    assert src.url is not None
    import sqlalchemy as sa

    # the driver's own timeouts end a blocked call; DeadlineSource bounds the tick regardless
    engine = sa.create_engine(src.url, **engine_options(src.url, timeout),
                              **existing_sqlite(src.url))
    return DeadlineSource(SQLSource(src.url, src.table, columns=needed_columns(model_cfg),
                                    engine=engine, **common),  # type: ignore[arg-type]
                          timeout)


def needed_columns(model_cfg: ModelConfig) -> tuple[str, ...] | None:
    """Return the columns a model's evaluation reads (None: all, when features are implicit)."""
    src = model_cfg.source
    if model_cfg.needs_features and not model_cfg.features:
        return None
    named = (src.version_column, model_cfg.label, model_cfg.score, model_cfg.prediction,
             *model_cfg.sensitive_features, *(model_cfg.features or ()),
             *model_cfg.class_scores.values(),  # task: multiclass, one column per class
             src.features_column if model_cfg.needs_features else None)
    return tuple(dict.fromkeys(c for c in named if c))


def build_sources(config: MonitorConfig) -> dict[str, WindowSource]:
    """One source per model; models reading the same things share one (one pool)."""
    shared: dict[tuple[Any, ...], WindowSource] = {}
    out = {}
    for name, model in config.models.items():
        key = (model.source, model.needs_features, needed_columns(model))
        if key not in shared:
            shared[key] = build_source(model)
        out[name] = shared[key]
    return out
