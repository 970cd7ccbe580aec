"""The monitor on a multiclass model (``task: multiclass``, issue 29).

Class labels as predictions and labels, one probability column per class; every class is
evaluated one-vs-rest, exported per class (``fairmonitor_<metric>_by_class{class}``) and as the
worst class (``fairmonitor_<metric>``, what the thresholds and alert rules compare).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import MetricFrame, false_positive_rate, selection_rate, true_positive_rate
from prometheus_client import CollectorRegistry

from fairmonitor.exceptions import ConfigError
from fairmonitor.metrics import abcc
from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sinks.prometheus import FairnessCollector
from fairmonitor.monitor.sources import MemorySource

T0 = datetime(2026, 11, 22, tzinfo=UTC)
H = timedelta(hours=1)
CLASSES = ("low", "mid", "high")
DPD, EOD = "demographic_parity_difference", "equalized_odds_difference"


def _config(extra: str = "", metrics: str = f"[{DPD}, {EOD}, abcc]") -> object:
    return load_config(f"""
models:
  tiers:
    source: {{kind: sql, url: "sqlite://"}}
    task: multiclass
    scores: {{low: p_low, mid: p_mid, high: p_high}}
    sensitive_features: [sex]
    prediction: predicted
    label: tier
    window: 1h
    start: 2026-11-22T00:00:00Z
    metrics: {metrics}
    min_group_size: 1
    min_condition_size: 1
    thresholds:
      {DPD}: {{warning: 0.1, critical: 0.3}}
{extra}""")


def _frame(n_hours: int = 2, n: int = 300, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for h in range(n_hours):
        sex = rng.choice(["F", "M"], n)
        logits = rng.normal(size=(n, 3)) + np.where(sex == "M", 1.0, 0.0)[:, None] * [1, 0, -1]
        proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        tier = np.array(CLASSES)[np.argmax(logits + rng.normal(size=(n, 3)), axis=1)]
        parts.append(pd.DataFrame({
            "timestamp": [T0 + h * H + timedelta(seconds=float(s))
                          for s in np.sort(rng.uniform(0, 3600, n))],
            "model": "tiers", "version": "1", "sex": sex,
            "predicted": np.array(CLASSES)[np.argmax(proba, axis=1)], "tier": tier,
            **{f"p_{c}": proba[:, k] for k, c in enumerate(CLASSES)}}))
    return pd.concat(parts, ignore_index=True)


def _gap(metric, t, p, groups) -> float:
    by = MetricFrame(metrics=metric, y_true=t, y_pred=p, sensitive_features=groups).by_group
    return float(by.max() - by.min())


def test_multiclass_windows_per_class_and_worst_class_gauges() -> None:
    cfg = _config()
    frame = _frame()
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models, build_version="t")
    results = run_once(cfg, {"tiers": MemorySource(frame)}, MemoryCheckpoint(),
                       now=T0 + 2 * H + timedelta(minutes=1), on_result=collector.observe)
    assert [r.errors for r in results] == [{}, {}]
    last = frame[frame["timestamp"] >= T0 + H]
    report = results[-1].report
    dp = {}
    for c in CLASSES:
        t, p = (last["tier"] == c).astype(int), (last["predicted"] == c).astype(int)
        dp[c] = _gap(selection_rate, t, p, last["sex"])
        eo = max(_gap(true_positive_rate, t, p, last["sex"]),
                 _gap(false_positive_rate, t, p, last["sex"]))
        assert report.values[(f"{DPD}__class_{c}", "sex")] == pytest.approx(dp[c], abs=1e-12)
        assert report.values[(f"{EOD}__class_{c}", "sex")] == pytest.approx(eo, abs=1e-12)
        assert report.values[(f"abcc__class_{c}", "sex")] == pytest.approx(
            abcc(last[f"p_{c}"].to_numpy(), sensitive_features=last["sex"].to_numpy()),
            abs=1e-12)
        assert registry.get_sample_value(f"fairmonitor_{DPD}_by_class", {
            "model": "tiers", "version": "1", "sensitive_attribute": "sex", "class": c}
        ) == pytest.approx(dp[c], abs=1e-12)
    worst = max(dp.values())
    labels = {"model": "tiers", "version": "1", "sensitive_attribute": "sex"}
    assert registry.get_sample_value(f"fairmonitor_{DPD}", labels) == pytest.approx(worst)
    # the threshold governs the worst class, whose streak the alert rules compare
    state = registry.get_sample_value("fairmonitor_alert_state", {**labels, "metric": DPD})
    expected = 2.0 if worst > 0.3 else 1.0 if worst > 0.1 else 0.0
    assert state == expected
    streak_labels = {"model": "tiers", "metric": DPD, "sensitive_attribute": "sex",
                     "bound": "upper", "severity": "warning"}
    assert registry.get_sample_value("fairmonitor_breach_windows", streak_labels) == (
        2.0 if worst > 0.1 else None)
    assert registry.get_sample_value("fairmonitor_breach_windows", {
        **streak_labels, "metric": f"{DPD}__class_low"}) is None  # per-class: no own alert


def test_invalid_multiclass_rows_are_counted_and_unknown_labels_hold_the_window() -> None:
    cfg = _config(metrics=f"[{DPD}]")
    frame = _frame(n_hours=1)
    frame.loc[0, "predicted"] = "unknown"
    frame.loc[1, "p_mid"] = 1.5
    frame.loc[2, "tier"] = np.nan  # a label not arrived yet: not invalid
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models, build_version="t")
    (result,) = run_once(cfg, {"tiers": MemorySource(frame)}, MemoryCheckpoint(),
                         now=T0 + H + timedelta(minutes=1), on_result=collector.observe)
    assert dict(result.rejected) == {"invalid_prediction": 1, "invalid_score": 1}
    assert result.n_rows == len(frame) - 2
    frame.loc[3, "tier"] = "very high"
    (held,) = run_once(cfg, {"tiers": MemorySource(frame)}, MemoryCheckpoint(),
                       now=T0 + H + timedelta(minutes=1))
    assert "not among the classes" in held.errors["data"] and held.report is None


def test_numeric_classes_match_their_text_and_float_forms() -> None:
    cfg = load_config("""
models:
  tiers:
    source: {kind: sql, url: "sqlite://"}
    task: multiclass
    classes: [0, 1, 2]
    sensitive_features: [sex]
    prediction: predicted
    window: 1h
    start: 2026-11-22T00:00:00Z
    metrics: [demographic_parity_difference]
    min_group_size: 1
""")
    frame = pd.DataFrame({"timestamp": [T0 + timedelta(minutes=k) for k in range(6)],
                          "model": "tiers", "version": "1", "sex": list("FFFMMM"),
                          "predicted": ["0", 1.0, 2, 0, 0, "1"]})
    (result,) = run_once(cfg, {"tiers": MemorySource(frame)}, MemoryCheckpoint(),
                         now=T0 + H + timedelta(minutes=1))
    v = result.report.values
    # selection rates: 0: 1/3 vs 2/3; 1: 1/3 vs 1/3; 2: 1/3 vs 0
    assert v[(f"{DPD}__class_0", "sex")] == pytest.approx(1 / 3)
    assert v[(f"{DPD}__class_1", "sex")] == 0
    assert v[(DPD, "sex")] == pytest.approx(1 / 3)


@pytest.mark.parametrize(("extra", "message"), [
    ("    score: p_low\n", "score: names one column"),
    ("    decision_threshold: 0.3\n", "decision_threshold: thresholds a binary score"),
])
def test_multiclass_config_errors(extra: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(extra=extra)


def test_task_key_errors() -> None:
    base = """
models:
  m:
    source: {kind: sql, url: "sqlite://"}
    sensitive_features: [sex]
    prediction: p
    window: 1h
    metrics: [demographic_parity_difference]
"""
    with pytest.raises(ConfigError, match=r"models.m.task: must be one of \['binary', "
                                          r"'multiclass', 'regression'\]"):
        load_config(base + "    task: ranking\n")
    with pytest.raises(ConfigError, match=r"models.m.classes: is for task: multiclass"):
        load_config(base + "    classes: [a, b, c]\n")
    with pytest.raises(ConfigError, match=r"models.m.classes: give the class labels"):
        load_config(base + "    task: multiclass\n")
    with pytest.raises(ConfigError, match=r"models.m.scores: must name one column per class"):
        load_config(base + "    task: multiclass\n    classes: [a, b, c]\n"
                           "    scores: {a: pa, b: pb}\n")
    assert load_config(base).models["m"].task == "binary"


def test_an_empty_window_makes_every_class_undefined_not_stale() -> None:
    cfg = _config(metrics=f"[{DPD}]")
    frame = _frame(n_hours=1)  # hour 0 only: hour 1 is empty
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models, build_version="t")
    run_once(cfg, {"tiers": MemorySource(frame)}, MemoryCheckpoint(),
             now=T0 + 2 * H + timedelta(minutes=1), on_result=collector.observe)
    labels = {"model": "tiers", "version": "1", "sensitive_attribute": "sex"}
    assert registry.get_sample_value(f"fairmonitor_{DPD}_by_class",
                                     {**labels, "class": "mid"}) is None
    for metric in (DPD, f"{DPD}__class_mid"):  # an empty window has no version: ""
        assert registry.get_sample_value("fairmonitor_metric_undefined", {
            **labels, "version": "", "metric": metric, "reason": "no_traffic"}) == 1.0
