"""Alert persistence counted in windows, by the monitor: the streak of every alerting series.

An alert must fire on "N consecutive breaching windows", which only the monitor can count: it
knows which windows were evaluated, which were empty and which were undefined. Counting it in
PromQL from wall-clock time (the rules did until issue 24) let an undefined or missing window
extend a streak: one breaching window followed by two empty ones paged critical.

Per alerting series, :func:`advance` folds each completed window into a :class:`Streaks`:

- ``breach[(metric, attribute, severity)]``: consecutive evaluated windows whose compared
  quantity (the value, or the unfair-side bound for ``compare: bound``) breaches that
  severity's level of the governing threshold. A defined window inside the level resets it to
  0 (and so ends a firing alert); an undefined, empty or failed window leaves it as it is,
  so it neither advances nor resets a streak that is not firing yet, and holds one that is.
- ``undefined[(metric, attribute)]``: consecutive windows where the value is undefined for a
  reason that alerts (:data:`ALERTING_REASONS`); a defined value resets it, other windows
  (no traffic, labels pending, a data error) leave it as it is.
- ``evidence[(metric, attribute, severity)]``: for a ``compare: budget`` threshold, the
  series' sequential evidence (:mod:`fairmonitor.report.evidence`); such a window breaches when
  the statistic reaches the model's page level (:func:`policy`), and one breaching window
  fires (:func:`required`). An undefined value or interval leaves it as it is.
- ``no_traffic``: consecutive windows of the model that held no rows (phase ``labels`` is not
  traffic: its rows are the labelled ones); a window with rows resets it.

A window counts once per metric (``counted``): one evaluated again when late labels arrive
is not counted a second time, unless its first evaluation had no labels at all. The alert
fires while a streak is at least the required windows of the model's
``alert_windows`` (:class:`~.config.model.AlertWindows`); the exporter publishes both
(``fairmonitor_breach_windows`` and ``fairmonitor_breach_windows_required``, ...) and the
rules compare them. Rollup windows keep their one-window semantics and never touch a streak.
The state travels in the checkpoint (``ModelState.streaks``, saved with the window's
watermark), so a restart mid-breach continues the count.

>>> from types import SimpleNamespace as NS
>>> from fairmonitor.report.thresholds import Threshold
>>> t = (Threshold("demographic_parity_difference", warning=0.1, critical=0.2),)
>>> def window(index, value, rows=100):
...     report = None if rows == 0 else NS(values={("demographic_parity_difference", "sex"):
...                                                value}, intervals={}, reasons={})
...     return NS(rollup="", errors={}, phase="full", n_rows=rows, report=report, index=index)
>>> s = Streaks()
>>> for w in (window(1, 0.41), window(2, 0, rows=0), window(3, 0, rows=0)):
...     s = advance(s, w, t)
>>> s.breach  # one breaching window, then two empty ones: a streak of 1, never 2
{('demographic_parity_difference', 'sex', 'warning'): 1, \
('demographic_parity_difference', 'sex', 'critical'): 1}
>>> s.no_traffic
2
>>> advance(s, window(4, 0.15), t).breach  # inside critical: that streak ends
{('demographic_parity_difference', 'sex', 'warning'): 2}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..report.registry import split_class_key
from ..report.thresholds import Threshold
from ..utils.groups import INTERSECTION_SEPARATOR

__all__ = ["ALERTING_REASONS", "SEVERITIES", "Budget", "Streaks", "advance", "governing",
           "policy", "required"]

#: Alerting severities, each with its own streak.
SEVERITIES = ("warning", "critical")
#: ``reason`` codes (``sinks.prometheus.reason_code``) of an undefined value that alert
#: (``FairnessMetricUndefined``); ``labels_pending`` and ``no_traffic`` have their own signals.
ALERTING_REASONS = ("insufficient_data", "too_few_groups", "error")


@dataclass(frozen=True)
class Budget:
    """How ``compare: budget`` series decide (from the model config; see :func:`policy`)."""

    #: the model's false-page budget (:class:`fairmonitor.report.evidence.Budget`)
    budget: Any
    #: the statistic's page level over the model's budget series
    page_level: float
    #: level of the windows' confidence intervals
    confidence_level: float = 0.95
    #: only every ``stride``-th window feeds the evidence: sliding windows share rows
    stride: int = 1


@dataclass(frozen=True)
class Streaks:
    """The streak counters of one model (immutable; :func:`advance` returns a new one)."""

    #: (metric, attribute, severity) -> consecutive breaching windows (absent: 0)
    breach: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    #: (metric, attribute) -> consecutive windows undefined for an alerting reason
    undefined: Mapping[tuple[str, str], int] = field(default_factory=dict)
    #: consecutive windows without rows
    no_traffic: int = 0
    #: (metric, attribute, severity) -> sequential evidence of a ``compare: budget`` series
    evidence: Mapping[tuple[str, str, str], Any] = field(default_factory=dict)
    #: metric -> index of the last window counted: a window evaluated again (late labels)
    #: is never counted twice
    counted: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Nested plain dicts (attribute names may hold ``:``, so no joined keys)."""
        breach: dict[str, dict[str, dict[str, int]]] = {}
        for (metric, attr, severity), n in self.breach.items():
            breach.setdefault(metric, {}).setdefault(attr, {})[severity] = n
        undefined: dict[str, dict[str, int]] = {}
        for (metric, attr), n in self.undefined.items():
            undefined.setdefault(metric, {})[attr] = n
        evidence: dict[str, dict[str, dict[str, Any]]] = {}
        for (metric, attr, severity), e in self.evidence.items():
            evidence.setdefault(metric, {}).setdefault(attr, {})[severity] = e.to_dict()
        out: dict[str, Any] = {"breach": breach, "undefined": undefined,
                               "no_traffic": self.no_traffic, "counted": dict(self.counted)}
        if evidence:
            out["evidence"] = evidence
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Streaks:
        """Inverse of :meth:`to_json`; ``None`` or ``{}`` is no streak at all."""
        from ..report.evidence import Evidence

        data = data or {}
        breach = {(m, a, s): int(n) for m, attrs in (data.get("breach") or {}).items()
                  for a, sev in attrs.items() for s, n in sev.items() if int(n) > 0}
        undefined = {(m, a): int(n) for m, attrs in (data.get("undefined") or {}).items()
                     for a, n in attrs.items() if int(n) > 0}
        evidence = {(m, a, s): Evidence.from_dict(e)
                    for m, attrs in (data.get("evidence") or {}).items()
                    for a, sev in attrs.items() for s, e in sev.items()}
        counted = {str(m): int(i) for m, i in (data.get("counted") or {}).items()}
        return cls(breach, undefined, int(data.get("no_traffic", 0)), evidence, counted)


def policy(cfg: Any) -> Budget | None:
    """Return the budget policy of a model config (None without ``compare: budget`` series)."""
    attrs = list(cfg.sensitive_features)
    if getattr(cfg, "intersection", False) and len(attrs) > 1:
        attrs.append(INTERSECTION_SEPARATOR.join(attrs))
    page_level = cfg.page_level(attrs) if hasattr(cfg, "page_level") else None
    if page_level is None:
        return None
    return Budget(cfg.budget, page_level, cfg.confidence_level or 0.95,
                  max(1, int(cfg.window // cfg.every)))


def required(rule: Threshold, severity: str, windows: Any) -> int:
    """Consecutive breaching windows a series needs to fire: 1 for ``compare: budget``."""
    return 1 if rule.compare == "budget" else int(windows.required(severity))


def governing(thresholds: Iterable[Threshold], metric: str, attr: str) -> Threshold | None:
    """Return the threshold governing (metric, attr): the per-attribute one, else the general."""
    inter = INTERSECTION_SEPARATOR in attr
    matching = [t for t in thresholds if t.applies_to(metric, attr, intersection=inter)]
    return max(matching, key=lambda t: t.attribute is not None) if matching else None


def _reason_code(reason: str | None) -> str:
    from .sinks.prometheus import reason_code  # the exporter's codes, one definition

    return reason_code(reason)


def _budget_breach(rule: Threshold, key: tuple[str, str, str], level: float,
                   value: float, lower: float, upper: float, budget: Budget, index: int,
                   evidence: dict[tuple[str, str, str], Any], groups: int = 2) -> bool | None:
    """Whether a budget series breaches after this window; None: no evidence (hold).

    ``groups``: the attribute's groups in the window; the value is the largest gap over
    their pairs (and families), which the evidence must discount to stay within budget.
    """
    from ..report.evidence import Evidence, accumulate, metric_comparisons

    if index % budget.stride:
        return None  # overlaps the last window fed: not independent evidence
    before = evidence.get(key, Evidence())
    after = accumulate(before, value=value, lower=lower, upper=upper, level=level,
                       bound=rule.bound, budget=budget.budget,
                       confidence_level=budget.confidence_level, page_level=budget.page_level,
                       n_comparisons=metric_comparisons(key[0], groups))
    if after == before and not all(map(math.isfinite, (value, lower, upper))):
        return None  # undefined value or interval: the state is unchanged
    evidence[key] = after
    return after.statistic >= budget.page_level


def _breaches(report: Any, thresholds: tuple[Threshold, ...], previous: Streaks,
              index: int, budget: Budget | None
              ) -> tuple[dict[tuple[str, str, str], int], dict[tuple[str, str, str], Any]]:
    """Return the breach counters (and evidence) after a report: +1 beyond, 0 inside, else kept."""
    out, evidence = dict(previous.breach), dict(previous.evidence)
    intervals = getattr(report, "intervals", {}) or {}
    for (metric, attr), value in report.values.items():
        rule = governing(thresholds, metric, attr)
        if rule is None or previous.counted.get(metric, index - 1) >= index:
            continue  # no threshold, or this window was counted already (late labels)
        iv = intervals.get((metric, attr))
        lower, upper = (float(iv.lower), float(iv.upper)) if iv is not None else (math.nan,) * 2
        compared = float(rule.compared(float(value), lower, upper))
        for severity in SEVERITIES:
            key = (metric, attr, severity)
            level = getattr(rule, severity)
            if level is None:
                continue
            if rule.compare == "budget" and budget is not None:
                groups = len((getattr(report, "group_counts", None) or {}).get(attr, {}))
                breached = _budget_breach(rule, key, level, float(value), lower, upper, budget,
                                          index, evidence, max(groups, 2))
            else:  # no evidence either way (NaN) holds the streak
                breached = None if math.isnan(compared) else rule.breaches(compared, level)
            if breached is None:
                continue
            if breached:
                out[key] = out.get(key, 0) + 1
            else:
                out.pop(key, None)
    return out, evidence


def _undefined(report: Any, previous: Streaks, index: int) -> dict[tuple[str, str], int]:
    out = dict(previous.undefined)
    for key, value in report.values.items():
        if split_class_key(key[0])[1] is not None:
            continue  # a multiclass model's class: its worst class alerts (docs/multiclass.md)
        if previous.counted.get(key[0], index - 1) >= index:
            continue  # counted already (a window evaluated again for late labels)
        if not math.isnan(float(value)):
            out.pop(key, None)
        elif _reason_code(report.reasons.get(key)) in ALERTING_REASONS:
            out[key] = out.get(key, 0) + 1
    return out


def advance(streaks: Streaks, result: Any, thresholds: Iterable[Threshold], *,
            budget: Budget | None = None) -> Streaks:
    """Return the streaks after one completed window (a ``WindowResult``), as the module says.

    Parameters
    ----------
    streaks : Streaks
        The model's streaks before the window.
    result : WindowResult
        The window: its report (None when empty or failed), phase, index, rows and errors.
    thresholds : iterable of Threshold
        The model's thresholds.
    budget : Budget, optional
        The model's :func:`policy`, for ``compare: budget`` thresholds: such a series breaches
        when its evidence (:func:`fairmonitor.report.evidence.accumulate`) reaches the page
        level, and needs one such window (:func:`required`).

    Returns
    -------
    Streaks
    """
    if getattr(result, "rollup", "") or "source" in result.errors:
        return streaks  # rollups alert on one window; a source error redoes the window
    report = result.report
    if report is None:
        empty = result.n_rows == 0 and not result.errors and result.phase != "labels"
        return replace(streaks, no_traffic=streaks.no_traffic + 1 if empty
                       else streaks.no_traffic)
    index = int(getattr(result, "index", 0))
    breach, evidence = _breaches(report, tuple(thresholds), streaks, index, budget)
    # a window counts once per metric; one whose labels were still missing has not counted
    informative = {m for (m, a), v in report.values.items()
                   if not math.isnan(float(v))
                   or _reason_code(report.reasons.get((m, a))) != "labels_pending"}
    counted = {**streaks.counted, **{m: max(index, streaks.counted.get(m, index))
                                     for m in informative}}
    return Streaks(breach, _undefined(report, streaks, index),
                   0 if result.phase != "labels" else streaks.no_traffic, evidence, counted)
