from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import fairmonitor
from fairmonitor.exceptions import InvalidInputError, WindowUnavailableError
from fairmonitor.monitor.sources import (
    FileSource,
    MemorySource,
    SQLSource,
    WindowSource,
    expand_json_column,
)
from fairmonitor.monitor.sources.logger import PredictionLogger

T0 = datetime(2026, 11, 22, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _log_rows(url: str, table: str = "predictions") -> PredictionLogger:
    """Six rows on the hour boundaries 12:00..14:00, two of another model."""
    logger = PredictionLogger(url, model="credit", version="3", sensitive_features=["sex"],
                              table=table)
    stamps = [T0 + timedelta(hours=12), T0 + timedelta(hours=12, minutes=59, seconds=59.5),
              T0 + timedelta(hours=13), T0 + timedelta(hours=13, minutes=30)]
    for i, ts in enumerate(stamps):
        logger.log({"sex": "FM"[i % 2]}, score=0.25 * i, prediction=i % 2, id=f"r{i}",
                   timestamp=ts, features={"age": 30 + i, "income": 1000 * i})
    other = PredictionLogger(url, model="other", sensitive_features=["sex"], table=table)
    other.log({"sex": "F"}, prediction=1, timestamp=T0 + timedelta(hours=12, minutes=5))
    other.close()
    return logger


def _check_sql_window(url: str, table: str) -> None:
    logger = _log_rows(url, table)
    source = SQLSource(url, table)
    frame = source.fetch("credit", T0 + timedelta(hours=12), T0 + timedelta(hours=13))
    assert list(frame["id"]) == ["r0", "r1"]
    assert str(frame["timestamp"].dt.tz) == "UTC"
    assert frame["timestamp"].iloc[1] == pd.Timestamp(T0 + timedelta(hours=12, minutes=59,
                                                                     seconds=59.5))
    later = source.fetch("credit", T0 + timedelta(hours=13), T0 + timedelta(hours=14))
    assert list(later["id"]) == ["r2", "r3"]
    # labels attached later, by id, with the time they arrived
    assert logger.attach_labels(["r2", "r3"], [1, 0],
                                labeled_at=T0 + timedelta(days=1)) == 2
    labelled = source.fetch("credit", T0 + timedelta(hours=13), T0 + timedelta(hours=14))
    assert list(labelled["label"]) == [1, 0]
    assert pd.Timestamp(labelled["labeled_at"].iloc[0]) == pd.Timestamp("2026-11-23 00:00")
    logger.close()
    source.close()


def test_sqlite_source_half_open_windows_and_labels(tmp_path):
    _check_sql_window(f"sqlite:///{tmp_path / 'p.db'}", "predictions")


def test_postgres_source_half_open_windows_and_labels(postgres_url):
    _check_sql_window(postgres_url, f"predictions_{uuid.uuid4().hex[:8]}")


def test_postgres_timestamptz_table_written_by_another_tool(postgres_url):
    # a table the user made with pandas: timestamp WITH time zone, no features column
    table = f"external_{uuid.uuid4().hex[:8]}"
    frame = pd.DataFrame({
        "timestamp": pd.to_datetime(["2026-11-22T11:59:59Z", "2026-11-22T12:00:00Z",
                                     "2026-11-22T12:30:00Z", "2026-11-22T13:00:00Z"]),
        "model": "credit", "sex": ["F", "M", "F", "M"], "prediction": [1, 0, 1, 0]})
    engine = sa.create_engine(postgres_url)
    frame.to_sql(table, engine, index=False)
    engine.dispose()
    source = SQLSource(postgres_url, table)
    got = source.fetch("credit", T0 + timedelta(hours=12), T0 + timedelta(hours=13))
    source.close()
    assert list(got["sex"]) == ["M", "F"]


def test_sql_source_down_raises_window_unavailable(tmp_path):
    source = SQLSource(f"sqlite:///{tmp_path / 'empty.db'}", "predictions")
    with pytest.raises(WindowUnavailableError, match="cannot read table 'predictions'"):
        source.fetch("credit", T0, T0 + HOUR)
    source.close()


def test_postgres_server_unreachable_raises_window_unavailable():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    source = SQLSource(f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres")
    with pytest.raises(WindowUnavailableError, match="OperationalError"):
        source.fetch("credit", T0, T0 + HOUR)
    source.close()


def test_sql_source_expands_json_features(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    _log_rows(url).close()
    source = SQLSource(url, expand_features=True)
    frame = source.fetch("credit", T0 + timedelta(hours=12), T0 + timedelta(hours=13))
    source.close()
    assert list(frame["income"]) == [0, 1000]
    assert "features" not in frame.columns


def test_sources_satisfy_the_protocol(tmp_path):
    source = SQLSource(f"sqlite:///{tmp_path / 'p.db'}")
    assert isinstance(source, WindowSource)
    assert isinstance(FileSource(tmp_path), WindowSource)
    assert isinstance(MemorySource(pd.DataFrame()), WindowSource)
    source.close()


def test_prediction_logger_log_frame_round_trip(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    n = 1000
    frame = pd.DataFrame({
        "timestamp": [T0 + timedelta(seconds=3.6 * i) for i in range(n)],
        "sex": np.tile(["F", "M"], n // 2), "race": "a", "score": np.linspace(0, 1, n),
        "prediction": np.arange(n) % 2, "id": [f"id{i}" for i in range(n)]})
    with PredictionLogger(url, model="credit", version="7",
                          sensitive_features=["sex", "race"]) as logger:
        assert logger.log_frame(frame, chunk_size=300) == n
        assert logger.attach_labels([f"id{i}" for i in range(0, n, 2)], [1] * (n // 2)) == n // 2
    got = SQLSource(url).fetch("credit", T0, T0 + HOUR)
    assert len(got) == n
    assert got["label"].notna().sum() == n // 2
    assert set(got["version"]) == {"7"}
    np.testing.assert_allclose(got["score"], frame["score"])


def test_prediction_logger_rejects_bad_rows(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    logger = PredictionLogger(url, model="credit", sensitive_features=["sex"])
    with pytest.raises(InvalidInputError, match=r"sensitive values for \['sex'\] are missing"):
        logger.log({"race": "a"}, prediction=1)
    with pytest.raises(InvalidInputError, match="prediction must be 0 or 1; got 2"):
        logger.log({"sex": "F"}, prediction=2)
    with pytest.raises(InvalidInputError, match=r"score must be in \[0, 1\]; got 1.5"):
        logger.log({"sex": "F"}, score=1.5)
    with pytest.raises(InvalidInputError, match="ids has 2 items but labels has 1"):
        logger.attach_labels(["a", "b"], [1])
    logger.close()
    with pytest.raises(InvalidInputError, match=r"exists without column\(s\) \['race'\]"):
        PredictionLogger(url, model="credit", sensitive_features=["sex", "race"])
    with pytest.raises(InvalidInputError, match=r"sensitive_features \['label'\] clash"):
        PredictionLogger(url, model="credit", sensitive_features=["label"], table="t2")


def test_prediction_logger_is_lazy_and_reexported():
    code = ("import sys, fairmonitor; assert 'sqlalchemy' not in sys.modules; "
            "from fairmonitor import PredictionLogger; "
            "import fairmonitor.monitor.sources.logger as m; "
            "assert PredictionLogger is m.PredictionLogger")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert fairmonitor.PredictionLogger is PredictionLogger


def _partitioned(tmp_path, fmt: str) -> FileSource:
    frame = pd.DataFrame({
        "timestamp": [T0 + timedelta(hours=h, minutes=m) for h in (12, 13) for m in (0, 30)],
        "model": "credit", "sex": ["F", "M", "F", "M"], "prediction": [1, 0, 0, 1]})
    for hour, part in frame.groupby(frame["timestamp"].dt.hour):
        d = tmp_path / "dt=2026-11-22" / f"hour={hour:02d}"
        d.mkdir(parents=True)
        if fmt == "csv":
            part.to_csv(d / "part-0.csv", index=False)
        else:
            part.to_parquet(d / "part-0.parquet")
    # a file of another day that must not even be opened for a 13:00 window
    bad = tmp_path / "dt=2026-11-21" / "hour=13"
    bad.mkdir(parents=True)
    (bad / f"part-0.{fmt}").write_text("not a valid file")
    return FileSource(tmp_path, f"**/*.{fmt}")


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_file_source_hive_partitions(tmp_path, fmt):
    source = _partitioned(tmp_path, fmt)
    start, end = T0 + timedelta(hours=13), T0 + timedelta(hours=14)
    assert [p.parent.name for p in source.files("credit", start, end)] == ["hour=13"]
    frame = source.fetch("credit", start, end)
    assert list(frame["prediction"]) == [0, 1]
    assert frame["timestamp"].iloc[0] == pd.Timestamp(start)


def test_file_source_unreadable_file_is_unavailable(tmp_path):
    source = _partitioned(tmp_path, "parquet")
    with pytest.raises(WindowUnavailableError, match="cannot read"):
        source.fetch("credit", T0 + timedelta(hours=13) - timedelta(days=1),
                     T0 + timedelta(hours=14) - timedelta(days=1))


def test_file_source_timestamped_file_names(tmp_path):
    for h in (10, 11, 12):
        pd.DataFrame({"timestamp": [T0 + timedelta(hours=h, minutes=10)], "model": "credit",
                      "sex": ["F"], "prediction": [h % 2]}).to_csv(
            tmp_path / f"preds-2026-11-22T{h:02d}-00-00.csv", index=False)
    pd.DataFrame({"timestamp": [T0 + timedelta(hours=11, minutes=5)], "model": "credit",
                  "sex": ["M"], "prediction": [1]}).to_csv(tmp_path / "misc.csv", index=False)
    source = FileSource(tmp_path, "*.csv")
    start, end = T0 + timedelta(hours=11), T0 + timedelta(hours=12)
    names = [p.name for p in source.files("credit", start, end)]
    assert names == ["misc.csv", "preds-2026-11-22T11-00-00.csv"]
    assert list(source.fetch("credit", start, end)["sex"]) == ["M", "F"]


def test_file_source_missing_directory_is_unavailable(tmp_path):
    with pytest.raises(WindowUnavailableError, match="not found"):
        FileSource(tmp_path / "nope").fetch("credit", T0, T0 + HOUR)


def test_file_source_model_partition_and_empty_window(tmp_path):
    for model in ("credit", "other"):
        d = tmp_path / f"model={model}" / "dt=2026-11-22"
        d.mkdir(parents=True)
        pd.DataFrame({"timestamp": [T0 + timedelta(hours=1)], "sex": ["F"],
                      "prediction": [int(model == "credit")]}).to_parquet(d / "p.parquet")
    source = FileSource(tmp_path)
    assert list(source.fetch("credit", T0, T0 + 2 * HOUR)["prediction"]) == [1]
    assert len(source.fetch("credit", T0 + 2 * HOUR, T0 + 3 * HOUR)) == 0


def test_memory_source_filters_model_and_window(predictions):
    source = MemorySource(predictions)
    frame = source.fetch("credit", T0 + HOUR, T0 + 2 * HOUR)
    assert len(frame) == 200
    assert len(source.fetch("other", T0, T0 + HOUR)) == 0
    source.down = True
    with pytest.raises(WindowUnavailableError):
        source.fetch("credit", T0, T0 + HOUR)


def test_expand_json_column_keeps_existing_columns():
    frame = pd.DataFrame({"sex": ["F", "M"], "features": [json.dumps({"sex": "x", "a": 1}), None]})
    out = expand_json_column(frame, "features")
    assert list(out.columns) == ["sex", "a"]
    assert list(out["sex"]) == ["F", "M"]


def test_build_source_reads_only_the_needed_columns(tmp_path):
    from fairmonitor.monitor.config import load_config
    from fairmonitor.monitor.sources import build_source, build_sources, needed_columns

    url = f"sqlite:///{tmp_path / 'p.db'}"
    _log_rows(url).close()
    cfg = load_config(f"""
models:
  credit:
    source: {{kind: sql, url: "{url}"}}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    metrics: [demographic_parity_difference]
  again:
    source: {{kind: sql, url: "{url}"}}
    sensitive_features: [sex]
    prediction: prediction
    window: 1d
    metrics: [demographic_parity_ratio]
""")
    model = cfg.models["credit"]
    assert needed_columns(model) == ("version", "prediction", "sex")
    source = build_source(model)
    frame = source.fetch("credit", T0 + timedelta(hours=12), T0 + timedelta(hours=13))
    assert list(frame.columns) == ["timestamp", "version", "prediction", "sex"]
    sources = build_sources(cfg)
    assert sources["credit"] is sources["again"]  # one connection pool for the same reads
    source.close()
    sources["credit"].close()


def test_log_frame_validates_columns_and_generates_ids(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    logger = PredictionLogger(url, model="credit", version="2", sensitive_features=["sex"])
    ok = pd.DataFrame({"sex": ["F", "M"], "prediction": [1, 0],
                       # nanoseconds are dropped (the table stores microseconds), silently
                       "timestamp": pd.to_datetime(["2026-11-22T00:00:00.000000001Z",
                                                    "2026-11-22T00:30:00Z"], format="ISO8601")})
    assert logger.log_frame(ok) == 2
    got = SQLSource(url).fetch("credit", T0, T0 + HOUR)
    assert got["id"].str.len().tolist() == [34, 34]  # uuid4 hex + "-<row>"
    assert got["id"].nunique() == 2
    assert list(got["timestamp"]) == [pd.Timestamp(T0), pd.Timestamp(T0 + HOUR / 2)]
    assert got["score"].isna().all()
    with pytest.raises(InvalidInputError, match="prediction must be 0 or 1; got 2"):
        logger.log_frame(ok.assign(prediction=[1, 2]))
    with pytest.raises(InvalidInputError, match=r"score must be in \[0, 1\]; got -0.5"):
        logger.log_frame(ok.assign(score=[0.5, -0.5]))
    with pytest.raises(InvalidInputError, match=r"sensitive values for \['sex'\] are missing"):
        logger.log_frame(ok.drop(columns=["sex"]))
    with pytest.raises(InvalidInputError, match="sensitive feature 'sex' has missing values"):
        logger.log_frame(ok.assign(sex=["F", None]))
    logger.close()


def test_sql_fetch_in_chunks_gives_the_one_read_frame(tmp_path, monkeypatch):
    # labels arrive late: a chunk of only NULL labels must not turn the column into objects
    import fairmonitor.monitor.sources.sql as sql

    url = f"sqlite:///{tmp_path / 'p.db'}"
    logger = PredictionLogger(url, model="credit", sensitive_features=["sex"])
    for i in range(7):
        logger.log({"sex": "FM"[i % 2]}, score=0.1 * i, prediction=i % 2, id=f"r{i}",
                   timestamp=T0 + timedelta(minutes=i))
    logger.attach_labels(["r0", "r1"], [1, 0])
    logger.close()
    whole = SQLSource(url).fetch("credit", T0, T0 + HOUR)
    monkeypatch.setattr(sql, "FETCH_ROWS", 2)
    chunked = SQLSource(url).fetch("credit", T0, T0 + HOUR)
    assert whole.shape[0] == 7
    pd.testing.assert_frame_equal(chunked, whole)
    assert chunked["label"].tolist()[:2] == [1.0, 0.0] and chunked["label"].isna().sum() == 5
