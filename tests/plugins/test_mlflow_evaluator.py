"""End-to-end tests of the ``fairness`` MLflow evaluator, through MLflow's entry point.

Every evaluation goes through ``mlflow.models.evaluate(..., evaluators=["fairness"])`` (or the
deprecated ``mlflow.evaluate``) against a real sqlite tracking store; the evaluator class is never
imported here. Expected values come from calling the metric functions directly on the same data.
"""

from __future__ import annotations

import inspect
import json
import math
import warnings
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd
import pytest
from fairmonitor_mlflow import validation_thresholds
from mlflow.exceptions import MlflowException
from mlflow.models.evaluation.validation import ModelValidationFailedException
from mlflow.tracking import MlflowClient

from fairmonitor import METRICS
from fairmonitor.exceptions import ConfigError
from fairmonitor.metrics import (
    demographic_parity_difference,
    demographic_parity_ratio,
    equal_opportunity_difference,
    equalized_odds_difference,
)

GermanModel = Store = Any  # fixtures' types (tests/plugins/conftest.py)
#: a classifier's metrics (issue 29: a regressor's are in test_evaluator_regression.py)
CLASSIFIER_METRICS = [n for n, s in METRICS.items() if s.task == "binary"]
SENSITIVE = ["sex", "age_group"]
LABEL = "good_credit"
ROBUSTNESS = {"levels": [0.1, 1.0], "n_repeats": 3}  # small: about a second per evaluation
ATTRS = ["sex", "age_group", "sex:age_group"]
THRESHOLDS = {"demographic_parity_difference": {"warning": 0.05, "critical": 0.15}}
CONFIG = {"sensitive_features": SENSITIVE, "robustness": ROBUSTNESS, "thresholds": THRESHOLDS,
          "metrics": "all"}  # every metric, so each is checked against its function
GROUP_COUNT_KEYS = {
    "fairness/group_count/sex/female": 310.0,
    "fairness/group_count/sex/male": 690.0,
    "fairness/group_count/age_group/lt25": 149.0,
    "fairness/group_count/age_group/ge25": 851.0,
    "fairness/group_count/sex:age_group/female:lt25": 84.0,
    "fairness/group_count/sex:age_group/female:ge25": 226.0,
    "fairness/group_count/sex:age_group/male:lt25": 65.0,
    "fairness/group_count/sex:age_group/male:ge25": 625.0,
}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def evaluate(model: Any, data: Any, config: dict[str, Any], **kwargs: Any) -> Any:
    with mlflow.start_run():
        return mlflow.models.evaluate(model, data, model_type="classifier",
                                      evaluators=["fairness"],
                                      evaluator_config={"fairness": config}, **kwargs)


def attribute_columns(data: Any, attr: str) -> dict[str, np.ndarray]:
    names = SENSITIVE if attr == "sex:age_group" else [attr]
    return {c: data[c].to_numpy() for c in names}


def direct_value(name: str, sensitive: dict[str, np.ndarray], inputs: dict[str, Any]) -> float:
    """The metric computed by calling its registered function, outside MLflow and the report."""
    spec = METRICS[name]
    kwargs = {i: inputs[i] for i in spec.optional_inputs if inputs[i] is not None}
    if "random_state" in inspect.signature(spec.func).parameters:
        kwargs["random_state"] = 0  # the evaluator's default seed
    if "predict" in spec.inputs:
        kwargs.update(ROBUSTNESS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = spec.func(*[inputs[i] for i in spec.inputs], sensitive_features=sensitive,
                           **spec.options, **kwargs)
    return float(getattr(result, spec.field or "value", result))


@pytest.fixture(scope="module")
def uri_result(german_model: GermanModel) -> Any:
    """One evaluation of the logged model by URI, with thresholds and small robustness."""
    return evaluate(german_model.model_uri, german_model.data, CONFIG, targets=LABEL)


@pytest.fixture(scope="module")
def downloaded(uri_result: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("artifacts")
    mlflow.artifacts.download_artifacts(run_id=uri_result.run_id, artifact_path="fairness",
                                        dst_path=str(dst))
    return dst / "fairness"


@pytest.fixture(scope="module")
def model_inputs(german_model: GermanModel) -> dict[str, Any]:
    clf, data = german_model.clf, german_model.data
    X = data[german_model.inputs]
    return {"y_true": data[LABEL].to_numpy(), "y_pred": clf.predict(X),
            "y_score": clf.predict_proba(X)[:, 1], "X": X, "predict": clf.predict}


def test_fairness_is_a_registered_evaluator(mlflow_store: Store) -> None:
    assert "fairness" in mlflow.models.list_evaluators()


def test_metric_keys_are_exactly_one_per_metric_and_attribute(uri_result: Any) -> None:
    expected = {f"fairness/{name}/{attr}" for name in CLASSIFIER_METRICS for attr in ATTRS}
    # and each value's interval and chance level (NaN where the metric has none)
    bounds = {f"fairness/{part}/{name}/{attr}" for part in ("ci_lower", "ci_upper", "chance")
              for name in CLASSIFIER_METRICS for attr in ATTRS}
    assert set(uri_result.metrics) == expected | bounds | set(GROUP_COUNT_KEYS)


def test_parity_keys_are_present_with_their_documented_names(uri_result: Any) -> None:
    keys = {"fairness/demographic_parity_difference/sex",
            "fairness/equalized_odds_difference/age_group",
            "fairness/equal_opportunity_difference/sex:age_group"}
    assert keys <= set(uri_result.metrics)


def test_group_counts_are_logged(uri_result: Any) -> None:
    counts = {k: v for k, v in uri_result.metrics.items() if "/group_count/" in k}
    assert counts == GROUP_COUNT_KEYS


@pytest.mark.parametrize("attr", ATTRS)
def test_parity_values_equal_the_metric_functions(uri_result: Any, german_model: GermanModel,
                                                  model_inputs: dict[str, Any],
                                                  attr: str) -> None:
    sf = attribute_columns(german_model.data, attr)
    y, p = model_inputs["y_true"], model_inputs["y_pred"]
    expected = {
        "demographic_parity_difference": demographic_parity_difference(None, p,
                                                                       sensitive_features=sf),
        "demographic_parity_ratio": demographic_parity_ratio(None, p, sensitive_features=sf),
        "equalized_odds_difference": equalized_odds_difference(y, p, sensitive_features=sf),
        "equal_opportunity_difference": equal_opportunity_difference(y, p,
                                                                     sensitive_features=sf),
    }
    logged = {name: uri_result.metrics[f"fairness/{name}/{attr}"] for name in expected}
    assert logged == expected


@pytest.mark.parametrize("name", CLASSIFIER_METRICS)
def test_every_registered_metric_equals_its_function(uri_result: Any, german_model: GermanModel,
                                                     model_inputs: dict[str, Any],
                                                     name: str) -> None:
    for attr in ATTRS:
        expected = direct_value(name, attribute_columns(german_model.data, attr), model_inputs)
        np.testing.assert_allclose(uri_result.metrics[f"fairness/{name}/{attr}"], expected,
                                   rtol=1e-12, equal_nan=True, err_msg=f"{name} on {attr}")


def test_metrics_are_logged_once_to_the_run_and_to_the_logged_model(
        uri_result: Any, german_model: GermanModel) -> None:
    client = MlflowClient()
    history = client.get_metric_history(uri_result.run_id,
                                        "fairness/demographic_parity_difference/sex")
    assert [m.value for m in history] == [uri_result.metrics[
        "fairness/demographic_parity_difference/sex"]]
    linked = {m.key for m in mlflow.get_logged_model(german_model.model_id).metrics or []}
    assert "fairness/demographic_parity_difference/sex" in linked


def test_robustness_ratios_are_logged_per_level_with_steps(uri_result: Any,
                                                           german_model: GermanModel,
                                                           model_inputs: dict[str, Any]
                                                           ) -> None:
    from fairmonitor.robustness import robustness_ratio

    expected = robustness_ratio(model_inputs["predict"], model_inputs["X"],
                                sensitive_features=attribute_columns(german_model.data, "sex"),
                                y_true=model_inputs["y_true"], random_state=0, **ROBUSTNESS)
    history = MlflowClient().get_metric_history(
        uri_result.run_id, "fairness/robustness_ratio/demographic_parity_difference/sex")
    logged = sorted((m.step, m.value) for m in history)
    ratios = expected.ratios["demographic_parity_difference"]
    assert logged == [(i, float(r)) for i, r in enumerate(ratios)]


def test_robustness_levels_and_flip_rates_are_logged_per_step(uri_result: Any) -> None:
    client = MlflowClient()
    levels = client.get_metric_history(uri_result.run_id, "fairness/robustness_level/age_group")
    flips = client.get_metric_history(uri_result.run_id,
                                      "fairness/robustness_flip_rate/age_group")
    assert sorted((m.step, m.value) for m in levels) == [(0, 0.1), (1, 1.0)]
    assert sorted(m.step for m in flips) == [0, 1]


def test_status_tag_is_the_worst_threshold_verdict(uri_result: Any) -> None:
    tags = mlflow.get_run(uri_result.run_id).data.tags
    # dp difference: sex 0.059 (warning), age_group 0.18 (critical); sex:age_group (0.21) is
    # not governed: the config's threshold does not name the intersection
    assert tags["fairness.status"] == "critical"
    assert tags["fairness.breaches"] == (
        "fairness/demographic_parity_difference/age_group, "
        "fairness/demographic_parity_difference/sex")
    assert tags["fairness.robustness"] == "on"


def test_thresholds_fail_mlflow_validation_when_exceeded(uri_result: Any) -> None:
    with pytest.raises(ModelValidationFailedException,
                       match="fairness/demographic_parity_difference/age_group"):
        mlflow.validate_evaluation_results(validation_thresholds(CONFIG), uri_result)


def test_thresholds_pass_mlflow_validation_when_met(uri_result: Any) -> None:
    loose = {**CONFIG, "thresholds": {
        "demographic_parity_difference": {"critical": 0.25},
        "demographic_parity_ratio": {"critical": 0.7},  # lower bound: ratios 0.73-0.92
    }}
    thresholds = validation_thresholds(loose)
    assert len(thresholds) == 4  # 2 metrics x (sex, age_group); not the intersection
    assert mlflow.validate_evaluation_results(thresholds, uri_result) is None


def test_warning_level_thresholds_fail_on_the_warning_bound(uri_result: Any) -> None:
    with pytest.raises(ModelValidationFailedException,
                       match="fairness/demographic_parity_difference/sex value threshold"):
        mlflow.validate_evaluation_results(
            validation_thresholds(CONFIG, level="warning", result=uri_result), uri_result)


def test_artifacts_are_logged_under_fairness(uri_result: Any) -> None:
    names = {a.path for a in MlflowClient().list_artifacts(uri_result.run_id, "fairness")}
    assert {"fairness/fairness_report.html", "fairness/fairness_report.json",
            "fairness/fairness_groups.csv", "fairness/fairness_groups.json",
            "fairness/fairness_robustness.json", "fairness/plots"} <= names


def test_plots_are_valid_pngs(downloaded: Path) -> None:
    from PIL import Image

    pngs = sorted(p.name for p in (downloaded / "plots").glob("*.png"))
    expected = {f"fairness_{kind}__{a}.png" for kind in ("score_cdf", "robustness")
                for a in ("sex", "age_group", "sex_x_age_group")}
    assert expected <= set(pngs)
    for name in pngs:
        path = downloaded / "plots" / name
        assert path.read_bytes()[:8] == PNG_MAGIC, name
        with Image.open(path) as img:
            img.verify()
            assert img.format == "PNG", name


def test_madd_histograms_are_plotted_when_madd_is_registered(downloaded: Path) -> None:
    pngs = {p.name for p in (downloaded / "plots").glob("*.png")}
    expected = {f"fairness_madd_hist__{a}.png" for a in ("sex", "age_group", "sex_x_age_group")}
    assert (expected <= pngs) == ("madd" in METRICS)


def test_group_table_matches_the_data(downloaded: Path, german_model: GermanModel,
                                      model_inputs: dict[str, Any]) -> None:
    table = pd.read_csv(downloaded / "fairness_groups.csv")
    females = table[(table.attribute == "sex") & (table.group == "female")].iloc[0]
    is_female = (german_model.data["sex"] == "female").to_numpy()
    assert females["count"] == 310
    assert females["selection_rate"] == pytest.approx(model_inputs["y_pred"][is_female].mean())
    assert females["mean_score"] == pytest.approx(model_inputs["y_score"][is_female].mean())
    records = json.loads((downloaded / "fairness_groups.json").read_text())
    assert len(records) == len(table) == 8


def test_pairwise_matrices_are_logged_for_distribution_metrics(downloaded: Path) -> None:
    pairwise = {"abcc", "abpc", "madd"} & set(METRICS)
    if not pairwise:
        assert not (downloaded / "fairness_pairwise.json").exists()
        return
    data = json.loads((downloaded / "fairness_pairwise.json").read_text())
    metric = sorted(pairwise)[0]
    entry = data[f"{metric}/sex:age_group"]
    assert len(entry["matrix"]) == len(entry["labels"]) == 4
    assert (downloaded / "pairwise" / f"fairness_pairwise__{metric}__sex_x_age_group.csv"
            ).exists()


def test_report_links_every_artifact_and_embeds_the_plots(downloaded: Path) -> None:
    html = (downloaded / "fairness_report.html").read_text()
    assert "href='fairness_groups.csv'" in html
    assert html.count("src='data:image/png;base64,") == len(list(
        (downloaded / "plots").glob("*.png")))
    report = json.loads((downloaded / "fairness_report.json").read_text())
    assert report["status"] == "critical"
    assert report["inputs"]["y_score"] == "model.predict_proba"


def test_result_artifacts_carry_their_content(uri_result: Any) -> None:
    table = uri_result.artifacts["fairness_groups_csv"].content
    assert list(table.columns[:3]) == ["attribute", "group", "count"]
    assert uri_result.artifacts["fairness_score_cdf__sex_png"].uri.endswith(
        "fairness/plots/fairness_score_cdf__sex.png")


def test_can_evaluate_declines_without_sensitive_features(mlflow_store: Store) -> None:
    from mlflow.models.evaluation.evaluator_registry import _model_evaluation_registry

    evaluator = _model_evaluation_registry.get_evaluator("fairness")
    assert evaluator.can_evaluate(model_type="classifier", evaluator_config={}) is False
    assert evaluator.can_evaluate(model_type="classifier",
                                  evaluator_config={"sensitive_features": ["sex"]}) is True


def test_evaluate_without_sensitive_features_runs_no_fairness(german_model: GermanModel) -> None:
    with pytest.raises(MlflowException, match="could not be evaluated by any of the registered"):
        evaluate(german_model.model_uri, german_model.data, {}, targets=LABEL)


def test_static_predictions_skip_robustness_with_a_reason(
        german_model: GermanModel, model_inputs: dict[str, Any], uri_result: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    # age_group is not sensitive here: leave it out so the features equal the URI run's
    data = german_model.data.drop(columns="age_group").assign(pred=model_inputs["y_pred"],
                                                              score=model_inputs["y_score"])
    config = {"sensitive_features": ["sex"], "score_column": "score", "metrics": "all",
              "robustness": ROBUSTNESS, "thresholds": {
                  "demographic_parity_difference": {"warning": 0.05, "critical": 0.5}}}
    with caplog.at_level("WARNING", logger="fairmonitor_mlflow"):
        result = evaluate(None, data, config, targets=LABEL, predictions="pred")
    assert "robustness is configured but skipped" in caplog.text
    for name in CLASSIFIER_METRICS:  # same predictions and scores as the model: same values
        if "predict" not in METRICS[name].inputs:
            key = f"fairness/{name}/sex"
            np.testing.assert_allclose(result.metrics[key], uri_result.metrics[key],
                                       rtol=1e-12, equal_nan=True, err_msg=key)
    assert not [k for k in result.metrics if "robustness" in k]
    history = MlflowClient().get_metric_history(result.run_id,
                                                "fairness/demographic_parity_difference/sex")
    assert len(history) == 1  # logged once, with or without a model_id
    tags = mlflow.get_run(result.run_id).data.tags
    assert tags["fairness.robustness"].startswith("skipped: no model to call")
    # dp difference on sex is 0.059: above the warning bound, below the critical one
    assert tags["fairness.status"] == "warning"


def test_static_score_predictions_are_thresholded(german_model: GermanModel,
                                                  model_inputs: dict[str, Any]) -> None:
    data = german_model.data.assign(score=model_inputs["y_score"])
    result = evaluate(None, data, {"sensitive_features": ["sex"], "threshold": 0.7,
                                   "metrics": ["demographic_parity_difference"]},
                      targets=LABEL, predictions="score")
    expected = demographic_parity_difference(None, model_inputs["y_score"] >= 0.7,
                                             sensitive_features=data["sex"])
    assert result.metrics["fairness/demographic_parity_difference/sex"] == expected


def test_loaded_pyfunc_model_gives_the_same_values(german_model: GermanModel,
                                                   uri_result: Any) -> None:
    model = mlflow.pyfunc.load_model(german_model.model_uri)
    config = {**CONFIG, "robustness": False,
              "metrics": ["demographic_parity_difference", "equalized_odds_difference"]}
    result = evaluate(model, german_model.data, config, targets=LABEL)
    for key in ("fairness/demographic_parity_difference/sex:age_group",
                "fairness/equalized_odds_difference/age_group"):
        assert result.metrics[key] == uri_result.metrics[key]
    assert "fairness/robustness_ratio_max/sex" not in result.metrics


class SelectingWrapper(mlflow.pyfunc.PythonModel):
    """A pyfunc that picks its own input columns, with a predict_proba for the score metrics."""

    def __init__(self, clf: Any, columns: list[str]) -> None:
        self.clf, self.columns = clf, columns

    # MLflow checks predict's hints when the class is created: pd.DataFrame is one it accepts
    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> Any:
        return self.clf.predict(model_input[self.columns])

    def predict_proba(self, model_input: Any) -> Any:
        return self.clf.predict_proba(model_input[self.columns])


def test_pyfunc_wrapper_works_next_to_the_default_evaluator(german_model: GermanModel,
                                                            model_inputs: dict[str, Any]
                                                            ) -> None:
    wrapper = SelectingWrapper(german_model.clf, german_model.inputs)
    score_metric = next(n for n, s in METRICS.items() if s.inputs == ("y_score",))
    with mlflow.start_run():
        info = mlflow.pyfunc.log_model(name="wrapped", python_model=wrapper,
                                       pip_requirements=["scikit-learn"])
        result = mlflow.models.evaluate(
            info.model_uri, german_model.data, targets=LABEL, model_type="classifier",
            evaluators=["default", "fairness"],
            evaluator_config={
                # the SHAP step crashes on pandas-3 string columns (integration.md §1.4)
                "default": {"log_model_explainability": False},
                "fairness": {"sensitive_features": ["sex"], "robustness": False,
                             "metrics": ["demographic_parity_difference", score_metric]}})
    assert "accuracy_score" in result.metrics
    sf = attribute_columns(german_model.data, "sex")
    for name in ("demographic_parity_difference", score_metric):  # scores: its predict_proba
        assert result.metrics[f"fairness/{name}/sex"] == direct_value(name, sf, model_inputs)


def test_sensitive_model_inputs_are_frozen_under_noise(german_model: GermanModel,
                                                       train_pipeline: Any,
                                                       tmp_path: Path) -> None:
    data = german_model.data.drop(columns="age_group")
    clf = train_pipeline(data, [*german_model.inputs, "sex"])  # a model that reads sex
    result = evaluate(lambda X: clf.predict(X), data,
                      {"sensitive_features": ["sex"], "model_uses_sensitive": True,
                       "robustness": ROBUSTNESS, "metrics": ["robustness_ratio_max"]},
                      targets=LABEL)
    mlflow.artifacts.download_artifacts(run_id=result.run_id, dst_path=str(tmp_path),
                                        artifact_path="fairness/fairness_robustness.json")
    detail = json.loads((tmp_path / "fairness_robustness.json").read_text())["sex"]
    assert detail["column_kinds"]["sex"] == "frozen"
    assert detail["column_kinds"]["month"] == "continuous"


def test_plain_callable_has_no_score_metrics(german_model: GermanModel,
                                             model_inputs: dict[str, Any]) -> None:
    clf = german_model.clf
    result = evaluate(lambda X: clf.predict(X), german_model.data,
                      {"sensitive_features": ["sex"], "robustness": False}, targets=LABEL)
    assert result.metrics["fairness/demographic_parity_difference/sex"] == (
        demographic_parity_difference(None, model_inputs["y_pred"],
                                      sensitive_features=german_model.data["sex"]))
    score_metrics = [n for n, s in METRICS.items() if "y_score" in s.inputs]
    assert not [k for k in result.metrics if k.split("/")[1] in score_metrics]


def test_deprecated_mlflow_evaluate_works_with_a_future_warning(
        german_model: GermanModel, model_inputs: dict[str, Any]) -> None:
    data = german_model.data.assign(pred=model_inputs["y_pred"])
    deprecated = "`mlflow.evaluate` API has been deprecated"
    with mlflow.start_run(), pytest.warns(FutureWarning, match=deprecated):
        # pytest.warns re-emits every other warning it records: ignore mlflow's own noise as
        # pyproject.toml does (a pandas-4 deprecation from digest_utils.py, schema hints)
        for category in (DeprecationWarning, UserWarning):
            warnings.filterwarnings("ignore", category=category, module=r"mlflow\.")
        result = mlflow.evaluate(None, data, targets=LABEL, predictions="pred",
                                 model_type="classifier", evaluators=["fairness"],
                                 evaluator_config={"fairness": {
                                     "sensitive_features": ["sex"],
                                     "metrics": ["demographic_parity_difference"]}})
    assert result.metrics["fairness/demographic_parity_difference/sex"] == (
        demographic_parity_difference(None, model_inputs["y_pred"],
                                      sensitive_features=data["sex"]))


def test_missing_sensitive_column_names_it_and_lists_the_columns(
        german_model: GermanModel) -> None:
    with pytest.raises(ConfigError, match=r"column 'race' is not in the evaluation data; "
                                          r"available columns: \['status', 'month'"):
        evaluate(german_model.model_uri, german_model.data,
                 {"sensitive_features": ["sex", "race"]}, targets=LABEL)


def test_unknown_config_key_is_named_with_the_allowed_keys(german_model: GermanModel) -> None:
    with pytest.raises(ConfigError, match=r"unknown key\(s\) 'treshold' \(did you mean "
                                          r"'threshold'\?\); allowed keys: sensitive_features"):
        evaluate(german_model.model_uri, german_model.data,
                 {"sensitive_features": ["sex"], "treshold": 0.3}, targets=LABEL)


def test_score_metric_without_scores_is_a_clear_error(german_model: GermanModel) -> None:
    name = next(n for n, s in METRICS.items() if s.inputs == ("y_score",))
    clf = german_model.clf
    with pytest.raises(ConfigError, match=f"metrics: '{name}' needs scores, which this "
                                          "evaluation does not have; set `score_column`"):
        evaluate(lambda X: clf.predict(X), german_model.data,
                 {"sensitive_features": ["sex"], "metrics": [name]}, targets=LABEL)


def test_nan_free_json_report(downloaded: Path) -> None:
    text = (downloaded / "fairness_report.json").read_text()
    assert "NaN" not in text
    assert math.isfinite(json.loads(text)["n_rows"])


def test_each_value_is_logged_with_its_interval_and_chance_level(uri_result: Any) -> None:
    # issue 16: fairness/ci_lower|ci_upper|chance/<metric>/<attribute> beside every value,
    # equal to the report's intervals (the same evaluate_window the monitor calls)
    run = MlflowClient().get_run(uri_result.run_id)
    metrics = run.data.metrics
    dp = "demographic_parity_difference"
    for attr in ("sex", "age_group"):
        value = metrics[f"fairness/{dp}/{attr}"]
        lower, upper = metrics[f"fairness/ci_lower/{dp}/{attr}"], metrics[
            f"fairness/ci_upper/{dp}/{attr}"]
        assert lower <= value <= upper and upper - lower > 0
        assert 0 < metrics[f"fairness/chance/{dp}/{attr}"] < upper
    assert uri_result.metrics[f"fairness/ci_lower/{dp}/sex"] == metrics[
        f"fairness/ci_lower/{dp}/sex"]


def test_intervals_are_drawn_and_tabulated(downloaded: Path) -> None:
    from PIL import Image

    path = downloaded / "plots" / "fairness_intervals.png"
    with Image.open(path) as img:
        img.verify()
    html = (downloaded / "fairness_report.html").read_text()
    assert "95% interval" in html and "chance level" in html
    report = json.loads((downloaded / "fairness_report.json").read_text())
    dp = next(v for v in report["values"]
              if v["metric"] == "demographic_parity_difference" and v["attribute"] == "sex")
    assert dp["ci_lower"] <= dp["value"] <= dp["ci_upper"]
    assert dp["interval_method"] == "newcombe-wilson"  # issue 25: score-type, was Wald
