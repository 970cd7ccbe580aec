"""Grafana-managed alert rules (file provisioning) with the same thresholds as the monitor.

For teams that alert in Grafana rather than through Prometheus and Alertmanager. Grafana's
threshold expression takes constants, so unlike the Prometheus rules (which read the
``fairmonitor_threshold`` series) each configured threshold becomes one rule per severity:
query ``A`` (instant PromQL on the provisioned data source), ``B`` = reduce(A, last),
``C`` = threshold(B) with ``gt`` (upper bound) or ``lt`` (lower bound). Every series of ``A``
is its own alert instance, so one rule covers all attributes and versions of a model.

The file follows Grafana's file-provisioning format (``apiVersion: 1``, ``groups[].rules[]``
with ``uid, title, condition, data, noDataState, execErrState, for, annotations, labels``), not
the provisioning-API JSON that grafana-foundation-sdk's alerting builders emit.

Choices:

- A per-attribute override gets its own rule, and the general rule excludes that attribute
  (``sensitive_attribute!="sex"``): the most specific threshold wins, as in the monitor.
- ``noDataState: OK``: an undefined metric is not exported (``fairmonitor_metric_undefined``
  says why, on the dashboard), so "no data" is not an alarm; ``absent(fairmonitor_build_info)``
  covers a monitor that is gone. ``execErrState: Error`` surfaces a broken query.
- Rule uids are stable hashes of what the rule checks (Grafana allows at most 40 characters),
  so regenerating the file updates rules in place.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from ..report.thresholds import Threshold
from ._common import (
    DASHBOARD_UID,
    DATASOURCE_UID,
    FOLDER,
    NAMESPACE,
    cadence_seconds,
    dashboard_url,
    dump_yaml,
    promql_duration,
    promql_string,
)
from .rules import AlertOptions

__all__ = ["ALERT_STATE_PANEL_ID", "grafana_alert_rules", "render_grafana_alert_rules"]

#: Panel of the dashboard linked from every fairness rule (the alert-state timeline).
ALERT_STATE_PANEL_ID = 2
_EVALUATOR = {"upper": "gt", "lower": "lt"}
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
        "annotations": annotations,
        "labels": labels,
        "isPaused": False,
    }
    if panel is not None:
        rule["dashboardUid"] = DASHBOARD_UID
        rule["panelId"] = panel
    return rule


def _selector(model: str, t: Threshold, overridden: Iterable[str]) -> str:
    matchers = [f"model={promql_string(model)}"]
    if t.attribute is not None:
        matchers.append(f"sensitive_attribute={promql_string(t.attribute)}")
    else:
        matchers += [f"sensitive_attribute!={promql_string(a)}" for a in sorted(overridden)]
    return f"{NAMESPACE}_{t.metric}{{{', '.join(matchers)}}}"


def _threshold_rules(model: str, thresholds: tuple[Threshold, ...],
                     options: AlertOptions) -> list[dict[str, Any]]:
    rules = []
    for t in thresholds:
        overridden = {o.attribute for o in thresholds
                      if o.metric == t.metric and o.attribute is not None}
        scope = t.attribute or "{{ $labels.sensitive_attribute }}"
        for severity in ("warning", "critical"):
            level = getattr(t, severity)
            if level is None:
                continue
            side = "above" if t.bound == "upper" else "below"
            title = f"{model}: {t.metric} {severity}" + (
                f" ({t.attribute})" if t.attribute else "")
            labels = {"severity": severity, "model": model, "metric": t.metric, "bound": t.bound}
            link = dashboard_url(options.grafana_url, model=model, metric=t.metric,
                                 attribute="{{ $labels.sensitive_attribute | urlquery }}")
            rules.append(_rule(
                _uid("threshold", model, t.metric, t.attribute or "", severity),
                title, _selector(model, t, overridden), _EVALUATOR[t.bound], float(level),
                for_=promql_duration(options.for_(severity)), labels=labels,
                panel=ALERT_STATE_PANEL_ID,
                annotations={
                    "summary": (f"{t.metric} {side} its {severity} threshold for {scope} "
                                f"(model {model})"),
                    "description": (
                        f"{t.metric} = {{{{ printf \"%.4g\" $values.B.Value }}}} on sensitive "
                        f"attribute {{{{ $labels.sensitive_attribute }}}} of model {model}"
                        "{{ with $labels.version }} version {{ . }}{{ end }}, "
                        f"{side} the {severity} threshold {level:g}."),
                    "dashboard": link,
                }))
    return rules


def _health_rules(model: str, cadence: int, options: AlertOptions) -> list[dict[str, Any]]:
    n = options.stale_after
    stale = promql_duration(timedelta(seconds=n * cadence))
    last = f"{NAMESPACE}_window_last_success_timestamp_seconds{{model={promql_string(model)}}}"
    link = dashboard_url(options.grafana_url, model=model)
    labels = {"severity": "warning", "model": model}
    return [
        _rule(_uid("stale", model), f"{model}: fairness window stale",
              f"time() - ({last} > 0)", "gt", float(n * cadence), for_="0s", labels=labels,
              annotations={
                  "summary": f"No fairness window evaluated for model {model} in {n} cadences",
                  "description": ("The last successful window of model "
                                  f"{model} was {{{{ humanizeDuration $values.B.Value }}}} ago "
                                  f"(more than {stale}): the data source is down or the "
                                  "monitor is stuck, so its fairness gauges are stale."),
                  "dashboard": link}),
        _rule(_uid("never", model), f"{model}: no window evaluated yet", last, "lt", 1.0,
              for_=stale, labels=labels,
              annotations={
                  "summary": f"Model {model} has no evaluated window yet",
                  "description": (f"The monitor has run for {stale} ({n} cadences) without "
                                  f"evaluating a window of model {model}: check its data "
                                  "source and the monitor's log."),
                  "dashboard": link}),
    ]


def grafana_alert_rules(config: Any, options: AlertOptions | None = None) -> dict[str, Any]:
    """The Grafana alerting provisioning file (as a mapping) for a monitor config.

    One rule group per model (its thresholds, staleness and never-evaluated rules) and one
    ``fairmonitor-health`` group (errors, monitor absent), all in the ``Fairness`` folder.
    """
    options = options or AlertOptions()
    groups = []
    for name, m in config.models.items():
        rules = _threshold_rules(name, tuple(m.thresholds), options)
        rules += _health_rules(name, cadence_seconds(m, config.tick), options)
        groups.append({"orgId": 1, "name": f"fairmonitor-{name}", "folder": FOLDER,
                       "interval": "1m", "rules": rules})
    window = promql_duration(options.error_window)
    health = [
        _rule(_uid("errors"), "fairmonitor errors",
              f"increase({NAMESPACE}_errors_total[{window}])", "gt", 0.0, for_="0s",
              labels={"severity": "warning"},
              annotations={
                  "summary": "fairmonitor {{ $labels.stage }} errors for model "
                             "{{ $labels.model }}",
                  "description": ('{{ printf "%.0f" $values.B.Value }} {{ $labels.stage }} '
                                  f"error(s) in the last {window} for model "
                                  "{{ $labels.model }}; see the monitor's log."),
                  "dashboard": dashboard_url(options.grafana_url,
                                             model="{{ $labels.model | urlquery }}")}),
        _rule(_uid("absent"), "fairmonitor absent", f"absent({NAMESPACE}_build_info)", "gt",
              0.0, for_=promql_duration(options.absent_for), labels={"severity": "critical"},
              annotations={
                  "summary": "The fairness monitor is not being scraped",
                  "description": ("No fairmonitor_build_info series: the monitor is down or "
                                  "Prometheus cannot scrape it, so no fairness alert can "
                                  "fire."),
                  "dashboard": dashboard_url(options.grafana_url)}),
    ]
    groups.append({"orgId": 1, "name": "fairmonitor-health", "folder": FOLDER,
                   "interval": "1m", "rules": health})
    return {"apiVersion": 1, "groups": groups}


def render_grafana_alert_rules(config: Any, options: AlertOptions | None = None, *,
                               source: str = "the monitor config") -> str:
    """YAML text of :func:`grafana_alert_rules`, with a header naming ``source``."""
    header = (f"Generated by `fairmonitor rules` from {source}; do not edit by hand.\n"
              "Grafana-managed alert rules (file provisioning): the same thresholds as the "
              "Prometheus rules.")
    return dump_yaml(grafana_alert_rules(config, options), header)
