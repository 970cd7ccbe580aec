"""Grafana-managed alert provisioning: up to date, well-formed, same thresholds as the config."""

from __future__ import annotations

import re

from fairmonitor.alerting._common import DATASOURCE_UID
from fairmonitor.alerting.grafana_alerts import (
    ALERT_STATE_PANEL_ID,
    grafana_alert_rules,
    render_grafana_alert_rules,
)
from fairmonitor.alerting.rules import AlertOptions

from .conftest import DASHBOARDS, EXAMPLE_CONFIG, check_promql, read_yaml

ALERTING = DASHBOARDS / "provisioning" / "alerting" / "fairmonitor.yaml"


def _rules(doc):
    return [r for g in doc["groups"] for r in g["rules"]]


def _threshold_rules(doc):
    return [r for r in _rules(doc) if "metric" in r["labels"]]


def _attribute(expr: str) -> str | None:
    match = re.search(r'sensitive_attribute="([^"]+)"', expr)
    return match.group(1) if match else None


def test_committed_alert_provisioning_is_up_to_date(example_config):
    expected = render_grafana_alert_rules(example_config, source=EXAMPLE_CONFIG.name)
    assert ALERTING.read_text(encoding="utf-8") == expected, (
        "dashboards/provisioning/alerting/fairmonitor.yaml is stale: run "
        "`fairmonitor rules --config docker/monitor.example.yaml --out dashboards`")


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
    assert general == ('fairmonitor_equalized_odds_difference{model="credit", '
                       'sensitive_attribute!="sex"}')
    assert override == ('fairmonitor_equalized_odds_difference{model="credit", '
                        'sensitive_attribute="sex"}')


def test_threshold_rules_link_the_alert_state_panel():
    for rule in _threshold_rules(read_yaml(ALERTING)):
        assert (rule["dashboardUid"], rule["panelId"]) == ("fairmonitor", ALERT_STATE_PANEL_ID)


def test_health_rules_match_the_prometheus_ones(example_config):
    doc = grafana_alert_rules(example_config, AlertOptions(stale_after=4))
    by_title = {r["title"]: r for r in _rules(doc)}
    stale = by_title["credit: fairness window stale"]
    assert stale["data"][2]["model"]["conditions"][0]["evaluator"] == {
        "type": "gt", "params": [4 * 300.0]}
    never = by_title["fraud: no window evaluated yet"]
    assert never["for"] == "4h"
    assert by_title["fairmonitor absent"]["data"][0]["model"]["expr"] == (
        "absent(fairmonitor_build_info)")


def test_every_query_is_valid_promql(promtool, tmp_path):
    exprs = [r["data"][0]["model"]["expr"] for r in _rules(read_yaml(ALERTING))]
    result = check_promql(promtool, exprs, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout
