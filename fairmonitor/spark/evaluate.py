"""Evaluate a Spark DataFrame per window on the driver, and log the reports to an MLflow run."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

from ..report import Threshold, WindowReport, evaluate_summary
from ..report.thresholds import worst
from .summarize import SparkSummaries, summarize_spark

__all__ = ["evaluate_spark", "log_reports"]

_BATCH = 1000  # MLflow's MAX_METRICS_PER_BATCH


def evaluate_spark(
    data: Any,
    *,
    metrics: Iterable[str] | None = None,
    min_group_size: int = 1,
    thresholds: Iterable[Threshold] = (),
    options: Mapping[str, Mapping[str, Any]] | None = None,
    predict: Callable[[Any], Any] | None = None,
    rng: Any = None,
    errors: Literal["coerce", "raise"] = "coerce",
    run_id: str | None = None,
    summaries: SparkSummaries | None = None,
    **summarize_kwargs: Any,
) -> dict[Any, WindowReport]:
    """Fairness reports of a Spark DataFrame, one per window, computed from merged summaries.

    :func:`summarize_spark` summarizes every row on the cluster; the driver evaluates each
    window's merged summary with :func:`fairmonitor.report.evaluate_summary`: the
    ``WindowReport`` that :func:`~fairmonitor.report.evaluate_window` gives on the same rows.
    Counts and the parity metrics are exact; MADD is exact; ABCC and ABPC equal the raw-row
    values while each group holds at most ``spec.max_raw`` rows (2^19 by default), and above
    that ABPC is within round-off and ABCC within the error the summary certifies
    (``report.details[("abcc", attr)].error``). HFM, CFair and robustness need rows: they run
    on each group's row sample (``SummarySpec.sample_size`` rows, 256 by default; give
    ``features=[...]``) and are estimates; the report's notes say so. ``hfm_average`` is a
    mean over rows and the sample estimates it; the maximal ``hfm`` is **not estimable from a
    sample** (a maximum over all pairs of rows depends on rows the sample left out): on this
    path it is the sample's own maximum, with no error bound. Robustness needs ``predict``.

    Parameters
    ----------
    data : Spark DataFrame, table name or Parquet path
        See :func:`summarize_spark`, which takes ``summarize_kwargs`` (``sensitive_features``,
        ``label``, ``score``, ``prediction``, ``features``, ``timestamp``, ``window``,
        ``window_column``, ``threshold``, ``spec``, ``missing``, ``spark`` ...).
    metrics, min_group_size, thresholds, options, predict, rng, errors
        As :func:`fairmonitor.report.evaluate_summary`.
    run_id : str, optional
        Log the reports to this MLflow run (:func:`log_reports`).
    summaries : SparkSummaries, optional
        Already computed summaries (``data`` and ``summarize_kwargs`` are then not read).

    Returns
    -------
    reports : dict of key to WindowReport
        Keyed as :attr:`SparkSummaries.windows`: window starts (UTC), ``window_column``
        values, or ``None`` for the whole data.

    Examples
    --------
    A local session (``pip install 'fairmonitor[spark]'``, Java 17). Not a doctest, as the
    doctest run has no JVM; ``tests/spark/test_spark.py`` runs these lines and checks the
    value::

        from pyspark.sql import SparkSession

        spark = SparkSession.builder.master("local[2]").getOrCreate()
        df = spark.createDataFrame(
            [("F", 1, 0.9), ("F", 0, 0.2), ("M", 1, 0.6), ("M", 1, 0.7)],
            "sex string, label long, score double")
        reports = evaluate_spark(df, sensitive_features=["sex"], label="label",
                                 score="score", metrics=["demographic_parity_difference"])
        reports[None].flat()  # {'fairness/demographic_parity_difference/sex': 0.5}
    """
    if summaries is None:
        summaries = summarize_spark(data, **summarize_kwargs)
    threshold = float(summarize_kwargs.get("threshold", 0.5))
    reports = {
        key: evaluate_summary(summary, metrics=metrics, min_group_size=min_group_size,
                              thresholds=list(thresholds), options=options, predict=predict,
                              threshold=threshold, rng=rng, errors=errors)
        for key, summary in summaries.windows.items()}
    if run_id is not None:
        log_reports(reports, run_id)
    return reports


def log_reports(reports: Mapping[Any, WindowReport], run_id: str, *,
                tracking_uri: str | None = None) -> None:
    """Log reports to an MLflow run under the evaluator's keys ``fairness/<metric>/<attribute>``.

    The keys are :meth:`WindowReport.flat`'s, as the ``fairness`` evaluator and the monitor's
    MLflow sink write them. One report (the whole data) is logged at step 0; several windows at
    step 0, 1, ... in window order, each timestamped with its window's end (as the monitor
    does), so the run's charts are the windows' history. NaN values are logged as NaN (as the
    evaluator does). Tags: ``fairness.status`` (the worst verdict over the windows) and
    ``fairness.source`` = ``spark``.
    """
    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient

    now = int(time.time() * 1000)
    metrics = []
    for step, report in enumerate(reports.values()):
        end = report.end
        ts = int(end.timestamp() * 1000) if isinstance(end, datetime) else now
        metrics += [Metric(k, float(v), ts, step) for k, v in report.flat().items()]
    status = worst(r.status for r in reports.values())
    tags = [RunTag("fairness.status", status), RunTag("fairness.source", "spark")]
    client = MlflowClient(tracking_uri=tracking_uri)
    for lo in range(0, max(len(metrics), 1), _BATCH):
        client.log_batch(run_id, metrics=metrics[lo:lo + _BATCH], tags=tags if lo == 0 else [])
