"""Prometheus rules: committed file up to date, valid, and unit-tested by promtool."""

from __future__ import annotations

import re
import shutil
from datetime import timedelta

import pytest

from fairmonitor.alerting.rules import (
    CADENCE,
    METRIC_VALUE,
    AlertOptions,
    breach_expr,
    prometheus_rules,
    render_prometheus_rules,
)
from fairmonitor.exceptions import ConfigError
from fairmonitor.monitor.config import load_config

from .conftest import DASHBOARDS, EXAMPLE_CONFIG, check_promql, read_yaml, run_promtool

RULES = DASHBOARDS / "alerts" / "fairmonitor.rules.yml"
RULE_TESTS = DASHBOARDS / "alerts" / "fairmonitor.rules.test.yml"


def _alerts(rules, name):
    return [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == name]


def _records(rules, name):
    return [r for g in rules["groups"] for r in g["rules"] if r.get("record") == name]


def test_committed_rules_are_up_to_date(example_config):
    expected = render_prometheus_rules(example_config, source=EXAMPLE_CONFIG.name)
    assert RULES.read_text(encoding="utf-8") == expected, (
        "dashboards/alerts/fairmonitor.rules.yml is stale: run "
        "`fairmonitor rules --config docker/monitor.example.yaml --out dashboards`")


def test_promtool_check_rules_accepts_the_committed_file(promtool):
    result = run_promtool(promtool, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 10 rules found" in result.stdout


def test_promtool_unit_tests_pass(promtool):
    # firing, not firing, recovery, lower bound, per-attribute override, staleness,
    # never-evaluated, errors and absence (see the test file's comments)
    result = run_promtool(promtool, "test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("change", [
    {"for_warning": timedelta(0)},          # fires at 20m, the test says still pending
    {"for_critical": timedelta(minutes=15)},  # critical not yet firing at 50m
    {"stale_after": 5},                     # 20m old is no longer stale at a 25m limit
    {"error_window": timedelta(minutes=1)},  # the 10m error is forgotten by 12m
])
def test_unit_tests_catch_a_changed_rule(promtool, example_config, tmp_path, change):
    """The promtool tests are sensitive: each behaviour change makes them fail."""
    (tmp_path / "fairmonitor.rules.yml").write_text(
        render_prometheus_rules(example_config, AlertOptions(**change)))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    result = run_promtool(promtool, "test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr


def test_one_generic_threshold_alert_per_severity(example_config):
    rules = prometheus_rules(example_config)
    alerts = _alerts(rules, "FairnessThresholdBreached")
    assert [(a["labels"]["severity"], a["for"]) for a in alerts] == [
        ("warning", "15m"), ("critical", "5m")]


@pytest.mark.parametrize("level", ["0.05", "0.1", "0.2", "0.8", "0.7", "0.15", "0.3"])
def test_thresholds_are_read_from_series_not_copied(example_config, level):
    text = render_prometheus_rules(example_config)
    assert re.search(rf"(?<![\d.]){re.escape(level)}(?![\d])", text) is None


def test_every_configured_level_is_in_the_parametrization(example_config):
    levels = {format(getattr(t, s), "g") for m in example_config.models.values()
              for t in m.thresholds for s in ("warning", "critical") if getattr(t, s) is not None}
    assert levels == {"0.05", "0.1", "0.2", "0.8", "0.7", "0.15", "0.3"}


def test_breach_expression_covers_both_bounds_and_overrides():
    expr = breach_expr("warning")
    assert expr.count(f"{METRIC_VALUE}") == 4
    assert 'fairmonitor_threshold{severity="warning", bound="upper"}' in expr
    assert 'fairmonitor_threshold{severity="warning", bound="lower"}' in expr
    assert 'fairmonitor_threshold_by_attribute{severity="warning", bound="lower"}' in expr
    assert expr.count("unless on(model, metric, sensitive_attribute)") == 2


def test_metric_value_record_folds_every_registry_gauge(example_config):
    import fairmonitor

    (record,) = _records(prometheus_rules(example_config), METRIC_VALUE)
    names = re.search(r'__name__=~"fairmonitor_\((.*?)\)"', record["expr"]).group(1)
    assert names.split("|") == list(fairmonitor.METRICS)


def test_cadence_is_the_slower_of_every_and_tick(tmp_path):
    config = load_config(EXAMPLE_CONFIG.read_text().replace("catch_up: 24", "tick: 30m"),
                         base_dir=tmp_path)
    rules = prometheus_rules(config)
    cadences = {r["labels"]["model"]: r["expr"] for r in _records(rules, CADENCE)}
    assert cadences == {"credit": "vector(1800)", "fraud": "vector(3600)"}
    never = {a["labels"]["model"]: a["for"] for a in _alerts(rules, "FairmonitorNeverEvaluated")}
    assert never == {"credit": "90m", "fraud": "3h"}


def test_options_change_durations_and_link(example_config):
    options = AlertOptions(grafana_url="https://grafana.example.org/", stale_after=2,
                           for_warning=timedelta(hours=1), error_window=timedelta(minutes=30))
    rules = prometheus_rules(example_config, options)
    (stale,) = _alerts(rules, "FairmonitorWindowStale")
    assert "2 * fairmonitor:window_cadence_seconds" in stale["expr"]
    assert stale["annotations"]["dashboard"].startswith(
        "https://grafana.example.org/d/fairmonitor/fairmonitor?var-model=")
    (errors,) = _alerts(rules, "FairmonitorErrors")
    assert errors["expr"] == "increase(fairmonitor_errors_total[30m]) > 0"
    assert _alerts(rules, "FairnessThresholdBreached")[0]["for"] == "1h"


def test_odd_model_names_give_valid_promql(promtool, tmp_path):
    text = EXAMPLE_CONFIG.read_text().replace("  fraud:", '  "risk \\"v2\\"":')
    config = load_config(text, base_dir=tmp_path)
    path = tmp_path / "rules.yml"
    path.write_text(render_prometheus_rules(config))
    result = run_promtool(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'model="risk \\"v2\\""' in path.read_text()


def test_check_promql_rejects_a_bad_expression(promtool, tmp_path):
    """The PromQL check used for the dashboard and Grafana rules is not vacuous."""
    result = check_promql(promtool, ["fairmonitor_build_info", "sum by (model) (x"], tmp_path)
    assert result.returncode != 0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"stale_after": 0}, "stale_after: must be an integer >= 1"),
    ({"stale_after": 2.5}, "stale_after: must be an integer >= 1"),
    ({"for_warning": timedelta(minutes=-1)}, "for_warning: must not be negative"),
    ({"error_window": timedelta(0)}, "error_window: must be at least 1s"),
])
def test_invalid_options_are_rejected(kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        AlertOptions(**kwargs)


def test_committed_rules_parse_as_yaml():
    rules = read_yaml(RULES)
    assert [g["name"] for g in rules["groups"]] == ["fairmonitor.records", "fairmonitor.alerts"]
