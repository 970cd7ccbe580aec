"""A window source over Spark: a table (Hive, Unity Catalog, Delta), a Parquet path or a DataFrame.

The monitor reads it through :meth:`SparkSource.window_summaries`: a batch of due windows is
summarized on the executors (:func:`fairmonitor.spark.windows.summarize_windows`: the time
filter pushed into the scan, one summary per window merged in Spark), and only the summaries
reach the monitor, which evaluates them (:mod:`fairmonitor.monitor.summarized`): a window's
rows are never collected, whatever its size. :meth:`SparkSource.fetch` still gives one
window's rows as pandas (:func:`fairmonitor.spark.rows.window_rows`) to whoever wants them.
Needs the ``spark`` extra; pyspark is imported by :mod:`fairmonitor.spark` on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...exceptions import InvalidInputError, WindowUnavailableError
from .base import _utc

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SparkSource"]


class SparkSource:
    """Fetch a model's window of rows from a Spark table, Parquet path or DataFrame.

    Parameters
    ----------
    data : str or Spark DataFrame
        A table name, a Parquet path (a string with ``/`` or ending in ``.parquet``) or a
        DataFrame.
    spark : SparkSession, optional
        The session that reads a table or path (default: the active one).
    timestamp_column, model_column : str
        Column names; a source without the model column holds one model's rows.
    columns : sequence of str, optional
        Read only these columns (and the timestamp); default all.
    date_column : str, optional
        A date partition column (``DATE`` or ``'YYYY-MM-DD'``, e.g. Hive's ``dt``) holding each
        row's date: filtered on the windows' dates (one day of slack either side, for any
        time zone), so Spark lists and reads only those partitions.
    version_column : str, optional
        Rows per model version are counted per window when the table has this column.
    master, remote : str, optional
        Without ``spark`` and without an active session, the session to start on the first
        fetch: a master URL (``local[2]``, ``yarn``) or a Spark Connect URL (``sc://host:15002``).
        Neither: ``SparkSession.builder.getOrCreate()`` (what spark-submit or ``SPARK_REMOTE``
        set up).

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> source = SparkSource("predictions")  # a table name: nothing is read yet
    >>> source.timestamp_column
    'timestamp'

    ``source.fetch("credit", datetime(2026, 1, 5, tzinfo=UTC), datetime(2026, 1, 5, 1,
    tzinfo=UTC))`` then returns that hour's rows of ``credit``, timestamps in UTC.
    """

    def __init__(self, data: Any, *, spark: Any = None, timestamp_column: str = "timestamp",
                 model_column: str = "model", columns: Sequence[str] | None = None,
                 date_column: str | None = None, version_column: str | None = "version",
                 master: str | None = None, remote: str | None = None) -> None:
        self.data = data
        self.date_column, self.version_column = date_column, version_column
        self.spark = spark
        self.master, self.remote = master, remote
        self.timestamp_column = timestamp_column
        self.model_column = model_column
        self.columns = None if columns is None else tuple(columns)

    def fetch(self, model: str, start: datetime, end: datetime) -> pd.DataFrame:  # noqa: D102
        from ...spark.rows import window_rows

        start, end = _utc(start, "start"), _utc(end, "end")
        try:
            return window_rows(self.data, timestamp=self.timestamp_column, start=start,
                               end=end, model=model, model_column=self.model_column,
                               columns=self.columns, spark=self._session())
        except Exception as exc:  # Spark down, table or path missing: retry next tick
            raise WindowUnavailableError(
                f"Spark source {self.data if isinstance(self.data, str) else 'DataFrame'!s} "
                f"cannot give {model}'s window {start.isoformat()}..{end.isoformat()}: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from exc

    def table_columns(self) -> list[str]:
        """Return the table's columns (its schema: no job runs)."""
        from ...spark.summarize import read_table

        try:
            return list(read_table(self.data, self._session()).columns)
        except Exception as exc:
            raise self._unavailable("cannot read the table's columns", exc) from exc

    def window_summaries(self, model: str, spans: Sequence[tuple[datetime, datetime]],
                         **summary: Any) -> dict[tuple[datetime, datetime], Any]:
        """Summarize ``model``'s windows on the executors; return the non-empty ones' parts.

        :func:`fairmonitor.spark.windows.summarize_windows` with ``summary``'s arguments
        (``sensitive_features``, ``label``, ``score``, ``spec`` ...): a Spark job for the
        whole batch, whose driver side receives one summary per window. A value the
        monitor's policy refuses (a label ``2``) raises ``InvalidInputError`` naming the window
        and the column; Spark failing raises ``WindowUnavailableError``.
        """
        from ...spark.windows import summarize_windows

        spans = [(_utc(a, "start"), _utc(b, "end")) for a, b in spans]
        try:
            return summarize_windows(self.data, spans=spans, timestamp=self.timestamp_column,
                                     model=model, model_column=self.model_column or None,
                                     date_column=self.date_column,
                                     version_column=self.version_column,
                                     spark=self._session(), **summary)
        except InvalidInputError:
            raise
        except Exception as exc:
            text = str(exc)
            if "InvalidInputError: " in text:  # raised on an executor: the data's fault
                raise InvalidInputError(
                    text.split("InvalidInputError: ", 1)[1].splitlines()[0]) from None
            raise self._unavailable(f"cannot summarize {model}'s {len(spans)} window(s) from "
                                    f"{spans[0][0].isoformat()}", exc) from exc

    def _unavailable(self, what: str, exc: Exception) -> WindowUnavailableError:
        name = self.data if isinstance(self.data, str) else "DataFrame"
        first = str(exc).splitlines()[0] if str(exc) else ""
        return WindowUnavailableError(f"Spark source {name}: {what}: {type(exc).__name__}: "
                                      f"{first}")

    def _session(self) -> Any:
        """Return the given session, the active one, or one started from ``master``/``remote``."""
        if self.spark is None and isinstance(self.data, str):
            from ...spark.rows import session

            self.spark = session(master=self.master, remote=self.remote)
        return self.spark
