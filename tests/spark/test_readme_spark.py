"""The docs' Spark example runs, on the shared session, and gives evaluate_window's values.

``tests/test_readme.py`` runs the other Python blocks as a script; the blocks that import
pyspark run here, in process, so that their ``getOrCreate()`` gets the one shared ``local[2]``
session instead of starting a second JVM.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient

from fairmonitor import Window, evaluate_window

SPARK_GUIDE = Path(__file__).resolve().parents[2] / "docs" / "spark-and-rollups.md"


def spark_blocks() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", SPARK_GUIDE.read_text(), flags=re.DOTALL)
    return [b for b in blocks if not b.lstrip().startswith(">>>")
            and ("from pyspark" in b or "import pyspark" in b)]


def test_readme_spark_example_runs_and_equals_evaluate_window(spark, tmp_path, capsys,
                                                              monkeypatch):
    from mlflow.tracking import fluent

    blocks = spark_blocks()
    assert len(blocks) == 1, "the Spark guide has one Spark example"
    namespace: dict = {"__name__": "__readme__"}
    # a fresh user session: no experiment or tracking URI left by other tests' fixtures
    for name in ("MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(fluent, "_active_experiment_id", None)
    cwd, uri = os.getcwd(), mlflow.get_tracking_uri()
    os.chdir(tmp_path)
    try:
        exec(compile(blocks[0], "docs/spark-and-rollups.md (Spark example)", "exec"), namespace)
    finally:
        os.chdir(cwd)
        tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
        mlflow.set_tracking_uri(uri)
    assert namespace["spark"] is spark  # the shared session, not a second one
    reports, log = namespace["reports"], namespace["log"]
    assert len(reports) == 4 and sum(r.n_rows for r in reports.values()) == len(log) == 20_000
    assert len(capsys.readouterr().out.strip().splitlines()) == 4
    ts = log["timestamp"].dt.tz_localize("UTC")
    metrics = ["demographic_parity_difference", "equalized_odds_difference", "abcc", "madd"]
    for start, report in reports.items():
        rows = log[(ts >= start) & (ts < report.end)]
        local = evaluate_window(Window.from_frame(rows, sensitive_features=["sex", "age_group"],
                                                  label="label", score="score", features=[]),
                                metrics=metrics)
        assert report.group_counts == local.group_counts
        for key, value in local.values.items():
            assert not math.isnan(value) and abs(report.values[key] - value) <= 1e-12, key
    run_id = namespace["run"].info.run_id
    history = MlflowClient(tracking_uri=tracking).get_metric_history(
        run_id, "fairness/demographic_parity_difference/sex")
    assert sorted(m.step for m in history) == [0, 1, 2, 3]
