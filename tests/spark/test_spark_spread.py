"""``evaluate_spark`` spreads consecutive windows over its evaluation tasks (issue 30, item 3).

Hash-partitioning the window keys put several windows in one task and none in others (24
hourly windows over 48 tasks: 16 tasks, one with 4 windows), so with two executors one could
be evaluating a task of 4 windows while the other sat idle. Consecutive windows of a time
grid now get tasks of their own (round robin) while there are tasks enough.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from fairmonitor.spark.evaluate import _bucket_table, evaluated_windows


def test_each_bucket_value_lands_in_its_own_task(spark):
    """Spark's own ``pmod(hash(v), n)`` (what ``repartition(n, col)`` uses) gives slot k."""
    for tasks in (1, 2, 5, 48, 200):
        table = _bucket_table(tasks)
        frame = spark.createDataFrame([(k, v) for k, v in enumerate(table)], "slot int, v int")
        got = {r["slot"]: r["task"] for r in
               frame.selectExpr("slot", f"pmod(hash(v), {tasks}) AS task").collect()}
        assert got == {k: k for k in range(tasks)}


@pytest.mark.parametrize("tasks", [24, 5])
def test_consecutive_windows_get_tasks_of_their_own(spark, prediction_log, tmp_path, tasks):
    from pyspark.sql import functions as F

    windows = 12
    path = tmp_path / "day.parquet"
    prediction_log(20 * windows, seed=5, hours=windows).to_parquet(path)
    frame = spark.read.parquet(str(path)).repartition(2)
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(tasks))
    try:
        evaluated, _ = evaluated_windows(
            frame, metrics=["demographic_parity_difference"], sensitive_features=["sex"],
            label="label", score="score", timestamp="timestamp", window="1h")
        rows = evaluated.select("window", "report",
                                F.spark_partition_id().alias("task")).collect()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    assert len(rows) == windows and all(r["report"] is not None for r in rows)
    per_task = Counter(r["task"] for r in rows)
    assert len(per_task) == min(windows, tasks)
    assert max(per_task.values()) == math.ceil(windows / tasks)
