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
- ``no_traffic``: consecutive windows of the model that held no rows (phase ``labels`` is not
  traffic: its rows are the labelled ones); a window with rows resets it.

The alert fires while a streak is at least the required windows of the model's
``alert_windows`` (:class:`~.config.model.AlertWindows`); the exporter publishes both
(``fairmonitor_breach_windows`` and ``fairmonitor_breach_windows_required``, ...) and the
rules compare them. Rollup windows keep their one-window semantics and never touch a streak.
The state travels in the checkpoint (``ModelState.streaks``, saved with the window's
watermark), so a restart mid-breach continues the count.

>>> from types import SimpleNamespace as NS
>>> from fairmonitor.report.thresholds import Threshold
>>> t = (Threshold("demographic_parity_difference", warning=0.1, critical=0.2),)
>>> def window(value, rows=100):
...     report = None if rows == 0 else NS(values={("demographic_parity_difference", "sex"):
...                                                value}, intervals={}, reasons={})
...     return NS(rollup="", errors={}, phase="full", n_rows=rows, report=report)
>>> s = Streaks()
>>> for w in (window(0.41), window(0, rows=0), window(0, rows=0)):
...     s = advance(s, w, t)
>>> s.breach  # one breaching window, then two empty ones: a streak of 1, never 2
{('demographic_parity_difference', 'sex', 'warning'): 1, \
('demographic_parity_difference', 'sex', 'critical'): 1}
>>> s.no_traffic
2
>>> advance(s, window(0.15), t).breach  # inside critical: that streak ends
{('demographic_parity_difference', 'sex', 'warning'): 2}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..metrics._groups import INTERSECTION_SEPARATOR
from ..report.thresholds import Threshold

__all__ = ["ALERTING_REASONS", "SEVERITIES", "Streaks", "advance", "governing"]

#: Alerting severities, each with its own streak.
SEVERITIES = ("warning", "critical")
#: ``reason`` codes (``sinks.prometheus.reason_code``) of an undefined value that alert
#: (``FairnessMetricUndefined``); ``labels_pending`` and ``no_traffic`` have their own signals.
ALERTING_REASONS = ("insufficient_data", "too_few_groups", "error")


@dataclass(frozen=True)
class Streaks:
    """The streak counters of one model (immutable; :func:`advance` returns a new one)."""

    #: (metric, attribute, severity) -> consecutive breaching windows (absent: 0)
    breach: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    #: (metric, attribute) -> consecutive windows undefined for an alerting reason
    undefined: Mapping[tuple[str, str], int] = field(default_factory=dict)
    #: consecutive windows without rows
    no_traffic: int = 0

    def to_json(self) -> dict[str, Any]:
        """Nested plain dicts (attribute names may hold ``:``, so no joined keys)."""
        breach: dict[str, dict[str, dict[str, int]]] = {}
        for (metric, attr, severity), n in self.breach.items():
            breach.setdefault(metric, {}).setdefault(attr, {})[severity] = n
        undefined: dict[str, dict[str, int]] = {}
        for (metric, attr), n in self.undefined.items():
            undefined.setdefault(metric, {})[attr] = n
        return {"breach": breach, "undefined": undefined, "no_traffic": self.no_traffic}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Streaks:
        """Inverse of :meth:`to_json`; ``None`` or ``{}`` is no streak at all."""
        data = data or {}
        breach = {(m, a, s): int(n) for m, attrs in (data.get("breach") or {}).items()
                  for a, sev in attrs.items() for s, n in sev.items() if int(n) > 0}
        undefined = {(m, a): int(n) for m, attrs in (data.get("undefined") or {}).items()
                     for a, n in attrs.items() if int(n) > 0}
        return cls(breach, undefined, int(data.get("no_traffic", 0)))


def governing(thresholds: Iterable[Threshold], metric: str, attr: str) -> Threshold | None:
    """The threshold that governs (metric, attr): the per-attribute one over the general one."""
    inter = INTERSECTION_SEPARATOR in attr
    matching = [t for t in thresholds if t.applies_to(metric, attr, intersection=inter)]
    return max(matching, key=lambda t: t.attribute is not None) if matching else None


def _reason_code(reason: str | None) -> str:
    from .sinks.prometheus import reason_code  # the exporter's codes, one definition

    return reason_code(reason)


def _breaches(report: Any, thresholds: tuple[Threshold, ...],
              previous: Mapping[tuple[str, str, str], int]) -> dict[tuple[str, str, str], int]:
    """The breach counters after one report: +1 beyond the level, 0 inside, kept if undefined."""
    out = dict(previous)
    intervals = getattr(report, "intervals", {}) or {}
    for (metric, attr), value in report.values.items():
        rule = governing(thresholds, metric, attr)
        if rule is None:
            continue
        iv = intervals.get((metric, attr))
        lower, upper = (float(iv.lower), float(iv.upper)) if iv is not None else (math.nan,) * 2
        compared = float(rule.compared(float(value), lower, upper))
        for severity in SEVERITIES:
            key = (metric, attr, severity)
            level = getattr(rule, severity)
            if level is None or math.isnan(compared):
                continue  # no such level, or no evidence either way: the streak holds
            if rule.breaches(compared, level):
                out[key] = out.get(key, 0) + 1
            else:
                out.pop(key, None)
    return out


def _undefined(report: Any, previous: Mapping[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    out = dict(previous)
    for key, value in report.values.items():
        if not math.isnan(float(value)):
            out.pop(key, None)
        elif _reason_code(report.reasons.get(key)) in ALERTING_REASONS:
            out[key] = out.get(key, 0) + 1
    return out


def advance(streaks: Streaks, result: Any, thresholds: Iterable[Threshold]) -> Streaks:
    """The streaks after one completed window (a ``WindowResult``), as the module says.

    Parameters
    ----------
    streaks : Streaks
        The model's streaks before the window.
    result : WindowResult
        The window: its report (None when empty or failed), phase, rows and errors.
    thresholds : iterable of Threshold
        The model's thresholds.

    Returns
    -------
    Streaks
    """
    if getattr(result, "rollup", "") or "source" in result.errors:
        return streaks  # rollups alert on one window; a source error redoes the window
    report = result.report
    if report is None:
        empty = result.n_rows == 0 and not result.errors and result.phase != "labels"
        return Streaks(streaks.breach, streaks.undefined,
                       streaks.no_traffic + 1 if empty else streaks.no_traffic)
    return Streaks(_breaches(report, tuple(thresholds), streaks.breach),
                   _undefined(report, streaks.undefined),
                   0 if result.phase != "labels" else streaks.no_traffic)
