"""One window's report from its Spark summaries, as the monitor evaluates a partly labelled one.

Label-free metrics on every valid row, label metrics on the labelled ones, as the monitor
evaluates a window whose labels are still arriving. :func:`evaluate_group` does it on an
executor (``groupBy("window").applyInPandas``): a window's partition summaries merged and
evaluated where they are, the pickled report the only thing the driver receives.

:func:`evaluate_parts` is what :func:`~fairmonitor.spark.evaluate_spark` calls per window; the
split and the merge are the monitor's (``monitor/job.py``'s phase ``full`` and
:func:`fairmonitor.monitor.merge.merge_reports`), and the report's notes say how many rows were
labelled and how many were dropped as invalid (:mod:`fairmonitor.monitor.rows`).
"""

from __future__ import annotations

import dataclasses
import pickle
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..monitor.merge import merge_reports
from ..report import WindowReport, evaluate_summary
from ..report.options import EvaluationOptions
from ..report.registry import METRICS
from ..summaries import WindowSummary
from ._partition import PartitionPlan, merge_window
from .summarize import SparkSummaries, merge_partials

__all__ = ["EvaluationJob", "evaluate_group", "evaluate_key", "evaluate_parts",
           "group_evaluator", "policy_notes"]


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


_HFM_NOTE = ("hfm_average: up to {} query rows per attribute scanned exactly against every "
             "row (unbiased, with its 95% interval), not on the row sample")


def evaluate_key(summaries: SparkSummaries, key: Any, *, metrics: list[str] | None,
                 predict: Any, scanned: Mapping[str, Any], hfm_queries: int | None,
                 evaluation: EvaluationOptions) -> WindowReport:
    """One window's report, with ``hfm_average`` from the scan over all rows where given.

    What :func:`~fairmonitor.spark.evaluate_spark` computes per window, on the driver or on
    an executor (:func:`evaluate_group`).
    """
    given = {("hfm_average", attr): found for attr, found in scanned.items()}
    report = evaluate_parts(summaries, key, metrics=metrics, predict=predict, results=given,
                            evaluation=evaluation)
    if given and any(not isinstance(r, Exception) and k in report.values
                     for k, (r, _) in given.items()):
        report = dataclasses.replace(report, notes=(*report.notes,
                                                    _HFM_NOTE.format(hfm_queries)))
    return report


@dataclass(frozen=True)
class EvaluationJob:
    """What each executor needs to evaluate its windows (pickled once per task).

    ``scanned`` holds ``hfm_average``'s results per window key (the raw key of
    :func:`summarize_partition`) and attribute; ``failed`` the scan's exception, if it
    failed; ``seed`` the entropy of each window's ``rng`` when the caller gave a Generator.
    """

    plan: PartitionPlan
    metrics: list[str] | None
    predict: Any
    evaluation: EvaluationOptions
    scanned: Mapping[Any, Mapping[str, Any]]
    failed: Exception | None
    hfm_queries: int | None
    seed: int | None = None


def _window_rng(job: EvaluationJob, key: Any) -> Any:
    """Return the window's ``rng``: the caller's seed or None as given, else its own.

    A Generator cannot be shared across executors: each window draws from its own, seeded by
    the caller's Generator (once, on the driver) and the window's key.
    """
    if job.seed is None:
        return job.evaluation.rng
    return np.random.default_rng([job.seed, zlib.crc32(repr(key).encode())])


def evaluate_group(job: EvaluationJob, frame: Any) -> Any:
    """``applyInPandas`` function: merge one window's partition summaries and evaluate them.

    Returns one row: the key, the rows, and the pickled ``WindowReport`` (None for the rows
    without a window key, which are only counted). The driver receives reports, never
    summaries or rows.
    """
    import pandas as pd

    row = merge_window(frame)
    key = row["window"].iloc[0]
    key = None if pd.isna(key) else key.item() if isinstance(key, np.generic) else key
    record = {"window": key, "rows": int(row["rows"].iloc[0]), "report": None}
    if key is not None:
        summaries = merge_partials(row.to_dict("records"), job.plan)
        (out,) = list(summaries.windows) or [None]
        if summaries.windows:
            scanned = job.scanned.get(key, {})
            if job.failed is not None:
                scanned = {a: (job.failed, []) for a in summaries.windows[out].attributes}
            report = evaluate_key(summaries, out, metrics=job.metrics, predict=job.predict,
                                  scanned=scanned, hfm_queries=job.hfm_queries,
                                  evaluation=job.evaluation.replace(rng=_window_rng(job, key)))
            # cloudpickle (Spark's own): the report's read-only mappings, which pickle refuses,
            # become a call of MappingProxyType that plain pickle.loads rebuilds
            from pyspark import cloudpickle

            record["report"] = cloudpickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL)
    return pd.DataFrame([record], columns=["window", "rows", "report"])


def group_evaluator(job: EvaluationJob) -> Any:
    """Return :func:`evaluate_group` bound to ``job``, as a plain function.

    ``applyInPandas`` reads its function's type hints to choose how to call it; a
    ``functools.partial`` has none to read (a warning, an error under ``-W error``).
    """
    def evaluate(frame):  # type: ignore[no-untyped-def]  # no hints: see above
        return evaluate_group(job, frame)
    return evaluate
