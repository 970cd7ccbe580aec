"""Rollups (issue 17 item 3): longer windows merged from the stored window summaries.

Before: a daily or weekly view, or several window lengths of one model, meant re-reading every
raw row of the longer window (a second model entry with `window: 1d`), and late labels meant
re-reading them all again. Now each hourly window leaves its summary in the checkpoint's store
and a day is the merge of 24 of them: these tests check the merged values against the raw
rows', that no raw row is read again, and the rollups' way to Prometheus, MLflow and a restart.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from prometheus_client import CollectorRegistry

from fairmonitor.exceptions import ConfigError
from fairmonitor.monitor.checkpoint import FileCheckpoint, MemoryCheckpoint, SQLCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sinks.prometheus import FairnessCollector
from fairmonitor.monitor.sources import MemorySource
from fairmonitor.monitor.summary_store import (
    FileSummaryStore,
    MemorySummaryStore,
    SQLSummaryStore,
    open_summary_store,
)
from fairmonitor.report import Window, evaluate_window

T0 = datetime(2026, 11, 20, tzinfo=UTC)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
FREE = ["demographic_parity_difference", "abcc", "madd", "abpc"]
LABELLED = ["equalized_odds_difference", "equal_opportunity_difference"]


def traffic(hours: int, rows: int = 240, seed: int = 0, *, biased_from: int = 10**9
            ) -> pd.DataFrame:
    """``hours`` of predictions from T0: sex (2) and race (3), scores, labels."""
    rng = np.random.default_rng(seed)
    parts = []
    for h in range(hours):
        sex = rng.choice(np.array(["F", "M"], dtype=object), rows)
        race = rng.choice(np.array(["a", "b", "c"], dtype=object), rows, p=[0.6, 0.3, 0.1])
        shift = np.where(sex == "F", -0.1, 0.1) if h >= biased_from else 0.0
        score = np.clip(rng.beta(2, 2, rows) + shift, 0, 1)
        parts.append(pd.DataFrame({
            "timestamp": T0 + h * HOUR + pd.to_timedelta(np.sort(rng.uniform(0, 3599, rows)),
                                                          unit="s"),
            "model": "credit", "version": "1", "sex": sex, "race": race, "score": score,
            "label": (rng.random(rows) < score).astype(float)}))
    return pd.concat(parts, ignore_index=True)


def config_text(rollups: str = "[1d]", *, extra: str = "", metrics=None) -> str:
    metrics = metrics or FREE + LABELLED
    return f"""
models:
  credit:
    source: {{kind: sql, url: "sqlite:///unused.db"}}
    sensitive_features: [sex, race]
    label: label
    score: score
    window: 1h
    start: "{T0.isoformat()}"
    metrics: [{", ".join(metrics)}]
    rollups: {rollups}
    thresholds:
      demographic_parity_difference: {{warning: 0.1, critical: 0.2}}
{extra}"""


class CountingSource(MemorySource):
    """A memory source that counts the rows it hands out (raw rows read)."""

    def __init__(self, frame):
        super().__init__(frame)
        self.rows_read = 0
        self.fetches: list[tuple[datetime, datetime]] = []

    def fetch(self, model, start, end):
        out = super().fetch(model, start, end)
        self.rows_read += len(out)
        self.fetches.append((start, end))
        return out


def raw_report(frame: pd.DataFrame, start: datetime, end: datetime, metrics):
    """What evaluate_window gives on the rollup's raw rows (the oracle)."""
    rows = frame[(frame.timestamp >= start) & (frame.timestamp < end)]
    window = Window({"sex": rows.sex.to_numpy(), "race": rows.race.to_numpy()},
                    y_score=rows.score.to_numpy(), y_true=rows.label.to_numpy().astype(int))
    return evaluate_window(window, metrics=metrics)


def test_a_day_of_labelled_windows_is_merged_once(tmp_path, monkeypatch):
    """Every row labelled: the windows store one (labelled) summary, and the rollup merged
    those 24 twice, once for the label-free metrics and once for the label metrics; a day's
    merge reads every cell of every hour (its largest cost with the store read)."""
    import fairmonitor.monitor.rollups as rollups_module

    calls = []
    merge_all = rollups_module.merge_all
    monkeypatch.setattr(rollups_module, "merge_all",
                        lambda parts: calls.append(len(parts)) or merge_all(parts))
    frame = traffic(24)
    cfg = load_config(config_text(), base_dir=tmp_path)
    results = run_once(cfg, {"credit": CountingSource(frame)}, MemoryCheckpoint(),
                       now=T0 + DAY, summaries=MemorySummaryStore())
    (day,) = [r for r in results if r.rollup]
    assert calls == [24]
    oracle = raw_report(frame, T0, T0 + DAY, FREE + LABELLED)
    for (metric, attr), expected in oracle.values.items():
        got = day.report.values[(metric, attr)]
        tol = 1e-6 if metric == "abcc" else 1e-12 if metric == "abpc" else 0.0
        assert abs(got - expected) <= tol, (metric, attr, got, expected)


def test_a_day_merged_from_24_hourly_summaries_equals_the_day_on_raw_rows(tmp_path):
    frame = traffic(26)
    cfg = load_config(config_text(), base_dir=tmp_path)
    source = CountingSource(frame)
    store = MemorySummaryStore()
    results = run_once(cfg, {"credit": source}, MemoryCheckpoint(), now=T0 + 26 * HOUR,
                       summaries=store)
    hourly = [r for r in results if not r.rollup]
    daily = [r for r in results if r.rollup]
    assert len(hourly) == 26 and [r.rollup for r in daily] == ["1d"]
    day = daily[0]
    assert (day.start, day.end, day.merged_windows) == (T0, T0 + DAY, 24)
    # each raw row read once, by its own hourly window: the day read none again
    assert source.rows_read == len(frame)
    oracle = raw_report(frame, T0, T0 + DAY, FREE + LABELLED)
    assert day.n_rows == oracle.n_rows == 24 * 240
    assert day.report.group_counts == oracle.group_counts
    for (metric, attr), expected in oracle.values.items():
        got = day.report.values[(metric, attr)]
        if metric == "abcc":
            assert got == pytest.approx(expected, abs=1e-6), (metric, attr)
        elif metric == "abpc":
            assert got == pytest.approx(expected, abs=1e-12), (metric, attr)
        else:  # counts, parity and MADD: exact
            assert got == expected, (metric, attr)
    assert set(day.report.values) == set(oracle.values)
    # with its interval, as every value
    iv = day.report.intervals[("demographic_parity_difference", "sex")]
    assert iv.lower <= day.report.values[("demographic_parity_difference", "sex")] <= iv.upper


def test_a_sliding_day_every_six_hours_and_a_second_length(tmp_path):
    frame = traffic(30, rows=120, seed=1)
    cfg = load_config(config_text("[{window: 1d, every: 6h}, 2h]"), base_dir=tmp_path)
    results = run_once(cfg, {"credit": MemorySource(frame)}, MemoryCheckpoint(),
                       now=T0 + 30 * HOUR)
    sliding = [r for r in results if r.rollup == "1d_every_6h"]
    two = [r for r in results if r.rollup == "2h"]
    # a day every 6 h: ends 06:00, 12:00, 18:00, 24:00 and 30:00 (the first ones partial)
    assert [r.end for r in sliding] == [T0 + h * HOUR for h in (6, 12, 18, 24, 30)]
    assert [r.merged_windows for r in sliding] == [6, 12, 18, 24, 24]
    assert "merged 6 of 24 windows" in " ".join(sliding[0].report.notes)
    assert len(two) == 15 and all(r.merged_windows == 2 for r in two)
    last = sliding[-1]
    oracle = raw_report(frame, T0 + 6 * HOUR, T0 + 30 * HOUR, ["demographic_parity_difference",
                                                               "madd"])
    for key, expected in oracle.values.items():
        assert last.report.values[key] == expected, key


def test_late_labels_update_the_rollup_from_summaries_not_raw_rows(tmp_path):
    """Labels arrive 2 h late, some only later: the day's label metrics follow them."""
    frame = traffic(26, rows=120, seed=2)
    late = frame.timestamp < T0 + 4 * HOUR  # the first 4 hours' labels arrive late
    partial = frame.copy()
    partial.loc[late & (np.arange(len(frame)) % 2 == 0), "label"] = np.nan
    text = config_text(extra="    labels_after: 2h\n    relabel_within: 2d\n")
    cfg = load_config(text, base_dir=tmp_path)
    checkpoint, store = MemoryCheckpoint(), MemorySummaryStore()
    source = CountingSource(partial)
    first = run_once(cfg, {"credit": source}, checkpoint, now=T0 + 26 * HOUR, summaries=store)
    day = [r for r in first if r.rollup == "1d"]
    assert len(day) == 1 and day[0].phase == "full"
    eo = ("equalized_odds_difference", "race")
    rows_labelled = partial[partial.label.notna() & (partial.timestamp < T0 + DAY)]
    assert day[0].labelled_rows == len(rows_labelled)
    # the labels come: the next tick re-reads the 4 watched hours only, and the day again
    source.frames = frame
    source.rows_read, source.fetches = 0, []
    again = run_once(cfg, {"credit": source}, checkpoint, now=T0 + 26 * HOUR + timedelta(
        minutes=5), summaries=store)
    relabelled = [r for r in again if not r.rollup]
    redone = [r for r in again if r.rollup == "1d"]
    assert sorted(r.index for r in relabelled) == sorted(
        (T0 + (h + 1) * HOUR - datetime(1970, 1, 1, tzinfo=UTC)) // HOUR for h in range(4))
    assert {(s, e) for s, e in source.fetches} == {(T0 + h * HOUR, T0 + (h + 1) * HOUR)
                                                   for h in range(4)}
    assert len(redone) == 1 and redone[0].phase == "labels" and redone[0].end == T0 + DAY
    assert set(redone[0].report.values) == {(m, a) for m in LABELLED
                                           for a in ("sex", "race", "sex:race")}
    oracle = raw_report(frame, T0, T0 + DAY, LABELLED)
    assert redone[0].report.values[eo] == oracle.values[eo]
    assert redone[0].labelled_rows == 24 * 120


def test_rollup_values_reach_prometheus_mlflow_keys_and_survive_a_restart(tmp_path):
    from fairmonitor.monitor.sinks.mlflow import _keys

    frame = traffic(25, rows=100, seed=3, biased_from=0)
    cfg = load_config(config_text(), base_dir=tmp_path)
    checkpoint = FileCheckpoint(tmp_path / "ck.json")
    store = open_summary_store(cfg.checkpoint)
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models)
    submitted = []
    results = run_once(cfg, {"credit": MemorySource(frame)}, checkpoint, now=T0 + 25 * HOUR,
                       summaries=store, on_result={"export": collector.observe,
                                                   "mlflow": submitted.append})
    day = next(r for r in results if r.rollup)
    labels = {"model": "credit", "version": "1", "window": "1d",
              "metric": "demographic_parity_difference", "sensitive_attribute": "sex"}
    value = day.report.values[("demographic_parity_difference", "sex")]
    assert registry.get_sample_value("fairmonitor_rollup_value", labels) == value
    assert value > 0.1  # a biased day: above the warning threshold
    state = registry.get_sample_value("fairmonitor_rollup_alert_state", labels)
    assert state == {"warning": 1.0, "critical": 2.0}[day.report.statuses[
        ("demographic_parity_difference", "sex")]]
    assert registry.get_sample_value("fairmonitor_rollup_window_end_timestamp_seconds",
                                     {"model": "credit", "window": "1d"}) == (T0 + DAY).timestamp()
    assert registry.get_sample_value("fairmonitor_rollup_windows_merged",
                                     {"model": "credit", "window": "1d"}) == 24
    # the hourly gauge still shows the latest hour, not the day
    hour = [r for r in results if not r.rollup][-1]
    assert registry.get_sample_value("fairmonitor_demographic_parity_difference", {
        "model": "credit", "version": "1", "sensitive_attribute": "sex"}) == \
        hour.report.values[("demographic_parity_difference", "sex")]
    # MLflow keys: fairness_1d/<metric>/<attribute>, step = the day's index
    from fairmonitor.monitor.sinks.mlflow import MlflowSink

    sink = MlflowSink(tracking_uri="sqlite:///unused.db")
    sink.submit(day)
    item = sink._queue[-1]
    keys = {k for k, *_ in item.points}
    assert "fairness_1d/demographic_parity_difference/sex" in keys
    assert "fairness_1d/ci_lower/demographic_parity_difference/sex" in keys
    assert not any(k.startswith("fairness/") for k in keys)
    assert {p[3] for p in item.points} == {day.index} and item.rollup == "1d"
    assert set(_keys(day.report, "fairness_1d")) >= keys
    # restart: a new collector shows the day's values at once, from the checkpoint snapshot
    registry2 = CollectorRegistry()
    collector2 = FairnessCollector(registry2, models=cfg.models)
    collector2.restore("credit", FileCheckpoint(tmp_path / "ck.json").load("credit").last)
    assert registry2.get_sample_value("fairmonitor_rollup_value", labels) == value
    assert registry2.get_sample_value("fairmonitor_rollup_alert_state", labels) == state
    # and the restarted job does not evaluate the day twice
    again = run_once(cfg, {"credit": MemorySource(frame)}, FileCheckpoint(tmp_path / "ck.json"),
                     now=T0 + 25 * HOUR, summaries=open_summary_store(cfg.checkpoint))
    assert again == []


def test_summaries_are_stored_before_the_checkpoint_and_pruned(tmp_path):
    frame = traffic(50, rows=60, seed=4)
    cfg = load_config(config_text(), base_dir=tmp_path)
    checkpoint, store = MemoryCheckpoint(), MemorySummaryStore()
    run_once(cfg, {"credit": MemorySource(frame)}, checkpoint, now=T0 + 50 * HOUR,
             summaries=store)
    state = checkpoint.load("credit")
    assert state.rollups == {"1d": T0 + 2 * DAY}
    indices = sorted({i for _, i, _ in store.blobs})
    # kept: the windows of the next day only (from T0 + 2d); every labelled window stored its
    # labelled part only (all its rows were labelled)
    first = (T0 + 2 * DAY - datetime(1970, 1, 1, tzinfo=UTC)) // HOUR + 1
    assert indices == list(range(first, first + 2))
    assert {p for *_, p in store.blobs} == {"labels"}


class BrokenStore(MemorySummaryStore):
    def put(self, model, index, part, blob):
        raise OSError("No space left on device")


def test_a_full_summary_store_is_its_own_stage_and_the_gauges_move_on(tmp_path):
    """Issue 28 item 6 (a deliberate change: the checkpoint used to hold, stage "checkpoint",
    freezing the window gauges): the window's values stand, the checkpoint moves, the fault is
    counted as stage summary_store, and the rollup re-makes the summaries from the rows."""
    frame = traffic(25, rows=60)
    cfg = load_config(config_text(), base_dir=tmp_path)
    checkpoint = MemoryCheckpoint()
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models)
    hooks = {"export": collector.observe}
    full = BrokenStore()
    results = run_once(cfg, {"credit": MemorySource(frame)}, checkpoint, now=T0 + 3 * HOUR,
                       summaries=full, on_result=hooks)
    assert len(results) == 3 and all(r.report is not None for r in results)
    assert all("No space left on device" in r.errors["summary_store"] for r in results)
    assert all("checkpoint" not in r.errors for r in results)
    assert checkpoint.load("credit").predictions_end == T0 + 3 * HOUR  # moved
    sample = registry.get_sample_value
    assert sample("fairmonitor_errors_total", {"model": "credit", "stage": "summary_store"}) == 3
    assert sample("fairmonitor_errors_total", {"model": "credit", "stage": "checkpoint"}) == 0
    assert sample("fairmonitor_window_end_timestamp_seconds", {"model": "credit"}) == (
        T0 + 3 * HOUR).timestamp()
    assert sample("fairmonitor_window_last_success_timestamp_seconds", {"model": "credit"}) > 0
    # space is freed: the day's rollup re-makes the 3 missing summaries from the rows
    store = MemorySummaryStore()
    later = run_once(cfg, {"credit": MemorySource(frame)}, checkpoint, now=T0 + 25 * HOUR,
                     summaries=store, on_result=hooks)
    (day,) = [r for r in later if r.rollup]
    assert day.ok and day.merged_windows == 24
    oracle = raw_report(frame, T0, T0 + DAY, ["demographic_parity_difference", "madd"])
    for key, expected in oracle.values.items():
        assert day.report.values[key] == expected, key


@pytest.mark.parametrize("kind", ["file", "sqlite", "postgres"])
def test_summary_stores_round_trip_and_prune(tmp_path, kind, request):
    store = {"file": lambda: FileSummaryStore(tmp_path / "s"),
             "sqlite": lambda: SQLSummaryStore(f"sqlite:///{tmp_path / 's.db'}"),
             "postgres": lambda: SQLSummaryStore(request.getfixturevalue("postgres_url"),
                                                 f"summaries_{tmp_path.name[-20:]}")}[kind]()
    store.put("a/b", 5, "labels", b"x" * 10)
    store.put("a/b", 5, "labels", b"y")  # replaced
    store.put("a/b", 6, "predictions", b"z")
    store.put("other", 5, "labels", b"w")
    assert store.get("a/b", [4, 5, 6], "labels") == {5: b"y"}
    assert store.get("a/b", range(10), "predictions") == {6: b"z"}
    assert store.prune("a/b", 6) == 1
    assert store.get("a/b", [5, 6], "labels") == {}
    assert store.get("other", [5], "labels") == {5: b"w"}
    if hasattr(store, "close"):
        store.close()


def test_open_summary_store_goes_with_the_checkpoint(tmp_path):
    cfg = load_config(config_text(extra=f"""checkpoint: "sqlite:///{tmp_path / 'ck.db'}"
"""), base_dir=tmp_path)
    store = open_summary_store(cfg.checkpoint)
    assert isinstance(store, SQLSummaryStore) and store.table.name == \
        "fairmonitor_checkpoint_summaries"
    SQLCheckpoint(cfg.checkpoint.url).save("credit", MemoryCheckpoint().load("credit"))
    store.close()


@pytest.mark.parametrize("rollups, message", [
    ("[90m]", "rollups[0]: window 90m: must be whole multiples of the model's window (1h)"),
    ("[1h]", "rollups[0]: window 1h is the model's own window"),
    ("[{window: 1d, every: 2d}]", "rollups[0].every: must not exceed window (1d)"),
    ("[1d, 24h]", "rollups[1]: rollup '1d' is listed more than once"),
    ("[{window: 1d, size: 2}]", "size"),
])
def test_rollup_config_errors(tmp_path, rollups, message):
    with pytest.raises(ConfigError, match=None) as err:
        load_config(config_text(rollups), base_dir=tmp_path)
    assert message in str(err.value), str(err.value)


def test_rollups_need_tumbling_windows(tmp_path):
    text = config_text().replace("    window: 1h\n", "    window: 2h\n    every: 1h\n")
    with pytest.raises(ConfigError) as err:
        load_config(text, base_dir=tmp_path)
    assert "need tumbling windows" in str(err.value)
    assert "{window: 2h, every: 1h}" in str(err.value)


def test_row_metrics_on_rollups_are_estimates_on_the_row_sample(tmp_path):
    rng = np.random.default_rng(5)
    frame = traffic(24, rows=80, seed=5)
    frame["income"] = rng.normal(size=len(frame)) + np.where(frame.sex == "F", 1.5, 0.0)
    frame["age"] = rng.normal(size=len(frame))
    cfg = load_config(config_text(
        metrics=["demographic_parity_difference", "hfm_average"],
        extra="    features: [income, age]\n    summaries: {sample_size: 64}\n"),
        base_dir=tmp_path)
    results = run_once(cfg, {"credit": MemorySource(frame)}, MemoryCheckpoint(),
                       now=T0 + DAY)
    day = next(r for r in results if r.rollup)
    value = day.report.values[("hfm_average", "sex")]
    # an estimate on 64 rows per group of the day's 1,920 (its error: see evaluate_summary)
    assert math.isfinite(value)
    assert any("row sample of at most 64 rows per group" in n for n in day.report.notes)


class UnreadableStore(MemorySummaryStore):
    """Stores, but cannot be read while ``down`` (a database outage)."""

    down = False

    def get(self, model, indices, part):
        if self.down:
            raise ConnectionError("summary database unreachable")
        return super().get(model, indices, part)


def test_a_rollup_whose_summaries_cannot_be_read_waits_for_the_next_tick(tmp_path):
    frame = traffic(25, rows=60, seed=6)
    cfg = load_config(config_text(), base_dir=tmp_path)
    checkpoint, store = MemoryCheckpoint(), UnreadableStore()
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models)
    hooks = {"export": collector.observe}
    run_once(cfg, {"credit": MemorySource(frame)}, checkpoint, now=T0 + 23 * HOUR,
             summaries=store, on_result=hooks)
    store.down = True
    failed = run_once(cfg, {"credit": MemorySource(frame)}, checkpoint, now=T0 + 25 * HOUR,
                      summaries=store, on_result=hooks)
    day = [r for r in failed if r.rollup]
    assert len(day) == 1 and "summary database unreachable" in day[0].errors["rollup"]
    assert checkpoint.load("credit").rollups == {"1d": T0}  # not moved past the day
    assert "rollups" not in checkpoint.load("credit").last  # nothing reported, nothing kept
    assert registry.get_sample_value("fairmonitor_errors_total",
                                     {"model": "credit", "stage": "rollup"}) == 1
    store.down = False
    again = run_once(cfg, {"credit": MemorySource(frame)}, checkpoint, now=T0 + 25 * HOUR,
                     summaries=store, on_result=hooks)
    day = [r for r in again if r.rollup]
    assert len(day) == 1 and day[0].ok and day[0].merged_windows == 24
    assert checkpoint.load("credit").rollups == {"1d": T0 + DAY}


def test_a_window_that_cannot_be_summarized_keeps_its_values(tmp_path, monkeypatch):
    import fairmonitor.monitor.job as job

    def broken(*args, **kwargs):
        raise MemoryError("summary buffer")

    monkeypatch.setattr(job, "summarize", broken)
    frame = traffic(1, rows=120)
    cfg = load_config(config_text(), base_dir=tmp_path)
    store = MemorySummaryStore()
    results = run_once(cfg, {"credit": MemorySource(frame)}, MemoryCheckpoint(),
                       now=T0 + HOUR, summaries=store)
    assert len(results) == 1
    result = results[0]
    # the window's own values are there; the rollups lose this window, said as stage "rollup"
    assert result.errors == {
        "rollup": "cannot summarize the window: MemoryError: summary buffer"}
    assert not result.summaries
    assert result.report is not None
    assert result.report.values[("demographic_parity_difference", "sex")] >= 0.0
    assert not store.blobs  # nothing stored for the rollups
