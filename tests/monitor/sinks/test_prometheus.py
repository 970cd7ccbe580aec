"""FairnessCollector: values, undefined reasons, thresholds, self-metrics, promtool on a scrape."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType

import pytest
from prometheus_client import CollectorRegistry, start_http_server

from fairmonitor.exceptions import ConfigError
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import WindowResult
from fairmonitor.monitor.sinks.prometheus import ERROR_STAGES, FairnessCollector, reason_code
from fairmonitor.monitor.windows import window_index
from fairmonitor.report import Window, evaluate_window

CONFIG = """
models:
  credit:
    source: {kind: sql, url: "sqlite:///unused.db"}
    sensitive_features: [sex, race]
    label: label
    prediction: prediction
    window: 1h
    labels_after: 1d
    # windows of 8 rows: every group counts (the defaults, 30 and 10, would leave all out)
    min_group_size: 1
    min_condition_size: 1
    metrics: [demographic_parity_difference, equalized_odds_difference]
    thresholds:
      demographic_parity_difference: {warning: 0.1, critical: 0.2}
      equalized_odds_difference:
        - {warning: 0.2, critical: 0.4}
        - {attribute: sex, warning: 0.05, critical: 0.1}
"""
END = datetime(2026, 11, 22, 10, tzinfo=UTC)
DP = "demographic_parity_difference"
EO = "equalized_odds_difference"


@pytest.fixture
def config(tmp_path):
    return load_config(CONFIG, base_dir=tmp_path)


@pytest.fixture
def registry():
    return CollectorRegistry()


@pytest.fixture
def collector(registry, config):
    return FairnessCollector(registry, models=config.models, build_version="9.9.9")


def window(pred, *, sex="FFFFMMMM", race="abbaabba", label=None):
    return Window({"sex": list(sex), "race": list(race)}, y_pred=pred, y_true=label,
                  model="credit", version="3")


def result(report, *, config, version="3", phase="predictions", end=END, errors=None,
           n_rows=None):
    cfg = config.models["credit"]
    metrics = {"full": cfg.metrics, "predictions": cfg.label_free_metrics,
               "labels": cfg.label_metrics}[phase]
    if report is not None:
        report = evaluate_window(report, metrics=metrics, thresholds=cfg.thresholds,
                                 min_group_size=cfg.min_group_size)
    if n_rows is None:
        n_rows = report.n_rows if report is not None else 0
    return WindowResult(
        model="credit", version=version, index=window_index(timedelta(hours=1), end),
        start=end - timedelta(hours=1), end=end, phase=phase,
        labels_included=phase != "predictions", n_rows=n_rows, report=report,
        errors=MappingProxyType(errors or {}), evaluated_at=end + timedelta(minutes=1),
        duration_seconds=0.25, metrics=metrics)


def value(registry, name, **labels):
    return registry.get_sample_value(name, labels)


def labels(attr, version="3"):
    return {"model": "credit", "version": version, "sensitive_attribute": attr}


def test_metric_value_is_exported_per_attribute(registry, collector, config):
    # sex: F selects 3/4, M 1/4 -> 0.5; race (abbaabba): a 2/4, b 2/4 -> 0
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    assert value(registry, f"fairmonitor_{DP}", **labels("sex")) == 0.5
    assert value(registry, f"fairmonitor_{DP}", **labels("race")) == 0.0


def test_alert_state_codes_follow_thresholds(registry, collector, config):
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    assert value(registry, "fairmonitor_alert_state", metric=DP, **labels("sex")) == 2.0
    assert value(registry, "fairmonitor_alert_state", metric=DP, **labels("race")) == 0.0


def test_help_text_comes_from_the_registry(registry, collector, config):
    from fairmonitor import METRICS

    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    family = next(f for f in registry.collect() if f.name == f"fairmonitor_{DP}")
    assert family.documentation == METRICS[DP].help


def test_nan_is_not_a_sample_but_an_undefined_marker(registry, collector, config):
    # one race group only: DP on race is undefined
    collector.observe(result(window([1, 0, 1, 0, 1, 0, 0, 0], race="aaaaaaaa"), config=config))
    assert value(registry, f"fairmonitor_{DP}", **labels("race")) is None
    assert value(registry, "fairmonitor_metric_undefined", metric=DP, reason="too_few_groups",
                 **labels("race")) == 1.0


def test_label_metrics_are_pending_until_their_labels_arrive(registry, collector, config):
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    assert value(registry, "fairmonitor_metric_undefined", metric=EO, reason="labels_pending",
                 **labels("sex")) == 1.0
    labelled = window([1, 1, 1, 0, 1, 0, 0, 0], label=[1, 1, 0, 0, 1, 1, 0, 0])
    collector.observe(result(labelled, config=config, phase="labels"))
    # sex: TPR F 2/2, M 1/2; FPR F 1/2, M 0/2 -> 0.5 > critical 0.1 of the sex override
    assert value(registry, f"fairmonitor_{EO}", **labels("sex")) == 0.5
    assert value(registry, "fairmonitor_metric_undefined", metric=EO, reason="labels_pending",
                 **labels("sex")) is None


def test_attribute_override_decides_the_alert_state(registry, collector, config):
    labelled = window([1, 1, 1, 0, 1, 0, 0, 0], label=[1, 1, 0, 0, 1, 1, 0, 0])
    collector.observe(result(labelled, config=config, phase="labels"))
    assert value(registry, "fairmonitor_alert_state", metric=EO, **labels("sex")) == 2.0


def test_labels_phase_keeps_the_latest_window_facts(registry, collector, config):
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    late = window([1, 0], sex="FM", race="ab", label=[1, 0])
    collector.observe(result(late, config=config, phase="labels", end=END - timedelta(days=1)))
    assert value(registry, "fairmonitor_window_samples", model="credit") == 8.0
    assert value(registry, "fairmonitor_window_end_timestamp_seconds",
                 model="credit") == END.timestamp()


def test_a_new_version_replaces_the_old_label_set(registry, collector, config):
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    collector.observe(result(window([1, 0, 1, 0, 1, 0, 1, 0]), config=config, version="4",
                             end=END + timedelta(hours=1)))
    assert value(registry, f"fairmonitor_{DP}", **labels("sex", version="3")) is None
    assert value(registry, f"fairmonitor_{DP}", **labels("sex", version="4")) == 0.0


def test_group_samples_follow_the_latest_window(registry, collector, config):
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0], race="abcabcab"), config=config))
    assert value(registry, "fairmonitor_group_samples", group="c", **labels("race")) == 2.0
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config,
                             end=END + timedelta(hours=1)))
    assert value(registry, "fairmonitor_group_samples", group="c", **labels("race")) is None


def test_intersection_groups_are_exported(registry, collector, config):
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    assert value(registry, "fairmonitor_group_samples", group="F:a", **labels("sex:race")) == 2.0


def test_general_thresholds_are_gauges(registry, collector):
    assert value(registry, "fairmonitor_threshold", model="credit", metric=DP,
                 severity="critical", bound="upper") == 0.2


def test_attribute_thresholds_have_their_own_family(registry, collector):
    assert value(registry, "fairmonitor_threshold_by_attribute", model="credit", metric=EO,
                 sensitive_attribute="sex", severity="warning", bound="upper") == 0.05


def test_threshold_family_has_only_general_thresholds(registry, collector):
    family = next(f for f in registry.collect() if f.name == "fairmonitor_threshold")
    assert sorted((s.labels["metric"], s.labels["severity"], s.value) for s in family.samples) == [
        (DP, "critical", 0.2), (DP, "warning", 0.1), (EO, "critical", 0.4), (EO, "warning", 0.2)]


@pytest.mark.parametrize("name", [
    "fairmonitor_window_last_success_timestamp_seconds",
    "fairmonitor_window_end_timestamp_seconds",
    "fairmonitor_window_evaluation_duration_seconds", "fairmonitor_window_samples",
    "fairmonitor_windows_evaluated_total", "fairmonitor_labels_pending_windows"])
def test_self_metrics_exist_before_the_first_window(registry, collector, name):
    assert value(registry, name, model="credit") == 0.0


@pytest.mark.parametrize("stage", ERROR_STAGES)
def test_error_series_exist_before_the_first_error(registry, collector, stage):
    assert value(registry, "fairmonitor_errors_total", model="credit", stage=stage) == 0.0


def test_build_info(registry, collector):
    assert value(registry, "fairmonitor_build_info", version="9.9.9") == 1.0


def test_success_updates_health(registry, collector, config):
    # the window's evaluation time (END + 1 min, possibly simulated) is not liveness: the
    # wall clock is, since the staleness alerts compare it with Prometheus' time()
    before = time.time()
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    last = value(registry, "fairmonitor_window_last_success_timestamp_seconds", model="credit")
    assert before <= last <= time.time()
    assert last != (END + timedelta(minutes=1)).timestamp()
    assert value(registry, "fairmonitor_window_evaluation_duration_seconds",
                 model="credit") == 0.25
    assert value(registry, "fairmonitor_windows_evaluated_total", model="credit") == 1.0


def test_source_error_counts_and_keeps_the_last_values(registry, collector, config):
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    last = value(registry, "fairmonitor_window_last_success_timestamp_seconds", model="credit")
    collector.observe(result(None, config=config, end=END + timedelta(hours=1),
                             errors={"source": "WindowUnavailableError: down"}))
    assert value(registry, "fairmonitor_errors_total", model="credit", stage="source") == 1.0
    assert value(registry, f"fairmonitor_{DP}", **labels("sex")) == 0.5
    assert value(registry, "fairmonitor_window_last_success_timestamp_seconds",
                 model="credit") == last


def test_empty_window_is_no_traffic_not_zero_and_not_an_error(registry, collector, config):
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    collector.observe(result(None, config=config, end=END + timedelta(hours=1)))
    assert value(registry, f"fairmonitor_{DP}", **labels("sex")) is None
    assert value(registry, "fairmonitor_metric_undefined", metric=DP, reason="no_traffic",
                 **labels("sex")) == 1.0
    assert value(registry, "fairmonitor_window_samples", model="credit") == 0.0
    assert value(registry, "fairmonitor_errors_total", model="credit", stage="data") == 0.0


def test_unreadable_window_is_a_held_data_error(registry, collector, config):
    # issue 24: the window keeps its watermark (evaluated once fixed), so the values of the
    # last evaluated window stay; the held window is counted and exported on its own
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    before = value(registry, f"fairmonitor_{DP}", **labels("sex"))
    collector.observe(result(None, config=config, end=END + timedelta(hours=1), n_rows=8,
                             errors={"data": "KeyError: 'sex'"}))
    assert value(registry, f"fairmonitor_{DP}", **labels("sex")) == before
    assert value(registry, "fairmonitor_metric_undefined", metric=DP, reason="undefined",
                 **labels("sex")) is None
    assert value(registry, "fairmonitor_errors_total", model="credit", stage="data") == 1.0
    assert value(registry, "fairmonitor_data_error_windows", model="credit") == 1.0


def test_what_the_alert_rules_read_is_exported_per_model(tmp_path):
    """Cadence, label delay and routing labels: the rules name no model, they read these."""
    config = load_config(CONFIG.replace("    window: 1h\n", "    window: 1h\n    every: 5m\n"
                                        "    mode: sliding\n    team: risk\n")
                         + "  fraud:\n    source: {kind: sql, url: \"sqlite:///u.db\"}\n"
                           "    sensitive_features: [region]\n    prediction: p\n"
                           "    window: 1d\n    metrics: [demographic_parity_difference]\n"
                           "    owner: bob\n", base_dir=tmp_path)
    registry = CollectorRegistry()
    FairnessCollector(registry, models=config.models)
    assert value(registry, "fairmonitor_window_cadence_seconds", model="credit") == 300.0
    assert value(registry, "fairmonitor_window_cadence_seconds", model="fraud") == 86400.0
    assert value(registry, "fairmonitor_labels_after_seconds", model="credit") == 86400.0
    assert value(registry, "fairmonitor_labels_after_seconds", model="fraud") == 0.0
    assert value(registry, "fairmonitor_model_info", model="credit", team="risk",
                 owner="") == 1.0
    assert value(registry, "fairmonitor_model_info", model="fraud", team="",
                 owner="bob") == 1.0


def test_group_label_is_capped_with_an_aggregate(registry, collector, config):
    """Top MAX_GROUPS groups by rows, the rest summed under group="_other"."""
    from fairmonitor.monitor.sinks.prometheus import MAX_GROUPS, OTHER_GROUPS

    races = [f"r{i:02d}" for i in range(MAX_GROUPS + 5) for _ in range(i + 1)]
    n = len(races)
    pred = [i % 2 for i in range(n)]
    collector.observe(result(window(pred, sex="FM" * (n // 2) + "F" * (n % 2), race=races),
                             config=config))
    family = next(f for f in registry.collect() if f.name == "fairmonitor_group_samples")
    race = {s.labels["group"]: s.value for s in family.samples
            if s.labels["sensitive_attribute"] == "race"}
    assert len(race) == MAX_GROUPS + 1
    assert race[OTHER_GROUPS] == sum(range(1, 6))  # the five smallest groups: 1+2+3+4+5 rows
    assert race["r14"] == 15.0
    assert sum(race.values()) == n
    sex = {s.labels["group"]: s.value for s in family.samples
           if s.labels["sensitive_attribute"] == "sex"}
    assert set(sex) == {"F", "M"}


def test_hook_stage_errors_are_recorded_explicitly(registry, collector):
    collector.record_error("credit", "mlflow")
    collector.record_error("credit", "mlflow")
    assert value(registry, "fairmonitor_errors_total", model="credit", stage="mlflow") == 2.0


def test_labels_pending_windows(registry, collector):
    collector.set_labels_pending("credit", 24)
    assert value(registry, "fairmonitor_labels_pending_windows", model="credit") == 24.0


@dataclass(frozen=True)
class FakeRobustness:
    value: float
    levels: tuple[float, ...]
    ratios: dict[str, tuple[float, ...]]


def with_robustness(report):
    detail = FakeRobustness(1.0, (0.1, 0.5), {"dp": (1.25, float("nan")), "eo": (1.0, 2.0)})
    return dataclasses.replace(report, details=MappingProxyType(
        {**report.details, (DP, "sex"): detail}))


def test_robustness_ratio_per_level(registry, collector, config):
    r = result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config)
    collector.observe(dataclasses.replace(r, report=with_robustness(r.report)))
    assert value(registry, "fairmonitor_robustness_ratio_by_level", metric="dp", level="0.1",
                 **labels("sex")) == 1.25
    assert value(registry, "fairmonitor_robustness_ratio_by_level", metric="eo", level="0.5",
                 **labels("sex")) == 2.0


def test_robustness_nan_ratio_is_not_exported(registry, collector, config):
    r = result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config)
    collector.observe(dataclasses.replace(r, report=with_robustness(r.report)))
    assert value(registry, "fairmonitor_robustness_ratio_by_level", metric="dp", level="0.5",
                 **labels("sex")) is None


def test_reference_evaluation_exports_only_what_windows_do_not(registry, collector, config):
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    ref = evaluate_window(window([1, 1, 1, 1, 0, 0, 0, 0]),
                          metrics=[DP, "demographic_parity_ratio"])
    collector.observe_reference("credit", "5", with_robustness(ref))
    assert value(registry, f"fairmonitor_{DP}", **labels("sex")) == 0.5  # still the window's
    assert value(registry, "fairmonitor_demographic_parity_ratio", **labels("sex", "5")) == 0.0
    assert value(registry, "fairmonitor_robustness_ratio_by_level", metric="dp", level="0.1",
                 **labels("sex", "5")) == 1.25


@pytest.mark.parametrize(("reason", "code"), [
    ("labels not available", "labels_pending"),
    ("error: ValueError: bad", "error"),
    ("demographic_parity_ratio is undefined: fewer than two groups of 'sex' have a defined "
     "selection rate. Returning nan.", "too_few_groups"),
    ("x is undefined: every group has selection rate 0, so min/max is 0/0. Returning nan.",
     "undefined"),
    (None, "undefined"),
])
def test_reason_codes(reason, code):
    assert reason_code(reason) == code


def test_promtool_accepts_a_real_scrape(registry, collector, config):
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool missing: apt-get install prometheus"
    r = result(window([1, 1, 1, 0, 1, 0, 0, 0], race="aaaaaaaa",
                      label=[1, 1, 0, 0, 1, 1, 0, 0]), config=config, phase="full")
    collector.observe(dataclasses.replace(r, report=with_robustness(r.report)))
    collector.record_error("credit", "mlflow")
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert b"fairmonitor_metric_undefined{" in body
    check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                           timeout=30)
    assert (check.returncode, check.stdout + check.stderr) == (0, b"")


def test_real_robustness_result_is_exported_per_level(registry, collector):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    sex = np.where(np.arange(400) % 2, "F", "M")
    X = pd.DataFrame({"x": rng.normal(size=400) + np.where(sex == "F", 0.5, 0.0)})
    w = Window({"sex": sex}, X=X, predict=lambda X: (np.asarray(X["x"]) > 0.2).astype(int),
               model="credit", version="7")
    report = evaluate_window(w, metrics=["robustness_ratio_max"], options={
        "robustness_ratio_max": {"levels": [0.5, 1.0], "n_repeats": 3}})
    collector.observe_reference("credit", "7", report)
    ratios = report.details[("robustness_ratio_max", "sex")].ratios[DP]
    exported = [value(registry, "fairmonitor_robustness_ratio_by_level", metric=DP, level=level,
                      **labels("sex", "7")) for level in ("0.5", "1")]
    assert exported == [float(r) for r in ratios]


def test_each_value_is_exported_with_its_interval_chance_and_compared_quantity(registry,
                                                                              collector, config):
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config))
    at = {"metric": DP, **labels("sex")}
    lower = value(registry, "fairmonitor_metric_lower_bound", **at)
    upper = value(registry, "fairmonitor_metric_upper_bound", **at)
    assert lower <= 0.5 <= upper and upper > lower
    assert 0 < value(registry, "fairmonitor_metric_chance_level", **at) < 1
    # compare: value (the default): the threshold compares the value itself
    assert value(registry, "fairmonitor_metric_compared", **at) == 0.5


def test_compare_bound_exports_the_unfair_side_bound(tmp_path, registry):
    cfg = load_config(CONFIG.replace(
        "demographic_parity_difference: {warning: 0.1, critical: 0.2}",
        "demographic_parity_difference: {warning: 0.1, critical: 0.2, compare: bound}"),
        base_dir=tmp_path)
    collector = FairnessCollector(registry, models=cfg.models, build_version="9.9.9")
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=cfg))
    at = {"metric": DP, **labels("sex")}
    # 4 rows per group: the lower bound of a 0.5 gap is far below the warning level
    lower = value(registry, "fairmonitor_metric_lower_bound", **at)
    assert value(registry, "fairmonitor_metric_compared", **at) == lower < 0.1
    assert value(registry, "fairmonitor_alert_state", **at) == 0.0  # ok: no evidence


def test_compare_bound_is_refused_in_the_config_for_a_metric_without_interval(tmp_path):
    text = CONFIG.replace("metrics: [demographic_parity_difference, equalized_odds_difference]",
                          "metrics: [demographic_parity_difference, equalized_odds_difference, "
                          "hfm]\n    features: [x]").replace(
        "    thresholds:\n", "    thresholds:\n      hfm: {warning: 0.5, compare: bound}\n")
    with pytest.raises(ConfigError, match="hfm has no confidence interval"):
        load_config(text, base_dir=tmp_path)


def test_groups_below_min_size_are_a_state_not_a_silence(tmp_path, registry):
    cfg = load_config(CONFIG.replace("    min_group_size: 1\n", "    min_group_size: 3\n"),
                      base_dir=tmp_path)
    collector = FairnessCollector(registry, models=cfg.models, build_version="9.9.9")
    # race: a 6 rows, b 2 rows (below 3): DP on race is undefined for insufficient data
    collector.observe(result(window([1, 1, 1, 0, 1, 0, 0, 0], race="aaaaaabb"), config=cfg))
    assert value(registry, "fairmonitor_groups_below_min_size", model="credit",
                 sensitive_attribute="race") == 1.0
    assert value(registry, "fairmonitor_groups_below_min_size", model="credit",
                 sensitive_attribute="sex") == 0.0
    assert value(registry, "fairmonitor_metric_undefined", metric=DP, reason="insufficient_data",
                 **labels("race")) == 1.0


def test_restart_restores_the_bounds(registry, collector, config):
    from fairmonitor.monitor.snapshot import fold

    first = result(window([1, 1, 1, 0, 1, 0, 0, 0]), config=config)
    collector.observe(first)
    before = value(registry, "fairmonitor_metric_lower_bound", metric=DP, **labels("sex"))
    fresh = CollectorRegistry()
    restarted = FairnessCollector(fresh, models=config.models, build_version="9.9.9")
    restarted.restore("credit", fold({}, first))
    assert value(fresh, "fairmonitor_metric_lower_bound", metric=DP, **labels("sex")) == before
    assert value(fresh, "fairmonitor_metric_compared", metric=DP, **labels("sex")) == 0.5
