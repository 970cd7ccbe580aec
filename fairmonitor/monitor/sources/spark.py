"""A window source over Spark: a table (Hive, Unity Catalog, Delta), a Parquet path or a DataFrame.

The window's filter runs in Spark (:func:`fairmonitor.spark.rows.window_rows`), only the
window's rows reach the monitor, which evaluates them as any other source's. Needs the
``spark`` extra; pyspark is imported by :mod:`fairmonitor.spark` on the first fetch. For
windows too large for one process, summarize them on the cluster instead
(:func:`fairmonitor.spark.evaluate_spark`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...exceptions import WindowUnavailableError
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
                 master: str | None = None, remote: str | None = None) -> None:
        self.data = data
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

    def _session(self) -> Any:
        """Return the given session, the active one, or one started from ``master``/``remote``."""
        if self.spark is None and isinstance(self.data, str):
            from ...spark.rows import session

            self.spark = session(master=self.master, remote=self.remote)
        return self.spark
