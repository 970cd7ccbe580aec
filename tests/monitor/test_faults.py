"""Fault injection: the monitor killed (SIGKILL) at every step boundary of a window, restarted.

A real subprocess runs the real service (SQLite source, JSON checkpoint file, spool file, the
session's sqlite MLflow store) and kills itself with SIGKILL right after the n-th occurrence of
one step: ``read`` (the source returned the rows), ``evaluate`` (``evaluate_window`` returned),
``deliver`` (the MLflow sink took the values), ``checkpoint`` (the checkpoint file was
replaced) and ``write`` (one window's values reached MLflow, the spool not yet updated). The
next process resumes from what the previous one left on disk. In the end every window must be
in MLflow exactly once: windows lost = 0, duplicated values = 0.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
from mlflow.tracking import MlflowClient

from .conftest import T0, prediction_frame

KEY = "fairness/demographic_parity_difference/sex"
HOURS = 16

VICTIM = textwrap.dedent("""
    import os, signal, sys
    from datetime import datetime

    step, nth, now, config_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    seen = {}

    def boundary(name):
        seen[name] = seen.get(name, 0) + 1
        if name == step and seen[name] == nth:
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no flush: a crash

    def after(owner, attr, name):
        inner = getattr(owner, attr)
        def wrapped(*args, **kwargs):
            out = inner(*args, **kwargs)
            boundary(name)
            return out
        setattr(owner, attr, wrapped)

    from fairmonitor.monitor import job
    from fairmonitor.monitor.checkpoint import FileCheckpoint
    from fairmonitor.monitor.config import load_config
    from fairmonitor.monitor.service import MonitorService
    from fairmonitor.monitor.sinks.mlflow import MlflowSink
    from fairmonitor.monitor.sources.sql import SQLSource

    after(SQLSource, "fetch", "read")
    after(job, "evaluate_window", "evaluate")
    after(MlflowSink, "submit", "deliver")
    after(FileCheckpoint, "save", "checkpoint")
    after(MlflowSink, "_write", "write")
    service = MonitorService(load_config(config_path), listen_address="127.0.0.1:0",
                             clock=lambda: datetime.fromisoformat(now))
    results = service.run_once()
    sys.exit(0 if all(r.ok for r in results) else 3)
""")

# (step, n): kill right after the n-th occurrence of step in that process. Together they hit
# every boundary of a window, some twice, and a kill during the MLflow writes.
SCHEDULE = [("read", 2), ("evaluate", 2), ("deliver", 2), ("checkpoint", 3), ("read", 1),
            ("deliver", 1), ("checkpoint", 2), ("evaluate", 3), ("write", 2), ("write", 1)]


def _setup(tmp_path, uri, experiment):
    frame = prediction_frame(n_hours=HOURS, bias_from=3, label=False)
    frame["timestamp"] = frame["timestamp"].map(lambda t: t.replace(tzinfo=None).isoformat(" "))
    db = tmp_path / "predictions.db"
    with sqlite3.connect(db) as conn:
        frame.to_sql("predictions", conn, index=False)
    config = tmp_path / "monitor.yaml"
    config.write_text(textwrap.dedent(f"""
        checkpoint: {tmp_path / 'state' / 'checkpoint.json'}
        models:
          credit:
            source: {{kind: sql, url: "sqlite:///{db}"}}
            tracking_uri: "{uri}"
            experiment: {experiment}
            sensitive_features: [sex]
            prediction: prediction
            window: 1h
            start: {T0.isoformat()}
            metrics: [demographic_parity_difference]
    """))
    return config


def _run(tmp_path, config, step, nth):
    script = tmp_path / "victim.py"
    script.write_text(VICTIM)
    now = (T0 + timedelta(hours=HOURS, minutes=5)).isoformat()
    return subprocess.run([sys.executable, str(script), step, str(nth), now, str(config)],
                          capture_output=True, text=True, timeout=180, env=os.environ.copy(),
                          cwd=tmp_path)


def test_kill_at_every_step_boundary_loses_and_duplicates_nothing(tmp_path, mlflow_tracking_uri):
    config = _setup(tmp_path, mlflow_tracking_uri, "faults-kill")
    kills = 0
    for step, nth in SCHEDULE:
        proc = _run(tmp_path, config, step, nth)
        if proc.returncode == -signal.SIGKILL:
            kills += 1
        else:  # the step did not occur n times: everything was done already
            assert proc.returncode == 0, proc.stderr[-3000:]
    final = _run(tmp_path, config, "none", 0)
    assert final.returncode == 0, final.stderr[-3000:]
    assert kills >= 8  # the schedule really interrupted the work

    client = MlflowClient(mlflow_tracking_uri)
    exp = client.get_experiment_by_name("faults-kill")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    history = client.get_metric_history(runs[0].info.run_id, KEY)
    steps = [m.step for m in history]
    first = (T0 + timedelta(hours=1) - T0.replace(year=1970, month=1, day=1)) // timedelta(hours=1)
    expected = list(range(first, first + HOURS))
    lost = sorted(set(expected) - set(steps))
    duplicated = len(steps) - len(set(steps))
    assert (lost, duplicated) == ([], 0), (kills, lost, duplicated)
    assert sorted(steps) == expected
    values = {m.step: m.value for m in history}
    assert [values[s] for s in expected] == pytest.approx([0.0] * 3 + [0.6] * (HOURS - 3))
    print(f"\nfault injection: {kills} kills, windows lost {len(lost)}, duplicates {duplicated}")
