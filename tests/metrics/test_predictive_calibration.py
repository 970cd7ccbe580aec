"""Predictive parity and calibration gaps (issue 13 item 8): against fairlearn and direct
computations, hand-derived cases, undefined cases, the summary path and their intervals."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from fairlearn.metrics import MetricFrame
from sklearn.metrics import precision_score

from fairmonitor import Window, evaluate_window
from fairmonitor.exceptions import GroupExclusionWarning, UndefinedMetricWarning
from fairmonitor.metrics import calibration_difference, predictive_parity_difference
from fairmonitor.report import evaluate_summary
from fairmonitor.summaries import SummarySpec, summarize

PP, CAL = "predictive_parity_difference", "calibration_difference"


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    n = 2000
    g = rng.choice(list("abcde"), n, p=[0.4, 0.25, 0.15, 0.12, 0.08])
    score = np.clip(rng.beta(2, 3, n) + 0.05 * (g == "b"), 0, 1)
    y_true = (rng.random(n) < np.clip(score + 0.1 * (g == "c"), 0, 1)).astype(int)
    y_pred = (score >= 0.4).astype(int)
    return g, score, y_true, y_pred


@pytest.mark.parametrize("min_group_size", [1, 200])
def test_predictive_parity_equals_fairlearns_precision_gap(data, min_group_size):
    g, _, y_true, y_pred = data
    frame = MetricFrame(metrics=precision_score, y_true=y_true, y_pred=y_pred,
                        sensitive_features=g)
    by_group = frame.by_group
    keep = [lab for lab in by_group.index if (g == lab).sum() >= min_group_size]
    expected = by_group[keep].max() - by_group[keep].min()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupExclusionWarning)
        got = predictive_parity_difference(y_true, y_pred, sensitive_features=g,
                                           min_group_size=min_group_size)
    assert got == pytest.approx(expected, abs=1e-12)


def test_calibration_difference_is_the_gap_of_mean_score_minus_base_rate(data):
    g, score, y_true, _ = data
    errors = [score[g == lab].mean() - y_true[g == lab].mean() for lab in np.unique(g)]
    assert calibration_difference(y_true, score, sensitive_features=g) == pytest.approx(
        max(errors) - min(errors), abs=1e-12)


def test_hand_derived_cases():
    # a: 2 of 2 positive predictions right (precision 1); b: 1 of 2 (0.5)
    assert predictive_parity_difference([1, 1, 0, 1, 0, 0], [1, 1, 0, 1, 1, 0],
                                        sensitive_features=list("aaabbb")) == 0.5
    # a calibrated (0.5 vs 2/4), b over-confident (0.5 vs 1/4)
    assert calibration_difference([1, 0, 1, 0, 1, 0, 0, 0], [0.5] * 8,
                                  sensitive_features=list("aaaabbbb")) == 0.25


def test_a_group_without_positive_predictions_has_no_precision():
    # a: precision 1.0, b: no positive prediction (left out, named), c: 0.5
    with pytest.warns(GroupExclusionWarning, match="'b'.*precision"):
        value = predictive_parity_difference(
            [1, 0, 1, 1, 0, 1, 1, 0, 0], [1, 0, 1, 0, 0, 0, 1, 1, 0],
            sensitive_features=list("aaabbbccc"))
    assert value == pytest.approx(0.5)
    with pytest.warns(GroupExclusionWarning), \
            pytest.warns(UndefinedMetricWarning, match="fewer than two groups"):
        assert math.isnan(predictive_parity_difference([1, 0, 1, 0], [1, 1, 0, 0],
                                                       sensitive_features=list("aabb")))


def test_the_summary_path_and_merged_summaries_give_the_raw_values(data):
    g, score, y_true, _ = data
    window = Window({"g": g}, y_score=score, y_true=y_true, threshold=0.4)
    raw = evaluate_window(window, metrics=[PP, CAL])
    half = g.size // 2
    spec = SummarySpec(max_raw=64, sample_size=0)  # large groups keep cells, not scores
    parts = [summarize({"g": g[s]}, y_score=score[s], y_true=y_true[s], threshold=0.4,
                       spec=spec) for s in (slice(0, half), slice(half, None))]
    merged = evaluate_summary(parts[0].merge(parts[1]), metrics=[PP, CAL])
    assert merged.values[(PP, "g")] == raw.values[(PP, "g")]
    assert merged.values[(CAL, "g")] == pytest.approx(raw.values[(CAL, "g")], abs=1e-12)
    assert raw.values[(PP, "g")] == predictive_parity_difference(
        y_true, (score >= 0.4).astype(int), sensitive_features=g)


def test_their_intervals_hold_the_value(data):
    g, score, y_true, _ = data
    report = evaluate_window(Window({"g": g}, y_score=score, y_true=y_true), metrics=[PP, CAL])
    for name in (PP, CAL):
        iv = report.intervals[(name, "g")]
        assert iv.reason is None
        assert iv.lower <= report.values[(name, "g")] <= iv.upper
        assert iv.upper > iv.lower and iv.chance > 0


def test_calibration_interval_covers_at_least_nominally():
    # the variance bound (Cauchy-Schwarz) can only widen the interval: coverage >= 93%
    rng = np.random.default_rng(0)
    hits, reps = 0, 300
    for _ in range(reps):
        g = np.repeat(["a", "b"], 400)
        score = rng.beta(2, 3, 800)
        y = (rng.random(800) < np.clip(score + 0.05 * (g == "b"), 0, 1)).astype(int)
        iv = evaluate_window(Window({"g": g}, y_score=score, y_true=y),
                             metrics=[CAL]).intervals[(CAL, "g")]
        hits += iv.lower <= 0.05 <= iv.upper  # the population gap: b's labels +0.05
    assert hits / reps >= 0.93
