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
        y_pred, sensitive_features=frame["sex"])
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
    assert r.reasons[("demographic_parity_difference", "g")].startswith("error: `y_pred` must hold")
    with pytest.raises(InvalidInputError):
        evaluate_window(w, metrics=["demographic_parity_difference"], errors="raise")


def test_thresholds_give_statuses_and_overall(frame):
    w = Window.from_frame(frame, sensitive_features=["sex"], score="score")
    r = evaluate_window(w, metrics=["demographic_parity_difference"],
                        thresholds=[Threshold("demographic_parity_difference", warning=0.01,
                                              critical=0.99)])
    assert r.statuses == {("demographic_parity_difference", "sex"): "warning"}
    assert r.status == "warning"


def test_small_groups_are_noted(frame):
    df = frame.copy()
    df.loc[:2, "race"] = "rare"
    w = Window.from_frame(df, sensitive_features=["race"], score="score")
    r = evaluate_window(w, metrics=["demographic_parity_difference"], min_group_size=10)
    assert any("'rare' (3 rows)" in n for n in r.notes)
    assert r.group_counts["race"]["rare"] == 3


def test_unknown_metric_lists_registered():
    w = Window({"g": ["a", "b"]}, y_pred=[0, 1])
    with pytest.raises(InvalidInputError, match="unknown metric 'dp'; registered metrics are: demographic_parity_difference"):
        evaluate_window(w, metrics=["dp"])


def test_missing_column_lists_available(frame):
    with pytest.raises(InvalidInputError, match=r"column\(s\) \['gender'\] not in the data; available columns"):
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
