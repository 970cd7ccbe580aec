"""A multiclass model on the monitor's Spark source (issue 29): summaries per class.

The executors apply the multiclass row policy (a prediction that is not a class or a
probability outside [0, 1] dropped and counted, a missing label not arrived yet) and summarize
each class's one-vs-rest rows; the driver merges and evaluates them. The oracle is the same
monitor on the same rows from memory (the row path): windows, counts, rejected rows, label
coverage and every per-class and worst-class value, phase by phase, and the rollups.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sources import MemorySource, build_sources
from fairmonitor.monitor.sources.spark import SparkSource

T0 = datetime(2026, 1, 5, tzinfo=UTC)
H = timedelta(hours=1)
CLASSES = ("low", "mid", "high")
METRICS = ["demographic_parity_difference", "equalized_odds_difference", "abcc", "madd"]


def _log(n: int = 1500, hours: int = 4, seed: int = 3) -> pd.DataFrame:
    """``hours`` of a 3-class model's rows with invalid ones and labels missing early."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    race = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    logits = rng.normal(size=(n, 3)) + np.where(sex == "M", 0.7, 0.0)[:, None] * [1, 0, -1]
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    tier = np.array(CLASSES, dtype=object)[np.argmax(logits + rng.normal(size=(n, 3)), 1)]
    predicted = np.array(CLASSES, dtype=object)[np.argmax(proba, axis=1)]
    ts = pd.Timestamp("2026-01-05") + pd.to_timedelta(
        np.sort(rng.uniform(0, hours * 3600, n)), unit="s")
    i = np.arange(n)
    tier[(ts < pd.Timestamp("2026-01-05 02:00")) & (i % 4 == 0)] = None
    predicted[i % 97 == 5] = "unknown"
    proba[i % 89 == 3, 1] = 1.5
    return pd.DataFrame({"timestamp": ts.astype("datetime64[us]"), "model": "tiers",
                         "version": "1", "sex": sex, "race": race, "predicted": predicted,
                         "tier": tier,
                         **{f"p_{c}": proba[:, k] for k, c in enumerate(CLASSES)}})


def _config(tmp_path, source: str, extra: str):
    return load_config(f"""
models:
  tiers:
    source: {source}
    task: multiclass
    scores: {{low: p_low, mid: p_mid, high: p_high}}
    sensitive_features: [sex, race]
    prediction: predicted
    label: tier
    window: 1h
    start: "{T0.isoformat()}"
    metrics: [{", ".join(METRICS)}]
{extra}
""", base_dir=tmp_path)


def _summary(results):
    return [(r.rollup, r.phase, r.start, r.end, r.n_rows, dict(r.rejected), r.labelled_rows,
             r.label_coverage, r.version, dict(r.errors)) for r in results]


@pytest.mark.parametrize("extra", ["    rollups: [2h]", "    labels_after: 1h"],
                         ids=["full-rollups", "label-delay"])
def test_multiclass_spark_source_equals_the_row_path(spark, tmp_path, monkeypatch, extra):
    log = _log()
    log.to_parquet(tmp_path / "tiers.parquet")
    cfg = _config(tmp_path, "{kind: spark, path: tiers.parquet}", extra)

    def refuse(*args, **kwargs):
        raise AssertionError("the monitor collected a window's rows")

    monkeypatch.setattr(SparkSource, "fetch", refuse)
    now = T0 + 4 * H + timedelta(minutes=1)
    got = run_once(cfg, build_sources(cfg), MemoryCheckpoint(), now=now)
    memory = MemorySource(log.assign(timestamp=log["timestamp"].dt.tz_localize("UTC")))
    want = run_once(cfg, {"tiers": memory}, MemoryCheckpoint(), now=now)
    assert _summary(got) == _summary(want)
    assert any(r.rejected for r in got) and any(r.rollup for r in got) == ("rollups" in extra)
    for a, b in zip(got, want, strict=True):
        assert (a.report is None) == (b.report is None)
        if b.report is None:
            continue
        assert set(a.report.values) == set(b.report.values)
        assert any(m.endswith("__class_mid") for m, _ in b.report.values)  # per class too
        for key, value in b.report.values.items():
            if math.isnan(value):
                assert math.isnan(a.report.values[key]), key
            else:
                assert a.report.values[key] == pytest.approx(value, abs=1e-12), key
