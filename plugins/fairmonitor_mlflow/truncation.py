"""Spot a Spark DataFrame that ``mlflow.models.evaluate`` cut to its first 10,000 rows.

MLflow 3 turns a Spark DataFrame (or ``mlflow.data.from_spark`` / ``load_delta``) into a
``SparkDataset`` whose ``to_evaluation_dataset`` keeps ``limit(10000).toPandas()``
(``EvaluationDataset.SPARK_DATAFRAME_LIMIT``), without a warning. The evaluator only sees the
pandas rows; what it can see is that they are exactly the limit and that the run's logged
dataset input (same digest) is a Spark dataset (a Spark or Delta source, or a Spark profile).
It then warns (:class:`TruncatedDatasetWarning`) and tags the run ``fairness.truncated``,
pointing to :mod:`fairmonitor.spark`, which summarizes every row on the cluster.
"""

from __future__ import annotations

import json
import logging
from typing import Any

__all__ = ["TRUNCATED_TAG", "TruncatedDatasetWarning", "truncation_message"]

log = logging.getLogger(__name__)

TRUNCATED_TAG = "fairness.truncated"
_SPARK_SOURCES = ("spark", "delta_table")


class TruncatedDatasetWarning(UserWarning):
    """MLflow evaluated only the first rows of a Spark DataFrame: the values are not the data's."""


def _limit() -> int:
    from mlflow.data.evaluation_dataset import EvaluationDataset

    return int(getattr(EvaluationDataset, "SPARK_DATAFRAME_LIMIT", 10_000))


def truncation_message(dataset: Any, n_rows: int, run_id: str) -> str | None:
    """Why the evaluated rows are a cut Spark DataFrame, or None if they are not.

    Only an evaluation of exactly ``SPARK_DATAFRAME_LIMIT`` rows asks the tracking store for the
    run's dataset inputs; any other size returns None at once.
    """
    limit = _limit()
    if n_rows != limit:
        return None
    try:
        from mlflow.tracking import MlflowClient

        inputs = MlflowClient().get_run(run_id).inputs.dataset_inputs or []
    except Exception as exc:  # no store to ask: say nothing rather than guess
        log.debug("cannot read the dataset inputs of run %s: %s", run_id, exc)
        return None
    digest = getattr(dataset, "digest", None)
    for logged in inputs:
        ds = logged.dataset
        if digest and ds.digest != digest:
            continue
        try:
            profile = json.loads(ds.profile) if ds.profile else None
        except (TypeError, ValueError):
            profile = None
        # a SparkDataset: its source is Spark or Delta when it has a path or table name, "code"
        # for a DataFrame built in the session; its profile is {"approx_count": n} (None when
        # the count failed, e.g. over Spark Connect), where pandas and numpy datasets have
        # {"num_rows": ...}
        spark_profile = profile is None or (isinstance(profile, dict)
                                            and "approx_count" in profile)
        if ds.source_type not in _SPARK_SOURCES and not spark_profile:
            continue
        count = profile.get("approx_count") if isinstance(profile, dict) else None
        size = (f" of about {count:,} rows (MLflow's approximate count)"
                if isinstance(count, int) and count > limit else "")
        return (
            f"mlflow.models.evaluate evaluated only the first {limit:,} rows of the Spark "
            f"DataFrame{size} (dataset {ds.name!r}): MLflow cuts a Spark DataFrame to "
            f"EvaluationDataset.SPARK_DATAFRAME_LIMIT = {limit:,} rows, so these fairness values "
            "describe those rows, not the data. For the whole data, use the Spark path: "
            "fairmonitor.spark.evaluate_spark(df, sensitive_features=[...], label=..., "
            "score=..., run_id=<this run>) (a regressor: prediction=..., label=<the targets>, "
            "task='regression') summarizes every row on the cluster and logs the same "
            "fairness/<metric>/<attribute> keys to the run.")
    return None
