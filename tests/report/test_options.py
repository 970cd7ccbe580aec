"""Issue 26 items 1-3: the registry carries what a metric can do, one EvaluationOptions, one
config reader for the settings the evaluator and the monitor share."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import numpy as np
import pytest

from fairmonitor.exceptions import ConfigError
from fairmonitor.metrics._groups import MISSING_POLICIES
from fairmonitor.monitor.config import load_config
from fairmonitor.report import Threshold, Window, evaluate_summary, evaluate_window, registry
from fairmonitor.report import evaluate as evaluate_module
from fairmonitor.report import intervals as intervals_module
from fairmonitor.report.evaluate import SUMMARY_METRICS, WEIGHTED_METRICS
from fairmonitor.report.options import EvaluationOptions
from fairmonitor.summaries import summarize

DP, EO, EOPP, PP = ("demographic_parity_difference", "equalized_odds_difference",
                    "equal_opportunity_difference", "predictive_parity_difference")

MONITOR = """
models:
  m:
    source: {kind: sql, url: "sqlite://"}
    sensitive_features: [sex, race]
    prediction: prediction
    label: label
    window: 1h
    metrics: [demographic_parity_difference, equalized_odds_difference]
"""


def _window(seed: int = 0, n: int = 400) -> Window:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    y = rng.integers(0, 2, n)
    # group F selected more often: a real gap to read
    pred = (rng.random(n) < np.where(sex == "F", 0.6, 0.4)).astype(int)
    return Window({"sex": sex}, y_pred=pred, y_true=y)


# --- item 1: the registry's capabilities ----------------------------------------------------

def test_the_former_name_tuples_are_derived_from_the_registry():
    # the sets the hand-written tuples held before issue 26
    assert {DP, "demographic_parity_ratio", EO, EOPP, PP,
                               "calibration_difference", "abcc", "abpc", "madd"} == SUMMARY_METRICS
    # issue 29: the regression metrics (but MADD) are weighted means and weighted CDFs
    regression = {"mae_difference", "rmse_difference", "mean_residual_difference", "mae_ratio",
                  "rmse_ratio", "bounded_group_loss", "prediction_ks_distance",
                  "prediction_wasserstein", "prediction_wasserstein_scaled"}
    assert {DP, "demographic_parity_ratio", EO, EOPP, PP, "abcc",
                                "calibration_difference"} | regression == WEIGHTED_METRICS
    for spec in registry.METRICS.values():
        assert (spec.summary is None) == (spec.from_summary is None) == spec.needs_rows
        assert set(spec.conditions_on) <= set(registry.CONDITIONS)
    assert registry.METRICS[EO].conditions_on == ("positives", "negatives")


def test_a_new_metric_is_one_registry_entry(monkeypatch):
    """A spec that copies DP's capabilities under a new name is evaluated from the summary,
    weighted and given DP's interval, with no other file changed."""
    twin = dataclasses.replace(registry.METRICS[DP], name="selection_gap_twin")
    table = MappingProxyType({**registry.METRICS, twin.name: twin})
    for module in (registry, evaluate_module, intervals_module):
        monkeypatch.setattr(module, "METRICS", table)
    window = _window()
    report = evaluate_window(window, metrics=[DP, twin.name])
    key, twin_key = (DP, "sex"), (twin.name, "sex")
    assert report.values[twin_key] == report.values[key] > 0
    assert report.intervals[twin_key] == report.intervals[key]
    summary = summarize(window.sensitive_features, y_pred=window.y_pred)
    assert evaluate_summary(summary, metrics=[twin.name]).values[twin_key] == \
        report.values[key]


# --- item 2: one EvaluationOptions ----------------------------------------------------------

def test_evaluation_options_give_the_report_the_keywords_give():
    window = _window(1)
    thresholds = [Threshold(DP, warning=0.05, critical=0.5)]
    by_keywords = evaluate_window(window, metrics=[DP, EO], min_group_size=30,
                                  min_condition_size=10, thresholds=thresholds,
                                  confidence_level=0.9)
    options = EvaluationOptions(min_group_size=30, min_condition_size=10,
                                thresholds=thresholds, confidence_level=0.9)
    by_object = evaluate_window(window, metrics=[DP, EO], evaluation=options)
    assert by_object.values == by_keywords.values
    assert by_object.statuses == by_keywords.statuses == {(DP, "sex"): "warning"}
    assert by_object.intervals == by_keywords.intervals


def test_a_keyword_given_wins_over_the_options_object():
    window = _window(2, n=60)
    options = EvaluationOptions(min_group_size=1000)  # every group left out: NaN
    assert np.isnan(evaluate_window(window, metrics=[DP], evaluation=options)
                    .values[(DP, "sex")])
    value = evaluate_window(window, metrics=[DP], evaluation=options, min_group_size=1
                            ).values[(DP, "sex")]
    assert value == evaluate_window(window, metrics=[DP]).values[(DP, "sex")]


def test_the_monitor_builds_its_options_once_from_the_config():
    cfg = load_config(MONITOR + "    decision_threshold: 0.7\n    confidence_level: 0.9\n"
                      ).models["m"]
    assert cfg.evaluation is cfg.evaluation  # built once
    assert cfg.evaluation == EvaluationOptions(
        min_group_size=30, min_condition_size=10, intersection=True, thresholds=(),
        options={}, threshold=0.7, confidence_level=0.9)
    assert cfg.evaluation.replace(rng=3).rng == 3 and cfg.evaluation.rng is None


def test_bad_errors_option_is_rejected():
    with pytest.raises(Exception, match="errors"):
        EvaluationOptions(errors="ignore")  # type: ignore[arg-type]


# --- item 3: one reader for the shared settings ---------------------------------------------

def test_the_evaluator_and_the_monitor_read_the_shared_settings_alike():
    from fairmonitor_mlflow.config import parse_config

    shared = {"thresholds": {DP: [{"warning": 0.1}, {"critical": 0.3, "attribute": "race"}]},
              "missing": {"race": "drop"}, "confidence_level": 0.9, "min_group_size": 20,
              "options": {"abcc": {"agg": "mean"}}}
    evaluator = parse_config({"sensitive_features": ["sex", "race"], **shared})
    yaml_lines = ("    thresholds:\n"
                  "      demographic_parity_difference:\n"
                  "        - {warning: 0.1}\n"
                  "        - {critical: 0.3, attribute: race}\n"
                  "    missing: {race: drop}\n    confidence_level: 0.9\n"
                  "    min_group_size: 20\n    options: {abcc: {agg: mean}}\n")
    monitor = load_config(MONITOR + yaml_lines).models["m"]
    assert evaluator.thresholds == monitor.thresholds == (
        Threshold(DP, 0.1, None, "upper"), Threshold(DP, None, 0.3, "upper", "race"))
    assert dict(evaluator.missing) == dict(monitor.missing) == {"sex": "group", "race": "drop"}
    for field in ("min_group_size", "min_condition_size", "confidence_level", "options",
                  "thresholds", "intersection"):
        assert getattr(evaluator.evaluation, field) == getattr(monitor.evaluation, field)
    assert evaluator.evaluation.min_condition_size == 10


def test_the_same_mistake_gives_the_same_message_in_both():
    from fairmonitor_mlflow.config import parse_config

    with pytest.raises(ConfigError) as offline:
        parse_config({"sensitive_features": ["sex"], "confidence_level": 2,
                      "thresholds": {DP: {"warning": 0.3, "critical": 0.1}}})
    with pytest.raises(ConfigError) as online:
        load_config(MONITOR + "    confidence_level: 2\n    thresholds:\n"
                              "      demographic_parity_difference: {warning: 0.3, "
                              "critical: 0.1}\n")
    expected = ["thresholds.demographic_parity_difference: with bound 'upper' warning must "
                "be <= critical; got warning=0.3, critical=0.1",
                "confidence_level: must be a number in (0, 1), e.g. 0.95, or null (no "
                "intervals); got 2"]
    assert list(offline.value.errors) == expected
    assert list(online.value.errors) == [f"models.m.{e}" for e in expected]


def test_the_evaluator_reports_every_problem_at_once():
    from fairmonitor_mlflow.config import parse_config

    with pytest.raises(ConfigError) as info:
        parse_config({"sensitive_features": ["sex"], "threshold": 2, "rng": "x",
                      "missing": "keep", "options": {"madd": {"bins": 3}}})
    assert info.value.errors == (
        "threshold: must be a number in [0.0, 1.0]; got 2",
        "options.madd.bins: unknown key 'bins'; allowed keys: " + ", ".join(
            registry_keywords("madd")),
        "rng: must be an integer seed, a numpy Generator or None; got 'x'",
        f"missing: must be one of {list(MISSING_POLICIES)} or a mapping {{attribute: policy}}; "
        "got 'keep'",
    )
    assert str(info.value).startswith("evaluator_config has 4 errors:\n  threshold: ")


def registry_keywords(metric: str) -> list[str]:
    import inspect

    params = inspect.signature(registry.METRICS[metric].func).parameters
    return sorted(p for p, v in params.items()
                  if v.kind == v.KEYWORD_ONLY and p != "sensitive_features")
