"""Unit tests of the evaluator's config, window building and metric keys (no tracking store)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fairmonitor_mlflow import parse_config, validation_thresholds
from fairmonitor_mlflow.tracking import result_metrics, safe_name, status_tags, step_metrics
from fairmonitor_mlflow.window import build_window

from fairmonitor import METRICS, Threshold, Window, evaluate_window
from fairmonitor.exceptions import ConfigError, InvalidInputError


def dataset(frame: pd.DataFrame, target: str | None = "y", predictions: str | None = None
            ) -> Any:
    """A stand-in for MLflow's EvaluationDataset: the fields evaluators read."""
    features = frame.drop(columns=[c for c in (target, predictions) if c])
    return SimpleNamespace(
        features_data=features, feature_names=list(features.columns),
        labels_data=None if target is None else frame[target].to_numpy(), targets_name=target,
        predictions_data=None if predictions is None else frame[predictions].to_numpy(),
        predictions_name=predictions)


FRAME = pd.DataFrame({"x": [0.1, 0.4, 0.6, 0.9, 0.2, 0.8], "sex": list("ffmmfm"),
                      "y": [0, 1, 1, 1, 0, 0], "pred": [0, 1, 1, 1, 1, 0]})


# --- config -------------------------------------------------------------------------------

def test_defaults() -> None:
    cfg = parse_config({"sensitive_features": ["sex"]})
    assert (cfg.metrics, cfg.pos_label, cfg.threshold, cfg.min_group_size, cfg.rng) == (
        None, 1, 0.5, 30, 0)
    assert (cfg.all_metrics, cfg.missing) == (False, "group")
    assert parse_config({"sensitive_features": ["sex"], "metrics": "all"}).all_metrics
    assert cfg.robustness_enabled is None


def test_sensitive_features_are_required() -> None:
    with pytest.raises(ConfigError, match="'sensitive_features' is required"):
        parse_config({"metrics": ["demographic_parity_difference"]})


def test_unknown_metric_lists_the_registered_ones() -> None:
    with pytest.raises(ConfigError, match="metrics: unknown metric 'dpd'; registered metrics "
                                          "are: demographic_parity_difference, "):
        parse_config({"sensitive_features": ["sex"], "metrics": ["dpd"]})


def test_threshold_keys_are_checked() -> None:
    # one error style with the monitor (issue 26 item 3): the key path, the allowed keys
    with pytest.raises(ConfigError, match=r"thresholds.demographic_parity_difference.critcal: "
                                          r"unknown key 'critcal'; allowed keys: warning, "
                                          r"critical, bound, attribute"):
        parse_config({"sensitive_features": ["sex"],
                      "thresholds": {"demographic_parity_difference": {"critcal": 0.1}}})


def test_threshold_bound_defaults_to_the_metric_direction() -> None:
    cfg = parse_config({"sensitive_features": ["sex"], "thresholds": {
        "demographic_parity_ratio": {"warning": 0.9, "critical": 0.8}}})
    assert cfg.thresholds == (Threshold("demographic_parity_ratio", 0.9, 0.8, "lower"),)


def test_inverted_threshold_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="warning must be <= critical"):
        parse_config({"sensitive_features": ["sex"], "thresholds": {
            "demographic_parity_difference": {"warning": 0.3, "critical": 0.1}}})


def test_robustness_keys_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"robustness.repeats: unknown key 'repeats'; "
                                          r"allowed keys: .*levels, .*n_repeats"):
        parse_config({"sensitive_features": ["sex"], "robustness": {"repeats": 3}})


def test_robustness_levels_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="robustness.levels: must be a non-empty list"):
        parse_config({"sensitive_features": ["sex"], "robustness": {"levels": [0.1, 0]}})


def test_robustness_false_disables_it() -> None:
    assert parse_config({"sensitive_features": ["sex"], "robustness": False}
                        ).robustness_enabled is False


def test_options_are_checked_against_the_metric_signature() -> None:
    with pytest.raises(ConfigError, match=r"options.demographic_parity_difference.bandwidth: "
                                          r"unknown key 'bandwidth'; allowed keys: "):
        parse_config({"sensitive_features": ["sex"],
                      "options": {"demographic_parity_difference": {"bandwidth": 0.1}}})


@pytest.mark.parametrize(("key", "value", "message"), [
    ("threshold", 1.5, r"threshold: must be a number in \[0.0, 1.0\]; got 1.5"),
    ("min_group_size", 0, "min_group_size: must be a positive integer; got 0"),
    ("model_uses_sensitive", "yes", "model_uses_sensitive: must be True or False"),
    ("rng", "seed", "rng: must be an integer seed"),
    ("pos_label", [1], "pos_label: must be a single class label"),
    ("features", [], "features: must be a non-empty list"),
])
def test_bad_values_name_the_key(key: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"sensitive_features": ["sex"], key: value})


# --- validation thresholds -------------------------------------------------------------------

def test_validation_thresholds_cover_each_attribute_and_the_intersection_only_if_named() -> None:
    cfg = {"sensitive_features": ["sex", "race"], "thresholds": {
        "demographic_parity_ratio": {"warning": 0.9, "critical": 0.8}}}
    thresholds = validation_thresholds(cfg)
    assert list(thresholds) == ["fairness/demographic_parity_ratio/sex",
                                "fairness/demographic_parity_ratio/race"]
    assert (thresholds["fairness/demographic_parity_ratio/race"].threshold,
            thresholds["fairness/demographic_parity_ratio/race"].greater_is_better) == (0.8, True)
    named = validation_thresholds({**cfg, "thresholds": {"demographic_parity_ratio": [
        {"critical": 0.8}, {"critical": 0.5, "attribute": "sex:race"}]}})
    assert {k: v.threshold for k, v in named.items()} == {
        "fairness/demographic_parity_ratio/sex": 0.8,
        "fairness/demographic_parity_ratio/race": 0.8,
        "fairness/demographic_parity_ratio/sex:race": 0.5}


def test_per_attribute_thresholds_are_accepted_as_in_the_monitor() -> None:
    cfg = parse_config({"sensitive_features": ["sex", "race"], "thresholds": {
        "demographic_parity_difference": [{"warning": 0.1},
                                          {"critical": 0.3, "attribute": "race"}]}})
    assert cfg.thresholds == (
        Threshold("demographic_parity_difference", 0.1, None, "upper"),
        Threshold("demographic_parity_difference", None, 0.3, "upper", "race"))
    with pytest.raises(ConfigError, match=r"thresholds.demographic_parity_difference.attribute: "
                                          r"must be one of \['sex', 'race', 'sex:race'\]; "
                                          r"got 'age'"):
        parse_config({"sensitive_features": ["sex", "race"], "thresholds": {
            "demographic_parity_difference": {"warning": 0.1, "attribute": "age"}}})


def test_validation_thresholds_at_warning_level_skip_thresholds_without_one() -> None:
    cfg = {"sensitive_features": ["sex"], "thresholds": {
        "demographic_parity_difference": {"critical": 0.2},
        "equalized_odds_difference": {"warning": 0.1}}}
    assert list(validation_thresholds(cfg, level="warning")) == [
        "fairness/equalized_odds_difference/sex"]


# --- metric keys -----------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "safe"), [
    (">=25", "ge25"), ("<25", "lt25"), ("a/b", "a_b"), ("..", "_"), ("x<=1", "xle1"),
    ("white:female", "white:female"), ("é", "é"), ("", "_"),
])
def test_safe_name(name: str, safe: str) -> None:
    assert safe_name(name) == safe


def test_result_metrics_equal_flat_for_safe_names() -> None:
    report = evaluate_window(Window({"g": list("aabb")}, y_pred=[1, 0, 0, 0]),
                             metrics=["demographic_parity_difference"])
    assert result_metrics(report) == {**report.flat(), **report.flat_intervals(),
                                      "fairness/group_count/g/a": 2.0,
                                      "fairness/group_count/g/b": 2.0}


def test_group_labels_made_equal_by_safe_name_stay_distinct() -> None:
    report = evaluate_window(Window({"g": ["a/b", "a_b", "a_b"]}, y_pred=[1, 0, 0]),
                             metrics=["demographic_parity_difference"])
    counts = {k: v for k, v in result_metrics(report).items() if "group_count" in k}
    assert counts == {"fairness/group_count/g/a_b": 1.0, "fairness/group_count/g/a_b_2": 2.0}


def test_step_metrics_follow_the_levels() -> None:
    detail = SimpleNamespace(levels=(0.5, 2.0), ratios={"dp": np.array([0.9, 1.2])},
                             gaps={"dp": np.array([0.1, 0.2])},
                             gap_se={"dp": np.array([0.01, 0.02])},
                             flip_rate=np.array([0.05, 0.3]))
    report = SimpleNamespace(details={("robustness_ratio_max", "sex"): detail})
    assert step_metrics(report) == [  # type: ignore[arg-type]
        ("fairness/robustness_level/sex", 0.5, 0), ("fairness/robustness_level/sex", 2.0, 1),
        ("fairness/robustness_ratio/dp/sex", 0.9, 0), ("fairness/robustness_ratio/dp/sex", 1.2, 1),
        ("fairness/robustness_gap/dp/sex", 0.1, 0), ("fairness/robustness_gap/dp/sex", 0.2, 1),
        ("fairness/robustness_gap_se/dp/sex", 0.01, 0),
        ("fairness/robustness_gap_se/dp/sex", 0.02, 1),
        ("fairness/robustness_flip_rate/sex", 0.05, 0),
        ("fairness/robustness_flip_rate/sex", 0.3, 1),
    ]


def test_status_tags_name_the_breaching_keys() -> None:
    report = evaluate_window(
        Window({"g": list("aabb")}, y_pred=[1, 0, 0, 0]),
        metrics=["demographic_parity_difference", "demographic_parity_ratio"],
        thresholds=[Threshold("demographic_parity_difference", warning=0.4, critical=0.6)])
    assert status_tags(report, "on") == {
        "fairness.status": "warning",
        "fairness.breaches": "fairness/demographic_parity_difference/g",
        "fairness.robustness": "on", "fairness.failures": "none"}
    assert status_tags(report, "on", ["plots/x.png: ValueError: bad"])["fairness.failures"] == (
        "plots/x.png: ValueError: bad")


# --- window building -------------------------------------------------------------------------

class ProbaModel:
    """A fake pyfunc-unwrappable estimator: labels 'no'/'yes', probabilities for both."""

    classes_ = np.array(["yes", "no"])  # deliberately not sorted: column 0 is 'yes'

    def get_raw_model(self) -> ProbaModel:
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        assert list(X.columns) == ["x"], "sensitive columns must not reach the model"
        return np.where(X["x"].to_numpy() > 0.5, "yes", "no")

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        p = X["x"].to_numpy()
        return np.column_stack([p, 1 - p])


def test_labels_and_scores_follow_pos_label() -> None:
    frame = FRAME.drop(columns="pred").assign(y=np.where(FRAME["y"] == 1, "yes", "no"))
    built = build_window(dataset(frame), ProbaModel(),
                         parse_config({"sensitive_features": ["sex"], "pos_label": "yes"}))
    w = built.window
    assert w.y_pred.tolist() == [0, 0, 1, 1, 0, 1]
    assert w.y_true.tolist() == [0, 1, 1, 1, 0, 0]
    assert w.y_score.tolist() == FRAME["x"].tolist()  # the 'yes' column of predict_proba
    assert built.sources["y_score"] == "model.predict_proba"


def test_pos_label_not_among_string_labels_is_an_error() -> None:
    frame = FRAME.assign(y=np.where(FRAME["y"] == 1, "yes", "no"))
    with pytest.raises(ConfigError, match=r"pos_label: 1 is not among the values of the "
                                          r"targets \['no', 'yes'\]"):
        build_window(dataset(frame), None, parse_config({"sensitive_features": ["sex"],
                                                         "score_column": "x"}))


def test_missing_sensitive_column_lists_the_available_ones() -> None:
    with pytest.raises(ConfigError, match=r"sensitive_features: column 'race' is not in the "
                                          r"evaluation data; available columns: \['x', 'sex', "
                                          r"'y', 'pred'\]"):
        build_window(dataset(FRAME, predictions="pred"), None,
                     parse_config({"sensitive_features": ["race"]}))


def test_static_predictions_and_score_column_make_a_window_without_model() -> None:
    built = build_window(dataset(FRAME, predictions="pred"), None,
                         parse_config({"sensitive_features": ["sex"], "score_column": "x"}))
    assert built.robust_window is None
    assert built.window.y_pred.tolist() == FRAME["pred"].tolist()
    assert built.window.X is None  # x is the score column, sex is sensitive: no features


def test_scores_out_of_range_in_the_score_column_are_an_error() -> None:
    with pytest.raises(InvalidInputError, match="score_column 'x'. must lie in"):
        build_window(dataset(FRAME.assign(x=FRAME["x"] * 3), predictions="pred"), None,
                     parse_config({"sensitive_features": ["sex"], "score_column": "x"}))


def test_no_model_no_predictions_no_scores_is_an_error() -> None:
    with pytest.raises(ConfigError, match="the evaluation has no model and no predictions"):
        build_window(dataset(FRAME), None, parse_config({"sensitive_features": ["sex"]}))


def test_requesting_a_model_metric_without_a_model_says_why() -> None:
    name = next(n for n, s in METRICS.items() if "predict" in s.inputs)
    with pytest.raises(ConfigError, match=f"metrics: '{name}' needs a model to call, which this "
                                          "evaluation does not have; no model to call"):
        build_window(dataset(FRAME, predictions="pred"), None,
                     parse_config({"sensitive_features": ["sex"], "metrics": [name]}))


def test_more_than_two_classes_need_an_explicit_pos_label() -> None:
    with pytest.raises(ConfigError, match=r"found 3 classes in the targets \[0, 1, 2\]"):
        build_window(dataset(FRAME.assign(y=[0, 1, 2, 1, 0, 2]), predictions="pred"), None,
                     parse_config({"sensitive_features": ["sex"]}))


def test_features_choose_the_columns_of_feature_space_metrics() -> None:
    frame = FRAME.assign(z=[1, 2, 3, 4, 5, 6])
    built = build_window(dataset(frame, predictions="pred"), None,
                         parse_config({"sensitive_features": ["sex"], "features": ["z"]}))
    assert list(built.window.X.columns) == ["z"]


def test_a_model_using_sensitive_columns_gets_them_frozen_under_noise() -> None:
    seen = []

    def model(X: pd.DataFrame) -> np.ndarray:
        seen.append(list(X.columns))
        return (X["x"].to_numpy() > 0.5).astype(int)

    wrapped = SimpleNamespace(predict=model)  # like MLflow's wrapper of a plain callable
    built = build_window(dataset(FRAME.drop(columns="pred")), wrapped,
                         parse_config({"sensitive_features": ["sex"],
                                       "model_uses_sensitive": True}))
    assert seen == [["x", "sex"]]
    assert list(built.window.X.columns) == ["x"]  # feature-space metrics never see sex
    assert list(built.robust_window.X.columns) == ["x", "sex"]
    assert built.robust_options == {"column_kinds": {"sex": "frozen"}}


def test_exact_hfm_on_a_large_window_is_announced_with_the_fix(
        caplog: pytest.LogCaptureFixture) -> None:
    from fairmonitor_mlflow.reporting import _announce

    n = 20_001
    frame = pd.DataFrame({"x": np.arange(n, dtype=float), "sex": np.resize(["f", "m"], n),
                          "y": np.resize([0, 1, 1], n), "pred": np.resize([1, 0], n)})
    for config, warned in ((["hfm"], True), (["demographic_parity_difference"], False)):
        cfg = parse_config({"sensitive_features": ["sex"], "metrics": config})
        built = build_window(dataset(frame, predictions="pred"), None, cfg)
        caplog.clear()
        with caplog.at_level("INFO", logger="fairmonitor_mlflow"):
            _announce(built, cfg, list(config), [])
        assert "computing 1 metric(s) on 20001 rows, 1 attribute(s)" in caplog.text
        assert ("exact HFM on 20001 rows" in caplog.text) is warned
        assert ("{'hfm': {'method': 'sampled'}}" in caplog.text) is warned


def test_a_budget_threshold_is_accepted_and_compares_the_bound_in_one_evaluation():
    cfg = parse_config({"sensitive_features": ["sex"], "thresholds": {
        "demographic_parity_difference": {"warning": 0.1, "compare": "budget"}}})
    (t,) = cfg.thresholds
    assert t.compare == "budget" and t.compared(0.12, 0.04, 0.2) == 0.04
