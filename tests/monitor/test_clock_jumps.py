"""Issue 28 item 2: a wall clock that jumps never loses a window (monitor/clock.py)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from fairmonitor.metrics import demographic_parity_difference
from fairmonitor.monitor.checkpoint import FileCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.incidents import INCIDENTS
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.sinks.prometheus import FairnessCollector
from fairmonitor.monitor.sources import MemorySource

T0 = datetime(2026, 11, 22, tzinfo=UTC)
H = timedelta(hours=1)
DPD = "demographic_parity_difference"


def _config(catch_up: int = 100):
    return load_config(f"""
catch_up: {catch_up}
models:
  credit:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    start: {T0.isoformat()}
    metrics: [{DPD}]
""")


class GrowingSource(MemorySource):
    """Rows exist only up to the real time ``upto`` (the future has not happened yet)."""

    def __init__(self, frame, upto):
        super().__init__(frame)
        self.upto = upto

    def fetch(self, model, start, end):
        out = super().fetch(model, start, end)
        return out[out["timestamp"] < self.upto]


def _oracle(frame, k):
    rows = frame[(frame.timestamp >= T0 + k * H) & (frame.timestamp < T0 + (k + 1) * H)]
    return len(rows), demographic_parity_difference(None, rows.prediction.to_numpy(),
                                                    sensitive_features=rows.sex.to_numpy())


def _last_values(results):
    """Per window start, the last evaluation's (rows, DPD), as the gauges and MLflow keep."""
    out = {}
    for r in results:
        if r.report is not None:
            out[r.start] = (r.n_rows, r.report.values[(DPD, "sex")])
        elif r.start not in out:
            out[r.start] = (0, None)
    return out


def test_forward_jump_of_30_days_then_back_loses_no_window(tmp_path, make_predictions, caplog):
    frame = make_predictions(n_hours=8, bias_from=5)
    cfg = _config()
    checkpoint = FileCheckpoint(tmp_path / "cp.json")
    source = GrowingSource(frame, T0 + 3 * H + timedelta(minutes=5))
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models)
    before = {d: INCIDENTS.get("clock_jumps", "credit", d) for d in ("forward", "backward")}
    hooks = {"export": collector.observe}
    results = []

    def tick(now):
        results.extend(run_once(cfg, {"credit": source}, checkpoint, now=now, on_result=hooks))
        state = checkpoint.load("credit")
        # the watermark is never ahead of now by more than a window once a tick is done
        assert state.predictions_end <= now + H, (now, state.predictions_end)

    tick(T0 + 3 * H + timedelta(minutes=5))  # windows 0-2, real time
    with caplog.at_level(logging.WARNING, logger="fairmonitor.monitor.job"):
        results.extend(run_once(cfg, {"credit": source}, checkpoint,
                                now=T0 + 3 * H + timedelta(days=30), on_result=hooks))
        # nothing was skipped: the oldest catch_up windows were evaluated, the rest stay due
        assert not any(r.skipped_before for r in results)
        assert checkpoint.load("credit").predictions_end == T0 + 103 * H
        tick(T0 + 3 * H + timedelta(minutes=10))  # the clock is put right
    assert "clock jump forward" in caplog.text and "clock jump backward" in caplog.text
    assert caplog.text.count("clock jump backward") == 1  # logged once
    assert checkpoint.load("credit").predictions_end == T0 + 3 * H  # rewound to now
    # real time passes: hours 3-7 get their rows and close
    source.upto = T0 + 8 * H
    for k in range(4, 9):
        tick(T0 + k * H + timedelta(minutes=1))
    last = _last_values(results)
    for k in range(8):  # every window with rows: evaluated on all of them, with the true value
        n, dpd = _oracle(frame, k)
        assert last[T0 + k * H][0] == n == 200, k
        assert last[T0 + k * H][1] == pytest.approx(dpd, abs=1e-12), k
    after = {d: INCIDENTS.get("clock_jumps", "credit", d) for d in ("forward", "backward")}
    assert after["forward"] - before["forward"] == 1
    assert after["backward"] - before["backward"] == 1
    assert registry.get_sample_value("fairmonitor_clock_jumps_total",
                                     {"model": "credit", "direction": "backward"}) == \
        after["backward"]


def test_backward_jump_rewinds_and_reevaluates_the_windows_after_now(tmp_path,
                                                                     make_predictions):
    """The process starts with a clock 5 hours ahead (indistinguishable from downtime), then
    the clock is stepped back: the windows evaluated before they closed are evaluated again."""
    frame = make_predictions(n_hours=6)
    cfg = _config()
    checkpoint = FileCheckpoint(tmp_path / "cp.json")
    source = GrowingSource(frame, T0 + H)
    first = run_once(cfg, {"credit": source}, checkpoint, now=T0 + 6 * H)
    assert [r.n_rows for r in first] == [200, 0, 0, 0, 0, 0]  # hours 1-5 had not happened
    before = INCIDENTS.get("clock_jumps", "credit", "backward")
    back = run_once(cfg, {"credit": source}, checkpoint, now=T0 + H + timedelta(minutes=3))
    assert back == []
    assert checkpoint.load("credit").predictions_end == T0 + H
    assert INCIDENTS.get("clock_jumps", "credit", "backward") == before + 1
    source.upto = T0 + 6 * H
    later = run_once(cfg, {"credit": source}, checkpoint, now=T0 + 6 * H + timedelta(minutes=1))
    assert [r.start for r in later] == [T0 + k * H for k in range(1, 6)]
    assert [r.n_rows for r in later] == [200] * 5


def test_a_start_in_the_future_is_not_a_clock_jump(tmp_path, make_predictions):
    frame = make_predictions(n_hours=2)
    cfg = load_config(f"""
models:
  credit:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    start: {(T0 + 5 * H).isoformat()}
    metrics: [{DPD}]
""")
    checkpoint = FileCheckpoint(tmp_path / "cp.json")
    before = INCIDENTS.get("clock_jumps", "credit", "backward")
    assert run_once(cfg, {"credit": MemorySource(frame)}, checkpoint, now=T0 + H) == []
    assert run_once(cfg, {"credit": MemorySource(frame)}, checkpoint, now=T0 + 2 * H) == []
    assert checkpoint.load("credit").predictions_end == T0 + 5 * H
    assert INCIDENTS.get("clock_jumps", "credit", "backward") == before


def test_rewind_moves_every_watermark_and_the_rollups_back_to_now():
    from fairmonitor.monitor.checkpoint import ModelState
    from fairmonitor.monitor.clock import rewind

    cfg = load_config(f"""
models:
  credit:
    source: {{kind: sql, url: "sqlite://"}}
    sensitive_features: [sex]
    prediction: prediction
    label: label
    window: 1h
    labels_after: 2h
    metrics: [{DPD}, equal_opportunity_difference]
    rollups: [6h]
""").models["credit"]
    ahead = T0 + timedelta(days=3)
    state = ModelState(ahead, ahead - 2 * H, rollups={"6h": ahead - 6 * H})
    now = T0 + 10 * H + timedelta(minutes=30)
    phases = [("predictions_end", timedelta(0)), ("labels_end", 2 * H)]
    moved, by = rewind(cfg, state, now, phases)
    # the latest window closed at now, and at now - labels_after for the labelled phase
    assert moved.predictions_end == T0 + 10 * H
    assert moved.labels_end == T0 + 8 * H
    # the rollup follows the windows done in every phase, on its own grid
    assert moved.rollups == {"6h": T0 + 6 * H}
    assert by == ahead - now
    assert rewind(cfg, moved, now, phases) == (moved, timedelta(0))  # idempotent
