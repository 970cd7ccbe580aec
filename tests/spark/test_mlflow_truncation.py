"""``mlflow.models.evaluate`` cuts a Spark DataFrame to its first 10,000 rows, silently.

MLflow 3 turns a Spark DataFrame into a ``SparkDataset`` whose ``to_evaluation_dataset`` takes
``limit(10000).toPandas()`` (``EvaluationDataset.SPARK_DATAFRAME_LIMIT``); no warning says so.
The ``fairness`` evaluator then warns (``TruncatedDatasetWarning``) and tags the run, pointing
to ``fairmonitor.spark``, which logs the full data's values.
"""

from __future__ import annotations

import warnings

import fairmonitor_mlflow
import mlflow
from mlflow.data.evaluation_dataset import EvaluationDataset


def _evaluate(data, **kwargs):
    with mlflow.start_run():
        return mlflow.models.evaluate(
            None, data, targets="label", predictions="pred", model_type="classifier",
            evaluators=["fairness"],
            evaluator_config={"fairness": {"sensitive_features": ["sex"],
                                           "score_column": "score"}}, **kwargs)


def test_evaluate_cuts_a_spark_dataframe_to_10000_rows_and_the_evaluator_says_so(
        spark, mlflow_store, prediction_log):
    assert EvaluationDataset.SPARK_DATAFRAME_LIMIT == 10_000
    frame = prediction_log(12_000).drop(columns="timestamp")
    frame["pred"] = (frame["score"] >= 0.5).astype("int64")
    sdf = spark.createDataFrame(frame)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _evaluate(sdf)
    # the truncation itself: the groups add up to 10,000 rows, not 12,000
    counts = {k: v for k, v in result.metrics.items() if k.startswith("fairness/group_count/sex/")}
    assert sum(counts.values()) == 10_000
    # and the evaluator says so, loudly: a warning and a run tag that point to the Spark path
    ours = [w for w in caught
            if w.category.__name__ == "TruncatedDatasetWarning"]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert issubclass(ours[0].category, fairmonitor_mlflow.TruncatedDatasetWarning)
    text = str(ours[0].message)
    assert "10,000 rows" in text and "fairmonitor.spark" in text
    tags = mlflow.get_run(result.run_id).data.tags
    assert tags["fairness.truncated"].startswith("true")
    assert "fairmonitor.spark" in tags["fairness.truncated"]


def test_a_pandas_frame_of_exactly_10000_rows_is_not_called_truncated(
        spark, mlflow_store, prediction_log):
    frame = prediction_log(10_000).drop(columns="timestamp")
    frame["pred"] = (frame["score"] >= 0.5).astype("int64")
    result = _evaluate(frame)  # the suite turns any stray warning into an error
    assert "fairness.truncated" not in mlflow.get_run(result.run_id).data.tags


def test_a_spark_dataframe_below_the_limit_is_not_called_truncated(
        spark, mlflow_store, prediction_log):
    frame = prediction_log(2_000).drop(columns="timestamp")
    frame["pred"] = (frame["score"] >= 0.5).astype("int64")
    result = _evaluate(spark.createDataFrame(frame))
    assert sum(v for k, v in result.metrics.items()
               if k.startswith("fairness/group_count/sex/")) == 2_000
    assert "fairness.truncated" not in mlflow.get_run(result.run_id).data.tags


def test_a_cut_spark_dataframe_of_a_regressor_names_the_regression_spark_path(
        spark, mlflow_store):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 12_000
    target = rng.normal(20, 5, n)
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], n), "limit": target,
                          "pred": target + rng.normal(0, 1, n)})
    with warnings.catch_warnings(record=True) as caught, mlflow.start_run():
        warnings.simplefilter("always")
        result = mlflow.models.evaluate(
            None, spark.createDataFrame(frame), targets="limit", predictions="pred",
            model_type="regressor", evaluators=["fairness"],
            evaluator_config={"fairness": {"sensitive_features": ["sex"],
                                           "metrics": ["mae_difference"]}})
    assert "fairness/mae_difference/sex" in result.metrics  # the first 10,000 rows' value
    (ours,) = [w for w in caught if w.category.__name__ == "TruncatedDatasetWarning"]
    assert "task='regression'" in str(ours.message)
    assert "prediction=..." in str(ours.message)
