"""Prometheus rules: committed file up to date, valid, and unit-tested by promtool."""

from __future__ import annotations

import re
import shutil
from datetime import timedelta

import pytest

from fairmonitor.alerting import rules as rules_module
from fairmonitor.alerting.rules import (
    ALERTS,
    CADENCE,
    COMPARED,
    METRIC_VALUE,
    ROUTING,
    STREAK,
    STREAK_REQUIRED,
    AlertOptions,
    breach_expr,
    prometheus_rules,
    render_prometheus_rules,
    streak_expr,
)
from fairmonitor.exceptions import ConfigError

from .conftest import (
    DASHBOARDS,
    EXAMPLE_CONFIG,
    REPO,
    RUNBOOK_URL,
    check_promql,
    read_yaml,
    run_promtool,
)

RULES = DASHBOARDS / "alerts" / "fairmonitor.rules.yml"
RULE_TESTS = DASHBOARDS / "alerts" / "fairmonitor.rules.test.yml"
#: The options the committed rules were generated with (the compose stack's Grafana).
COMMITTED = AlertOptions(grafana_url="http://localhost:3000", runbook_url=RUNBOOK_URL)


def _alerts(rules, name):
    return [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == name]


def _records(rules, name):
    return [r for g in rules["groups"] for r in g["rules"] if r.get("record") == name]


def _failed(result) -> set[str]:
    """Names of the promtool test groups that failed."""
    return set(re.findall(r"^ +name: (.+),$", result.stdout + result.stderr, re.M))


def _promtool_tests(promtool, tmp_path, text: str):
    """Run the committed promtool tests against the rules ``text``."""
    (tmp_path / "fairmonitor.rules.yml").write_text(text)
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    return run_promtool(promtool, "test", "rules", RULE_TESTS.name, cwd=tmp_path)


def test_committed_rules_are_up_to_date(example_config):
    expected = render_prometheus_rules(example_config, COMMITTED, source=EXAMPLE_CONFIG.name)
    assert RULES.read_text(encoding="utf-8") == expected, (
        "dashboards/alerts/fairmonitor.rules.yml is stale: run `fairmonitor rules --config "
        "docker/monitor.example.yaml --out dashboards --grafana-url http://localhost:3000 "
        f"--runbook-url {RUNBOOK_URL}`")


def test_promtool_check_rules_accepts_the_committed_file(promtool):
    result = run_promtool(promtool, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 18 rules found" in result.stdout


def test_promtool_unit_tests_pass(promtool):
    # one breach then empty windows, N-th window, escalation, recovery, undefined hold,
    # restart and second replica, monitor gone, undefined and empty windows counted,
    # staleness, never evaluated, labels overdue, errors, down, absent, rule failures,
    # recording rules, rollups (see the test file's comments)
    result = run_promtool(promtool, "test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_rules_before_issue_14_fail_the_unit_tests(promtool, tmp_path):
    """The old rules: version in the identity, no persistence from the monitor, ..."""
    old = (REPO / "tests" / "alerting" / "data" / "rules_before_issue14.yml").read_text()
    result = _promtool_tests(promtool, tmp_path, old)
    assert result.returncode == 1
    assert {"fires on the N-th breaching window, escalates and recovers",
            "undefined values alert on the N-th undefined window",
            "no traffic alerts on the N-th empty window",
            "never evaluated, per instance",
            "a monitor down is reported per instance"} <= _failed(result)


@pytest.mark.parametrize("change", [
    {"hold_missing": timedelta(minutes=1)},  # the restart at 21m resolves the alert
    {"stale_after": 5},                    # 10m old is no longer stale at a 5-cadence limit
    {"for_health": timedelta(0)},          # staleness fires at 17m
    {"error_window": timedelta(minutes=1)},  # the 10m error is forgotten by 16m
    {"keep_firing_for": timedelta(minutes=5)},  # the recovery at 70m still fires
    {"scrape_job": "monitor"},             # the down replica is not seen
])
def test_unit_tests_catch_a_changed_option(promtool, example_config, tmp_path, change):
    """The promtool tests are sensitive: each behaviour change makes them fail."""
    options = AlertOptions(grafana_url="http://localhost:3000", runbook_url=RUNBOOK_URL, **change)
    result = _promtool_tests(promtool, tmp_path, render_prometheus_rules(example_config, options))
    assert result.returncode == 1, result.stdout + result.stderr


def test_unit_tests_catch_a_breach_that_is_not_held(promtool, example_config, tmp_path,
                                                    monkeypatch):
    """Without last_over_time a restart mid-breach resolves the alert (issue 24)."""
    monkeypatch.setattr(rules_module, "_held", lambda series, options: series)
    result = _promtool_tests(promtool, tmp_path,
                             render_prometheus_rules(example_config, COMMITTED))
    assert result.returncode == 1
    assert _failed(result) == {"a restart and a second replica mid-breach do not resolve",
                               "a breach resolves once its series are gone longer than "
                               "hold_missing"}


def test_unit_tests_catch_unaggregated_streaks(promtool, example_config, tmp_path,
                                              monkeypatch):
    """Two replicas export the same streak: unaggregated, they give two alerts (or none)."""
    monkeypatch.setattr(rules_module, "_IDENTITY",
                        "model, metric, sensitive_attribute, bound, severity, instance")
    result = _promtool_tests(promtool, tmp_path,
                             render_prometheus_rules(example_config, COMMITTED))
    assert result.returncode == 1
    assert "a restart and a second replica mid-breach do not resolve" in _failed(result)


def test_threshold_alerts_compare_the_monitors_streaks(example_config):
    rules = prometheus_rules(example_config, COMMITTED)
    alerts = _alerts(rules, "FairnessThresholdBreached")
    assert [a["labels"]["severity"] for a in alerts] == ["warning", "critical"]
    assert ["for" in a for a in alerts] == [False, False]
    for alert, severity in zip(alerts, ("warning", "critical"), strict=True):
        assert alert["expr"].startswith("(\n" + "\n".join(
            f"  {line}" for line in streak_expr(severity, COMMITTED).splitlines()))
    # no wall-clock arithmetic, no self-referencing record
    text = render_prometheus_rules(example_config, COMMITTED)
    assert "time() - fairmonitor:" not in text and "breach_start" not in text
    assert ["keep_firing_for" in a for a in alerts] == [False, False]
    options = AlertOptions(grafana_url="http://g", keep_firing_for=timedelta(minutes=10))
    kept = _alerts(prometheus_rules(example_config, options), "FairnessThresholdBreached")
    assert [a["keep_firing_for"] for a in kept] == ["10m", "10m"]


def test_streak_expression_aggregates_replicas():
    expr = streak_expr("warning", AlertOptions(grafana_url="http://g",
                                               hold_missing=timedelta(minutes=3)))
    identity = "model, metric, sensitive_attribute, bound, severity"
    assert expr == (
        f"max by ({identity}) (\n"
        f'  last_over_time({STREAK}{{severity="warning"}}[3m])\n)\n'
        f">= on({identity})\n"
        f"min by ({identity}) (\n"
        f'  last_over_time({STREAK_REQUIRED}{{severity="warning"}}[3m])\n)')


@pytest.mark.parametrize("level", ["0.05", "0.1", "0.2", "0.8", "0.7", "0.15", "0.3"])
def test_thresholds_are_read_from_series_not_copied(example_config, level):
    text = render_prometheus_rules(example_config, COMMITTED)
    assert re.search(rf"(?<![\d.]){re.escape(level)}(?![\d])", text) is None


def test_every_configured_level_is_in_the_parametrization(example_config):
    levels = {format(getattr(t, s), "g") for m in example_config.models.values()
              for t in m.thresholds for s in ("warning", "critical") if getattr(t, s) is not None}
    assert levels == {"0.05", "0.1", "0.2", "0.8", "0.7", "0.15", "0.3"}


def test_no_model_is_named_in_the_rules(example_config):
    """Every per-model fact comes from exported series: a new model needs no regeneration."""
    text = render_prometheus_rules(example_config, COMMITTED, source="x")
    for name in example_config.models:
        assert name not in text


def test_breach_expression_covers_both_bounds_and_overrides():
    expr = breach_expr("warning")
    # thresholds compare what the monitor says each one compares (value or bound), never the
    # point value directly: compare: bound must reach the rules
    assert expr.count(COMPARED) == 4 and METRIC_VALUE not in expr
    assert 'min by (model, metric, bound) (\n    fairmonitor_threshold{severity="warning", ' \
           'bound="upper"}' in expr
    assert 'max by (model, metric, bound) (\n    fairmonitor_threshold{severity="warning", ' \
           'bound="lower"}' in expr
    assert 'fairmonitor_threshold_by_attribute{severity="warning", bound="lower"}' in expr
    assert expr.count("unless on(model, metric, sensitive_attribute)") == 2
    assert "version" not in expr


def test_metric_value_record_folds_every_registry_gauge(example_config):
    import fairmonitor

    (record,) = _records(prometheus_rules(example_config, COMMITTED), METRIC_VALUE)
    names = re.search(r'__name__=~"fairmonitor_\((.*?)\)"', record["expr"]).group(1)
    assert names.split("|") == list(fairmonitor.METRICS)


def test_records_come_before_the_alerts_that_read_them(example_config):
    (group,) = prometheus_rules(example_config, COMMITTED)["groups"]
    order = [r.get("record") or r["alert"] for r in group["rules"]]
    first_alert = order.index("FairnessThresholdBreached")
    for record in (METRIC_VALUE, CADENCE, ROUTING):
        assert order.index(record) < first_alert


def test_every_alert_links_its_runbook_section(example_config):
    options = AlertOptions(grafana_url="https://grafana.example.org",
                           runbook_url="https://git.example.org/fm/docs/runbook.md")
    rules = prometheus_rules(example_config, options)
    names = []
    for rule in rules["groups"][0]["rules"]:
        if "alert" in rule:
            names.append(rule["alert"])
            assert rule["annotations"]["runbook_url"] == (
                f"https://git.example.org/fm/docs/runbook.md#{rule['alert'].lower()}")
            assert rule["annotations"]["dashboard"].startswith(
                "https://grafana.example.org/d/fairmonitor/fairmonitor")
    assert tuple(dict.fromkeys(names)) == ALERTS
    runbook = (REPO / "docs" / "runbook.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (\w+)$", runbook, re.M)
    assert headings == list(ALERTS)


def test_odd_names_give_valid_promql(promtool, tmp_path, example_config):
    options = AlertOptions(grafana_url="http://g", scrape_job='fair"monitor|fm-.*')
    path = tmp_path / "rules.yml"
    path.write_text(render_prometheus_rules(example_config, options))
    result = run_promtool(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'up{job=~"fair\\"monitor|fm-.*"} == 0' in path.read_text()


def test_check_promql_rejects_a_bad_expression(promtool, tmp_path):
    """The PromQL check used for the dashboard and Grafana rules is not vacuous."""
    result = check_promql(promtool, ["fairmonitor_build_info", "sum by (model) (x"], tmp_path)
    assert result.returncode != 0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"grafana_url": "localhost:3000"}, "grafana_url: must be an absolute http(s) URL"),
    ({"grafana_url": "https://"}, "grafana_url: must be an absolute http(s) URL"),
    ({"runbook_url": ""}, "runbook_url: must be an absolute http(s) URL"),
    ({"runbook_url": "docs/runbook.md"}, "runbook_url: must be an absolute http(s) URL"),
    ({"runbook_url": "/docs/runbook.md"}, "runbook_url: must be an absolute http(s) URL"),
    ({"runbook_url": "ftp://h/runbook.md"}, "runbook_url: must be an absolute http(s) URL"),
    ({"runbook_url": "https://h/runbook.md#x"}, "runbook_url: must not contain a '#fragment'"),
    ({"stale_after": 0}, "stale_after: must be an integer >= 1"),
    ({"stale_after": True}, "stale_after: must be an integer >= 1"),
    ({"hold_missing": timedelta(0)}, "hold_missing: must be at least 1s"),
    ({"for_health": timedelta(minutes=-1)}, "for_health: must not be negative"),
    ({"error_window": timedelta(0)}, "error_window: must be at least 1s"),
    ({"scrape_job": ""}, "scrape_job: must not be empty"),
])
def test_invalid_options_are_rejected(kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        AlertOptions(**{"grafana_url": "http://localhost:3000", **kwargs})


def test_without_a_runbook_base_no_alert_has_a_relative_link(example_config):
    """No base, no link: the old default wrote ``docs/runbook.md#...``, which no pager opens."""
    rules = prometheus_rules(example_config, AlertOptions(grafana_url="http://localhost:3000"))
    alerts = [r for r in rules["groups"][0]["rules"] if "alert" in r]
    assert alerts and all("runbook_url" not in r["annotations"] for r in alerts)
    assert all(r["annotations"]["dashboard"].startswith("http://localhost:3000/d/")
               for r in alerts)


def test_committed_links_are_absolute():
    for rule in read_yaml(RULES)["groups"][0]["rules"]:
        if "alert" in rule:
            assert rule["annotations"]["runbook_url"] == (
                f"{RUNBOOK_URL}#{rule['alert'].lower()}")
            assert rule["annotations"]["dashboard"].startswith("http://localhost:3000/d/")


def test_grafana_url_has_no_default():
    with pytest.raises(TypeError, match="grafana_url"):
        AlertOptions()  # type: ignore[call-arg]


def test_committed_rules_parse_as_yaml():
    rules = read_yaml(RULES)
    assert [g["name"] for g in rules["groups"]] == ["fairmonitor.rules"]
