"""Fixtures for the MLflow plugin tests: one sqlite tracking store per session, and a model.

The store's first use runs its migrations (7-12 s, integration.md §1.5), so it is created once.
The model is a scikit-learn pipeline trained on the bundled German credit data without the
sensitive columns, logged with explicit ``pip_requirements`` (skipping the 12-18 s
requirements inference, §1.6).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SENSITIVE = ["sex", "age_group"]
LABEL = "good_credit"
NOT_INPUTS = ["credit", LABEL, "personal_status"]


@dataclass(frozen=True)
class Store:
    uri: str
    root: Path
    experiment_id: str


@dataclass(frozen=True)
class GermanModel:
    clf: Any            # the fitted sklearn pipeline
    data: Any           # evaluation frame: model inputs + sensitive columns + label
    inputs: list[str]   # the model's input columns
    model_uri: str      # models:/m-...
    model_id: str


def _train_pipeline(frame: Any, inputs: list[str]) -> Any:
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numeric = [c for c in inputs if pd.api.types.is_numeric_dtype(frame[c])]
    categorical = [c for c in inputs if c not in numeric]
    model = make_pipeline(
        ColumnTransformer([("num", StandardScaler(), numeric),
                           ("cat", OneHotEncoder(handle_unknown="ignore"), categorical)]),
        LogisticRegression(max_iter=1000),
    )
    return model.fit(frame[inputs], frame[LABEL])


@pytest.fixture(scope="session")
def train_pipeline() -> Any:
    """``train_pipeline(frame, inputs)``: fit the scaler + one-hot + logistic regression."""
    return _train_pipeline


@pytest.fixture(scope="session")
def mlflow_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A sqlite tracking store and an experiment with its artifacts in a temporary directory."""
    import mlflow

    root = tmp_path_factory.mktemp("mlflow-plugin")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cwd = os.getcwd()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        mp.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        os.chdir(root)  # anything MLflow still puts in ./mlruns lands here, not in the repo
        try:
            mlflow.set_tracking_uri(uri)
            experiment_id = mlflow.create_experiment(
                "fairmonitor-plugin-tests", artifact_location=(root / "artifacts").as_uri())
            mlflow.set_experiment(experiment_id=experiment_id)
            yield Store(uri, root, experiment_id)
        finally:
            os.chdir(cwd)
            mlflow.set_tracking_uri(None)  # type: ignore[arg-type]  # back to the env default


@pytest.fixture(scope="session")
def german_model(mlflow_store: Store) -> GermanModel:
    """The pipeline trained on every German row, logged as an MLflow sklearn model."""
    import mlflow

    from fairmonitor.datasets import load_german

    df = load_german()
    inputs = [c for c in df.columns if c not in {*NOT_INPUTS, *SENSITIVE}]
    clf = _train_pipeline(df, inputs)
    with mlflow.start_run(run_name="train"):
        info = mlflow.sklearn.log_model(clf, name="model", pip_requirements=["scikit-learn"])
    data = df[[*inputs, *SENSITIVE, LABEL]].copy()
    return GermanModel(clf, data, inputs, info.model_uri, info.model_id)
