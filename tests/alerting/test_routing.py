"""Routing and inhibition, offline: docker/alertmanager.yml, amtool, and the Grafana policies.

The live behaviour (a page of an existing group, one cause -> one notification) is in
``test_e2e_routing.py``; here the shipped file is checked against :mod:`fairmonitor.alerting.
routing` and the generated rules, and ``amtool config routes test`` walks its tree.
"""

from __future__ import annotations

import re
import shutil
from datetime import timedelta

import pytest
import yaml

from fairmonitor.alerting.grafana_alerts import (
    ALERT_LABEL,
    CONTACT_POINT,
    ONCALL_CONTACT_POINT,
    grafana_alert_rules,
)
from fairmonitor.alerting.routing import (
    BATCH_TIMING,
    INHIBITIONS,
    MODEL_HEALTH_ALERTS,
    MONITOR_ALERTS,
    MONITOR_TIMING,
    PAGE_TIMING,
    SYMPTOMS,
    alert_regex,
    unless_cause,
)
from fairmonitor.alerting.rules import ALERTS, AlertOptions

from .alert_stack import scaled_duration
from .conftest import DASHBOARDS, DOCKER, RUNBOOK_URL, read_yaml, run_promtool

ALERTMANAGER = DOCKER / "alertmanager.yml"
RULE_TESTS = DASHBOARDS / "alerts" / "fairmonitor.rules.test.yml"
TIMING = ("group_wait", "group_interval", "repeat_interval")


def _seconds(text: str) -> float:
    return int(scaled_duration(text, 1.0).removesuffix("ms")) / 1000


@pytest.fixture(scope="module")
def am():
    return read_yaml(ALERTMANAGER)


@pytest.fixture(scope="module")
def amtool():
    path = shutil.which("amtool")
    if path is None:
        pytest.fail("amtool not found: install Debian's `prometheus-alertmanager` package")
    return path


def _route(am, matcher: str):
    (route,) = [r for r in am["route"]["routes"] if r.get("matchers") == [matcher]]
    return route


def test_pages_have_their_own_groups_and_short_intervals(am):
    root = am["route"]
    assert "severity" in root["group_by"]  # a warning's group never holds its critical
    assert {k: root[k] for k in TIMING} == BATCH_TIMING
    pages = _route(am, 'severity="critical"')
    assert {k: pages[k] for k in TIMING} == PAGE_TIMING
    health = _route(am, f'alertname=~"{alert_regex(MODEL_HEALTH_ALERTS)}"')
    (critical,) = health["routes"]
    assert {k: critical[k] for k in TIMING} == PAGE_TIMING
    monitor = _route(am, f'alertname=~"{alert_regex(MONITOR_ALERTS)}"')
    assert {k: monitor[k] for k in TIMING} == MONITOR_TIMING
    # no page is dropped: a critical lasts at least one window (1 minute at the shortest)
    # and a change of an existing group leaves within one group_interval
    assert _seconds(PAGE_TIMING["group_interval"]) < 60
    assert _seconds(PAGE_TIMING["group_wait"]) < 60
    # the shipped Prometheus scrape and evaluation: replicas stopping together are one page
    prometheus = read_yaml(DOCKER / "prometheus.yml")["global"]
    assert _seconds(MONITOR_TIMING["group_wait"]) >= (
        _seconds(prometheus["scrape_interval"]) + _seconds(prometheus["evaluation_interval"]))


def test_model_health_reaches_the_oncall_and_goes_on(am):
    health = _route(am, f'alertname=~"{alert_regex(MODEL_HEALTH_ALERTS)}"')
    assert (health["receiver"], health["continue"]) == ("monitoring-oncall", True)
    assert health["group_by"] == ["alertname", "stage", "severity"]  # not by model
    monitor = _route(am, f'alertname=~"{alert_regex(MONITOR_ALERTS)}"')
    assert (monitor["receiver"], monitor.get("continue", False)) == ("monitoring-oncall", False)
    # the last route catches what `continue` sent on and nothing else matched
    assert am["route"]["routes"][-1] == {"receiver": "fairness-default"}
    assert set(MONITOR_ALERTS) | set(MODEL_HEALTH_ALERTS) <= set(ALERTS) | {
        "FairmonitorDataErrors"}  # FairmonitorDataErrors: added with the data-error alarms


ONCALL = "monitoring-oncall"


@pytest.mark.parametrize(("labels", "receivers"), [
    *[([f"alertname={name}", "model=credit", "team=risk", "severity=warning"],
       f"{ONCALL},risk-team") for name in MODEL_HEALTH_ALERTS],
    *[([f"alertname={name}", "model=fraud", "severity=warning"], f"{ONCALL},fraud-model")
      for name in MODEL_HEALTH_ALERTS],
    *[([f"alertname={name}", "model=other", "severity=warning"], f"{ONCALL},fairness-default")
      for name in MODEL_HEALTH_ALERTS],
    (["alertname=FairmonitorDataErrors", "model=credit", "team=risk", "severity=critical"],
     f"{ONCALL},risk-team-page"),
    *[([f"alertname={name}", "instance=m:9464", "severity=critical"], ONCALL)
      for name in MONITOR_ALERTS],
    (["alertname=FairnessThresholdBreached", "model=credit", "team=risk", "severity=critical"],
     "risk-team-page"),
    (["alertname=FairnessRollupThresholdBreached", "model=fraud", "severity=critical"],
     "fraud-model"),
    (["alertname=FairnessThresholdBreached", "model=other", "severity=critical"],
     "fairness-default"),
    (["alertname=FairnessThresholdBreached", "model=other", "severity=warning"],
     "fairness-default"),
])
def test_amtool_routes(amtool, labels, receivers):
    result = run_promtool(amtool, "config", "routes", "test", "--config.file",
                          str(ALERTMANAGER), f"--verify.receivers={receivers}", *labels)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receivers


def test_amtool_check_config(amtool):
    result = run_promtool(amtool, "check-config", str(ALERTMANAGER))
    assert result.returncode == 0, result.stdout + result.stderr


def _matchers(rule, side):
    return rule[f"{side}_matchers"]


def test_every_cause_inhibits_its_symptoms(am):
    symptoms = f'alertname=~"{alert_regex(SYMPTOMS)}"'
    rules = am["inhibit_rules"]
    for cause, extra, targets, equal in INHIBITIONS:
        source = [f'alertname="{cause}"'] + ([extra] if extra else [])
        target = [f'alertname=~"{alert_regex(targets)}"']
        assert {"source_matchers": source, "target_matchers": target,
                **({"equal": list(equal)} if equal else {})} in rules, cause
    assert all(r["target_matchers"] != [symptoms] or r["source_matchers"][0].startswith(
        ('alertname="FairmonitorAbsent"', 'alertname="FairmonitorDown"',
         'alertname="FairmonitorNoLeader"', 'alertname="FairmonitorErrors"',
         'alertname="FairmonitorDataErrors"')) for r in rules)


def _labels_in_rule_tests() -> dict[str, set[frozenset[str]]]:
    """alertname -> the label-name sets promtool verified on the generated rules."""
    doc = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))
    out: dict[str, set[frozenset[str]]] = {}
    for test in doc["tests"]:
        for case in test.get("alert_rule_test", []):
            for alert in case.get("exp_alerts") or []:
                out.setdefault(case["alertname"], set()).add(frozenset(alert["exp_labels"]))
    return out


def test_equal_labels_exist_on_both_sides(am):
    """An `equal` label missing on one side silently disables the inhibition.

    The oracle is the promtool unit tests: the labels they expect of each alert are checked by
    promtool against the generated rules.
    """
    seen = _labels_in_rule_tests()
    assert {"FairmonitorErrors", "FairmonitorDown", "FairmonitorWindowStale",
            "FairmonitorNeverEvaluated", "FairmonitorNoTraffic", "FairnessMetricUndefined",
            "FairmonitorLabelsOverdue"} <= set(seen)
    checked = 0
    for rule in am["inhibit_rules"]:
        names = [re.fullmatch(r'alertname=~?"(.+)"', m).group(1).split("|")
                 for m in (rule["source_matchers"][0], rule["target_matchers"][0])]
        for label in rule.get("equal", []):
            sources = [s for s in names[0] if s in seen]
            targets = [t for t in names[1] if t in seen and label in set().union(*seen[t])]
            for name in sources:
                assert all(label in labels for labels in seen[name]), (name, label)
                checked += 1
            if label == "instance":  # only the per-instance symptom can share it
                assert targets == ["FairmonitorNeverEvaluated"]
            else:
                assert targets, (rule, label)
                assert all(all(label in labels for labels in seen[t]) for t in targets)
    assert checked >= 4


# ---------------------------------------------------------------- the Grafana-managed path


@pytest.fixture(scope="module")
def grafana(example_config):
    return grafana_alert_rules(example_config, AlertOptions(
        grafana_url="http://localhost:3000", runbook_url=RUNBOOK_URL))


def _grafana_rules(doc):
    return [r for g in doc["groups"] for r in g["rules"]]


def test_every_grafana_rule_carries_its_prometheus_name(grafana):
    for rule in _grafana_rules(grafana):
        name = rule["labels"][ALERT_LABEL]
        assert name in ALERTS, rule["title"]
        assert rule["annotations"]["runbook_url"] == f"{RUNBOOK_URL}#{name.lower()}"


def test_grafana_policies_mirror_the_alertmanager_tree(grafana, am):
    (root,) = grafana["policies"]
    assert root["receiver"] == CONTACT_POINT
    assert root["group_by"] == am["route"]["group_by"]
    assert {k: root[k] for k in TIMING} == BATCH_TIMING
    monitor, health, pages, rest = root["routes"]
    assert monitor["object_matchers"] == [[ALERT_LABEL, "=~", alert_regex(MONITOR_ALERTS)]]
    assert (monitor["receiver"], monitor.get("continue", False)) == (ONCALL_CONTACT_POINT, False)
    assert {k: monitor[k] for k in TIMING} == MONITOR_TIMING
    assert health["object_matchers"] == [[ALERT_LABEL, "=~", alert_regex(MODEL_HEALTH_ALERTS)]]
    assert (health["receiver"], health["continue"]) == (ONCALL_CONTACT_POINT, True)
    assert {k: health["routes"][0][k] for k in TIMING} == PAGE_TIMING
    assert pages["object_matchers"] == [["severity", "=", "critical"]]
    assert {k: pages[k] for k in TIMING} == PAGE_TIMING
    assert rest == {"receiver": CONTACT_POINT}


def test_grafana_symptoms_drop_the_models_whose_cause_holds(grafana):
    by_name = {r["labels"][ALERT_LABEL]: r for r in _grafana_rules(grafana)}
    window = AlertOptions(grafana_url="http://g").error_window
    for name in SYMPTOMS:
        if name in by_name:  # the rules Grafana has (see docs/alert-routing.md)
            expr = by_name[name]["data"][0]["model"]["expr"]
            assert expr.endswith(unless_cause("", window).split("unless", 1)[1]), name
    for cause in ("FairmonitorErrors", "FairmonitorDown", "FairmonitorAbsent"):
        assert "unless on(model)" not in by_name[cause]["data"][0]["model"]["expr"]


def test_grafana_suppression_is_right_promql(promtool, tmp_path, grafana):
    """promtool evaluates the stale query: the model with checkpoint errors is dropped."""
    by_name = {r["labels"][ALERT_LABEL]: r for r in _grafana_rules(grafana)}
    expr = by_name["FairmonitorWindowStale"]["data"][0]["model"]["expr"]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [
        {"record": "check:stale_cadences", "expr": expr}]}]}))
    (tmp_path / "test.yml").write_text(yaml.safe_dump({
        "rule_files": ["rules.yml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": [
            # both models last succeeded at t=60 s and have a 60 s cadence
            {"series": 'fairmonitor_window_last_success_timestamp_seconds{model="a"}',
             "values": "60+0x20"},
            {"series": 'fairmonitor_window_last_success_timestamp_seconds{model="b"}',
             "values": "60+0x20"},
            {"series": 'fairmonitor_window_cadence_seconds{model="a"}', "values": "60+0x20"},
            {"series": 'fairmonitor_window_cadence_seconds{model="b"}', "values": "60+0x20"},
            {"series": 'fairmonitor_window_last_success_timestamp_seconds{model="c"}',
             "values": "60+0x20"},
            {"series": 'fairmonitor_window_cadence_seconds{model="c"}', "values": "60+0x20"},
            # c's windows are held by a data error (a missing column) from 5m on
            {"series": 'fairmonitor_data_error_windows{model="c"}', "values": "0x4 1+1x15"},
            # a's checkpoint fails every minute from 5m on; b's metrics fail (not a cause)
            {"series": 'fairmonitor_errors_total{model="a",stage="checkpoint"}',
             "values": "0x4 1+1x15"},
            {"series": 'fairmonitor_errors_total{model="b",stage="metric"}',
             "values": "0x4 1+1x15"},
        ], "promql_expr_test": [
            {"expr": "check:stale_cadences", "eval_time": "4m",
             "exp_samples": [{"labels": 'check:stale_cadences{model="a"}', "value": 3},
                             {"labels": 'check:stale_cadences{model="b"}', "value": 3},
                             {"labels": 'check:stale_cadences{model="c"}', "value": 3}]},
            # (600 - 60) / 60 cadences; a (checkpoint) and c (data) are dropped
            {"expr": "check:stale_cadences", "eval_time": "10m",
             "exp_samples": [{"labels": 'check:stale_cadences{model="b"}', "value": 9}]},
        ]}]}))
    result = run_promtool(promtool, "test", "rules", "test.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_grafana_error_window_follows_the_option(example_config):
    doc = grafana_alert_rules(example_config, AlertOptions(
        grafana_url="http://g", error_window=timedelta(minutes=7)))
    stale = [r for r in _grafana_rules(doc)
             if r["labels"][ALERT_LABEL] == "FairmonitorWindowStale"]
    assert '[7m])) > 0\n' in stale[0]["data"][0]["model"]["expr"]


def test_grafana_contact_point_urls_are_set_by_the_compose_variant():
    """Grafana expands ``$VAR`` when it starts: an unset one is an empty webhook URL."""
    doc = read_yaml(DASHBOARDS / "grafana-alerting" / "fairmonitor.yaml")
    variables = {r["settings"]["url"].removeprefix("$")
                 for c in doc["contactPoints"] for r in c["receivers"]}
    assert variables == {"FAIRMONITOR_WEBHOOK_URL", "FAIRMONITOR_ONCALL_WEBHOOK_URL"}
    override = read_yaml(DOCKER / "compose.grafana-alerting.yaml")["services"]["grafana"]
    assert variables <= set(override["environment"])


def test_matcher_labels_exist_on_the_alerts_they_match(am):
    """A matcher on a label an alert does not carry (or a stage its rule leaves out) never
    matches, so its inhibition is dead: `reason` left FairnessMetricUndefined when the monitor
    began counting undefined windows, and FairmonitorErrors leaves out `stage="data"`."""
    seen = _labels_in_rule_tests()
    for rule in am["inhibit_rules"]:
        for side in ("source_matchers", "target_matchers"):
            name, *extra = rule[side]
            names = re.fullmatch(r'alertname=~?"(.+)"', name).group(1).split("|")
            for matcher in extra:
                label = re.match(r"(\w+)", matcher).group(1)
                for alert in (n for n in names if n in seen):
                    assert any(label in labels for labels in seen[alert]), (rule, alert, label)
                assert matcher != 'stage="data"' or names != ["FairmonitorErrors"], rule
