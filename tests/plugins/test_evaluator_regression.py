"""The evaluator on a regressor (issue 29): a real sklearn regressor logged to a sqlite store."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import mlflow
import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import MetricFrame
from mlflow.tracking import MlflowClient
from sklearn.metrics import mean_absolute_error

from fairmonitor.metrics import prediction_ks_distance, prediction_wasserstein
from fairmonitor.report.registry import METRICS, task_metrics

Store = Any


def credit(n: int = 800, seed: int = 0) -> pd.DataFrame:
    """A credit limit driven by income; group b's limits are set 1.5k lower at equal income."""
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b"], size=n)
    income = rng.normal(50, 12, size=n)
    tenure = rng.uniform(0, 10, size=n)
    limit = 0.2 * income + 0.3 * tenure - 1.5 * (group == "b") + rng.normal(0, 1, size=n)
    return pd.DataFrame({"income": income, "tenure": tenure, "group": group, "limit": limit})


@pytest.fixture(scope="module")
def regressor(mlflow_store: Store) -> Any:
    from sklearn.linear_model import LinearRegression

    data = credit()
    model = LinearRegression().fit(data[["income", "tenure"]], data["limit"])
    with mlflow.start_run(run_name="train-regressor"):
        info = mlflow.sklearn.log_model(model, name="model", pip_requirements=["scikit-learn"],
                                        input_example=data[["income", "tenure"]].head(3))
    return model, data, info.model_uri


def evaluate(uri: Any, data: Any, config: dict[str, Any], **kwargs: Any) -> Any:
    with mlflow.start_run():
        return mlflow.models.evaluate(uri, data, targets="limit", model_type="regressor",
                                      evaluators=["fairness"],
                                      evaluator_config={"fairness": config}, **kwargs)


def test_a_regressor_gets_the_regression_metrics(regressor: Any) -> None:
    model, data, uri = regressor
    # an artifact that failed would be an ArtifactWarning: an error under pytest's filters
    result = evaluate(uri, data, {"sensitive_features": ["group"], "min_group_size": 30})
    pred = model.predict(data[["income", "tenure"]])
    frame = MetricFrame(metrics=mean_absolute_error, y_true=data["limit"], y_pred=pred,
                        sensitive_features=data["group"])
    m = result.metrics
    assert abs(m["fairness/mae_difference/group"] - frame.difference()) <= 1e-12
    assert m["fairness/prediction_ks_distance/group"] == float(
        prediction_ks_distance(pred, sensitive_features=data["group"]))
    assert m["fairness/prediction_wasserstein/group"] == pytest.approx(float(
        prediction_wasserstein(pred, sensitive_features=data["group"])), abs=1e-12)
    # the model never saw the group: its limits are too high for b, by ~1.5 on average
    assert m["fairness/mean_residual_difference/group"] == pytest.approx(1.5, abs=0.3)
    assert {k.split("/")[1] for k in m if k.count("/") == 2 and k.startswith("fairness/")
            and not k.startswith(("fairness/ci_", "fairness/chance"))} == {
        n for n in task_metrics("regression") if not METRICS[n].needs_features}  # CFair opt-in
    assert m["fairness/ci_lower/mean_residual_difference/group"] > 1.0
    assert not any("demographic_parity" in k for k in m)
    logged = MlflowClient().get_run(result.run_id).data
    assert logged.metrics["fairness/mae_difference/group"] == m["fairness/mae_difference/group"]
    assert logged.tags["fairness.failures"] == "none"


def test_regressor_artifacts(regressor: Any, tmp_path: Any) -> None:
    model, data, uri = regressor
    result = evaluate(uri, data, {"sensitive_features": ["group"]})
    mlflow.artifacts.download_artifacts(run_id=result.run_id, artifact_path="fairness",
                                        dst_path=str(tmp_path))
    root = tmp_path / "fairness"
    table = json.loads((root / "fairness_groups.json").read_text())
    pred = model.predict(data[["income", "tenure"]])
    b = data["group"].to_numpy() == "b"
    row = next(r for r in table if r["group"] == "b")
    assert row["mae"] == pytest.approx(mean_absolute_error(data["limit"][b], pred[b]), abs=1e-12)
    assert row["mean_residual"] == pytest.approx(float(np.mean(pred[b] - data["limit"][b])),
                                                 abs=1e-12)
    assert "fairness_regression__group.png" in os.listdir(root / "plots")
    assert (root / "fairness_report.html").read_text().count("mae_difference") >= 1


def test_static_predictions_and_thresholds(regressor: Any) -> None:
    model, data, _ = regressor
    static = data.assign(pred=model.predict(data[["income", "tenure"]]))
    result = evaluate(None, static, {
        "sensitive_features": ["group"], "metrics": ["mean_residual_difference", "mae_ratio"],
        "thresholds": {"mean_residual_difference": {"warning": 0.5, "critical": 1.0}}},
        predictions="pred")
    assert set(result.metrics) >= {"fairness/mean_residual_difference/group",
                                   "fairness/mae_ratio/group"}
    assert MlflowClient().get_run(result.run_id).data.tags["fairness.status"] == "critical"


def test_a_classifier_metric_on_a_regressor_is_a_config_error(regressor: Any) -> None:
    from mlflow.exceptions import MlflowException

    _, data, uri = regressor
    with pytest.raises((MlflowException, ValueError), match="applies to classifiers"):
        evaluate(uri, data, {"sensitive_features": ["group"],
                             "metrics": ["demographic_parity_difference"]})


def test_the_counterpart_gap_is_opt_in_and_reads_the_model_inputs(regressor: Any) -> None:
    from fairmonitor.metrics import counterpart_prediction_gap

    model, data, uri = regressor
    default = evaluate(uri, data, {"sensitive_features": ["group"], "min_group_size": 30})
    assert "fairness/counterpart_prediction_gap/group" not in default.metrics  # opt-in
    names = ["counterpart_prediction_gap", "counterpart_prediction_gap_scaled"]
    result = evaluate(uri, data, {"sensitive_features": ["group"], "min_group_size": 30,
                                  "metrics": names,
                                  "options": {"counterpart_prediction_gap":
                                              {"value_range": [0, 20]}}})
    pred = model.predict(data[["income", "tenure"]])
    direct = counterpart_prediction_gap(data[["income", "tenure"]], pred,
                                        sensitive_features=data["group"], min_group_size=30,
                                        value_range=(0, 20))
    m = result.metrics
    assert m["fairness/counterpart_prediction_gap/group"] == pytest.approx(direct.value,
                                                                           rel=1e-12)
    assert m["fairness/counterpart_prediction_gap_scaled/group"] == pytest.approx(
        direct.value / 20, rel=1e-12)


def test_noise_robustness_of_a_regressor_is_opt_in_and_calls_the_model(regressor: Any) -> None:
    from fairmonitor.robustness.regression import regression_robustness

    model, data, uri = regressor
    names = ["robustness_mae_gap_delta_max", "robustness_ks_gap_delta_max"]
    options = {"levels": [0.5, 1.0], "n_repeats": 3}
    result = evaluate(uri, data, {"sensitive_features": ["group"], "min_group_size": 30,
                                  "metrics": names,
                                  "options": {"robustness_mae_gap_delta_max": options}})
    direct = regression_robustness(model, data[["income", "tenure"]],
                                   sensitive_features=data["group"].to_numpy(),
                                   y_true=data["limit"].to_numpy(), min_group_size=30,
                                   random_state=0, **options)
    m = result.metrics
    assert m["fairness/robustness_mae_gap_delta_max/group"] == pytest.approx(
        direct.mae_delta_max, rel=1e-9)
    assert m["fairness/robustness_ks_gap_delta_max/group"] == pytest.approx(
        direct.ks_delta_max, rel=1e-9, abs=1e-12)


def test_logged_metrics_are_the_reports_values_once_each(regressor: Any, tmp_path: Any) -> None:
    from fairmonitor import Window, evaluate_window

    model, data, uri = regressor
    result = evaluate(uri, data, {"sensitive_features": ["group"], "min_group_size": 30})
    client = MlflowClient()
    logged = client.get_run(result.run_id).data.metrics
    assert set(logged) == set(result.metrics)  # every returned key logged with its value
    for key, value in result.metrics.items():
        assert logged[key] == value or (math.isnan(value) and math.isnan(logged[key]))
    for key in ("fairness/mae_difference/group", "fairness/ci_lower/mae_difference/group"):
        history = client.get_metric_history(result.run_id, key)
        assert len(history) == 1  # MLflow logs the returned metrics; the evaluator does not
    window = Window({"group": data["group"]}, y_pred=model.predict(data[["income", "tenure"]]),
                    y_true=data["limit"].to_numpy())
    report = evaluate_window(window, task="regression", min_group_size=30,
                             confidence_level=None)
    for (metric, attr), value in report.values.items():
        assert result.metrics[f"fairness/{metric}/{attr}"] == pytest.approx(
            value, rel=1e-12, abs=1e-15, nan_ok=True)
    # and the figures of the run: the intervals and one per attribute, each group drawn
    mlflow.artifacts.download_artifacts(run_id=result.run_id, artifact_path="fairness",
                                        dst_path=str(tmp_path))
    from PIL import Image

    for name in ("fairness_intervals.png", "fairness_regression__group.png"):
        with Image.open(tmp_path / "fairness" / "plots" / name) as png:
            assert png.format == "PNG" and min(png.size) >= 180


def test_the_evaluation_dataset_is_sent_to_the_store_once(regressor: Any,
                                                           monkeypatch: Any) -> None:
    # MLflow 3.17 logs the returned metrics against the active run object of `start_run`,
    # whose inputs predate the evaluation dataset: without the evaluator's sync it re-sent
    # the dataset once per returned metric (~140 inputs a run, ~0.07 s of the evaluation)
    _, data, uri = regressor
    sent: list[tuple[str, str]] = []
    log_inputs = MlflowClient.log_inputs

    def counting(self: Any, run_id: str, datasets: Any = None, models: Any = None) -> Any:
        sent.extend((d.dataset.name, d.dataset.digest) for d in datasets or [])
        return log_inputs(self, run_id, datasets=datasets, models=models)

    monkeypatch.setattr(MlflowClient, "log_inputs", counting)
    result = evaluate(uri, data, {"sensitive_features": ["group"], "min_group_size": 30})
    assert len(result.metrics) > 20
    assert len(sent) == 1  # the evaluation dataset, logged by mlflow.models.evaluate
    inputs = MlflowClient().get_run(result.run_id).inputs.dataset_inputs
    assert [(i.dataset.name, i.dataset.digest) for i in inputs] == sent
    # the LoggedModel still gets every returned metric, linked to the dataset
    assert uri.startswith("models:/m-")  # MLflow 3: a LoggedModel's id
    logged_model = mlflow.get_logged_model(uri.removeprefix("models:/"))
    linked = {m.key for m in logged_model.metrics if m.dataset_digest == sent[0][1]}
    assert set(result.metrics) <= linked


def test_the_sync_leaves_other_runs_alone(mlflow_store: Store) -> None:
    from fairmonitor_mlflow.tracking import sync_active_run

    assert mlflow.active_run() is None and sync_active_run("0" * 32) is False
    with mlflow.start_run() as run:
        assert sync_active_run("0" * 32) is False  # not the active run: nothing read
        mlflow.log_input(mlflow.data.from_pandas(credit(20)), context="eval")
        assert run.inputs.dataset_inputs == []  # the object predates the input
        assert sync_active_run(run.info.run_id) is True
        assert [i.dataset.digest for i in mlflow.active_run().inputs.dataset_inputs] == [
            mlflow.data.from_pandas(credit(20)).digest]
