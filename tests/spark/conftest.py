"""Fixtures of the Spark tests: ONE ``local[2]`` session for the whole run, and data.

Every test here is marked ``spark`` (``pytest -m spark`` runs them, ``-m "not spark"`` leaves
them out). The session binds to 127.0.0.1 (no network lookups, no open port beyond the
loopback), has no UI, two shuffle partitions and the UTC session time zone (the monitor reads
naive timestamps as UTC), and is stopped when the test run ends. Its Python workers run this
interpreter (``PYSPARK_PYTHON``), so they import the fairmonitor under test.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The shared ``local[2]`` SparkSession (started once, 5-10 s; stopped at the end)."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # not the host's first interface
    # the workers import fairmonitor and the plugin from where this run imports them
    roots = [str(Path(__file__).resolve().parents[2]),
             str(Path(__file__).resolve().parents[2] / "plugins")]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [*roots, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    session = (SparkSession.builder.master("local[2]").appName("fairmonitor-tests")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .getOrCreate())
    try:
        yield session
    finally:
        session.stop()


@dataclass(frozen=True)
class Store:
    uri: str
    root: Path
    experiment_id: str


@pytest.fixture(scope="session")
def mlflow_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A sqlite tracking store (as tests/plugins/conftest.py), artifacts in a temp dir."""
    import mlflow

    root = tmp_path_factory.mktemp("mlflow-spark")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cwd = os.getcwd()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        mp.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        os.chdir(root)
        try:
            mlflow.set_tracking_uri(uri)
            experiment_id = mlflow.create_experiment(
                "fairmonitor-spark-tests", artifact_location=(root / "artifacts").as_uri())
            mlflow.set_experiment(experiment_id=experiment_id)
            yield Store(uri, root, experiment_id)
        finally:
            os.chdir(cwd)
            mlflow.set_tracking_uri(None)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def prediction_log() -> Any:
    """``prediction_log(n, seed=17, hours=4)``: a synthetic prediction log (below)."""
    return _prediction_log


def _prediction_log(n: int, *, seed: int = 17, hours: int = 4) -> pd.DataFrame:
    """``n`` logged predictions over ``hours`` hours: 2 attributes, labels, scores, features.

    Timestamps are naive UTC (as Spark returns them under the UTC session time zone).
    """
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n, p=[0.4, 0.6])
    race = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    x1 = rng.normal(size=n)
    x2 = rng.integers(0, 5, n).astype(np.int64)
    logit = 0.8 * x1 + 0.3 * (sex == "M") - 0.2 * (race == "c") + 0.1 * x2
    score = 1 / (1 + np.exp(-logit))
    label = (rng.random(n) < score).astype(np.int64)
    start = pd.Timestamp("2026-01-05 00:00:00")
    ts = start + pd.to_timedelta(np.sort(rng.uniform(0, hours * 3600, n)), unit="s")
    return pd.DataFrame({"timestamp": ts.astype("datetime64[us]"), "sex": sex, "race": race,
                         "x1": x1, "x2": x2, "score": score, "label": label})
