"""Evaluate a Spark DataFrame per window on the executors, and log the reports to an MLflow run."""

from __future__ import annotations

import functools
import logging
import pickle
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np

from ..report import Threshold, WindowReport
from ..report.options import DEFAULT, DefaultType, EvaluationOptions, resolve
from ..report.thresholds import worst
from ._parts import EvaluationJob, evaluate_key, group_evaluator
from .hfm import _hfm_average
from .summarize import SparkSummaries, _out_key, partial_summaries

__all__ = ["evaluate_spark", "evaluated_windows", "log_reports"]

_BATCH = 1000  # MLflow's MAX_METRICS_PER_BATCH

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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

    Every row is summarized on the cluster (:func:`partial_summaries`, per partition and
    window), and each window's summaries are merged and evaluated **on an executor**
    (``groupBy("window").applyInPandas``, :func:`fairmonitor.report.evaluate_summary`): the
    driver receives one pickled ``WindowReport`` per window, the report that
    :func:`~fairmonitor.report.evaluate_window` gives on the same rows, and windows are
    evaluated in parallel over ``spark.sql.shuffle.partitions`` tasks. With ``summaries``
    given, the driver evaluates them (nothing is summarized).
    Counts and the parity metrics are exact; MADD is exact; ABCC and ABPC equal the raw-row
    values while each group holds at most ``spec.max_raw`` rows (2^16 by default), and above
    that within the errors the summary certifies (``report.details[("abcc", attr)].error``,
    ``report.details[("abpc", attr)].error``).

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
        ``window_column``, ``threshold``, ``spec``, ``missing``, ``spark`` ...). A regressor:
        ``task="regression"`` with its ``prediction`` and ``label`` (targets) columns gives
        the regression metrics, as ``evaluate_window(..., task="regression")`` on the rows.
    metrics, min_group_size, thresholds, options, predict, rng, errors, evaluation
        As :func:`fairmonitor.report.evaluate_summary` (the decision threshold is
        ``summarize_kwargs``' ``threshold``, else ``evaluation``'s). ``predict`` travels to
        the executors (it must pickle). An ``rng`` seed (or None) is given to every window, as
        a single process would; a ``Generator`` cannot be shared by executors, so each window
        gets its own, seeded from it (one draw) and the window's key.
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
    settings = resolve(evaluation, min_group_size=min_group_size, thresholds=thresholds,
                       options=options, rng=rng, errors=errors)
    settings = settings.replace(
        threshold=float(summarize_kwargs.get("threshold", settings.threshold)))
    try:
        scanned, failed = _hfm_scan(data, metrics, hfm_queries, settings.min_group_size,
                                    settings.rng, summarize_kwargs), None
    except Exception as exc:  # as any failing metric: NaN with the error, unless "raise"
        if settings.errors == "raise":
            raise
        log.warning("hfm_average scan over all rows failed: %s", exc)
        scanned, failed = {}, exc
    if summaries is None:
        reports = _on_executors(data, metrics, predict, settings, scanned, failed, hfm_queries,
                                summarize_kwargs)
    else:
        reports = {}
        for key, summary in summaries.windows.items():
            given = scanned.get(key, {})
            if failed is not None:
                given = {attr: (failed, []) for attr in summary.attributes}
            # label-free metrics on every valid row, label metrics on the labelled ones
            reports[key] = evaluate_key(summaries, key, metrics=metrics, predict=predict,
                                        scanned=given, hfm_queries=hfm_queries,
                                        evaluation=settings)
    if run_id is not None:
        log_reports(reports, run_id)
    return reports


def _raw_key(key: Any) -> Any:
    """Return the key :func:`summarize_partition` gives a window (us for a start, 0 for all)."""
    if key is None:
        return 0
    if isinstance(key, datetime):
        return (key - _EPOCH) // timedelta(microseconds=1)
    return key


def evaluated_windows(data: Any, *, metrics: list[str] | None = None, predict: Any = None,
                      settings: EvaluationOptions | None = None,
                      scanned: Mapping[Any, Any] | None = None,
                      failed: Exception | None = None, hfm_queries: int | None = None,
                      **kwargs: Any) -> tuple[Any, Any]:
    """Return the lazy frame of one evaluated window a row, and its partition plan.

    Columns ``window`` (the raw key), ``rows`` and ``report`` (a pickled ``WindowReport``,
    null for the rows without a window key): what :func:`evaluate_spark` collects.
    ``kwargs`` are :func:`partial_summaries`'.
    """
    settings = settings or EvaluationOptions()
    partials, plan = partial_summaries(data, **kwargs)
    seed = None
    if isinstance(settings.rng, np.random.Generator):
        seed = int(settings.rng.integers(2**63))  # each window's own Generator, from it
    job = EvaluationJob(plan, metrics, predict, settings,
                        {_raw_key(k): v for k, v in (scanned or {}).items()}, failed,
                        hfm_queries, seed)
    key_type = partials.schema["window"].dataType.simpleString()
    tasks = int(partials.sparkSession.conf.get("spark.sql.shuffle.partitions") or 200)
    return (_spread(partials, plan, tasks)
            .applyInPandas(group_evaluator(job), f"window {key_type}, rows long, report binary"),
            plan)


def _spread(partials: Any, plan: Any, tasks: int) -> Any:
    """Group the partials by window, consecutive windows of a time grid in different tasks.

    Hash-partitioning the keys themselves leaves tasks with several windows and others with
    none (24 hourly windows in 48 tasks: 16 tasks, one of 4 windows), so an executor can sit
    idle while another evaluates a crowded task. A window start's index on the grid, modulo
    ``tasks``, is its slot, and the partials are hash-partitioned by a value whose Spark hash
    falls in that slot (:func:`_bucket_table`): windows go round robin over the tasks. Other
    keys (a window column, the whole data) are hash-partitioned by key. Grouping by (bucket,
    window) keeps that partitioning (no second shuffle).
    """
    if plan.window_us is None or not plan.key_is_long:
        return partials.repartition(tasks, "window").groupBy("window")
    values = ", ".join(str(v) for v in _bucket_table(tasks))
    slot = f"CAST(pmod(window div {plan.window_us}, {tasks}) AS INT) + 1"
    return (partials.withColumn(_BUCKET, _expr(f"element_at(array({values}), {slot})"))
            .repartition(tasks, _BUCKET).groupBy(_BUCKET, "window"))


_BUCKET = "__fairmonitor_bucket__"
_MASK = 0xFFFFFFFF


def _expr(text: str) -> Any:
    """``pyspark.sql.functions.expr`` (pyspark imported here only)."""
    from pyspark.sql import functions

    return functions.expr(text)


def _spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's ``hash`` of an ``int`` (Murmur3 x86 32-bit, ``Murmur3_x86_32.hashInt``)."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & _MASK

    k = rotl((value & _MASK) * 0xCC9E2D51 & _MASK, 15) * 0x1B873593 & _MASK
    h = (rotl(seed ^ k, 13) * 5 + 0xE6546B64) & _MASK
    h ^= 4
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & _MASK
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h >> 31 else h


@functools.lru_cache(maxsize=16)
def _bucket_table(tasks: int) -> tuple[int, ...]:
    """For each task k, the smallest non-negative int whose ``pmod(hash(v), tasks)`` is k.

    >>> [_spark_hash_int(v) % 2 for v in _bucket_table(2)]
    [0, 1]
    """
    table: dict[int, int] = {}
    value = 0
    while len(table) < tasks:
        table.setdefault(_spark_hash_int(value) % tasks, value)
        value += 1
    return tuple(table[k] for k in range(tasks))


def _on_executors(data: Any, metrics: list[str] | None, predict: Any,
                  settings: EvaluationOptions, scanned: Mapping[Any, Any],
                  failed: Exception | None, hfm_queries: int | None,
                  kwargs: Mapping[str, Any]) -> dict[Any, WindowReport]:
    """Merge and evaluate each window on the executors; collect the reports only.

    ``partial_summaries``, then one ``groupBy("window").applyInPandas`` of
    :func:`~fairmonitor.spark._parts.evaluate_group` over the partials repartitioned into
    ``spark.sql.shuffle.partitions`` tasks (explicitly: adaptive execution would coalesce such
    a small shuffle into one task, one executor evaluating every window), consecutive windows
    in different tasks (:func:`_spread`).
    """
    frame, plan = evaluated_windows(data, metrics=metrics, predict=predict, settings=settings,
                                    scanned=scanned, failed=failed, hfm_queries=hfm_queries,
                                    **kwargs)
    rows = [(r["window"], r["report"]) for r in frame.collect() if r["report"] is not None]
    whole = plan.window_us is None and plan.key_is_long and {k for k, _ in rows} <= {0}
    out = {}
    for key, blob in sorted(rows, key=lambda kv: kv[0]):
        # pickled by this package's own executor function, in this job
        out[_out_key(key, plan, whole)] = pickle.loads(bytes(blob))  # noqa: S301
    return out


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
