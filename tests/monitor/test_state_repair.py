"""Issue 28 items 3-4: stored summaries and checkpoints are checked, and repaired.

Each case first shows what the stored state looked like to the monitor before (a changed count
merged silently; a truncated checkpoint stopping the model), then that the rollup after repair
equals the rollup computed from the raw rows (the oracle: ``evaluate_window`` on the day's
rows), and that the repair was counted.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from prometheus_client import CollectorRegistry

from fairmonitor.monitor.checkpoint import (
    CheckpointCorruptError,
    CheckpointFormatError,
    FileCheckpoint,
    MemoryCheckpoint,
    ModelState,
    SQLCheckpoint,
)
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.incidents import INCIDENTS
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.rollups import evaluate_rollup
from fairmonitor.monitor.sinks.prometheus import FairnessCollector
from fairmonitor.monitor.sources import MemorySource
from fairmonitor.monitor.summary_store import FileSummaryStore, SQLSummaryStore
from fairmonitor.report import Window, evaluate_window
from fairmonitor.summaries import from_bytes, summarize, to_bytes

T0 = datetime(2026, 11, 20, tzinfo=UTC)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
METRICS = ["demographic_parity_difference", "madd", "equalized_odds_difference"]


def traffic(hours: int, rows: int = 120, seed: int = 0, model: str = "credit") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for h in range(hours):
        sex = rng.choice(np.array(["F", "M"], dtype=object), rows)
        shift = np.where(sex == "F", -0.1, 0.1) if h % 3 == 0 else 0.0
        score = np.clip(rng.beta(2, 2, rows) + shift, 0, 1)
        parts.append(pd.DataFrame({
            "timestamp": T0 + h * HOUR + pd.to_timedelta(np.sort(rng.uniform(0, 3599, rows)),
                                                          unit="s"),
            "model": model, "version": "1", "sex": sex, "score": score,
            "label": (rng.random(rows) < score).astype(float)}))
    return pd.concat(parts, ignore_index=True)


def config(models=("credit",), rollups="[6h]"):
    body = "".join(f"""
  {json.dumps(name)}:
    source: {{kind: sql, url: "sqlite:///unused.db"}}
    sensitive_features: [sex]
    label: label
    score: score
    window: 1h
    start: "{T0.isoformat()}"
    metrics: [{", ".join(METRICS)}]
    rollups: {rollups}
""" for name in models)
    return load_config("models:" + body)


def oracle(frame: pd.DataFrame, start: datetime, end: datetime):
    rows = frame[(frame.timestamp >= start) & (frame.timestamp < end)]
    window = Window({"sex": rows.sex.to_numpy()}, y_score=rows.score.to_numpy(),
                    y_true=rows.label.to_numpy().astype(int))
    return evaluate_window(window, metrics=METRICS).values


def index(hour: int) -> int:
    """The store index of the window [T0 + hour h, T0 + (hour + 1) h)."""
    return (T0 + (hour + 1) * HOUR - EPOCH) // HOUR


def change_a_count(blob: bytes) -> bytes:
    """The first group's ``n`` one higher, same length (a hand edit or a flipped digit)."""
    m = re.search(rb'"n":(\d+)', blob)
    digits = m.group(1)
    new = str(int(digits) + 1).encode()
    assert len(new) == len(digits)
    return blob[:m.start(1)] + new + blob[m.end(1):]


def incidents(model="credit"):
    return {(c, k): INCIDENTS.get(c, model, k) for c, k in [
        ("integrity_errors", "summary_corrupt"), ("integrity_errors", "summary_identity"),
        ("repairs", "summary_corrupt"), ("repairs", "summary_missing"),
        ("integrity_errors", "checkpoint_corrupt"), ("repairs", "checkpoint_previous")]}


def delta(before, after):
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


@pytest.fixture(params=["file", "sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "file":
        yield FileSummaryStore(tmp_path / "cp.json.summaries")
        return
    url = (f"sqlite:///{tmp_path / 's.db'}" if request.param == "sqlite"
           else request.getfixturevalue("postgres_url"))
    s = SQLSummaryStore(url, f"summaries_{tmp_path.name[-20:]}")
    yield s
    s.close()


def test_corrupted_summaries_are_detected_and_repaired_to_the_true_values(store):
    frame = traffic(7)
    cfg = config()
    checkpoint = MemoryCheckpoint()
    source = MemorySource(frame)
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models)
    run_once(cfg, {"credit": source}, checkpoint, now=T0 + 5 * HOUR + 1 * timedelta(minutes=1),
             summaries=store, on_result={"export": collector.observe})
    blobs = {h: store.get("credit", [index(h)], "labels")[index(h)] for h in range(5)}
    # the reported defects, each under one window of the 6 h rollup: windows 0-3 go, then
    store.prune("credit", index(4))
    store.put("credit", index(0), "labels", change_a_count(blobs[0]))  # a changed count
    store.put("credit", index(1), "labels", blobs[3])  # another window's valid summary
    store.put("credit", index(2), "labels", blobs[2][: len(blobs[2]) // 2])  # truncated
    # (and window 3's is lost)
    # the edited count is caught by the summary's own checksum:
    with pytest.raises(Exception, match="checksum mismatch"):
        from_bytes(store.get("credit", [index(0)], "labels")[index(0)])
    before = incidents()
    results = run_once(cfg, {"credit": source}, checkpoint, now=T0 + 7 * HOUR, summaries=store,
                       on_result={"export": collector.observe})
    (six,) = [r for r in results if r.rollup]
    assert six.ok and six.merged_windows == 6
    truth = oracle(frame, T0, T0 + 6 * HOUR)
    for key, expected in truth.items():
        assert six.report.values[key] == pytest.approx(expected, abs=1e-12), key
    assert delta(before, incidents()) == {
        ("integrity_errors", "summary_corrupt"): 2, ("integrity_errors", "summary_identity"): 1,
        ("repairs", "summary_corrupt"): 3, ("repairs", "summary_missing"): 1}
    assert registry.get_sample_value("fairmonitor_repairs_total",
                                     {"model": "credit", "kind": "summary_missing"}) >= 1
    # (the repaired summaries were stored, then pruned with the rollup: its next window starts
    # at T0 + 6 h)


def test_without_the_rows_a_mismatch_is_an_error_never_a_merge(tmp_path):
    frame = traffic(6)
    cfg = config()
    store = FileSummaryStore(tmp_path / "s")
    run_once(cfg, {"credit": MemorySource(frame)}, MemoryCheckpoint(), now=T0 + 5 * HOUR,
             summaries=store)
    store.put("credit", index(1), "labels", store.get("credit", [index(3)], "labels")[index(3)])
    rollup = cfg.models["credit"].rollups[0]
    e = evaluate_rollup(cfg.models["credit"], rollup, T0 + 6 * HOUR, store)
    assert e.report is None
    assert "is model 'credit' [2026-11-20T03:00:00+00:00, 2026-11-20T04:00:00+00:00)" in e.error


class FlakySource(MemorySource):
    """Cannot give the rows of the windows starting at ``unreadable`` (a partition offline)."""

    unreadable: frozenset = frozenset()

    def fetch(self, model, start, end):
        if start in self.unreadable:
            raise ConnectionError("partition offline")
        return super().fetch(model, start, end)


def test_a_corrupt_summary_waits_for_its_rows_when_the_source_cannot_give_them(tmp_path):
    frame = traffic(13)
    cfg = config()
    checkpoint, store = MemoryCheckpoint(), FileSummaryStore(tmp_path / "s")
    source = FlakySource(frame)
    run_once(cfg, {"credit": source}, checkpoint, now=T0 + 11 * HOUR, summaries=store)
    assert checkpoint.load("credit").rollups == {"6h": T0 + 6 * HOUR}
    blob = store.get("credit", [index(8)], "labels")[index(8)]
    store.put("credit", index(8), "labels", blob[:100])  # truncated
    source.unreadable = frozenset({T0 + 8 * HOUR})
    failed = run_once(cfg, {"credit": source}, checkpoint, now=T0 + 12 * HOUR, summaries=store)
    (six,) = [r for r in failed if r.rollup]
    assert six.report is None and "cannot repair" in six.errors["rollup"]
    assert "partition offline" in six.errors["rollup"]
    assert checkpoint.load("credit").rollups == {"6h": T0 + 6 * HOUR}  # waits, nothing merged
    source.unreadable = frozenset()
    again = run_once(cfg, {"credit": source}, checkpoint, now=T0 + 12 * HOUR, summaries=store)
    (six,) = [r for r in again if r.rollup]
    assert six.ok and checkpoint.load("credit").rollups == {"6h": T0 + 12 * HOUR}
    truth = oracle(frame, T0 + 6 * HOUR, T0 + 12 * HOUR)
    for key, expected in truth.items():
        assert six.report.values[key] == pytest.approx(expected, abs=1e-12), key


def test_a_summary_written_before_checksums_is_still_read():
    s = summarize({"g": np.array(["a", "b"] * 5)}, y_score=np.linspace(0, 1, 10),
                  model="m", start=T0, end=T0 + HOUR)
    blob = to_bytes(s)
    assert blob[-8:-4] == b"FMCK"
    legacy = blob[:-8].replace(b',"checksum":"crc32"', b" " * len(b',"checksum":"crc32"'))
    back = from_bytes(legacy)  # format 3 as written before: read, unchecked
    assert back.n_rows == 10 and back.end == T0 + HOUR


def test_colliding_model_names_get_distinct_stores_and_true_rollups(tmp_path):
    names = ("credit eu", "credit_eu", "credit/eu")
    frames = {n: traffic(7, seed=k, model=n) for k, n in enumerate(names)}
    cfg = config(names)
    store = FileSummaryStore(tmp_path / "cp.json.summaries")
    sources = {n: MemorySource(frames[n]) for n in names}
    results = run_once(cfg, sources, MemoryCheckpoint(), now=T0 + 6 * HOUR, summaries=store)
    folders = sorted(p.name for p in (tmp_path / "cp.json.summaries").iterdir())
    assert len(folders) == 3 and folders == sorted(store.folder(n) for n in names)
    for n in names:
        (six,) = [r for r in results if r.rollup and r.model == n]
        truth = oracle(frames[n], T0, T0 + 6 * HOUR)
        for key, expected in truth.items():
            assert six.report.values[key] == pytest.approx(expected, abs=1e-12), (n, key)


def test_summaries_under_the_old_folder_name_are_still_read(tmp_path):
    frame = traffic(6, model="credit eu")
    cfg = config(("credit eu",))
    store = FileSummaryStore(tmp_path / "s")
    run_once(cfg, {"credit eu": MemorySource(frame)}, MemoryCheckpoint(), now=T0 + 5 * HOUR,
             summaries=store)
    (tmp_path / "s" / store.folder("credit eu")).rename(tmp_path / "s" / "credit_eu")
    source = MemorySource(frame)
    before = incidents("credit eu")
    results = run_once(cfg, {"credit eu": source}, MemoryCheckpoint(
        {"credit eu": ModelState(T0 + 5 * HOUR, T0 + 5 * HOUR, rollups={"6h": T0})}),
        now=T0 + 6 * HOUR, summaries=store)
    (six,) = [r for r in results if r.rollup]
    assert delta(before, incidents("credit eu")) == {}  # nothing re-made: read where it was
    truth = oracle(frame, T0, T0 + 6 * HOUR)
    for key, expected in truth.items():
        assert six.report.values[key] == pytest.approx(expected, abs=1e-12), key


# ---------------------------------------------------------------- checkpoints
def _checkpoints(kind, tmp_path, request):
    if kind == "file":
        return lambda: FileCheckpoint(tmp_path / "cp.json")
    url = (f"sqlite:///{tmp_path / 'ck.db'}" if kind == "sqlite"
           else request.getfixturevalue("postgres_url"))
    table = f"ck_{tmp_path.name[-20:]}"
    return lambda: SQLCheckpoint(url, table)


def _damage(kind, tmp_path, opened, how):
    """Truncate (or edit) the current generation of model credit's checkpoint."""
    if kind == "file":
        path = tmp_path / "cp.json"
        text = path.read_text()
        path.write_text(text[: len(text) // 2] if how == "truncate"
                        else text.replace('"versions": []', '"versions": ["9"]'))
        return
    import sqlalchemy as sa

    t = opened.table
    with opened.engine.begin() as conn:
        text = conn.execute(sa.select(t.c.state).where(t.c.model == "credit")).scalar()
        text = (text[: len(text) // 2] if how == "truncate"
                else text.replace('"versions": []', '"versions": ["9"]'))
        conn.execute(sa.update(t).where(t.c.model == "credit").values(state=text))


@pytest.mark.parametrize("how", ["truncate", "edit"])
@pytest.mark.parametrize("kind", ["file", "sqlite", "postgres"])
def test_a_corrupt_checkpoint_falls_back_to_its_previous_generation(tmp_path, request, kind,
                                                                    how):
    frame = traffic(4)
    cfg = config(rollups="[]")
    make = _checkpoints(kind, tmp_path, request)
    checkpoint = make()
    first = run_once(cfg, {"credit": MemorySource(frame)}, checkpoint, now=T0 + 4 * HOUR)
    assert len(first) == 4
    assert checkpoint.load("credit").predictions_end == T0 + 4 * HOUR
    _damage(kind, tmp_path, checkpoint, how)
    before = incidents()
    restarted = make()  # a new process
    state = restarted.load("credit")
    # the previous generation: saved before the last window's
    assert state.predictions_end == T0 + 3 * HOUR
    assert delta(before, incidents()) == {("integrity_errors", "checkpoint_corrupt"): 1,
                                          ("repairs", "checkpoint_previous"): 1}
    again = run_once(cfg, {"credit": MemorySource(frame)}, restarted, now=T0 + 4 * HOUR)
    assert [r.end for r in again] == [T0 + 4 * HOUR]  # the window after it, evaluated again
    truth = oracle(frame, T0 + 3 * HOUR, T0 + 4 * HOUR)
    assert again[0].report.values[("demographic_parity_difference", "sex")] == pytest.approx(
        truth[("demographic_parity_difference", "sex")], abs=1e-12)
    assert delta(before, incidents())[("repairs", "checkpoint_previous")] == 1  # counted once
    if hasattr(restarted, "close"):
        restarted.close()
        checkpoint.close()


@pytest.mark.parametrize("doc, why", [
    ({"models": []}, "checkpoint format None is not one this fairmonitor reads"),
    ({"format": 99, "models": {}}, "checkpoint format 99 is not one this fairmonitor reads"),
    ({"format": 1, "models": []}, "needs an object of models, found list"),
])
def test_an_unknown_checkpoint_format_is_refused_not_restarted(tmp_path, doc, why, caplog):
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(doc))
    checkpoint = FileCheckpoint(path)
    with pytest.raises(CheckpointFormatError, match=re.escape(why)):
        checkpoint.load("credit")
    results = run_once(config(rollups="[]"), {"credit": MemorySource(traffic(2))}, checkpoint,
                       now=T0 + 2 * HOUR)
    assert [list(r.errors) for r in results] == [["checkpoint"]]  # counted, nothing evaluated
    assert why in results[0].errors["checkpoint"]
    assert json.loads(path.read_text()) == doc  # never overwritten


def test_a_newer_sql_checkpoint_row_is_refused(tmp_path):
    ck = SQLCheckpoint(f"sqlite:///{tmp_path / 'ck.db'}")
    ck.save("credit", ModelState(T0, T0))
    import sqlalchemy as sa

    with ck.engine.begin() as conn:
        conn.execute(sa.update(ck.table).values(state=json.dumps({"format": 99})))
    with pytest.raises(CheckpointFormatError, match="format 99"):
        ck.load("credit")
    ck.close()


def test_a_format_1_checkpoint_is_read_and_rewritten_as_format_2(tmp_path):
    path = tmp_path / "cp.json"
    path.write_text(json.dumps({"format": 1, "models": {"credit": {
        "predictions_end": T0.isoformat(), "labels_end": None, "versions": ["2"]}}}))
    checkpoint = FileCheckpoint(path)
    assert checkpoint.load("credit") == ModelState(T0, None, frozenset({"2"}))
    checkpoint.save("other", ModelState(T0, T0))
    doc = json.loads(path.read_text())
    assert doc["format"] == 2 and doc["models"]["credit"]["model"] == "credit"
    assert FileCheckpoint(path).load("credit") == ModelState(T0, None, frozenset({"2"}))
    assert json.loads((tmp_path / "cp.json.1").read_text())["format"] == 1


def test_both_generations_corrupt_is_an_error(tmp_path):
    checkpoint = FileCheckpoint(tmp_path / "cp.json")
    checkpoint.save("credit", ModelState(T0, T0))
    checkpoint.save("credit", ModelState(T0 + HOUR, T0 + HOUR))
    (tmp_path / "cp.json").write_text("{")
    (tmp_path / "cp.json.1").write_text("{")
    with pytest.raises(CheckpointCorruptError, match="previous generation .* is not usable"):
        FileCheckpoint(tmp_path / "cp.json").load("credit")
