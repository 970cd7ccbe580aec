"""Grafana-managed alert provisioning: up to date, well-formed, same thresholds as the config."""

from __future__ import annotations

import re

from fairmonitor.alerting._common import DATASOURCE_UID
from fairmonitor.alerting.grafana_alerts import (
    ALERT_STATE_PANEL_ID,
    CONTACT_POINT,
    grafana_alert_rules,
    render_grafana_alert_rules,
)
from fairmonitor.alerting.rules import AlertOptions

from .conftest import DASHBOARDS, EXAMPLE_CONFIG, check_promql, read_yaml

ALERTING = DASHBOARDS / "grafana-alerting" / "fairmonitor.yaml"
OPTIONS = AlertOptions(grafana_url="http://localhost:3000")


def _rules(doc):
    return [r for g in doc["groups"] for r in g["rules"]]


def _threshold_rules(doc):
    return [r for r in _rules(doc) if "metric" in r["labels"]]


def _attribute(expr: str) -> str | None:
    match = re.search(r'sensitive_attribute="([^"]+)"', expr)
    return match.group(1) if match else None


def test_committed_alert_provisioning_is_up_to_date(example_config):
    expected = render_grafana_alert_rules(example_config, OPTIONS, source=EXAMPLE_CONFIG.name)
    assert ALERTING.read_text(encoding="utf-8") == expected, (
        "dashboards/grafana-alerting/fairmonitor.yaml is stale: run `fairmonitor rules "
        "--config docker/monitor.example.yaml --out dashboards --grafana-url "
        "http://localhost:3000`")


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
    expected = set()
    for name, model in example_config.models.items():
        for t in model.thresholds:
            for severity in ("warning", "critical"):
                level = getattr(t, severity)
                if level is not None:
                    expected.add((name, t.metric, t.attribute, severity, t.bound, level))
    found = set()
    for rule in _threshold_rules(read_yaml(ALERTING)):
        labels = rule["labels"]
        evaluator = rule["data"][2]["model"]["conditions"][0]["evaluator"]
        assert evaluator["type"] == {"upper": "gt", "lower": "lt"}[labels["bound"]]
        found.add((labels["model"], labels["metric"], _attribute(rule["data"][0]["model"]["expr"]),
                   labels["severity"], labels["bound"], evaluator["params"][0]))
    assert found == expected
    assert len(expected) == 13


def test_general_rule_leaves_overridden_attributes_to_the_override():
    exprs = {(r["labels"]["model"], r["labels"]["metric"], r["labels"]["severity"],
              r["title"].endswith("(sex)")): r["data"][0]["model"]["expr"]
             for r in _threshold_rules(read_yaml(ALERTING))}
    general = exprs[("credit", "equalized_odds_difference", "warning", False)]
    override = exprs[("credit", "equalized_odds_difference", "warning", True)]
    # the general rule leaves the override's attribute and the automatic intersection alone;
    # the example's compare: budget reads the unfair-side bound in a single window
    assert general == ('max by (model, sensitive_attribute) (fairmonitor_metric_lower_bound{'
                       'model="credit", metric="equalized_odds_difference", '
                       'sensitive_attribute!="sex", sensitive_attribute!~".+:.+"})')
    assert override == ('max by (model, sensitive_attribute) (fairmonitor_metric_lower_bound{'
                        'model="credit", metric="equalized_odds_difference", '
                        'sensitive_attribute="sex"})')


def test_lower_bounds_take_the_worst_value_too():
    (rule,) = [r for r in _threshold_rules(read_yaml(ALERTING))
               if (r["labels"]["model"], r["labels"]["metric"], r["labels"]["severity"])
               == ("credit", "demographic_parity_ratio", "critical")]
    assert rule["data"][0]["model"]["expr"] == (
        'min by (model, sensitive_attribute) (fairmonitor_metric_upper_bound'
        '{model="credit", metric="demographic_parity_ratio", sensitive_attribute!~".+:.+"})')


def test_persistence_is_counted_in_windows(example_config):
    rules = _threshold_rules(grafana_alert_rules(example_config, OPTIONS))
    fors = {(r["labels"]["model"], r["labels"]["severity"]): r["for"] for r in rules}
    # credit: a window every 5m; fraud: hourly. warning 3 windows, critical 2
    assert fors == {("credit", "warning"): "10m", ("credit", "critical"): "5m",
                    ("fraud", "warning"): "2h", ("fraud", "critical"): "1h"}
    for rule in rules:
        assert "version" not in rule["annotations"]["description"]
        assert rule["annotations"]["runbook_url"] == (
            "docs/runbook.md#fairnessthresholdbreached")


def test_contact_point_and_policy_are_provisioned():
    doc = read_yaml(ALERTING)
    (contact,) = doc["contactPoints"]
    assert contact["name"] == CONTACT_POINT
    (receiver,) = contact["receivers"]
    assert (receiver["type"], receiver["settings"]["url"]) == (
        "webhook", "$FAIRMONITOR_WEBHOOK_URL")
    (policy,) = doc["policies"]
    assert policy["receiver"] == CONTACT_POINT
    assert policy["group_by"] == ["alertname", "model", "metric", "sensitive_attribute"]


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
    health = [g for g in doc["groups"] if g["name"] == "fairmonitor-health"]
    assert [r["title"] for r in health[0]["rules"]] == [
        "fairness metric undefined", "fairness windows without traffic",
        "fairness window stale", "fairmonitor errors", "fairmonitor down",
        "fairmonitor absent"]


def test_every_query_is_valid_promql(promtool, tmp_path):
    exprs = [r["data"][0]["model"]["expr"] for r in _rules(read_yaml(ALERTING))]
    result = check_promql(promtool, exprs, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout


def test_compare_bound_queries_the_unfair_side_bound(example_config):
    # issue 16: a threshold with compare: bound alerts on the confidence bound, not the value
    import dataclasses

    cfg = example_config.models["credit"]
    bound = tuple(dataclasses.replace(t, compare="bound") for t in cfg.thresholds)
    config = dataclasses.replace(example_config, models={
        "credit": dataclasses.replace(cfg, thresholds=bound)})
    exprs = {(r["labels"]["metric"], r["labels"]["severity"], r["title"].endswith("(sex)")):
             r["data"][0]["model"]["expr"]
             for r in _threshold_rules(grafana_alert_rules(config, OPTIONS))}
    assert exprs[("demographic_parity_ratio", "critical", False)] == (
        'min by (model, sensitive_attribute) (fairmonitor_metric_upper_bound{model="credit", '
        'metric="demographic_parity_ratio", sensitive_attribute!~".+:.+"})')
    assert exprs[("equalized_odds_difference", "warning", True)] == (
        'max by (model, sensitive_attribute) (fairmonitor_metric_lower_bound{model="credit", '
        'metric="equalized_odds_difference", sensitive_attribute="sex"})')


def _with_rollups(example_config):
    import dataclasses
    from datetime import timedelta

    from fairmonitor.monitor.config.model import RollupConfig

    cfg = example_config.models["credit"]
    day = RollupConfig("1d", timedelta(days=1), timedelta(days=1))
    return dataclasses.replace(example_config, models={
        "credit": dataclasses.replace(cfg, rollups=(day,)),
        "fraud": example_config.models["fraud"]})


def test_rollups_get_the_model_thresholds_without_persistence(example_config):
    # the Prometheus rules alert on rollups (FairnessRollupThresholdBreached); the Grafana
    # path did not, so a team alerting in Grafana never heard of a breaching day
    doc = grafana_alert_rules(_with_rollups(example_config), OPTIONS)
    credit = next(g for g in doc["groups"] if g["name"] == "fairmonitor-credit")
    window_rules = [r for r in credit["rules"] if "over rollups" not in r["title"]]
    rollup_rules = [r for r in credit["rules"] if "over rollups" in r["title"]]
    assert len(rollup_rules) == len(window_rules) > 0  # every threshold, every severity
    cfg = example_config.models["credit"]
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
