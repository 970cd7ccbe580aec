"""A window evaluated from its source's summaries, never its rows (``source: {kind: spark}``).

A source with ``window_summaries`` (:class:`.sources.spark.SparkSource`) summarizes a batch of
windows where the rows are (on Spark's executors) and returns per window the summary of every
valid row, the summary of the labelled rows and the counts (:class:`fairmonitor.spark.windows
.WindowParts`); :func:`report_of_parts` evaluates them phase by phase exactly as
``job._evaluate_frame`` evaluates a window's rows: label-free metrics on every valid row, label
metrics on the labelled rows, and the same summaries stored for the rollups. Values equal the
row path's while every group holds at most ``summaries.max_raw`` rows (the model's summary
spec, which the rollups store); the row metrics (HFM, CFair, robustness) run on each group's
row sample (``summaries.sample_size`` rows), as in a rollup.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..exceptions import InvalidInputError, MissingColumnError
from ..report.evaluate import WindowReport, evaluate_summary
from ..summaries.multiclass import replace
from .columns import configured_columns, feature_columns, missing_message
from .config import ModelConfig
from .merge import merge_reports
from .rollups import store_spec

__all__ = ["Batch", "fetch_batch", "report_of_parts", "summarizes"]

Span = tuple[datetime, datetime]


def summarizes(source: Any) -> bool:
    """Return True for a source that gives window summaries instead of rows."""
    return callable(getattr(source, "window_summaries", None))


@dataclasses.dataclass(frozen=True)
class Batch:
    """The summarized windows of one call: what each asked span holds, or why none does.

    ``stage`` is ``"data"`` (a configured column is missing, a value cannot be read: the
    config or the data must be fixed) or ``"source"`` (Spark down: retried next tick).
    """

    spans: frozenset[Span]
    windows: Mapping[Span, Any] = dataclasses.field(default_factory=dict)
    error: str | None = None
    stage: str = "source"


def _summary_kwargs(cfg: ModelConfig, columns: Sequence[str], labels: bool) -> dict[str, Any]:
    """Return what the source summarizes: the model's columns, spec and policies.

    A regression model's also say its task and ``prediction_madd``'s ``value_range``, a
    multiclass model's its classes and their score columns (the summary the row path stores:
    ``job._summary_of``).
    """
    kwargs = dict(sensitive_features=list(cfg.sensitive_features),
                  label=cfg.label if labels else None, score=cfg.score,
                  prediction=cfg.prediction, features=feature_columns(cfg, columns),
                  threshold=cfg.decision_threshold, intersection=cfg.intersection,
                  spec=store_spec(cfg), missing=cfg.missing)
    if cfg.task == "regression":
        kwargs.update(task="regression", features=[],
                      value_range=cfg.options.get("prediction_madd", {}).get("value_range"))
    if cfg.task == "multiclass":  # one summary per class
        kwargs.update(classes=cfg.classes, class_scores=tuple(cfg.class_scores.values()))
    return kwargs


def _column_problem(cfg: ModelConfig, columns: Sequence[str], labels: bool) -> str | None:
    """Say which configured column the source's table lacks, as ``frame_problem`` does."""
    missing = [c for c in configured_columns(cfg, labels=labels) if c[1] not in columns]
    return missing_message(cfg, missing, list(columns)) if missing else None


def fetch_batch(cfg: ModelConfig, source: Any, spans: Sequence[Span], phase: str) -> Batch:
    """Summarize ``spans`` in one call of the source (a Spark job, not one a window)."""
    asked = frozenset(spans)
    labels = phase != "predictions" and cfg.label is not None
    try:
        columns = list(source.table_columns())
        problem = _column_problem(cfg, columns, labels)
        if problem is not None:
            return Batch(asked, error=problem, stage="data")
        windows = source.window_summaries(cfg.name, list(spans),
                                          **_summary_kwargs(cfg, columns, labels))
    except MissingColumnError as exc:
        return Batch(asked, error=f"models.{cfg.name}.{exc.key}: {exc}", stage="data")
    except InvalidInputError as exc:  # a value the policy cannot read: fix the data or config
        return Batch(asked, error=str(exc), stage="data")
    except Exception as exc:  # WindowUnavailableError, or a bug in a third-party source
        return Batch(asked, error=f"{type(exc).__name__}: {exc}")
    return Batch(asked, windows=dict(windows))


def _versioned(summary: Any, version: str) -> Any:
    return None if summary is None else replace(summary, version=version)  # multiclass too


def report_of_parts(cfg: ModelConfig, parts: Any, phase: str, metrics: Sequence[str], *,
                    version: str, rng: Any, stored: dict[str, bytes] | None = None
                    ) -> tuple[WindowReport, bool]:
    """Return the phase's report from the window's parts, and whether labels went into it.

    ``job._evaluate_frame`` on summaries: phase ``predictions`` (or no label) evaluates every
    valid row without labels; ``labels`` the labelled rows; ``full`` every metric on the
    labelled rows when all are labelled, else the label-free metrics on every valid row and
    the label metrics on the labelled ones (none: NaN, "labels not available"). The summaries
    evaluated go into ``stored`` (serialized) for the rollups, under the row path's part names.
    """
    from ..summaries import to_bytes  # any kind

    evaluation = cfg.evaluation.replace(rng=rng)
    every, labelled = _versioned(parts.every, version), _versioned(parts.labelled, version)

    def run(summary: Any, names: Sequence[str], part: str | None) -> WindowReport:
        if stored is not None and part is not None and cfg.rollups:
            stored[part] = to_bytes(summary)
        return evaluate_summary(summary, metrics=list(names), evaluation=evaluation)

    if phase == "predictions" or cfg.label is None:
        return run(every, metrics, "predictions"), False
    if phase == "labels" or parts.labelled_rows == parts.n_rows:
        return run(labelled, metrics, "labels"), True
    free = [m for m in metrics if m in cfg.label_free_metrics]
    needing = [m for m in metrics if m in cfg.label_metrics]
    report = run(every, free, "predictions")
    if needing:
        other = run(labelled if labelled is not None else every, needing,
                    "labels" if labelled is not None else None)
        report = merge_reports(report, other)
    return report, labelled is not None

