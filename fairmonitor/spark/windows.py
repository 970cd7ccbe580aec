"""The monitor's windows on Spark: summarized and merged on the executors, never collected.

:func:`summarize_windows` is what the monitor's Spark source (``source: {kind: spark}``,
:class:`fairmonitor.monitor.sources.spark.SparkSource`) runs for a batch of due windows:

1. one filter on the batch's time ranges (and the model), on the timestamp column itself so
   Spark pushes it into the scan (Parquet row groups, Delta data skipping), and on a declared
   date partition column (``date_column``) so only those dates' partitions are listed;
2. one :func:`~fairmonitor.spark.summarize.merged_summaries` job over those rows, keyed by
   slots on the epoch grid (the windows themselves for tumbling windows): each partition
   summarizes its rows per slot after the monitor's invalid-row policy, the summaries merge
   per slot on the executors, and the driver collects one summary per slot (bytes, never
   rows: only the bounded per-group row sample the row metrics read travels inside it);
3. one small aggregate of the version column per slot, when the table has one.

Sliding windows (``every`` shorter than ``window``) are summed from their slots on the driver
(:func:`fairmonitor.summaries.merge_all`, exact as any merge). A window without rows is in no
slot: it costs no job of its own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..summaries import WindowSummary
from ..summaries.multiclass import replace
from .summarize import epoch_micros, merge_partials, merged_summaries, read_table

__all__ = ["WindowParts", "summarize_windows"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
#: a batch whose windows need more slots than this each is summarized one window at a time
_MAX_SLOTS = 64


@dataclass(frozen=True)
class WindowParts:
    """One window's summaries and counts, as the monitor reads a window from rows.

    Attributes
    ----------
    every : WindowSummary or None
        Every valid row, without labels (None: no valid row).
    labelled : WindowSummary or None
        The valid rows with a label, with their labels (None: labels not read, or none).
    labelled_rows : int
        Valid rows with a label.
    rejected : mapping of str to int
        Rows dropped before any metric, per reason (``invalid_score``, ``invalid_prediction``).
    versions : mapping of str to int
        Rows per model version (the version column's values), as the monitor counts them.
    partials : int
        Partition summaries merged into this window.
    """

    every: WindowSummary | None = None
    labelled: WindowSummary | None = None
    labelled_rows: int = 0
    rejected: Mapping[str, int] = field(default_factory=dict)
    versions: Mapping[str, int] = field(default_factory=dict)
    partials: int = 0

    @property
    def n_rows(self) -> int:
        """Valid rows (labelled or not)."""
        return 0 if self.every is None else self.every.n_rows


def _micros(t: datetime) -> int:
    if t.tzinfo is None:
        raise ValueError(f"window bounds must be timezone-aware (UTC); got {t.isoformat()}")
    return (t - _EPOCH) // _US


def _ranges(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Return the union of ``[start, end)`` ranges as disjoint ranges, in order.

    >>> _ranges([(0, 10), (10, 20), (30, 40), (35, 50)])
    [(0, 20), (30, 50)]
    """
    out: list[list[int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def _slot(spans: Sequence[tuple[int, int]]) -> int | None:
    """Return the longest slot (us) whose epoch grid tiles every window; None if too fine.

    >>> h = 3_600_000_000
    >>> _slot([(0, h), (h, 2 * h)]), _slot([(0, h), (h // 2, 3 * h // 2)])
    (3600000000, 1800000000)
    """
    slot = math.gcd(*(v for lo, hi in spans for v in (hi - lo, lo)))
    longest = max(hi - lo for lo, hi in spans)
    return slot if slot and longest // slot <= _MAX_SLOTS else None


def _time_filter(df: Any, timestamp: str, ranges: list[tuple[int, int]],
                 date_column: str | None) -> Any:
    """Keep the rows in the ranges: on the column (pushed into the scan) and exactly, in us.

    A ``TIMESTAMP`` column is compared with timestamp literals, which Spark pushes into the
    Parquet/Delta scan; the exact test on microseconds since the epoch decides for every
    type. ``date_column`` (a ``DATE`` or ``'YYYY-MM-DD'`` partition column holding each row's
    date) is compared with the ranges' dates, one day of slack either side so that a date in
    any time zone keeps its rows, and Spark reads only those partitions.
    """
    from pyspark.sql import functions as F

    micros = epoch_micros(df, timestamp, None)
    kind = df.schema[timestamp].dataType.simpleString()
    exact = pushed = dates = None
    for lo, hi in ranges:
        inside = (micros >= F.lit(lo)) & (micros < F.lit(hi))
        exact = inside if exact is None else exact | inside
        if kind == "timestamp":
            scan = ((F.col(timestamp) >= F.timestamp_micros(F.lit(lo)))
                    & (F.col(timestamp) < F.timestamp_micros(F.lit(hi))))
            pushed = scan if pushed is None else pushed | scan
        if date_column is not None:
            first = (_EPOCH + lo * _US).date() - timedelta(days=1)
            last = (_EPOCH + (hi - 1) * _US).date() + timedelta(days=1)
            day = F.col(date_column).cast("date")
            within = (day >= F.lit(first)) & (day <= F.lit(last))
            dates = within if dates is None else dates | within
    for cond in (dates, pushed, exact):
        if cond is not None:
            df = df.where(cond)
    return df


def _version_counts(df: Any, key: Any, version_column: str) -> dict[int, dict[str, int]]:
    """Rows per slot and version (non-null versions, as text): one small aggregate job."""
    from pyspark.sql import functions as F

    rows = (df.where(F.col(version_column).isNotNull())
            .groupBy(key.alias("slot"), F.col(version_column).cast("string").alias("v"))
            .count().collect())
    out: dict[int, dict[str, int]] = {}
    for row in rows:
        out.setdefault(int(row["slot"]), {})[str(row["v"])] = int(row["count"])
    return out


def _parts(rows: list[dict[str, Any]], plan: Any, start: int, end: int,
           versions: Mapping[str, int]) -> WindowParts | None:
    """One window from its slots' merged rows (re-keyed to the window's start)."""
    mine = [{**r, "window": start} for r in rows]
    if not mine:
        return None
    got = merge_partials(mine, dataclasses.replace(plan, window_us=end - start))
    key = _EPOCH + start * _US
    bounds = {"start": key, "end": _EPOCH + end * _US}
    every, labelled = (None if s is None else replace(s, **bounds)  # multiclass too
                       for s in (got.windows.get(key), got.labelled.get(key)))
    if every is not None and labelled is None and "y_true" in every.inputs:
        every, labelled = every.without_labels(), every  # every valid row is labelled
    return WindowParts(every, labelled, int(got.labelled_rows.get(key, 0)),
                       dict(got.rejected.get(key, {})), dict(versions), got.partials)


def _batch(df: Any, spans: list[tuple[int, int]], slot: int | None, timestamp: str,
           version_column: str | None, kwargs: Mapping[str, Any]
           ) -> dict[tuple[int, int], WindowParts]:
    """Summaries per slot (one job, merged on the executors), summed into each window.

    ``slot=None``: one window whose rows ``df`` holds, summarized whole (its start is on no
    grid the key could name).
    """
    from pyspark.sql import functions as F

    if slot is None:
        frame, plan = merged_summaries(df, **kwargs)
        key = F.lit(0).cast("long")
    else:
        frame, plan = merged_summaries(df, timestamp=timestamp, window=slot * _US, **kwargs)
        micros = epoch_micros(df, timestamp, None)
        key = micros - F.pmod(micros, F.lit(slot))
    slots: dict[int, list[dict[str, Any]]] = {}
    for row in frame.collect():
        if row["window"] is not None:
            slots.setdefault(int(row["window"]), []).append(row.asDict())
    counts: dict[int, dict[str, int]] = {}
    if version_column is not None and slots:
        counts = _version_counts(df, key, version_column)
    out = {}
    for lo, hi in spans:
        keys = [0] if slot is None else range(lo, hi, slot)
        rows = [r for s in keys for r in slots.get(s, ())]
        versions: dict[str, int] = {}
        for s in keys:
            for v, n in counts.get(s, {}).items():
                versions[v] = versions.get(v, 0) + n
        parts = _parts(rows, plan, lo, hi, versions)
        if parts is not None:
            out[(lo, hi)] = parts
    return out


def summarize_windows(
    data: Any,
    *,
    spans: Sequence[tuple[datetime, datetime]],
    timestamp: str,
    model: str | None = None,
    model_column: str | None = None,
    date_column: str | None = None,
    version_column: str | None = None,
    spark: Any = None,
    **kwargs: Any,
) -> dict[tuple[datetime, datetime], WindowParts]:
    """Summarize the rows of each window ``[start, end)`` of ``spans`` on the executors.

    Parameters
    ----------
    data : Spark DataFrame, table name or Parquet path
    spans : sequence of (datetime, datetime)
        The windows, timezone-aware; they may overlap (sliding windows).
    timestamp : str
        The prediction time column (a timestamp, a date or a string Spark casts).
    model, model_column : str, optional
        Keep the rows whose ``model_column`` is ``model`` (when the table has that column).
    date_column : str, optional
        A date partition column (``DATE`` or ``'YYYY-MM-DD'``) of each row's date: filtered on
        the windows' dates (one day of slack either side), so Spark lists only those
        partitions.
    version_column : str, optional
        Rows per version are counted when the table has this column.
    spark : SparkSession, optional
        To read a table name or path.
    **kwargs
        :func:`~fairmonitor.spark.summarize.partial_summaries`' (``sensitive_features``,
        ``label``, ``score``, ``prediction``, ``features``, ``threshold``, ``intersection``,
        ``spec``, ``missing``, ``model``, ``version``).

    Returns
    -------
    dict of (start, end) to WindowParts
        The windows with at least one row (valid or rejected); an empty window is absent.
    """
    from pyspark.sql import functions as F

    if not spans:
        return {}
    df = read_table(data, spark)
    if model is not None and model_column and model_column in df.columns:
        df = df.where(F.col(model_column).cast("string") == F.lit(model))
    if date_column is not None and date_column not in df.columns:
        date_column = None  # declared but absent: the timestamp filter alone
    if version_column is not None and version_column not in df.columns:
        version_column = None
    micro_spans = [(_micros(lo), _micros(hi)) for lo, hi in spans]
    slot = _slot(micro_spans)
    groups = [micro_spans] if slot is not None else [[s] for s in micro_spans]
    found: dict[tuple[int, int], WindowParts] = {}
    for group in groups:
        rows = _time_filter(df, timestamp, _ranges(group), date_column)
        found.update(_batch(rows, group, slot, timestamp, version_column,
                            {**kwargs, "model": model or ""}))
    return {(lo, hi): found[(a, b)] for (lo, hi), (a, b) in zip(spans, micro_spans, strict=True)
            if (a, b) in found}
