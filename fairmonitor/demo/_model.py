"""Steps 1-2 of the demo: train the champion, register it in MLflow, evaluate its fairness.

The model is a scikit-learn pipeline (scaling + one-hot + logistic regression) trained on the
bundled UCI Adult data without the sensitive columns (``sex``, ``race``) and without ``fnlwgt``
(a census sampling weight, not a property of the person). Integer columns are cast to float
before training, so MLflow's schema inference has no integer columns to warn about.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..report.thresholds import Threshold

__all__ = ["LABEL", "SENSITIVE", "Champion", "Data", "evaluation_table", "prepare_data",
           "register_and_evaluate", "train"]

LABEL = "income"
SENSITIVE = ("sex", "race")
_NOT_INPUTS = ("income-per-year", LABEL, "fnlwgt", *SENSITIVE)


@dataclass(frozen=True)
class Data:
    """The Adult split: training rows, held-out rows (evaluation and production pool)."""

    train: Any
    held_out: Any
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class Champion:
    """The registered model and the run holding its training and fairness evaluation."""

    name: str
    version: str
    alias: str
    run_id: str
    experiment_id: str
    metrics: Mapping[str, float]   # the evaluator's fairness/... metrics
    tags: Mapping[str, str]        # the run's fairness.* tags
    n_rows: int                    # rows evaluated


def prepare_data(*, seed: int, train_rows: int | None = None) -> Data:
    """Load Adult, split 70/30 (stratified on the label); optionally subsample training rows."""
    import pandas as pd
    from sklearn.model_selection import train_test_split

    from ..datasets import load_adult

    df = load_adult()
    inputs = tuple(c for c in df.columns if c not in _NOT_INPUTS)
    numeric = [c for c in inputs if pd.api.types.is_numeric_dtype(df[c])]
    df[numeric] = df[numeric].astype(float)
    train, held_out = train_test_split(df, test_size=0.3, random_state=seed, stratify=df[LABEL])
    if train_rows is not None and train_rows < len(train):
        train = train.sample(train_rows, random_state=seed)
    return Data(train.reset_index(drop=True), held_out.reset_index(drop=True), inputs)


def train(data: Data) -> Any:
    """Fit the pipeline on the training rows (the sensitive columns are not inputs)."""
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    X = data.train[list(data.inputs)]
    numeric = [c for c in data.inputs if pd.api.types.is_numeric_dtype(X[c])]
    categorical = [c for c in data.inputs if c not in numeric]
    model = make_pipeline(
        ColumnTransformer([("num", StandardScaler(), numeric),
                           ("cat", OneHotEncoder(handle_unknown="ignore"), categorical)]),
        LogisticRegression(max_iter=1000),
    )
    return model.fit(X, data.train[LABEL])


def ensure_experiment(client: Any, name: str, artifact_root: Path) -> str:
    """Return the id of experiment ``name``, created with its artifacts under ``artifact_root``.

    A re-run finds it again; one deleted in the UI is restored rather than failing.
    """
    exp = client.get_experiment_by_name(name)
    if exp is None:
        artifact_root.mkdir(parents=True, exist_ok=True)
        return str(client.create_experiment(name, artifact_location=artifact_root.as_uri()))
    if exp.lifecycle_stage == "deleted":
        client.restore_experiment(exp.experiment_id)
    return str(exp.experiment_id)


def register_and_evaluate(model: Any, data: Data, *, client: Any, experiment_id: str,
                          name: str, alias: str, evaluator_config: Mapping[str, Any],
                          eval_rows: int, seed: int) -> Champion:
    """Log and register ``model``, point ``alias`` at the new version, evaluate its fairness.

    Everything lands in one run: the model, its parameters, and the ``fairness`` evaluator's
    metrics, tags and artifacts (``mlflow.models.evaluate(..., evaluators=["fairness"])`` on
    ``eval_rows`` held-out rows).
    """
    import mlflow

    held_out = data.held_out
    if eval_rows < len(held_out):
        held_out = held_out.sample(eval_rows, random_state=seed)
    eval_data = held_out[[*data.inputs, *SENSITIVE, LABEL]].reset_index(drop=True)
    with mlflow.start_run(experiment_id=experiment_id, run_name="champion: train + evaluate"
                          ) as run:
        mlflow.log_params({"model": "LogisticRegression", "dataset": "adult (bundled)",
                           "train_rows": len(data.train), "eval_rows": len(eval_data),
                           "sensitive_not_inputs": ",".join(SENSITIVE), "seed": seed})
        info = mlflow.sklearn.log_model(model, name="model", pip_requirements=["scikit-learn"],
                                        registered_model_name=name)
        version = str(info.registered_model_version)
        client.set_registered_model_alias(name, alias, version)
        with warnings.catch_warnings():
            # MLflow's dataset schema hint about the integer label column (missing values
            # cannot be integers); a 0/1 label never has missing values
            warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer",
                                    category=UserWarning)
            result = mlflow.models.evaluate(
                f"models:/{name}/{version}", eval_data, targets=LABEL, model_type="classifier",
                evaluators=["fairness"], evaluator_config={"fairness": dict(evaluator_config)})
    tags = {k: v for k, v in client.get_run(run.info.run_id).data.tags.items()
            if k.startswith("fairness.")}
    return Champion(name, version, alias, run.info.run_id, experiment_id,
                    dict(result.metrics), tags, len(eval_data))


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.3f}"


def _limit(t: Threshold | None) -> str:
    if t is None:
        return "-"
    sign = ">" if t.bound == "upper" else "<"
    parts = [f"{sign} {v:g}" for v in (t.warning, t.critical) if v is not None]
    return " / ".join(parts)


def evaluation_table(metrics: Mapping[str, float], thresholds: Sequence[Threshold],
                     attributes: Sequence[str], metric_names: Sequence[str]) -> list[str]:
    """Lines of the evaluation table: one row per metric, a value and verdict per attribute.

    Examples
    --------
    >>> t = [Threshold("equal_opportunity_difference", warning=0.2, critical=0.3)]
    >>> for line in evaluation_table(
    ...         {"fairness/equal_opportunity_difference/sex": 0.25,
    ...          "fairness/demographic_parity_difference/sex": 0.17}, t, ["sex"],
    ...         ["demographic_parity_difference", "equal_opportunity_difference"]):
    ...     print(line.rstrip())
      metric                          sex               threshold (warning / critical)
      demographic_parity_difference   0.170             -
      equal_opportunity_difference    0.250 WARNING     > 0.2 / > 0.3
    """
    by_metric = {t.metric: t for t in thresholds if t.attribute is None}
    width = max(len(m) for m in metric_names)
    head = f"  {'metric':{width}s}   " + "".join(f"{a:18s}" for a in attributes)
    lines = [head + "threshold (warning / critical)"]
    for name in metric_names:
        t = by_metric.get(name)
        cells = []
        for attr in attributes:
            value = metrics.get(f"fairness/{name}/{attr}", math.nan)
            verdict = "" if t is None else t.severity(value)
            shown = {"ok": "ok", "undefined": "n/a"}.get(verdict, verdict.upper())
            cells.append(f"{_fmt(value) + (' ' + shown if shown else ''):18s}")
        lines.append(f"  {name:{width}s}   " + "".join(cells) + _limit(t))
    return lines


def group_counts(metrics: Mapping[str, float], attribute: str) -> dict[str, int]:
    """Rows per group of ``attribute`` from the evaluator's ``fairness/group_count/...`` keys.

    >>> group_counts({"fairness/group_count/sex/Male": 20.0, "fairness/abcc/sex": 0.1}, "sex")
    {'Male': 20}
    """
    prefix = f"fairness/group_count/{attribute}/"
    return {k[len(prefix):]: int(v) for k, v in metrics.items() if k.startswith(prefix)}
