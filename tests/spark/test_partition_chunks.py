"""A partition is summarized a chunk of rows at a time (issue 30 item 5, the 10^7-row tick).

``summarize_partition`` (the ``mapInPandas`` function of every Spark summary) joined all its
partition's Arrow batches into one pandas frame: a 128 MB Parquet split (~10^7 rows) took a
Python worker to gigabytes, above what an executor reserves for Python. Now it summarizes
about ``plan.chunk_rows`` rows at a time and merges the chunks' summaries per window. The
oracle is the same function summarizing the whole partition at once (the path the Spark tests
compare with the row path): same counts, same group counts, same values.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fairmonitor.report import evaluate_summary
from fairmonitor.spark import _partition
from fairmonitor.spark._partition import KEY, PartitionPlan, summarize_partition
from fairmonitor.summaries import SummarySpec, from_bytes

HOUR_US = 3_600_000_000
METRICS = ["demographic_parity_difference", "equalized_odds_difference", "abcc", "abpc",
           "madd"]


def partition(n: int, seed: int = 5) -> pd.DataFrame:
    """Rows of two hours (some undated), null labels, invalid scores, as Arrow gives them."""
    rng = np.random.default_rng(seed)
    key = np.where(rng.random(n) < 0.5, 0.0, float(HOUR_US))
    key[rng.random(n) < 0.01] = np.nan  # no timestamp: counted, in no window
    score = rng.random(n)
    score[rng.random(n) < 0.02] = np.nan
    label = (rng.random(n) < score).astype(float)
    label[rng.random(n) < 0.1] = np.nan  # not labelled yet
    return pd.DataFrame({"sex": rng.choice(["F", "M"], n), "race": rng.choice(list("abc"), n),
                         "score": score, "label": label, KEY: key})


def plan(chunk_rows: int) -> PartitionPlan:
    # max_raw 64: the larger groups' scores become cells, so chunk merges of cells are covered
    return PartitionPlan(("sex", "race"), "label", "score", None, (), 0.5, True,
                         SummarySpec(max_raw=64, sample_size=16), "group", "credit", "",
                         HOUR_US, True, chunk_rows=chunk_rows)


def batches(frame: pd.DataFrame, size: int):
    return (frame.iloc[i:i + size].reset_index(drop=True) for i in range(0, len(frame), size))


def test_a_worker_holds_one_chunk_of_rows_at_a_time(monkeypatch):
    seen = []
    summarize_window = _partition._window_row

    def spy(p, part, key):
        seen.append(len(part))
        return summarize_window(p, part, key)

    monkeypatch.setattr(_partition, "_window_row", spy)
    (out,) = summarize_partition(plan(500), batches(partition(4_000), 100))
    # each call summarizes one window's rows of one chunk: at most a chunk (500 rows, plus
    # the batch that crossed the bound), never the partition's ~2,000 rows of a window
    assert max(seen) <= 600
    assert sum(seen) == 4_000 - int(partition(4_000)[KEY].isna().sum())
    assert len(out) == 3  # undated, hour 0, hour 1: one row each, chunks merged


def test_chunks_give_the_whole_partitions_summaries():
    frame = partition(4_000)
    (whole,) = summarize_partition(plan(10**9), batches(frame, 100))
    (chunked,) = summarize_partition(plan(500), batches(frame, 100))
    counts = ["rows", "labelled", "invalid_score", "invalid_prediction"]
    assert whole["window"].tolist() == chunked["window"].tolist()
    assert whole[counts].to_numpy().tolist() == chunked[counts].to_numpy().tolist()
    assert int(whole["rows"].sum()) == 4_000
    for column in ("summary", "unlabelled"):
        for a, b in zip(whole[column], chunked[column], strict=True):
            if a is None:
                assert b is None
                continue
            sa, sb = from_bytes(a), from_bytes(b)
            assert (sa.n_rows, sa.inputs) == (sb.n_rows, sb.inputs)
            ra = evaluate_summary(sa, metrics=METRICS)
            rb = evaluate_summary(sb, metrics=METRICS)
            assert ra.group_counts == rb.group_counts
            for key, value in ra.values.items():
                other = rb.values[key]
                assert (math.isnan(value) and math.isnan(other)) or \
                    other == pytest.approx(value, abs=1e-12), (column, key)
