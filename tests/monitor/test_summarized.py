"""A summarizing source evaluated phase by phase as the row path evaluates rows (no Spark).

:mod:`fairmonitor.monitor.summarized` is what the monitor runs for ``source: {kind: spark}``;
here the source summarizes in this process with the executors' own function
(``spark._partition.summarize_partition``, pandas only), so the phase logic is checked in the
fast suite: same results as the same rows from memory, and the batch asked once per phase.
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
from fairmonitor.monitor.sources import MemorySource
from fairmonitor.spark import merge_partials
from fairmonitor.spark._partition import KEY, PartitionPlan, summarize_partition
from fairmonitor.spark.windows import WindowParts

T0 = datetime(2026, 1, 5, tzinfo=UTC)
HOUR = timedelta(hours=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
US = timedelta(microseconds=1)


class LocalSummaries:
    """A summarizing source over a DataFrame: Spark's partition function, in this process."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.calls: list[int] = []

    def table_columns(self) -> list[str]:
        return list(self.frame.columns)

    def fetch(self, *args):
        raise AssertionError("a summarizing source is never asked for rows")

    def window_summaries(self, model, spans, *, sensitive_features, label, score, prediction,
                         features, threshold, intersection, spec, missing):
        self.calls.append(len(spans))
        out = {}
        for start, end in spans:
            lo, hi = (start - EPOCH) // US, (end - EPOCH) // US
            plan = PartitionPlan(tuple(sensitive_features), label, score, prediction,
                                 tuple(features), threshold, intersection, spec, missing,
                                 model, "", hi - lo, True)
            rows = self.frame[(self.frame["timestamp"] >= start)
                              & (self.frame["timestamp"] < end)]
            names = [*sensitive_features, *(c for c in (label, score, prediction) if c)]
            halves = [rows.iloc[: len(rows) // 2], rows.iloc[len(rows) // 2:]]  # 2 partitions
            partials = [r for half in halves if len(half)
                        for part in summarize_partition(plan, iter([half[names].assign(
                            **{KEY: lo})]))
                        for r in part.to_dict("records")]
            if not partials:
                continue
            got = merge_partials(partials, plan)
            every, labelled = got.windows.get(start), got.labelled.get(start)
            if every is not None and labelled is None and "y_true" in every.inputs:
                every, labelled = every.without_labels(), every
            versions = rows["version"].astype(str).value_counts().to_dict()
            out[(start, end)] = WindowParts(every, labelled, got.labelled_rows.get(start, 0),
                                            got.rejected.get(start, {}), versions)
        return out


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(8)
    n = 2400
    score = rng.beta(2, 2, n)
    frame = pd.DataFrame({
        "timestamp": T0 + pd.to_timedelta(np.sort(rng.uniform(0, 4 * 3600, n)), unit="s"),
        "model": "credit", "sex": rng.choice(["F", "M"], n), "race": rng.choice(list("abc"), n),
        "score": score, "label": (rng.random(n) < score).astype(float),
        "version": np.where(np.arange(n) % 3 == 0, "4", "5")})
    early = frame["timestamp"] < T0 + 2 * HOUR
    frame.loc[early & (np.arange(n) % 4 == 0), "label"] = np.nan
    frame.loc[np.arange(n) % 61 == 1, "score"] = np.nan
    frame.loc[np.arange(n) % 67 == 2, "score"] = 1.5
    return frame


def config(extra=""):
    return load_config(f"""
models:
  credit:
    source: {{kind: spark, table: t}}
    sensitive_features: [sex, race]
    label: label
    score: score
    window: 1h
    start: "{T0.isoformat()}"
    metrics: [demographic_parity_difference, equalized_odds_difference, abcc, madd]
{extra}
""")


@pytest.mark.parametrize("extra", ["", "    labels_after: 1h", "    rollups: [2h]"],
                         ids=["full", "label-delay", "rollups"])
def test_summaries_give_the_row_paths_results(rows, extra):
    cfg = config(extra)
    source = LocalSummaries(rows)
    now = T0 + 5 * HOUR + timedelta(minutes=1)
    got = run_once(cfg, {"credit": source}, MemoryCheckpoint(), now=now)
    want = run_once(cfg, {"credit": MemorySource(rows)}, MemoryCheckpoint(), now=now)
    # one call per phase for the due windows (more than one), never one per window
    assert all(n > 1 for n in source.calls) and len(source.calls) == (2 if "labels_after"
                                                                       in extra else 1)
    key = [(r.rollup, r.phase, r.start, r.n_rows, dict(r.rejected), r.labelled_rows,
            r.label_coverage, r.labels_overdue, r.version, dict(r.versions),
            r.labels_included, dict(r.errors)) for r in got]
    assert key == [(r.rollup, r.phase, r.start, r.n_rows, dict(r.rejected), r.labelled_rows,
                    r.label_coverage, r.labels_overdue, r.version, dict(r.versions),
                    r.labels_included, dict(r.errors)) for r in want]
    assert any(r.rejected for r in got) and any(r.label_coverage < 1 for r in got
                                                if r.label_coverage is not None)
    for a, b in zip(got, want, strict=True):
        assert (a.report is None) == (b.report is None)
        if b.report is None:
            continue
        assert a.report.group_counts == b.report.group_counts
        assert a.report.values.keys() == b.report.values.keys()
        for k, v in b.report.values.items():
            assert (math.isnan(v) and math.isnan(a.report.values[k])) or \
                a.report.values[k] == pytest.approx(v, abs=1e-12), k


def test_a_source_fault_holds_the_window_and_a_missing_column_is_a_data_error(rows):
    class Down(LocalSummaries):
        def window_summaries(self, *args, **kwargs):
            raise ConnectionError("cluster unreachable")

    now = T0 + 2 * HOUR
    results = run_once(config(), {"credit": Down(rows)}, MemoryCheckpoint(), now=now)
    assert len(results) == 1 and results[0].report is None
    assert "ConnectionError: cluster unreachable" in results[0].errors["source"]
    results = run_once(config(), {"credit": LocalSummaries(rows.drop(columns="race"))},
                       MemoryCheckpoint(), now=now)
    assert len(results) == 1
    assert "sensitive feature column 'race' is not in the source" in results[0].errors["data"]
