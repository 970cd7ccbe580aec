"""A multiclass model's new versions on reference data (``reference:``, issue 29).

The version's own predictions (class labels) and ``predict_proba`` columns (matched to the
configured classes by the model's ``classes_``, whatever their order) go through the same
report function as the windows: every class one-vs-rest, per class and the worst class.
Oracles: fairlearn's per-class selection rates and ``abcc`` on each class's probability.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import MetricFrame, selection_rate

from fairmonitor.exceptions import ConfigError, InvalidInputError
from fairmonitor.metrics import abcc
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.versions import evaluate_version

CLASSES = ("low", "mid", "high")  # the model's classes_ are sorted: high, low, mid
DPD = "demographic_parity_difference"


def _reference(n: int = 600, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    x1, x2 = rng.normal(size=n) + 0.7 * (sex == "M"), rng.normal(size=n)
    latent = x1 + 0.5 * x2 + rng.normal(scale=0.6, size=n)
    tier = np.array(CLASSES)[np.digitize(latent, [-0.3, 0.7])]
    return pd.DataFrame({"x1": x1, "x2": x2, "sex": sex, "tier": tier})


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    import mlflow
    from mlflow.models import infer_signature
    from sklearn.linear_model import LogisticRegression

    root = tmp_path_factory.mktemp("mc_versions")
    ref = _reference()
    ref.to_csv(root / "reference.csv", index=False)
    model = LogisticRegression().fit(ref[["x1", "x2"]], ref["tier"])
    mlflow.sklearn.save_model(model, root / "v1",
                              signature=infer_signature(ref[["x1", "x2"]], ref["tier"]),
                              pip_requirements=["scikit-learn"])
    return root, model, ref


def _config(root, metrics: str, reference_extra: str = "") -> object:
    return load_config(f"""
models:
  tiers:
    model: models:/tiers/1
    tracking_uri: sqlite:///{root / 'mlflow.db'}
    source: {{kind: sql, url: "sqlite://"}}
    task: multiclass
    scores: {{low: p_low, mid: p_mid, high: p_high}}
    sensitive_features: [sex]
    prediction: predicted
    label: tier
    window: 1h
    metrics: [{DPD}]
    min_group_size: 1
    min_condition_size: 1
    thresholds:
      {DPD}: {{warning: 0.05, critical: 0.2}}
    reference: {{path: {root / 'reference.csv'}, metrics: {metrics}{reference_extra}}}
""").models["tiers"]


def test_a_multiclass_version_is_evaluated_per_class_and_worst_class(saved):
    root, model, ref = saved
    cfg = _config(root, f"[{DPD}, abcc, equalized_odds_difference, "
                        "robustness_flip_rate_gap_max]")
    report = evaluate_version(cfg, str(root / "v1"), ref, version="1")
    pred = model.predict(ref[["x1", "x2"]])
    proba = model.predict_proba(ref[["x1", "x2"]])
    per_class = {}
    for c in CLASSES:
        by = MetricFrame(metrics=selection_rate, y_true=(ref.tier == c).astype(int),
                         y_pred=(pred == c).astype(int), sensitive_features=ref.sex).by_group
        per_class[c] = by.max() - by.min()
        assert report.values[(f"{DPD}__class_{c}", "sex")] == pytest.approx(per_class[c],
                                                                            abs=1e-12)
        column = proba[:, list(model.classes_).index(c)]  # reordered to the config's classes
        assert report.values[(f"abcc__class_{c}", "sex")] == pytest.approx(
            abcc(column, sensitive_features=ref.sex.to_numpy()), abs=1e-12)
        assert math.isfinite(report.values[(f"robustness_flip_rate_gap_max__class_{c}",
                                            "sex")])
    worst = max(per_class, key=per_class.get)
    assert report.values[(DPD, "sex")] == pytest.approx(per_class[worst], abs=1e-12)
    assert report.details[(DPD, "sex")].label == worst
    assert report.statuses[(DPD, "sex")] == (
        "critical" if per_class[worst] > 0.2 else "warning" if per_class[worst] > 0.05
        else "ok")
    assert report.version == "1" and report.n_rows == len(ref)


def test_a_reference_label_outside_the_classes_is_an_error(saved):
    root, _, ref = saved
    cfg = _config(root, f"[{DPD}]")
    bad = ref.assign(tier=ref.tier.where(ref.index != 3, "top"))
    with pytest.raises(InvalidInputError, match=r"reference column 'tier' gives value\(s\) "
                                                r"\['top'\] that are not among the classes"):
        evaluate_version(cfg, str(root / "v1"), bad, version="1")


def test_a_single_reference_score_column_is_a_config_error(saved):
    root, _, _ = saved
    with pytest.raises(ConfigError, match=r"models.tiers.reference.score: names one column"):
        _config(root, f"[{DPD}]", ", score: p_low")
