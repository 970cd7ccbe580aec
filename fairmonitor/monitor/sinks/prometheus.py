"""Prometheus export of the monitor: a custom collector over the latest report per model.

:class:`FairnessCollector` keeps, per model, an immutable snapshot of the latest value of every
(metric, sensitive attribute) plus the monitor's own health, and builds fresh metric families
from it on every scrape (``docs/content/collector/custom.md`` of prometheus/client_python). A new
result replaces the snapshot by swapping one reference, so a scrape never sees half an update
and label sets that are no longer current (an old model version, a group absent from the last
window) disappear instead of lingering as they would in a ``Gauge``.

Choices:

- Library code never touches the global ``REGISTRY``; the registry is passed in.
- NaN is never exported as a sample: an undefined value becomes
  ``fairmonitor_metric_undefined{..., reason} 1`` with a bounded ``reason`` code instead, so a
  ``> threshold`` rule cannot silently compare against NaN and dashboards can say why.
- Label values are bounded: model names, versions, configured attributes and their groups,
  metric names, robustness levels. Never a timestamp or a row id.
- Self-metrics exist from the start (zeros) for every configured model, so an alert on
  ``fairmonitor_errors_total`` or on staleness works before the first failure. A timestamp of 0
  means "never".
- Values computed on a model version's *reference* data
  (:meth:`FairnessCollector.observe_reference`) are exported only for metrics the production
  windows do not compute (e.g. robustness), so each ``fairmonitor_<metric>`` series has one
  source; the rest goes to MLflow.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from ...report.registry import METRICS, split_class_key
from ...report.thresholds import Threshold, severity_code
from ...utils.groups import INTERSECTION_SEPARATOR
from ..snapshot import overdue_streak

__all__ = ["ERROR_STAGES", "MAX_GROUPS", "NAMESPACE", "OTHER_GROUPS", "REASONS",
           "FairnessCollector", "reason_code"]

NAMESPACE = "fairmonitor"
#: ``stage`` label values of ``fairmonitor_errors_total`` (pre-initialised for every model).
ERROR_STAGES = ("source", "data", "metric", "checkpoint", "rollup", "summary_store", "spool",
                "mlflow", "export", "scheduler")
#: ``reason`` label values of ``fairmonitor_metric_undefined``.
REASONS = ("labels_pending", "labels_overdue", "insufficient_data", "too_few_groups",
           "no_traffic", "error", "undefined")
#: ``fairmonitor_group_samples`` keeps the largest groups of each attribute; the rest are
#: summed under :data:`OTHER_GROUPS`, so the label cannot grow with the data (intersections of
#: three attributes gave 116 series for one model).
MAX_GROUPS = 10
OTHER_GROUPS = "_other"
#: Stages the job records itself; hook stages (export, mlflow) are counted by the caller.
_EVALUATION_STAGES = ("source", "data", "metric", "checkpoint", "rollup", "summary_store")
_TOO_FEW_GROUPS = re.compile(r"fewer than (two|2) groups|single group|no groups?\b")


def reason_code(reason: str | None) -> str:
    """Map a report's free-text reason for a NaN to one of :data:`REASONS`.

    >>> reason_code("labels not available")
    'labels_pending'
    >>> reason_code("demographic_parity_difference is undefined: sensitive attribute 'sex' "
    ...             "has a single group 'F'. Returning nan.")
    'too_few_groups'
    >>> reason_code("abcc is undefined: fewer than two groups of 'race' remain after "
    ...             "min_group_size (kept 'a'). Returning nan.")
    'insufficient_data'
    >>> reason_code("error: boom"), reason_code(None)
    ('error', 'undefined')
    """
    text = (reason or "").lower()
    if text.startswith("labels overdue"):
        return "labels_overdue"
    if text.startswith("labels not available") or "labels pending" in text:
        return "labels_pending"
    if text.startswith("error"):
        return "error"
    if "min_group_size" in text:  # groups exist but are too small: a state, not a silence
        return "insufficient_data"
    if _TOO_FEW_GROUPS.search(text):
        return "too_few_groups"
    return "undefined"


@dataclass(frozen=True, slots=True)
class _Value:
    version: str
    value: float
    reason: str  # a REASONS code; only read when value is NaN
    severity: int | None  # 0/1/2, None when no threshold governs the value or it is NaN
    window_end: float = 0.0  # end of the window the value was computed on (0: reference data)
    lower: float = math.nan  # confidence interval (NaN: none)
    upper: float = math.nan
    chance: float = math.nan  # chance level: what a fair model reads at these group sizes
    compared: float = math.nan  # what the governing threshold compares (value or bound)


@dataclass(frozen=True, slots=True)
class _Model:
    """Immutable snapshot of everything exported for one model."""

    version: str = ""
    values: Mapping[tuple[str, str], _Value] = field(default_factory=dict)
    groups: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: distinct groups per attribute before the MAX_GROUPS cap
    group_totals: Mapping[str, int] = field(default_factory=dict)
    groups_version: str = ""
    #: groups below min_group_size per attribute (left out of every metric)
    small_groups: Mapping[str, int] = field(default_factory=dict)
    # attribute -> ((version, metric, level, ratio), ...)
    robustness: Mapping[str, tuple[tuple[str, str, str, float], ...]] = field(default_factory=dict)
    last_success: float = 0.0
    window_end: float = 0.0
    duration: float = 0.0
    samples: int = 0
    evaluated: int = 0
    errors: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(ERROR_STAGES, 0))
    labels_pending: int = 0
    rejected: Mapping[str, int] = field(default_factory=dict)
    duplicates: int = 0
    label_coverage: float = -1.0  # -1: no labelled evaluation yet
    skipped: int = 0
    label_window_end: float = 0.0
    #: (windows, index) of :func:`..snapshot.overdue_streak`: labelled windows in a row whose
    #: labels are overdue, and the latest labelled window's index
    labels_overdue: tuple[int, int] = (0, -1)
    #: phase -> due windows held back by a data error (0 once a window of the phase passes)
    data_held: Mapping[str, int] = field(default_factory=dict)
    #: rollups: (rollup, metric, attribute) -> value; rollup -> (window end, windows merged)
    rollups: Mapping[tuple[str, str, str], _Value] = field(default_factory=dict)
    rollup_windows: Mapping[str, tuple[float, int]] = field(default_factory=dict)
    #: the alert streaks (``monitor.streaks.Streaks``) after the latest completed window
    streaks: Any = None


#: ``reason`` label values of ``fairmonitor_window_rejected_rows`` (see ``monitor/rows.py``).
REJECT_REASONS = ("invalid_score", "invalid_prediction", "no_timestamp")


@dataclass(frozen=True, slots=True)
class _ModelSetup:
    """What the configuration says about a model (thresholds, metrics, attributes)."""

    thresholds: tuple[Threshold, ...] = ()
    metrics: frozenset[str] = frozenset()
    label_metrics: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    cadence: float = 0.0  # seconds between two windows (``every``)
    labels_after: float = 0.0
    routing: tuple[tuple[str, str], ...] = ()  # (team, owner) labels set in the config
    min_group_size: int = 1
    #: alert_windows: (warning, critical, undefined) windows before each alert fires
    alert_windows: tuple[int, int, int] = (3, 2, 2)
    #: the page level of the model's ``compare: budget`` series (None: none)
    page_level: float | None = None


def _setup_from_config(cfg: Any) -> _ModelSetup:
    attrs = tuple(cfg.sensitive_features)
    if getattr(cfg, "intersection", False) and len(attrs) > 1:
        attrs += (INTERSECTION_SEPARATOR.join(attrs),)
    label_metrics = tuple(m for m in cfg.metrics if METRICS[m].needs_labels)
    routing = tuple((k, str(getattr(cfg, k))) for k in ("team", "owner")
                    if getattr(cfg, k, None))
    windows = getattr(cfg, "alert_windows", None)
    page_level = cfg.page_level(list(attrs)) if hasattr(cfg, "page_level") else None
    return _ModelSetup(tuple(cfg.thresholds), frozenset(cfg.metrics), label_metrics, attrs,
                       cfg.every.total_seconds(), cfg.labels_after.total_seconds(), routing,
                       int(getattr(cfg, "min_group_size", 1)),
                       (windows.warning, windows.critical, windows.undefined)
                       if windows is not None else (3, 2, 2), page_level)


def _held(r: Any, setup: _ModelSetup) -> int:
    """Due windows of ``r``'s phase from ``r`` (held by its data error) to its evaluation."""
    if not setup.cadence or r.evaluated_at is None:
        return 1
    delay = setup.labels_after if r.phase == "labels" else 0.0
    behind = (r.evaluated_at - r.end).total_seconds() - delay
    return max(1, int(behind // setup.cadence) + 1)


def _capped(counts: Mapping[str, int]) -> dict[str, int]:
    """Return the :data:`MAX_GROUPS` largest groups, the others summed under :data:`OTHER_GROUPS`.

    >>> _capped({f"g{i}": i for i in range(1, 13)})[OTHER_GROUPS]
    3
    >>> len(_capped({f"g{i}": i for i in range(1, 13)}))
    11
    """
    if len(counts) <= MAX_GROUPS:
        return dict(counts)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    kept = dict(ranked[:MAX_GROUPS])
    kept[OTHER_GROUPS] = sum(n for _, n in ranked[MAX_GROUPS:])
    return kept


def _level(level: Any) -> str:
    return format(float(level), "g")


def _robustness(report: Any, version: str) -> dict[str, tuple[tuple[str, str, str, float], ...]]:
    """Per attribute, the finite per-level ratios of every robustness detail in ``report``."""
    out: dict[str, dict[tuple[str, str], float]] = {}
    for (_, attr), detail in report.details.items():
        levels, ratios = getattr(detail, "levels", None), getattr(detail, "ratios", None)
        if levels is None or not isinstance(ratios, Mapping):
            continue
        for metric, series in ratios.items():
            for level, ratio in zip(levels, series, strict=False):
                if ratio is not None and math.isfinite(float(ratio)):
                    out.setdefault(attr, {})[(str(metric), _level(level))] = float(ratio)
    return {attr: tuple((version, m, lev, r) for (m, lev), r in sorted(vals.items()))
            for attr, vals in out.items()}


def _values(report: Any, version: str, keep: Any = None, *, window_end: float = 0.0,
            thresholds: tuple[Threshold, ...] = ()) -> dict[tuple[str, str], _Value]:
    out = {}
    intervals = getattr(report, "intervals", {})
    for key, value in report.values.items():
        if keep is not None and not keep(key[0]):
            continue
        value = float(value)
        status = report.statuses.get(key)
        code = severity_code(status) if status is not None else None
        iv = intervals.get(key)
        lower, upper, chance = ((float(iv.lower), float(iv.upper), float(iv.chance))
                                if iv is not None else (math.nan,) * 3)
        rule = _governing(thresholds, *key)
        compared = rule.compared(value, lower, upper) if rule is not None else value
        out[key] = _Value(version, value, reason_code(report.reasons.get(key)), code,
                          window_end, lower, upper, chance, compared)
    return out


def _restored_value(v: Mapping[str, Any], metric: str, attr: str,
                    thresholds: tuple[Threshold, ...], ts: Any) -> _Value:
    """One value of a checkpoint snapshot (:mod:`..snapshot`) as exported before the restart."""
    value = math.nan if v.get("value") is None else float(v["value"])
    status = v.get("status") if not math.isnan(value) else None
    lower, upper, chance = (math.nan if v.get(k) is None else float(v[k])
                            for k in ("lower", "upper", "chance"))
    rule = _governing(thresholds, metric, attr)
    return _Value(str(v.get("version", "")), value, reason_code(v.get("reason")),
                  severity_code(status) if status else None, ts(v.get("window_end")),
                  lower, upper, chance,
                  rule.compared(value, lower, upper) if rule is not None else value)


def _governing(thresholds: tuple[Threshold, ...], metric: str, attr: str) -> Threshold | None:
    """Return the threshold that governs (metric, attr), as ``evaluate_thresholds`` picks it."""
    inter = INTERSECTION_SEPARATOR in attr
    matching = [t for t in thresholds if t.applies_to(metric, attr, intersection=inter)]
    return max(matching, key=lambda t: t.attribute is not None) if matching else None


def _window_values(m: _Model, r: Any, setup: _ModelSetup) -> dict[tuple[str, str], _Value]:
    """Return the model's values after window result ``r`` (which has a report or is empty).

    A report's values replace the previous ones; an empty window makes what its phase computes
    undefined, not stale.
    """
    overdue = getattr(r, "labels_overdue", False)
    values = dict(m.values)
    if r.report is not None:
        new = _values(r.report, r.version, window_end=r.end.timestamp(),
                      thresholds=setup.thresholds)
        if overdue:  # "labels not available" when they were due: overdue, not pending
            new = {k: replace(v, reason="labels_overdue") if v.reason == "labels_pending"
                   else v for k, v in new.items()}
        values.update(new)
        return values
    why = "no_traffic" if r.n_rows == 0 and not r.errors else "undefined"
    why = "labels_overdue" if overdue else why
    for metric, attr in list(values):
        if split_class_key(metric)[0] in r.metrics:  # a multiclass model's classes too
            values[(metric, attr)] = _Value(r.version, math.nan, why, None, r.end.timestamp())
    return values


def _main_phase_fields(r: Any, setup: _ModelSetup) -> dict[str, Any]:
    """Return what a main-phase window (not a labels re-evaluation) sets: its end, rows, groups."""
    counts = r.report.group_counts if r.report is not None else {}
    return {
        "window_end": r.end.timestamp(), "samples": int(r.n_rows),
        "groups": {a: _capped(c) for a, c in counts.items()},
        "group_totals": {a: len(c) for a, c in counts.items()},
        "groups_version": r.version,
        "small_groups": {a: sum(n < setup.min_group_size for n in c.values())
                         for a, c in counts.items()},
        "rejected": dict(getattr(r, "rejected", {})),
        "duplicates": int(getattr(r, "duplicates", 0)),
    }


class FairnessCollector:
    """Prometheus collector over the latest fairness report of each monitored model.

    Parameters
    ----------
    registry : prometheus_client.CollectorRegistry, optional
        Where to register; ``None`` leaves registration to the caller.
    models : mapping of str to model config, optional
        The monitor's ``MonitorConfig.models``: thresholds, metrics and attributes per model.
        Every configured model gets its self-metrics from the start.
    build_version : str, optional
        The ``version`` label of ``fairmonitor_build_info``; default the installed version.

    Notes
    -----
    Use :meth:`observe` as the job's ``on_result`` hook. One scrape yields (values shown for
    a model ``credit`` at version ``3`` with attributes ``sex`` and ``race``)::

        # HELP fairmonitor_demographic_parity_difference Largest between-group difference ...
        # TYPE fairmonitor_demographic_parity_difference gauge
        fairmonitor_demographic_parity_difference{model="credit",sensitive_attribute="sex",version="3"} 0.31
        # HELP fairmonitor_metric_undefined 1 for each metric value that is undefined (NaN) ...
        # TYPE fairmonitor_metric_undefined gauge
        fairmonitor_metric_undefined{metric="demographic_parity_difference",model="credit",reason="too_few_groups",sensitive_attribute="race",version="3"} 1.0
        # TYPE fairmonitor_robustness_ratio_by_level gauge
        fairmonitor_robustness_ratio_by_level{level="0.5",metric="demographic_parity_difference",model="credit",sensitive_attribute="sex",version="3"} 1.4
        # TYPE fairmonitor_group_samples gauge
        fairmonitor_group_samples{group="F",model="credit",sensitive_attribute="sex",version="3"} 412.0
        # TYPE fairmonitor_threshold gauge
        fairmonitor_threshold{bound="upper",metric="demographic_parity_difference",model="credit",severity="warning"} 0.1
        fairmonitor_threshold{bound="upper",metric="demographic_parity_difference",model="credit",severity="critical"} 0.2
        # TYPE fairmonitor_threshold_by_attribute gauge
        fairmonitor_threshold_by_attribute{bound="upper",metric="equalized_odds_difference",model="credit",sensitive_attribute="sex",severity="critical"} 0.1
        # TYPE fairmonitor_alert_state gauge
        fairmonitor_alert_state{metric="demographic_parity_difference",model="credit",sensitive_attribute="sex",version="3"} 2.0
        # TYPE fairmonitor_window_last_success_timestamp_seconds gauge
        fairmonitor_window_last_success_timestamp_seconds{model="credit"} 1.7637696e+09
        # TYPE fairmonitor_window_cadence_seconds gauge
        fairmonitor_window_cadence_seconds{model="credit"} 300.0
        # TYPE fairmonitor_labels_after_seconds gauge
        fairmonitor_labels_after_seconds{model="credit"} 86400.0
        # TYPE fairmonitor_model_info gauge
        fairmonitor_model_info{model="credit",owner="alice",team="risk"} 1.0
        # TYPE fairmonitor_window_end_timestamp_seconds gauge
        fairmonitor_window_end_timestamp_seconds{model="credit"} 1.7637696e+09
        # TYPE fairmonitor_window_evaluation_duration_seconds gauge
        fairmonitor_window_evaluation_duration_seconds{model="credit"} 0.042
        # TYPE fairmonitor_window_samples gauge
        fairmonitor_window_samples{model="credit"} 1000.0
        # TYPE fairmonitor_windows_evaluated_total counter
        fairmonitor_windows_evaluated_total{model="credit"} 12.0
        # TYPE fairmonitor_errors_total counter
        fairmonitor_errors_total{model="credit",stage="source"} 0.0
        (one line per stage: source, data, metric, checkpoint, rollup, summary_store, spool,
        mlflow, export, scheduler)
        # TYPE fairmonitor_labels_pending_windows gauge
        fairmonitor_labels_pending_windows{model="credit"} 24.0
        # TYPE fairmonitor_labels_overdue_windows gauge
        fairmonitor_labels_overdue_windows{model="credit"} 0.0
        # TYPE fairmonitor_data_error_windows gauge
        fairmonitor_data_error_windows{model="credit"} 0.0
        # TYPE fairmonitor_build_info gauge
        fairmonitor_build_info{version="0.1.0"} 1.0
        # TYPE fairmonitor_metric_lower_bound gauge
        fairmonitor_metric_lower_bound{metric="demographic_parity_difference",model="credit",sensitive_attribute="sex",version="3"} 0.25
        (and fairmonitor_metric_upper_bound, fairmonitor_metric_chance_level,
        fairmonitor_metric_compared: the value or the bound its threshold compares)
        # TYPE fairmonitor_groups_below_min_size gauge
        fairmonitor_groups_below_min_size{model="credit",sensitive_attribute="race"} 1.0

    ``fairmonitor_threshold`` holds the thresholds that apply to every attribute, so one
    generic rule can compare each metric with it ``on(model, metric)``; per-attribute
    overrides go to ``fairmonitor_threshold_by_attribute`` (and into ``fairmonitor_alert_state``,
    which always reflects the most specific threshold). Undefined ``reason`` codes:
    ``labels_pending`` (the window's labels have not arrived, or a label metric was never
    computed yet), ``labels_overdue`` (its labels were due, ``labels_after`` after it closed,
    and no row had one: ``fairmonitor_labels_overdue_windows`` counts such windows in a row),
    ``insufficient_data`` (groups exist but fewer than two reach
    ``min_group_size``), ``too_few_groups``, ``no_traffic`` (the window held no rows: a signal of its
    own, not an error), ``error`` (the metric raised), ``undefined`` (anything else). The
    liveness gauges (last success, cadence, labels_after) are what the generated alert rules
    read, so a model added to the config is covered without regenerating them;
    ``window_last_success_timestamp_seconds`` is wall-clock time even when the job runs on a
    simulated clock. ``group_samples`` keeps the :data:`MAX_GROUPS` largest groups per
    attribute and sums the rest under ``group="_other"``.

    Examples
    --------
    >>> from prometheus_client import CollectorRegistry
    >>> registry = CollectorRegistry()
    >>> collector = FairnessCollector(registry, build_version="1.2.3")
    >>> registry.get_sample_value("fairmonitor_build_info", {"version": "1.2.3"})
    1.0
    """  # noqa: E501 (the exposition lines are shown exactly as scraped)

    def __init__(self, registry: CollectorRegistry | None = None, *,
                 models: Mapping[str, Any] | None = None, build_version: str | None = None):
        if build_version is None:
            from ... import __version__ as build_version
        self._build_version = str(build_version)
        self._setup: Mapping[str, _ModelSetup] = MappingProxyType(
            {name: _setup_from_config(cfg) for name, cfg in (models or {}).items()})
        self._lock = threading.Lock()  # serialises writers; readers take the reference as is
        self._models: Mapping[str, _Model] = MappingProxyType(
            {name: _Model() for name in self._setup})
        self._spool = (0.0, 0.0, 0.0)  # bytes on disk, values pending, values dropped
        if registry is not None:
            registry.register(self)

    # ----------------------------------------------------------------- updates (writers)
    def _update(self, model: str, change: Any) -> None:
        with self._lock:
            current = self._models.get(model, _Model())
            self._models = MappingProxyType({**self._models, model: change(current)})

    def observe(self, result: Any) -> None:
        """Take in one ``WindowResult`` of the job (use as its ``on_result`` hook).

        The result's values replace the previous ones of the same (metric, attribute); errors
        of the evaluation stages (source, data, metric) are counted. Errors of later hooks are
        counted with :meth:`record_error`.
        """
        self._update(result.model, lambda m: self._apply(m, result))

    def _apply(self, m: _Model, r: Any) -> _Model:
        """Return the model's state after window result ``r``."""
        setup = self._setup.get(r.model, _ModelSetup())
        errors = dict(m.errors)
        for stage in r.errors:
            if stage in _EVALUATION_STAGES:
                errors[stage] = errors.get(stage, 0) + 1
        if getattr(r, "rollup", ""):
            return self._apply_rollup(replace(m, errors=errors), r, setup)
        if "data" in r.errors:  # the window is held (its watermark stays) until fixed
            return replace(m, errors=errors,
                           data_held={**m.data_held, r.phase: _held(r, setup)})
        if "source" in r.errors or (r.report is None and "checkpoint" in r.errors):
            # nothing new is known about the model: keep its values
            return replace(m, errors=errors)
        report = r.report
        if getattr(r, "streaks", None) is not None:
            m = replace(m, streaks=r.streaks)
        robustness = dict(m.robustness)
        if report is not None:
            robustness.update(_robustness(report, r.version))
        return replace(
            m, version=r.version or m.version, values=_window_values(m, r, setup),
            errors=errors, robustness=robustness, evaluated=m.evaluated + 1,
            # wall clock, not the window's (possibly simulated) evaluation time: liveness
            # alerts compare it with Prometheus' time(); a window whose checkpoint did not move
            # is redone: not a success (staleness fires)
            last_success=m.last_success if "checkpoint" in r.errors else r.finished_at,
            duration=float(r.duration_seconds),
            **(_main_phase_fields(r, setup) if r.phase != "labels" else {}),
            skipped=m.skipped + int(getattr(r, "skipped_before", 0)),
            labels_overdue=overdue_streak(m.labels_overdue, r),
            data_held={**m.data_held, r.phase: 0},
            **({"label_coverage": float(r.label_coverage), "label_window_end": r.end.timestamp()}
               if getattr(r, "label_coverage", None) is not None else {}),
        )

    @staticmethod
    def _apply_rollup(m: _Model, r: Any, setup: _ModelSetup) -> _Model:
        """Apply a rollup window's values: the ``fairmonitor_rollup_*`` series, nothing else."""
        if r.report is None and r.errors:
            return m  # a store fault (counted): keep the last rollup values
        rollups = dict(m.rollups)
        if r.report is not None:
            for (metric, attr), v in _values(r.report, r.version, window_end=r.end.timestamp(),
                                             thresholds=setup.thresholds).items():
                rollups[(r.rollup, metric, attr)] = v
        else:  # no stored window had rows
            for key in [k for k in rollups if k[0] == r.rollup and k[1] in r.metrics]:
                rollups[key] = _Value(r.version, math.nan, "no_traffic", None, r.end.timestamp())
        windows = {**m.rollup_windows}
        if r.phase != "labels":
            windows[r.rollup] = (r.end.timestamp(), int(getattr(r, "merged_windows", 0)))
        return replace(m, rollups=rollups, rollup_windows=windows)

    def observe_reference(self, model: str, version: str, report: Any) -> None:
        """Take in the evaluation of a model version on its reference data.

        Robustness per level is exported, and values of metrics the production windows do not
        compute (so each ``fairmonitor_<metric>`` series keeps a single source).
        """
        window_metrics = self._setup.get(model, _ModelSetup()).metrics

        def change(m: _Model) -> _Model:
            values = {**m.values, **_values(
                report, version, lambda k: k not in window_metrics,
                thresholds=self._setup.get(model, _ModelSetup()).thresholds)}
            robustness = {**m.robustness, **_robustness(report, version)}
            return replace(m, values=values, robustness=robustness)

        self._update(model, change)

    def restore(self, model: str, snapshot: Mapping[str, Any]) -> None:
        """Show again what was last reported before a restart (a checkpoint's ``last``).

        Values, versions, threshold states, the latest window and its group sizes come back
        as they were, so fairness series and alerts continue across a deploy; counters start
        at 0 (Prometheus handles counter resets).
        """
        def ts(text: Any) -> float:
            from datetime import datetime

            return datetime.fromisoformat(text).timestamp() if text else 0.0

        thresholds = self._setup.get(model, _ModelSetup()).thresholds
        values = {(metric, attr): _restored_value(v, metric, attr, thresholds, ts)
                  for metric, attrs in (snapshot.get("values") or {}).items()
                  for attr, v in attrs.items()}
        version = str(snapshot.get("version", ""))
        rollups, rollup_windows = self._restored_rollups(model, snapshot, ts)
        saved = snapshot.get("labels_overdue")  # [windows, index] (snapshot.overdue_streak)
        overdue = (int(saved[0]), int(saved[1])) if saved else (0, -1)

        def change(m: _Model) -> _Model:
            return replace(m, version=version, values={**values, **m.values},
                           rollups={**rollups, **m.rollups},
                           rollup_windows={**rollup_windows, **m.rollup_windows},
                           last_success=m.last_success or float(snapshot.get("finished_at", 0.0)),
                           window_end=m.window_end or ts(snapshot.get("window_end")),
                           samples=m.samples or int(snapshot.get("samples", 0)),
                           groups=m.groups or dict(snapshot.get("groups") or {}),
                           groups_version=m.groups_version or version,
                           labels_overdue=(m.labels_overdue if m.labels_overdue[1] >= 0
                                           else overdue))

        self._update(model, change)

    def restore_streaks(self, model: str, streaks: Any) -> None:
        """Restore the alert streaks saved in the checkpoint (``monitor.streaks.Streaks``).

        A window evaluated since the start wins: its streaks are newer.
        """
        self._update(model, lambda m: m if m.streaks is not None else replace(m, streaks=streaks))

    def _restored_rollups(self, model: str, snapshot: Mapping[str, Any], ts: Any
                          ) -> tuple[dict[tuple[str, str, str], _Value], dict[str, Any]]:
        thresholds = self._setup.get(model, _ModelSetup()).thresholds
        values: dict[tuple[str, str, str], _Value] = {}
        windows: dict[str, tuple[float, int]] = {}
        for name, roll in (snapshot.get("rollups") or {}).items():
            windows[name] = (ts(roll.get("window_end")), int(roll.get("merged_windows", 0)))
            for metric, attrs in (roll.get("values") or {}).items():
                for attr, v in attrs.items():
                    values[(name, metric, attr)] = _restored_value(v, metric, attr, thresholds,
                                                                   ts)
        return values, windows

    def set_mlflow_queue(self, *, spool_bytes: int, pending: int, dropped: int) -> None:
        """Set the MLflow sink's backlog: spool size on disk, values not yet written, dropped."""
        self._spool = (float(spool_bytes), float(pending), float(dropped))

    def record_error(self, model: str, stage: str) -> None:
        """Count one error of ``stage`` (e.g. ``"mlflow"``) for ``model``."""
        self._update(model, lambda m: replace(
            m, errors={**m.errors, stage: m.errors.get(stage, 0) + 1}))

    def set_labels_pending(self, model: str, windows: int) -> None:
        """Set how many evaluated windows of ``model`` still wait for their labels."""
        self._update(model, lambda m: replace(m, labels_pending=int(windows)))

    # ----------------------------------------------------------------- scrape (reader)
    def collect(self) -> Iterator[Metric]:
        """Build every metric family from the current snapshot (called on each scrape)."""
        models = self._models  # one atomic read: the whole scrape sees one snapshot
        yield from self._fairness_families(models)
        yield from self._threshold_families()
        yield from self._health_families(models)
        yield from self._queue_families()
        yield from self._row_families(models)
        yield from self._rollup_families(models)
        yield from self._streak_families(models)
        yield from self._state_families(models)

    def _state_families(self, models: Mapping[str, _Model]) -> Iterator[Metric]:
        """Clock jumps, integrity errors and repairs of the monitor's state (``incidents``).

        Counted process-wide (:data:`..incidents.INCIDENTS`: a checkpoint repairs itself inside
        ``load``, with no window at hand); zeros for every configured model and label value.
        """
        from ..incidents import DIRECTIONS, INCIDENTS, INTEGRITY_KINDS, REPAIR_KINDS

        specs = [("clock_jumps", "direction", DIRECTIONS, "Clock jumps seen by the monitor: "
                  "forward (now ran ahead of the elapsed time by more than catch_up windows; "
                  "nothing skipped) or backward (now earlier than a watermark; the windows "
                  "after now are evaluated again)."),
                 ("integrity_errors", "kind", INTEGRITY_KINDS, "Stored state whose checksum "
                  "or identity (model, window, spec) did not match when loaded."),
                 ("repairs", "kind", REPAIR_KINDS, "State re-made by the monitor: window "
                  "summaries from the source's rows, a checkpoint from its previous "
                  "generation.")]
        for counter, label, values, doc in specs:
            family = CounterMetricFamily(f"{NAMESPACE}_{counter}", doc, labels=["model", label])
            counts = {(model, v): 0 for model in models for v in values}
            for model, v, n in INCIDENTS.items(counter):
                counts[(model, v)] = n
            for (model, v), n in sorted(counts.items()):
                family.add_metric([model, v], float(n))
            yield family

    def _streak_families(self, models: Mapping[str, _Model]) -> Iterator[Metric]:
        """Yield the alert streaks and the windows each alert needs (``monitor/streaks.py``).

        Every window value with a threshold level gets its streak (0 when none), so a rule
        compares two series of the same labels: ``breach_windows >= breach_windows_required``.
        """
        labels = ("model", "metric", "sensitive_attribute", "bound", "severity")
        breach = _gauge("breach_windows", "Consecutive evaluated windows whose compared value "
                        "breaches the severity's threshold level (undefined and empty windows "
                        "neither count nor reset; a value inside resets).", *labels)
        required = _gauge("breach_windows_required", "Consecutive breaching windows before "
                          "FairnessThresholdBreached fires (alert_windows of the model).",
                          *labels)
        undefined = _gauge("undefined_windows", "Consecutive windows whose value is undefined "
                           "for a reason that alerts (insufficient_data, too_few_groups, "
                           "error); a defined value resets.", "model", "metric",
                           "sensitive_attribute")
        no_traffic = _gauge("no_traffic_windows", "Consecutive windows of the model without "
                            "rows; a window with rows resets.", "model")
        needed = _gauge("undefined_windows_required", "Consecutive undefined (or empty) windows "
                        "before FairnessMetricUndefined (or FairmonitorNoTraffic) fires.",
                        "model")
        evidence = _gauge("breach_evidence", "Sequential evidence (log(1 + R) of the "
                          "e-detector) of each compare: budget series; it breaches at "
                          "fairmonitor_breach_evidence_page_level.", *labels)
        page = _gauge("breach_evidence_page_level", "Evidence at which a compare: budget "
                      "series breaches: the model's false-page budget over its budget series.",
                      "model")
        for model, m in models.items():
            setup = self._setup.get(model, _ModelSetup())
            streaks = m.streaks
            counts = dict(getattr(streaks, "breach", None) or {})
            gaps = dict(getattr(streaks, "undefined", None) or {})
            proofs = dict(getattr(streaks, "evidence", None) or {})
            keys = {k for k in m.values if k[0] in setup.metrics} | {k[:2] for k in counts}
            for metric, attr in sorted(keys | set(gaps)):
                undefined.add_metric([model, metric, attr], float(gaps.get((metric, attr), 0)))
                rule = _governing(setup.thresholds, metric, attr)
                for i, severity in enumerate(("warning", "critical")):
                    if rule is None or getattr(rule, severity) is None:
                        continue
                    key = [model, metric, attr, rule.bound, severity]
                    breach.add_metric(key, float(counts.get((metric, attr, severity), 0)))
                    budget = rule.compare == "budget" and setup.page_level is not None
                    # a budget series breaches on its evidence: one such window pages
                    required.add_metric(key, 1.0 if budget else float(setup.alert_windows[i]))
                    if budget:
                        e = proofs.get((metric, attr, severity))
                        evidence.add_metric(key, float(e.statistic) if e is not None else 0.0)
            no_traffic.add_metric([model], float(getattr(streaks, "no_traffic", 0)))
            needed.add_metric([model], float(setup.alert_windows[2]))
            if setup.page_level is not None:
                page.add_metric([model], setup.page_level)
        yield from (breach, required, undefined, no_traffic, needed, evidence, page)

    def _rollup_families(self, models: Mapping[str, _Model]) -> Iterator[Metric]:
        labels = ("model", "version", "window", "metric", "sensitive_attribute")
        families = {
            "value": _gauge("rollup_value", "Fairness metric value of the latest window of each "
                            "rollup (a longer window merged from stored window summaries; "
                            "window is the rollup, e.g. 1d).", *labels),
            "lower": _gauge("rollup_lower_bound", "Lower end of the confidence interval of each "
                            "rollup value.", *labels),
            "upper": _gauge("rollup_upper_bound", "Upper end of the confidence interval of each "
                            "rollup value.", *labels),
            "compared": _gauge("rollup_compared", "What the alert threshold of each rollup value "
                               "compares (the value, or the bound for compare: bound).",
                               *labels),
        }
        state = _gauge("rollup_alert_state", "Threshold verdict of each rollup value: 0 ok, "
                       "1 warning, 2 critical.", *labels)
        undefined = _gauge("rollup_undefined", "1 for each rollup value that is undefined (NaN), "
                           "with the reason.", *labels, "reason")
        end = _gauge("rollup_window_end_timestamp_seconds", "End of the latest evaluated window "
                     "of each rollup.", "model", "window")
        merged = _gauge("rollup_windows_merged", "Windows of the model whose stored summaries "
                        "the latest rollup window merged (fewer than it spans: some had no "
                        "rows or no summary).", "model", "window")
        by_class = _gauge("rollup_value_by_class", "Fairness metric value of the latest window "
                          "of each rollup, one class against the rest, per class of a "
                          "multiclass model (the worst class is rollup_value).",
                          "model", "version", "window", "metric", "sensitive_attribute", "class")
        for model, m in models.items():
            for (rollup, metric, attr), v in sorted(m.rollups.items()):
                key = [model, v.version, rollup, metric, attr]
                if math.isnan(v.value):
                    undefined.add_metric([*key, v.reason], 1.0)
                    continue
                base, label = split_class_key(metric)
                for part, family in families.items():
                    number = getattr(v, part)
                    if not math.isfinite(number):
                        continue
                    if part == "value" and label is not None:  # a class: one bounded label
                        by_class.add_metric([model, v.version, rollup, base, attr, label],
                                            number)
                    else:
                        family.add_metric(key, number)
                if v.severity is not None:
                    state.add_metric(key, float(v.severity))
            for rollup, (t, n) in sorted(m.rollup_windows.items()):
                end.add_metric([model, rollup], t)
                merged.add_metric([model, rollup], float(n))
        yield from (*families.values(), by_class, state, undefined, end, merged)

    def _row_families(self, models: Mapping[str, _Model]) -> Iterator[Metric]:
        rejected = _gauge("window_rejected_rows", "Rows of the latest window dropped before "
                          "any metric (invalid score or prediction), by reason.",
                          "model", "reason")
        duplicates = _gauge("window_duplicate_rows", "Rows of the latest window that exactly "
                            "duplicate another row (counted, not dropped).", "model")
        for model, m in models.items():
            for reason in (*REJECT_REASONS, *(r for r in m.rejected if r not in REJECT_REASONS)):
                rejected.add_metric([model, reason], float(m.rejected.get(reason, 0)))
            duplicates.add_metric([model], float(m.duplicates))
        yield rejected
        yield duplicates
        coverage = _gauge("window_label_coverage", "Fraction of rows with a label in the latest "
                          "window whose label metrics were computed (their window end is "
                          "fairmonitor_label_window_end_timestamp_seconds).", "model")
        label_end = _gauge("label_window_end_timestamp_seconds", "End of the latest window "
                           "whose label metrics were computed (0: none yet).", "model")
        for model, m in models.items():
            if m.label_coverage >= 0:
                coverage.add_metric([model], m.label_coverage)
            label_end.add_metric([model], m.label_window_end)
        yield coverage
        yield label_end
        skipped = CounterMetricFamily(f"{NAMESPACE}_windows_skipped", "Due windows never "
                                      "evaluated because they were beyond the catch-up cap "
                                      "(their rows are in no exported value).", labels=["model"])
        for model, m in models.items():
            skipped.add_metric([model], float(m.skipped))
        yield skipped

    def _queue_families(self) -> Iterator[Metric]:
        size, pending, dropped = self._spool
        yield GaugeMetricFamily(f"{NAMESPACE}_mlflow_spool_bytes", "Size of the MLflow spool "
                                "file (values kept for MLflow across restarts; 0: none "
                                "pending).", value=size)
        yield GaugeMetricFamily(f"{NAMESPACE}_mlflow_pending_values", "Values not yet written "
                                "to MLflow (server down or slow).", value=pending)
        lost = CounterMetricFamily(f"{NAMESPACE}_mlflow_dropped_values", "Values dropped "
                                   "because the MLflow queue overflowed (max_pending).")
        lost.add_metric([], dropped)
        yield lost

    def _fairness_families(self, models: Mapping[str, _Model]) -> Iterator[Metric]:
        per_metric: dict[str, GaugeMetricFamily] = {}
        per_class: dict[str, GaugeMetricFamily] = {}
        undefined = _gauge("metric_undefined", "1 for each metric value that is undefined (NaN) "
                           "on the latest window, with the reason.",
                           "model", "version", "metric", "sensitive_attribute", "reason")
        alert = _gauge("alert_state", "Threshold verdict of the latest value: 0 ok, 1 warning, "
                       "2 critical.", "model", "version", "metric", "sensitive_attribute")
        robustness = _gauge("robustness_ratio_by_level", "Fairness gap under input noise over "
                            "the clean gap, per noise level.",
                            "model", "version", "sensitive_attribute", "metric", "level")
        # gauges of one model can come from different windows (label metrics wait for their
        # labels): this says which window each value belongs to
        value_window = _gauge("value_window_end_timestamp_seconds", "End of the window each "
                              "metric value (or undefined marker) was computed on.",
                              "model", "metric", "sensitive_attribute")
        interval = {
            "lower": _gauge("metric_lower_bound", "Lower end of the confidence interval (95% "
                            "unless configured) of each fairness metric value; absent where "
                            "the metric has none.", *_VALUE_LABELS),
            "upper": _gauge("metric_upper_bound", "Upper end of the confidence interval of each "
                            "fairness metric value.", *_VALUE_LABELS),
            "chance": _gauge("metric_chance_level", "What a fair model would read on average "
                             "at the window's group sizes (the small-sample floor).",
                             *_VALUE_LABELS),
            "compared": _gauge("metric_compared", "What the alert threshold of each value "
                               "compares: the value (compare: value), or the confidence bound "
                               "on the unfair side (compare: bound).", *_VALUE_LABELS),
        }
        groups = _gauge("group_samples", "Rows per group of each sensitive attribute in the "
                        "latest window.", "model", "version", "sensitive_attribute", "group")
        distinct = _gauge("groups", "Distinct groups of each sensitive attribute in the latest "
                          "window (group_samples keeps the largest ones).", "model",
                          "sensitive_attribute")
        small = _gauge("groups_below_min_size", "Groups of each sensitive attribute with fewer "
                       "rows than min_group_size in the latest window: left out of every "
                       "metric (insufficient data), not judged fair.", "model",
                       "sensitive_attribute")
        for model, m in models.items():
            for (metric, attr), v in m.values.items():
                if v.window_end:
                    value_window.add_metric([model, metric, attr], v.window_end)
                if math.isnan(v.value):
                    undefined.add_metric([model, v.version, metric, attr, v.reason], 1.0)
                    continue
                base, label = split_class_key(metric)
                if label is not None:  # a multiclass model's class: one bounded label
                    _class_family(per_class, base).add_metric(
                        [model, v.version, attr, label], v.value)
                elif metric not in per_metric:
                    spec = METRICS.get(metric)
                    per_metric[metric] = _gauge(
                        metric, spec.help if spec else f"Fairness metric {metric}.",
                        "model", "version", "sensitive_attribute")
                if label is None:
                    per_metric[metric].add_metric([model, v.version, attr], v.value)
                for part, family in interval.items():
                    number = getattr(v, part)
                    if math.isfinite(number):  # NaN is never a sample; the reason is in MLflow
                        family.add_metric([model, v.version, metric, attr], number)
                if v.severity is not None:
                    alert.add_metric([model, v.version, metric, attr], float(v.severity))
            never = "labels_overdue" if m.labels_overdue[0] else "labels_pending"
            for metric, attr in self._never_labelled(model, m):
                undefined.add_metric([model, m.version, metric, attr, never], 1.0)
            for attr, rows in m.robustness.items():
                for version, metric, level, ratio in rows:
                    robustness.add_metric([model, version, attr, metric, level], ratio)
            for attr, counts in m.groups.items():
                for group, n in counts.items():
                    groups.add_metric([model, m.groups_version, attr, group], float(n))
            for attr, n in m.group_totals.items():
                distinct.add_metric([model, attr], float(n))
            for attr, n in m.small_groups.items():
                small.add_metric([model, attr], float(n))
        yield from per_metric.values()
        yield from per_class.values()
        yield from (undefined, robustness, groups, distinct, small, alert, value_window,
                    *interval.values())

    def _never_labelled(self, model: str, m: _Model) -> Iterator[tuple[str, str]]:
        """Yield the configured label metrics with no value yet (their first labels are not in)."""
        if m.evaluated == 0 and not m.labels_overdue[0]:  # restored overdue labels: say so
            return
        setup = self._setup.get(model, _ModelSetup())
        for metric in setup.label_metrics:
            for attr in setup.attributes:
                if (metric, attr) not in m.values:
                    yield metric, attr

    def _threshold_families(self) -> Iterator[Metric]:
        general = _gauge("threshold", "Configured alert threshold of a metric (applies to "
                         "every sensitive attribute).", "model", "metric", "severity", "bound")
        specific = _gauge("threshold_by_attribute", "Configured alert threshold of a metric for "
                          "one sensitive attribute (an override).",
                          "model", "metric", "sensitive_attribute", "severity", "bound")
        for model, setup in self._setup.items():
            for t in setup.thresholds:
                for severity in ("warning", "critical"):
                    level = getattr(t, severity)
                    if level is None:
                        continue
                    if t.attribute is None:
                        general.add_metric([model, t.metric, severity, t.bound], float(level))
                    else:
                        specific.add_metric([model, t.metric, t.attribute, severity, t.bound],
                                            float(level))
        yield general
        yield specific

    def _health_families(self, models: Mapping[str, _Model]) -> Iterator[Metric]:
        def per_model(name: str, doc: str, read: Any) -> GaugeMetricFamily:
            family = _gauge(name, doc, "model")
            for model, m in models.items():
                family.add_metric([model], float(read(m)))
            return family

        yield per_model("window_last_success_timestamp_seconds",
                        "When a window was last evaluated without a source error (0: never).",
                        lambda m: m.last_success)
        yield per_model("window_end_timestamp_seconds",
                        "End of the latest evaluated window (0: none yet).",
                        lambda m: m.window_end)
        setups = self._setup
        cadence = _gauge("window_cadence_seconds", "Seconds between two windows of the model "
                         "(its 'every'); the alert rules count persistence and staleness in "
                         "these.", "model")
        delay = _gauge("labels_after_seconds", "How long label metrics wait for ground truth "
                       "after a window closes (labels_after).", "model")
        for model, setup in setups.items():
            cadence.add_metric([model], setup.cadence)
            delay.add_metric([model], setup.labels_after)
        yield cadence
        yield delay
        info = _gauge("model_info", "Routing labels of a model's alerts (team, owner from the "
                      "config; always 1).", "model", "team", "owner")
        for model, setup in setups.items():
            routing = dict(setup.routing)
            info.add_metric([model, routing.get("team", ""), routing.get("owner", "")], 1.0)
        yield info
        yield per_model("window_evaluation_duration_seconds",
                        "Time to fetch and evaluate the latest window.", lambda m: m.duration)
        yield per_model("window_samples", "Rows in the latest evaluated window.",
                        lambda m: m.samples)
        yield per_model("labels_pending_windows",
                        "Closed windows whose labelled evaluation is not due or not done yet "
                        "(waiting for labels_after).",
                        lambda m: m.labels_pending)
        yield per_model("labels_overdue_windows",
                        "Latest labelled windows in a row whose labels are overdue: fewer "
                        "than min_label_coverage of their rows labelled labels_after after "
                        "they closed (0: labels on time).",
                        lambda m: m.labels_overdue[0])
        yield per_model("data_error_windows",
                        "Due windows held back by a data error (a configured column missing "
                        "or not convertible): their watermark waits for the fix (0: none).",
                        lambda m: sum(m.data_held.values()))
        evaluated = CounterMetricFamily(f"{NAMESPACE}_windows_evaluated",
                                        "Window evaluations completed (every phase).",
                                        labels=["model"])
        errors = CounterMetricFamily(f"{NAMESPACE}_errors",
                                     "Errors by stage of the monitor pipeline.",
                                     labels=["model", "stage"])
        for model, m in models.items():
            evaluated.add_metric([model], float(m.evaluated))
            for stage, n in m.errors.items():
                errors.add_metric([model, stage], float(n))
        yield evaluated
        yield errors
        build = _gauge("build_info", "fairmonitor build information (always 1).", "version")
        build.add_metric([self._build_version], 1.0)
        yield build


_VALUE_LABELS = ("model", "version", "metric", "sensitive_attribute")


def _class_family(families: dict[str, GaugeMetricFamily], metric: str) -> GaugeMetricFamily:
    """Return the per-class gauge of ``metric`` (``fairmonitor_<metric>_by_class``), made once.

    A multiclass model's worst class is ``fairmonitor_<metric>`` (what the alert rules
    compare); each class is a series of this gauge, its ``class`` label bounded by the classes
    the model's config lists.
    """
    if metric not in families:
        families[metric] = _gauge(
            f"{metric}_by_class", f"{METRICS[metric].help} One class against the rest, per "
            "class of a multiclass model (the worst class is the metric's own gauge).",
            "model", "version", "sensitive_attribute", "class")
    return families[metric]


def _gauge(name: str, documentation: str, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{NAMESPACE}_{name}", documentation, labels=list(labels))
