"""The shared report layer: what it computes, skips and explains."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fairmonitor import METRICS, InvalidInputError, Threshold, Window, evaluate_window
from fairmonitor.metrics import demographic_parity_difference, equalized_odds_difference


@pytest.fixture
def frame(rng):
    n = 600
    df = pd.DataFrame({
        "sex": rng.choice(["F", "M"], n),
        "race": rng.choice(["a", "b", "c"], n),
        "x": rng.normal(size=n),
    })
    df["label"] = (df["x"] + rng.normal(size=n) > 0).astype(int)
    df["score"] = 1 / (1 + np.exp(-(df["x"] + (df["sex"] == "M") * 0.8)))
    return df


def test_values_equal_direct_metric_calls(frame):
    w = Window.from_frame(frame, sensitive_features=["sex", "race"], label="label", score="score")
    r = evaluate_window(w, metrics=["demographic_parity_difference", "equalized_odds_difference"])
    y_pred = (frame["score"] >= 0.5).astype(int)
    assert r.values[("demographic_parity_difference", "sex")] == demographic_parity_difference(
        None, y_pred, sensitive_features=frame["sex"])
    assert r.values[("equalized_odds_difference", "sex:race")] == equalized_odds_difference(
        frame["label"], y_pred, sensitive_features=frame[["sex", "race"]])
    assert r.attributes == ("sex", "race", "sex:race")
    assert r.group_counts["sex"] == frame["sex"].value_counts().sort_index().to_dict()
    assert sum(r.group_counts["sex:race"].values()) == len(frame)


def test_default_metrics_skip_what_inputs_do_not_allow(frame):
    w = Window.from_frame(frame, sensitive_features=["sex"], prediction=None, score="score")
    r = evaluate_window(w)
    assert "equalized_odds_difference" not in r.metrics
    assert r.skipped["equalized_odds_difference"] == "labels not available"
    assert "demographic_parity_difference" in r.metrics


def test_requested_metric_without_inputs_is_nan_with_reason(frame):
    w = Window.from_frame(frame, sensitive_features=["sex"], score="score")
    r = evaluate_window(w, metrics=["equal_opportunity_difference"])
    assert math.isnan(r.values[("equal_opportunity_difference", "sex")])
    assert r.reasons[("equal_opportunity_difference", "sex")] == "labels not available"


def test_undefined_metric_reason_is_the_warning_text():
    w = Window({"g": ["a", "a", "a"]}, y_pred=[1, 0, 1])
    r = evaluate_window(w, metrics=["demographic_parity_difference"])
    assert math.isnan(r.values[("demographic_parity_difference", "g")])
    assert "single group" in r.reasons[("demographic_parity_difference", "g")]


def test_failing_metric_is_coerced_or_raised():
    w = Window({"g": ["a", "b"]}, y_pred=[0.3, 0.9])  # scores where predictions are expected
    r = evaluate_window(w, metrics=["demographic_parity_difference"])
    reason = r.reasons[("demographic_parity_difference", "g")]
    assert reason.startswith("error: `y_pred` must hold")
    with pytest.raises(InvalidInputError):
        evaluate_window(w, metrics=["demographic_parity_difference"], errors="raise")


def test_thresholds_give_statuses_and_overall(frame):
    w = Window.from_frame(frame, sensitive_features=["sex"], score="score")
    r = evaluate_window(w, metrics=["demographic_parity_difference"],
                        thresholds=[Threshold("demographic_parity_difference", warning=0.01,
                                              critical=0.99)])
    assert r.statuses == {("demographic_parity_difference", "sex"): "warning"}
    assert r.status == "warning"


def test_status_is_undefined_when_no_value_is_defined_or_a_metric_failed():
    single = evaluate_window(Window({"g": ["a", "a", "a"]}, y_pred=[1, 0, 1]),
                             metrics=["demographic_parity_difference"])
    assert single.status == "undefined"  # no threshold, but nothing to call ok either
    failed = evaluate_window(Window({"g": ["a", "b", "a", "b"]}, y_pred=[0.3, 0.9, 0.1, 0.2],
                                    y_true=[0, 1, 0, 1]),
                             metrics=["demographic_parity_difference", "abcc"])
    assert failed.status == "undefined"  # dp failed on score-valued predictions
    fine = evaluate_window(Window({"g": ["a", "b", "a", "b"]}, y_pred=[0, 1, 0, 1]),
                           metrics=["demographic_parity_difference"])
    assert fine.status == "ok"


def test_thresholds_govern_the_intersection_only_when_they_name_it():
    w = Window({"a": list("xxyyxxyy"), "b": list("ppppqqqq")}, y_pred=[1, 1, 0, 0, 1, 0, 0, 0])
    dp = "demographic_parity_difference"
    general = evaluate_window(w, metrics=[dp], thresholds=[Threshold(dp, warning=0.1)])
    # a: 0.75 vs 0 ; b: 0.5 vs 0.25 ; a:b cells 1, 0.5, 0, 0 -> 1.0
    assert general.statuses == {(dp, "a"): "warning", (dp, "b"): "warning"}
    named = evaluate_window(w, metrics=[dp], thresholds=[
        Threshold(dp, warning=0.1), Threshold(dp, critical=0.9, attribute="a:b")])
    assert named.statuses[(dp, "a:b")] == "critical"
    assert named.values[(dp, "a:b")] == 1.0


def test_missing_sensitive_values_follow_the_policy_of_each_attribute():
    dp = "demographic_parity_difference"
    sex = np.array(["F", None, "M", "M", "F", "M"], dtype=object)
    age = np.array([20.0, 30.0, np.nan, 20.0, 30.0, 30.0])
    y_pred = np.array([1, 1, 0, 1, 0, 0])
    w = Window({"sex": sex, "age": age}, y_pred=y_pred, missing={"sex": "group", "age": "drop"})
    assert w.n_rows == 5  # row 2 (age missing) left every input
    r = evaluate_window(w, metrics=[dp], intersection=False)
    assert r.group_counts["sex"] == {"F": 2, "M": 2, "missing": 1}
    # sex on kept rows: F [1, 0] 0.5, M [1, 0] 0.5, missing [1] 1.0 -> 0.5
    assert r.values[(dp, "sex")] == 0.5
    # age on kept rows: 20 [1, 1] 1.0, 30 [1, 0, 0] 1/3 -> 2/3
    assert r.values[(dp, "age")] == pytest.approx(2 / 3)
    assert "sensitive attribute 'age': 1 row(s) with a missing value dropped from the window" \
        in r.notes
    assert "sensitive attribute 'sex': 1 row(s) with a missing value grouped as 'missing'" \
        in r.notes
    with pytest.raises(InvalidInputError, match="'sex' has 1 missing values"):
        Window({"sex": sex}, y_pred=y_pred)  # "raise" is the Window's default


def test_small_groups_are_noted(frame):
    df = frame.copy()
    df.loc[:2, "race"] = "rare"
    w = Window.from_frame(df, sensitive_features=["race"], score="score")
    r = evaluate_window(w, metrics=["demographic_parity_difference"], min_group_size=10)
    assert any("'rare' (3 rows)" in n for n in r.notes)
    assert r.group_counts["race"]["rare"] == 3


def test_unknown_metric_lists_registered():
    w = Window({"g": ["a", "b"]}, y_pred=[0, 1])
    with pytest.raises(InvalidInputError, match="unknown metric 'dp'; registered metrics are: "
                                                "demographic_parity_difference"):
        evaluate_window(w, metrics=["dp"])


def test_missing_column_lists_available(frame):
    with pytest.raises(InvalidInputError,
                       match=r"column\(s\) \['gender'\] not in the data; available columns"):
        Window.from_frame(frame, sensitive_features=["gender"])


def test_y_pred_derived_from_scores_with_ge(frame):
    w = Window({"g": ["a", "b"]}, y_score=[0.5, 0.49])
    assert w.y_pred.tolist() == [1, 0]


def test_flat_keys_are_stable(frame):
    w = Window.from_frame(frame, sensitive_features=["sex", "race"], score="score")
    r = evaluate_window(w, metrics=["demographic_parity_ratio"])
    assert sorted(r.flat()) == ["fairness/demographic_parity_ratio/race",
                                "fairness/demographic_parity_ratio/sex",
                                "fairness/demographic_parity_ratio/sex:race"]


def test_registry_specs_are_consistent():
    for name, spec in METRICS.items():
        assert spec.name == name
        assert spec.direction in ("lower_is_fairer", "higher_is_fairer")
        assert spec.lower <= spec.ideal <= spec.upper
        assert spec.help.endswith(".") and len(spec.help) <= 160
        assert name.replace("_", "").isalnum() and name == name.lower()


def test_invalid_scores_void_the_predictions_derived_from_them():
    # issue 15 item 7: with only a score column, NaN/inf scores were thresholded (NaN -> 0,
    # inf -> 1) into demographic parity's input, which read 0.5 while ABCC said NaN
    window = Window({"g": ["a", "a", "b", "b"]}, y_score=[0.9, np.nan, 0.9, np.inf])
    report = evaluate_window(window, metrics=["demographic_parity_difference", "abcc"])
    dp, abcc = (report.values[(m, "g")] for m in ("demographic_parity_difference", "abcc"))
    assert np.isnan(dp) and np.isnan(abcc)
    reason = report.reasons[("demographic_parity_difference", "g")]
    assert reason == report.reasons[("abcc", "g")] and "y_score" in reason
    # explicit predictions are the user's own: they stay valid next to invalid scores
    explicit = Window({"g": ["a", "a", "b", "b"]}, y_pred=[1, 0, 1, 1],
                      y_score=[0.9, np.nan, 0.9, np.inf])
    assert evaluate_window(explicit, metrics=["demographic_parity_difference"]).values[
        ("demographic_parity_difference", "g")] == 0.5
