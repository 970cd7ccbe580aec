"""What was last reported per model, kept in the checkpoint so a restart can show it again.

Without it a restarted monitor exported nothing until the next window closed: every fairness
series vanished and every firing alert resolved on each deploy. The job folds each completed
window into the model's snapshot (:func:`fold`) and saves it with the watermark in one
checkpoint write, so the snapshot always describes exactly the windows the checkpoint says are
done. At start the service hands it to the Prometheus collector
(``FairnessCollector.restore``) and to the threshold-crossing log.

The snapshot is plain JSON: per (metric, attribute) the value (``None`` for NaN), the version,
the reason of an undefined value, the threshold status and the window it came from; per model
the latest window, its rows and group sizes and when it was evaluated.

>>> from types import SimpleNamespace as NS
>>> from datetime import datetime, UTC
>>> end = datetime(2026, 11, 22, 1, tzinfo=UTC)
>>> report = NS(values={("dp", "sex"): 0.25}, reasons={}, statuses={("dp", "sex"): "warning"},
...             group_counts={"sex": {"F": 10, "M": 12}})
>>> result = NS(model="credit", version="3", start=end.replace(hour=0), end=end, phase="full",
...             n_rows=22, report=report, metrics=("dp",), evaluated_at=end, errors={},
...             finished_at=1795309200.5)
>>> snap = fold({}, result)
>>> snap["values"]["dp"]["sex"]["value"], snap["values"]["dp"]["sex"]["window_end"]
(0.25, '2026-11-22T01:00:00+00:00')
>>> snap["finished_at"]  # wall clock of the success, for the restored liveness gauge
1795309200.5
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["fold", "overdue_streak"]


def _number(v: Any) -> float | None:
    v = float(v)
    return None if math.isnan(v) else v  # JSON has no NaN


def _rollup(previous: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """Return the snapshot with a rollup window's values under ``rollups[<name>]``.

    The model's own values stay as they are.

    As the exporter shows them: a store fault (no report, an error) changes nothing, and a
    re-evaluation after late labels (phase ``labels``) does not move the rollup's window end.
    """
    if result.report is None and result.errors:
        return dict(previous)
    rollups = dict(previous.get("rollups") or {})
    entry = dict(rollups.get(result.rollup) or {})
    entry["values"] = _fold_values(entry.get("values") or {}, result)
    if result.phase != "labels":
        entry.update(window_end=result.end.isoformat(),
                     merged_windows=int(getattr(result, "merged_windows", 0)),
                     samples=int(result.n_rows))
    rollups[result.rollup] = entry
    return {**previous, "rollups": rollups}


def _fold_values(previous: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """Per metric and attribute, what ``result`` reported on top of ``previous``."""
    values = {m: dict(attrs) for m, attrs in previous.items()}
    report = result.report
    window = {"window_start": result.start.isoformat(), "window_end": result.end.isoformat(),
              "phase": result.phase}
    if report is not None:
        for (metric, attr), value in report.values.items():
            iv = getattr(report, "intervals", {}).get((metric, attr))
            bounds = ({"lower": _number(iv.lower), "upper": _number(iv.upper),
                       "chance": _number(iv.chance)} if iv is not None else {})
            values.setdefault(metric, {})[attr] = {
                "value": _number(value), "version": result.version,
                "reason": (report.reasons.get((metric, attr)) or "")[:200],
                "status": report.statuses.get((metric, attr)), **bounds, **window}
    else:  # an empty window: what this phase computes is now undefined, not stale
        why = ("labels overdue: no row labelled" if getattr(result, "labels_overdue", False)
               else "no rows in the window")
        for metric in result.metrics:
            for attr in values.get(metric, {}):
                values[metric][attr] = {"value": None, "version": result.version,
                                        "reason": why, "status": None, **window}
    return values


def overdue_streak(previous: Any, result: Any) -> tuple[int, int]:
    """(windows, index): the latest labelled windows in a row whose labels are overdue.

    A labelled evaluation (``label_coverage`` set) of a window newer than ``index`` adds one
    when its labels are overdue and resets to 0 otherwise; the same window again (late labels)
    can only reset it; an older window's late labels, a window without rows or a phase
    without labels change nothing, so the count stays up while labels are missing instead of
    toggling with the ticks.

    >>> from types import SimpleNamespace as NS
    >>> s = (0, -1)
    >>> for i, late in ((5, True), (6, True), (6, True), (4, False)):
    ...     s = overdue_streak(s, NS(index=i, label_coverage=0.0, labels_overdue=late))
    >>> s
    (2, 6)
    >>> overdue_streak(s, NS(index=6, label_coverage=0.9, labels_overdue=False))
    (0, 6)
    """
    windows, index = (int(previous[0]), int(previous[1])) if previous else (0, -1)
    if getattr(result, "label_coverage", None) is None or result.index < index:
        return windows, index
    late = bool(getattr(result, "labels_overdue", False))
    if result.index == index:
        return (windows if late else 0), index
    return (windows + 1 if late else 0), int(result.index)


def fold(previous: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """Return the snapshot after ``result`` (a ``WindowResult``) on top of ``previous``."""
    if getattr(result, "rollup", ""):
        return _rollup(previous, result)
    snap = {k: v for k, v in previous.items() if k != "values"}
    values = _fold_values(previous.get("values") or {}, result)
    report = result.report
    snap["values"] = values
    if getattr(result, "label_coverage", None) is not None:
        snap["labels_overdue"] = list(overdue_streak(previous.get("labels_overdue"), result))
    if result.phase != "labels":  # the model-level gauges follow the latest closed window
        snap.update(version=result.version or snap.get("version", ""),
                    window_end=result.end.isoformat(), samples=int(result.n_rows),
                    groups={str(a): {str(k): int(n) for k, n in g.items()}
                            for a, g in (report.group_counts.items()
                                         if report is not None else ())})
    if result.evaluated_at is not None:
        snap["evaluated_at"] = result.evaluated_at.isoformat()
    snap["finished_at"] = float(result.finished_at)  # wall clock: what liveness is restored from
    return snap
