"""A window source over a directory of Parquet or CSV files partitioned by time."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ...exceptions import WindowUnavailableError

if TYPE_CHECKING:
    import pandas as pd


from .base import NO_TIMESTAMP, _in_window, _utc, expand_json_column

__all__ = ["FileSource"]

log = logging.getLogger(__name__)


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
        """Return the files that may hold rows of ``model`` in ``[start, end)``, in time order."""
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
        undated = sum(f.attrs.get(NO_TIMESTAMP, 0) for f in frames)
        frame = pd.concat(frames, ignore_index=True)
        frame.attrs[NO_TIMESTAMP] = undated
        if self.expand_features and self.features_column:
            frame = expand_json_column(frame, self.features_column)
        return frame
