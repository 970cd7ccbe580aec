"""A regression model's new versions on reference data: noise robustness in the monitor (#29).

As for a classifier, the monitor calls the model only on a new version's ``reference`` rows
(production windows hold logged predictions, never the model). A regressor's version is
loaded with ``mlflow.pyfunc``, its continuous ``predict`` gives the predictions and the
noise-robustness metrics call it on the perturbed copies. Oracles: fairlearn's per-group MAE,
``regression_robustness`` called directly on the sklearn model with the evaluator's seed, and
``evaluate_window`` on the same rows.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import MetricFrame
from sklearn.metrics import mean_absolute_error

from fairmonitor.exceptions import ConfigError
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.versions import evaluate_version
from fairmonitor.report import Window, evaluate_window
from fairmonitor.report.registry import METRICS, task_metrics
from fairmonitor.robustness.regression import regression_robustness

NOISE = ("robustness_mae_gap_ratio_max", "robustness_mae_gap_delta_max",
         "robustness_ks_gap_ratio_max", "robustness_ks_gap_delta_max")
OPTIONS = {"levels": [0.5, 1.0], "n_repeats": 3}


def _reference(n: int = 500, seed: int = 0) -> pd.DataFrame:
    """Credit limits driven by income and tenure; group b's limits set 1.5k lower."""
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b"], size=n)
    income = rng.normal(50, 12, size=n)
    tenure = rng.uniform(0, 10, size=n)
    limit = 0.2 * income + 0.3 * tenure - 1.5 * (group == "b") + rng.normal(0, 1, size=n)
    return pd.DataFrame({"income": income, "tenure": tenure, "group": group, "limit": limit})


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A Ridge regressor saved as an MLflow model (a file store), and its reference data."""
    import mlflow
    from mlflow.models import infer_signature
    from sklearn.linear_model import Ridge

    root = tmp_path_factory.mktemp("reg_versions")
    ref = _reference()
    ref.to_csv(root / "reference.csv", index=False)
    inputs = ref[["income", "tenure"]]
    model = Ridge(alpha=1.0).fit(inputs, ref["limit"])
    mlflow.sklearn.save_model(model, root / "v1", signature=infer_signature(inputs, ref["limit"]),
                              pip_requirements=["scikit-learn"])  # skips slow inference
    return root, model, ref


def _yaml(root, metrics: str, reference_extra: str = "", seed: int = 0) -> str:
    return f"""
models:
  limits:
    task: regression
    model: models:/limits/1
    tracking_uri: sqlite:///{root / 'mlflow.db'}
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [group]
    prediction: predicted_limit
    label: limit
    window: 1h
    seed: {seed}
    metrics: [mae_difference]
    min_group_size: 30
    options:
      robustness_mae_gap_ratio_max: {{levels: [0.5, 1.0], n_repeats: 3}}
    thresholds:
      robustness_mae_gap_delta_max: {{warning: 0.05, critical: 0.5}}
    reference: {{path: {root / 'reference.csv'}, metrics: {metrics}{reference_extra}}}
"""


def _config(root, metrics: str, reference_extra: str = "", seed: int = 0):
    return load_config(_yaml(root, metrics, reference_extra, seed)).models["limits"]


def test_a_regression_config_takes_the_noise_metrics_on_reference_data(saved):
    root, _, _ = saved
    cfg = _config(root, f"[{', '.join(NOISE)}]")
    assert cfg.reference is not None and tuple(cfg.reference.metrics) == NOISE
    assert cfg.evaluation.task == "regression"


def test_the_version_noise_metrics_equal_the_evaluators(saved):
    root, model, ref = saved
    cfg = _config(root, f"[mae_difference, {', '.join(NOISE)}]")
    report = evaluate_version(cfg, str(root / "v1"), ref, version="1")
    inputs = ref[["income", "tenure"]]
    # the evaluator's call (plugin test: random_state 0, its default seed) on the same rows
    direct = regression_robustness(model, inputs, sensitive_features=ref["group"].to_numpy(),
                                   y_true=ref["limit"].to_numpy(), min_group_size=30,
                                   random_state=0, **OPTIONS)
    want = {"robustness_mae_gap_ratio_max": direct.mae_ratio_max,
            "robustness_mae_gap_delta_max": direct.mae_delta_max,
            "robustness_ks_gap_ratio_max": direct.ks_ratio_max,
            "robustness_ks_gap_delta_max": direct.ks_delta_max}
    for name, value in want.items():
        assert math.isfinite(value)
        assert report.values[(name, "group")] == pytest.approx(value, rel=1e-9, abs=1e-12), name
    # y_pred is the version's own continuous prediction: fairlearn's MAE gap on it
    frame = MetricFrame(metrics=mean_absolute_error, y_true=ref["limit"],
                        y_pred=model.predict(inputs), sensitive_features=ref["group"])
    assert abs(report.values[("mae_difference", "group")] - frame.difference()) <= 1e-12
    # the threshold governs the reference metric (its status is the registry's comparison)
    delta = want["robustness_mae_gap_delta_max"]
    assert report.statuses[("robustness_mae_gap_delta_max", "group")] == (
        "critical" if delta > 0.5 else "warning" if delta > 0.05 else "ok")
    # evaluate_window on the same rows and seed: the same values
    window = Window({"group": ref["group"]}, y_pred=model.predict(inputs), y_true=ref["limit"],
                    X=inputs, predict=model.predict)
    same = evaluate_window(window, metrics=list(NOISE), task="regression", min_group_size=30,
                           rng=np.random.default_rng(0),
                           options={"robustness_mae_gap_ratio_max": OPTIONS})
    for name in NOISE:
        assert report.values[(name, "group")] == pytest.approx(same.values[(name, "group")],
                                                               rel=1e-12, abs=1e-15), name
    assert report.version == "1" and report.n_rows == len(ref)


def test_the_version_noise_metrics_equal_the_mlflow_evaluators_report(saved):
    """The evaluator plugin's own window and report (what ``mlflow.models.evaluate(...,
    model_type="regressor")`` computes before logging), on the same loaded version."""
    from types import SimpleNamespace

    import mlflow.pyfunc
    from fairmonitor_mlflow.config import parse_config
    from fairmonitor_mlflow.regression import build_regression_window
    from fairmonitor_mlflow.reporting import compute_report

    root, _, ref = saved
    cfg = _config(root, f"[{', '.join(NOISE)}]")
    monitor = evaluate_version(cfg, str(root / "v1"), ref, version="1")
    features = ref.drop(columns="limit")
    dataset = SimpleNamespace(  # MLflow's EvaluationDataset: the fields the evaluator reads
        features_data=features, feature_names=list(features.columns),
        labels_data=ref["limit"].to_numpy(), targets_name="limit", predictions_data=None,
        predictions_name=None)
    config = parse_config({"sensitive_features": ["group"], "min_group_size": 30,
                           "metrics": list(NOISE),
                           "options": {"robustness_mae_gap_ratio_max": OPTIONS}})
    built = build_regression_window(dataset, mlflow.pyfunc.load_model(str(root / "v1")), config)
    evaluator = compute_report(built, config)
    for name in NOISE:
        assert math.isfinite(evaluator.values[(name, "group")])
        assert monitor.values[(name, "group")] == pytest.approx(
            evaluator.values[(name, "group")], rel=1e-12, abs=1e-15), name


def test_default_reference_metrics_of_a_regressor_are_the_regression_ones(saved):
    root, _, ref = saved
    cfg = _config(root, "null")
    report = evaluate_version(cfg, str(root / "v1"), ref, version="1")
    assert set(report.metrics) <= set(task_metrics("regression"))
    assert set(report.metrics) >= {"mae_difference", "prediction_ks_distance", *NOISE}
    assert not any(METRICS[m].task != "regression" for m, _ in report.values)


def test_an_integer_input_is_rounded_back_for_the_signature(tmp_path):
    """A version whose signature has a continuous integer column (> 20 distinct values): the
    noisy copies are rounded back, as a classifier's, or MLflow's schema check refuses them."""
    import mlflow
    from mlflow.models import infer_signature
    from sklearn.linear_model import Ridge

    ref = _reference(300).assign(income=lambda d: d["income"].round().astype("int64"))
    inputs = ref[["income", "tenure"]]
    mlflow.sklearn.save_model(Ridge().fit(inputs, ref["limit"]), tmp_path / "v1",
                              signature=infer_signature(inputs, ref["limit"]),
                              pip_requirements=["scikit-learn"])
    ref.to_csv(tmp_path / "reference.csv", index=False)
    cfg = _config(tmp_path, f"[{', '.join(NOISE)}]")
    report = evaluate_version(cfg, str(tmp_path / "v1"), ref, version="1")
    assert report.reasons == {}
    assert all(math.isfinite(report.values[(n, "group")]) for n in NOISE)


@pytest.mark.parametrize(("metrics", "extra", "message"), [
    ("[robustness_ratio_max]", "", "'robustness_ratio_max' applies to binary models"),
    ("[robustness_mae_gap_delta_max]", ", score: s",
     "reference.score: task: regression reads 'prediction'"),
])
def test_reference_config_errors_of_a_regressor(saved, metrics, extra, message):
    root, _, _ = saved
    with pytest.raises(ConfigError, match=message):
        _config(root, metrics, extra)


def test_a_noise_metric_in_the_windows_points_to_the_reference(saved):
    root, _, _ = saved
    text = _yaml(root, "null").replace("metrics: [mae_difference]",
                                       "metrics: [robustness_mae_gap_delta_max]")
    with pytest.raises(ConfigError, match="calls the model, which production windows do not; "
                                          "list it under 'reference.metrics' instead"):
        load_config(text)


class OneVersion:
    """The MlflowClient call ``detect_new_versions`` makes for ``models:/limits/1``."""

    def get_model_version(self, name, version):
        from types import SimpleNamespace

        return SimpleNamespace(name=name, version=str(version))


def test_a_new_regressor_version_reaches_the_gauges_and_errors_are_counted(saved, monkeypatch):
    """The service's path: detect, evaluate, export (values, per-level ratios, alert state);
    a version that cannot be evaluated is counted under its stage and retried."""
    import shutil
    import subprocess

    import mlflow.pyfunc
    from prometheus_client import CollectorRegistry, generate_latest

    from fairmonitor.monitor.checkpoint import MemoryCheckpoint
    from fairmonitor.monitor.sinks.prometheus import FairnessCollector
    from fairmonitor.monitor.versions import evaluate_new_versions

    root, _, ref = saved
    real_load = mlflow.pyfunc.load_model
    monkeypatch.setattr(mlflow.pyfunc, "load_model", lambda uri: real_load(str(root / "v1")))
    config = load_config(_yaml(root, f"[{', '.join(NOISE)}]"))
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=config.models, build_version="0.0.0")
    store = MemoryCheckpoint()
    (result,) = evaluate_new_versions(
        config, store, client=OneVersion(),
        on_report=lambda nv, r: collector.observe_reference(nv.model, nv.version, r))
    assert (result.version, dict(result.errors)) == ("1", {})
    assert store.load("limits").versions == {"1"}
    at = {"model": "limits", "version": "1", "sensitive_attribute": "group"}
    for name in NOISE:
        assert registry.get_sample_value(f"fairmonitor_{name}", at) == pytest.approx(
            result.report.values[(name, "group")], rel=1e-12)
    detail = result.report.details[("robustness_mae_gap_delta_max", "group")]
    for level, ratio in zip(detail.levels, detail.ratios["mae_difference"], strict=True):
        assert registry.get_sample_value("fairmonitor_robustness_ratio_by_level", {
            **at, "metric": "mae_difference", "level": format(level, "g")}) == ratio
    state = {"ok": 0.0, "warning": 1.0, "critical": 2.0}[
        result.report.statuses[("robustness_mae_gap_delta_max", "group")]]
    assert registry.get_sample_value("fairmonitor_alert_state", {
        **at, "metric": "robustness_mae_gap_delta_max"}) == state
    text = generate_latest(registry).decode()
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool missing: apt-get install prometheus"
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr

    # targets that are not numbers: a data error, counted, the version not marked evaluated
    ref.assign(limit="n/a").to_csv(root / "bad.csv", index=False)
    bad = load_config(_yaml(root, f"[{NOISE[1]}]").replace("reference.csv", "bad.csv"))
    (failed,) = evaluate_new_versions(bad, MemoryCheckpoint(), client=OneVersion())
    assert failed.report is None and set(failed.errors) == {"data"}
    assert "reference column 'limit'" in failed.errors["data"]
    for stage in failed.errors:
        collector.record_error(failed.model, stage)
    assert registry.get_sample_value("fairmonitor_errors_total",
                                     {"model": "limits", "stage": "data"}) == 1.0
