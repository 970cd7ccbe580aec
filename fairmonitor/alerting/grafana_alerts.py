"""Grafana-managed alerting (file provisioning): the opt-in alternative to Alertmanager.

The default path is Prometheus rules -> Alertmanager (``docker/alertmanager.yml``). Teams that
alert in Grafana instead provision this file: rules with the same thresholds, a webhook contact
point and a notification policy. Never run both paths at once, or every breach pages twice:
``docker/compose.grafana-alerting.yaml`` mounts this file and stops Prometheus from sending to
Alertmanager. The file lives outside ``dashboards/provisioning/`` so that it is not loaded by
default.

Every rule is query ``A`` (instant PromQL on the provisioned data source), ``B`` =
reduce(A, last), ``C`` = threshold(B). Every series of ``A`` is its own alert instance, so one
rule covers all attributes and metrics of a model.

The file follows Grafana's file-provisioning format (``apiVersion: 1``, ``groups[].rules[]``
with ``uid, title, condition, data, noDataState, execErrState, for, annotations, labels``, plus
``contactPoints`` and ``policies``), not the provisioning-API JSON that grafana-foundation-sdk's
alerting builders emit.

Choices:

- The window alerts read what the monitor counts, with the very PromQL of the Prometheus rules
  (:func:`.rules.streak_expr`, :func:`.rules.undefined_expr`, :func:`.rules.no_traffic_expr`):
  per model and severity one rule whose query is the streak where it reached
  ``fairmonitor_breach_windows_required`` and 0 elsewhere (``zero``: an instance resolves by
  its value, not by vanishing), condition ``> 0``, ``for: 0s``. So undefined and empty windows
  neither count nor reset, a restart holds for ``hold_missing``, and the required windows are
  the monitor config's ``alert_windows``, exactly as with Alertmanager.
- A model with ``rollups`` gets its thresholds on ``fairmonitor_rollup_compared`` (one
  instance per rollup ``window`` and attribute, no persistence), as the Prometheus rule
  ``FairnessRollupThresholdBreached``. Those queries aggregate ``by (model, window,
  sensitive_attribute)`` (the worst value), so replicas do not duplicate instances; a
  per-attribute override gets its own rule and the general rule excludes that attribute
  (``sensitive_attribute!="sex"``): the most specific threshold wins, as in the monitor.
- ``noDataState: OK`` because ``FairmonitorAbsent`` covers a monitor that is gone;
  ``execErrState: Error`` surfaces a broken query.
- Routing as ``docker/alertmanager.yml`` (:mod:`.routing`): pages in their own groups with a
  30 s ``group_interval``, the monitor's and the pipelines' health to the monitoring on-call
  (contact point ``fairmonitor-oncall``), model-level health to it *and* to the teams
  (``continue``). Every rule carries the Prometheus alert name in :data:`ALERT_LABEL`, which
  the policies match (Grafana's ``alertname`` is the rule title).
- One cause, one page: Grafana 11 has no inhibition rules (its Alertmanager configuration
  takes them only for an external Alertmanager). The symptom rules therefore drop, in their
  query, the models whose cause holds (:func:`.routing.unless_cause`: errors of a source,
  data or checkpoint stage in the last ``error_window``). This suppresses rather than mutes:
  the symptom shows Normal while its cause holds (an inhibited Prometheus alert still shows
  firing), and it fires, after its own ``for``, once the cause is gone. ``FairmonitorDown`` and
  ``FairmonitorAbsent`` need no such clause: the series of a monitor that is not scraped go
  stale, so no symptom query has data (``noDataState: OK``).
- Rule uids are stable hashes of what the rule checks (Grafana allows at most 40 characters),
  so regenerating the file updates rules in place.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

from ..report.thresholds import Threshold
from ._common import (
    DASHBOARD_UID,
    DATASOURCE_UID,
    FOLDER,
    NAMESPACE,
    dashboard_url,
    dump_yaml,
    promql_duration,
    promql_string,
    runbook_link,
)
from .routing import (
    BATCH_TIMING,
    MODEL_HEALTH_ALERTS,
    MONITOR_ALERTS,
    MONITOR_TIMING,
    PAGE_TIMING,
    alert_regex,
    unless_cause,
)
from .rules import (
    _INTERSECTION,
    ROUTING_LABELS,
    AlertOptions,
    leaders_expr,
    never_evaluated_expr,
    no_traffic_expr,
    streak_expr,
    undefined_expr,
)

__all__ = ["ALERT_LABEL", "ALERT_STATE_PANEL_ID", "CONTACT_POINT", "ONCALL_CONTACT_POINT",
           "grafana_alert_rules", "render_grafana_alert_rules"]

#: Panel of the dashboard linked from every fairness rule (the alert-state timeline).
ALERT_STATE_PANEL_ID = 2
#: Name of the provisioned contact point (a webhook; its URL comes from the environment).
CONTACT_POINT = "fairmonitor-webhook"
#: Contact point of the monitoring on-call (the monitor's and the pipelines' health); its URL
#: comes from ``$FAIRMONITOR_ONCALL_WEBHOOK_URL``.
ONCALL_CONTACT_POINT = "fairmonitor-oncall"
#: Label carrying the Prometheus alert name on every Grafana rule: Grafana names an alert after
#: its rule title, so the policies route (and silences match) on this label instead.
ALERT_LABEL = "fairmonitor_alert"
_EVALUATOR = {"upper": "gt", "lower": "lt"}
_WORST = {"upper": "max", "lower": "min"}
_EXPR = {"type": "__expr__", "uid": "__expr__"}


def _uid(*parts: str) -> str:
    digest = hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:20]
    return f"fm-{digest}"


def _rule(uid: str, title: str, expr: str, evaluator: str, level: float, *,
          for_: str, labels: dict[str, str], annotations: dict[str, str],
          panel: int | None = None, no_data: str = "OK") -> dict[str, Any]:
    """One rule: A = instant query, B = last value, C = threshold on B (the condition)."""
    rule: dict[str, Any] = {
        "uid": uid,
        "title": title,
        "condition": "C",
        "data": [
            {"refId": "A", "relativeTimeRange": {"from": 600, "to": 0},
             "datasourceUid": DATASOURCE_UID,
             "model": {"refId": "A", "expr": expr, "instant": True, "range": False,
                       "intervalMs": 1000, "maxDataPoints": 43200,
                       "datasource": {"type": "prometheus", "uid": DATASOURCE_UID}}},
            {"refId": "B", "datasourceUid": "__expr__",
             "model": {"refId": "B", "type": "reduce", "expression": "A", "reducer": "last",
                       "datasource": dict(_EXPR)}},
            {"refId": "C", "datasourceUid": "__expr__",
             "model": {"refId": "C", "type": "threshold", "expression": "B",
                       "conditions": [{"evaluator": {"type": evaluator, "params": [level]}}],
                       "datasource": dict(_EXPR)}},
        ],
        "noDataState": no_data,
        "execErrState": "Error",
        "for": for_,
        # no runbook_url at all rather than a relative link (AlertOptions.runbook_url None)
        "annotations": {key: text for key, text in annotations.items() if text is not None},
        "labels": labels,
        "isPaused": False,
    }
    if panel is not None:
        rule["dashboardUid"] = DASHBOARD_UID
        rule["panelId"] = panel
    return rule


def _selector(model: str, t: Threshold, overridden: Iterable[str]) -> str:
    """Return the worst rollup value ``t`` governs, per (model, rollup window, attribute)."""
    matchers = [f"model={promql_string(model)}", f"metric={promql_string(t.metric)}"]
    if t.attribute is not None:
        matchers.append(f"sensitive_attribute={promql_string(t.attribute)}")
    else:
        matchers += [f"sensitive_attribute!={promql_string(a)}" for a in sorted(overridden)]
        # not the automatic intersection ("a:b"): only a threshold naming it governs it
        matchers.append(f'sensitive_attribute!~"{_INTERSECTION}"')
    # what the monitor compares (the value, or the bound for compare: bound); the worst value
    # over replicas and versions: one instance per (model, rollup, attribute)
    return (f"{_WORST[t.bound]} by (model, window, sensitive_attribute) "
            f"({NAMESPACE}_rollup_compared{{{', '.join(matchers)}}})")


def _routing(cfg: Any) -> dict[str, str]:
    """Return the model's routing labels (team, owner) that are set in its config."""
    return {name: str(getattr(cfg, name)) for name in ROUTING_LABELS
            if getattr(cfg, name, None)}


def _levels(cfg: Any) -> Iterator[tuple[Threshold, set[str], str, float]]:
    """Each configured bound: (threshold, attributes overriding its metric, severity, level)."""
    thresholds: tuple[Threshold, ...] = tuple(cfg.thresholds)
    for t in thresholds:
        overridden = {o.attribute for o in thresholds
                      if o.metric == t.metric and o.attribute is not None}
        for severity in ("warning", "critical"):
            level = getattr(t, severity)
            if level is not None:
                yield t, overridden, severity, float(level)


def _threshold_labels(model: str, cfg: Any, t: Threshold, severity: str,
                      alert: str = "FairnessThresholdBreached") -> dict[str, str]:
    return {"severity": severity, "model": model, "metric": t.metric, "bound": t.bound,
            **_routing(cfg), ALERT_LABEL: alert}


def _threshold_link(options: AlertOptions, model: str, t: Threshold) -> str:
    return dashboard_url(options.grafana_url, model=model, metric=t.metric,
                         attribute="{{ $labels.sensitive_attribute | urlquery }}")


def _threshold_rules(model: str, cfg: Any, options: AlertOptions) -> list[dict[str, Any]]:
    """Per severity the model has a level of: its streaks that reached the required windows."""
    rules = []
    for severity in ("warning", "critical"):
        if not any(level for _, _, sev, level in _levels(cfg) if sev == severity):
            continue
        side = '{{ if eq $labels.bound "lower" }}below{{ else }}above{{ end }}'
        rules.append(_rule(
            _uid("streak", model, severity), f"{model}: fairness {severity}",
            streak_expr(severity, options, model=model, zero=True), "gt", 0.0, for_="0s",
            labels={"severity": severity, "model": model, **_routing(cfg),
                    ALERT_LABEL: "FairnessThresholdBreached"},
            panel=ALERT_STATE_PANEL_ID,
            annotations={
                "summary": (f"{{{{ $labels.metric }}}} {side} its {severity} threshold for "
                            f"{{{{ $labels.sensitive_attribute }}}} (model {model})"),
                "description": (
                    f"{{{{ $labels.metric }}}} on sensitive attribute "
                    f"{{{{ $labels.sensitive_attribute }}}} of model {model} was {side} the "
                    f"{severity} threshold in {{{{ printf \"%.0f\" $values.B.Value }}}} "
                    "consecutive evaluated windows (alert_windows of the monitor config; "
                    "undefined and empty windows do not count)."),
                "dashboard": dashboard_url(
                    options.grafana_url, model=model,
                    metric="{{ $labels.metric | urlquery }}",
                    attribute="{{ $labels.sensitive_attribute | urlquery }}"),
                "runbook_url": runbook_link(options.runbook_url, "FairnessThresholdBreached"),
            }))
    return rules


def _rollup_rules(model: str, cfg: Any, options: AlertOptions) -> list[dict[str, Any]]:
    """Return the model's thresholds on its rollups (``fairmonitor_rollup_compared``), if any.

    As the Prometheus rule ``FairnessRollupThresholdBreached``: no persistence (a rollup window
    already spans many windows), one instance per rollup (``window`` label) and attribute.
    """
    if not getattr(cfg, "rollups", ()):
        return []
    rules = []
    for t, overridden, severity, level in _levels(cfg):
        scope = t.attribute or "{{ $labels.sensitive_attribute }}"
        side = "above" if t.bound == "upper" else "below"
        rules.append(_rule(
            _uid("rollup", model, t.metric, t.attribute or "", severity),
            f"{model}: {t.metric} {severity} over rollups"
            + (f" ({t.attribute})" if t.attribute else ""),
            _selector(model, t, overridden), _EVALUATOR[t.bound], level,
            for_="0s",
            labels=_threshold_labels(model, cfg, t, severity, "FairnessRollupThresholdBreached"),
            panel=ALERT_STATE_PANEL_ID,
            annotations={
                "summary": (f"{t.metric} over {{{{ $labels.window }}}} {side} its "
                            f"{severity} threshold for {scope} (model {model})"),
                "description": (
                    f"{t.metric} = {{{{ printf \"%.4g\" $values.B.Value }}}} over the "
                    "latest {{ $labels.window }} rollup on sensitive attribute "
                    f"{{{{ $labels.sensitive_attribute }}}} of model {model}, {side} the "
                    f"{severity} threshold {level:g}."),
                "dashboard": _threshold_link(options, model, t),
                "runbook_url": runbook_link(options.runbook_url,
                                            "FairnessRollupThresholdBreached"),
            }))
    return rules


def _health_rules(options: AlertOptions) -> list[dict[str, Any]]:
    """Liveness rules for every model at once, from the exported series (no per-model copy)."""
    return [*_value_health_rules(options), *_liveness_rules(options),
            *_monitor_health_rules(options)]


def _notes_for(options: AlertOptions) -> Any:
    """Return ``notes(alert, summary, description, link=<model dashboard>)``: annotations."""
    model_link = dashboard_url(options.grafana_url, model="{{ $labels.model | urlquery }}")

    def notes(alert: str, summary: str, description: str, link: str = model_link
              ) -> dict[str, str]:
        return {"summary": summary, "description": description, "dashboard": link,
                "runbook_url": runbook_link(options.runbook_url, alert)}

    return notes


def _labels(alert: str, severity: str) -> dict[str, str]:
    return {"severity": severity, ALERT_LABEL: alert}


def _value_health_rules(options: AlertOptions) -> list[dict[str, Any]]:
    """Rules on the values: a metric undefined, windows without traffic."""
    notes = _notes_for(options)
    return [
        _rule(_uid("undefined"), "fairness metric undefined",
              unless_cause(undefined_expr(options, zero=True), options.error_window),
              "gt", 0.0, for_="0s", labels=_labels("FairnessMetricUndefined", "warning"),
              annotations=notes(
                  "FairnessMetricUndefined",
                  "{{ $labels.metric }} is undefined for {{ $labels.sensitive_attribute }} "
                  "(model {{ $labels.model }})",
                  "{{ $labels.metric }} could not be computed in "
                  '{{ printf "%.0f" $values.B.Value }} consecutive windows on sensitive '
                  "attribute {{ $labels.sensitive_attribute }} of model {{ $labels.model }} "
                  "(fairmonitor_metric_undefined says why).")),
        _rule(_uid("no-traffic"), "fairness windows without traffic",
              unless_cause(no_traffic_expr(options, zero=True), options.error_window),
              "gt", 0.0,
              for_="0s", labels=_labels("FairmonitorNoTraffic", "warning"), annotations=notes(
                  "FairmonitorNoTraffic",
                  "No predictions in the latest windows of model {{ $labels.model }}",
                  '{{ printf "%.0f" $values.B.Value }} consecutive windows of model '
                  "{{ $labels.model }} held no rows.")),
    ]


def _liveness_rules(options: AlertOptions) -> list[dict[str, Any]]:
    """Rules on each model's windows: stale, never evaluated, labels overdue, errors."""
    n = options.stale_after
    window = promql_duration(options.error_window)
    health_for = promql_duration(options.for_health)
    last = f"{NAMESPACE}_window_last_success_timestamp_seconds"
    cadence = f"max by (model) ({NAMESPACE}_window_cadence_seconds)"
    notes = _notes_for(options)
    return [
        _rule(_uid("stale"), "fairness window stale",
              unless_cause(f"(time() - max by (model) ({last} > 0)) / on(model) {cadence}",
                           options.error_window), "gt", float(n),
              for_=health_for, labels=_labels("FairmonitorWindowStale", "warning"),
              annotations=notes(
                  "FairmonitorWindowStale",
                  f"No fairness window evaluated for model {{{{ $labels.model }}}} in {n} "
                  "cadences",
                  "The last successful window of model {{ $labels.model }} was "
                  '{{ printf "%.1f" $values.B.Value }} cadences ago: the data source is down '
                  "or the monitor is stuck, so its fairness gauges are stale.")),
        _rule(_uid("never-evaluated"), "fairness model never evaluated",
              unless_cause(never_evaluated_expr(n), options.error_window), "gt", 0.0,
              for_=health_for, labels=_labels("FairmonitorNeverEvaluated", "warning"),
              annotations=notes(
                  "FairmonitorNeverEvaluated",
                  "Model {{ $labels.model }} has no evaluated window yet on "
                  "{{ $labels.instance }}",
                  "The monitor on {{ $labels.instance }} has run for more than "
                  f"{n} cadences without evaluating a window of model "
                  "{{ $labels.model }}: check its data source and the monitor's log.")),
        _rule(_uid("labels-overdue"), "fairness labels overdue",
              unless_cause(f"max by (model) ({NAMESPACE}_labels_overdue_windows)",
                           options.error_window), "gt", 0.0,
              for_=health_for, labels=_labels("FairmonitorLabelsOverdue", "warning"),
              annotations=notes(
                  "FairmonitorLabelsOverdue",
                  "Labels of model {{ $labels.model }} are overdue",
                  '{{ printf "%.0f" $values.B.Value }} labelled window(s) in a row of model '
                  "{{ $labels.model }} had fewer than min_label_coverage of their rows "
                  "labelled labels_after after they closed: the ground truth has stopped "
                  "arriving. Label metrics are undefined (reason labels_overdue) and their "
                  "alerts hold until labels are back.")),
        _rule(_uid("data-errors"), "fairmonitor data errors",
              f"max by (model) ({NAMESPACE}_data_error_windows)", "gt", 0.0,
              for_="0s", labels=_labels("FairmonitorDataErrors", "warning"), annotations=notes(
                  "FairmonitorDataErrors",
                  "Data error: windows of model {{ $labels.model }} are held",
                  '{{ printf "%.0f" $values.B.Value }} due window(s) of model '
                  "{{ $labels.model }} cannot be read (a configured column is missing or "
                  "cannot be converted); the monitor's log names the column and the fix.")),
        _rule(_uid("errors"), "fairmonitor errors",
              f"sum by (model, stage) (increase({NAMESPACE}_errors_total"
              f'{{stage!="data"}}[{window}]))', "gt",
              0.0, for_=health_for, labels=_labels("FairmonitorErrors", "warning"),
              annotations=notes(
                  "FairmonitorErrors",
                  "fairmonitor {{ $labels.stage }} errors for model {{ $labels.model }}",
                  '{{ printf "%.0f" $values.B.Value }} {{ $labels.stage }} error(s) in the '
                  f"last {window} for model {{{{ $labels.model }}}}; see the monitor's log.")),
    ]


def _monitor_health_rules(options: AlertOptions) -> list[dict[str, Any]]:
    """Rules on the monitor itself: down, absent, no replica leading."""
    notes = _notes_for(options)
    return [
        _rule(_uid("down"), "fairmonitor down",
              f"up{{job=~{promql_string(options.scrape_job)}}}", "lt", 1.0,
              for_=promql_duration(options.absent_for),
              labels=_labels("FairmonitorDown", "critical"), annotations=notes(
                  "FairmonitorDown", "fairmonitor on {{ $labels.instance }} is down",
                  "Prometheus cannot scrape the monitor at {{ $labels.instance }}.",
                  dashboard_url(options.grafana_url))),
        _rule(_uid("absent"), "fairmonitor absent", f"absent({NAMESPACE}_build_info)", "gt",
              0.0, for_=promql_duration(options.absent_for),
              labels=_labels("FairmonitorAbsent", "critical"),
              annotations=notes(
                  "FairmonitorAbsent", "No fairness monitor is being scraped",
                  "No fairmonitor_build_info series: no monitor runs or Prometheus cannot "
                  "scrape it, so no fairness alert can fire.",
                  dashboard_url(options.grafana_url))),
        _rule(_uid("no-leader"), "fairmonitor no leader", leaders_expr(options), "lt", 0.5,
              for_=promql_duration(options.absent_for),
              labels=_labels("FairmonitorNoLeader", "critical"), annotations=notes(
                  "FairmonitorNoLeader",
                  "No fairmonitor replica of job {{ $labels.job }} holds the lease",
                  "Every replica of job {{ $labels.job }} is a standby: no window is evaluated. "
                  "Each replica's log says why it cannot take the checkpoint's lease.",
                  dashboard_url(options.grafana_url))),
    ]


def grafana_alert_rules(config: Any, options: AlertOptions) -> dict[str, Any]:
    """Return the Grafana alerting provisioning file (as a mapping) for a monitor config.

    One rule group per model (its thresholds, on its windows and its rollups) and one
    ``fairmonitor-health`` group (undefined values, no traffic, staleness, labels overdue, data
    errors, other errors, monitor down or absent), all in the ``Fairness`` folder; two webhook
    contact points whose URLs are read from ``$FAIRMONITOR_WEBHOOK_URL`` (the teams) and
    ``$FAIRMONITOR_ONCALL_WEBHOOK_URL`` (the monitoring on-call) when Grafana starts, and the
    notification policy tree of ``docker/alertmanager.yml`` (:mod:`.routing`).
    """
    groups = []
    for name, m in config.models.items():
        groups.append({"orgId": 1, "name": f"fairmonitor-{name}", "folder": FOLDER,
                       "interval": "1m", "rules": [*_threshold_rules(name, m, options),
                                                    *_rollup_rules(name, m, options)]})
    groups.append({"orgId": 1, "name": "fairmonitor-health", "folder": FOLDER,
                   "interval": "1m", "rules": _health_rules(options)})
    return {
        "apiVersion": 1,
        "groups": groups,
        "contactPoints": [_contact_point(CONTACT_POINT, "FAIRMONITOR_WEBHOOK_URL"),
                          _contact_point(ONCALL_CONTACT_POINT, "FAIRMONITOR_ONCALL_WEBHOOK_URL")],
        # replaces the whole policy tree of the org: merge by hand if you have one
        "policies": [_policies()],
    }


def _contact_point(name: str, variable: str) -> dict[str, Any]:
    """Return a webhook contact point whose URL Grafana reads from ``$variable`` when it starts."""
    return {"orgId": 1, "name": name, "receivers": [{
        "uid": _uid("contact", name), "type": "webhook",
        # Grafana expands environment variables in provisioning files
        "settings": {"url": f"${variable}", "httpMethod": "POST"},
        "disableResolveMessage": False}]}


def _policies() -> dict[str, Any]:
    """Return the notification policy tree of ``docker/alertmanager.yml``, in Grafana's terms.

    Routes match :data:`ALERT_LABEL` (the Prometheus alert name) where Alertmanager matches
    ``alertname``; the per-team and per-model routes of the example Alertmanager file are
    yours to add under the root (their receivers are yours).
    """
    def match(name: str, op: str, value: str) -> list[list[str]]:
        return [[name, op, value]]

    page = dict(PAGE_TIMING)
    return {
        "orgId": 1, "receiver": CONTACT_POINT,
        "group_by": ["alertname", "model", "metric", "sensitive_attribute", "severity"],
        **BATCH_TIMING,
        "routes": [
            {"receiver": ONCALL_CONTACT_POINT,
             "object_matchers": match(ALERT_LABEL, "=~", alert_regex(MONITOR_ALERTS)),
             "group_by": [ALERT_LABEL], **MONITOR_TIMING},
            {"receiver": ONCALL_CONTACT_POINT,
             "object_matchers": match(ALERT_LABEL, "=~", alert_regex(MODEL_HEALTH_ALERTS)),
             "group_by": [ALERT_LABEL, "stage", "severity"], "continue": True,
             "routes": [{"object_matchers": match("severity", "=", "critical"), **page}]},
            {"object_matchers": match("severity", "=", "critical"), **page},
            # everything else, also the health alerts the on-call route sent on: a matched
            # `continue` route keeps an alert from the root's own contact point
            {"receiver": CONTACT_POINT},
        ],
    }


def render_grafana_alert_rules(config: Any, options: AlertOptions, *,
                               source: str = "the monitor config") -> str:
    """YAML text of :func:`grafana_alert_rules`, with a header naming ``source``."""
    header = (f"Generated by `fairmonitor rules` from {source}; do not edit by hand.\n"
              "OPT-IN Grafana-managed alerting (rules, contact point, policy): use it INSTEAD "
              "of Alertmanager,\nnever with it (docker/compose.grafana-alerting.yaml).")
    return dump_yaml(grafana_alert_rules(config, options), header)
