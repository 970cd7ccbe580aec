"""The monitor on a Spark table or Parquet path (issue 17 item 4: `source: {kind: spark}`).

Before: `SparkSource` existed as a class but `monitor.yaml` could not name it (kinds sql and
files only), so the monitor's gauges could not come from a lakehouse table. Now a config with
`kind: spark` gives the same windows and values as the same rows from memory.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from fairmonitor.exceptions import ConfigError
from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sources import MemorySource, build_sources

T0 = datetime(2026, 1, 5, tzinfo=UTC)
HOUR = timedelta(hours=1)
METRICS = ["demographic_parity_difference", "equalized_odds_difference", "abcc", "madd"]


def config(source: str, tmp_path, rollups: str = "[]"):
    return load_config(f"""
models:
  credit:
    source: {source}
    sensitive_features: [sex, race]
    label: label
    score: score
    window: 1h
    start: "{T0.isoformat()}"
    metrics: [{", ".join(METRICS)}]
    rollups: {rollups}
""", base_dir=tmp_path)


def test_kind_spark_reads_a_parquet_path_as_the_memory_source_would(spark, prediction_log,
                                                                    tmp_path):
    log = prediction_log(4000, hours=4).assign(model="credit")
    log.to_parquet(tmp_path / "preds.parquet")
    cfg = config("{kind: spark, path: preds.parquet}", tmp_path, rollups="[2h]")
    assert cfg.models["credit"].source.path == tmp_path / "preds.parquet"
    sources = build_sources(cfg)
    now = T0 + 4 * HOUR
    got = run_once(cfg, sources, MemoryCheckpoint(), now=now)
    memory = log.assign(timestamp=pd.to_datetime(log["timestamp"]).dt.tz_localize("UTC"))
    want = run_once(cfg, {"credit": MemorySource(memory)}, MemoryCheckpoint(), now=now)
    assert [(r.rollup, r.end, r.n_rows) for r in got] == \
        [(r.rollup, r.end, r.n_rows) for r in want]
    assert sum(r.n_rows for r in got if not r.rollup) == len(log)
    assert len([r for r in got if r.rollup == "2h"]) == 2
    for a, b in zip(got, want, strict=True):
        assert a.errors == {} and a.report.group_counts == b.report.group_counts
        for key, value in b.report.values.items():
            assert a.report.values[key] == pytest.approx(value, abs=1e-12), key


def test_kind_spark_names_a_table(spark, prediction_log, tmp_path):
    log = prediction_log(600, hours=1).assign(model="credit")
    log.to_parquet(tmp_path / "table.parquet")
    spark.read.parquet(str(tmp_path / "table.parquet")).createOrReplaceTempView(
        "credit_predictions")
    cfg = config("{kind: spark, table: credit_predictions}", tmp_path)
    results = run_once(cfg, build_sources(cfg), MemoryCheckpoint(), now=T0 + HOUR)
    assert [r.n_rows for r in results] == [600] and results[0].errors == {}


@pytest.mark.parametrize("source, message", [
    ("{kind: spark}", "give 'table' (a Hive, Unity Catalog or Delta table) or 'path'"),
    ("{kind: spark, table: t, path: p}", "not both"),
    ("{kind: spark, table: t, master: 'local[2]', remote: 'sc://h:15002'}",
     "give 'master' or 'remote' (Spark Connect), not both"),
    ("{kind: spark, table: t, remote: 'http://h'}", "must be a Spark Connect URL"),
])
def test_kind_spark_config_errors(tmp_path, source, message):
    with pytest.raises(ConfigError) as err:
        config(source, tmp_path)
    assert message in str(err.value), str(err.value)
