"""Fairness of a Spark DataFrame: per-partition summaries, merged per window, evaluated.

Layer 4, the ``spark`` extra (``pip install 'fairmonitor[spark]'``: pyspark 4, Java 17).
:func:`summarize_spark` summarizes a DataFrame, a table or a Parquet path per window (a
timestamp column and a window length, or a window column) and per partition with
``mapInPandas``, returning serialized :mod:`fairmonitor.summaries` as a binary column, merged
per window on the executors (the driver receives one summary per window);
:func:`evaluate_spark` turns each window into the same ``WindowReport`` as
:func:`fairmonitor.report.evaluate_window` on the driver; :func:`log_reports` logs them to an
MLflow run with the evaluator's keys. :func:`hfm_average_spark` estimates HFM's average
version from sampled query rows scanned exactly against every row (unbiased, with its
interval); ``evaluate_spark`` uses it for ``hfm_average``. Only the DataFrame API is used (no
RDD, no ``SparkContext``, no JVM UDF), so it also runs over Spark Connect. pyspark is imported
inside functions only: importing this package does not need it.
"""

from .evaluate import evaluate_spark, log_reports
from .hfm import hfm_average_spark
from .summarize import (
    SparkSummaries,
    merge_partials,
    merged_summaries,
    partial_summaries,
    read_table,
    summarize_spark,
)

__all__ = ["SparkSummaries", "evaluate_spark", "hfm_average_spark", "log_reports",
           "merge_partials", "merged_summaries", "partial_summaries", "read_table",
           "summarize_spark"]
