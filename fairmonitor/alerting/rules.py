"""Prometheus alerting rules generated from the monitor's YAML.

Thresholds are written once, in the monitor config. The exporter publishes them as series
(``fairmonitor_threshold{model, metric, severity, bound}`` and, for per-attribute overrides,
``fairmonitor_threshold_by_attribute{..., sensitive_attribute}``), together with what the
liveness rules need per model (``fairmonitor_window_cadence_seconds``,
``fairmonitor_labels_after_seconds``, ``fairmonitor_model_info{team, owner}``). So the rules
never repeat a number and never name a model: a model added to the config is covered as soon as
the monitor exports it, without regenerating this file.

Choices:

- A recording rule ``fairmonitor:metric_value`` folds the per-metric gauges
  ``fairmonitor_<metric>`` into one series family with a ``metric`` label (``label_replace`` on
  ``__name__``), so the generic alert can join on ``(model, metric)``.
- Thresholds compare ``fairmonitor_metric_compared``, which the monitor exports for every
  defined value: the value itself (``compare: value``, the default) or, for
  ``compare: bound``, the confidence bound on the unfair side (the lower bound of a
  lower-is-fairer metric), so an alert fires on evidence rather than on noise. The choice is
  the threshold's, made where the thresholds are read; the rules stay generic.
- Both sides of every join are aggregated first (``max by``/``min by``): two monitor replicas,
  a blue/green overlap or two scrape jobs export the same series twice, and an unaggregated
  ``group_left`` join would fail to evaluate ("many-to-many matching") and silence every
  fairness alert. The stricter duplicate wins (the lower upper bound, the worse value).
- The alert identity is ``(model, metric, sensitive_attribute, bound, severity)`` plus the
  routing labels: ``version``, ``instance`` and ``job`` are aggregated away, so a rollout or a
  replica change does not resolve and re-fire an alert.
- The most specific threshold wins, as in
  :func:`fairmonitor.report.thresholds.evaluate_thresholds`: values of a (model, metric,
  attribute) that has an override are compared with the override only
  (``unless on(model, metric, sensitive_attribute) fairmonitor_threshold_by_attribute``).
- Persistence is counted in windows by the monitor, which knows which windows were
  evaluated (``monitor/streaks.py``): it exports per alerting series
  ``fairmonitor_breach_windows{model, metric, sensitive_attribute, bound, severity}`` (the
  consecutive evaluated windows beyond that severity's level; undefined and empty windows
  neither count nor reset, a defined value inside resets) and
  ``fairmonitor_breach_windows_required`` (the model's ``alert_windows``; 1 for a
  ``compare: budget`` series, whose window breaches when its sequential evidence reaches the
  model's page level, ``fairmonitor_breach_evidence`` against
  ``fairmonitor_breach_evidence_page_level``). The alert is the
  comparison of the two, max/min aggregated over replicas:
  ``breach_windows >= breach_windows_required``. No wall-clock arithmetic, no
  self-referencing recording rule: one breaching window followed by empty ones never pages.
  ``FairnessMetricUndefined`` and ``FairmonitorNoTraffic`` compare
  ``fairmonitor_undefined_windows`` / ``fairmonitor_no_traffic_windows`` with
  ``fairmonitor_undefined_windows_required`` the same way.
- A missing series (a restart, failed scrapes) holds the last state for
  :attr:`AlertOptions.hold_missing`: every streak is read through ``last_over_time``, which
  skips staleness markers, so a firing alert survives a restart while a real recovery (a
  streak back to 0) resolves at once. A monitor gone for longer resolves its alerts, and
  ``FairmonitorDown``/``FairmonitorAbsent`` page instead.
- A warning alert keeps firing while the critical one fires too: Alertmanager inhibits it
  (``docker/alertmanager.yml``, keyed on model, metric and attribute).
- Liveness comes from data: staleness and "never evaluated" read the exported cadence, a
  monitor that is down alerts per instance (``up == 0`` of the scrape job), and
  ``absent(fairmonitor_build_info)`` catches a monitor Prometheus does not scrape at all.
- ``FairmonitorRuleEvaluationFailures`` reads Prometheus' own
  ``prometheus_rule_evaluation_failures_total``: a fairmonitor rule that fails to evaluate
  pages instead of silently suppressing the alerts it would raise (Prometheus must scrape
  itself, as ``docker/prometheus.yml`` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..exceptions import ConfigError
from ..utils.groups import INTERSECTION_SEPARATOR
from ._common import (
    NAMESPACE,
    absolute_url,
    dashboard_url,
    dump_yaml,
    fairness_name_regex,
    promql_duration,
    promql_string,
    runbook_link,
)

__all__ = [
    "ALERTS", "AlertOptions", "CADENCE", "COMPARED", "METRIC_VALUE", "NO_TRAFFIC_WINDOWS",
    "ROLLUP_COMPARED", "ROUTING", "STREAK", "STREAK_REQUIRED", "UNDEFINED_REQUIRED",
    "UNDEFINED_WINDOWS",
    "breach_expr", "leaders_expr", "never_evaluated_expr", "no_traffic_expr", "prometheus_rules",
    "render_prometheus_rules", "streak_expr", "undefined_expr",
]

#: Recording rule: every fairness gauge, with the metric name moved into a ``metric`` label.
METRIC_VALUE = f"{NAMESPACE}:metric_value"
#: Exported by the monitor: what each value's threshold compares (the value, or its confidence
#: bound on the unfair side for ``compare: bound``), with a ``metric`` label.
COMPARED = f"{NAMESPACE}_metric_compared"
#: Exported by the monitor for each rollup value (a longer window merged from stored summaries).
ROLLUP_COMPARED = f"{NAMESPACE}_rollup_compared"
#: Recording rule: seconds between two evaluations of a model, the last value exported.
CADENCE = f"{NAMESPACE}:window_cadence_seconds"
#: Recording rule: one series per model carrying its routing labels (team, owner).
ROUTING = f"{NAMESPACE}:model_routing"
#: Exported by the monitor: consecutive breaching windows per (model, metric, attribute, bound,
#: severity), and the windows the alert needs (``monitor/streaks.py``).
STREAK = f"{NAMESPACE}_breach_windows"
STREAK_REQUIRED = f"{NAMESPACE}_breach_windows_required"
#: Exported by the monitor: consecutive undefined windows per (model, metric, attribute),
#: consecutive windows without rows per model, and the windows both alerts need.
UNDEFINED_WINDOWS = f"{NAMESPACE}_undefined_windows"
NO_TRAFFIC_WINDOWS = f"{NAMESPACE}_no_traffic_windows"
UNDEFINED_REQUIRED = f"{NAMESPACE}_undefined_windows_required"
#: Labels copied from ``fairmonitor_model_info`` onto every alert of a model, for routing.
ROUTING_LABELS = ("team", "owner")
#: Every alert name, in the order of the rule file (the runbook has one section per name).
ALERTS = (
    "FairnessThresholdBreached", "FairnessRollupThresholdBreached", "FairnessMetricUndefined",
    "FairmonitorNoTraffic",
    "FairmonitorWindowStale", "FairmonitorNeverEvaluated", "FairmonitorLabelsOverdue",
    "FairmonitorDataErrors", "FairmonitorErrors", "FairmonitorDown", "FairmonitorAbsent",
    "FairmonitorNoLeader",
    "FairmonitorRuleEvaluationFailures",
)
_OPERATOR = {"upper": ">", "lower": "<"}
#: The automatic intersection's attribute name, ``"a:b"`` (INTERSECTION_SEPARATOR), as a regex.
_INTERSECTION = f".+{INTERSECTION_SEPARATOR}.+"
_SERIES = "model, metric, sensitive_attribute"
_IDENTITY = "model, metric, sensitive_attribute, bound, severity"


@dataclass(frozen=True)
class AlertOptions:
    """How the generated alerts behave (shared by Prometheus and Grafana-managed rules).

    Parameters
    ----------
    grafana_url : str
        Base URL of Grafana, for the dashboard link in every alert: an absolute http(s) URL
        (checked by :func:`~._common.absolute_url`). Required: a link to ``localhost`` is
        useless in a page received on another machine.
    runbook_url : str or None
        Absolute http(s) URL where ``docs/runbook.md`` is served; every alert gets
        ``runbook_url: <runbook_url>#<alert name in lower case>``. None (the library default;
        ``fairmonitor rules`` requires it) writes no ``runbook_url`` rather than a relative
        link that no pager can open.
    stale_after : int
        Cadences without a successful window before the staleness alert fires; also the slack
        of "never evaluated" and of "labels overdue" (in windows).
    for_health : timedelta
        ``for:`` of the staleness, never-evaluated, labels-overdue and error alerts, so a
        transient condition at start-up does not page.
    error_window : timedelta
        Range of the error-rate alert (``increase(fairmonitor_errors_total[...]) > 0``).
    absent_for : timedelta
        How long a monitor may be down (or missing from Prometheus) before it alerts.
    keep_firing_for : timedelta
        Extra ``keep_firing_for`` of the threshold alerts (0: none), at the price of resolving
        that much later; :attr:`hold_missing` already rides out restarts and missed scrapes.
    hold_missing : timedelta
        How long the rules keep the last exported streaks of a series that is missing (a
        restart, failed scrapes): ``last_over_time`` range of every streak.
    scrape_job : str
        Regex of the Prometheus ``job`` label of the monitor's scrape targets
        (``FairmonitorDown``).
    """

    grafana_url: str
    runbook_url: str | None = None
    stale_after: int = 3
    for_health: timedelta = timedelta(minutes=5)
    error_window: timedelta = timedelta(minutes=15)
    absent_for: timedelta = timedelta(minutes=2)
    keep_firing_for: timedelta = timedelta(0)
    scrape_job: str = "fairmonitor"
    hold_missing: timedelta = timedelta(minutes=10)

    def __post_init__(self) -> None:
        absolute_url("grafana_url", self.grafana_url, "of your Grafana", query=False)
        if self.runbook_url is not None:
            absolute_url("runbook_url", self.runbook_url, "where docs/runbook.md is served")
        for name in ("stale_after",):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}: must be an integer >= 1 (windows); got {value!r}.")
        for name in ("for_health", "absent_for", "keep_firing_for"):
            if getattr(self, name) < timedelta(0):
                raise ConfigError(f"{name}: must not be negative; got {getattr(self, name)}.")
        if self.hold_missing < timedelta(seconds=1):
            raise ConfigError(f"hold_missing: must be at least 1s (a PromQL range); "
                              f"got {self.hold_missing}.")
        if self.error_window < timedelta(seconds=1):
            raise ConfigError(f"error_window: must be at least 1s (a PromQL range); "
                              f"got {self.error_window}.")
        if not self.scrape_job:
            raise ConfigError("scrape_job: must not be empty.")


def leaders_expr(options: AlertOptions) -> str:
    """Whether any replica of a scrape job leads (1) or all are standbys (0), per job.

    ``FairmonitorNoLeader`` fires on 0. Replicas share a checkpoint within one scrape job; a
    monitor without replicas always leads (its ``fairmonitor_leader`` is 1).

    >>> leaders_expr(AlertOptions(grafana_url="http://grafana:3000"))
    'max by (job) (fairmonitor_leader{job=~"fairmonitor"})'
    """
    return f"max by (job) ({NAMESPACE}_leader{{job=~{promql_string(options.scrape_job)}}})"


def breach_expr(severity: str, compared: str = COMPARED, series: str | None = None) -> str:
    """Return the PromQL of the threshold breaches of ``severity`` (the rollups' alert).

    Four branches joined by ``or``: general and per-attribute thresholds, upper and lower
    bounds. Each branch returns the worst value of a (model, metric, attribute) beyond its
    threshold, with those labels plus ``bound``; duplicates on either side are aggregated.
    ``compared`` and ``series`` (the labels kept) default to the windows' values; the rollups'
    are :data:`ROLLUP_COMPARED` by ``model, window, metric, sensitive_attribute``. The
    windows' own alert compares the monitor's streaks instead (:func:`streak_expr`).

    >>> print(*breach_expr("critical").splitlines()[:8], sep=chr(10))
    (
      max by (model, metric, sensitive_attribute) (
        fairmonitor_metric_compared{sensitive_attribute!~".+:.+"} unless on(model, metric, \
sensitive_attribute) fairmonitor_threshold_by_attribute
      )
      > on(model, metric) group_left(bound)
      min by (model, metric, bound) (
        fairmonitor_threshold{severity="critical", bound="upper"}
      )
    """
    series = series or _SERIES
    # a general threshold governs each attribute but not the automatic intersection ("a:b"),
    # whose many small cells cross any bound on noise alone: as Threshold.applies_to
    general = (f'{compared}{{sensitive_attribute!~"{_INTERSECTION}"}} '
               f"unless on({_SERIES}) {NAMESPACE}_threshold_by_attribute")
    branches = []
    for left, on, threshold in ((general, "model, metric", "threshold"),
                                (compared, _SERIES, "threshold_by_attribute")):
        for bound, op in _OPERATOR.items():
            # the worst value against the strictest threshold: max/min for upper/lower bounds
            worst, strict = ("max", "min") if bound == "upper" else ("min", "max")
            branches.append(
                f"(\n  {worst} by ({series}) (\n    {left}\n  )\n"
                f"  {op} on({on}) group_left(bound)\n"
                f"  {strict} by ({on}, bound) (\n"
                f'    {NAMESPACE}_{threshold}{{severity="{severity}", bound="{bound}"}}\n  )\n)')
    return "\nor\n".join(branches)


def _held(series: str, options: AlertOptions) -> str:
    """``series`` as last exported within :attr:`AlertOptions.hold_missing` (stale skipped)."""
    return f"last_over_time({series}[{promql_duration(options.hold_missing)}])"


def _streaks(streak: str, required: str, by: str, on: str, options: AlertOptions,
             matchers: str = "", zero: bool = False) -> str:
    """``streak >= required`` per ``by``, over replicas: the longest streak, the least need.

    ``zero`` (Grafana-managed rules) keeps the series that do not fire, at 0, so an instance
    resolves by its value rather than by vanishing.
    """
    sel = f"{{{matchers}}}" if matchers else ""
    left = f"max by ({by}) (\n  {_held(streak + sel, options)}\n)"
    group = "" if by == on else " group_left()"
    expr = (f"{left}\n>= on({on}){group}\n"
            f"min by ({on}) (\n  {_held(required + sel, options)}\n)")
    return f"(\n{_indent(expr)}\n)\nor on({by})\n{left} * 0" if zero else expr


def streak_expr(severity: str, options: AlertOptions, *, model: str | None = None,
                zero: bool = False) -> str:
    """Series whose breach streak of ``severity`` reached the windows it needs.

    The value is the streak (consecutive breaching windows). The longest streak and the
    smallest requirement win over duplicates (replicas, scrape jobs). ``model`` restricts it
    to one model, ``zero`` keeps the other series at 0 (the Grafana-managed rules).

    >>> print(streak_expr("critical", AlertOptions(grafana_url="http://g")))
    max by (model, metric, sensitive_attribute, bound, severity) (
      last_over_time(fairmonitor_breach_windows{severity="critical"}[10m])
    )
    >= on(model, metric, sensitive_attribute, bound, severity)
    min by (model, metric, sensitive_attribute, bound, severity) (
      last_over_time(fairmonitor_breach_windows_required{severity="critical"}[10m])
    )
    """
    matchers = f'severity="{severity}"'
    if model is not None:
        matchers = f"model={promql_string(model)}, {matchers}"
    return _streaks(STREAK, STREAK_REQUIRED, _IDENTITY, _IDENTITY, options, matchers, zero)


def undefined_expr(options: AlertOptions, *, zero: bool = False) -> str:
    """Series undefined (for a reason that alerts) for the windows their model needs."""
    return _streaks(UNDEFINED_WINDOWS, UNDEFINED_REQUIRED, _SERIES, "model", options,
                    zero=zero)


def no_traffic_expr(options: AlertOptions, *, zero: bool = False) -> str:
    """Models whose windows held no rows for the windows they need."""
    return _streaks(NO_TRAFFIC_WINDOWS, UNDEFINED_REQUIRED, "model", "model", options,
                    zero=zero)


def never_evaluated_expr(stale_after: int) -> str:
    """Models the monitor never evaluated a window of, though it ran ``stale_after`` cadences."""
    return (f"(\n  {stale_after} * {NAMESPACE}_window_cadence_seconds\n"
            "  < on(instance, job) group_left()\n  (time() - process_start_time_seconds)\n)\n"
            f"and on(instance, job, model)\n"
            f"({NAMESPACE}_window_last_success_timestamp_seconds == 0)")


def _routed(expr: str) -> str:
    """``expr`` (with a ``model`` label) with the model's routing labels added."""
    return (f"(\n{_indent(expr)}\n)\n* on(model) group_left({', '.join(ROUTING_LABELS)})\n"
            f"{ROUTING}")


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" if line else line for line in text.splitlines())


def _threshold_template(severity: str) -> str:
    """Go template printing the threshold that applies to the alert's series.

    It queries the override for the attribute first and falls back to the general threshold
    (``or on()`` keeps the right side only when the left side is empty). While no monitor is
    scraped (a held breach) there is none to print.
    """
    query = (f"{NAMESPACE}_threshold_by_attribute{{model=%q,metric=%q,sensitive_attribute=%q,"
             f'severity="{severity}",bound=%q}} or on() '
             f'{NAMESPACE}_threshold{{model=%q,metric=%q,severity="{severity}",bound=%q}}')
    args = ("$labels.model $labels.metric $labels.sensitive_attribute $labels.bound "
            "$labels.model $labels.metric $labels.bound")
    return (f"{{{{ with printf `{query}` {args} | query }}}}"
            '{{ . | first | value | printf "%.4g" }}{{ else }}(not exported now){{ end }}')


def _link(options: AlertOptions, **labels: str) -> str:
    return dashboard_url(options.grafana_url, **{
        var: f"{{{{ $labels.{label} | urlquery }}}}" for var, label in labels.items()})


def _annotations(options: AlertOptions, alert: str, summary: str, description: str,
                 dashboard: str) -> dict[str, str]:
    notes = {"summary": summary, "description": description, "dashboard": dashboard,
             "runbook_url": runbook_link(options.runbook_url, alert)}
    return {key: text for key, text in notes.items() if text is not None}


def _compared_template() -> str:
    """Go template printing the series' latest compared value, or saying it is undefined."""
    query = f"max({COMPARED}{{model=%q,metric=%q,sensitive_attribute=%q}})"
    args = "$labels.model $labels.metric $labels.sensitive_attribute"
    return (f"{{{{ with printf `{query}` {args} | query }}}}"
            '{{ . | first | value | printf "%.4g" }}{{ else }}undefined in the latest window '
            "(the alert holds until a defined value is inside the threshold){{ end }}")


def _required_template(options: AlertOptions) -> str:
    """Go template printing the windows the alert's series needs to fire."""
    query = (f"min(last_over_time({STREAK_REQUIRED}{{model=%q,metric=%q,sensitive_attribute=%q,"
             f"bound=%q,severity=%q}}[{promql_duration(options.hold_missing)}]))")
    args = ("$labels.model $labels.metric $labels.sensitive_attribute $labels.bound "
            "$labels.severity")
    return (f"{{{{ with printf `{query}` {args} | query }}}}"
            '{{ . | first | value | printf "%.0f" }}{{ else }}the required number of{{ end }}')


def _threshold_alert(severity: str, options: AlertOptions) -> dict[str, Any]:
    side = '{{ if eq $labels.bound "lower" }}below{{ else }}above{{ end }}'
    expr = streak_expr(severity, options)
    rule: dict[str, Any] = {
        "alert": "FairnessThresholdBreached",
        "expr": _routed(expr),
        "labels": {"severity": severity},
        "annotations": _annotations(
            options, "FairnessThresholdBreached",
            f"{{{{ $labels.metric }}}} {side} its {severity} threshold for "
            "{{ $labels.sensitive_attribute }} (model {{ $labels.model }})",
            f"{{{{ $labels.metric }}}} = {_compared_template()} on sensitive attribute "
            "{{ $labels.sensitive_attribute }} of model {{ $labels.model }}: "
            f"{side} the {severity} threshold {_threshold_template(severity)} in "
            '{{ $value | printf "%.0f" }} consecutive evaluated windows (it pages at '
            f"{_required_template(options)}; undefined and empty windows do not count).",
            _link(options, model="model", attribute="sensitive_attribute", metric="metric")),
    }
    if options.keep_firing_for > timedelta(0):
        rule["keep_firing_for"] = promql_duration(options.keep_firing_for)
    return rule


def _rollup_alert(severity: str, options: AlertOptions) -> dict[str, Any]:
    """Return the rule for a rollup value (a day, a week...) beyond its threshold (one window).

    A rollup window already spans many of the model's windows, so no persistence is asked; it
    resolves when the next rollup window is inside the threshold. An undefined value or a
    missing series resolves it (a rollup keeps no breach state).
    """
    side = '{{ if eq $labels.bound "lower" }}below{{ else }}above{{ end }}'
    expr = breach_expr(severity, ROLLUP_COMPARED, "model, window, metric, sensitive_attribute")
    return {
        "alert": "FairnessRollupThresholdBreached",
        "expr": _routed(expr),
        "labels": {"severity": severity},
        "annotations": _annotations(
            options, "FairnessRollupThresholdBreached",
            f"{{{{ $labels.metric }}}} over {{{{ $labels.window }}}} {side} its {severity} "
            "threshold for {{ $labels.sensitive_attribute }} (model {{ $labels.model }})",
            f"{{{{ $labels.metric }}}} = {{{{ $value | printf \"%.4g\" }}}} over the latest "
            "{{ $labels.window }} rollup on sensitive attribute "
            "{{ $labels.sensitive_attribute }} of model {{ $labels.model }}, "
            f"{side} the {severity} threshold {_threshold_template(severity)}.",
            _link(options, model="model", attribute="sensitive_attribute", metric="metric")),
    }


def _records() -> list[dict[str, Any]]:
    info = ", ".join(("model", *ROUTING_LABELS))
    records: list[dict[str, Any]] = [
        {"record": METRIC_VALUE,
         "expr": (f'label_replace({{__name__=~"{fairness_name_regex()}"}}, '
                  f'"metric", "$1", "__name__", "{NAMESPACE}_(.+)")')},
        # the last exported cadence: staleness still knows it while the monitor is down
        {"record": CADENCE,
         "expr": (f"max by (model) ({NAMESPACE}_window_cadence_seconds)\n"
                  f"or on(model)\n{CADENCE}")},
        # routing labels of each model: exported ones first, then the last known ones, then
        # none (every model with a series), so an alert never depends on the info series
        {"record": ROUTING,
         "expr": (f"topk by (model) (1, max by ({info}) ({NAMESPACE}_model_info))\n"
                  f"or on(model)\n{ROUTING}\n"
                  f'or on(model)\ngroup by (model) ({{__name__=~"{NAMESPACE}_.+", model!=""}})')},
    ]
    return records


def _health_alerts(options: AlertOptions) -> list[dict[str, Any]]:
    return [*_value_health_alerts(options), *_liveness_alerts(options),
            *_monitor_health_alerts(options)]


def _alert_for(options: AlertOptions) -> Any:
    """Return ``alert(name, expr, severity, summary, description, ...)``: one alerting rule."""
    model_link = _link(options, model="model")

    def alert(name: str, expr: str, severity: str, summary: str, description: str, *,
              for_: str | None = None, link: str = model_link, route: bool = True
              ) -> dict[str, Any]:
        rule: dict[str, Any] = {"alert": name, "expr": _routed(expr) if route else expr}
        if for_ is not None:
            rule["for"] = for_
        rule["labels"] = {"severity": severity}
        rule["annotations"] = _annotations(options, name, summary, description, link)
        return rule

    return alert


def _value_health_alerts(options: AlertOptions) -> list[dict[str, Any]]:
    """Alerts on the values: a metric undefined, windows without traffic."""
    alert = _alert_for(options)
    reason = (f"{{{{ with printf `max by (reason) ({NAMESPACE}_metric_undefined{{model=%q,"
              "metric=%q,sensitive_attribute=%q})` $labels.model $labels.metric "
              "$labels.sensitive_attribute | query }}{{ range . }}{{ .Labels.reason }} "
              "{{ end }}{{ else }}not exported now{{ end }}")
    return [
        alert("FairnessMetricUndefined", undefined_expr(options), "warning",
              "{{ $labels.metric }} is undefined for {{ $labels.sensitive_attribute }} "
              "(model {{ $labels.model }})",
              "{{ $labels.metric }} could not be computed in "
              '{{ $value | printf "%.0f" }} consecutive windows on sensitive attribute '
              "{{ $labels.sensitive_attribute }} of model {{ $labels.model }} (reason now: "
              f"{reason}). insufficient_data: fewer than two groups reach min_group_size; "
              "too_few_groups: the traffic holds a single group; error: the metric failed. "
              "A group that vanishes from the traffic can itself be the bias.",
              link=_link(options, model="model", attribute="sensitive_attribute",
                         metric="metric")),
        alert("FairmonitorNoTraffic", no_traffic_expr(options),
              "warning", "No predictions in the latest windows of model {{ $labels.model }}",
              '{{ $value | printf "%.0f" }} consecutive windows of model '
              "{{ $labels.model }} held no rows: the model gets no traffic or its predictions "
              "are not logged. Fairness values stay undefined (and alert streaks keep their "
              "count) until rows arrive."),
    ]


def _liveness_alerts(options: AlertOptions) -> list[dict[str, Any]]:
    """Alerts on each model's windows: stale, never evaluated, labels overdue, errors."""
    alert = _alert_for(options)
    n = options.stale_after
    health_for = promql_duration(options.for_health)
    window = promql_duration(options.error_window)
    last = f"{NAMESPACE}_window_last_success_timestamp_seconds"
    return [
        alert("FairmonitorWindowStale",
              f"time() - max by (model) ({last} > 0)\n> on(model)\n{n} * {CADENCE}", "warning",
              f"No fairness window evaluated for model {{{{ $labels.model }}}} in {n} "
              "cadences",
              "The last successful window of model {{ $labels.model }} was "
              "{{ $value | humanizeDuration }} ago (more than "
              f"{n} x its cadence): the data source is down or the monitor is stuck, so its "
              "fairness gauges are stale.", for_=health_for),
        alert("FairmonitorNeverEvaluated",
              never_evaluated_expr(n), "warning",
              "Model {{ $labels.model }} has no evaluated window yet on {{ $labels.instance }}",
              "The monitor on {{ $labels.instance }} has run for more than "
              f"{{{{ $value | humanizeDuration }}}} ({n} cadences) without evaluating a "
              "window of model {{ $labels.model }}: check its data source and the monitor's "
              "log.", for_=health_for),
        alert("FairmonitorLabelsOverdue",
              f"max by (model) ({NAMESPACE}_labels_overdue_windows) > 0", "warning",
              "Labels of model {{ $labels.model }} are overdue",
              '{{ $value | printf "%.0f" }} labelled window(s) in a row of model '
              "{{ $labels.model }} had fewer than min_label_coverage of their rows labelled "
              "labels_after after they closed: the ground truth has stopped arriving (or "
              "labels_after is too short). Their label metrics (equalized odds, ...) are "
              "undefined (reason labels_overdue) or rest on the few labelled rows, and their "
              "threshold alerts hold their state until labels are back.", for_=health_for),
        alert("FairmonitorDataErrors",
              f"max by (model) ({NAMESPACE}_data_error_windows) > 0", "warning",
              "Data error: windows of model {{ $labels.model }} are held",
              '{{ $value | printf "%.0f" }} due window(s) of model {{ $labels.model }} '
              "cannot be read: a configured column is missing from the source (a typo in the "
              "config, a renamed column) or cannot be converted. The monitor's log names the "
              "column, lists the available ones and says the fix; the windows wait for it "
              "(at most catch_up of them are evaluated once fixed, older ones are skipped)."),
        alert("FairmonitorErrors",
              f"sum by (model, stage) (increase({NAMESPACE}_errors_total"
              f'{{stage!="data"}}[{window}])) > 0',
              "warning",
              "fairmonitor {{ $labels.stage }} errors for model {{ $labels.model }}",
              '{{ $value | printf "%.0f" }} {{ $labels.stage }} error(s) in the last '
              f"{window} for model {{{{ $labels.model }}}}; the monitor's log says what "
              "failed and how to fix it.", for_=health_for),
    ]


def _monitor_health_alerts(options: AlertOptions) -> list[dict[str, Any]]:
    """Alerts on the monitor itself: down, absent, no replica leading, rules failing."""
    alert = _alert_for(options)
    job = promql_string(options.scrape_job)
    return [
        alert("FairmonitorDown", f"up{{job=~{job}}} == 0", "critical",
              "fairmonitor on {{ $labels.instance }} is down",
              "Prometheus cannot scrape the monitor at {{ $labels.instance }} (job "
              "{{ $labels.job }}): the models it monitors get no new fairness values, and "
              "their fairness alerts keep their last state.",
              for_=promql_duration(options.absent_for), link=dashboard_url(options.grafana_url),
              route=False),
        alert("FairmonitorAbsent", f"absent({NAMESPACE}_build_info)", "critical",
              "No fairness monitor is being scraped",
              "No fairmonitor_build_info series at all: no monitor runs, or Prometheus has no "
              f"scrape job for it (expected job {options.scrape_job!r}), so no fairness "
              "alert can fire.", for_=promql_duration(options.absent_for),
              link=dashboard_url(options.grafana_url), route=False),
        alert("FairmonitorNoLeader", f"{leaders_expr(options)} == 0", "critical",
              "No fairmonitor replica of job {{ $labels.job }} holds the lease",
              "Every replica of job {{ $labels.job }} that Prometheus scrapes is a standby "
              "(fairmonitor_leader 0): no window is evaluated. Each replica's log says why it "
              "cannot take the checkpoint's lease (its database unreachable, a lock held).",
              for_=promql_duration(options.absent_for), link=dashboard_url(options.grafana_url),
              route=False),
        alert("FairmonitorRuleEvaluationFailures",
              "sum by (rule_group) (increase(prometheus_rule_evaluation_failures_total"
              f'{{rule_group=~".*;{NAMESPACE}[.].*"}}[5m])) > 0', "critical",
              "fairmonitor rules fail to evaluate ({{ $labels.rule_group }})",
              '{{ $value | printf "%.0f" }} evaluation failure(s) of the rule group '
              "{{ $labels.rule_group }} in the last 5m: while a rule fails, the alerts it "
              "would raise cannot fire. The Prometheus log names the rule and the error.",
              link=dashboard_url(options.grafana_url), route=False),
    ]


def prometheus_rules(config: Any, options: AlertOptions) -> dict[str, Any]:
    """Return the Prometheus rule file (as a mapping).

    Parameters
    ----------
    config : MonitorConfig or None
        The monitor configuration. The rules read everything per model from the exported
        series, so it is only named in the header; kept for a stable signature.
    options : AlertOptions
        Windows, durations, Grafana and runbook URLs.

    Returns
    -------
    dict
        ``{"groups": [...]}``, ready for :func:`render_prometheus_rules` / YAML. One group:
        Prometheus evaluates its rules in order, so every alert sees this evaluation's records.
    """
    del config  # every per-model fact comes from the exported series
    rules = _records()
    rules += [_threshold_alert("warning", options), _threshold_alert("critical", options)]
    rules += [_rollup_alert("warning", options), _rollup_alert("critical", options)]
    rules += _health_alerts(options)
    return {"groups": [{"name": f"{NAMESPACE}.rules", "rules": rules}]}


def render_prometheus_rules(config: Any, options: AlertOptions, *,
                            source: str = "the monitor config") -> str:
    """YAML text of :func:`prometheus_rules`, with a header naming ``source``."""
    header = (f"Generated by `fairmonitor rules` from {source}; do not edit by hand.\n"
              "Thresholds, cadences and routing labels are read from the series the monitor "
              "exports.")
    return dump_yaml(prometheus_rules(config, options), header)
