"""Scenario suite of the ``fairness`` evaluator (issue 13): what a data scientist meets first.

Fair and unfair models, single-valued and missing-valued attributes, URI / pyfunc / callable /
static predictions, predict-only, regressors and multiclass. Every scenario returns its metrics
and logs them; every failure mode has a clear message. Small synthetic data keeps it fast; the
expected values are computed by calling the metric functions directly.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import mlflow
import numpy as np
import pandas as pd
import pytest
from fairmonitor_mlflow import ArtifactWarning
from mlflow.tracking import MlflowClient

from fairmonitor.metrics import demographic_parity_difference

Store = Any
ROBUSTNESS = {"levels": [0.1, 1.0], "n_repeats": 2}
FAST = ["demographic_parity_difference", "equalized_odds_difference", "abcc"]


def evaluate(model: Any, data: Any, config: dict[str, Any], *, model_type: str = "classifier",
             **kwargs: Any) -> Any:
    with mlflow.start_run():
        return mlflow.models.evaluate(model, data, model_type=model_type,
                                      evaluators=["fairness"],
                                      evaluator_config={"fairness": config}, **kwargs)


def tags(result: Any) -> dict[str, str]:
    return mlflow.get_run(result.run_id).data.tags


def synthetic(n: int = 600, seed: int = 0, biased: bool = True) -> pd.DataFrame:
    """Two numeric inputs, a binary sensitive column that shifts x1 when ``biased``."""
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b"], size=n)
    x1 = rng.normal(size=n) + (0.8 * (group == "b") if biased else 0.0)
    x2 = rng.normal(size=n)
    label = (x1 + 0.5 * x2 + rng.normal(scale=0.5, size=n) > 0.3).astype(int)
    return pd.DataFrame({"x1": x1, "x2": x2, "group": group, "label": label})


@pytest.fixture(scope="module")
def logreg(mlflow_store: Store) -> Any:
    from sklearn.linear_model import LogisticRegression

    data = synthetic()
    clf = LogisticRegression().fit(data[["x1", "x2"]], data["label"])
    with mlflow.start_run(run_name="train-synthetic"):
        info = mlflow.sklearn.log_model(clf, name="model", pip_requirements=["scikit-learn"],
                                        input_example=data[["x1", "x2"]].head(3))
    return clf, data, info.model_uri


# --- item 1: no artifact may cost the metrics -------------------------------------------------

def test_robustness_plot_of_only_infinite_ratios_is_saved(tmp_path: Any) -> None:
    # a fair model: the clean gap is below the floor, every ratio is +inf (or NaN); the log
    # axis used to raise "Data cannot be log-scaled" while saving and fail the evaluation
    from types import SimpleNamespace

    from fairmonitor_mlflow import plots

    detail = SimpleNamespace(levels=np.array([0.1, 1.0]),
                             ratios={"demographic_parity_difference": np.array([np.inf, np.nan])},
                             gaps={"demographic_parity_difference": np.array([0.01, 0.02])},
                             gap_se={"demographic_parity_difference": np.array([0.01, 0.01])})
    path = tmp_path / "r.png"
    plots.save_png(plots.robustness_curve("sex", detail), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_single_valued_attribute_by_uri_logs_every_metric_and_is_undefined(logreg: Any) -> None:
    clf, data, uri = logreg
    data = data.assign(group="a")  # one group: every between-group metric is undefined
    result = evaluate(uri, data, {"sensitive_features": ["group"], "robustness": ROBUSTNESS,
                                  "metrics": [*FAST, "robustness_ratio_max"]}, targets="label")
    assert set(result.metrics) >= {f"fairness/{m}/group" for m in FAST}
    assert all(np.isnan(result.metrics[f"fairness/{m}/group"]) for m in FAST)
    logged = mlflow.get_run(result.run_id).data.metrics
    assert "fairness/demographic_parity_difference/group" in logged
    assert tags(result)["fairness.status"] == "undefined"  # never "ok" when nothing is defined
    assert tags(result)["fairness.failures"] == "none"


def test_a_failing_plot_costs_no_metric_and_is_named_in_a_tag(
        logreg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from fairmonitor_mlflow import plots

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk full")

    monkeypatch.setattr(plots, "score_cdfs", broken)
    clf, data, uri = logreg
    with warnings.catch_warnings(record=True) as caught:  # mlflow's own warnings too
        warnings.simplefilter("always")
        result = evaluate(uri, data, {"sensitive_features": ["group"], "metrics": FAST},
                          targets="label")
    ours = [str(w.message) for w in caught if issubclass(w.category, ArtifactWarning)]
    assert len(ours) == 1 and "score_cdf__group.png: RuntimeError: disk full" in ours[0]
    expected = demographic_parity_difference(None, clf.predict(data[["x1", "x2"]]),
                                             sensitive_features=data["group"])
    assert result.metrics["fairness/demographic_parity_difference/group"] == expected
    assert mlflow.get_run(result.run_id).data.metrics[
        "fairness/demographic_parity_difference/group"] == expected
    failures = tags(result)["fairness.failures"]
    assert "plots/fairness_score_cdf__group.png: RuntimeError: disk full" in failures
    names = {a.path for a in MlflowClient().list_artifacts(result.run_id, "fairness")}
    assert {"fairness/fairness_report.html", "fairness/fairness_groups.csv"} <= names


# --- item 3: missing sensitive values ---------------------------------------------------------

@pytest.mark.parametrize("column", [
    pd.Series(["a", None, "b"] * 200, dtype=object),
    pd.Series([1.0, np.nan, 2.0] * 200),
    pd.Series([True, pd.NA, False] * 200, dtype="boolean"),
], ids=["object-None", "float-NaN", "boolean-NA"])
def test_missing_sensitive_values_are_their_own_group_by_default(logreg: Any,
                                                                 column: pd.Series) -> None:
    clf, data, uri = logreg
    data = data.assign(group=column.to_numpy())
    result = evaluate(uri, data, {"sensitive_features": ["group"], "metrics": FAST},
                      targets="label")
    assert result.metrics["fairness/group_count/group/missing"] == 200.0
    assert result.metrics["fairness/missing_count/group"] == 200.0
    pred = clf.predict(data[["x1", "x2"]])
    labels = np.where(column.isna().to_numpy(), "missing", column.astype(str).to_numpy())
    assert result.metrics["fairness/demographic_parity_difference/group"] == pytest.approx(
        demographic_parity_difference(None, pred, sensitive_features=labels))


def test_missing_sensitive_values_can_be_dropped_and_counted(logreg: Any) -> None:
    clf, data, uri = logreg
    data = data.assign(group=pd.Series(["a", None, "b"] * 200, dtype=object).to_numpy())
    result = evaluate(uri, data, {"sensitive_features": ["group"], "metrics": FAST,
                                  "missing": "drop"}, targets="label")
    kept = data[data["group"].notna()]
    assert result.metrics["fairness/missing_count/group"] == 200.0
    assert "fairness/group_count/group/missing" not in result.metrics
    assert result.metrics["fairness/demographic_parity_difference/group"] == pytest.approx(
        demographic_parity_difference(None, clf.predict(kept[["x1", "x2"]]),
                                      sensitive_features=kept["group"]))


def test_missing_sensitive_values_raise_when_asked(logreg: Any) -> None:
    clf, data, uri = logreg
    data = data.assign(group=pd.Series([True, pd.NA, False] * 200, dtype="boolean"))
    with pytest.raises(Exception, match=r"'group' has 200 missing values.*'group' or 'drop'"):
        evaluate(uri, data, {"sensitive_features": ["group"], "metrics": FAST,
                             "missing": {"group": "raise"}}, targets="label")


# --- items 2 and 4: the default metric set, small groups ---------------------------------------

def test_default_set_is_the_fast_metrics_and_the_rest_is_opt_in(logreg: Any,
                                                                tmp_path: Any) -> None:
    from fairmonitor_mlflow.config import DEFAULT_METRICS

    clf, data, uri = logreg
    result = evaluate(uri, data, {"sensitive_features": ["group"]}, targets="label")
    computed = {k.split("/")[1] for k in result.metrics if k.startswith("fairness/")} - {
        "group_count", "ci_lower", "ci_upper", "chance"}
    assert computed == set(DEFAULT_METRICS)
    assert tags(result)["fairness.robustness"].startswith("off: opt-in")
    report = mlflow.artifacts.load_dict(
        f"runs:/{result.run_id}/fairness/fairness_report.json")
    assert report["skipped"]["hfm"].startswith("opt-in, not in the default set")
    assert report["notes"][0] == ("min_group_size=30 (the default): groups with fewer rows are "
                                  "left out of every metric")
    everything = evaluate(uri, data, {"sensitive_features": ["group"], "metrics": "all",
                                      "robustness": ROBUSTNESS}, targets="label")
    assert {"fairness/hfm/group", "fairness/cfair/group",
            "fairness/robustness_ratio_max/group"} <= set(everything.metrics)


def test_tiny_groups_are_left_out_by_default_instead_of_driving_the_gap(logreg: Any) -> None:
    # 40 groups of 1-3 rows plus nothing else: with min_group_size=1 this read DP 0.67 and
    # status ok; by default every group is too small and nothing is called fair
    clf, data, uri = logreg
    rng = np.random.default_rng(1)
    small = data.head(80).assign(group=[f"g{i}" for i in rng.integers(0, 40, size=80)])
    result = evaluate(uri, small, {"sensitive_features": ["group"],
                                   "metrics": ["demographic_parity_difference"]},
                      targets="label")
    assert np.isnan(result.metrics["fairness/demographic_parity_difference/group"])
    assert tags(result)["fairness.status"] == "undefined"
    loose = evaluate(uri, small, {"sensitive_features": ["group"], "min_group_size": 1,
                                  "metrics": ["demographic_parity_difference"]},
                     targets="label")
    assert loose.metrics["fairness/demographic_parity_difference/group"] == pytest.approx(
        demographic_parity_difference(None, clf.predict(small[["x1", "x2"]]),
                                      sensitive_features=small["group"]))


# --- item 6: model types -----------------------------------------------------------------------

def test_another_model_type_is_declined_with_the_reason(logreg: Any,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    # issue 29 changed this deliberately: a regressor is now evaluated (regression metrics,
    # tests/plugins/test_evaluator_regression.py); other model types are still declined
    from mlflow.exceptions import MlflowException

    clf, data, uri = logreg
    with caplog.at_level("WARNING", logger="fairmonitor_mlflow"), \
            pytest.raises(MlflowException, match="could not be evaluated"):
        evaluate(uri, data, {"sensitive_features": ["group"]}, model_type="retriever",
                 targets="label")
    assert "declines model_type='retriever'" in caplog.text
    assert "model_type='classifier'" in caplog.text
    assert "model_type='regressor'" in caplog.text


# --- item 5: model inputs ----------------------------------------------------------------------

def test_extra_columns_are_not_given_to_the_model(logreg: Any) -> None:
    # the model's signature names x1, x2: an extra column used to reach the unwrapped sklearn
    # estimator ("feature names unseen at fit time")
    clf, data, uri = logreg
    extra = data.assign(note=np.arange(len(data)), region="north")
    result = evaluate(uri, extra, {"sensitive_features": ["group"], "metrics": FAST},
                      targets="label")
    assert result.metrics["fairness/demographic_parity_difference/group"] == pytest.approx(
        demographic_parity_difference(None, clf.predict(data[["x1", "x2"]]),
                                      sensitive_features=data["group"]))


def test_a_model_using_the_sensitive_column_is_pointed_to_model_uses_sensitive(
        mlflow_store: Store) -> None:
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    from fairmonitor.exceptions import ConfigError

    data = synthetic()
    clf = make_pipeline(make_column_transformer((OneHotEncoder(), ["group"]),
                                                remainder="passthrough"),
                        LogisticRegression()).fit(data[["x1", "x2", "group"]], data["label"])
    with mlflow.start_run():
        uri = mlflow.sklearn.log_model(clf, name="m", pip_requirements=["scikit-learn"],
                                       input_example=data[["x1", "x2", "group"]].head(3)
                                       ).model_uri
    with pytest.raises(ConfigError, match=r"takes the sensitive column\(s\) \['group'\] as "
                                          r"input: set `model_uses_sensitive=True`"):
        evaluate(uri, data, {"sensitive_features": ["group"], "metrics": FAST},
                 targets="label")
    result = evaluate(uri, data, {"sensitive_features": ["group"], "metrics": FAST,
                                  "model_uses_sensitive": True}, targets="label")
    assert result.metrics["fairness/demographic_parity_difference/group"] == pytest.approx(
        demographic_parity_difference(None, clf.predict(data[["x1", "x2", "group"]]),
                                      sensitive_features=data["group"]))


# --- item 8: the per-group table, as fairlearn's MetricFrame.by_group --------------------------

def test_group_table_equals_fairlearn_metricframe_by_group(logreg: Any) -> None:
    from fairlearn.metrics import (
        MetricFrame,
        false_negative_rate,
        false_positive_rate,
        selection_rate,
        true_positive_rate,
    )
    from sklearn.metrics import accuracy_score, precision_score, roc_auc_score

    clf, data, uri = logreg
    result = evaluate(uri, data, {"sensitive_features": ["group"], "metrics": FAST},
                      targets="label")
    table = pd.read_csv(mlflow.artifacts.download_artifacts(
        f"runs:/{result.run_id}/fairness/fairness_groups.csv")).set_index("group")
    X, y = data[["x1", "x2"]], data["label"]
    pred, score = clf.predict(X), clf.predict_proba(X)[:, 1]
    frame = MetricFrame(metrics={
        "selection_rate": selection_rate, "true_positive_rate": true_positive_rate,
        "false_positive_rate": false_positive_rate, "false_negative_rate": false_negative_rate,
        "precision": precision_score, "accuracy": accuracy_score},
        y_true=y, y_pred=pred, sensitive_features=data["group"]).by_group
    for column in frame.columns:
        np.testing.assert_allclose(table.loc[["a", "b"], column], frame[column], rtol=1e-12,
                                   err_msg=column)
    for g in ("a", "b"):
        rows = (data["group"] == g).to_numpy()
        assert table.loc[g, "roc_auc"] == pytest.approx(roc_auc_score(y[rows], score[rows]))
        assert table.loc[g, "positive_label_rate"] == pytest.approx(y[rows].mean())
        assert table.loc[g, "calibration_gap"] == pytest.approx(score[rows].mean()
                                                                - y[rows].mean())


def test_a_predict_only_classifier_gives_scores_through_decision_function_when_allowed(
        mlflow_store: Store) -> None:
    from sklearn.svm import LinearSVC

    from fairmonitor.metrics import abcc

    data = synthetic()
    svc = LinearSVC().fit(data[["x1", "x2"]], data["label"])
    with mlflow.start_run():
        uri = mlflow.sklearn.log_model(svc, name="m", pip_requirements=["scikit-learn"],
                                       input_example=data[["x1", "x2"]].head(3)).model_uri
    plain = evaluate(uri, data, {"sensitive_features": ["group"]}, targets="label")
    assert "fairness/abcc/group" not in plain.metrics  # no scores unless the user allows it
    assert "fairness/demographic_parity_difference/group" in plain.metrics
    scored = evaluate(uri, data, {"sensitive_features": ["group"], "decision_function": True},
                      targets="label")
    margin = svc.decision_function(data[["x1", "x2"]])
    assert scored.metrics["fairness/abcc/group"] == pytest.approx(
        abcc(1 / (1 + np.exp(-margin)), sensitive_features=data["group"]))


def test_a_multiclass_model_with_pos_label_compares_that_class(mlflow_store: Store) -> None:
    # without pos_label every class is evaluated one-vs-rest (issue 29,
    # tests/plugins/test_evaluator_multiclass.py); with it, that one class as before
    from sklearn.linear_model import LogisticRegression

    data = synthetic()
    data["tier"] = np.digitize(data["x1"] + data["x2"], [-0.5, 0.5])  # classes 0, 1, 2
    clf = LogisticRegression().fit(data[["x1", "x2"]], data["tier"])
    with mlflow.start_run():
        uri = mlflow.sklearn.log_model(clf, name="m", pip_requirements=["scikit-learn"],
                                       input_example=data[["x1", "x2"]].head(3)).model_uri
    frame = data.drop(columns="label")
    result = evaluate(uri, frame, {"sensitive_features": ["group"], "pos_label": 2},
                      targets="tier")
    pred = clf.predict(data[["x1", "x2"]]) == 2
    assert result.metrics["fairness/demographic_parity_difference/group"] == pytest.approx(
        demographic_parity_difference(None, pred, sensitive_features=data["group"]))
    from fairmonitor.metrics import abcc

    assert result.metrics["fairness/abcc/group"] == pytest.approx(
        abcc(clf.predict_proba(data[["x1", "x2"]])[:, 2], sensitive_features=data["group"]))


# --- item 8: sample_weight where the definitions allow it -------------------------------------

def test_sample_weight_column_weighs_the_parity_gaps_as_fairlearn(logreg: Any) -> None:
    from fairlearn.metrics import demographic_parity_difference as fl_dp

    clf, data, uri = logreg
    data = data.assign(w=np.random.default_rng(5).integers(1, 6, len(data)).astype(float))
    result = evaluate(uri, data, {"sensitive_features": ["group"], "sample_weight": "w",
                                  "metrics": ["demographic_parity_difference", "abcc", "madd"]},
                      targets="label")
    # the weight column is no model input (the model was fitted on x1, x2 only: it would fail)
    y_pred = clf.predict(data[["x1", "x2"]])
    expected = fl_dp(data["label"], y_pred, sensitive_features=data["group"],
                     sample_weight=data["w"])
    assert result.metrics["fairness/demographic_parity_difference/group"] == pytest.approx(
        expected, abs=1e-12)
    unweighted = fl_dp(data["label"], y_pred, sensitive_features=data["group"])
    assert expected != pytest.approx(unweighted, abs=1e-6)  # the weights mattered
    assert math.isnan(result.metrics["fairness/madd/group"])  # no weighted definition
    with pytest.raises(Exception, match="sample_weight: column 'nope' is not in the"):
        evaluate(uri, data, {"sensitive_features": ["group"], "sample_weight": "nope"},
                 targets="label")
