"""The alert path on loopback, for the end-to-end alert tests: real servers, started and stopped.

- :class:`Traffic`: a thread logging predictions with ``PredictionLogger`` in wall-clock time,
  in a mode the test switches at window boundaries: ``fair`` (both groups selected at 0.5),
  ``biased`` (F 0.2, M 0.8: a parity gap of 0.6), ``none`` (no rows), ``vanished`` (group F
  gone).
- :func:`monitor`: the real ``MonitorService`` with its default scheduling (each window
  evaluated when it closes) on a free port.
- :func:`prometheus` and :func:`alertmanager`: Debian's binaries with private data directories
  and free ports on 127.0.0.1 (Alertmanager's cluster port disabled).
- :class:`Webhook`: a receiver recording every notification with its arrival time (and, for
  configs with several receivers, the receiver and the POST it came in).
- :func:`routing_config` and :func:`alertmanager_with`: a shipped Alertmanager file (e.g.
  ``docker/alertmanager.yml``) with its timings scaled and its receivers pointed at a
  :class:`Webhook`, run as is (routes, groups and inhibitions included).

Everything is a context manager that stops what it started, so a failing test leaves nothing
running. Missing binaries FAIL (CI installs ``prometheus`` and ``prometheus-alertmanager``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pandas as pd

ROWS_PER_BATCH = 10  # per group, every BATCH_SECONDS: exact selection rates in every window
BATCH_SECONDS = 0.2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def binary(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path is not None:
            return path
    raise AssertionError(f"{names[0]} not found: apt-get install prometheus "
                         "prometheus-alertmanager (.ci/run does)")


class Traffic:
    """Logs a batch of predictions every :data:`BATCH_SECONDS`, in the current :attr:`mode`."""

    def __init__(self, url: str):
        from fairmonitor.monitor.sources.logger import PredictionLogger

        # (from, mode) by time: a batch's mode follows from its own timestamp, so a switch
        # registered for a window boundary never lets a batch of the old mode into the new
        # window (setting a mode "at" the boundary from another thread raced the batch clock)
        self._schedule: list[tuple[datetime, str]] = [(datetime.min.replace(tzinfo=UTC), "fair")]
        self._lock = threading.Lock()
        self._logger = PredictionLogger(url, model="credit", version="1",
                                        sensitive_features=["sex"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def switch_at(self, at: datetime, mode: str) -> None:
        """Log ``mode`` for every batch stamped at or after ``at``."""
        with self._lock:
            self._schedule = sorted([*self._schedule, (at, mode)], key=lambda entry: entry[0])

    def mode_at(self, t: datetime) -> str:
        with self._lock:
            return [mode for start, mode in self._schedule if start <= t][-1]

    @property
    def mode(self) -> str:
        return self.mode_at(datetime.now(UTC))

    @mode.setter
    def mode(self, mode: str) -> None:
        self.switch_at(datetime.now(UTC), mode)

    def _batch(self, now: datetime) -> pd.DataFrame:
        rates = {"fair": {"F": 0.5, "M": 0.5}, "biased": {"F": 0.2, "M": 0.8},
                 "vanished": {"M": 0.8}}.get(self.mode_at(now), {})
        rows = []
        for group, rate in rates.items():
            positive = int(round(rate * ROWS_PER_BATCH))
            rows += [{"timestamp": now, "sex": group, "prediction": int(i < positive),
                      "score": 0.9 if i < positive else 0.1} for i in range(ROWS_PER_BATCH)]
        return pd.DataFrame(rows)

    def _run(self) -> None:
        while not self._stop.wait(BATCH_SECONDS):
            # one timestamp per batch: a batch never straddles two windows
            batch = self._batch(datetime.now(UTC))
            if len(batch):
                self._logger.log_frame(batch)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._logger.close()


class NullSink:
    """No MLflow in the alert path: MLflow's first import and migrations take seconds, which
    would delay 2-second windows (the MLflow sink has its own end-to-end tests)."""

    pending = 0

    def submit(self, result: Any) -> None:
        pass

    def submit_reference(self, *args: Any, **kwargs: Any) -> None:
        pass

    def flush(self) -> bool:
        return True


@contextlib.contextmanager
def monitor(config: Any, port: int = 0) -> Iterator[Any]:
    """A running ``MonitorService`` (default window-end scheduling) on a loopback port.

    ``port`` 0 picks a free one; a given ``port`` (a restarted monitor keeping its scrape
    target) is waited for, bounded, as the previous process on it may have just stopped.
    """
    from fairmonitor.monitor.service import MonitorService

    deadline = time.monotonic() + 30
    while port:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
                break
            except OSError:
                assert time.monotonic() < deadline, f"port {port} still busy"
                time.sleep(0.1)
    svc = MonitorService(config, listen_address=f"127.0.0.1:{port}", sink=NullSink())
    thread = threading.Thread(target=svc.run, daemon=True)
    thread.start()
    while svc._server is None:  # noqa: SLF001 - the port is known once the server listens
        assert thread.is_alive() and time.monotonic() < deadline, "the monitor did not start"
        time.sleep(0.05)
    try:
        yield svc
    finally:
        svc.stop()
        thread.join(30)


@contextlib.contextmanager
def _process(args: list[str], ready_url: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                assert proc.poll() is None, f"{args[0]} exited: {log.read_text()[-2000:]}"
                try:
                    with urllib.request.urlopen(ready_url, timeout=2):
                        break
                except OSError:
                    assert time.monotonic() < deadline, f"{args[0]} not ready: {ready_url}"
                    time.sleep(0.2)
            yield proc
        finally:
            stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def alertmanager(workdir: Path, webhook_url: str, *, group_wait: str = "1s"
                 ) -> Iterator[int]:
    """Alertmanager routing everything to ``webhook_url``, with the example inhibitions."""
    port = free_port()
    config = workdir / "alertmanager.yml"
    inhibit = json.loads(json.dumps(_example_inhibitions()))
    config.write_text(json.dumps({
        "route": {"receiver": "webhook", "group_by": ["alertname", "model", "metric",
                                                      "sensitive_attribute", "instance"],
                  "group_wait": group_wait, "group_interval": "1s", "repeat_interval": "1h"},
        "inhibit_rules": inhibit,
        "receivers": [{"name": "webhook", "webhook_configs": [
            {"url": webhook_url, "send_resolved": True}]}],
    }))
    args = [binary("prometheus-alertmanager", "alertmanager"), f"--config.file={config}",
            f"--storage.path={workdir / 'am-data'}", f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=", "--log.level=warn"]
    with _process(args, f"http://127.0.0.1:{port}/-/ready", workdir / "alertmanager.log"):
        yield port


def _example_inhibitions() -> list[dict[str, Any]]:
    import yaml

    from .conftest import DOCKER

    return yaml.safe_load((DOCKER / "alertmanager.yml").read_text())["inhibit_rules"]


@contextlib.contextmanager
def prometheus(workdir: Path, rules: str, targets: list[str], alertmanager_port: int, *,
               interval: str = "1s") -> Iterator[int]:
    """Prometheus scraping ``targets`` (job fairmonitor) and itself, evaluating ``rules``."""
    port = free_port()
    (workdir / "fairmonitor.rules.yml").write_text(rules)
    config = workdir / "prometheus.yml"
    config.write_text(json.dumps({
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": ["fairmonitor.rules.yml"],
        "alerting": {"alertmanagers": [{"static_configs": [
            {"targets": [f"127.0.0.1:{alertmanager_port}"]}]}]},
        "scrape_configs": [
            {"job_name": "fairmonitor", "static_configs": [{"targets": targets}]},
            {"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]},
        ],
    }))
    args = [binary("prometheus"), f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn"]
    with _process(args, f"http://127.0.0.1:{port}/-/ready", workdir / "prometheus.log"):
        yield port


def query(port: int, expr: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as response:
        return list(json.loads(response.read())["data"]["result"])


@dataclass(frozen=True)
class Notification:
    at: float  # time.time() on arrival
    status: str  # of the alert: firing / resolved
    labels: dict[str, str]
    annotations: dict[str, str]
    receiver: str = ""  # the Alertmanager receiver that sent it
    batch: int = 0  # which POST (notification) carried it: 1, 2, ... in arrival order


class Webhook:
    """An Alertmanager webhook receiver on 127.0.0.1 recording every alert it is sent."""

    def __init__(self) -> None:
        self.received: list[Notification] = []
        self._lock = threading.Lock()
        received, lock = self.received, self._lock
        posts = iter(range(1, 1 << 30))

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                at = time.time()
                with lock:
                    batch = next(posts)
                    received.extend(Notification(at, a["status"], a["labels"],
                                                 a.get("annotations", {}),
                                                 body.get("receiver", ""), batch)
                                    for a in body["alerts"])
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/alerts"

    def matching(self, status: str | None = None, **labels: str) -> list[Notification]:
        with self._lock:
            return [n for n in self.received
                    if (status is None or n.status == status)
                    and all(n.labels.get(k) == v for k, v in labels.items())]

    def wait_for(self, timeout: float, status: str | None = None, **labels: str
                 ) -> Notification:
        deadline = time.monotonic() + timeout
        while True:
            found = self.matching(status, **labels)
            if found:
                return found[0]
            if time.monotonic() > deadline:
                with self._lock:
                    seen = [(n.status, n.labels.get("alertname"), n.labels) for n in
                            self.received]
                raise AssertionError(f"no {status or ''} notification with {labels} within "
                                     f"{timeout}s; received: {seen}")
            time.sleep(0.1)

    def __enter__(self) -> Webhook:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


def next_boundary(every: timedelta, after: datetime | None = None) -> datetime:
    """The next window end of the epoch-anchored grid strictly after ``after`` (default now)."""
    from fairmonitor.monitor.windows import next_due

    return next_due(every, after or datetime.now(UTC))


def sleep_until(t: datetime) -> None:
    delay = (t - datetime.now(UTC)).total_seconds()
    if delay > 0:
        time.sleep(delay)


def scaled_duration(text: str, scale: float) -> str:
    """A Prometheus/Alertmanager duration (``30s``, ``5m``, ``4h``) times ``scale``, in ms.

    >>> scaled_duration("5m", 1 / 15), scaled_duration("10s", 1 / 15)
    ('20000ms', '667ms')
    """
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    number = text.rstrip("smhd")
    unit = text[len(number):]
    return f"{round(float(number) * units[unit] * scale * 1000)}ms"


def routing_config(path: Path, webhook_url: str, *, scale: float = 1.0) -> dict[str, Any]:
    """The Alertmanager file at ``path``, its receivers posting to ``webhook_url/<receiver>``.

    Every ``group_wait``, ``group_interval`` and ``repeat_interval`` is multiplied by ``scale``
    (1: the shipped values); routes, grouping and inhibitions are kept as they are.
    """
    import yaml

    config = yaml.safe_load(path.read_text(encoding="utf-8"))

    def scale_route(route: dict[str, Any]) -> None:
        for key in ("group_wait", "group_interval", "repeat_interval"):
            if key in route:
                route[key] = scaled_duration(route[key], scale)
        for child in route.get("routes", []):
            scale_route(child)

    scale_route(config["route"])
    for receiver in config["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = f"{webhook_url}/{receiver['name']}"
    return config


@contextlib.contextmanager
def alertmanager_with(workdir: Path, config: dict[str, Any]) -> Iterator[int]:
    """Alertmanager running ``config`` as given (e.g. from :func:`routing_config`)."""
    port = free_port()
    path = workdir / "alertmanager.yml"
    path.write_text(json.dumps(config))
    args = [binary("prometheus-alertmanager", "alertmanager"), f"--config.file={path}",
            f"--storage.path={workdir / 'am-data'}", f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=", "--log.level=warn"]
    with _process(args, f"http://127.0.0.1:{port}/-/ready", workdir / "alertmanager.log"):
        yield port


class Labeller:
    """Attaches ground truth (label = prediction) to every unlabelled row every
    :data:`BATCH_SECONDS` while :attr:`on`: labels arriving with the predictions; switch it
    off to stop the labels (issue 24: labels overdue)."""

    def __init__(self, url: str, table: str = "predictions"):
        import sqlalchemy as sa

        self.on = True
        self._engine = sa.create_engine(url)
        self._update = sa.text(f"UPDATE {table} SET label = prediction, "
                               "labeled_at = timestamp WHERE label IS NULL")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(BATCH_SECONDS):
            if self.on:
                with self._engine.begin() as conn:
                    conn.execute(self._update)

    def __enter__(self) -> Labeller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._engine.dispose()
