"""Real monitor processes for the high-availability tests and ``benchmarks/bench_failover.py``.

:class:`Stack` writes a predictions database (SQLite, 5-minute windows whose rows end before
now, so every window is a catch-up), a config with a SQL checkpoint and a short lease, and starts
replicas as ``python -m fairmonitor.cli monitor --config ...`` subprocesses, each serving
``/metrics`` on its own free port of 127.0.0.1 and logging to its own file. Replicas are stopped
by PID (SIGTERM, then SIGKILL after a bound). :meth:`Stack.check_mlflow` compares what reached
MLflow with an independent recomputation of each window's demographic parity difference
(pandas, from the rows written): windows lost, duplicated and wrong.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

KEY = "fairness/demographic_parity_difference/sex"
WINDOW = timedelta(minutes=5)
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def predictions(n_windows: int, rows: int, *, seed: int = 0) -> tuple[pd.DataFrame, datetime]:
    """``n_windows`` 5-minute windows of rows ending at least 10 minutes before now.

    Each window selects group F at its own rate (so every window's value differs) and M at 0.5.
    """
    rng = np.random.default_rng(seed)
    now = datetime.now(UTC)
    last_end = datetime.fromtimestamp(now.timestamp() // 300 * 300, UTC) - 2 * WINDOW
    start = last_end - n_windows * WINDOW
    parts = []
    for w in range(n_windows):
        sex = np.where(rng.random(rows) < 0.5, "F", "M")
        rate = np.where(sex == "F", rng.uniform(0.1, 0.9), 0.5)
        offsets = np.sort(rng.uniform(0, WINDOW.total_seconds() - 1, rows))
        parts.append(pd.DataFrame({
            "timestamp": [start + w * WINDOW + timedelta(seconds=float(s)) for s in offsets],
            "model": "credit", "version": "1", "sex": sex,
            "prediction": (rng.random(rows) < rate).astype(int)}))
    return pd.concat(parts, ignore_index=True), start


def expected_values(frame: pd.DataFrame, start: datetime, n_windows: int) -> dict[int, float]:
    """Window index (the MLflow step) -> |P(pred=1 | F) - P(pred=1 | M)|, recomputed here."""
    out = {}
    for w in range(n_windows):
        lo, hi = start + w * WINDOW, start + (w + 1) * WINDOW
        rows = frame[(frame.timestamp >= lo) & (frame.timestamp < hi)]
        rates = rows.groupby("sex")["prediction"].mean()
        index = int(hi.timestamp() // WINDOW.total_seconds())  # the window index: end on the grid
        out[index] = abs(float(rates["F"]) - float(rates["M"]))
    return out


@dataclass
class Replica:
    """One monitor process."""

    name: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    started: float = field(default_factory=time.monotonic)

    def metrics(self, timeout: float = 2.0) -> dict[str, float]:
        """The scrape as {series: value} (empty when it does not answer)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                        timeout=timeout) as resp:
                text = resp.read().decode()
        except OSError:
            return {}
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                series, _, value = line.rpartition(" ")
                out[series] = float(value)
        return out

    def leader(self) -> float | None:
        """1 leader, 0 standby, None not answering."""
        return self.metrics().get("fairmonitor_leader")

    def log(self) -> str:
        """Everything the process logged so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def signal(self, sig: int) -> None:
        """Send ``sig`` to this process (by PID)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait; SIGKILL if it overstays. Returns the exit code."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a paused process cannot handle SIGTERM
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)


class Stack:
    """Predictions, a SQL checkpoint, an MLflow store and the replicas on them."""

    def __init__(self, root: Path, tracking_uri: str, *, checkpoint_url: str | None = None,
                 n_windows: int = 120, rows: int = 200, lease: float = 2,
                 experiment: str = "ha", seed: int = 0,
                 table: str = "fairmonitor_checkpoint") -> None:
        self.root, self.tracking_uri, self.experiment = root, tracking_uri, experiment
        self.lease, self.table = lease, table
        self.n_windows = n_windows
        self.frame, self.start = predictions(n_windows, rows, seed=seed)
        self.end = self.start + n_windows * WINDOW
        db = root / "predictions.db"
        stored = self.frame.assign(timestamp=self.frame.timestamp.map(
            lambda t: t.replace(tzinfo=None).isoformat(" ")))
        with sqlite3.connect(db) as conn:
            stored.to_sql("predictions", conn, index=False)
        self.checkpoint_url = checkpoint_url or f"sqlite:///{root / 'checkpoint.db'}"
        self.replicas: list[Replica] = []
        self.db = db

    def config(self, name: str, checkpoint_url: str | None = None) -> Path:
        """The YAML of one replica (its own checkpoint URL, e.g. through a proxy)."""
        path = self.root / f"{name}.yaml"
        path.write_text(f"""
checkpoint: {{kind: sql, url: "{checkpoint_url or self.checkpoint_url}", table: {self.table},
             lease: {self.lease:g}s}}
mlflow_spool: null
catch_up: 1000
tick: 1s
models:
  credit:
    source: {{kind: sql, url: "sqlite:///{self.db}"}}
    tracking_uri: "{self.tracking_uri}"
    experiment: {self.experiment}
    sensitive_features: [sex]
    prediction: prediction
    window: 5m
    start: "{self.start.isoformat()}"
    metrics: [demographic_parity_difference]
""")
        return path

    def spawn(self, name: str, checkpoint_url: str | None = None) -> Replica:
        """Start one replica; it serves /metrics on a free port."""
        port = free_port()
        log_path = self.root / f"{name}.log"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO), str(REPO / "plugins"), os.environ.get("PYTHONPATH", "")])}
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "fairmonitor.cli", "monitor", "--config",
                 str(self.config(name, checkpoint_url)), "--web.listen-address",
                 f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT, env=env,
                cwd=self.root)
        replica = Replica(name, port, proc, log_path)
        self.replicas.append(replica)
        return replica

    def stop_all(self) -> None:
        """Stop every replica this stack started, by PID."""
        for r in self.replicas:
            r.stop()

    # ------------------------------------------------------------------ reading state
    def done_until(self) -> datetime | None:
        """The checkpoint's ``predictions_end`` (None before the first save)."""
        import json

        import sqlalchemy as sa

        engine = sa.create_engine(self.checkpoint_url)
        try:
            with engine.connect() as conn:
                text = conn.execute(sa.text(
                    f"select state from {self.table} where model = 'credit'")).scalar()
        except sa.exc.SQLAlchemyError:
            return None
        finally:
            engine.dispose()
        if text is None:
            return None
        end = json.loads(text).get("predictions_end")
        return None if end is None else datetime.fromisoformat(end)

    def windows_done(self) -> int:
        """Windows with rows that the checkpoint has passed."""
        end = self.done_until()
        return 0 if end is None else max(0, min(self.n_windows, (end - self.start) // WINDOW))

    def check_mlflow(self) -> dict[str, Any]:
        """Windows lost, duplicated and wrong in MLflow, against the recomputation."""
        from mlflow.tracking import MlflowClient

        expected = expected_values(self.frame, self.start, self.n_windows)
        client = MlflowClient(self.tracking_uri)
        exp = client.get_experiment_by_name(self.experiment)
        history = []
        for run in client.search_runs([exp.experiment_id]) if exp else []:
            history += client.get_metric_history(run.info.run_id, KEY)
        steps = [m.step for m in history]
        wrong = [m.step for m in history
                 if m.step not in expected or abs(m.value - expected[m.step]) > 1e-9]
        return {"expected": len(expected), "logged": len(history),
                "lost": len(set(expected) - set(steps)),
                "duplicated": len(steps) - len(set(steps)), "wrong": len(wrong)}


def wait_for(predicate: Any, timeout: float, step: float = 0.1) -> float:
    """Seconds until ``predicate()`` was true; AssertionError after ``timeout``."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"condition not met within {timeout:.0f} s")
        time.sleep(step)
    return time.monotonic() - t0


class TcpProxy:
    """A TCP forwarder on 127.0.0.1 that a test can cut (every connection closed, new ones
    refused) and restore on the same port: the network to a database, cut and back."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.port = free_port()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._server: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        """Listen again (same port) and forward new connections."""
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        server.settimeout(0.1)  # the accept loop checks for a cut this often
        self._server, self._open = server, threading.Event()
        self._open.set()
        self._thread = threading.Thread(target=self._accept, args=(server, self._open),
                                        daemon=True)
        self._thread.start()

    def _accept(self, server: socket.socket, open_: threading.Event) -> None:
        while open_.is_set():
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not open_.is_set():
                client.close()
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Refuse new connections and close every open one."""
        if self._server is not None:
            # stop the accept loop before closing: closing a socket another thread is
            # blocked on does not stop it listening on Linux
            self._open.clear()
            self._thread.join(5)
            self._server.close()
            self._server = None
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        """Stop forwarding for good."""
        self.cut()


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A throw-away PostgreSQL server on 127.0.0.1 (for the benchmark; the tests use the
    session fixture of ``conftest.py``), stopped by its data directory when done."""
    import glob
    import shutil
    import tempfile

    bindir = Path(sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))[-1]).parent
    root = Path(tempfile.mkdtemp(prefix="fairmonitor-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        shutil.chown(root, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", free_port()
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U",
                    "postgres", "--no-sync"], check=True, capture_output=True, timeout=120)
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off "
               "-c synchronous_commit=off")
    subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l",
                    str(root / "server.log"), "-w", "-t", "60", "start"], check=True,
                   capture_output=True, timeout=120)
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def create_database(url: str, name: str) -> str:
    """``CREATE DATABASE name`` on the server of ``url``; the new database's URL."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return url.rsplit("/", 1)[0] + f"/{name}"
