"""Real column types and bad rows (issue 15 items 7, 8, 11): what PostgreSQL, Parquet and CSV
really return is accepted, invalid model outputs are dropped by one rule and counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import evaluate_model_window
from fairmonitor.monitor.sinks.prometheus import FairnessCollector
from fairmonitor.monitor.sources import FileSource, MemorySource, SQLSource

T0 = datetime(2026, 11, 22, tzinfo=UTC)
H = timedelta(hours=1)
DPD, EOD = "demographic_parity_difference", "equal_opportunity_difference"


def _model(*, score=None, prediction=None, label=None, metrics=(DPD,)):
    cols = "".join(f"    {k}: {v}\n" for k, v in
                   (("score", score), ("prediction", prediction), ("label", label)) if v)
    return load_config(f"""
models:
  credit:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
{cols}    window: 1h
    min_group_size: 1  # a handful of rows per window: every group counts
    min_condition_size: 1
    metrics: [{", ".join(metrics)}]
""").models["credit"]


def _frame(**columns):
    n = len(next(iter(columns.values())))
    stamps = [T0 + timedelta(minutes=i) for i in range(n)]
    return pd.DataFrame({"timestamp": stamps, "model": "credit", **columns})


def test_invalid_scores_are_dropped_and_counted_not_thresholded():
    """NaN scores used to become prediction 0 and inf 1: DP 0.5 where the valid rows give 0."""
    frame = _frame(sex=list("FFFFMMMM"),
                   score=[0.9, 0.1, np.nan, np.nan, 0.9, 0.1, np.inf, 1.5])
    result = evaluate_model_window(_model(score="score"), MemorySource(frame), T0, T0 + H,
                                   now=T0 + H)
    # valid rows: F {0.9, 0.1}, M {0.9, 0.1}: selection rates 0.5 and 0.5
    assert result.report.values[(DPD, "sex")] == 0.0
    assert dict(result.rejected) == {"invalid_score": 4}
    assert result.n_rows == 4
    registry = CollectorRegistry()
    FairnessCollector(registry, models={"credit": _model(score="score")}).observe(result)
    assert registry.get_sample_value("fairmonitor_window_rejected_rows",
                                     {"model": "credit", "reason": "invalid_score"}) == 4.0
    assert registry.get_sample_value("fairmonitor_window_rejected_rows",
                                     {"model": "credit", "reason": "invalid_prediction"}) == 0.0


def test_duplicate_rows_are_counted_and_exported():
    frame = _frame(sex=list("FFMM"), prediction=[1, 0, 1, 0])
    frame = pd.concat([frame, frame.iloc[[0, 0]]], ignore_index=True)  # logged three times
    result = evaluate_model_window(_model(prediction="prediction"), MemorySource(frame), T0,
                                   T0 + H, now=T0 + H)
    assert result.duplicates == 2
    registry = CollectorRegistry()
    FairnessCollector(registry, models={"credit": _model(prediction="prediction")}).observe(
        result)
    assert registry.get_sample_value("fairmonitor_window_duplicate_rows",
                                     {"model": "credit"}) == 2.0


def test_postgres_numeric_scores_and_nullable_boolean_labels(postgres_url):
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS typed"))
        conn.execute(sa.text("CREATE TABLE typed (timestamp TIMESTAMP, model TEXT, sex TEXT, "
                             "score NUMERIC(6, 4), label BOOLEAN)"))
        rows = [("F", "0.9000", True), ("F", "0.2000", None), ("F", "0.7000", False),
                ("M", "0.1000", True), ("M", "0.8000", None), ("M", "0.3000", False)]
        for i, (sex, score, label) in enumerate(rows):
            conn.execute(sa.text("INSERT INTO typed VALUES (:t, 'credit', :s, :p, :l)"),
                         {"t": (T0 + timedelta(minutes=i)).replace(tzinfo=None), "s": sex,
                          "p": score, "l": label})
    engine.dispose()
    source = SQLSource(postgres_url, "typed")
    raw = source.fetch("credit", T0, T0 + H)
    assert isinstance(raw["score"].iloc[0], Decimal)  # what psycopg2 really returns
    model = _model(score="score", label="label", metrics=(DPD, EOD))
    result = evaluate_model_window(model, source, T0, T0 + H, now=T0 + H)
    source.close()
    assert result.ok, result.errors
    # predictions (score >= 0.5): F 1,0,1 -> 2/3; M 0,1,0 -> 1/3
    assert result.report.values[(DPD, "sex")] == pytest.approx(1 / 3)
    # labelled rows only: F (1, y=1), (1, y=0); M (0, y=1), (0, y=0): TPR 1 vs 0
    assert result.report.values[(EOD, "sex")] == pytest.approx(1.0)
    assert result.labels_included and not result.rejected


def test_parquet_nullable_booleans_decimals_and_dictionary_strings(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "timestamp": pa.array([T0 + timedelta(minutes=i) for i in range(6)],
                              pa.timestamp("us", tz="UTC")),
        "model": pa.array(["credit"] * 6).dictionary_encode(),
        "sex": pa.array(list("FFFMMM")).dictionary_encode(),
        "score": pa.array([Decimal("0.9"), Decimal("0.2"), Decimal("0.7"), Decimal("0.1"),
                           Decimal("0.8"), Decimal("0.3")], pa.decimal128(6, 4)),
        "label": pa.array([True, None, False, True, None, False], pa.bool_()),
    })
    pq.write_table(table, tmp_path / "preds-2026-11-22.parquet")
    source = FileSource(tmp_path)
    model = _model(score="score", label="label", metrics=(DPD, EOD))
    result = evaluate_model_window(model, source, T0, T0 + H, now=T0 + H)
    assert result.ok, result.errors
    assert result.report.values[(DPD, "sex")] == pytest.approx(1 / 3)
    assert result.report.values[(EOD, "sex")] == pytest.approx(1.0)


def test_csv_string_labels_accepted_and_ambiguous_ones_refused(tmp_path):
    csv = tmp_path / "preds-2026-11-22.csv"
    stamps = [(T0 + timedelta(minutes=i)).isoformat() for i in range(6)]
    pd.DataFrame({"timestamp": stamps, "model": "credit", "sex": list("FFFMMM"),
                  "prediction": ["1", "0", "true", "0", "FALSE", "1"],
                  "label": ["1", "0", "", "1", "0", "1"]}).to_csv(csv, index=False)
    model = _model(prediction="prediction", label="label", metrics=(DPD, EOD))
    result = evaluate_model_window(model, FileSource(tmp_path, "*.csv"), T0, T0 + H,
                                   now=T0 + H)
    assert result.ok, result.errors
    assert result.report.values[(DPD, "sex")] == pytest.approx(1 / 3)  # 2/3 vs 1/3
    frame = pd.read_csv(csv).assign(prediction=["1", "0", "maybe", "0", "0", "1"])
    frame.to_csv(csv, index=False)
    bad = evaluate_model_window(model, FileSource(tmp_path, "*.csv"), T0, T0 + H, now=T0 + H)
    assert bad.report is None
    assert bad.errors["data"] == (
        "column 'prediction' must hold 0/1 or true/false; found ['maybe']. Map its values to "
        "0/1 in the source (e.g. a SQL CASE or a view).")


def test_rows_without_a_usable_timestamp_are_counted_not_a_stuck_window(tmp_path):
    """Issue 15 item 11: rows in no window were dropped silently; an unparseable timestamp
    made the whole file unreadable, so the window was retried forever."""
    csv = tmp_path / "preds-2026-11-22.csv"
    stamps = [(T0 + timedelta(minutes=i)).isoformat() for i in range(4)] + ["", "yesterday"]
    pd.DataFrame({"timestamp": stamps, "model": "credit", "sex": list("FMFMFM"),
                  "prediction": [1, 0, 1, 0, 1, 1]}).to_csv(csv, index=False)
    result = evaluate_model_window(_model(prediction="prediction"), FileSource(tmp_path, "*.csv"),
                                   T0, T0 + H, now=T0 + H)
    assert result.ok, result.errors
    assert result.n_rows == 4
    assert dict(result.rejected) == {"no_timestamp": 2}
    assert result.report.values[(DPD, "sex")] == 1.0  # F 2/2, M 0/2


def test_sql_rows_without_a_timestamp_are_counted(tmp_path):
    """Issue 15 item 11, SQL side: rows whose timestamp is NULL fell out of every window's
    WHERE clause without a trace; they are counted with every window, as files count theirs."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'p.db'}")
    stamps = [T0 + timedelta(minutes=i) for i in range(4)] + [None, None, None]
    pd.DataFrame({"timestamp": stamps, "model": ["credit"] * 6 + ["other"],
                  "sex": list("FMFMFMF"), "prediction": [1, 0, 1, 0, 1, 1, 1]}).to_sql(
        "predictions", engine, index=False)
    engine.dispose()
    source = SQLSource(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        result = evaluate_model_window(_model(prediction="prediction"), source, T0, T0 + H,
                                       now=T0 + H)
    finally:
        source.close()
    assert result.ok, result.errors
    assert result.n_rows == 4
    assert dict(result.rejected) == {"no_timestamp": 2}  # the other model's is not ours
    assert result.report.values[(DPD, "sex")] == 1.0


def test_an_identifier_like_attribute_is_counted_and_said_once(caplog):
    """Issue 15 item 13: a 10k-value attribute exported row-level values as labels; the group
    series are capped (issue 14), and the attribute's size is now exported and said in the
    log once, with the fix."""
    from fairmonitor.monitor import job

    n = job.MANY_GROUPS + 1
    frame = pd.DataFrame({"timestamp": [T0 + timedelta(seconds=i) for i in range(2 * n)],
                          "model": "credit", "sex": [f"id{i % n}" for i in range(2 * n)],
                          "prediction": [i % 2 for i in range(2 * n)]})
    model = _model(prediction="prediction")
    job._warned_many_groups.discard(("credit", "sex"))
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models={"credit": model})
    with caplog.at_level("WARNING", logger="fairmonitor.monitor.job"):
        for _ in range(2):
            result = evaluate_model_window(model, MemorySource(frame), T0, T0 + H, now=T0 + H)
            collector.observe(result)
    said = [r for r in caplog.records if "identifier-like" in r.getMessage()]
    assert len(said) == 1 and f"has {n} distinct values" in said[0].getMessage()
    assert registry.get_sample_value("fairmonitor_groups", {
        "model": "credit", "sensitive_attribute": "sex"}) == float(n)


@pytest.mark.parametrize("seed", range(6))
def test_duplicate_rows_count_what_duplicated_counts(seed):
    """The row-hash prefilter changes the cost, never the count (``duplicated`` is the oracle),
    whatever the column types: -0.0 beside 0.0, NaN and NA, arrow text, categoricals, mixed
    objects, nullable integers, timestamps."""
    from fairmonitor.monitor.rows import duplicate_rows

    rng = np.random.default_rng(seed)
    n = 3000
    pick = lambda values: [values[i] for i in rng.integers(0, len(values), n)]  # noqa: E731
    frame = pd.DataFrame({
        "score": pick([0.0, -0.0, 0.25, np.nan, float("nan")]),
        "sex": pd.Series(pick(["F", "M", None])).astype("string[pyarrow]"),
        "race": pd.Series(pick(["a", "b"])).astype("category"),
        "mixed": pd.Series(pick([1, 1.0, "1", None]), dtype=object),
        "count": pd.Series(pick([1, 2, None]), dtype="Int64"),
        "timestamp": pd.Series(pick([pd.Timestamp("2026-11-20", tz="UTC"), pd.NaT])),
        "flag": pick([True, False]),
    })
    frame.index = rng.permutation(n) + 10  # not a default index
    want = int(frame.duplicated().sum())
    assert want > 0
    assert duplicate_rows(frame) == want
    for columns in (["score"], ["mixed"], ["sex", "count"], ["timestamp", "flag", "race"]):
        assert duplicate_rows(frame[columns]) == int(frame[columns].duplicated().sum())
    distinct = pd.DataFrame({"x": np.arange(n, dtype=float), "s": ["a"] * n})
    assert duplicate_rows(distinct) == 0
    assert duplicate_rows(distinct.iloc[:1]) == 0
