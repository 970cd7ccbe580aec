"""Summaries of a Spark DataFrame per window: made and merged on the executors, one per window.

Only the DataFrame API is used (``select``, column expressions, ``mapInPandas``,
``groupBy().applyInPandas``, ``collect``):
no RDD, no ``SparkContext``, no JVM UDF, so the same code runs on a classic session and over
Spark Connect. pyspark is imported inside the functions only.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .._validation import check_option
from ..exceptions import InvalidInputError
from ..summaries import SummarySpec, WindowSummary
from ..summaries.multiclass import from_bytes, merge_all  # multiclass summaries too
from ._partition import (
    KEY,
    OUTPUT_TYPES,
    PartitionPlan,
    merge_window,
    summarize_partition,
    window_bounds,
)

__all__ = ["SparkSummaries", "merge_partials", "merged_summaries", "partial_summaries",
           "read_table",
           "summarize_spark", "window_key"]


@dataclass(frozen=True)
class SparkSummaries:
    """The merged summaries of a Spark DataFrame, one per window.

    Attributes
    ----------
    windows : mapping of key to WindowSummary
        Sorted by key: the window's start (a UTC ``datetime``) with ``timestamp`` and
        ``window``, the value of ``window_column`` with that, or ``None`` (the whole data).
    undated : int
        Rows in no window (null timestamp or null window key); not summarized.
    partials : int
        Partition summaries merged (one per window and partition holding its rows).
    timings : mapping of str to float
        Seconds: ``scan`` (the Spark job: read, summarize per partition, collect) and ``merge``
        (deserialize and merge on the driver).
    labelled : mapping of key to WindowSummary
        For a window where some valid rows have a label and some not: the summary of its
        labelled rows, with their labels (the label metrics read it); ``windows[key]`` then
        holds every valid row without labels (the label-free metrics read it). A window whose
        rows are all labelled (or none is) is not here: ``windows[key]`` serves both.
    labelled_rows : mapping of key to int
        Valid rows with a label, per window (with a label column); the label coverage is
        ``labelled_rows[key] / windows[key].n_rows``.
    rejected : mapping of key to mapping of str to int
        Rows dropped before any metric, per window and reason (``invalid_score``,
        ``invalid_prediction``; reasons with no row left out), as the monitor counts them
        (:mod:`fairmonitor.monitor.rows`). A window whose every row was invalid has no summary,
        only this count.
    """

    windows: Mapping[Any, WindowSummary]
    undated: int = 0
    partials: int = 0
    timings: Mapping[str, float] = field(default_factory=dict)
    labelled: Mapping[Any, WindowSummary] = field(default_factory=dict)
    labelled_rows: Mapping[Any, int] = field(default_factory=dict)
    rejected: Mapping[Any, Mapping[str, int]] = field(default_factory=dict)


def _session(spark: Any) -> Any:
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None:
        raise InvalidInputError(
            "no active SparkSession to read the table or path with; pass spark=<session> or "
            "a DataFrame")
    return active


def read_table(data: Any, spark: Any = None) -> Any:
    """Return ``data`` as a Spark DataFrame: a DataFrame, or read a table name or Parquet path.

    A string with a ``/`` or a ``://``, or ending in ``.parquet``, is read as Parquet; any
    other string as a table name (``spark.table``: Hive, Unity Catalog, Delta tables).
    """
    if not isinstance(data, str):
        if not hasattr(data, "mapInPandas"):
            raise InvalidInputError(
                f"data must be a Spark DataFrame, a table name or a Parquet path; got "
                f"{type(data).__name__}")
        return data
    session = _session(spark)
    if "/" in data or "://" in data or data.endswith(".parquet"):
        return session.read.parquet(data)
    return session.table(data)


def _micros(window: Any) -> int:
    if isinstance(window, timedelta):
        length = window
    else:
        import pandas as pd

        try:
            length = pd.Timedelta(window).to_pytimedelta()
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"window {window!r} is not a duration; give a timedelta or a string such as "
                f"'1h' or '1 day' ({exc})") from None
    us = length // timedelta(microseconds=1)
    if us <= 0:
        raise InvalidInputError(f"window must be a positive duration; got {window!r}")
    return us


_NUMBERS = ("tinyint", "smallint", "int", "bigint", "float", "double")
_UNITS = ("s", "ms", "us")


def _is_number(spark_type: str) -> bool:
    return spark_type in _NUMBERS or spark_type.startswith("decimal")


def epoch_micros(df: Any, timestamp: str, unit: str | None) -> Any:
    """Return the timestamp column as microseconds since the epoch (a Spark ``long`` column).

    A timestamp or a string Spark casts; a number only with its declared ``unit`` (``"s"``,
    ``"ms"``, ``"us"``): Spark reads a cast number as seconds, so epoch milliseconds or
    microseconds would land centuries away (or fail with "date value out of range").
    """
    from pyspark.sql import functions as F

    kind = df.schema[timestamp].dataType.simpleString()
    column = F.col(timestamp)
    if not _is_number(kind):
        if unit is not None:
            raise InvalidInputError(
                f"timestamp_unit={unit!r} is for a numeric timestamp column; '{timestamp}' is "
                f"{kind}: leave timestamp_unit out")
        return F.unix_micros(column.cast("timestamp"))
    if unit not in _UNITS:
        raise InvalidInputError(
            f"timestamp column '{timestamp}' is a number ({kind}): declare its unit, "
            f"timestamp_unit='s', 'ms' or 'us' (seconds, milliseconds or microseconds since "
            f"1970-01-01 UTC), or cast it to a timestamp; got timestamp_unit={unit!r}")
    if unit == "s":  # fractional seconds kept to the microsecond, as Spark's own cast
        return F.unix_micros(F.timestamp_seconds(column))
    if unit == "ms":
        return F.unix_micros(F.timestamp_millis(column.cast("long")))
    return column.cast("long")


def window_key(df: Any, timestamp: str | None, window: timedelta | str | None,
               window_column: str | None, timestamp_unit: str | None = None
               ) -> tuple[Any, str, int | None, bool]:
    """Each row's window key: ``(column, its Spark type, window length in us, key is long)``.

    A window's start in microseconds on the epoch-anchored grid (as the monitor's windows),
    in exact integer arithmetic, null for a null timestamp; or ``window_column``; or 0 (the
    whole data). A numeric timestamp needs ``timestamp_unit`` (:func:`epoch_micros`).
    """
    from pyspark.sql import functions as F

    if window is not None:
        window_us = _micros(window)
        micros = epoch_micros(df, timestamp, timestamp_unit)  # type: ignore[arg-type]
        return micros - F.pmod(micros, F.lit(window_us)), "long", window_us, True
    if window_column is not None:
        key_type = df.schema[window_column].dataType.simpleString()
        key_is_long = key_type in ("bigint", "long")
        return F.col(window_column), "long" if key_is_long else key_type, None, key_is_long
    return F.lit(0).cast("long"), "long", None, True


def _check_task(task: str, score: str | None, prediction: str | None,
                classes: Sequence[Any] | None) -> None:
    """Refuse, before any job, a task the executors cannot summarize or its missing columns.

    A multiclass model is given by ``classes`` (binary summaries, one per class).
    """
    check_option(task, "task", ("binary", "regression"), func="partial_summaries")
    if task != "regression":
        return
    if classes is not None:
        raise InvalidInputError("task='regression' takes no classes (a multiclass model is "
                                "task='binary' with classes=...)")
    if score is not None:
        raise InvalidInputError("task='regression' reads 'prediction' (continuous), not a "
                                "score; drop score=")
    if prediction is None:
        raise InvalidInputError("task='regression' needs 'prediction' (the column of "
                                "continuous predictions)")


def partial_summaries(
    data: Any,
    *,
    sensitive_features: Sequence[str],
    label: str | None = None,
    score: str | None = None,
    prediction: str | None = None,
    features: Sequence[str] = (),
    timestamp: str | None = None,
    window: timedelta | str | None = None,
    window_column: str | None = None,
    timestamp_unit: str | None = None,
    threshold: float = 0.5,
    intersection: bool = True,
    spec: SummarySpec | None = None,
    missing: str | Mapping[str, str] = "raise",
    model: str = "",
    version: str = "",
    spark: Any = None,
    task: str = "binary",
    value_range: tuple[float, float] | None = None,
    classes: Sequence[Any] | None = None,
    class_scores: Sequence[str] = (),
) -> tuple[Any, PartitionPlan]:
    """Return the lazy Spark DataFrame of per-partition summaries, and its plan.

    ``classes`` (with ``class_scores``, each class's probability column): a multiclass model,
    summarized one binary summary per class (:mod:`fairmonitor.summaries.multiclass`).

    One row per (partition, window): ``window`` (the key), ``rows`` and ``summary`` (binary:
    :func:`fairmonitor.summaries.to_bytes`). Nothing runs until it is collected (or written,
    e.g. to a table of hourly summaries). Parameters as :func:`summarize_spark`;
    ``task="regression"`` summarizes a regression model's continuous predictions and
    targets (:func:`~fairmonitor.summaries.summarize_regression`, with ``value_range`` the
    ``prediction_madd`` range when one is configured).
    """
    if isinstance(sensitive_features, str):
        sensitive_features = [sensitive_features]
    if not sensitive_features:
        raise InvalidInputError("sensitive_features: name at least one column")
    _check_task(task, score, prediction, classes)
    if label is None and score is None and prediction is None and not class_scores:
        raise InvalidInputError("give at least one of prediction, score (and label) columns")
    if window is not None and timestamp is None:
        raise InvalidInputError("window needs timestamp=<the column of the prediction time>")
    if window is not None and window_column is not None:
        raise InvalidInputError("give window (with timestamp) or window_column, not both")
    df = read_table(data, spark)
    named = [*sensitive_features, *(c for c in (label, score, prediction) if c),
             *class_scores, *features]
    wanted = [*named, *(c for c in (timestamp, window_column) if c)]
    missing_cols = [c for c in wanted if c not in df.columns]
    if missing_cols:
        raise InvalidInputError(
            f"column(s) {missing_cols} not in the data; available columns: {list(df.columns)}")
    from pyspark.sql import functions as F

    key, key_type, window_us, key_is_long = window_key(df, timestamp, window, window_column,
                                                       timestamp_unit)
    plan = PartitionPlan(tuple(sensitive_features), label, score, prediction, tuple(features),
                         float(threshold), bool(intersection), spec or SummarySpec(), missing,
                         model, version, window_us, key_is_long, task,
                         None if value_range is None else (float(value_range[0]),
                                                           float(value_range[1])),
                         None if classes is None else tuple(classes), tuple(class_scores))
    outputs = {c for c in (label, score, prediction, *class_scores) if c} - set(
        sensitive_features)
    selected = df.select(*(_as_number(df, c) if c in outputs else F.col(c)
                           for c in dict.fromkeys(named)), key.alias(KEY))
    schema = f"window {key_type}, {OUTPUT_TYPES}"
    return selected.mapInPandas(functools.partial(summarize_partition, plan), schema), plan


def _as_number(df: Any, name: str) -> Any:
    """Select a label, score or prediction column as ``double`` when Spark holds it as a number.

    DECIMAL arrives in pandas as ``Decimal`` objects and booleans or integers with a null as
    objects: as doubles they are float64 with NaN for null, which
    :func:`fairmonitor.monitor.rows.prepare` reads directly. Text is left to ``prepare``.
    """
    from pyspark.sql import functions as F

    kind = df.schema[name].dataType.simpleString()
    if _is_number(kind) or kind == "boolean":
        return F.col(name).cast("double").alias(name)
    return F.col(name)


@dataclass
class _Parts:
    """One window's collected partials: labelled and unlabelled summaries, counts."""

    labelled: list[WindowSummary] = field(default_factory=list)
    unlabelled: list[WindowSummary] = field(default_factory=list)
    labelled_rows: int = 0
    rejected: dict[str, int] = field(default_factory=dict)

    partials: int = 0

    def add(self, row: Mapping[str, Any]) -> None:
        given = row.get("partials")
        self.partials += int(given) if given is not None else sum(
            row.get(c) is not None for c in ("summary", "unlabelled"))
        if row.get("summary") is not None:
            self.labelled.append(from_bytes(bytes(row["summary"])))
            self.labelled_rows += int(row.get("labelled") or 0)
        if row.get("unlabelled") is not None:
            self.unlabelled.append(from_bytes(bytes(row["unlabelled"])))
        for reason in ("invalid_score", "invalid_prediction"):
            if row.get(reason):
                self.rejected[reason] = self.rejected.get(reason, 0) + int(row[reason])

    def merged(self) -> tuple[WindowSummary | None, WindowSummary | None]:
        """``(every valid row, the labelled rows when only some are labelled)``."""
        with_labels = _merged(self.labelled)
        if not self.unlabelled:
            return with_labels, None
        if with_labels is None:
            return _merged(self.unlabelled), None
        # the label-free metrics read every valid row: the labelled ones without their labels
        return merge_all([with_labels.without_labels(), *self.unlabelled]), with_labels


def _merged(summaries: list[WindowSummary]) -> WindowSummary | None:
    if not summaries:
        return None
    return summaries[0] if len(summaries) == 1 else merge_all(summaries)


def _out_key(key: Any, plan: PartitionPlan | None, whole: bool) -> Any:
    if whole:
        return None
    if plan is not None and plan.window_us is not None:
        return window_bounds(key, plan.window_us)[0]
    return key


def merged_summaries(data: Any, **kwargs: Any) -> tuple[Any, PartitionPlan]:
    """Return the lazy Spark DataFrame of summaries merged per window on the executors.

    :func:`partial_summaries`, then ``groupBy("window").applyInPandas`` of
    :func:`~fairmonitor.spark._partition.merge_window`: one row per window (and one for the
    undated rows) whatever the number of partitions, with the same columns plus ``partials``
    (the partition summaries merged into it). What :func:`summarize_spark` collects.
    """
    frame, plan = partial_summaries(data, **kwargs)
    key_type = frame.schema["window"].dataType.simpleString()
    schema = f"window {key_type}, {OUTPUT_TYPES}, partials long"
    return frame.groupBy("window").applyInPandas(merge_window, schema), plan


def merge_partials(rows: Sequence[Any], plan: PartitionPlan | None = None) -> SparkSummaries:
    """Merge collected partial summaries (rows of :func:`partial_summaries`).

    Keys become window starts (UTC datetimes) when the plan has a window length, None when it
    summarized the whole data.
    """
    started = time.perf_counter()
    by_key: dict[Any, _Parts] = {}
    undated = 0
    for row in rows:
        if row["window"] is None and row.get("summary") is None \
                and row.get("unlabelled") is None:
            undated += int(row["rows"])
            continue
        by_key.setdefault(row["window"], _Parts()).add(row)
    whole = plan is not None and plan.window_us is None and plan.key_is_long and set(
        by_key) <= {0}
    windows: dict[Any, WindowSummary] = {}
    labelled: dict[Any, WindowSummary] = {}
    labelled_rows: dict[Any, int] = {}
    rejected: dict[Any, dict[str, int]] = {}
    for key in sorted(by_key):
        parts, out = by_key[key], _out_key(key, plan, whole)
        every, some = parts.merged()
        if every is not None:
            windows[out] = every
            if plan is None or plan.label is not None:
                labelled_rows[out] = parts.labelled_rows
        if some is not None:
            labelled[out] = some
        if parts.rejected:
            rejected[out] = parts.rejected
    partials = sum(p.partials for p in by_key.values())
    return SparkSummaries(windows, undated, partials, {"merge": time.perf_counter() - started},
                          labelled, labelled_rows, rejected)


def summarize_spark(data: Any, **kwargs: Any) -> SparkSummaries:
    """Summarize a Spark DataFrame, table or Parquet path per window, on the cluster.

    Each partition summarizes its rows per window with ``mapInPandas``
    (:func:`fairmonitor.summaries.summarize`, the function behind ``evaluate_window``), after
    the monitor's invalid-row policy (:mod:`fairmonitor.monitor.rows`: invalid scores and
    predictions dropped and counted in ``rejected``, a null label "not labelled yet"); the
    partition summaries are merged per window on the executors
    (``groupBy("window").applyInPandas``, :func:`fairmonitor.summaries.merge_all`), and the
    driver collects one serialized summary per window (bytes, not rows) whatever the number
    of partitions (:func:`merged_summaries`). See ``docs/spark.md``.

    Parameters
    ----------
    data : Spark DataFrame, or str
        A DataFrame, a table name (``spark.table``) or a Parquet path.
    sensitive_features : sequence of str
        The sensitive columns; with several, their intersection is summarized too (unless
        ``intersection=False``).
    label, score, prediction : str, optional
        Columns of the labels (0/1), scores (in [0, 1]) and predictions (0/1); without
        ``prediction``, predictions are ``score >= threshold``. Numeric Spark types (DECIMAL,
        integers, booleans) are read as numbers; text as the monitor reads it.
    features : sequence of str, optional
        Feature columns, kept in each group's row sample (HFM, CFair, robustness).
    timestamp : str, optional
        The prediction time column (timestamp, or a string Spark casts; naive values are read
        in ``spark.sql.session.timeZone``: set it to ``"UTC"`` as the monitor assumes), or a
        number of seconds, milliseconds or microseconds since the epoch with ``timestamp_unit``.
    window : timedelta or str, optional
        Window length (``"1h"``, ``"1 day"``, ``timedelta(hours=1)``): one summary per window
        on the epoch-anchored grid the monitor uses.
    window_column : str, optional
        A column that already names each row's window (e.g. a date): one summary per value.
    timestamp_unit : {"s", "ms", "us"}, optional
        The unit of a numeric ``timestamp`` (required then: Spark would read any number as
        seconds); not given for a timestamp or string column.
    threshold, intersection, missing, model, version
        As :class:`fairmonitor.report.Window` and :func:`fairmonitor.summaries.summarize`.
        ``missing="group"`` makes a non-text column's labels text in every partition (a
        window of ``Window`` does so only when it has a missing value).
    spec : SummarySpec, optional
        What each summary keeps (default ``SummarySpec()``: raw scores up to 2^16 rows a
        group in a window, cells above it, a 256-row sample per group).
    spark : SparkSession, optional
        To read a table name or path (default: the active session).
    task : {"binary", "regression"}, default="binary"
        ``"regression"``: a regressor's continuous ``prediction`` and ``label`` (targets),
        summarized with :func:`fairmonitor.summaries.summarize_regression`; no ``score``.
    value_range : (float, float), optional
        With ``task="regression"``, the fixed range ``prediction_madd`` maps predictions from
        (as its ``value_range`` option), so windows are comparable.

    Returns
    -------
    summaries : SparkSummaries

    Raises
    ------
    InvalidInputError
        A named column is missing, a numeric timestamp has no ``timestamp_unit``, or the
        arguments contradict each other. Values that cannot be read (a label or prediction
        neither 0/1 nor missing, a missing sensitive value under ``missing="raise"``) fail
        the Spark job with fairmonitor's message, naming the window and the column.
    """
    frame, plan = merged_summaries(data, **kwargs)
    started = time.perf_counter()
    rows = [r.asDict() for r in frame.collect()]
    scan = time.perf_counter() - started
    result = merge_partials(rows, plan)
    return dataclasses.replace(result, timings={"scan": scan, **result.timings})

