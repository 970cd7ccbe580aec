"""One window's rows of a Spark DataFrame, table or Parquet path, as pandas (monitor input)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from .summarize import read_table

__all__ = ["session", "window_rows"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(t: datetime) -> int:
    if t.tzinfo is None:
        raise ValueError(f"window bounds must be timezone-aware (UTC); got {t.isoformat()}")
    return (t - _EPOCH) // timedelta(microseconds=1)


def window_rows(data: Any, *, timestamp: str, start: datetime, end: datetime,
                model: str | None = None, model_column: str | None = None,
                columns: Sequence[str] | None = None, spark: Any = None) -> Any:
    """Return the rows with ``start <= timestamp < end`` (of ``model``) as a pandas DataFrame.

    The filter runs in Spark (partition pruning and predicate pushdown apply); only the
    window's rows reach the driver. The timestamp column comes back timezone-aware UTC,
    whatever ``spark.sql.session.timeZone`` is (it travels as microseconds since the epoch).
    Naive timestamps in the data are read in the session time zone.
    """
    import pandas as pd
    from pyspark.sql import functions as F

    df = read_table(data, spark)
    micros = F.unix_micros(F.col(timestamp).cast("timestamp"))
    cond = (micros >= F.lit(_micros(start))) & (micros < F.lit(_micros(end)))
    if model is not None and model_column and model_column in df.columns:
        cond &= F.col(model_column).cast("string") == F.lit(model)
    keep = [c for c in (columns or df.columns) if c != timestamp and c in df.columns]
    frame = df.where(cond).select(*(F.col(c) for c in keep),
                                  micros.alias(timestamp)).toPandas()
    frame[timestamp] = pd.to_datetime(frame[timestamp].astype("int64"), unit="us", utc=True)
    return frame


def session(*, master: str | None = None, remote: str | None = None) -> Any:
    """Return the active SparkSession, or a new one on ``master`` or Spark Connect ``remote``.

    Neither given: the active session, else ``SparkSession.builder.getOrCreate()`` (what
    spark-submit or the ``SPARK_REMOTE`` variable set up).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None and remote is None:
        return active
    builder = SparkSession.builder.appName("fairmonitor")
    if remote is not None:
        builder = builder.remote(remote)
    elif master is not None:
        builder = builder.master(master)
    return builder.getOrCreate()
