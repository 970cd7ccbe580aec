"""Grafana-managed alert provisioning: up to date, well-formed, same thresholds as the config."""

from __future__ import annotations

import re

from fairmonitor.alerting._common import DATASOURCE_UID
from fairmonitor.alerting.grafana_alerts import (
    ALERT_STATE_PANEL_ID,
    CONTACT_POINT,
    ONCALL_CONTACT_POINT,
    grafana_alert_rules,
    render_grafana_alert_rules,
)
from fairmonitor.alerting.routing import unless_cause
from fairmonitor.alerting.rules import (
    AlertOptions,
    never_evaluated_expr,
    no_traffic_expr,
    streak_expr,
    undefined_expr,
)

from .conftest import DASHBOARDS, EXAMPLE_CONFIG, RUNBOOK_URL, check_promql, read_yaml

ALERTING = DASHBOARDS / "grafana-alerting" / "fairmonitor.yaml"
OPTIONS = AlertOptions(grafana_url="http://localhost:3000", runbook_url=RUNBOOK_URL)


def _rules(doc):
    return [r for g in doc["groups"] for r in g["rules"]]


def _threshold_rules(doc):
    """The rules that carry threshold constants: the rollups' (the windows' read streaks)."""
    return [r for r in _rules(doc) if "metric" in r["labels"]]


def _streak_rules(doc):
    """The windows' rules: per model and severity, the streaks the monitor counts."""
    return [r for r in _rules(doc) if "model" in r["labels"] and "metric" not in r["labels"]]


def _attribute(expr: str) -> str | None:
    match = re.search(r'sensitive_attribute="([^"]+)"', expr)
    return match.group(1) if match else None


def test_committed_alert_provisioning_is_up_to_date(example_config):
    expected = render_grafana_alert_rules(example_config, OPTIONS, source=EXAMPLE_CONFIG.name)
    assert ALERTING.read_text(encoding="utf-8") == expected, (
        "dashboards/grafana-alerting/fairmonitor.yaml is stale: run `fairmonitor rules "
        "--config docker/monitor.example.yaml --out dashboards --grafana-url "
        f"http://localhost:3000 --runbook-url {RUNBOOK_URL}`")


def test_file_provisioning_shape():
    doc = read_yaml(ALERTING)
    assert doc["apiVersion"] == 1
    assert [g["name"] for g in doc["groups"]] == [
        "fairmonitor-credit", "fairmonitor-fraud", "fairmonitor-health"]
    for group in doc["groups"]:
        assert (group["orgId"], group["folder"], group["interval"]) == (1, "Fairness", "1m")
    for rule in _rules(doc):
        assert set(rule) >= {"uid", "title", "condition", "data", "noDataState",
                             "execErrState", "for", "annotations", "labels"}
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", rule["uid"])
        refs = [d["refId"] for d in rule["data"]]
        assert refs == ["A", "B", "C"]
        assert rule["condition"] == "C"
        query, reduce, threshold = rule["data"]
        assert query["datasourceUid"] == DATASOURCE_UID
        assert query["model"]["datasource"]["uid"] == DATASOURCE_UID
        assert (reduce["datasourceUid"], reduce["model"]["type"]) == ("__expr__", "reduce")
        assert (threshold["datasourceUid"], threshold["model"]["type"]) == (
            "__expr__", "threshold")
        assert all(d["model"]["refId"] == d["refId"] for d in rule["data"])


def test_uids_and_titles_are_unique():
    rules = _rules(read_yaml(ALERTING))
    assert len({r["uid"] for r in rules}) == len(rules)
    assert len({r["title"] for r in rules}) == len(rules)


def test_same_thresholds_as_the_config(example_config):
    # the rollups' rules carry the thresholds; the windows' compare the monitor's streaks
    config = _with_rollups(example_config, both=True)
    expected = set()
    for name, model in config.models.items():
        for t in model.thresholds:
            for severity in ("warning", "critical"):
                level = getattr(t, severity)
                if level is not None:
                    expected.add((name, t.metric, t.attribute, severity, t.bound, level))
    found = set()
    for rule in _threshold_rules(grafana_alert_rules(config, OPTIONS)):
        labels = rule["labels"]
        evaluator = rule["data"][2]["model"]["conditions"][0]["evaluator"]
        assert evaluator["type"] == {"upper": "gt", "lower": "lt"}[labels["bound"]]
        found.add((labels["model"], labels["metric"], _attribute(rule["data"][0]["model"]["expr"]),
                   labels["severity"], labels["bound"], evaluator["params"][0]))
    assert found == expected
    assert len(expected) == 13


def test_general_rule_leaves_overridden_attributes_to_the_override(example_config):
    exprs = {(r["labels"]["model"], r["labels"]["metric"], r["labels"]["severity"],
              r["title"].endswith("(sex)")): r["data"][0]["model"]["expr"]
             for r in _threshold_rules(grafana_alert_rules(_with_rollups(example_config),
                                                           OPTIONS))}
    general = exprs[("credit", "equalized_odds_difference", "warning", False)]
    override = exprs[("credit", "equalized_odds_difference", "warning", True)]
    # the general rule leaves the override's attribute and the automatic intersection alone
    assert general == ('max by (model, window, sensitive_attribute) (fairmonitor_rollup_'
                       'compared{model="credit", metric="equalized_odds_difference", '
                       'sensitive_attribute!="sex", sensitive_attribute!~".+:.+"})')
    assert override == ('max by (model, window, sensitive_attribute) (fairmonitor_rollup_'
                        'compared{model="credit", metric="equalized_odds_difference", '
                        'sensitive_attribute="sex"})')


def test_lower_bounds_take_the_worst_value_too(example_config):
    (rule,) = [r for r in _threshold_rules(grafana_alert_rules(_with_rollups(example_config),
                                                               OPTIONS))
               if (r["labels"]["model"], r["labels"]["metric"], r["labels"]["severity"])
               == ("credit", "demographic_parity_ratio", "critical")]
    assert rule["data"][0]["model"]["expr"] == (
        'min by (model, window, sensitive_attribute) (fairmonitor_rollup_compared'
        '{model="credit", metric="demographic_parity_ratio", sensitive_attribute!~".+:.+"})')


def test_persistence_is_the_monitors_streak_as_in_prometheus(example_config):
    """Issue 24: the same PromQL as the Prometheus rule, per model, the quiet series at 0."""
    doc = grafana_alert_rules(example_config, OPTIONS)
    rules = _streak_rules(doc)
    assert {(r["labels"]["model"], r["labels"]["severity"]) for r in rules} == {
        ("credit", "warning"), ("credit", "critical"), ("fraud", "warning"),
        ("fraud", "critical")}
    for rule in rules:
        model, severity = rule["labels"]["model"], rule["labels"]["severity"]
        expr = rule["data"][0]["model"]["expr"]
        assert expr == streak_expr(severity, OPTIONS, model=model, zero=True)
        prometheus = streak_expr(severity, OPTIONS).replace(
            f'{{severity="{severity}"}}', f'{{model="{model}", severity="{severity}"}}')
        assert expr.startswith("(\n" + "\n".join(f"  {line}"
                                                  for line in prometheus.splitlines()))
        assert rule["for"] == "0s"  # the monitor counted the windows already
        assert rule["data"][2]["model"]["conditions"][0]["evaluator"] == {
            "type": "gt", "params": [0.0]}
        assert rule["annotations"]["runbook_url"] == (
            f"{RUNBOOK_URL}#fairnessthresholdbreached")
    routed = [r for r in rules if r["labels"]["model"] == "credit"]
    cfg = example_config.models["credit"]
    assert all(r["labels"].get("team") == cfg.team for r in routed)


def test_undefined_and_no_traffic_fire_after_the_required_windows(example_config):
    """Issue 24: they fired after 1 window in Grafana, after 2 with Prometheus."""
    by_title = {r["title"]: r for r in _rules(grafana_alert_rules(example_config, OPTIONS))}
    undefined = by_title["fairness metric undefined"]
    # the symptom rules drop a model whose cause holds (routing.unless_cause: no inhibition
    # in Grafana)
    window = OPTIONS.error_window
    assert undefined["data"][0]["model"]["expr"] == unless_cause(
        undefined_expr(OPTIONS, zero=True), window)
    assert "fairmonitor_undefined_windows_required" in undefined["data"][0]["model"]["expr"]
    traffic = by_title["fairness windows without traffic"]
    assert traffic["data"][0]["model"]["expr"] == unless_cause(
        no_traffic_expr(OPTIONS, zero=True), window)
    for rule in (undefined, traffic):
        assert rule["for"] == "0s"
        assert rule["data"][2]["model"]["conditions"][0]["evaluator"] == {
            "type": "gt", "params": [0.0]}
    never = by_title["fairness model never evaluated"]
    assert never["data"][0]["model"]["expr"] == unless_cause(never_evaluated_expr(3), window)
    assert never["for"] == "5m"
    assert never["annotations"]["runbook_url"] == f"{RUNBOOK_URL}#fairmonitorneverevaluated"


def test_contact_points_and_policy_are_provisioned():
    doc = read_yaml(ALERTING)
    urls = {c["name"]: [(r["type"], r["settings"]["url"]) for r in c["receivers"]]
            for c in doc["contactPoints"]}
    assert urls == {CONTACT_POINT: [("webhook", "$FAIRMONITOR_WEBHOOK_URL")],
                    ONCALL_CONTACT_POINT: [("webhook", "$FAIRMONITOR_ONCALL_WEBHOOK_URL")]}
    (policy,) = doc["policies"]
    assert policy["receiver"] == CONTACT_POINT
    assert policy["group_by"] == ["alertname", "model", "metric", "sensitive_attribute",
                                  "severity"]


def test_threshold_rules_link_the_alert_state_panel():
    for rule in _threshold_rules(read_yaml(ALERTING)):
        assert (rule["dashboardUid"], rule["panelId"]) == ("fairmonitor", ALERT_STATE_PANEL_ID)


def test_health_rules_read_the_exported_cadence(example_config):
    doc = grafana_alert_rules(example_config, AlertOptions(grafana_url="http://g",
                                                           stale_after=4))
    by_title = {r["title"]: r for r in _rules(doc)}
    stale = by_title["fairness window stale"]
    assert stale["data"][2]["model"]["conditions"][0]["evaluator"] == {
        "type": "gt", "params": [4.0]}
    assert "fairmonitor_window_cadence_seconds" in stale["data"][0]["model"]["expr"]
    assert stale["for"] == "5m"
    assert by_title["fairmonitor absent"]["data"][0]["model"]["expr"] == (
        "absent(fairmonitor_build_info)")
    assert by_title["fairmonitor down"]["data"][0]["model"]["expr"] == 'up{job=~"fairmonitor"}'
    no_leader = by_title["fairmonitor no leader"]
    assert no_leader["data"][0]["model"]["expr"] == (
        'max by (job) (fairmonitor_leader{job=~"fairmonitor"})')
    assert no_leader["data"][2]["model"]["conditions"][0]["evaluator"] == {
        "type": "lt", "params": [0.5]}
    health = [g for g in doc["groups"] if g["name"] == "fairmonitor-health"]
    assert [r["title"] for r in health[0]["rules"]] == [
        "fairness metric undefined", "fairness windows without traffic",
        "fairness window stale", "fairness model never evaluated",
        "fairness labels overdue", "fairmonitor data errors", "fairmonitor errors",
        "fairmonitor down", "fairmonitor absent", "fairmonitor no leader"]


def test_every_query_is_valid_promql(promtool, tmp_path):
    exprs = [r["data"][0]["model"]["expr"] for r in _rules(read_yaml(ALERTING))]
    result = check_promql(promtool, exprs, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout


def _with_rollups(example_config, both=False):
    import dataclasses
    from datetime import timedelta

    from fairmonitor.monitor.config.model import RollupConfig

    cfg = example_config.models["credit"]
    day = RollupConfig("1d", timedelta(days=1), timedelta(days=1))
    return dataclasses.replace(example_config, models={
        "credit": dataclasses.replace(cfg, rollups=(day,)),
        "fraud": dataclasses.replace(example_config.models["fraud"], rollups=(day,)) if both
        else example_config.models["fraud"]})


def test_rollups_get_the_model_thresholds_without_persistence(example_config):
    # the Prometheus rules alert on rollups (FairnessRollupThresholdBreached); the Grafana
    # path did not, so a team alerting in Grafana never heard of a breaching day
    doc = grafana_alert_rules(_with_rollups(example_config), OPTIONS)
    credit = next(g for g in doc["groups"] if g["name"] == "fairmonitor-credit")
    window_rules = [r for r in credit["rules"] if "over rollups" not in r["title"]]
    rollup_rules = [r for r in credit["rules"] if "over rollups" in r["title"]]
    cfg = example_config.models["credit"]
    # every threshold, every severity; the windows' own rules: one per severity (streaks)
    assert len(rollup_rules) == sum(
        getattr(t, s) is not None for t in cfg.thresholds for s in ("warning", "critical"))
    assert len(window_rules) == 2
    for rule in rollup_rules:
        t = next(t for t in cfg.thresholds if t.metric == rule["labels"]["metric"]
                 and (t.attribute is not None) == rule["title"].endswith(")"))
        expr = rule["data"][0]["model"]["expr"]
        assert expr.startswith(("max" if t.bound == "upper" else "min")
                               + " by (model, window, sensitive_attribute) "
                               "(fairmonitor_rollup_compared{")
        assert f'metric="{t.metric}"' in expr and 'model="credit"' in expr
        level = getattr(t, rule["labels"]["severity"])
        assert rule["data"][2]["model"]["conditions"][0]["evaluator"]["params"] == [level]
        assert rule["for"] == "0s"
        assert rule["annotations"]["runbook_url"].endswith("#fairnessrollupthresholdbreached")
    uids = [r["uid"] for r in _rules(doc)]
    assert len(uids) == len(set(uids))
    fraud = next(g for g in doc["groups"] if g["name"] == "fairmonitor-fraud")
    assert not [r for r in fraud["rules"] if "over rollups" in r["title"]]  # no rollups there


def test_rollup_queries_are_valid_promql(example_config, promtool, tmp_path):
    doc = grafana_alert_rules(_with_rollups(example_config), OPTIONS)
    exprs = [r["data"][0]["model"]["expr"] for r in _rules(doc) if "over rollups" in r["title"]]
    result = check_promql(promtool, exprs, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pipeline_alarms_have_the_prometheus_semantics(example_config):
    """Issue 24: labels overdue and data errors fire from the monitor's own gauges, as the
    Prometheus rules do (overdue after for_health, data errors at the first held window), and
    the error rule leaves stage data to its own alert."""
    doc = grafana_alert_rules(example_config, OPTIONS)
    by_title = {r["title"]: r for r in _rules(doc)}
    expected = {  # a symptom drops the models whose cause holds (no inhibition in Grafana)
        "fairness labels overdue": (
            unless_cause("max by (model) (fairmonitor_labels_overdue_windows)",
                         OPTIONS.error_window),
            "5m", "FairmonitorLabelsOverdue"),
        "fairmonitor data errors": ("max by (model) (fairmonitor_data_error_windows)",
                                    "0s", "FairmonitorDataErrors"),
    }
    for title, (expr, for_, alert) in expected.items():
        rule = by_title[title]
        assert rule["data"][0]["model"]["expr"] == expr
        assert rule["data"][2]["model"]["conditions"][0]["evaluator"] == {
            "type": "gt", "params": [0.0]}
        assert rule["for"] == for_
        assert rule["labels"] == {"severity": "warning", "fairmonitor_alert": alert}
        assert rule["annotations"]["runbook_url"] == f"{RUNBOOK_URL}#{alert.lower()}"
    assert by_title["fairmonitor errors"]["data"][0]["model"]["expr"] == (
        'sum by (model, stage) (increase(fairmonitor_errors_total{stage!="data"}[15m]))')
