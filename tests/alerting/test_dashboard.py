"""The Grafana dashboard: committed JSON up to date, well-formed, PromQL valid, names exported."""

from __future__ import annotations

import json
import re
import warnings
from datetime import UTC, datetime

import numpy as np
import pytest

import fairmonitor
from fairmonitor.alerting.dashboard import build_dashboard, render_dashboard
from fairmonitor.alerting.grafana_alerts import ALERT_STATE_PANEL_ID

from .conftest import DASHBOARDS, check_promql, read_yaml

DASHBOARD = DASHBOARDS / "fairmonitor.json"
DATASOURCES = DASHBOARDS / "provisioning" / "datasources" / "fairmonitor.yaml"
VARIABLES = {"$model": ".*", "$version": ".*", "$attribute": ".*",
             "$__rate_interval": "5m", "$__range": "1h"}


@pytest.fixture(scope="module")
def dashboard():
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def exported_names(example_config):
    """Sample names of a real scrape of the exporter, fed a report with every registry metric.

    Only names with at least one sample count, so a family the exporter declares but never
    fills cannot make a dashboard query look valid.
    """
    from prometheus_client import CollectorRegistry, generate_latest

    from fairmonitor.monitor.job import WindowResult
    from fairmonitor.monitor.sinks.prometheus import FairnessCollector
    from fairmonitor.report import Window, evaluate_window

    rng = np.random.default_rng(7)
    n = 300
    X = rng.normal(size=(n, 3))
    sex = rng.choice(["F", "M"], n)
    score = 1 / (1 + np.exp(-(X[:, 0] + 0.8 * (sex == "M"))))
    window = Window(sensitive_features={"sex": sex}, y_score=score,
                    y_true=(rng.random(n) < score).astype(int), X=X,
                    predict=lambda a: (a[:, 0] > 0).astype(int), model="credit", version="3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small-window warnings are not under test here
        report = evaluate_window(window, thresholds=example_config.models["credit"].thresholds,
                                 rng=0)
    assert all(np.isfinite(v) for v in report.values.values())
    now = datetime(2026, 11, 22, tzinfo=UTC)
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=example_config.models, build_version="0.0.0")
    collector.observe(WindowResult(
        model="credit", version="3", index=1, start=now, end=now, phase="full",
        labels_included=True, n_rows=n, report=report, evaluated_at=now,
        duration_seconds=0.5, metrics=tuple(fairmonitor.METRICS)))
    # a multiclass model (issue 29): every metric per class, fairmonitor_<metric>_by_class
    tiers = Window(sensitive_features={"sex": sex}, y_pred=np.array(list("abc"))[n_tiers(X)],
                   y_true=np.array(list("abc"))[rng.integers(0, 3, n)], X=X,
                   y_score=np.full((n, 3), 1 / 3) + 0.1 * np.eye(3)[n_tiers(X)] - 0.1 / 3,
                   predict=lambda a: np.array(list("abc"))[n_tiers(a)], classes=list("abc"),
                   model="tiers", version="1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        multiclass = evaluate_window(tiers, rng=0)
    collector.observe(WindowResult(
        model="tiers", version="1", index=1, start=now, end=now, phase="full",
        labels_included=True, n_rows=n, report=multiclass, evaluated_at=now,
        duration_seconds=0.5, metrics=tuple(fairmonitor.METRICS)))
    # the regression metrics (issue 29) come from a regressor's window: a second model
    target = 40 + 10 * X[:, 0]
    # (features and a continuous predict: the counterpart gap and the noise metrics too)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        regression = evaluate_window(
            Window(sensitive_features={"sex": sex}, y_pred=target + 2.0 * (sex == "M"),
                   y_true=target + rng.normal(size=n), X=X,
                   predict=lambda a: 40 + 10 * np.asarray(a)[:, 0], model="credit",
                   version="3"),
            task="regression", rng=0)
    assert all(np.isfinite(v) for v in regression.values.values())
    collector.observe(WindowResult(
        model="credit", version="3", index=2, start=now, end=now, phase="full",
        labels_included=True, n_rows=n, report=regression, evaluated_at=now,
        duration_seconds=0.5, metrics=tuple(fairmonitor.METRICS)))
    text = generate_latest(registry).decode()
    return set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.M))


def n_tiers(X):
    """Three classes from the first feature (a multiclass model's prediction)."""
    return np.digitize(np.asarray(X)[:, 0], [-0.5, 0.5])


def _expressions(dashboard):
    """(where, PromQL) for every panel target and every variable's series selector."""
    out = []
    for variable in dashboard["templating"]["list"]:
        match = re.fullmatch(r"label_values\((.*), *(\w+)\)", variable["query"], re.S)
        assert match, variable["query"]
        out.append((f"variable {variable['name']}", match.group(1)))
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((f"panel {panel['id']} {target['refId']}", target["expr"]))
    return out


def _concrete(expr: str, metric: str) -> str:
    """Grafana variables replaced by values Prometheus would see."""
    expr = expr.replace("${metric}", metric).replace("$metric", metric)
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, expr
    return expr


def test_committed_dashboard_is_up_to_date():
    assert DASHBOARD.read_text(encoding="utf-8") == render_dashboard(), (
        "dashboards/fairmonitor.json is stale: run `fairmonitor dashboards --out dashboards`")


def test_dashboard_model(dashboard):
    assert (dashboard["uid"], dashboard["schemaVersion"]) == ("fairmonitor", 41)
    assert dashboard == build_dashboard()
    assert [v["name"] for v in dashboard["templating"]["list"]] == [
        "model", "version", "attribute", "metric"]
    assert all(v["type"] == "query" for v in dashboard["templating"]["list"])


def test_panel_ids_are_unique_integers(dashboard):
    ids = [p["id"] for p in dashboard["panels"]]
    assert all(isinstance(i, int) and i > 0 for i in ids)
    assert len(set(ids)) == len(ids)


def test_panels_fit_the_grid(dashboard):
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]


def test_every_datasource_is_the_provisioned_prometheus(dashboard):
    (provisioned,) = read_yaml(DATASOURCES)["datasources"]
    ref = {"type": "prometheus", "uid": provisioned["uid"]}
    refs = [v["datasource"] for v in dashboard["templating"]["list"]]
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        refs.append(panel["datasource"])
        refs += [t["datasource"] for t in panel["targets"]]
    assert refs
    assert all(r == ref for r in refs)


def test_targets_have_unique_ref_ids(dashboard):
    for panel in dashboard["panels"]:
        ref_ids = [t["refId"] for t in panel.get("targets", [])]
        assert len(set(ref_ids)) == len(ref_ids), panel["title"]


def test_content(dashboard):
    by_id = {p["id"]: p for p in dashboard["panels"]}
    assert by_id[ALERT_STATE_PANEL_ID]["type"] == "state-timeline"
    assert by_id[3]["repeat"] == "metric"
    assert "fairmonitor_threshold{" in by_id[3]["targets"][1]["expr"]
    kinds = {p["type"] for p in dashboard["panels"]}
    assert kinds == {"row", "state-timeline", "table", "timeseries", "barchart", "stat"}
    exprs = " ".join(e for _, e in _expressions(dashboard))
    for name in ("group_samples", "robustness_ratio_by_level", "labels_pending_windows",
                 "window_last_success_timestamp_seconds", "errors_total",
                 "window_evaluation_duration_seconds"):
        assert f"fairmonitor_{name}" in exprs


def test_every_expression_is_valid_promql(promtool, dashboard, tmp_path):
    exprs = sorted({_concrete(e, m) for _, e in _expressions(dashboard)
                    for m in fairmonitor.METRICS})
    result = check_promql(promtool, exprs, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout


def _metric_names(expr: str) -> set[str]:
    """Metric names an expression reads: plain names and ``__name__=~"fairmonitor_(a|b)"``."""
    names = set(re.findall(r"\bfairmonitor_[a-z0-9_]+\b", expr))
    for alternatives in re.findall(r'__name__=~"fairmonitor_\(([a-z0-9_|]+)\)"', expr):
        names |= {f"fairmonitor_{name}" for name in alternatives.split("|")}
    return names


def test_every_metric_name_is_exported(dashboard, exported_names):
    used = set()
    for _, expr in _expressions(dashboard):
        for metric in fairmonitor.METRICS:
            used |= _metric_names(_concrete(expr, metric))
    # a regressor has no classes: its metrics' per-class series never exist (the panel's
    # per-class query, generic in $metric, is empty for them)
    no_classes = {f"fairmonitor_{m}_by_class" for m, spec in fairmonitor.METRICS.items()
                  if spec.task == "regression"}
    used -= no_classes
    per_metric = {f"fairmonitor_{m}{part}" for m in fairmonitor.METRICS
                  for part in ("", "_by_class")} - no_classes
    assert used - per_metric == {f"fairmonitor_{name}" for name in (
        "alert_state", "metric_undefined", "group_samples", "robustness_ratio_by_level",
        "threshold", "threshold_by_attribute", "window_last_success_timestamp_seconds",
        "window_end_timestamp_seconds", "window_evaluation_duration_seconds",
        "window_samples", "windows_evaluated_total", "errors_total",
        "labels_pending_windows", "build_info", "metric_lower_bound", "metric_upper_bound")}
    assert per_metric <= used
    missing = used - exported_names
    assert not missing, f"not in the exporter's scrape: {sorted(missing)}"
