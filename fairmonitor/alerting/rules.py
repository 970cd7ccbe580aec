"""Prometheus alerting rules generated from the monitor's YAML.

Thresholds are written once, in the monitor config. The exporter publishes them as series
(``fairmonitor_threshold{model, metric, severity, bound}`` and, for per-attribute overrides,
``fairmonitor_threshold_by_attribute{..., sensitive_attribute}``), so the rules never repeat a
number: ONE generic alert per severity compares every fairness gauge with the threshold series of
its (model, metric). Changing a threshold means editing the YAML and restarting the monitor; the
rules file stays the same unless models are added or their cadence changes.

Choices:

- A recording rule ``fairmonitor:metric_value`` folds the per-metric gauges
  ``fairmonitor_<metric>`` into one series family with a ``metric`` label (``label_replace`` on
  ``__name__``), so the generic alert can join on ``(model, metric)``.
- The most specific threshold wins, as in :func:`fairmonitor.report.thresholds.evaluate_thresholds`:
  values of a (model, metric, attribute) that has an override are compared with the override
  only (``unless on(model, metric, sensitive_attribute) fairmonitor_threshold_by_attribute``).
- Both bounds in one alert: ``>`` against ``bound="upper"`` thresholds, ``<`` against
  ``bound="lower"``; the ``bound`` label is copied onto the alert (``group_left(bound)``).
- A warning alert keeps firing while the critical one fires too (route or inhibit in
  Alertmanager); the two differ only in severity, threshold series and ``for:``.
- Staleness is generic too: the cadence of each model (the slower of ``every`` and the monitor's
  ``tick``) is a recorded constant ``fairmonitor:window_cadence_seconds{model}``. A model that
  never completed a window (timestamp 0) gets its own alert after N cadences, and
  ``absent(fairmonitor_build_info)`` catches a monitor that is down or not scraped at all, which
  the staleness alert cannot see (its series vanish with the monitor).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..exceptions import ConfigError
from ._common import (
    NAMESPACE,
    cadence_seconds,
    dashboard_url,
    dump_yaml,
    fairness_name_regex,
    promql_duration,
    promql_string,
)

__all__ = [
    "AlertOptions", "CADENCE", "METRIC_VALUE", "breach_expr", "prometheus_rules",
    "render_prometheus_rules",
]

#: Recording rule: every fairness gauge, with the metric name moved into a ``metric`` label.
METRIC_VALUE = f"{NAMESPACE}:metric_value"
#: Recording rule: seconds between two evaluations of a model (one constant series per model).
CADENCE = f"{NAMESPACE}:window_cadence_seconds"
_OPERATOR = {"upper": ">", "lower": "<"}


@dataclass(frozen=True)
class AlertOptions:
    """How the generated alerts behave (shared by Prometheus and Grafana-managed rules).

    Parameters
    ----------
    grafana_url : str
        Base URL of Grafana, for the dashboard link in every alert.
    stale_after : int
        Cadences without a successful window before the staleness alert fires.
    for_warning, for_critical : timedelta
        How long a threshold must stay breached before the alert fires.
    error_window : timedelta
        Range of the error-rate alert (``increase(fairmonitor_errors_total[...]) > 0``).
    absent_for : timedelta
        How long the monitor may be missing from Prometheus before the absence alert fires.
    """

    grafana_url: str = "http://localhost:3000"
    stale_after: int = 3
    for_warning: timedelta = timedelta(minutes=15)
    for_critical: timedelta = timedelta(minutes=5)
    error_window: timedelta = timedelta(minutes=15)
    absent_for: timedelta = timedelta(minutes=5)

    def __post_init__(self) -> None:
        if isinstance(self.stale_after, bool) or not isinstance(self.stale_after, int) \
                or self.stale_after < 1:
            raise ConfigError(f"stale_after: must be an integer >= 1 (cadences); "
                              f"got {self.stale_after!r}.")
        for name in ("for_warning", "for_critical", "absent_for"):
            if getattr(self, name) < timedelta(0):
                raise ConfigError(f"{name}: must not be negative; got {getattr(self, name)}.")
        if self.error_window < timedelta(seconds=1):
            raise ConfigError(f"error_window: must be at least 1s (a PromQL range); "
                              f"got {self.error_window}.")

    def for_(self, severity: str) -> timedelta:
        """The ``for:`` duration of ``severity`` (``"warning"`` or ``"critical"``)."""
        return self.for_warning if severity == "warning" else self.for_critical


def breach_expr(severity: str) -> str:
    """The PromQL of the generic threshold alert of ``severity``.

    Four branches joined by ``or``: general and per-attribute thresholds, upper and lower
    bounds. Each branch returns the metric value with the labels of the value series plus
    ``bound``.

    >>> print(breach_expr("critical").splitlines()[1])
      (fairmonitor:metric_value unless on(model, metric, sensitive_attribute) \
fairmonitor_threshold_by_attribute)
    """
    general = (f"({METRIC_VALUE} unless on(model, metric, sensitive_attribute) "
               f"{NAMESPACE}_threshold_by_attribute)")
    branches = []
    for left, on, series in ((general, "model, metric", "threshold"),
                             (METRIC_VALUE, "model, metric, sensitive_attribute",
                              "threshold_by_attribute")):
        for bound, op in _OPERATOR.items():
            branches.append(
                f"(\n  {left}\n  {op} on({on}) group_left(bound)\n"
                f'  {NAMESPACE}_{series}{{severity="{severity}", bound="{bound}"}}\n)')
    return "\nor\n".join(branches)


def _threshold_template(severity: str) -> str:
    """Go template printing the threshold that applies to the alert's series.

    It queries the override for the attribute first and falls back to the general threshold
    (``or on()`` keeps the right side only when the left side is empty).
    """
    query = (f"{NAMESPACE}_threshold_by_attribute{{model=%q,metric=%q,sensitive_attribute=%q,"
             f'severity="{severity}",bound=%q}} or on() '
             f'{NAMESPACE}_threshold{{model=%q,metric=%q,severity="{severity}",bound=%q}}')
    args = ("$labels.model $labels.metric $labels.sensitive_attribute $labels.bound "
            "$labels.model $labels.metric $labels.bound")
    return (f"{{{{ with printf `{query}` {args} | query }}}}"
            '{{ . | first | value | printf "%.4g" }}{{ end }}')


def _link(options: AlertOptions, **labels: str) -> str:
    return dashboard_url(options.grafana_url, **{
        var: f"{{{{ $labels.{label} | urlquery }}}}" for var, label in labels.items()})


def _threshold_alert(severity: str, options: AlertOptions) -> dict[str, Any]:
    side = '{{ if eq $labels.bound "lower" }}below{{ else }}above{{ end }}'
    version = "{{ with $labels.version }} version {{ . }}{{ end }}"
    return {
        "alert": "FairnessThresholdBreached",
        "expr": breach_expr(severity),
        "for": promql_duration(options.for_(severity)),
        "labels": {"severity": severity},
        "annotations": {
            "summary": (f"{{{{ $labels.metric }}}} {side} its {severity} threshold for "
                        "{{ $labels.sensitive_attribute }} (model {{ $labels.model }})"),
            "description": (
                '{{ $labels.metric }} = {{ $value | printf "%.4g" }} on sensitive attribute '
                f"{{{{ $labels.sensitive_attribute }}}} of model {{{{ $labels.model }}}}"
                f"{version}, {side} the {severity} threshold {_threshold_template(severity)}."),
            "dashboard": _link(options, model="model", attribute="sensitive_attribute",
                               metric="metric"),
        },
    }


def prometheus_rules(config: Any, options: AlertOptions | None = None) -> dict[str, Any]:
    """The Prometheus rule file (as a mapping) for a :class:`~.monitor.config.MonitorConfig`.

    Parameters
    ----------
    config : MonitorConfig
        The monitor configuration (``fairmonitor.monitor.config.load_config``).
    options : AlertOptions, optional
        Durations, staleness factor and Grafana URL; defaults if omitted.

    Returns
    -------
    dict
        ``{"groups": [...]}``, ready for :func:`render_prometheus_rules` / YAML.
    """
    options = options or AlertOptions()
    models: Mapping[str, Any] = config.models
    records: list[dict[str, Any]] = [{
        "record": METRIC_VALUE,
        "expr": (f'label_replace({{__name__=~"{fairness_name_regex()}"}}, '
                 f'"metric", "$1", "__name__", "{NAMESPACE}_(.+)")'),
    }]
    records += [{"record": CADENCE, "expr": f"vector({cadence_seconds(m, config.tick)})",
                 "labels": {"model": name}} for name, m in models.items()]
    n = options.stale_after
    alerts = [_threshold_alert("warning", options), _threshold_alert("critical", options)]
    alerts.append({
        "alert": "FairmonitorWindowStale",
        "expr": (f"time() - ({NAMESPACE}_window_last_success_timestamp_seconds > 0)\n"
                 f"  > on(model) group_left()\n  {n} * {CADENCE}"),
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "No fairness window evaluated for model {{ $labels.model }} "
                       f"in {n} cadences",
            "description": ("The last successful window of model {{ $labels.model }} was "
                            "{{ $value | humanizeDuration }} ago (more than "
                            f"{n} x its cadence): the data source is down or the monitor is "
                            "stuck, so its fairness gauges are stale."),
            "dashboard": _link(options, model="model"),
        },
    })
    for name, m in models.items():
        stale = promql_duration(timedelta(seconds=n * cadence_seconds(m, config.tick)))
        alerts.append({
            "alert": "FairmonitorNeverEvaluated",
            "expr": (f"{NAMESPACE}_window_last_success_timestamp_seconds"
                     f"{{model={promql_string(name)}}} == 0"),
            "for": stale,
            "labels": {"severity": "warning", "model": name},
            "annotations": {
                "summary": f"Model {name} has no evaluated window yet",
                "description": (f"The monitor has run for {stale} ({n} cadences) without "
                                f"evaluating a window of model {name}: check its data source "
                                "and the monitor's log."),
                "dashboard": dashboard_url(options.grafana_url, model=name),
            },
        })
    window = promql_duration(options.error_window)
    alerts.append({
        "alert": "FairmonitorErrors",
        "expr": f"increase({NAMESPACE}_errors_total[{window}]) > 0",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "fairmonitor {{ $labels.stage }} errors for model {{ $labels.model }}",
            "description": ('{{ $value | printf "%.0f" }} {{ $labels.stage }} error(s) in the '
                            f"last {window} for model {{{{ $labels.model }}}}; see the "
                            "monitor's log."),
            "dashboard": _link(options, model="model"),
        },
    })
    alerts.append({
        "alert": "FairmonitorAbsent",
        "expr": f"absent({NAMESPACE}_build_info)",
        "for": promql_duration(options.absent_for),
        "labels": {"severity": "critical"},
        "annotations": {
            "summary": "The fairness monitor is not being scraped",
            "description": ("No fairmonitor_build_info series: the monitor is down or "
                            "Prometheus cannot scrape it, so no fairness alert can fire."),
            "dashboard": dashboard_url(options.grafana_url),
        },
    })
    return {"groups": [{"name": f"{NAMESPACE}.records", "rules": records},
                       {"name": f"{NAMESPACE}.alerts", "rules": alerts}]}


def render_prometheus_rules(config: Any, options: AlertOptions | None = None, *,
                            source: str = "the monitor config") -> str:
    """YAML text of :func:`prometheus_rules`, with a header naming ``source``."""
    header = (f"Generated by `fairmonitor rules` from {source}; do not edit by hand.\n"
              "Thresholds are read from the fairmonitor_threshold* series the monitor exports.")
    return dump_yaml(prometheus_rules(config, options), header)
