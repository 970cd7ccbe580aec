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
   and the attribute); a window function over those candidates keeps the ``q`` smallest of
   all, still on the executors, so only the ``q`` chosen rows per window and attribute reach
   the driver. A uniform sample without replacement, the same whatever the partitioning.
3. **Scan** (one job): with the query rows in its closure, every partition computes each
   query row's minimum squared distance to its rows of another group
   (:func:`~fairmonitor.metrics._hfm.sampled.nearest_sqdist`, the single-process code); Spark
   takes the minimum over partitions, so the driver receives one row per query row (its two
   minima). The driver takes square roots and computes the means, variances and interval with
   the single-process functions.

Rows without a label, with a missing prediction, or with a score that is missing, NaN or
outside [0, 1] are left out before step 1 (:func:`_valid_rows`): the monitor's invalid-row
policy (:mod:`fairmonitor.monitor.rows`), which the summaries of
:func:`~fairmonitor.spark.summarize_spark` follow too.

Each query row's distance is therefore the single-process distance bit for bit; with
``n_queries >= N`` every row is a query and the value is ``hfm(..., method="exact")``'s
average version (up to the order of a sum, ~1e-16). Rows identical in every column hashed
share a hash and are drawn together (their distances are equal, so the mean stays
unbiased; the interval treats them as separate draws).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import check_positive_int
from ..exceptions import InvalidInputError
from ..metrics.shared import HFMResult, average_of_distances, sampled_result
from ..utils.groups import INTERSECTION_SEPARATOR, factorize
from ..utils.groups import exclude_small as _exclude_small
from ..utils.groups import plain as _plain
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
from .summarize import epoch_micros, read_table, window_key

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
    timestamp_unit: str | None = None,
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
    timestamp, window, window_column, timestamp_unit : optional
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
        window=window, window_column=window_column, timestamp_unit=timestamp_unit,
        n_queries=n_queries, seed=seed, min_group_size=min_group_size,
        intersection=intersection, missing=missing, spark=spark)
    results: dict[Any, dict[str, HFMResult]] = {}
    for key, per_attr in found.items():
        results[key] = {}
        for attr, (result, caught) in per_attr.items():
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            results[key][attr] = result
    return (results, queries) if return_queries else results


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


def _policy(missing: str | Mapping[str, str], name: str) -> str:
    how = missing.get(name, "raise") if isinstance(missing, Mapping) else missing
    if how not in ("group", "drop", "raise"):
        raise InvalidInputError(f"missing: the policy for '{name}' must be one of group, drop, "
                                f"raise; got {how!r}.")
    return how


@dataclass(frozen=True)
class _Request:
    """The arguments of :func:`hfm_average_spark`, checked (:meth:`checked`)."""

    sensitive_features: Sequence[str]
    label: str
    features: Sequence[str]
    prediction: str | None = None
    score: str | None = None
    threshold: float = 0.5
    timestamp: str | None = None
    window: Any = None
    window_column: str | None = None
    timestamp_unit: str | None = None
    n_queries: int = 2000
    seed: int = 0
    min_group_size: int = 1
    intersection: bool = True
    missing: str | Mapping[str, str] = "raise"

    @property
    def sensitive(self) -> list[str]:
        given = self.sensitive_features
        return [given] if isinstance(given, str) else list(given)

    @property
    def feature_list(self) -> list[str]:
        return [self.features] if isinstance(self.features, str) else list(self.features)

    def checked(self) -> _Request:
        if not self.sensitive:
            raise InvalidInputError("sensitive_features: name at least one column")
        if not self.feature_list:
            raise InvalidInputError("HFM needs feature columns: give features=[...]")
        if self.prediction is None and self.score is None:
            raise InvalidInputError("give the prediction column, or score (and threshold)")
        if self.window is not None and self.timestamp is None:
            raise InvalidInputError("window needs timestamp=<the column of the prediction time>")
        if self.window is not None and self.window_column is not None:
            raise InvalidInputError("give window (with timestamp) or window_column, not both")
        return dataclasses.replace(
            self, n_queries=check_positive_int(self.n_queries, "n_queries"),
            min_group_size=check_positive_int(self.min_group_size, "min_group_size"))

    def columns(self) -> list[str]:
        return list(dict.fromkeys([
            *self.sensitive, self.label, *(c for c in (self.prediction, self.score,
                                                       self.timestamp, self.window_column) if c),
            *self.feature_list]))


@dataclass(frozen=True)
class _Layout:
    """How the selected rows are laid out: the window key and the features' kinds."""

    key_type: str
    window_us: int | None
    key_is_long: bool
    whole: bool
    numeric: tuple[bool, ...]
    n_extra: int

    def out_key(self, key: Any, originals: Mapping[Any, Any]) -> Any:
        """Return the results' key of a window (as :attr:`SparkSummaries.windows` keys them)."""
        if self.whole:
            return None
        if self.window_us is not None:
            return window_bounds(key, self.window_us)[0]
        return key if self.key_is_long else originals[key]


def _valid_rows(label: str, prediction: str | None, score: str | None) -> Any:
    """Return the monitor's invalid-row policy (:mod:`fairmonitor.monitor.rows`) as a filter.

    A row without a label is not labelled yet and HFM needs labels; a row whose score is
    missing, NaN or outside [0, 1], or whose prediction is missing, is invalid: both are left
    out, as the monitor leaves them out of its label metrics.
    """
    from pyspark.sql import functions as F

    keep = F.col(label).isNotNull()
    if prediction is not None:
        keep &= F.col(prediction).isNotNull()
    else:
        value = F.col(score).cast("double")  # type: ignore[arg-type]
        keep &= F.coalesce(~F.isnan(value) & (value >= 0.0) & (value <= 1.0), F.lit(False))
    return keep


def _timed(timings: dict[str, float], name: str, step: Any, *args: Any) -> Any:
    started = time.perf_counter()
    try:
        return step(*args)
    finally:
        timings[name] = time.perf_counter() - started


def _hfm_average(data: Any, *, spark: Any = None, **arguments: Any
                 ) -> tuple[dict[Any, dict[str, tuple[HFMResult, list[Any]]]],
                            dict[Any, dict[str, Any]], dict[str, float]]:
    """:func:`hfm_average_spark`, with each result's warnings and the jobs' timings.

    ``arguments`` are :func:`hfm_average_spark`'s (:class:`_Request`). The steps: select the
    rows under internal names, aggregate them (one job), choose the query rows (one job, the
    top ``q`` by hash chosen on the executors), scan them against every row (one job), and
    build the results on the driver.
    """
    request = _Request(**arguments).checked()
    df = read_table(data, spark)
    absent = [c for c in request.columns() if c not in df.columns]
    if absent:
        raise InvalidInputError(
            f"column(s) {absent} not in the data; available columns: {list(df.columns)}")
    rows, layout = _select(df, request)
    timings: dict[str, float] = {}
    windows, groups, originals = _timed(timings, "aggregate", _aggregate, rows, request, layout)
    selected = rows.drop(_ORIG) if not layout.key_is_long else rows
    plan = HFMPlan(len(request.sensitive), layout.numeric, layout.n_extra,
                   tuple(attribute_salt(request.seed, n) for n in request.sensitive), windows)
    chosen = _timed(timings, "queries", _query_rows, selected, plan, request.n_queries)
    d2 = _timed(timings, "scan", _scan, selected, plan, chosen, layout)
    results, queries = _results(request, layout, windows, groups, originals, d2, chosen)
    return results, queries, timings


def _sensitive_columns(request: _Request, types: Mapping[str, str]) -> tuple[list[Any], Any]:
    """Select the sensitive columns (internal names, missing-value policy); the rows kept."""
    from pyspark.sql import functions as F

    cols, keep = [], F.lit(True)
    for i, name in enumerate(request.sensitive):
        c, how = F.col(name), _policy(request.missing, name)
        absent_value = c.isNull() | (F.isnan(c) if types[name] in ("float", "double")
                                     else F.lit(False))
        if how == "group":
            c = F.when(absent_value, F.lit("missing")).otherwise(c.cast("string"))
        elif how == "drop":
            keep &= ~F.coalesce(absent_value, F.lit(True))
        cols.append(c.alias(sens(i)))
    return cols, keep


def _feature_columns(request: _Request, types: Mapping[str, str]
                     ) -> tuple[list[Any], tuple[bool, ...]]:
    """Select the features under internal names (numbers as doubles); which are numbers."""
    from pyspark.sql import functions as F

    cols, numeric = [], []
    for i, name in enumerate(request.feature_list):
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
    return cols, tuple(numeric)


def _select(df: Any, request: _Request) -> tuple[Any, _Layout]:
    """Select the rows as the executors see them: internal names, the row policies applied."""
    from pyspark.sql import functions as F

    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    key, key_type, window_us, key_is_long = window_key(
        df, request.timestamp, request.window, request.window_column, request.timestamp_unit)
    if not key_is_long:
        key = F.col(request.window_column).cast("string")  # type: ignore[arg-type]
        key_type = "string"
    cols, keep = _sensitive_columns(request, types)
    keep &= F.col(KEY).isNotNull() & _valid_rows(request.label, request.prediction,
                                                 request.score)
    features, numeric = _feature_columns(request, types)
    score = None if request.score is None else F.col(request.score).cast("double")
    pred = (F.col(request.prediction) if request.prediction is not None
            else (score >= F.lit(float(request.threshold))).cast("int"))  # type: ignore
    cols += [*features, F.col(request.label).alias(LABEL), pred.alias(PRED)]
    extras = []  # hashed only: rows that differ in score or time are distinct draws
    if score is not None:
        extras.append(score)
    if request.timestamp is not None:
        extras.append(epoch_micros(df, request.timestamp, request.timestamp_unit))
    cols += [e.alias(extra(i)) for i, e in enumerate(extras)]
    cols.append(key.alias(KEY))
    if not key_is_long:
        cols.append(F.col(request.window_column).alias(_ORIG))  # type: ignore[arg-type]
    whole = window_us is None and key_is_long and request.window_column is None
    layout = _Layout(key_type, window_us, key_is_long, whole, numeric, len(extras))
    return df.select(*cols).where(keep), layout


def _aggregate(rows: Any, request: _Request, layout: _Layout
               ) -> tuple[dict[Any, WindowPlan], dict[Any, list[_Attribute]], dict[Any, Any]]:
    """Count rows per (window, groups, label, prediction); feature ranges, missing values."""
    from pyspark.sql import functions as F

    aggs = [F.count(F.lit(1)).alias("n")]
    for i, is_num in enumerate(layout.numeric):
        c = F.col(feat(i))
        bad = c.isNull() | F.isnan(c) if is_num else c.isNull()
        aggs.append(F.sum(F.when(bad, 1).otherwise(0)).alias(f"bad{i}"))
        if is_num:
            aggs += [F.min(c).alias(f"lo{i}"), F.max(c).alias(f"hi{i}")]
    if not layout.key_is_long:
        aggs.append(F.min(_ORIG).alias(_ORIG))
    cells = rows.groupBy(KEY, *(sens(i) for i in range(len(request.sensitive))), LABEL, PRED) \
        .agg(*aggs).collect()
    return _window_plans(cells, request, layout)


#: the rank of a candidate among its window's and attribute's, by hash
_RANK = "__fm_rank__"


def _query_rows(selected: Any, plan: HFMPlan, n_queries: int
                ) -> dict[Any, dict[int, Any]]:
    """Choose the query rows: per window and attribute, the ``q`` kept rows of smallest hash.

    Chosen on the executors in two stages: each partition's ``q`` smallest
    (:func:`query_candidates`), then the global top ``q`` of those per window and attribute
    (a window function); only the chosen rows reach the driver. Per window and attribute, a
    pandas frame in hash order (internal column names).
    """
    import functools

    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    schema = StructType([*selected.schema.fields, StructField(ATTR, IntegerType()),
                         StructField(HASH, LongType())])
    candidates = selected.mapInPandas(functools.partial(query_candidates, plan), schema)
    # HASH sorts as the unsigned key (query_candidates flips its top bit); n_queries[s] is
    # min(n_queries, the attribute's rows): ranks up to n_queries are that many rows
    rank = F.row_number().over(Window.partitionBy(KEY, ATTR).orderBy(HASH))
    top = candidates.withColumn(_RANK, rank).where(F.col(_RANK) <= n_queries) \
        .drop(_RANK).toPandas()
    chosen: dict[Any, dict[int, Any]] = {}
    for (k, s), part in top.groupby([KEY, ATTR], sort=False):
        order = np.argsort(part[HASH].to_numpy(), kind="stable")
        part = part.iloc[order[: plan.windows[k].n_queries[s]]].reset_index(drop=True)
        chosen.setdefault(k, {})[int(s)] = part.drop(columns=[ATTR, HASH, KEY])
    return chosen


def _scan(selected: Any, plan: HFMPlan, chosen: Mapping[Any, Mapping[int, Any]],
          layout: _Layout) -> dict[tuple[Any, int], NDArray[np.float64]]:
    """Scan: each query row's minimum squared distances (labels, predictions) over all rows."""
    import functools

    from pyspark.sql import functions as F

    n_sensitive = plan.n_sensitive
    scan_windows = {
        k: dataclasses.replace(w, queries=tuple(
            None if s not in chosen.get(k, {})
            else {c: chosen[k][s][c].to_numpy() for c in chosen[k][s].columns}
            for s in range(n_sensitive)))
        for k, w in plan.windows.items()}
    plan = dataclasses.replace(plan, windows=scan_windows)
    out_schema = (f"{KEY} {layout.key_type}, {ATTR} int, {QUERY} int, {TRUE} double, "
                  f"{MODEL} double")
    nearest = selected.mapInPandas(functools.partial(scan_partition, plan), out_schema) \
        .groupBy(KEY, ATTR, QUERY).agg(F.min(TRUE).alias(TRUE), F.min(MODEL).alias(MODEL)) \
        .collect()
    d2 = {(k, s): np.full((2, w.n_queries[s]), np.inf)
          for k, w in plan.windows.items() for s in range(n_sensitive) if w.n_queries[s]}
    for r in nearest:
        d2[(r[KEY], int(r[ATTR]))][:, int(r[QUERY])] = (r[TRUE], r[MODEL])
    return d2


def _window_results(request: _Request, w: WindowPlan, attrs: list[_Attribute],
                    d2: Mapping[int, NDArray[np.float64]]
                    ) -> dict[str, tuple[HFMResult, list[Any]]]:
    """Build one window's results per attribute (and the intersection), as ``hfm`` builds them."""
    sensitive = request.sensitive
    n_rows = int(sum(attrs[0].counts)) + sum(attrs[0].excluded.values())
    averages = {s: average_of_distances(np.sqrt(d2[s]), int(attrs[s].counts.sum()))
                for s in range(len(sensitive)) if w.n_queries[s]}
    combos = [[s] for s in range(len(sensitive))]
    if request.intersection and len(sensitive) > 1:
        combos.append(list(range(len(sensitive))))
    out = {}
    for combo in combos:
        name = INTERSECTION_SEPARATOR.join(sensitive[s] for s in combo)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for s in combo:
                attrs[s].caught_replay()
            defined = [s for s in combo if s in averages]
            result = sampled_result([averages[s] for s in defined],
                                    [attrs[s].groups for s in combo],
                                    [attrs[s].groups for s in defined], "average",
                                    request.n_queries, n_rows)
        out[name] = (result, list(caught))
    return out


def _results(request: _Request, layout: _Layout, windows: Mapping[Any, WindowPlan],
             groups: Mapping[Any, list[_Attribute]], originals: Mapping[Any, Any],
             d2: Mapping[tuple[Any, int], NDArray[np.float64]],
             chosen: Mapping[Any, Mapping[int, Any]]
             ) -> tuple[dict[Any, dict[str, tuple[HFMResult, list[Any]]]],
                        dict[Any, dict[str, Any]]]:
    """Return the results and the query rows per window, keyed as the summaries are."""
    results: dict[Any, dict[str, tuple[HFMResult, list[Any]]]] = {}
    queries: dict[Any, dict[str, Any]] = {}
    for k, w in windows.items():
        out_key = layout.out_key(k, originals)
        mine = {s: d2[(k, s)] for s in range(len(request.sensitive)) if (k, s) in d2}
        results[out_key] = _window_results(request, w, groups[k], mine)
        queries[out_key] = {request.sensitive[s]: f for s, f in chosen.get(k, {}).items()}
    return results, queries


def _check_complete(part: list[Any], request: _Request, numeric: tuple[bool, ...]) -> None:
    """Raise on missing features or sensitive values HFM cannot take."""
    for i, name in enumerate(request.feature_list):
        bad = sum(int(r[f"bad{i}"]) for r in part)
        if bad:
            kind = "missing or NaN" if numeric[i] else "missing"
            raise InvalidInputError(
                f"feature '{name}' has {bad} {kind} values; HFM needs every feature of "
                "every row (fill them, or drop those rows)")
    for i, name in enumerate(request.sensitive):
        n = sum(r["n"] for r in part if r[sens(i)] is None or r[sens(i)] != r[sens(i)])
        if n:
            raise InvalidInputError(
                f"sensitive feature '{name}' has {n} missing values (NaN/None); give "
                "missing='group' or 'drop' (or a per-column mapping), or fill them")


def _classes(part: list[Any], label: str) -> NDArray[Any]:
    """Return the classes of the labels and predictions together, sorted."""
    values = [r[LABEL] for r in part] + [r[PRED] for r in part]
    if any(v is None for v in values):  # rows without one are filtered out: a safeguard
        raise InvalidInputError(f"the label or prediction column has missing values "
                                f"('{label}'); drop those rows")
    if all(isinstance(v, int | float) for v in values):
        classes = np.unique(np.array(values, dtype=np.float64))
        if (classes != np.round(classes)).any() or not np.isfinite(classes).all():
            raise InvalidInputError(
                f"'{label}' and the predictions must hold class labels; got "
                f"{classes[classes != np.round(classes)][:3].tolist()}")
        return classes
    if all(isinstance(v, str) for v in values):
        return np.unique(np.array(values, dtype=str))
    raise InvalidInputError("the labels and the predictions must use the same class "
                            "labels (both numbers or both text)")


def _ranges(part: list[Any], numeric: tuple[bool, ...]
            ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return the minimum and maximum of each numeric feature over the window's rows."""
    lo = np.array([min(float(r[f"lo{i}"]) for r in part)
                   for i, is_num in enumerate(numeric) if is_num], dtype=np.float64)
    hi = np.array([max(float(r[f"hi{i}"]) for r in part)
                   for i, is_num in enumerate(numeric) if is_num], dtype=np.float64)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise InvalidInputError("a numeric feature holds infinite values; HFM needs "
                                "finite features")
    return lo, hi


def _window_plans(cells: list[Any], request: _Request, layout: _Layout
                  ) -> tuple[dict[Any, WindowPlan], dict[Any, list[_Attribute]], dict[Any, Any]]:
    """Build each window's plan from the aggregate pass's rows; raise on what HFM cannot take."""
    by_key: dict[Any, list[Any]] = {}
    for r in cells:
        by_key.setdefault(r[KEY], []).append(r)
    windows, groups, originals = {}, {}, {}
    for k, part in by_key.items():
        _check_complete(part, request, layout.numeric)
        classes = _classes(part, request.label)
        lo, hi = _ranges(part, layout.numeric)
        attrs = []
        for i, name in enumerate(request.sensitive):
            counts: dict[Any, int] = {}
            for r in part:
                counts[r[sens(i)]] = counts.get(r[sens(i)], 0) + int(r["n"])
            attrs.append(_Attribute(name, counts, request.min_group_size))
        groups[k] = attrs
        windows[k] = WindowPlan(
            lo, hi - lo, classes, tuple(tuple(a.excluded) for a in attrs),
            tuple(min(request.n_queries, int(a.counts.sum()))
                  if a.groups.two_group_reason() is None else 0 for a in attrs))
        if not layout.key_is_long:
            originals[k] = part[0][_ORIG]
    return windows, groups, originals
