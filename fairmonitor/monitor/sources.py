"""Where production windows come from: the :class:`WindowSource` protocol and two built-ins.

A source returns the logged rows of one model whose timestamp lies in ``[start, end)`` as a
pandas DataFrame, with the timestamp column as timezone-aware UTC. When it cannot (database
down, table or directory missing, unreadable file) it raises
:class:`~fairmonitor.exceptions.WindowUnavailableError`; the job then retries the window on the
next tick instead of skipping it. An empty frame means "no rows", which is not an error.

Built-ins:

- :class:`SQLSource`: a table in any SQLAlchemy database (SQLite by default, PostgreSQL, ...),
  e.g. the one :class:`~fairmonitor.monitor.logger.PredictionLogger` writes. Timestamps are
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

import json
import logging
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..exceptions import WindowUnavailableError

if TYPE_CHECKING:
    import pandas as pd

    from .config import ModelConfig, MonitorConfig

__all__ = ["FileSource", "MemorySource", "SQLSource", "WindowSource", "build_source",
           "build_sources"]

log = logging.getLogger(__name__)


@runtime_checkable
class WindowSource(Protocol):
    """Anything that can fetch the rows of one model and one time window."""

    def fetch(self, model: str, start: datetime, end: datetime) -> pd.DataFrame:
        """Rows of ``model`` with ``start <= timestamp < end``.

        Raises :class:`~fairmonitor.exceptions.WindowUnavailableError` when the source is down.
        """
        ...


def _utc(t: datetime, name: str) -> datetime:
    if t.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware (UTC); got naive {t.isoformat()}")
    return t.astimezone(UTC)


def to_utc(values: Any) -> pd.Series:
    """A timestamp column as UTC datetimes; naive values are taken to be UTC already."""
    import pandas as pd

    if isinstance(values.dtype, pd.DatetimeTZDtype):
        return values.dt.tz_convert("UTC")
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        return values.dt.tz_localize("UTC")
    return pd.to_datetime(values, utc=True, format="ISO8601")


def _in_window(frame: pd.DataFrame, column: str, start: datetime, end: datetime,
               model: str | None, model_column: str | None) -> pd.DataFrame:
    import pandas as pd

    if column not in frame.columns:
        raise WindowUnavailableError(
            f"timestamp column {column!r} not in the source; columns: {list(frame.columns)}")
    frame = frame.assign(**{column: to_utc(frame[column])})
    ts = frame[column]
    mask = (ts >= pd.Timestamp(start)) & (ts < pd.Timestamp(end))
    if model is not None and model_column and model_column in frame.columns:
        mask &= frame[model_column].astype(str) == model
    return frame.loc[mask].reset_index(drop=True)


def expand_json_column(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Replace a column of JSON objects by one column per key (existing columns win)."""
    import pandas as pd

    if column not in frame.columns:
        return frame
    records = [json.loads(v) if isinstance(v, str) and v else (v if isinstance(v, dict) else {})
               for v in frame[column]]
    expanded = pd.DataFrame.from_records(records, index=frame.index)
    keep = [c for c in expanded.columns if c not in frame.columns]
    return pd.concat([frame.drop(columns=[column]), expanded[keep]], axis=1)


class MemorySource:
    """An in-memory source over DataFrames (tests, notebooks, replaying a file).

    Parameters
    ----------
    frames : DataFrame or mapping of model name to DataFrame
        One frame with a ``model_column``, or one frame per model.
    timestamp_column, model_column : str
        Column names.

    Set ``down = True`` to simulate an outage; every fetch is recorded in ``calls``.
    """

    def __init__(self, frames: pd.DataFrame | Mapping[str, pd.DataFrame], *,
                 timestamp_column: str = "timestamp", model_column: str = "model") -> None:
        self.frames = frames
        self.timestamp_column = timestamp_column
        self.model_column = model_column
        self.down = False
        self.calls: list[tuple[str, datetime, datetime]] = []

    def fetch(self, model: str, start: datetime, end: datetime) -> pd.DataFrame:  # noqa: D102
        self.calls.append((model, start, end))
        if self.down:
            raise WindowUnavailableError("memory source is down (down=True)")
        if isinstance(self.frames, Mapping):
            frame = self.frames[model]
            return _in_window(frame, self.timestamp_column, _utc(start, "start"),
                              _utc(end, "end"), None, None)
        return _in_window(self.frames, self.timestamp_column, _utc(start, "start"),
                          _utc(end, "end"), model, self.model_column)


class SQLSource:
    """Rows from a table in any SQLAlchemy database.

    Parameters
    ----------
    url : str
        SQLAlchemy URL, e.g. ``sqlite:///predictions.db`` or
        ``postgresql+psycopg2://user@127.0.0.1:5432/db``.
    table : str, default='predictions'
    timestamp_column : str, default='timestamp'
        A DATETIME/TIMESTAMP column in UTC (``timestamp with time zone`` is converted).
    model_column : str or None, default='model'
        Filters rows of the requested model; None when the table holds one model.
    features_column : str or None, default='features'
        A JSON text column expanded into feature columns when ``expand_features`` is true.
    expand_features : bool, default=False
    columns : sequence of str, optional
        Read only these columns (plus the timestamp); default: all. Reading fewer columns is
        the main lever on large windows.
    """

    def __init__(self, url: str, table: str = "predictions", *,
                 timestamp_column: str = "timestamp", model_column: str | None = "model",
                 features_column: str | None = "features", expand_features: bool = False,
                 columns: Sequence[str] | None = None, engine: Any = None) -> None:
        import sqlalchemy as sa

        self.url = url
        self.table_name = table
        self.timestamp_column = timestamp_column
        self.model_column = model_column
        self.features_column = features_column
        self.expand_features = expand_features
        self.columns = None if columns is None else tuple(columns)
        self.engine = engine or sa.create_engine(url, pool_pre_ping=True)
        self._table: sa.Table | None = None

    def _where(self) -> str:
        return f"table {self.table_name!r} at {self.engine.url.render_as_string()}"

    def _reflect(self) -> Any:
        import sqlalchemy as sa

        if self._table is None:
            self._table = sa.Table(self.table_name, sa.MetaData(), autoload_with=self.engine)
        return self._table

    def fetch(self, model: str, start: datetime, end: datetime) -> pd.DataFrame:  # noqa: D102
        import pandas as pd
        import sqlalchemy as sa

        start, end = _utc(start, "start"), _utc(end, "end")
        try:
            table = self._reflect()
            if self.timestamp_column not in table.c:
                raise WindowUnavailableError(
                    f"{self._where()} has no timestamp column {self.timestamp_column!r}; "
                    f"columns: {list(table.c.keys())}")
            ts = table.c[self.timestamp_column]
            aware = bool(getattr(ts.type, "timezone", False))
            lo, hi = (start, end) if aware else (start.replace(tzinfo=None),
                                                 end.replace(tzinfo=None))
            # read timestamps as raw strings where the driver gives strings (SQLite): SQLAlchemy's
            # per-row datetime parsing is the slowest step on large windows; pandas parses
            # the whole column at once below
            wanted = [c for c in table.c if c is ts or self.columns is None
                      or c.name in self.columns]
            columns = [sa.type_coerce(c, sa.String).label(c.name) if c is ts else c
                       for c in wanted]
            stmt = sa.select(*columns).where(ts >= lo, ts < hi)
            if self.model_column and self.model_column in table.c:
                stmt = stmt.where(table.c[self.model_column] == model)
            with self.engine.connect() as conn:
                result = conn.execute(stmt)
                keys = list(result.keys())
                # plain DB-API tuples: SQLAlchemy Row objects make DataFrame construction
                # an order of magnitude slower (per-row attribute probing)
                rows = result.cursor.fetchall()
            frame = pd.DataFrame.from_records(rows, columns=keys)
        except sa.exc.SQLAlchemyError as exc:
            self._table = None  # the table may appear (or change) by the next attempt
            raise WindowUnavailableError(
                f"cannot read {self._where()}: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0]}") from exc
        frame[self.timestamp_column] = to_utc(frame[self.timestamp_column])
        if self.expand_features and self.features_column:
            frame = expand_json_column(frame, self.features_column)
        return frame

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()


_STAMP = re.compile(r"(?<!\d)(\d{4})-?(\d{2})-?(\d{2})"
                    r"(?:T(\d{2})(?:[:-]?(\d{2}))?(?:[:-]?(\d{2}))?)?(?!\d)")
_PARTITION = re.compile(r"^(dt|date|hour|model)=(.+)$")


def _file_span(path: Path, root: Path) -> tuple[datetime | None, timedelta | None, str | None]:
    """(start, length or None for "until the next file", model) read from a file's path."""
    day: datetime | None = None
    hour: int | None = None
    model = None
    for part in path.relative_to(root).parts[:-1]:
        m = _PARTITION.match(part)
        if m is None:
            continue
        key, value = m.groups()
        if key in ("dt", "date"):
            try:
                day = datetime.fromisoformat(value).replace(tzinfo=UTC)
            except ValueError:
                day = None
        elif key == "hour" and value.isdigit():
            hour = int(value)
        elif key == "model":
            model = value
    if day is not None:
        if hour is not None:
            return day + timedelta(hours=hour), timedelta(hours=1), model
        return day, timedelta(days=1), model
    m = _STAMP.search(path.name)
    if m is None:
        return None, None, model
    y, mo, d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    try:
        stamp = datetime(y, mo, d, h, mi, s, tzinfo=UTC)
    except ValueError:
        return None, None, model
    return stamp, (None if m[4] else timedelta(days=1)), model


class FileSource:
    """Rows from a directory of Parquet or CSV files partitioned by time (layouts above).

    Parameters
    ----------
    path : path-like
        The root directory.
    pattern : str, default='**/*.parquet'
        Glob under ``path``; ``.csv`` (and ``.csv.gz``) files are read as CSV.
    timestamp_column, model_column : str
        Column names; a missing model column means the files hold one model's rows.
    """

    def __init__(self, path: str | Path, pattern: str = "**/*.parquet", *,
                 timestamp_column: str = "timestamp", model_column: str | None = "model",
                 features_column: str | None = None, expand_features: bool = False) -> None:
        self.path = Path(path)
        self.pattern = pattern
        self.timestamp_column = timestamp_column
        self.model_column = model_column
        self.features_column = features_column
        self.expand_features = expand_features

    def files(self, model: str, start: datetime, end: datetime) -> list[Path]:
        """The files that may hold rows of ``model`` in ``[start, end)``, in time order."""
        if not self.path.is_dir():
            raise WindowUnavailableError(f"prediction directory {str(self.path)!r} not found")
        spans = []
        for f in sorted(self.path.glob(self.pattern)):
            if f.is_file():
                begin, length, owner = _file_span(f, self.path)
                if owner is None or owner == model:
                    spans.append((begin, length, f))
        stamped = sorted((b, f) for b, length, f in spans if b is not None and length is None)
        ends = {f: nxt for (_, f), (nxt, _) in zip(stamped, stamped[1:], strict=False)}
        chosen = []
        for begin, length, f in spans:
            if begin is None:
                chosen.append(f)
                continue
            stop = begin + length if length is not None else ends.get(f)
            if begin < end and (stop is None or stop > start):
                chosen.append(f)
        return chosen

    def fetch(self, model: str, start: datetime, end: datetime) -> pd.DataFrame:  # noqa: D102
        import pandas as pd

        start, end = _utc(start, "start"), _utc(end, "end")
        frames = []
        for f in self.files(model, start, end):
            try:
                if f.name.endswith((".csv", ".csv.gz")):
                    frame = pd.read_csv(f)
                else:
                    frame = pd.read_parquet(f)
            except Exception as exc:  # pyarrow and the csv parser raise many types
                raise WindowUnavailableError(f"cannot read {str(f)!r}: {exc}") from exc
            frames.append(_in_window(frame, self.timestamp_column, start, end, model,
                                     self.model_column))
        if not frames:
            empty = pd.Series([], dtype="datetime64[ns, UTC]")
            return pd.DataFrame({self.timestamp_column: empty})
        frame = pd.concat(frames, ignore_index=True)
        if self.expand_features and self.features_column:
            frame = expand_json_column(frame, self.features_column)
        return frame


def build_source(model_cfg: ModelConfig) -> WindowSource:
    """The source a model's config describes."""
    src = model_cfg.source
    common = dict(timestamp_column=src.timestamp_column, model_column=src.model_column,
                  features_column=src.features_column,
                  expand_features=model_cfg.needs_features and src.features_column is not None)
    if src.kind == "files":
        assert src.path is not None
        return FileSource(src.path, src.pattern, **common)  # type: ignore[arg-type]
    assert src.url is not None
    return SQLSource(src.url, src.table, columns=needed_columns(model_cfg),
                     **common)  # type: ignore[arg-type]


def needed_columns(model_cfg: ModelConfig) -> tuple[str, ...] | None:
    """The columns a model's evaluation reads (None: all, when features are implicit)."""
    src = model_cfg.source
    if model_cfg.needs_features and not model_cfg.features:
        return None
    named = (src.version_column, model_cfg.label, model_cfg.score, model_cfg.prediction,
             *model_cfg.sensitive_features, *(model_cfg.features or ()),
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
