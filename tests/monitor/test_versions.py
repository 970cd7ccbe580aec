from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.versions import (
    detect_new_versions,
    evaluate_new_versions,
    evaluate_version,
    mark_version_evaluated,
)

DPD = "demographic_parity_difference"


def _reference(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = np.tile([0, 1], n // 2)
    x1 = rng.normal(size=n) + 0.8 * sex
    x2 = rng.integers(0, 5, size=n)
    label = (x1 + 0.2 * x2 + rng.normal(scale=0.5, size=n) > 0.8).astype(int)
    return pd.DataFrame({"x1": x1, "x2": x2, "sex": sex, "label": label})


class FakeRegistry:
    """The three MlflowClient calls detect_new_versions makes, over an in-memory registry
    (a real SQLite registry costs ~10-20 s of schema migrations per test session)."""

    def __init__(self, versions, aliases):
        self.versions, self.aliases = versions, aliases

    def get_model_version_by_alias(self, name, alias):
        if (name, alias) not in self.aliases:
            raise LookupError(f"registered model alias {alias} not found")
        return SimpleNamespace(name=name, version=self.aliases[(name, alias)])

    def get_model_version(self, name, version):
        return SimpleNamespace(name=name, version=str(version))

    def search_model_versions(self, filter_string):
        name = filter_string.split("'")[1]
        return [SimpleNamespace(name=name, version=v) for v in self.versions.get(name, [])]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """Two saved MLflow models (v1 reads x1, x2; v2 also sex), reference data, and a fake
    registry where 'credit' has versions 1, 2, 10 and alias 'champion' on 1."""
    import mlflow
    from mlflow.models import infer_signature
    from sklearn.linear_model import LogisticRegression

    root = tmp_path_factory.mktemp("mlflow")
    ref = _reference()
    ref_path = root / "reference.csv"
    ref.to_csv(ref_path, index=False)
    paths = {}
    for version, cols in (("1", ["x1", "x2"]), ("2", ["x1", "x2", "sex"])):
        model = LogisticRegression().fit(ref[cols], ref["label"])
        paths[version] = root / f"v{version}"
        mlflow.sklearn.save_model(model, paths[version],
                                  signature=infer_signature(ref[cols], ref["label"]),
                                  pip_requirements=["scikit-learn"])  # skips slow inference
    client = FakeRegistry({"credit": ["2", "10", "1"]}, {("credit", "champion"): "1"})
    return f"sqlite:///{root / 'mlflow.db'}", ref_path, client, paths


def _config(uri: str, ref_path, model: str, metrics: str = "null"):
    return load_config(f"""
models:
  credit:
    model: {model}
    tracking_uri: {uri}
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    label: label
    window: 1h
    metrics: [{DPD}]
    thresholds:
      {DPD}: {{warning: 0.05, critical: 0.1}}
    reference: {{path: {ref_path}, metrics: {metrics}}}
""")


def test_alias_detection_and_moving_the_alias(registry):
    uri, ref_path, client, _ = registry
    cfg = _config(uri, ref_path, "models:/credit@champion").models["credit"]
    store = MemoryCheckpoint()
    (new,) = detect_new_versions(cfg, store, client=client)
    assert (new.version, new.uri, new.alias) == ("1", "models:/credit/1", "champion")
    mark_version_evaluated(store, "credit", "1")
    assert detect_new_versions(cfg, store, client=client) == []
    moved = FakeRegistry(client.versions, {("credit", "champion"): "2"})
    assert [v.version for v in detect_new_versions(cfg, store, client=moved)] == ["2"]


def test_fixed_version(registry):
    uri, ref_path, client, _ = registry
    cfg = _config(uri, ref_path, "models:/credit/10").models["credit"]
    assert [v.uri for v in detect_new_versions(cfg, MemoryCheckpoint(), client=client)] == [
        "models:/credit/10"]


def test_bare_name_lists_every_unevaluated_version_oldest_first(registry):
    uri, ref_path, client, _ = registry
    cfg = _config(uri, ref_path, "credit").models["credit"]
    store = MemoryCheckpoint()
    assert [v.version for v in detect_new_versions(cfg, store, client=client)] == ["1", "2",
                                                                                    "10"]
    mark_version_evaluated(store, "credit", "2")
    assert [v.version for v in detect_new_versions(cfg, store, client=client)] == ["1", "10"]


def test_no_registered_model_means_nothing_to_detect(registry):
    uri, ref_path, client, _ = registry
    cfg = load_config(f"""
models:
  credit:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    metrics: [{DPD}]
""").models["credit"]
    assert detect_new_versions(cfg, MemoryCheckpoint(), client=client) == []


def test_evaluate_version_computes_fairness_and_robustness_with_the_model(registry):
    from sklearn.linear_model import LogisticRegression

    uri, ref_path, _, paths = registry
    cfg = _config(uri, ref_path, "models:/credit/1",
                  f"[{DPD}, robustness_ratio_max, robustness_flip_rate_gap_max]").models["credit"]
    ref = pd.read_csv(ref_path)
    report = evaluate_version(cfg, str(paths["1"]), ref, version="1")
    assert report.version == "1"
    assert report.n_rows == 400
    # y_pred is the model's own prediction on the reference rows
    pred = LogisticRegression().fit(ref[["x1", "x2"]], ref["label"]).predict(ref[["x1", "x2"]])
    rates = [pred[ref["sex"] == g].mean() for g in (0, 1)]
    assert report.values[(DPD, "sex")] == pytest.approx(abs(rates[1] - rates[0]))
    assert report.statuses[(DPD, "sex")] == "critical"
    assert math.isfinite(report.values[("robustness_ratio_max", "sex")])
    assert math.isfinite(report.values[("robustness_flip_rate_gap_max", "sex")])


def test_default_reference_metrics_are_all_the_data_allows(registry):
    uri, ref_path, _, paths = registry
    cfg = _config(uri, ref_path, "models:/credit/1").models["credit"]
    report = evaluate_version(cfg, str(paths["1"]), pd.read_csv(ref_path), version="1")
    from fairmonitor import METRICS

    needs_scores = [m for m, spec in METRICS.items() if spec.needs_scores]
    assert set(report.metrics) >= {DPD, "equalized_odds_difference", "robustness_ratio_max",
                                   *needs_scores}  # scores from predict_proba


def test_model_with_a_sensitive_input_gets_it_unperturbed(registry):
    uri, ref_path, _, paths = registry
    cfg = _config(uri, ref_path, "models:/credit/2",
                  f"[{DPD}, robustness_flip_rate_gap_max]").models["credit"]
    report = evaluate_version(cfg, str(paths["2"]), pd.read_csv(ref_path), version="2")
    assert set(report.values) == {(DPD, "sex"), ("robustness_flip_rate_gap_max", "sex")}
    assert all(math.isfinite(v) for v in report.values.values())
    assert report.reasons == {}


def test_evaluate_new_versions_marks_done_and_never_raises(registry, monkeypatch):
    import mlflow.pyfunc

    uri, ref_path, client, paths = registry
    real_load = mlflow.pyfunc.load_model
    # the fake registry resolves models:/credit/N to the saved model directory
    monkeypatch.setattr(mlflow.pyfunc, "load_model",
                        lambda u: real_load(str(paths[u.rsplit("/", 1)[1]])))
    cfg = _config(uri, ref_path, "models:/credit@champion", f"[{DPD}]")
    store = MemoryCheckpoint()
    seen, reports = [], []
    (result,) = evaluate_new_versions(cfg, store, client=client, on_result=[seen.append],
                                      on_report=lambda nv, r: reports.append((nv.version, r)))
    assert (result.version, dict(result.errors)) == ("1", {})
    assert result.report.values[(DPD, "sex")] > 0.1
    assert seen == [result]
    assert reports == [("1", result.report)]
    assert store.load("credit").versions == {"1"}
    assert evaluate_new_versions(cfg, store, client=client) == []
    # an alias that does not exist: logged, recorded, not raised
    bad = _config(uri, ref_path, "models:/credit@nope", f"[{DPD}]")
    (failed,) = evaluate_new_versions(bad, MemoryCheckpoint(), client=client)
    assert failed.report is None
    assert set(failed.errors) == {"mlflow"}
    # a version that cannot be loaded: recorded, and NOT marked evaluated (retried later)
    ghost = FakeRegistry({}, {("credit", "champion"): "99"})
    fresh = MemoryCheckpoint()
    (lost,) = evaluate_new_versions(cfg, fresh, client=ghost)
    assert set(lost.errors) == {"data"}
    assert fresh.load("credit").versions == frozenset()


def test_failing_report_hook_is_recorded(registry, monkeypatch):
    import mlflow.pyfunc

    uri, ref_path, client, paths = registry
    real_load = mlflow.pyfunc.load_model
    monkeypatch.setattr(mlflow.pyfunc, "load_model",
                        lambda u: real_load(str(paths[u.rsplit("/", 1)[1]])))

    def broken(nv, report):
        raise RuntimeError("sink down")

    cfg = _config(uri, ref_path, "models:/credit@champion", f"[{DPD}]")
    store = MemoryCheckpoint()
    (result,) = evaluate_new_versions(cfg, store, client=client, on_report=broken)
    assert dict(result.errors) == {"export": "RuntimeError: sink down"}
    assert store.load("credit").versions == {"1"}
