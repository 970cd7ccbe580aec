"""The monitor config as frozen, validated dataclasses (built by :mod:`.schema`)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from ...report.defaults import MIN_CONDITION_SIZE, MIN_GROUP_SIZE
from ...report.evidence import Budget
from ...report.options import EvaluationOptions
from ...report.registry import METRICS, metric_task
from ...report.thresholds import Threshold

__all__ = [
    "DEFAULT_CHECKPOINT", "DEFAULT_LISTEN_ADDRESS", "DEFAULT_MLFLOW_SPOOL", "DEFAULT_TRACKING_URI",
    "CheckpointConfig", "ModelConfig", "MonitorConfig", "ReferenceConfig", "RollupConfig",
    "SourceConfig",
]

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_LISTEN_ADDRESS = "127.0.0.1:9464"
DEFAULT_CHECKPOINT = "fairmonitor-checkpoint.json"
DEFAULT_MLFLOW_SPOOL = "fairmonitor-mlflow-pending.jsonl"


@dataclass(frozen=True)
class SourceConfig:
    """Where a model's logged predictions are read from (:mod:`fairmonitor.monitor.sources`)."""

    kind: Literal["sql", "files", "spark"]
    url: str | None = None
    table: str = "predictions"
    path: Path | None = None
    pattern: str = "**/*.parquet"
    timestamp_column: str = "timestamp"
    model_column: str | None = "model"
    version_column: str | None = "version"
    features_column: str | None = "features"
    #: most time one window's fetch may take before it counts as a source error
    timeout: timedelta = timedelta(minutes=5)
    #: kind spark: the session's master (e.g. ``local[2]``) or Spark Connect URL (``sc://...``);
    #: neither: the session spark-submit or SPARK_REMOTE set up
    master: str | None = None
    remote: str | None = None
    #: kind spark: a date partition column (``dt``) of each row's date, to prune partitions
    date_column: str | None = None


@dataclass(frozen=True)
class CheckpointConfig:
    """Where monitor progress is kept: a JSON file or a table in a SQL store."""

    kind: Literal["file", "sql"]
    path: Path | None = None
    url: str | None = None
    table: str = "fairmonitor_checkpoint"
    #: how long the leader's lease lasts without renewal (:mod:`..leadership`); a standby takes
    #: over within it (plus a third) after the leader died or hung; None: the default, 30 s
    lease: timedelta | None = None


@dataclass(frozen=True)
class ReferenceConfig:
    """Reference data on which each new model version is evaluated."""

    path: Path
    metrics: tuple[str, ...] | None = None
    label: str | None = None
    score: str | None = None
    prediction: str | None = None
    features: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RollupConfig:
    """A longer window served by merging the model's stored window summaries.

    ``window`` and ``every`` are multiples of the model's (tumbling) window; ``name`` is the
    window as written (``1d``): the ``window`` label of the rollup gauges and the MLflow key
    prefix ``fairness_<name>/``.
    """

    name: str
    window: timedelta
    every: timedelta


@dataclass(frozen=True)
class AlertWindows:
    """Consecutive windows before an alert fires; the monitor counts them (``monitor/streaks``).

    ``warning`` and ``critical``: breaching windows of ``FairnessThresholdBreached``;
    ``undefined``: windows undefined for a reason that alerts (``FairnessMetricUndefined``) and
    windows without rows (``FairmonitorNoTraffic``).
    """

    warning: int = 3
    critical: int = 2
    undefined: int = 2

    def required(self, severity: str) -> int:
        """Breaching windows before the alert of ``severity`` fires."""
        return self.warning if severity == "warning" else self.critical


@dataclass(frozen=True)
class ModelConfig:
    """Everything the monitor needs to know about one model."""

    name: str
    source: SourceConfig
    sensitive_features: tuple[str, ...]
    window: timedelta
    every: timedelta
    mode: Literal["tumbling", "sliding"]
    metrics: tuple[str, ...]
    registered_model: str | None = None
    model_version: str | None = None
    model_alias: str | None = None
    tracking_uri: str = DEFAULT_TRACKING_URI
    experiment: str = ""
    label: str | None = None
    score: str | None = None
    prediction: str | None = None
    features: tuple[str, ...] | None = None
    decision_threshold: float = 0.5
    labels_after: timedelta = timedelta(0)
    #: how long after its labelled evaluation a window with missing labels is evaluated again
    #: when more labels arrive (default: labels_after; 0s: never)
    relabel_within: timedelta = timedelta(0)
    #: a window whose labelled fraction is below this when its labels are due (labels_after
    #: after it closed) has overdue labels: fairmonitor_labels_overdue_windows, not no traffic
    min_label_coverage: float = 0.5
    start: datetime | None = None
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: the evaluator's defaults too (report/defaults.py): the same rows, the same numbers
    min_group_size: int = MIN_GROUP_SIZE
    min_condition_size: int = MIN_CONDITION_SIZE
    #: level of each value's confidence interval (None: no intervals)
    confidence_level: float | None = 0.95
    intersection: bool = True
    seed: int = 0
    thresholds: tuple[Threshold, ...] = ()
    reference: ReferenceConfig | None = None
    #: Routing labels copied onto every alert of the model (``fairmonitor_model_info``).
    team: str | None = None
    owner: str | None = None
    #: missing sensitive values: "group" (own group "missing"), "drop" (rows left out, counted
    #: in the report's notes) or "raise"; one policy or a mapping {attribute: policy}
    missing: str | Mapping[str, str] = "group"
    #: longer windows merged from the stored window summaries (issue 17)
    rollups: tuple[RollupConfig, ...] = ()
    #: stored summaries keep raw sorted scores for groups up to this many rows, cells above
    summary_max_raw: int = 8192
    #: rows per group kept in a stored summary's sample (HFM and CFair on rollups)
    summary_sample_size: int = 256
    #: consecutive windows before each alert fires (counted by the monitor)
    alert_windows: AlertWindows = field(default_factory=AlertWindows)
    #: the false-page budget of the ``compare: budget`` thresholds (``alerting.budget``);
    #: ``Budget()`` when a threshold uses it and none is configured, else None
    budget: Budget | None = None
    #: what the model predicts (``task:``, report/reading.py's MODEL_TASKS): "binary" (0/1
    #: predictions, scores in [0, 1]), "multiclass" (every class one-vs-rest,
    #: report/multiclass.py) or "regression" (continuous prediction and label columns,
    #: docs/regression.md)
    task: str = "binary"
    #: multiclass: the class labels (``classes:``) and each one's probability column
    #: (``scores:``, in the order of ``classes``; empty: hard predictions only)
    classes: tuple[Any, ...] | None = None
    class_scores: Mapping[Any, str] = field(default_factory=dict)

    @functools.cached_property
    def evaluation(self) -> EvaluationOptions:
        """How the model's windows, rollups and versions are evaluated, built once.

        Every evaluation path passes it on (``evaluate_window(..., evaluation=...)``), each
        window with its own ``rng`` (``evaluation.replace(rng=...)``).
        """
        return EvaluationOptions(
            min_group_size=self.min_group_size, min_condition_size=self.min_condition_size,
            intersection=self.intersection, thresholds=self.thresholds, options=self.options,
            threshold=self.decision_threshold, confidence_level=self.confidence_level,
            task=metric_task(self.task))

    @property
    def budget_windows_per_day(self) -> float:
        """Return the independent windows a day, the budget's unit: one per ``window``.

        Sliding windows overlap, so only every ``window / every``-th evaluation may feed the
        evidence.
        """
        return timedelta(days=1) / self.window

    def budget_series(self, attributes: Sequence[str]) -> tuple[tuple[str, str, str], ...]:
        """Return the (metric, attribute, severity) series that page on the budget.

        ``attributes`` are the evaluated ones (the intersection included, which only a
        threshold naming it governs); the most specific threshold governs, as in
        :func:`fairmonitor.report.thresholds.evaluate_thresholds`.
        """
        inter = {a for a in attributes if a not in self.sensitive_features}
        out = []
        for metric in dict.fromkeys(t.metric for t in self.thresholds):
            for attribute in attributes:
                matching = [t for t in self.thresholds if t.applies_to(
                    metric, attribute, intersection=attribute in inter)]
                if not matching:
                    continue
                best = max(matching, key=lambda t: t.attribute is not None)
                if best.compare == "budget":
                    out += [(metric, attribute, sev) for sev in ("warning", "critical")
                            if getattr(best, sev) is not None]
        return tuple(out)

    def page_level(self, attributes: Sequence[str]) -> float | None:
        """Return the budget's page level over :meth:`budget_series` (None without any)."""
        n = len(self.budget_series(attributes))
        if self.budget is None or n == 0:
            return None
        return self.budget.page_level(windows_per_day=self.budget_windows_per_day, n_series=n)

    @property
    def model_uri(self) -> str | None:
        """``models:/name@alias``, ``models:/name/version``, ``models:/name`` or None."""
        if self.registered_model is None:
            return None
        if self.model_alias:
            return f"models:/{self.registered_model}@{self.model_alias}"
        if self.model_version:
            return f"models:/{self.registered_model}/{self.model_version}"
        return f"models:/{self.registered_model}"

    @property
    def label_metrics(self) -> tuple[str, ...]:
        """The configured metrics that need ground truth."""
        return tuple(m for m in self.metrics if METRICS[m].needs_labels)

    @property
    def label_free_metrics(self) -> tuple[str, ...]:
        """The configured metrics computable as soon as the window closes."""
        return tuple(m for m in self.metrics if not METRICS[m].needs_labels)

    @property
    def needs_features(self) -> bool:
        """True if some configured metric reads the feature matrix."""
        return any(METRICS[m].needs_features for m in self.metrics)


@dataclass(frozen=True)
class MonitorConfig:
    """The whole monitor: models plus global settings."""

    models: Mapping[str, ModelConfig]
    checkpoint: CheckpointConfig
    mlflow_spool: Path | None = None
    listen_address: str = DEFAULT_LISTEN_ADDRESS
    catch_up: int = 100
    timezone: str = "UTC"
    #: Retry interval (default: the smallest ``every``); windows are evaluated when they close.
    tick: timedelta = timedelta(minutes=1)
    #: most time one MLflow request may take (no retries within a tick: the next tick retries)
    mlflow_timeout: timedelta = timedelta(seconds=10)

    @property
    def host(self) -> str:
        """Host part of ``listen_address`` (brackets of an IPv6 address removed)."""
        return self.listen_address.rsplit(":", 1)[0].strip("[]")

    @property
    def port(self) -> int:
        """Port part of ``listen_address``."""
        return int(self.listen_address.rsplit(":", 1)[1])
