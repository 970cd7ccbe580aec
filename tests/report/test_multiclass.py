"""Multiclass windows: every class one-vs-rest, per class and as the worst class (issue 29)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fairlearn.metrics import (
    MetricFrame,
    false_positive_rate,
    selection_rate,
    true_positive_rate,
)

from fairmonitor import InvalidInputError, Threshold, Window, evaluate_window
from fairmonitor.metrics import abcc, calibration_difference, madd
from fairmonitor.report.multiclass import ClassWorst
from fairmonitor.report.registry import class_key, split_class_key

CLASSES = ("low", "mid", "high")
PARITY = ["demographic_parity_difference", "demographic_parity_ratio",
          "equal_opportunity_difference", "equalized_odds_difference"]


@pytest.fixture
def rows():
    rng = np.random.default_rng(29)
    n = 900
    sex = rng.choice(["F", "M"], n)
    race = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    logits = rng.normal(size=(n, 3)) + np.where(sex == "M", 0.6, 0.0)[:, None] * [1, 0, -1]
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y_true = np.array(CLASSES, dtype=object)[
        np.argmax(logits + rng.normal(size=(n, 3)), axis=1)]
    return {"sex": sex, "race": race}, proba, y_true


def _by_group(metric, y_true, y_pred, groups):
    frame = MetricFrame(metrics=metric, y_true=y_true, y_pred=y_pred,
                        sensitive_features=groups)
    return frame.by_group.to_numpy(dtype=float)


def test_rates_per_class_equal_fairlearn_metricframe(rows):
    sf, proba, y_true = rows
    w = Window(sf, y_score=proba, y_true=y_true, classes=CLASSES)
    r = evaluate_window(w, metrics=PARITY, min_group_size=1, min_condition_size=1,
                        confidence_level=None)
    y_pred = np.array(CLASSES, dtype=object)[np.argmax(proba, axis=1)]
    for attr in ("sex", "race"):
        per_class: dict[str, dict[str, float]] = {m: {} for m in PARITY}
        for c in CLASSES:
            t, p = (y_true == c).astype(int), (y_pred == c).astype(int)
            sel = _by_group(selection_rate, t, p, sf[attr])
            tpr = _by_group(true_positive_rate, t, p, sf[attr])
            fpr = _by_group(false_positive_rate, t, p, sf[attr])
            expected = {
                "demographic_parity_difference": sel.max() - sel.min(),
                "demographic_parity_ratio": sel.min() / sel.max(),
                "equal_opportunity_difference": tpr.max() - tpr.min(),
                "equalized_odds_difference": max(tpr.max() - tpr.min(), fpr.max() - fpr.min()),
            }
            for m, v in expected.items():
                got = r.values[(class_key(m, c), attr)]
                assert got == pytest.approx(v, abs=1e-12), (m, c, attr)
                per_class[m][c] = v
        for m, values in per_class.items():
            pick = min if m == "demographic_parity_ratio" else max
            assert r.values[(m, attr)] == pytest.approx(pick(values.values()), abs=1e-12)
            detail = r.details[(m, attr)]
            assert isinstance(detail, ClassWorst)
            assert detail.values[detail.label] == r.values[(m, attr)]


def test_hand_derived_three_classes():
    # F predicted a, b, c; M predicted a, a, b. Labels a, b, b in both groups.
    w = Window({"g": list("FFFMMM")}, y_pred=list("abcaab"), y_true=list("abbabb"),
               classes=list("abc"))
    r = evaluate_window(w, metrics=["demographic_parity_difference",
                                    "demographic_parity_ratio", "equalized_odds_difference"],
                        confidence_level=None)
    v = r.values
    # selection rates: a 1/3 vs 2/3, b 1/3 vs 1/3, c 1/3 vs 0
    assert v[("demographic_parity_difference__class_a", "g")] == pytest.approx(1 / 3)
    assert v[("demographic_parity_difference__class_b", "g")] == 0
    assert v[("demographic_parity_difference__class_c", "g")] == pytest.approx(1 / 3)
    assert v[("demographic_parity_difference", "g")] == pytest.approx(1 / 3)
    assert r.details[("demographic_parity_difference", "g")].label == "a"  # tie: first class
    # ratios: a 0.5, b 1, c 0: the worst is the smallest
    assert v[("demographic_parity_ratio__class_a", "g")] == pytest.approx(0.5)
    assert v[("demographic_parity_ratio", "g")] == 0
    assert r.details[("demographic_parity_ratio", "g")].label == "c"
    # class a: TPR 1 vs 1, FPR 0/2 vs 1/2; class b: TPR 1/2 vs 1/2, FPR 0/1 vs 0/1
    assert v[("equalized_odds_difference__class_a", "g")] == pytest.approx(0.5)
    assert v[("equalized_odds_difference__class_b", "g")] == 0
    assert v[("equalized_odds_difference", "g")] == pytest.approx(0.5)


def test_score_metrics_per_class_equal_the_binary_functions(rows):
    sf, proba, y_true = rows
    w = Window(sf, y_score=proba, y_true=y_true, classes=CLASSES)
    r = evaluate_window(w, metrics=["abcc", "madd", "calibration_difference"],
                        min_group_size=1, confidence_level=None)
    for k, c in enumerate(CLASSES):
        s = proba[:, k]
        assert r.values[(class_key("abcc", c), "sex")] == pytest.approx(
            abcc(s, sensitive_features=sf["sex"]), abs=1e-12)
        assert r.values[(class_key("madd", c), "race")] == pytest.approx(
            madd(s, sensitive_features=sf["race"]).value, abs=1e-12)
        assert r.values[(class_key("calibration_difference", c), "sex")] == pytest.approx(
            calibration_difference((y_true == c).astype(int), s, sensitive_features=sf["sex"]),
            abs=1e-12)
    worst = max(r.values[(class_key("abcc", c), "sex")] for c in CLASSES)
    assert r.values[("abcc", "sex")] == worst


def test_thresholds_govern_the_worst_class_and_each_class():
    w = Window({"g": list("FFFMMM")}, y_pred=list("abcaab"), classes=list("abc"))
    t = Threshold("demographic_parity_difference", warning=0.1, critical=0.5)
    r = evaluate_window(w, metrics=["demographic_parity_difference"], thresholds=[t],
                        confidence_level=None)
    assert r.statuses[("demographic_parity_difference", "g")] == "warning"
    assert r.statuses[("demographic_parity_difference__class_a", "g")] == "warning"
    assert r.statuses[("demographic_parity_difference__class_b", "g")] == "ok"
    assert r.status == "warning"
    assert r.flat()["fairness/demographic_parity_difference__class_c/g"] == pytest.approx(1 / 3)


def test_worst_interval_is_the_largest_bounds_of_the_classes(rows):
    sf, proba, y_true = rows
    w = Window(sf, y_score=proba, y_true=y_true, classes=CLASSES)
    r = evaluate_window(w, metrics=["demographic_parity_difference", "madd"])
    ivs = [r.intervals[(class_key("demographic_parity_difference", c), "sex")]
           for c in CLASSES]
    worst = r.intervals[("demographic_parity_difference", "sex")]
    assert worst.lower == max(iv.lower for iv in ivs)
    assert worst.upper == max(iv.upper for iv in ivs)
    assert worst.chance == max(iv.chance for iv in ivs)
    # MADD has a chance level and no bounds: so has its worst class
    m = r.intervals[("madd", "sex")]
    assert math.isnan(m.lower) and m.chance == max(
        r.intervals[(class_key("madd", c), "sex")].chance for c in CLASSES)


def test_undefined_class_is_named_and_left_out_of_the_worst():
    # no row is labelled c: its TPR is undefined in every group
    w = Window({"g": list("FFFMMM")}, y_pred=list("abcaab"), y_true=list("abbabb"),
               classes=list("abc"))
    r = evaluate_window(w, metrics=["equal_opportunity_difference"], confidence_level=None)
    assert math.isnan(r.values[("equal_opportunity_difference__class_c", "g")])
    assert r.values[("equal_opportunity_difference", "g")] == 0
    assert any("class(es) ['c'] undefined" in n for n in r.notes)


def test_predicted_class_is_the_most_probable_one():
    proba = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.2, 0.5, 0.3]])
    w = Window({"g": ["x", "y", "y"]}, y_score=proba, classes=[10, 20, 30])
    assert w.y_pred.tolist() == [10, 30, 20]
    assert w.one_vs_rest(20).y_score.tolist() == [0.2, 0.3, 0.5]


def test_missing_drop_keeps_the_score_rows_aligned():
    proba = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.2, 0.5, 0.3]])
    w = Window({"g": ["x", None, "y"]}, y_score=proba, classes=list("abc"),
               missing="drop")
    assert w.y_score.shape == (2, 3) and w.y_pred.tolist() == ["a", "b"]


def test_labels_outside_the_classes_raise():
    with pytest.raises(InvalidInputError, match=r"not among the classes"):
        Window({"g": list("FFMM")}, y_pred=[0, 1, 2, 3], classes=[0, 1, 2])
    with pytest.raises(InvalidInputError, match=r"one probability column per class"):
        Window({"g": list("FFMM")}, y_score=np.full((4, 2), 0.5), classes=[0, 1, 2])


def test_model_is_called_one_vs_rest():
    def predict(X):
        return np.where(np.asarray(X)[:, 0] > 0, "b", "a")

    w = Window({"g": list("FFMM")}, y_pred=list("abab"), X=np.array([[1.0], [-1.0]] * 2),
               predict=predict, classes=list("abc"))
    assert w.one_vs_rest("b").predict(w.X).tolist() == [1, 0, 1, 0]


def test_registry_keys_round_trip():
    assert split_class_key(class_key("abpc", "x__class_y")) == ("abpc", "x__class_y")
    assert split_class_key("unknown__class_x") == ("unknown__class_x", None)


def test_weighted_multiclass_is_each_class_weighted(rows):
    sf, proba, y_true = rows
    w = np.random.default_rng(5).integers(1, 4, len(y_true)).astype(float)
    r = evaluate_window(Window(sf, y_score=proba, y_true=y_true, classes=CLASSES,
                               sample_weight=w),
                        metrics=["demographic_parity_difference", "abcc"], min_group_size=1)
    y_pred = np.array(CLASSES, dtype=object)[np.argmax(proba, axis=1)]
    for c in CLASSES:
        # integer weights are repeated rows (fairlearn's sample_params semantics)
        reps = np.repeat(np.arange(len(w)), w.astype(int))
        sel = _by_group(selection_rate, (y_true[reps] == c).astype(int),
                        (y_pred[reps] == c).astype(int), sf["sex"][reps])
        assert r.values[(class_key("demographic_parity_difference", c), "sex")] == \
            pytest.approx(sel.max() - sel.min(), abs=1e-12)
