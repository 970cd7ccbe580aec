"""One window's report from its Spark summaries, as the monitor evaluates a partly labelled one.

Label-free metrics on every valid row, label metrics on the labelled ones, as the monitor
evaluates a window whose labels are still arriving.

:func:`evaluate_parts` is what :func:`~fairmonitor.spark.evaluate_spark` calls per window; the
split and the merge are the monitor's (``monitor/job.py``'s phase ``full`` and
:func:`fairmonitor.monitor.merge.merge_reports`), and the report's notes say how many rows were
labelled and how many were dropped as invalid (:mod:`fairmonitor.monitor.rows`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from ..monitor.merge import merge_reports
from ..report import WindowReport, evaluate_summary
from ..report.registry import METRICS
from ..summaries import WindowSummary
from .summarize import SparkSummaries

__all__ = ["evaluate_parts", "policy_notes"]


def _label_metrics(labelled: WindowSummary, metrics: list[str] | None,
                   predict: Any) -> list[str]:
    """Return the requested metrics that need labels; by default those the summary can compute."""
    if metrics is not None:
        return [m for m in metrics if METRICS[m].needs_labels]

    def has(name: str) -> bool:  # as evaluate_summary decides a default metric's inputs
        if name == "X":
            return bool(labelled.features)
        if name == "predict":
            return predict is not None
        return name in labelled.inputs

    return [s.name for s in METRICS.values()
            if s.needs_labels and all(has(i) for i in s.inputs)]


def policy_notes(summaries: SparkSummaries, key: Any) -> tuple[str, ...]:
    """Say what the invalid-row policy did to the window: rows dropped, labels missing."""
    notes = []
    rejected = summaries.rejected.get(key)
    if rejected:
        counts = ", ".join(f"{reason} {n}" for reason, n in sorted(rejected.items()))
        notes.append(f"rows dropped before any metric: {counts}")
    summary = summaries.windows.get(key)
    labelled = summaries.labelled_rows.get(key)
    if summary is not None and labelled is not None and labelled < summary.n_rows:
        notes.append(f"labels: {labelled} of {summary.n_rows} rows labelled (coverage "
                     f"{labelled / summary.n_rows:.3f}); the label metrics are on the labelled "
                     "rows")
    return tuple(notes)


def evaluate_parts(summaries: SparkSummaries, key: Any, *, metrics: Iterable[str] | None = None,
                   **kwargs: Any) -> WindowReport:
    """Return the window's report: ``evaluate_summary`` of its summary, or of its two parts merged.

    ``kwargs`` go to :func:`fairmonitor.report.evaluate_summary` (``results`` to both parts).
    """
    wanted = None if metrics is None else list(metrics)
    summary, labelled = summaries.windows[key], summaries.labelled.get(key)
    if labelled is None:
        report = evaluate_summary(summary, metrics=wanted, **kwargs)
    else:
        needing = _label_metrics(labelled, wanted, kwargs.get("predict"))
        free = None if wanted is None else [m for m in wanted if m not in needing]
        report = evaluate_summary(summary, metrics=free, **kwargs)
        # by default, the label metrics were skipped on the unlabelled rows: not any more
        report = dataclasses.replace(report, skipped={
            m: r for m, r in report.skipped.items() if m not in needing})
        if needing:
            report = merge_reports(report, evaluate_summary(labelled, metrics=needing,
                                                            **kwargs))
    notes = policy_notes(summaries, key)
    return dataclasses.replace(report, notes=(*report.notes, *notes)) if notes else report
