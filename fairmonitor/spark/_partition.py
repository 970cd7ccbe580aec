"""What runs on the executors: one partition's rows in, one summary per window out.

No pyspark import here: :func:`summarize_partition` is the function given to
``DataFrame.mapInPandas``; it reads pandas batches and yields a pandas frame of
``(window, rows, summary)`` rows, ``summary`` being :func:`fairmonitor.summaries.to_bytes` of
the window's rows in this partition (``None`` for rows without a window key: no timestamp).
Each window's rows get the monitor's invalid-row policy first
(:func:`fairmonitor.monitor.rows.prepare`: invalid scores and predictions dropped and counted,
labels, predictions and scores converted; a missing label means "not labelled yet"), then what
:class:`fairmonitor.report.Window` does to them (the missing-value policy of the sensitive
columns, predictions from scores), so a partition's summaries are the summaries the monitor
builds of those rows: one of the labelled rows (with their labels), one of the rows without a
label (without labels). A multiclass model's (``PartitionPlan.classes``) get its own policy
(:func:`fairmonitor.monitor.multiclass.prepare_columns`) and one binary summary per class
(:mod:`fairmonitor.summaries.multiclass`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import check_binary
from ..exceptions import InvalidInputError
from ..monitor import multiclass as _multiclass
from ..monitor.rows import prepare
from ..report.evaluate import Window
from ..summaries import (
    SummarySpec,
    from_bytes,
    merge_all,
    summarize,
    summarize_regression,
    to_bytes,
)
from ..utils.groups import apply_missing_policy, column_values, encode_attributes

__all__ = ["KEY", "OUTPUT", "OUTPUT_TYPES", "PartitionPlan", "merge_window",
           "summarize_partition", "window_bounds"]

#: Name of the window key column handed to the executors (a window's start in microseconds
#: since the epoch, the user's window column, or 0 for the whole data).
KEY = "__fairmonitor_window__"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: Rows of a partition summarized at once: the partition's Arrow batches are joined up to this
#: many rows, summarized, and the chunks' summaries merged per window (exact, as any merge).
#: A Python worker then holds ~150 MB of rows whatever the split size; joining a whole 128 MB
#: Parquet split (~10^7 rows) took it to gigabytes, above an executor's memory overhead.
CHUNK_ROWS = 1 << 20


@dataclass(frozen=True)
class PartitionPlan:
    """Everything an executor needs to summarize its rows (pickled once per task)."""

    sensitive: tuple[str, ...]
    label: str | None
    score: str | None
    prediction: str | None
    features: tuple[str, ...]
    threshold: float
    intersection: bool
    spec: SummarySpec
    missing: str | Mapping[str, str]
    model: str
    version: str
    #: window length in microseconds when the key is a window start; None otherwise
    window_us: int | None
    #: the key is a Spark ``long`` (a window start, or 0 for the whole data)
    key_is_long: bool = True
    #: the model's task: ``"regression"`` summarizes continuous predictions and targets
    #: (:func:`~fairmonitor.summaries.summarize_regression`)
    task: str = "binary"
    #: a regression model's ``prediction_madd`` range (its mapped predictions summarized)
    value_range: tuple[float, float] | None = None
    #: a multiclass model (``task: multiclass``): its classes and their score columns
    classes: tuple[Any, ...] | None = None
    class_scores: tuple[str, ...] = ()
    #: rows a partition summarizes at once (:func:`summarize_partition`)
    chunk_rows: int = CHUNK_ROWS


def window_bounds(key: Any, window_us: int | None) -> tuple[datetime | None, datetime | None]:
    """Return a window's (start, end) in UTC from its key (microseconds since the epoch).

    >>> window_bounds(3_600_000_000, 3_600_000_000)[0].isoformat()
    '1970-01-01T01:00:00+00:00'
    """
    if window_us is None:
        return None, None
    start = _EPOCH + timedelta(microseconds=int(key))
    return start, start + timedelta(microseconds=window_us)


def _sensitive(plan: PartitionPlan, part: Any
               ) -> tuple[dict[str, NDArray[Any]], NDArray[np.bool_] | None]:
    """Apply the missing-value policy to the sensitive columns; return them and the rows kept.

    :func:`~fairmonitor.metrics.apply_missing_policy` (what ``Window`` applies), run only on
    the columns pandas finds a missing value in: its per-value check of a text column costs
    about 1 s per 10^6 values, pandas' ``isna`` next to nothing.
    """
    # text as a few shared objects (pandas' factorize): arrow strings are a new object a row
    columns = {c: column_values(part[c]) for c in plan.sensitive}
    with_na = {c: columns[c] for c in plan.sensitive if part[c].isna().to_numpy().any()}
    for c in plan.sensitive:
        how = plan.missing.get(c, "raise") if isinstance(plan.missing, Mapping) else plan.missing
        if how == "group" and c not in with_na and columns[c].dtype.kind != "O":
            # as apply_missing_policy makes a column with a missing value text: in every
            # partition, so that one without a missing value does not keep numbers
            columns[c] = columns[c].astype(str).astype(object)
    if not with_na:
        return columns, None
    fixed, keep, _ = apply_missing_policy(with_na, plan.missing)
    return {**columns, **fixed}, keep


def _window_name(key: Any, plan: PartitionPlan) -> str:
    """How an error names a window: its start (ISO, UTC), its key, or the whole data."""
    start = window_bounds(key, plan.window_us)[0]
    if start is not None:
        return f"window {start.isoformat()}"
    return "the data" if plan.key_is_long and plan.window_us is None and key == 0 \
        else f"window {key!r}"


#: what a binary plan's error on values that are not 0/1 adds: the regression path's name
_REGRESSION_HINT = ("; continuous targets and predictions are a regression model's: pass "
                    "task='regression' (task: regression in the monitor's config)")


def _binary(values: Any, column: str | None, name: str) -> NDArray[np.float64] | None:
    if values is None:
        return None
    try:
        return check_binary(values, name)
    except InvalidInputError as exc:
        raise InvalidInputError(f"column '{column}': {exc}{_REGRESSION_HINT}") from None


def _summary_bytes(plan: PartitionPlan, part: Any, key: Any, labels: bool) -> bytes:
    """Serialize the summary of one window's valid rows of this partition (b"" if none).

    ``labels=False`` summarizes without the label column (the rows without a label).
    """
    columns, keep = _sensitive(plan, part)
    if keep is not None:
        part = part.loc[keep].reset_index(drop=True)
        columns = {c: v[keep] for c, v in columns.items()}
    if not len(part):
        return b""

    def col(name: str | None) -> Any:
        return None if name is None else part[name].to_numpy()

    start, end = window_bounds(key, plan.window_us)
    if plan.classes is not None:  # one binary summary per class, as the monitor's rows
        return to_bytes(_class_summary(plan, part, columns, col, labels, start, end))
    groups = encode_attributes(columns, intersection=plan.intersection, validated=True)
    if plan.task == "regression":  # rows.prepare made both numbers (missing label: unlabelled)
        return to_bytes(summarize_regression(
            columns, y_pred=col(plan.prediction), y_true=col(plan.label) if labels else None,
            groups=groups, spec=plan.spec, value_range=plan.value_range, model=plan.model,
            version=plan.version, start=start, end=end))
    # rows.prepare made the scores valid floats, the labels and predictions floats: numbers
    # other than 0/1 are refused here (evaluate_window's check), naming the column
    y_true = _binary(col(plan.label), plan.label, "y_true") if labels else None
    y_pred = _binary(col(plan.prediction), plan.prediction, "y_pred")
    summary = summarize(columns,
                        y_pred=None if y_pred is None else y_pred.astype(np.int8),
                        y_score=col(plan.score),
                        y_true=None if y_true is None else y_true.astype(np.int8),
                        X=part[list(plan.features)] if plan.features else None,
                        threshold=plan.threshold, intersection=plan.intersection,
                        groups=groups,
                        spec=plan.spec, model=plan.model, version=plan.version,
                        start=start, end=end)
    return to_bytes(summary)


def _class_summary(plan: PartitionPlan, part: Any, columns: Mapping[str, Any], col: Any,
                   labels: bool, start: Any, end: Any) -> Any:
    """Return a multiclass window's summary (:func:`.monitor.multiclass.summarize_window`)."""
    window = Window(columns, y_pred=col(plan.prediction),
                    y_true=col(plan.label) if labels else None,
                    y_score=part[list(plan.class_scores)].to_numpy(dtype=float)
                    if plan.class_scores else None,
                    X=part[list(plan.features)] if plan.features else None,
                    classes=plan.classes, missing=plan.missing)
    return _multiclass.summarize_window(window, intersection=plan.intersection,
                                        spec=plan.spec, model=plan.model,
                                        version=plan.version, start=start, end=end)


def _prepare(plan: PartitionPlan, part: Any) -> tuple[Any, dict[str, int], int]:
    """Apply the monitor's invalid-row policy of the model's task (:mod:`fairmonitor.monitor`)."""
    if plan.classes is not None:
        return _multiclass.prepare_columns(part, label=plan.label, prediction=plan.prediction,
                                           classes=plan.classes, scores=plan.class_scores)
    return prepare(part, score=plan.score, prediction=plan.prediction, label=plan.label,
                   task=plan.task)


#: the output columns of :func:`summarize_partition`, and their Spark types (after the key's)
OUTPUT = ("window", "rows", "summary", "labelled", "unlabelled", "invalid_score",
          "invalid_prediction")
OUTPUT_TYPES = ("rows long, summary binary, labelled long, unlabelled binary, "
                "invalid_score long, invalid_prediction long")


def _window_row(plan: PartitionPlan, part: Any, key: Any) -> tuple[Any, ...] | None:
    """One window's output row: its labelled and unlabelled valid rows' summaries and counts.

    The monitor's policy (:func:`fairmonitor.monitor.rows.prepare`): invalid scores and
    predictions are dropped and counted, a missing label means not labelled yet. Any error
    names the window (never a row number local to this partition).
    """
    try:
        rows, rejected, _ = _prepare(plan, part)
        if plan.label is None:
            labelled = np.ones(len(rows), dtype=bool)
        else:
            labelled = rows[plan.label].notna().to_numpy()
        with_labels = _summary_bytes(plan, rows.loc[labelled].reset_index(drop=True), key,
                                     plan.label is not None) if labelled.any() else b""
        without = _summary_bytes(plan, rows.loc[~labelled].reset_index(drop=True), key,
                                 False) if not labelled.all() else b""
    except InvalidInputError as exc:
        raise InvalidInputError(f"{_window_name(key, plan)}: {exc}") from None
    if not (with_labels or without or rejected):
        return None  # every row of this window and partition was dropped (missing="drop")
    return (key, len(part), with_labels or None,
            int(labelled.sum()) if with_labels else 0, without or None,
            rejected.get("invalid_score", 0), rejected.get("invalid_prediction", 0))


def summarize_partition(plan: PartitionPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInPandas`` function: this partition's summaries, one row per window.

    The partition's Arrow batches are joined into chunks of about ``plan.chunk_rows`` rows,
    each chunk summarized per window and the chunks' summaries merged per window, so a
    partition gives one summary per window (not one per batch or chunk) while its worker
    holds one chunk of rows at a time. Rows whose window key is null (no timestamp) are
    counted in one row with a null summary. Per window: ``summary`` of the labelled valid rows
    (every valid row without a label column), ``unlabelled`` of the valid rows without a label
    (summarized without labels), ``labelled`` how many rows ``summary`` holds, and the rows
    dropped as invalid.
    """
    import pandas as pd

    rows: list[tuple[Any, ...]] = []
    pending: list[Any] = []
    held = 0
    for batch in batches:
        if len(batch):
            pending.append(batch)
            held += len(batch)
        if held >= plan.chunk_rows:
            rows += _chunk_rows(plan, pending)
            pending, held = [], 0
    if pending:
        rows += _chunk_rows(plan, pending)
    if not rows:
        return
    out = pd.DataFrame(_combined(rows), columns=list(OUTPUT))
    if plan.key_is_long:
        out["window"] = out["window"].astype("Int64")  # nullable: the undated row's key
    yield out


def _chunk_rows(plan: PartitionPlan, frames: list[Any]) -> list[tuple[Any, ...]]:
    """One chunk's output rows: the undated count, then one row per window in key order."""
    import pandas as pd

    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    rows: list[tuple[Any, ...]] = []
    undated = frame[KEY].isna().to_numpy()
    if undated.any():
        rows.append((None, int(undated.sum()), None, 0, None, 0, 0))
        frame = frame.loc[~undated]
    for key, part in frame.groupby(KEY, sort=True):
        row = _window_row(plan, part.reset_index(drop=True), key)
        if row is not None:
            rows.append(row)
    return rows


def _combined(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Merge the chunks' rows of each window (and the undated counts) into one row each.

    >>> _combined([(None, 2, None, 0, None, 0, 0), (None, 3, None, 0, None, 0, 0)])
    [(None, 5, None, 0, None, 0, 0)]
    """
    by_key: dict[Any, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_key.setdefault(row[0], []).append(row)
    out = []
    for key in sorted(by_key, key=lambda k: (k is not None, k)):  # undated first, as before
        same = by_key[key]
        if len(same) == 1:
            out.append(same[0])
            continue
        out.append((key, sum(r[1] for r in same),
                    _merged_blob([r[2] for r in same if r[2] is not None]),
                    sum(r[3] for r in same),
                    _merged_blob([r[4] for r in same if r[4] is not None]),
                    sum(r[5] for r in same), sum(r[6] for r in same)))
    return out


def _merged_blob(blobs: list[Any]) -> bytes | None:
    """Return the serialized merge of serialized summaries (None if there are none)."""
    if not blobs:
        return None
    if len(blobs) == 1:
        return bytes(blobs[0])
    return to_bytes(merge_all([from_bytes(bytes(b)) for b in blobs]))


def merge_window(frame: Any) -> Any:
    """``applyInPandas`` function: one window's partition summaries merged into one row.

    ``frame`` holds every row :func:`summarize_partition` gave for one window (or for the
    undated rows, whose key is null); the output is one row of the same columns plus
    ``partials``, how many partition summaries went into it. Run per window on the executors
    (``groupBy("window").applyInPandas``), so the driver receives one summary (and one of the
    unlabelled rows) per window whatever the number of partitions.
    """
    import pandas as pd

    labelled = [b for b in frame["summary"].tolist() if b is not None]
    unlabelled = [b for b in frame["unlabelled"].tolist() if b is not None]
    key = frame["window"].iloc[0]
    if pd.isna(key):
        key = None
    elif isinstance(key, np.integer | np.floating):
        key = key.item()  # a Python number: the one-row object column converts to Arrow
    row = {"window": key, "rows": int(frame["rows"].sum()),
           "summary": _merged_blob(labelled), "labelled": int(frame["labelled"].sum()),
           "unlabelled": _merged_blob(unlabelled),
           "invalid_score": int(frame["invalid_score"].sum()),
           "invalid_prediction": int(frame["invalid_prediction"].sum()),
           "partials": len(labelled) + len(unlabelled)}
    return pd.DataFrame([row], columns=[*OUTPUT, "partials"])
