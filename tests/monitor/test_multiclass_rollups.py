"""Rollups of a multiclass model (issue 29): one binary summary per class, merged per class.

The oracle of every test is the rows' own evaluation: ``evaluate_window`` on the multiclass
window of the rollup's concatenated rows (label-free metrics on every row, label metrics on
the labelled ones), checked itself against fairlearn's per-class rates.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import MetricFrame, selection_rate
from prometheus_client import CollectorRegistry

from fairmonitor.exceptions import InvalidInputError
from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.rollups import evaluate_rollup
from fairmonitor.monitor.sinks.prometheus import FairnessCollector
from fairmonitor.monitor.sources import MemorySource
from fairmonitor.monitor.summary_store import MemorySummaryStore
from fairmonitor.report import Window, evaluate_summary, evaluate_window
from fairmonitor.summaries import summarize
from fairmonitor.summaries.multiclass import (
    MulticlassSummary,
    from_bytes,
    merge_all,
    to_bytes,
)

T0 = datetime(2026, 11, 22, tzinfo=UTC)
H = timedelta(hours=1)
CLASSES = ("low", "mid", "high")
DPD, EOD = "demographic_parity_difference", "equalized_odds_difference"
FREE = [DPD, "abcc", "madd", "abpc"]
LABELLED = [EOD, "equal_opportunity_difference"]
#: the tolerance of each metric from merged summaries (monitor/rollups.py's docstring)
TOL = {"abcc": 1e-6, "abpc": 1e-12}


def _config(extra: str = "", metrics=None, rollups: str = "[6h]") -> object:
    return load_config(f"""
models:
  tiers:
    source: {{kind: sql, url: "sqlite://"}}
    task: multiclass
    scores: {{low: p_low, mid: p_mid, high: p_high}}
    sensitive_features: [sex, race]
    prediction: predicted
    label: tier
    window: 1h
    start: 2026-11-22T00:00:00Z
    metrics: [{", ".join(metrics or FREE + LABELLED)}]
    rollups: {rollups}
    thresholds:
      {DPD}: {{warning: 0.05, critical: 0.5}}
{extra}""")


def _frame(hours: int, n: int = 150, seed: int = 0, unlabelled: float = 0.0) -> pd.DataFrame:
    """``hours`` of a 3-class model's rows; a fraction ``unlabelled`` of labels missing."""
    rng = np.random.default_rng(seed)
    parts = []
    for h in range(hours):
        sex = rng.choice(np.array(["F", "M"], dtype=object), n)
        race = rng.choice(np.array(["a", "b", "c"], dtype=object), n, p=[0.6, 0.3, 0.1])
        logits = rng.normal(size=(n, 3)) + np.where(sex == "M", 0.8, 0.0)[:, None] * [1, 0, -1]
        proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        tier = np.array(CLASSES, dtype=object)[np.argmax(logits + rng.normal(size=(n, 3)), 1)]
        tier[rng.random(n) < unlabelled] = None
        parts.append(pd.DataFrame({
            "timestamp": T0 + h * H + pd.to_timedelta(np.sort(rng.uniform(0, 3599, n)),
                                                        unit="s"),
            "model": "tiers", "version": "1", "sex": sex, "race": race,
            "predicted": np.array(CLASSES, dtype=object)[np.argmax(proba, axis=1)],
            "tier": tier, **{f"p_{c}": proba[:, k] for k, c in enumerate(CLASSES)}}))
    return pd.concat(parts, ignore_index=True)


def _rows_report(frame: pd.DataFrame, start: datetime, end: datetime, metrics, *,
                 labelled: bool):
    """The oracle: evaluate_window on the multiclass window of the rollup's rows.

    Under the model's settings (group minimums, intervals, thresholds), as the monitor.
    """
    rows = frame[(frame.timestamp >= start) & (frame.timestamp < end)]
    if labelled:
        rows = rows[rows.tier.notna()]
    window = Window({"sex": rows.sex.to_numpy(), "race": rows.race.to_numpy()},
                    y_pred=rows.predicted.to_numpy(),
                    y_true=rows.tier.to_numpy() if labelled else None,
                    y_score=rows[[f"p_{c}" for c in CLASSES]].to_numpy(), classes=CLASSES)
    return evaluate_window(window, metrics=metrics,
                           evaluation=_config().models["tiers"].evaluation)


def _assert_same(got, expected) -> None:
    assert expected, "an empty oracle compares nothing"
    for (metric, attr), want in expected.items():
        have = got[(metric, attr)]
        tol = TOL.get(metric.split("__class_")[0], 0.0)
        assert abs(have - want) <= tol, (metric, attr, have, want)


@pytest.mark.parametrize(("seed", "unlabelled"), [(0, 0.0), (1, 0.3), (2, 0.05)])
def test_a_multiclass_rollup_equals_the_rows_per_class_and_worst_class(seed, unlabelled):
    frame = _frame(8, seed=seed, unlabelled=unlabelled)
    store = MemorySummaryStore()
    results = run_once(_config(), {"tiers": MemorySource(frame)}, MemoryCheckpoint(),
                       now=T0 + 8 * H + timedelta(minutes=1), summaries=store)
    (roll,) = [r for r in results if r.rollup == "6h"]
    assert (roll.start, roll.end, roll.merged_windows) == (T0, T0 + 6 * H, 6)
    assert roll.errors == {}
    # every row labelled: one (labelled) part a window; else a predictions part too
    assert {p for _, _, p in store.blobs} == (
        {"labels"} if unlabelled == 0 else {"labels", "predictions"})
    free = _rows_report(frame, T0, T0 + 6 * H, FREE, labelled=False)
    label = _rows_report(frame, T0, T0 + 6 * H, LABELLED, labelled=True)
    keys = {(f"{m}__class_{c}", a) for m in FREE + LABELLED for c in CLASSES
            for a in ("sex", "race", "sex:race")}
    assert keys <= set(roll.report.values)
    _assert_same(roll.report.values, dict(free.values))
    _assert_same(roll.report.values, dict(label.values))
    for key in [(DPD, "sex"), (EOD, "race")]:  # the worst class is the same class
        oracle = free if key[0] == DPD else label
        assert roll.report.details[key].label == oracle.details[key].label
    worst = free.values[(DPD, "sex")]  # the thresholds govern the worst class
    assert roll.report.statuses[(DPD, "sex")] == free.statuses[(DPD, "sex")] == (
        "critical" if worst > 0.5 else "warning" if worst > 0.05 else "ok")
    assert roll.n_rows == len(frame[frame.timestamp < T0 + 6 * H])
    assert roll.labelled_rows == int(frame[frame.timestamp < T0 + 6 * H].tier.notna().sum())


def test_the_oracle_agrees_with_fairlearn_per_class():
    """The rows' report the rollups are compared with: fairlearn's one-vs-rest rates."""
    frame = _frame(2, seed=4)
    report = _rows_report(frame, T0, T0 + 2 * H, [DPD], labelled=False)
    for c in CLASSES:
        by = MetricFrame(metrics=selection_rate, y_true=(frame.tier == c).astype(int),
                         y_pred=(frame.predicted == c).astype(int),
                         sensitive_features=frame.sex).by_group
        assert report.values[(f"{DPD}__class_{c}", "sex")] == pytest.approx(
            by.max() - by.min(), abs=1e-12)


def test_multiclass_rollup_gauges_per_class_and_worst_class():
    frame = _frame(6, seed=5)
    cfg = _config(metrics=[DPD, "abcc"])
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models, build_version="t")
    checkpoint = MemoryCheckpoint()
    results = run_once(cfg, {"tiers": MemorySource(frame)}, checkpoint,
                       now=T0 + 6 * H + timedelta(minutes=1), on_result=collector.observe,
                       summaries=MemorySummaryStore())
    (roll,) = [r for r in results if r.rollup]
    oracle = _rows_report(frame, T0, T0 + 6 * H, [DPD], labelled=False)
    labels = {"model": "tiers", "version": "1", "window": "6h", "sensitive_attribute": "sex"}
    for c in CLASSES:
        want = oracle.values[(f"{DPD}__class_{c}", "sex")]
        assert registry.get_sample_value("fairmonitor_rollup_value_by_class", {
            **labels, "metric": DPD, "class": c}) == want
    worst = oracle.values[(DPD, "sex")]
    assert worst == max(oracle.values[(f"{DPD}__class_{c}", "sex")] for c in CLASSES)
    assert registry.get_sample_value("fairmonitor_rollup_value",
                                     {**labels, "metric": DPD}) == worst
    assert registry.get_sample_value("fairmonitor_rollup_value",
                                     {**labels, "metric": f"{DPD}__class_low"}) is None
    state = registry.get_sample_value("fairmonitor_rollup_alert_state", {**labels, "metric": DPD})
    assert state == (2.0 if worst > 0.5 else 1.0 if worst > 0.05 else 0.0)
    # the window's own gauges still show the latest hour, per class
    hour = [r for r in results if not r.rollup][-1]
    assert registry.get_sample_value(f"fairmonitor_{DPD}_by_class", {
        "model": "tiers", "version": "1", "sensitive_attribute": "sex", "class": "mid"}
    ) == hour.report.values[(f"{DPD}__class_mid", "sex")]
    assert roll.report.values[(DPD, "sex")] == worst
    # a restarted service shows every class's rollup value at once, from the snapshot
    restarted = CollectorRegistry()
    FairnessCollector(restarted, models=cfg.models, build_version="t").restore(
        "tiers", checkpoint.load("tiers").last)
    for c in CLASSES:
        assert restarted.get_sample_value("fairmonitor_rollup_value_by_class", {
            **labels, "metric": DPD, "class": c}) == oracle.values[(f"{DPD}__class_{c}", "sex")]


def test_late_labels_re_evaluate_a_multiclass_rollup_from_its_summaries():
    frame = _frame(7, n=120, seed=6)
    partial = frame.copy()
    late = partial.timestamp < T0 + 2 * H
    partial.loc[late & (np.arange(len(frame)) % 2 == 0), "tier"] = None
    cfg = _config(extra="    labels_after: 1h\n    relabel_within: 1d\n")
    checkpoint, store, source = MemoryCheckpoint(), MemorySummaryStore(), MemorySource(partial)
    run_once(cfg, {"tiers": source}, checkpoint, now=T0 + 7 * H + timedelta(minutes=1),
             summaries=store)
    source.frames = frame
    again = run_once(cfg, {"tiers": source}, checkpoint,
                     now=T0 + 7 * H + timedelta(minutes=6), summaries=store)
    (redone,) = [r for r in again if r.rollup]
    assert redone.phase == "labels"
    _assert_same(redone.report.values,
                 dict(_rows_report(frame, T0, T0 + 6 * H, LABELLED, labelled=True).values))


def test_summaries_of_other_classes_are_left_out_not_merged():
    frame = _frame(6, n=80, seed=7)
    store = MemorySummaryStore()
    run_once(_config(metrics=[DPD]), {"tiers": MemorySource(frame[frame.timestamp < T0 + 3 * H])},
             MemoryCheckpoint(), now=T0 + 3 * H + timedelta(minutes=1), summaries=store)
    # the config gains a class: the three stored hours cannot merge with the new ones
    cfg = _config(metrics=[DPD]).models["tiers"]
    four = dataclasses.replace(cfg, classes=("low", "mid", "high", "top"))
    result = evaluate_rollup(four, four.rollups[0], T0 + 6 * H, store)
    assert result.report is None and result.error is None  # nothing of the new classes yet
    same = evaluate_rollup(cfg, cfg.rollups[0], T0 + 6 * H, store)
    assert same.merged_windows == 3 and same.report is not None
    with pytest.raises(InvalidInputError, match="cannot merge a multiclass summary"):
        merge_all([from_bytes(b) for b in list(store.blobs.values())[:1]]
                  + [summarize({"g": ["a"]}, y_pred=[1])])


def test_multiclass_summary_bytes_round_trip_and_refuse_corruption():
    g = {"g": ["a", "a", "b", "b"]}
    s = MulticlassSummary({1: summarize(g, y_pred=[1, 0, 0, 1], y_score=[.9, .2, .1, .8]),
                           "1": summarize(g, y_pred=[0, 1, 1, 0], y_score=[.1, .8, .9, .2])})
    back = from_bytes(to_bytes(s))
    assert back.classes == (1, "1") and back.spec.fingerprint == s.spec.fingerprint
    merged = merge_all([s, back])
    assert evaluate_summary(merged, metrics=[DPD]).values[(DPD, "g")] == 0.0
    assert evaluate_summary(s, metrics=[DPD]).values[(f"{DPD}__class_1", "g")] == 0.0
    blob = bytearray(to_bytes(s))
    blob[40] ^= 1
    with pytest.raises(InvalidInputError, match="checksum"):
        from_bytes(bytes(blob))
    with pytest.raises(InvalidInputError, match="checksum"):
        from_bytes(bytes(blob[:-3]))
