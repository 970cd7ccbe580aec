"""``sample_weight`` where the definitions allow it (issue 13 item 8): the parity gaps as
fairlearn weighs them, ABCC as scipy's weighted Wasserstein-1, integer weights equal repeated
rows, and the metrics without a weighted definition say so instead of ignoring the weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fairlearn import metrics as fl
from scipy.stats import wasserstein_distance

from fairmonitor import Window, evaluate_window
from fairmonitor.exceptions import InvalidInputError
from fairmonitor.metrics import (
    abcc,
    demographic_parity_difference,
    demographic_parity_ratio,
    equal_opportunity_difference,
    equalized_odds_difference,
)
from fairmonitor.report.evaluate import WEIGHTED_METRICS


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    n = 600
    g = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    score = np.clip(rng.beta(2, 4, n) + 0.1 * (g == "b"), 0, 1)
    y_true = (rng.random(n) < score).astype(int)
    y_pred = (score >= 0.35).astype(int)
    w = rng.integers(0, 5, n).astype(float)
    return g, score, y_true, y_pred, w


def test_parity_gaps_equal_fairlearns_weighted_gaps(data):
    g, _, y_true, y_pred, w = data
    kw = {"sensitive_features": g, "sample_weight": w}
    assert demographic_parity_difference(None, y_pred, **kw) == pytest.approx(
        fl.demographic_parity_difference(y_true, y_pred, **kw), abs=1e-12)
    assert demographic_parity_ratio(None, y_pred, **kw) == pytest.approx(
        fl.demographic_parity_ratio(y_true, y_pred, **kw), abs=1e-12)
    assert equalized_odds_difference(y_true, y_pred, **kw) == pytest.approx(
        fl.equalized_odds_difference(y_true, y_pred, **kw), abs=1e-12)
    tpr = fl.MetricFrame(metrics=fl.true_positive_rate, y_true=y_true, y_pred=y_pred,
                         sensitive_features=g, sample_params={"sample_weight": w})
    assert equal_opportunity_difference(y_true, y_pred, **kw) == pytest.approx(
        tpr.difference(), abs=1e-12)


def test_abcc_is_scipys_weighted_wasserstein(data):
    g, score, *_, w = data
    pairs = [wasserstein_distance(score[g == a], score[g == b], w[g == a], w[g == b])
             for a, b in (("a", "b"), ("a", "c"), ("b", "c"))]
    assert abcc(score, sensitive_features=g, sample_weight=w) == pytest.approx(max(pairs),
                                                                               abs=1e-12)
    assert abcc(score, sensitive_features=g, sample_weight=w, agg="mean") == pytest.approx(
        np.mean(pairs), abs=1e-12)


def test_integer_weights_equal_repeated_rows(data):
    g, score, y_true, y_pred, w = data
    rep = np.repeat(np.arange(g.size), w.astype(int))
    assert abcc(score, sensitive_features=g, sample_weight=w) == pytest.approx(
        abcc(score[rep], sensitive_features=g[rep]), abs=1e-12)
    assert equalized_odds_difference(y_true, y_pred, sensitive_features=g, sample_weight=w) \
        == pytest.approx(equalized_odds_difference(y_true[rep], y_pred[rep],
                                                   sensitive_features=g[rep]), abs=1e-12)


def test_unit_weights_change_nothing(data):
    g, score, y_true, y_pred, _ = data
    one = np.ones(g.size)
    assert abcc(score, sensitive_features=g, sample_weight=one) == pytest.approx(
        abcc(score, sensitive_features=g), abs=1e-12)
    assert demographic_parity_difference(None, y_pred, sensitive_features=g, sample_weight=one) \
        == demographic_parity_difference(None, y_pred, sensitive_features=g)


@pytest.mark.parametrize("bad, match", [
    ([1.0, -1.0, 1.0], "must be >= 0"), ([0.0, 0.0, 0.0], "0 on every row"),
    ([1.0, np.nan, 1.0], "sample_weight"), ([1.0, 1.0], "one weight per row"),
])
def test_bad_weights_are_refused_with_the_fix(bad, match):
    with pytest.raises(InvalidInputError, match=match):
        demographic_parity_difference(None, [1, 0, 1], sensitive_features=list("aab"),
                                      sample_weight=bad)


def test_a_weighted_window_weighs_what_has_a_weighted_definition(data):
    g, score, y_true, _, w = data
    report = evaluate_window(Window({"g": g}, y_score=score, y_true=y_true, sample_weight=w,
                                    threshold=0.35),
                             metrics=[*sorted(WEIGHTED_METRICS), "madd", "abpc"])
    assert report.values[("abcc", "g")] == pytest.approx(
        abcc(score, sensitive_features=g, sample_weight=w), abs=1e-12)
    assert report.values[("equalized_odds_difference", "g")] == pytest.approx(
        fl.equalized_odds_difference(y_true, (score >= 0.35).astype(int), sensitive_features=g,
                                     sample_weight=w), abs=1e-12)
    for name in ("madd", "abpc"):  # no weighted definition: NaN with the reason, not unweighted
        assert math.isnan(report.values[(name, "g")])
        assert "no weighted definition" in report.reasons[(name, "g")]
    assert "weighted windows" in report.intervals[("abcc", "g")].reason


def test_the_drop_policy_drops_the_weights_of_the_dropped_rows():
    w = Window({"g": ["a", None, "b", "b"]}, y_pred=[1, 0, 1, 0], sample_weight=[1, 9, 2, 3],
               missing="drop")
    assert w.sample_weight.tolist() == [1.0, 2.0, 3.0]


def test_predictive_parity_and_calibration_are_weighted_too(data):
    from sklearn.metrics import precision_score

    from fairmonitor.metrics import calibration_difference, predictive_parity_difference

    g, score, y_true, y_pred, w = data
    frame = fl.MetricFrame(metrics=precision_score, y_true=y_true, y_pred=y_pred,
                           sensitive_features=g, sample_params={"sample_weight": w})
    assert predictive_parity_difference(y_true, y_pred, sensitive_features=g,
                                        sample_weight=w) == pytest.approx(frame.difference(),
                                                                          abs=1e-12)
    errors = [np.average(score[g == k], weights=w[g == k])
              - np.average(y_true[g == k], weights=w[g == k]) for k in np.unique(g)]
    assert calibration_difference(y_true, score, sensitive_features=g, sample_weight=w) \
        == pytest.approx(max(errors) - min(errors), abs=1e-12)
