"""What runs on the executors: one partition's rows in, one summary per window out.

No pyspark import here: :func:`summarize_partition` is the function given to
``DataFrame.mapInPandas``; it reads pandas batches and yields a pandas frame of
``(window, rows, summary)`` rows, ``summary`` being :func:`fairmonitor.summaries.to_bytes` of
the window's rows in this partition (``None`` for rows without a window key: no timestamp).
Each window's rows get what :class:`fairmonitor.report.Window` does to them (the missing-value
policy, predictions from scores) and the input checks of
:func:`~fairmonitor.report.evaluate_window`, so a partition's summary is the summary
``evaluate_window`` builds of those rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import check_binary
from ..summaries import SummarySpec, summarize, to_bytes
from ..utils.groups import apply_missing_policy, column_values, encode_attributes

__all__ = ["KEY", "PartitionPlan", "summarize_partition", "window_bounds"]

#: Name of the window key column handed to the executors (a window's start in microseconds
#: since the epoch, the user's window column, or 0 for the whole data).
KEY = "__fairmonitor_window__"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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


def _summary_bytes(plan: PartitionPlan, part: Any, key: Any) -> bytes:
    """Serialize the summary of one window's rows of this partition."""
    columns, keep = _sensitive(plan, part)
    if keep is not None:
        part = part.loc[keep].reset_index(drop=True)
        columns = {c: v[keep] for c, v in columns.items()}
    if not len(part):
        return b""

    def col(name: str | None) -> Any:
        return None if name is None else part[name].to_numpy()

    # evaluate_window's checks, strict: an invalid input fails the Spark job with its message
    y_true = None if plan.label is None else check_binary(col(plan.label), "y_true")
    y_pred = None if plan.prediction is None else check_binary(col(plan.prediction), "y_pred")
    start, end = window_bounds(key, plan.window_us)
    summary = summarize(columns,
                        y_pred=None if y_pred is None else y_pred.astype(np.int8),
                        y_score=col(plan.score),
                        y_true=None if y_true is None else y_true.astype(np.int8),
                        X=part[list(plan.features)] if plan.features else None,
                        threshold=plan.threshold, intersection=plan.intersection,
                        groups=encode_attributes(columns, intersection=plan.intersection,
                                                 validated=True),
                        spec=plan.spec, model=plan.model, version=plan.version,
                        start=start, end=end)
    return to_bytes(summary)


def summarize_partition(plan: PartitionPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInPandas`` function: this partition's summaries, one row per window.

    The partition's Arrow batches are joined first (one summary per window and partition, not
    per batch); rows whose window key is null (no timestamp) are counted in one row with a null
    summary.
    """
    import pandas as pd

    frames = [b for b in batches if len(b)]
    if not frames:
        return
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    rows: list[tuple[Any, int, bytes | None]] = []
    undated = frame[KEY].isna().to_numpy()
    if undated.any():
        rows.append((None, int(undated.sum()), None))
        frame = frame.loc[~undated]
    for key, part in frame.groupby(KEY, sort=True):
        blob = _summary_bytes(plan, part.reset_index(drop=True), key)
        if blob:  # empty: every row of this window and partition was dropped (missing="drop")
            rows.append((key, len(part), blob))
    out = pd.DataFrame(rows, columns=["window", "rows", "summary"])
    if plan.key_is_long:
        out["window"] = out["window"].astype("Int64")  # nullable: the undated row's key
    yield out
