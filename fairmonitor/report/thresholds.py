"""Alert thresholds: pure comparison of metric values with warning/critical bounds.

A threshold is written once (the monitor's YAML or the evaluator's config) and used three ways:
here, to give each (metric, attribute) a severity; by the MLflow evaluator, mapped to
``mlflow.models.MetricThreshold``; by the Prometheus exporter, as
``fairmonitor_threshold{metric, severity, bound}`` gauges that one generic alert rule compares.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..exceptions import ConfigError

__all__ = ["COMPARES", "SEVERITIES", "Severity", "Threshold", "severity_code", "worst"]

Severity = Literal["ok", "warning", "critical", "undefined"]
Bound = Literal["upper", "lower"]
Compare = Literal["value", "bound", "budget"]
#: What a threshold can compare: the point value, the confidence bound on the unfair side, or
#: (``budget``) the model's sequential evidence (:mod:`.evidence`); in a single window, which
#: has no sequence, a budget threshold compares the unfair-side bound like ``bound``.
COMPARES: tuple[Compare, ...] = ("value", "bound", "budget")
#: Severities in increasing order of alarm; ``undefined`` (a NaN value) is not an alarm.
SEVERITIES: tuple[Severity, ...] = ("undefined", "ok", "warning", "critical")
_CODES = {"ok": 0, "warning": 1, "critical": 2}
#: Ulps (of ``max(1, |value|, |level|)``) within which a value ties with a level.
TIE_ULPS = 8


@dataclass(frozen=True, slots=True)
class Threshold:
    """Warning and critical bounds for one metric.

    Parameters
    ----------
    metric : str
        Registry name of the metric.
    warning, critical : float or None
        The bounds; at least one is required.
    bound : {'upper', 'lower'}
        ``"upper"``: a value above the bound breaches it (differences, distances);
        ``"lower"``: below breaches it (ratios).
    attribute : str or None
        Restrict to one sensitive attribute; None applies to all.
    against_direction : bool
        Allow a bound on the fair side of a registry metric (``upper`` on a ratio where higher
        is fairer, ``lower`` on a difference), which alerts when the model is *fair*. Without
        it such a bound is rejected: it is almost always a typo.
    compare : {'value', 'bound', 'budget'}, default='value'
        What is compared with the levels: the point value, or the confidence bound on the
        unfair side (the interval's ``lower`` end for an ``upper`` threshold, its ``upper``
        end for a ``lower`` one). ``"bound"`` alerts only when the window's evidence, not its
        noise, crosses the level: use it for small groups and short windows, where the point
        value of a fair model sits above 0 by chance; ``"value"`` reacts faster on large
        windows. ``"budget"``: the monitor pages on the series' sequential evidence across
        windows, within the model's false-page budget (:mod:`fairmonitor.report.evidence`,
        ``docs/alert-modes.md``); a single window report (``evaluate_window``, the MLflow
        evaluator) has no sequence, so there its severity compares the unfair-side bound,
        exactly like ``"bound"``. A metric without an interval (the registry's ``interval``
        column) can only compare its value.

    Notes
    -----
    Ties: the metrics are differences or ratios of quantities of order 1 (rates, shares,
    CDFs), computed with a rounding error of a few ulps of 1, so a value within
    :data:`TIE_ULPS` (8) ulps of ``max(1, |value|, |level|)`` of a level (about 1.8e-15 for
    metrics in [0, 1]) equals it and does not breach it: a breach is "strictly beyond, by more
    than rounding". Without this, ``0.4 - 0.3`` (0.10000000000000003) breached 0.1 and
    ``0.3 - 0.2`` (0.09999999999999998) did not.

    Examples
    --------
    >>> t = Threshold("abcc", warning=0.05, critical=0.1)
    >>> t.severity(0.02), t.severity(0.07), t.severity(0.2), t.severity(float("nan"))
    ('ok', 'warning', 'critical', 'undefined')
    >>> ratio = Threshold("demographic_parity_ratio", warning=0.9, critical=0.8, bound="lower")
    >>> ratio.severity(0.85)
    'warning'

    Comparing the evidence: a value of 0.12 whose interval is (0.04, 0.20) breaches 0.1 on
    its value, not on its bound.

    >>> t = Threshold("abcc", warning=0.1, compare="bound")
    >>> t.compared(0.12, lower=0.04, upper=0.20), t.severity(t.compared(0.12, 0.04, 0.20))
    (0.04, 'ok')
    """

    metric: str
    warning: float | None = None
    critical: float | None = None
    bound: Bound = "upper"
    attribute: str | None = None
    against_direction: bool = False
    compare: Compare = "value"

    def __post_init__(self) -> None:
        where = f"thresholds.{self.metric}"
        if self.bound not in ("upper", "lower"):
            raise ConfigError(f"{where}.bound: must be 'upper' or 'lower'; got {self.bound!r}.")
        self._check_direction(where)
        self._check_compare(where)
        if self.warning is None and self.critical is None:
            raise ConfigError(f"{where}: give at least one of 'warning' or 'critical'.")
        for key in ("warning", "critical"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)
                                  or not math.isfinite(v)):
                raise ConfigError(f"{where}.{key}: must be a finite number; got {v!r}.")
        if self.warning is not None and self.critical is not None:
            inverted = (self.warning > self.critical if self.bound == "upper"
                        else self.warning < self.critical)
            if inverted:
                rel = "<=" if self.bound == "upper" else ">="
                raise ConfigError(
                    f"{where}: with bound '{self.bound}' warning must be {rel} critical; "
                    f"got warning={self.warning}, critical={self.critical}."
                )

    def _check_direction(self, where: str) -> None:
        from .registry import METRICS  # lazy: the registry imports every metric family

        spec = METRICS.get(self.metric)
        if spec is None or self.against_direction or self.bound == spec.default_bound:
            return
        fairer = "higher" if spec.direction == "higher_is_fairer" else "lower"
        raise ConfigError(
            f"{where}.bound: {self.bound!r} on {self.metric}, where {fairer} is fairer, "
            f"alerts exactly when the model is fair; use bound {spec.default_bound!r} (the "
            "default), or set against_direction: true if that is really meant.")

    def _check_compare(self, where: str) -> None:
        if self.compare not in COMPARES:
            raise ConfigError(f"{where}.compare: must be 'value', 'bound' or 'budget'; got "
                              f"{self.compare!r}.")
        from .registry import METRICS

        spec = METRICS.get(self.metric)
        if self.compare != "value" and spec is not None and spec.interval is None:
            with_interval = ", ".join(m for m, s in METRICS.items() if s.interval)
            why = f" ({spec.no_interval})" if spec.no_interval else ""
            raise ConfigError(
                f"{where}.compare: {self.metric} has no confidence interval{why}, so there is "
                f"no bound or evidence to compare ({self.compare}); use compare: value, or a "
                f"metric with one ({with_interval}).")

    def compared(self, value: float, lower: float = math.nan, upper: float = math.nan) -> float:
        """Return the quantity this threshold compares in one window.

        The value, or the unfair-side bound (``bound``, and ``budget`` whose sequence only the
        monitor keeps).
        """
        if self.compare == "value":
            return value
        return lower if self.bound == "upper" else upper

    def breaches(self, value: float, level: float | None) -> bool:
        """Return True if ``value`` is beyond ``level`` on the bad side by more than rounding.

        A value within :data:`TIE_ULPS` ulps of 1 (or of the larger of the two, if above
        1) of the level is a tie and does not breach: ``0.4 - 0.3`` and ``0.3 - 0.2`` against
        0.1 give the same verdict.
        """
        if level is None:
            return False
        beyond = value > level if self.bound == "upper" else value < level
        return beyond and abs(value - level) > TIE_ULPS * sys.float_info.epsilon * max(
            1.0, abs(value), abs(level))

    def severity(self, value: float) -> Severity:
        """Severity of ``value``: the worst level it breaches, or ``undefined`` for NaN."""
        if value is None or math.isnan(value):
            return "undefined"
        if self.breaches(value, self.critical):
            return "critical"
        if self.breaches(value, self.warning):
            return "warning"
        return "ok"

    def applies_to(self, metric: str, attribute: str, *, intersection: bool = False) -> bool:
        """Return True if this threshold governs ``metric`` on ``attribute``.

        A threshold without an ``attribute`` governs every sensitive attribute but not their
        automatic intersection (``intersection=True``): its many small cells cross any bound
        on noise alone, so an intersection is governed only by a threshold that names it.

        >>> t = Threshold("abcc", warning=0.1)
        >>> t.applies_to("abcc", "sex"), t.applies_to("abcc", "sex:race", intersection=True)
        (True, False)
        >>> Threshold("abcc", warning=0.1, attribute="sex:race").applies_to(
        ...     "abcc", "sex:race", intersection=True)
        True
        """
        if self.metric != metric:
            return False
        return self.attribute == attribute if self.attribute is not None else not intersection


def severity_code(severity: Severity) -> int | None:
    """Numeric alert state for Prometheus: 0 ok, 1 warning, 2 critical, None for undefined."""
    return _CODES.get(severity)


def worst(severities: Iterable[Severity]) -> Severity:
    """Return the most alarming severity; ``undefined`` when none breaches but one is undefined.

    A breach outranks an undefined value; an undefined value outranks ``ok``, because a value
    that could not be computed cannot be called fair (MLflow's validation fails on NaN too).
    ``ok`` for no severities at all.

    >>> worst(["ok", "critical", "warning"])
    'critical'
    >>> worst(["ok", "undefined"]), worst(["undefined", "warning"])
    ('undefined', 'warning')
    """
    result: Severity = "ok"
    undefined = False
    for s in severities:
        if s == "undefined":
            undefined = True
        elif SEVERITIES.index(s) > SEVERITIES.index(result):
            result = s
    return "undefined" if undefined and result == "ok" else result


def evaluate_thresholds(
    values: Mapping[tuple[str, str], float], thresholds: Iterable[Threshold],
    intersections: Iterable[str] = (), intervals: Mapping[tuple[str, str], Any] | None = None,
) -> dict[tuple[str, str], Severity]:
    """Severity of every (metric, attribute) value that some threshold governs.

    The most specific threshold wins: one naming the attribute beats one for all attributes.
    The attributes in ``intersections`` are governed only by thresholds that name them.
    A ``compare="bound"`` threshold reads the value's interval in ``intervals`` (objects with
    ``lower`` and ``upper``); without one its verdict is ``undefined``.
    """
    thresholds = list(thresholds)
    inter = frozenset(intersections)
    out: dict[tuple[str, str], Severity] = {}
    for (metric, attribute), value in values.items():
        matching = [t for t in thresholds
                    if t.applies_to(metric, attribute, intersection=attribute in inter)]
        if matching:
            best = max(matching, key=lambda t: t.attribute is not None)
            iv = (intervals or {}).get((metric, attribute))
            lower, upper = (iv.lower, iv.upper) if iv is not None else (math.nan, math.nan)
            out[(metric, attribute)] = best.severity(best.compared(value, lower, upper))
    return out
