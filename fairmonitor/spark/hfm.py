"""HFM's average version on Spark: sampled query rows, each scanned exactly against every row.

The single-process estimator (``hfm(..., method="sampled")``,
:mod:`fairmonitor.metrics._hfm.sampled`) draws ``q`` query rows uniformly from an attribute's
kept rows and measures each one's nearest row of another group among **all** ``N`` rows; the
mean of those distances is unbiased for the average distance, with a finite-population
corrected variance and a delta-method interval of the log ratio. Here the same, distributed,
with the DataFrame API only (``groupBy`` aggregations and ``mapInPandas``; no RDD, no
``SparkContext``, no UDF), so it runs over Spark Connect too:

1. **Aggregate** (one Spark job): per window, rows per (groups, label, prediction), each
   numeric feature's minimum and maximum, missing values. The driver derives what
   :func:`~fairmonitor.metrics._hfm.exact.feature_space` and the label encoding derive from all
   rows: the min-max scaling, the classes, each attribute's groups, counts and the groups
   ``min_group_size`` leaves out.
2. **Query rows** (one job): each partition keeps, per window and attribute, its ``q`` kept
   rows of smallest hash (a process-independent hash of the row's values, salted by ``seed``
   and the attribute); the driver keeps the ``q`` smallest of all. A uniform sample without
   replacement, the same whatever the partitioning.
3. **Scan** (one job): with the query rows in its closure, every partition computes each
   query row's minimum squared distance to its rows of another group
   (:func:`~fairmonitor.metrics._hfm.sampled.nearest_sqdist`, the single-process code); Spark
   takes the minimum over partitions. The driver takes square roots and computes the means,
   variances and interval with the single-process functions.

Each query row's distance is therefore the single-process distance bit for bit; with
``n_queries >= N`` every row is a query and the value is ``hfm(..., method="exact")``'s
average version (up to the order of a sum, ~1e-16). Rows identical in every column hashed
share a hash and are drawn together (their distances are equal, so the mean stays
unbiased; the interval treats them as separate draws).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import numpy as np

from .._validation import check_positive_int
from ..exceptions import InvalidInputError
from ..metrics._groups import INTERSECTION_SEPARATOR, _exclude_small, _plain, factorize
from ..metrics._hfm.hfm import HFMResult, sampled_result
from ..metrics._hfm.sampled import average_of_distances
from ._hfm_partition import (
    ATTR,
    HASH,
    LABEL,
    MODEL,
    PRED,
    QUERY,
    TRUE,
    HFMPlan,
    WindowPlan,
    attribute_salt,
    extra,
    feat,
    query_candidates,
    scan_partition,
    sens,
)
from ._partition import KEY, window_bounds
from .summarize import read_table, window_key

__all__ = ["hfm_average_spark"]

_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "boolean")
_ORIG = "__fm_window__"


def hfm_average_spark(
    data: Any,
    *,
    sensitive_features: Sequence[str],
    label: str,
    features: Sequence[str],
    prediction: str | None = None,
    score: str | None = None,
    threshold: float = 0.5,
    timestamp: str | None = None,
    window: timedelta | str | None = None,
    window_column: str | None = None,
    n_queries: int = 2000,
    seed: int = 0,
    min_group_size: int = 1,
    intersection: bool = True,
    missing: str | Mapping[str, str] = "raise",
    spark: Any = None,
    return_queries: bool = False,
) -> Any:
    """HFM's average version of a Spark DataFrame, per window and attribute, with its interval.

    The value ``hfm(X, y, y_pred, sensitive_features=..., method="sampled",
    version="average")`` gives on the same rows and query rows: ``n_queries`` rows per
    attribute drawn uniformly (a hash of their values, salted by ``seed``), each one's nearest
    row of another group found **exactly** among all rows of the window (three Spark jobs; see
    the module docstring). Unbiased for the average distances, with a 95% interval of the
    value (``average_ci``); with ``n_queries`` at least the window's rows it is exact.

    Parameters
    ----------
    data : Spark DataFrame, table name or Parquet path
    sensitive_features : sequence of str
        The sensitive columns, each measured alone.
    label : str
        The true labels (class labels: 0/1, several classes, or text).
    features : sequence of str
        Non-sensitive features: numeric (and boolean) columns are numbers, min-max scaled over
        the window's rows; string columns are categories (one-hot).
    prediction, score, threshold : optional
        The predicted labels, or ``score >= threshold``.
    timestamp, window, window_column : optional
        Windows, as :func:`~fairmonitor.spark.summarize_spark`; default: the whole data.
    n_queries : int, default=2000
        Query rows per window and attribute (all kept rows when there are fewer).
    seed : int, default=0
        Salt of the row hashes that choose the query rows.
    min_group_size, intersection, missing
        As :func:`~fairmonitor.spark.evaluate_spark`: groups below ``min_group_size`` are left
        out; with several attributes and ``intersection``, the attributes' combination
        ``"a:b"`` (HFM does not intersect: it is the mean over the attributes, Eq. 7, as
        ``evaluate_window`` computes it); missing sensitive values are raised, grouped or
        dropped.
    spark : SparkSession, optional
        To read a table name or path.
    return_queries : bool, default=False
        Also return the query rows: ``{window: {attribute: pandas.DataFrame}}`` with the
        sensitive, label, prediction and feature columns (internal names).

    Returns
    -------
    results : dict of window key to dict of attribute to HFMResult
        Keyed as :attr:`~fairmonitor.spark.SparkSummaries.windows` (``None`` for the whole
        data); ``result.value_average``, ``result.average_ci``, ``result.n_queries``. With
        ``return_queries``, ``(results, queries)``.
    """
    found, queries, _ = _hfm_average(
        data, sensitive_features=sensitive_features, label=label, features=features,
        prediction=prediction, score=score, threshold=threshold, timestamp=timestamp,
        window=window, window_column=window_column, n_queries=n_queries, seed=seed,
        min_group_size=min_group_size, intersection=intersection, missing=missing, spark=spark)
    results: dict[Any, dict[str, HFMResult]] = {}
    for key, per_attr in found.items():
        results[key] = {}
        for attr, (result, caught) in per_attr.items():
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            results[key][attr] = result
    return (results, queries) if return_queries else results


def _policy(missing: str | Mapping[str, str], name: str) -> str:
    how = missing.get(name, "raise") if isinstance(missing, Mapping) else missing
    if how not in ("group", "drop", "raise"):
        raise InvalidInputError(f"missing: the policy for '{name}' must be one of group, drop, "
                                f"raise; got {how!r}.")
    return how


def _hfm_average(data: Any, *, sensitive_features: Sequence[str], label: str,  # noqa: C901, PLR0915 (issue 26)
                 features: Sequence[str], prediction: str | None, score: str | None,
                 threshold: float, timestamp: str | None, window: Any, window_column: str | None,
                 n_queries: int, seed: int, min_group_size: int, intersection: bool,
                 missing: str | Mapping[str, str], spark: Any
                 ) -> tuple[dict[Any, dict[str, tuple[HFMResult, list[Any]]]],
                            dict[Any, dict[str, Any]], dict[str, float]]:
    """:func:`hfm_average_spark`, with each result's warnings and the jobs' timings."""
    from pyspark.sql import functions as F

    if isinstance(sensitive_features, str):
        sensitive_features = [sensitive_features]
    sensitive = list(sensitive_features)
    features = [features] if isinstance(features, str) else list(features)
    if not sensitive:
        raise InvalidInputError("sensitive_features: name at least one column")
    if not features:
        raise InvalidInputError("HFM needs feature columns: give features=[...]")
    if prediction is None and score is None:
        raise InvalidInputError("give the prediction column, or score (and threshold)")
    if window is not None and timestamp is None:
        raise InvalidInputError("window needs timestamp=<the column of the prediction time>")
    if window is not None and window_column is not None:
        raise InvalidInputError("give window (with timestamp) or window_column, not both")
    n_queries = check_positive_int(n_queries, "n_queries")
    min_group_size = check_positive_int(min_group_size, "min_group_size")
    df = read_table(data, spark)
    wanted = [*sensitive, label, *(c for c in (prediction, score, timestamp, window_column) if c),
              *features]
    absent = [c for c in dict.fromkeys(wanted) if c not in df.columns]
    if absent:
        raise InvalidInputError(
            f"column(s) {absent} not in the data; available columns: {list(df.columns)}")
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    timings: dict[str, float] = {}

    # ---- the rows as the executors see them: internal names, missing-value policy applied
    key, key_type, window_us, key_is_long = window_key(df, timestamp, window, window_column)
    if not key_is_long:
        key = F.col(window_column).cast("string")  # type: ignore[arg-type]
        key_type = "string"
    cols, keep = [], F.col(KEY).isNotNull()
    for i, name in enumerate(sensitive):
        c, how = F.col(name), _policy(missing, name)
        absent_value = c.isNull() | (F.isnan(c) if types[name] in ("float", "double")
                                     else F.lit(False))
        if how == "group":
            c = F.when(absent_value, F.lit("missing")).otherwise(c.cast("string"))
        elif how == "drop":
            keep &= ~F.coalesce(absent_value, F.lit(True))
        cols.append(c.alias(sens(i)))
    numeric = []
    for i, name in enumerate(features):
        if types[name] in _NUMERIC or types[name].startswith("decimal"):
            numeric.append(True)
            cols.append(F.col(name).cast("double").alias(feat(i)))
        elif types[name] == "string":
            numeric.append(False)
            cols.append(F.col(name).alias(feat(i)))
        else:
            raise InvalidInputError(
                f"feature '{name}' has Spark type {types[name]}; HFM takes numbers or "
                "categories (strings). Convert it, e.g. dates to a number of days.")
    pred = (F.col(prediction) if prediction is not None
            else (F.col(score) >= F.lit(float(threshold))).cast("int"))  # type: ignore[arg-type]
    cols += [F.col(label).alias(LABEL), pred.alias(PRED)]
    extras = []  # hashed only: rows that differ in score or time are distinct draws
    if score is not None:
        extras.append(F.col(score).cast("double"))
    if timestamp is not None:
        extras.append(F.unix_micros(F.col(timestamp).cast("timestamp")))
    cols += [e.alias(extra(i)) for i, e in enumerate(extras)]
    cols.append(key.alias(KEY))
    if not key_is_long:
        cols.append(F.col(window_column).alias(_ORIG))  # type: ignore[arg-type]
    rows = df.select(*cols).where(keep)

    # ---- 1. aggregate: counts per (groups, label, prediction); feature ranges; missing values
    started = time.perf_counter()
    aggs = [F.count(F.lit(1)).alias("n")]
    for i, is_num in enumerate(numeric):
        c = F.col(feat(i))
        bad = c.isNull() | F.isnan(c) if is_num else c.isNull()
        aggs.append(F.sum(F.when(bad, 1).otherwise(0)).alias(f"bad{i}"))
        if is_num:
            aggs += [F.min(c).alias(f"lo{i}"), F.max(c).alias(f"hi{i}")]
    if not key_is_long:
        aggs.append(F.min(_ORIG).alias(_ORIG))
    cells = rows.groupBy(KEY, *(sens(i) for i in range(len(sensitive))), LABEL, PRED) \
        .agg(*aggs).collect()
    timings["aggregate"] = time.perf_counter() - started
    windows, groups, originals = _window_plans(cells, sensitive, features, numeric, label,
                                               n_queries, min_group_size, key_is_long)
    plan = HFMPlan(len(sensitive), tuple(numeric), len(extras),
                   tuple(attribute_salt(seed, name) for name in sensitive), windows)
    selected = rows.drop(_ORIG) if not key_is_long else rows

    # ---- 2. query rows: the q smallest salted hashes per window and attribute
    started = time.perf_counter()
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    schema = StructType([*selected.schema.fields, StructField(ATTR, IntegerType()),
                         StructField(HASH, LongType())])
    import functools

    candidates = selected.mapInPandas(functools.partial(query_candidates, plan),
                                      schema).toPandas()
    timings["queries"] = time.perf_counter() - started
    chosen: dict[Any, dict[int, dict[str, Any]]] = {}
    frames: dict[Any, dict[int, Any]] = {}
    if len(candidates):
        for (k, s), part in candidates.groupby([KEY, ATTR], sort=False):
            w = windows[k]
            order = np.argsort(part[HASH].to_numpy().view(np.uint64), kind="stable")
            part = part.iloc[order[: w.n_queries[s]]].reset_index(drop=True)
            frames.setdefault(k, {})[int(s)] = part.drop(columns=[ATTR, HASH, KEY])
            chosen.setdefault(k, {})[int(s)] = {c: part[c].to_numpy() for c in part.columns
                                                if c not in (ATTR, HASH, KEY)}
    scan_windows = {
        k: WindowPlan(w.lo, w.span, w.classes, w.excluded, w.n_queries,
                      tuple(chosen.get(k, {}).get(s) for s in range(len(sensitive))))
        for k, w in windows.items()}
    plan = HFMPlan(plan.n_sensitive, plan.numeric, plan.n_extra, plan.salts, scan_windows)

    # ---- 3. scan: each query row against every partition's rows; min over partitions
    started = time.perf_counter()
    out_schema = f"{KEY} {key_type}, {ATTR} int, {QUERY} int, {TRUE} double, {MODEL} double"
    nearest = selected.mapInPandas(functools.partial(scan_partition, plan), out_schema) \
        .groupBy(KEY, ATTR, QUERY).agg(F.min(TRUE).alias(TRUE), F.min(MODEL).alias(MODEL)) \
        .collect()
    timings["scan"] = time.perf_counter() - started
    d2: dict[tuple[Any, int], np.ndarray] = {
        (k, s): np.full((2, w.n_queries[s]), np.inf)
        for k, w in windows.items() for s in range(len(sensitive)) if w.n_queries[s]}
    for r in nearest:
        d2[(r[KEY], int(r[ATTR]))][:, int(r[QUERY])] = (r[TRUE], r[MODEL])

    # ---- the results, as hfm(..., method="sampled", version="average") builds them
    results: dict[Any, dict[str, tuple[HFMResult, list[Any]]]] = {}
    queries: dict[Any, dict[str, Any]] = {}
    for k, w in windows.items():
        n_rows = int(sum(groups[k][0].counts)) + sum(groups[k][0].excluded.values())
        averages = {}
        for s in range(len(sensitive)):
            if w.n_queries[s]:
                g = groups[k][s]
                averages[s] = average_of_distances(np.sqrt(d2[(k, s)]), int(g.counts.sum()))
        combos = [[s] for s in range(len(sensitive))]
        if intersection and len(sensitive) > 1:
            combos.append(list(range(len(sensitive))))
        out_key = (None if window_us is None and key_is_long and window_column is None
                   else window_bounds(k, window_us)[0] if window_us is not None
                   else k if key_is_long else originals[k])
        results[out_key] = {}
        for combo in combos:
            name = INTERSECTION_SEPARATOR.join(sensitive[s] for s in combo)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for s in combo:
                    groups[k][s].caught_replay()
                defined = [s for s in combo if s in averages]
                result = sampled_result([averages[s] for s in defined],
                                        [groups[k][s].groups for s in combo],
                                        [groups[k][s].groups for s in defined], "average",
                                        n_queries, n_rows)
            results[out_key][name] = (result, list(caught))
        queries[out_key] = {sensitive[s]: f for s, f in frames.get(k, {}).items()}
    return results, queries, timings


class _Attribute:
    """One window's groups of one attribute, and the warnings building them raised."""

    def __init__(self, name: str, counts: Mapping[Any, int], min_group_size: int) -> None:
        values = np.empty(len(counts), dtype=object)
        values[:] = list(counts)
        if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in counts):
            values = values.astype(np.int64)
        uniques = factorize(values)[0]
        labels = [_plain(u) for u in uniques]
        n = np.array([counts[v] for v in uniques.tolist()], dtype=np.intp)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.groups = _exclude_small(np.zeros(0, dtype=np.intp), labels, n, name,
                                         min_group_size)
        self._caught = list(caught)

    @property
    def counts(self) -> Any:
        return self.groups.counts

    @property
    def excluded(self) -> Mapping[Any, int]:
        return self.groups.excluded

    def caught_replay(self) -> None:
        for w in self._caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _window_plans(cells: list[Any], sensitive: list[str], features: list[str],
                  numeric: list[bool], label: str, n_queries: int, min_group_size: int,
                  key_is_long: bool
                  ) -> tuple[dict[Any, WindowPlan], dict[Any, list[_Attribute]], dict[Any, Any]]:
    """Each window's plan from the aggregate pass's rows; raise on what HFM cannot take."""
    by_key: dict[Any, list[Any]] = {}
    for r in cells:
        by_key.setdefault(r[KEY], []).append(r)
    windows, groups, originals = {}, {}, {}
    for k, part in by_key.items():
        for i, name in enumerate(features):
            bad = sum(int(r[f"bad{i}"]) for r in part)
            if bad:
                kind = "missing or NaN" if numeric[i] else "missing"
                raise InvalidInputError(
                    f"feature '{name}' has {bad} {kind} values; HFM needs every feature of "
                    "every row (fill them, or drop those rows)")
        for i, name in enumerate(sensitive):
            if any(r[sens(i)] is None or r[sens(i)] != r[sens(i)] for r in part):
                n = sum(r["n"] for r in part if r[sens(i)] is None or r[sens(i)] != r[sens(i)])
                raise InvalidInputError(
                    f"sensitive feature '{name}' has {n} missing values (NaN/None); give "
                    "missing='group' or 'drop' (or a per-column mapping), or fill them")
        values = [r[LABEL] for r in part] + [r[PRED] for r in part]
        if any(v is None for v in values):
            raise InvalidInputError(f"the label or prediction column has missing values "
                                    f"('{label}'); drop those rows")
        if all(isinstance(v, int | float) for v in values):
            classes = np.unique(np.array(values, dtype=np.float64))
            if (classes != np.round(classes)).any() or not np.isfinite(classes).all():
                raise InvalidInputError(
                    f"'{label}' and the predictions must hold class labels; got "
                    f"{classes[classes != np.round(classes)][:3].tolist()}")
        elif all(isinstance(v, str) for v in values):
            classes = np.unique(np.array(values, dtype=str))
        else:
            raise InvalidInputError("the labels and the predictions must use the same class "
                                    "labels (both numbers or both text)")
        lo, hi = [], []
        for i, is_num in enumerate(numeric):
            if is_num:
                lo.append(min(float(r[f"lo{i}"]) for r in part))
                hi.append(max(float(r[f"hi{i}"]) for r in part))
        lo_a, hi_a = np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)
        if not (np.isfinite(lo_a).all() and np.isfinite(hi_a).all()):
            raise InvalidInputError("a numeric feature holds infinite values; HFM needs "
                                    "finite features")
        attrs = []
        for i, name in enumerate(sensitive):
            counts: dict[Any, int] = {}
            for r in part:
                counts[r[sens(i)]] = counts.get(r[sens(i)], 0) + int(r["n"])
            attrs.append(_Attribute(name, counts, min_group_size))
        groups[k] = attrs
        windows[k] = WindowPlan(
            lo_a, hi_a - lo_a, classes,
            tuple(tuple(a.excluded) for a in attrs),
            tuple(min(n_queries, int(a.counts.sum()))
                  if a.groups.two_group_reason() is None else 0 for a in attrs))
        if not key_is_long:
            originals[k] = part[0][_ORIG]
    return windows, groups, originals
