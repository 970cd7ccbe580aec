"""Full disks under the checkpoint and the spool: every failure visible in /metrics within one
tick, no window lost, ``last_success`` frozen until the disk has room again (issue 15, 1 and 6).

The full disk is a real 256 KiB tmpfs filled to the last byte (the tests run as root in CI);
where mounting is not allowed, a directory the user cannot write to stands in for it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from fairmonitor.monitor.checkpoint import FileCheckpoint, ModelState
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.service import MonitorService, ReplayClock
from fairmonitor.monitor.sources import MemorySource

T0 = datetime(2026, 11, 22, tzinfo=UTC)
H = timedelta(hours=1)


class Disk:
    """A small filesystem that can be filled and freed again."""

    def __init__(self, root):
        self.root = root
        root.mkdir()
        self.mounted = os.geteuid() == 0 and shutil.which("mount") is not None and \
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(root)],
                           capture_output=True).returncode == 0

    def fill(self):
        if not self.mounted:  # stand-in: nothing can be created in the directory
            os.chmod(self.root, 0o500)
            return
        fd = os.open(self.root / "ballast", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            with contextlib.suppress(OSError):  # ENOSPC: full
                while True:
                    os.write(fd, b"\0" * 512)
        finally:
            os.close(fd)

    def free(self):
        os.chmod(self.root, 0o700)
        (self.root / "ballast").unlink(missing_ok=True)

    def close(self):
        self.free()
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.root)], capture_output=True)


@pytest.fixture
def disk(tmp_path):
    d = Disk(tmp_path / "disk")
    yield d
    d.close()


def _service(tmp_path, checkpoint, *, spool, tracking_uri, hours=4):
    config = load_config(f"""
mlflow_spool: {spool}
models:
  credit:
    source: {{kind: sql, url: "sqlite://"}}
    tracking_uri: "{tracking_uri}"
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    start: "{T0.isoformat()}"
    metrics: [demographic_parity_difference]
""", base_dir=tmp_path)
    return config, lambda frame, clock: MonitorService(
        config, registry=CollectorRegistry(), sources={"credit": MemorySource(frame)},
        checkpoint=checkpoint, clock=clock, listen_address="127.0.0.1:0", tick_seconds=0.05)


def _scrape(svc):
    """What /metrics serves (the exposition of the service's registry)."""
    return generate_latest(svc.registry).decode()


def _sample(text, name, **labels):
    labels = {"model": "credit", **labels} if labels.pop("model", True) else labels
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    series = f"{name}{{{want}}}" if want else name
    for line in text.splitlines():
        if line.startswith(f"{series} "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{{{want}}} not in the scrape")


def test_full_checkpoint_disk_is_an_error_and_freezes_last_success(tmp_path, disk,
                                                                     make_predictions):
    frame = make_predictions(n_hours=4, bias_from=2)
    store = FileCheckpoint(disk.root / "checkpoint.json")
    store.save("credit", ModelState(T0, T0))  # the monitor has run before
    config, build = _service(tmp_path, store, spool=tmp_path / "spool.jsonl",
                             tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    svc = build(frame, ReplayClock(T0 + 2 * H, H))
    svc.sink.flush = lambda: True  # MLflow is not the subject here (no 10 s of migrations)
    try:
        disk.fill()
        started = time.monotonic()
        results = svc.tick()
        text = _scrape(svc)
        detected = time.monotonic() - started
        assert [dict(r.errors) for r in results][0]["checkpoint"].startswith("cannot save")
        assert _sample(text, "fairmonitor_errors_total", stage="checkpoint") == 1.0
        # FairmonitorWindowStale sees no success; FairmonitorErrors sees the increase
        assert _sample(text, "fairmonitor_window_last_success_timestamp_seconds") == 0.0
        assert store.load("credit").predictions_end == T0
        svc.tick()
        assert _sample(_scrape(svc), "fairmonitor_errors_total", stage="checkpoint") == 2.0
        disk.free()
        svc.tick()
        text = _scrape(svc)
        assert _sample(text, "fairmonitor_window_last_success_timestamp_seconds") > 0
        assert store.load("credit").predictions_end == T0 + 4 * H  # nothing skipped
    finally:
        svc.shutdown()
    print(f"\nfull checkpoint disk (tmpfs={disk.mounted}): visible in /metrics after "
          f"{detected:.2f} s (one tick)")


def test_full_spool_disk_with_mlflow_down_holds_the_checkpoint(tmp_path, disk,
                                                              make_predictions):
    (tmp_path / "down").write_text("a file where the tracking store's directory should be")
    frame = make_predictions(n_hours=4)
    store = FileCheckpoint(tmp_path / "checkpoint.json")
    config, build = _service(tmp_path, store, spool=disk.root / "spool.jsonl",
                             tracking_uri=f"sqlite:///{tmp_path}/down/m.db")
    svc = build(frame, ReplayClock(T0 + 2 * H, H))
    try:
        disk.fill()
        started = time.monotonic()
        results = svc.tick()
        text = _scrape(svc)
        detected = time.monotonic() - started
        assert len(results) == 1  # the first window waits: its values are nowhere durable
        assert "could be neither spooled" in results[0].errors["mlflow"]
        assert results[0].errors["checkpoint"].startswith("not moved")
        assert _sample(text, "fairmonitor_errors_total", stage="spool") >= 1.0
        assert _sample(text, "fairmonitor_errors_total", stage="checkpoint") == 1.0
        assert _sample(text, "fairmonitor_window_last_success_timestamp_seconds") == 0.0
        assert store.load("credit").predictions_end == T0
        disk.free()
        results = svc.tick()
        assert [r.ok for r in results] == [True, True, True]
        assert store.load("credit").predictions_end == T0 + 3 * H
        # 3 windows x (the value, its ci_lower, ci_upper and chance level)
        assert svc.sink.pending == 12 and (disk.root / "spool.jsonl").exists()
        text = _scrape(svc)
        assert _sample(text, "fairmonitor_mlflow_pending_values", model=None) == 12.0
        assert _sample(text, "fairmonitor_mlflow_spool_bytes", model=None) == (
            disk.root / "spool.jsonl").stat().st_size
    finally:
        svc.shutdown()
    print(f"\nfull spool disk + MLflow down (tmpfs={disk.mounted}): visible in /metrics after "
          f"{detected:.2f} s (one tick)")


def test_mlflow_down_then_a_crash_then_back_loses_and_doubles_nothing(tmp_path, make_predictions,
                                                                    mlflow_tracking_uri):
    """MLflow is down for three windows, the process dies without shutting down, MLflow comes
    back and a new process starts: each window is in MLflow exactly once."""
    from mlflow.tracking import MlflowClient

    (tmp_path / "down").write_text("a file where the tracking store's directory should be")
    uri = f"sqlite:///{tmp_path}/down/m.db"
    frame = make_predictions(n_hours=3, bias_from=1)
    store = FileCheckpoint(tmp_path / "checkpoint.json")
    config, build = _service(tmp_path, store, spool=tmp_path / "spool.jsonl", tracking_uri=uri)
    first = build(frame, ReplayClock(T0 + H, H))
    started = time.monotonic()
    first.tick()
    assert _sample(_scrape(first), "fairmonitor_errors_total", stage="mlflow") == 1.0
    detected = time.monotonic() - started
    first.tick()
    first.tick()
    assert first.sink.pending > 0
    del first  # killed: no shutdown, no final flush
    (tmp_path / "down").unlink()  # MLflow is back, with a migrated store
    (tmp_path / "down").mkdir()
    shutil.copy(mlflow_tracking_uri.removeprefix("sqlite:///"), tmp_path / "down" / "m.db")
    second = build(frame, ReplayClock(T0 + 3 * H, H))
    assert second.tick() == []  # nothing new is due: the values come from the spool
    assert second.sink.pending == 0 and not (tmp_path / "spool.jsonl").exists()
    client = MlflowClient(uri)
    run = client.search_runs([client.get_experiment_by_name("fairmonitor-credit").experiment_id])
    history = client.get_metric_history(run[0].info.run_id,
                                        "fairness/demographic_parity_difference/sex")
    steps = [m.step for m in history]
    first_step = (T0 + H - datetime(1970, 1, 1, tzinfo=UTC)) // H
    assert sorted(steps) == [first_step, first_step + 1, first_step + 2]  # none lost, none twice
    assert [m.value for m in sorted(history, key=lambda m: m.step)] == pytest.approx(
        [0.0, 0.6, 0.6])
    print(f"\nMLflow down: visible in /metrics after {detected:.2f} s (one tick); after the "
          f"crash and its return: 3 windows, 0 lost, 0 duplicated")
