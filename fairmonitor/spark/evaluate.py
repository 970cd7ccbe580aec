"""Evaluate a Spark DataFrame per window on the driver, and log the reports to an MLflow run."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from ..report import Threshold, WindowReport
from ..report.options import DEFAULT, DefaultType, EvaluationOptions, resolve
from ..report.thresholds import worst
from ._parts import evaluate_parts
from .hfm import _hfm_average
from .summarize import SparkSummaries, summarize_spark

__all__ = ["evaluate_spark", "log_reports"]

_BATCH = 1000  # MLflow's MAX_METRICS_PER_BATCH

log = logging.getLogger(__name__)


def evaluate_spark(
    data: Any,
    *,
    metrics: Iterable[str] | None = None,
    min_group_size: int | DefaultType = DEFAULT,
    thresholds: Iterable[Threshold] | DefaultType = DEFAULT,
    options: Mapping[str, Mapping[str, Any]] | None | DefaultType = DEFAULT,
    predict: Callable[[Any], Any] | None = None,
    rng: Any = DEFAULT,
    errors: Literal["coerce", "raise"] | DefaultType = DEFAULT,
    run_id: str | None = None,
    summaries: SparkSummaries | None = None,
    hfm_queries: int | None = 2000,
    evaluation: EvaluationOptions | None = None,
    **summarize_kwargs: Any,
) -> dict[Any, WindowReport]:
    """Fairness reports of a Spark DataFrame, one per window, from merged summaries and scans.

    :func:`summarize_spark` summarizes every row on the cluster; the driver evaluates each
    window's merged summary with :func:`fairmonitor.report.evaluate_summary`: the
    ``WindowReport`` that :func:`~fairmonitor.report.evaluate_window` gives on the same rows.
    Counts and the parity metrics are exact; MADD is exact; ABCC and ABPC equal the raw-row
    values while each group holds at most ``spec.max_raw`` rows (2^19 by default), and above
    that ABPC is within round-off and ABCC within the error the summary certifies
    (``report.details[("abcc", attr)].error``).

    ``hfm_average`` (with ``features=[...]`` and labels) is by default the sampled estimator
    of ``hfm(..., method="sampled")`` run over **all** rows (:func:`hfm_average_spark`):
    ``hfm_queries`` query rows per window and attribute, drawn uniformly, each one's nearest
    row of another group found exactly among every row of the window (three more Spark jobs
    over ``data``; cache it if reading it is costly). The value is unbiased for the average
    distances, ``report.intervals`` holds its 95% interval, and with ``hfm_queries`` at least
    the window's rows it equals ``evaluate_window``'s exact value. ``hfm_queries=None`` (or
    ``summaries`` given without ``data``) estimates it on the row sample instead.

    The other row metrics, the maximal ``hfm``, CFair and robustness, run on each group's row
    sample (``SummarySpec.sample_size`` rows, 256 by default) and are estimates; the report's
    notes say so. The maximal ``hfm`` is **not estimable from a sample** (a maximum over all
    pairs of rows depends on rows the sample left out): on this path it is the sample's own
    maximum, with no error bound. Robustness needs ``predict``.

    Parameters
    ----------
    data : Spark DataFrame, table name or Parquet path
        See :func:`summarize_spark`, which takes ``summarize_kwargs`` (``sensitive_features``,
        ``label``, ``score``, ``prediction``, ``features``, ``timestamp``, ``window``,
        ``window_column``, ``threshold``, ``spec``, ``missing``, ``spark`` ...).
    metrics, min_group_size, thresholds, options, predict, rng, errors, evaluation
        As :func:`fairmonitor.report.evaluate_summary` (the decision threshold is
        ``summarize_kwargs``' ``threshold``, else ``evaluation``'s).
    run_id : str, optional
        Log the reports to this MLflow run (:func:`log_reports`).
    summaries : SparkSummaries, optional
        Already computed summaries (``summarize_kwargs`` then only describe ``data`` for
        ``hfm_average``; with ``data=None`` nothing is read).
    hfm_queries : int or None, default=2000
        Query rows per window and attribute of ``hfm_average``'s scan over all rows (seeded
        by ``rng`` when it is an int, else 0); None: on the row sample.

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
    metrics = None if metrics is None else list(metrics)
    if summaries is None:
        summaries = summarize_spark(data, **summarize_kwargs)
    settings = resolve(evaluation, min_group_size=min_group_size, thresholds=thresholds,
                       options=options, rng=rng, errors=errors)
    settings = settings.replace(
        threshold=float(summarize_kwargs.get("threshold", settings.threshold)))
    try:
        scanned = _hfm_scan(data, metrics, hfm_queries, settings.min_group_size, settings.rng,
                            summarize_kwargs)
    except Exception as exc:  # as any failing metric: NaN with the error, unless "raise"
        if settings.errors == "raise":
            raise
        log.warning("hfm_average scan over all rows failed: %s", exc)
        scanned = {key: {attr: (exc, []) for attr in summary.attributes}
                   for key, summary in summaries.windows.items()}
    reports = {}
    for key in summaries.windows:
        given = {("hfm_average", attr): found
                 for attr, found in scanned.get(key, {}).items()}
        # label-free metrics on every valid row, label metrics on the labelled ones
        report = evaluate_parts(summaries, key, metrics=metrics, predict=predict,
                                results=given, evaluation=settings)
        if given and any(not isinstance(r, Exception) and k in report.values
                         for k, (r, _) in given.items()):
            report = replace(report, notes=(*report.notes, _HFM_NOTE.format(hfm_queries)))
        reports[key] = report
    if run_id is not None:
        log_reports(reports, run_id)
    return reports


_HFM_NOTE = ("hfm_average: up to {} query rows per attribute scanned exactly against every "
             "row (unbiased, with its 95% interval), not on the row sample")


def _hfm_scan(data: Any, metrics: list[str] | None, hfm_queries: int | None,
              min_group_size: int, rng: Any, kwargs: Mapping[str, Any]
              ) -> dict[Any, dict[str, Any]]:
    """``hfm_average`` of every window and attribute over all rows, when it applies."""
    wanted = metrics is None or "hfm_average" in metrics
    if (hfm_queries is None or data is None or not wanted or not kwargs.get("features")
            or kwargs.get("label") is None
            or (kwargs.get("prediction") is None and kwargs.get("score") is None)):
        return {}
    if isinstance(rng, int) and not isinstance(rng, bool):
        seed = rng
    elif rng is None:
        seed = 0
    else:
        import numpy as np

        seed = int(np.random.default_rng(rng).integers(2**63))
    keys = ("sensitive_features", "label", "prediction", "score", "threshold", "features",
            "timestamp", "window", "window_column", "timestamp_unit", "intersection", "missing",
            "spark")
    found, _, _ = _hfm_average(data, n_queries=hfm_queries, seed=seed,
                               min_group_size=min_group_size,
                               **{"threshold": 0.5, "intersection": True, "missing": "raise",
                                  "prediction": None, "score": None, "timestamp": None,
                                  "window": None, "window_column": None, "timestamp_unit": None,
                                  "spark": None,
                                  **{k: kwargs[k] for k in keys if k in kwargs}})
    return found


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
