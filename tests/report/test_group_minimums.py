"""Group minimums that match the metric (issue 25 item 1, issue 26's default alignment).

``min_group_size`` counts a group's rows; a rate conditions on fewer of them (actual positives
for a TPR, actual negatives for an FPR, predicted positives for precision), and
``min_condition_size`` counts those. The evaluator and the monitor share one default of each.
"""

from __future__ import annotations

import warnings
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from fairmonitor.exceptions import GroupExclusionWarning
from fairmonitor.metrics import (
    equal_opportunity_difference,
    equalized_odds_difference,
    predictive_parity_difference,
)
from fairmonitor.metrics._rate_intervals import wilson_interval
from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sources import MemorySource
from fairmonitor.report import (
    MIN_CONDITION_SIZE,
    MIN_GROUP_SIZE,
    Window,
    evaluate_summary,
    evaluate_window,
)
from fairmonitor.summaries import summarize

EOPP = "equal_opportunity_difference"


def _group(name: str, rows: int, positives: int, found: int, false_pos: int = 0):
    """``rows`` rows of group ``name``: ``positives`` actual positives of which ``found``
    predicted 1, and ``false_pos`` negatives predicted 1."""
    y = np.r_[np.ones(positives), np.zeros(rows - positives)].astype(int)
    pred = np.r_[np.ones(found), np.zeros(positives - found), np.ones(false_pos),
                 np.zeros(rows - positives - false_pos)].astype(int)
    return np.full(rows, name, dtype=object), y, pred


def _race():
    # the case: groups of >= 30 rows with 7 and 5 positives (5 and 0 found), beside
    # two large groups; the two small ones decide EOpp (0.714) when only rows are counted
    parts = [_group("white", 4000, 1000, 600, 200), _group("black", 600, 120, 66, 20),
             _group("amer-indian", 60, 7, 5, 2), _group("other", 50, 5, 0, 1)]
    race, y, pred = (np.concatenate(c) for c in zip(*parts, strict=True))
    return race, y, pred


def test_equal_opportunity_counts_positives_not_rows():
    race, y, pred = _race()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left out by rows: every group has >= 30
        value = equal_opportunity_difference(y, pred, sensitive_features=race,
                                             min_group_size=30)
    assert value == pytest.approx(5 / 7)
    with pytest.warns(GroupExclusionWarning, match=r"'amer-indian', 'other'.*fewer than 10 "
                      r"actual positives.*min_condition_size=10"):
        value = equal_opportunity_difference(y, pred, sensitive_features=race,
                                             min_group_size=30, min_condition_size=10)
    assert value == pytest.approx(0.6 - 66 / 120)


def test_each_rate_counts_its_own_conditioning_rows():
    # group b: 40 rows, 8 positives, 32 negatives, 3 predicted positives
    parts = [_group("a", 200, 100, 60, 20), _group("c", 300, 150, 75, 30),
             _group("b", 40, 8, 2, 1)]
    g, y, pred = (np.concatenate(c) for c in zip(*parts, strict=True))
    kw = {"sensitive_features": g, "min_condition_size": 10}
    with pytest.warns(GroupExclusionWarning, match="'b'.*actual positives"):
        # TPR leaves b out (8 positives); FPR keeps it (32 negatives)
        eo = equalized_odds_difference(y, pred, **kw)
    tpr_gap, fpr_gap = 0.6 - 0.5, 20 / 100 - 1 / 32
    assert eo == pytest.approx(max(tpr_gap, fpr_gap))
    with pytest.warns(GroupExclusionWarning, match="'b'.*predicted positives"):
        pp = predictive_parity_difference(y, pred, **kw)
    assert pp == pytest.approx(60 / 80 - 75 / 105)


def test_the_report_leaves_the_groups_out_of_the_value_and_the_interval_alike():
    race, y, pred = _race()
    window = Window({"race": race}, y_pred=pred, y_true=y)
    report = evaluate_window(window, metrics=[EOPP], min_group_size=30, min_condition_size=10)
    key = (EOPP, "race")
    assert report.values[key] == pytest.approx(0.6 - 66 / 120)
    assert any("fewer than 10 actual positives" in n for n in report.notes)
    iv = report.intervals[key]
    assert iv.lower <= report.values[key] <= iv.upper
    # the summary path (the monitor's rollups) gives the same value and interval
    merged = evaluate_summary(summarize({"race": race}, y_pred=pred, y_true=y),
                              metrics=[EOPP], min_group_size=30, min_condition_size=10)
    assert merged.values[key] == report.values[key]
    assert (merged.intervals[key].lower, merged.intervals[key].upper) == (iv.lower, iv.upper)


def test_without_the_minimum_the_interval_is_wilson_based_not_centred_on_zero_of_five():
    race, y, pred = _race()
    report = evaluate_window(Window({"race": race}, y_pred=pred, y_true=y), metrics=[EOPP],
                             min_group_size=30)
    iv = report.intervals[(EOPP, "race")]
    # the old lower bound, 0.344, was far above Wilson's: 5/7 and 0/5 cannot be told apart
    # much below 5/7's own Wilson lower bound minus 0/5's upper one
    lo7, _ = wilson_interval(5, 7, 1.959964)
    _, hi5 = wilson_interval(0, 5, 1.959964)
    assert iv.lower < 0.2 and iv.lower <= float(lo7) and 5 / 7 - iv.lower > float(hi5)


def test_the_evaluator_and_the_monitor_share_one_default():
    from fairmonitor_mlflow.config import parse_config

    evaluator = parse_config({"sensitive_features": ["race"]})
    monitor = load_config("""
models:
  m:
    source: {kind: sql, url: "sqlite://"}
    sensitive_features: [race]
    prediction: prediction
    label: label
    window: 1h
    metrics: [equal_opportunity_difference]
""").models["m"]
    assert (MIN_GROUP_SIZE, MIN_CONDITION_SIZE) == (30, 10)
    assert (evaluator.min_group_size, evaluator.min_condition_size) == (30, 10)
    assert (monitor.min_group_size, monitor.min_condition_size) == (30, 10)


def test_the_monitor_applies_the_conditioning_minimum():
    t0 = datetime(2026, 11, 22, tzinfo=UTC)
    race, y, pred = _race()
    frame = pd.DataFrame({"timestamp": [t0 + timedelta(seconds=i % 3000) for i in
                                        range(race.size)],
                          "model": "m", "race": race, "prediction": pred, "label": y})
    cfg = load_config("""
models:
  m:
    source: {kind: sql, url: "sqlite://"}
    sensitive_features: [race]
    prediction: prediction
    label: label
    window: 1h
    start: 2026-11-22T00:00:00Z
    metrics: [equal_opportunity_difference]
""")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = run_once(cfg, {"m": MemorySource(frame)}, MemoryCheckpoint(),
                           now=t0 + timedelta(hours=1))
    assert results[0].report.values[(EOPP, "race")] == pytest.approx(0.6 - 66 / 120)
