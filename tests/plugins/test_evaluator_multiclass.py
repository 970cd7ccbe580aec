"""The evaluator on a multiclass classifier: every class one-vs-rest, no pos_label (issue 29).

A real sqlite tracking store (``mlflow_store``), a scikit-learn LogisticRegression on three
classes; the per-class values are checked against fairlearn's MetricFrame and the binary
metric functions on each class's probability column.
"""

from __future__ import annotations

from typing import Any

import mlflow
import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import MetricFrame, false_positive_rate, selection_rate, true_positive_rate

from fairmonitor.metrics import abcc

Store = Any
METRICS = ["demographic_parity_difference", "equalized_odds_difference",
           "equal_opportunity_difference", "abcc", "madd"]


def evaluate(model: Any, data: Any, config: dict[str, Any], **kwargs: Any) -> Any:
    with mlflow.start_run():
        return mlflow.models.evaluate(model, data, model_type="classifier",
                                      evaluators=["fairness"],
                                      evaluator_config={"fairness": config}, **kwargs)


def tiers(n: int = 900, seed: int = 3) -> pd.DataFrame:
    """Two inputs, a group that shifts x1, and three classes binned from a noisy score."""
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b"], size=n)
    x1 = rng.normal(size=n) + 0.7 * (group == "b")
    x2 = rng.normal(size=n)
    latent = x1 + 0.5 * x2 + rng.normal(scale=0.6, size=n)
    tier = np.array(["low", "mid", "high"])[np.digitize(latent, [-0.3, 0.7])]
    return pd.DataFrame({"x1": x1, "x2": x2, "group": group, "tier": tier})


@pytest.fixture(scope="module")
def three_classes(mlflow_store: Store) -> Any:
    from sklearn.linear_model import LogisticRegression

    data = tiers()
    clf = LogisticRegression().fit(data[["x1", "x2"]], data["tier"])
    with mlflow.start_run(run_name="train-tiers"):
        uri = mlflow.sklearn.log_model(clf, name="m", pip_requirements=["scikit-learn"],
                                       input_example=data[["x1", "x2"]].head(3)).model_uri
    return clf, data, uri


def _gap(metric: Any, t: Any, p: Any, groups: Any) -> float:
    by = MetricFrame(metrics=metric, y_true=t, y_pred=p, sensitive_features=groups).by_group
    return float(by.max() - by.min())


def test_every_class_one_vs_rest_without_pos_label(three_classes: Any) -> None:
    clf, data, uri = three_classes
    result = evaluate(uri, data, {"sensitive_features": ["group"], "metrics": METRICS,
                                  "min_group_size": 1, "min_condition_size": 1},
                      targets="tier")
    m = result.metrics
    pred = clf.predict(data[["x1", "x2"]])
    proba = clf.predict_proba(data[["x1", "x2"]])
    for k, c in enumerate(clf.classes_):
        t, p = (data["tier"] == c).astype(int), (pred == c).astype(int)
        sel = _gap(selection_rate, t, p, data["group"])
        tpr = _gap(true_positive_rate, t, p, data["group"])
        fpr = _gap(false_positive_rate, t, p, data["group"])
        key = f"__class_{c}/group"
        assert m[f"fairness/demographic_parity_difference{key}"] == pytest.approx(sel, abs=1e-12)
        assert m[f"fairness/equal_opportunity_difference{key}"] == pytest.approx(tpr, abs=1e-12)
        assert m[f"fairness/equalized_odds_difference{key}"] == pytest.approx(
            max(tpr, fpr), abs=1e-12)
        assert m[f"fairness/abcc{key}"] == pytest.approx(
            abcc(proba[:, k], sensitive_features=data["group"]), abs=1e-12)
    for metric in METRICS:
        per_class = [m[f"fairness/{metric}__class_{c}/group"] for c in clf.classes_]
        assert m[f"fairness/{metric}/group"] == max(per_class)
    run = mlflow.get_run(result.run_id)
    assert run.data.tags["fairness.failures"] == "none"
    key = "fairness/abcc__class_mid/group"
    assert run.data.metrics[key] == m[key]


def test_per_class_artifacts(three_classes: Any) -> None:
    clf, data, uri = three_classes
    result = evaluate(uri, data, {"sensitive_features": ["group"], "metrics": METRICS},
                      targets="tier")
    table = result.artifacts["fairness_classes_csv"].content
    assert len(table) == len(METRICS) * len(clf.classes_)
    assert set(table["class"]) == {str(c) for c in clf.classes_}
    for metric, rows in table.groupby("metric"):
        worst = rows.loc[rows["worst"].astype(bool)]
        assert len(worst) == 1
        assert worst["value"].iloc[0] == pytest.approx(
            result.metrics[f"fairness/{metric}/group"])
    groups = result.artifacts["fairness_groups_csv"].content
    assert set(groups["class"]) == set(clf.classes_) and len(groups) == 2 * len(clf.classes_)
    pred = clf.predict(data[["x1", "x2"]])
    mid = groups[(groups["class"] == "mid") & (groups["group"] == "a")]
    rows = (data["group"] == "a").to_numpy()
    assert mid["selection_rate"].iloc[0] == pytest.approx(np.mean(pred[rows] == "mid"))
    plots = [name for name in result.artifacts if name.startswith("fairness_score_cdf")]
    assert len(plots) == len(clf.classes_)


def test_pos_label_keeps_the_single_class_evaluation(three_classes: Any) -> None:
    clf, data, uri = three_classes
    result = evaluate(uri, data, {"sensitive_features": ["group"], "metrics": METRICS,
                                  "pos_label": "high"}, targets="tier")
    assert not any("__class_" in key for key in result.metrics)
    proba = clf.predict_proba(data[["x1", "x2"]])[:, list(clf.classes_).index("high")]
    assert result.metrics["fairness/abcc/group"] == pytest.approx(
        abcc(proba, sensitive_features=data["group"]))


def test_static_multiclass_predictions_without_a_model(mlflow_store: Store) -> None:
    data = pd.DataFrame({"group": list("aaabbb"), "y": list("xyzxyy"),
                         "pred": list("xyzxxy")})
    result = evaluate(None, data, {"sensitive_features": ["group"], "min_group_size": 1,
                                   "metrics": ["demographic_parity_difference"]},
                      targets="y", predictions="pred")
    m = result.metrics
    # selection rates: x 1/3 vs 2/3, y 1/3 vs 1/3, z 1/3 vs 0
    assert m["fairness/demographic_parity_difference__class_x/group"] == pytest.approx(1 / 3)
    assert m["fairness/demographic_parity_difference__class_y/group"] == 0
    assert m["fairness/demographic_parity_difference/group"] == pytest.approx(1 / 3)
