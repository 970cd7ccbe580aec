"""The :class:`WindowSource` protocol, shared helpers and an in-memory source."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ...exceptions import MissingColumnError, WindowUnavailableError

if TYPE_CHECKING:
    import pandas as pd


#: ``DataFrame.attrs`` key: rows read for a window whose timestamp is empty or unparseable
#: (they belong to no window; the job counts them as rejected rows)
NO_TIMESTAMP = "rows_without_timestamp"
#: ``DataFrame.attrs`` key: every column of the source's table (a SQL source reads only the
#: configured ones, so a missing one is told from the table, with the table's columns listed)
SOURCE_COLUMNS = "source_columns"

__all__ = ["NO_TIMESTAMP", "SOURCE_COLUMNS", "MemorySource", "WindowSource", "expand_json_column",
           "to_utc"]

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
    """Return a timestamp column as UTC datetimes; naive values are taken to be UTC already."""
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
        raise MissingColumnError(
            f"timestamp column {column!r} is not in the source; available columns: "
            f"{list(frame.columns)}", key="source.timestamp_column")
    values = frame[column]
    if values.dtype.kind in "OU" or isinstance(values.dtype, pd.StringDtype):
        # empty or unparseable timestamps belong to no window: counted (NO_TIMESTAMP), not a
        # whole file refused forever
        ts = pd.to_datetime(values, utc=True, format="ISO8601", errors="coerce")
    else:
        ts = to_utc(values)
    frame = frame.assign(**{column: ts})
    mask = (ts >= pd.Timestamp(start)) & (ts < pd.Timestamp(end))
    if model is not None and model_column and model_column in frame.columns:
        of_model = frame[model_column].astype(str) == model
        mask &= of_model
        undated = int((ts.isna() & of_model).sum())
    else:
        undated = int(ts.isna().sum())
    out = frame.loc[mask].reset_index(drop=True)
    out.attrs[NO_TIMESTAMP] = undated
    return out


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
