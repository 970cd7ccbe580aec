"""Hung dependencies (issue 15 item 4): a server that accepts connections and never answers.

Before, a hung PostgreSQL blocked the tick forever with no error counted, and a hung MLflow cost
about 30 s per tick. Now both are bounded by configurable timeouts and counted as errors.
"""

from __future__ import annotations

import socket
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from fairmonitor.monitor.checkpoint import MemoryCheckpoint
from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.job import run_once
from fairmonitor.monitor.service import MonitorService
from fairmonitor.monitor.sources import build_sources

T0 = datetime(2026, 11, 22, tzinfo=UTC)
H = timedelta(hours=1)


@pytest.fixture
def silent_server():
    """127.0.0.1:<port> accepting every connection and never sending a byte; stops itself."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.1)
    held, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


def _config(port, base):
    return load_config(f"""
mlflow_timeout: 1s
models:
  credit:
    source: {{kind: sql, url: "postgresql+psycopg2://u:pw@127.0.0.1:{port}/db", timeout: 1s}}
    tracking_uri: "http://u:pw@127.0.0.1:{port}"
    sensitive_features: [sex]
    prediction: prediction
    window: 1h
    start: "{T0.isoformat()}"
    metrics: [demographic_parity_difference]
""", base_dir=base)


def _bounded(fn, limit):
    """Run ``fn`` in a thread; fail (instead of hanging the suite) if it takes over ``limit``."""
    box = {}
    thread = threading.Thread(target=lambda: box.update(out=fn()), daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"still blocked after {limit} s"
    return box["out"], time.monotonic() - started


def test_hung_database_is_a_bounded_source_error(silent_server, tmp_path):
    from fairmonitor.monitor.sinks.prometheus import FairnessCollector

    cfg = _config(silent_server, tmp_path)
    sources = build_sources(cfg)
    registry = CollectorRegistry()
    collector = FairnessCollector(registry, models=cfg.models)
    results, took = _bounded(lambda: run_once(cfg, sources, MemoryCheckpoint(),
                                              now=T0 + 2 * H, on_result=collector.observe), 20)
    assert took < 5
    first_took = took
    assert len(results) == 1  # the window waits for the database, the next one behind it
    assert "source" in results[0].errors
    assert registry.get_sample_value("fairmonitor_errors_total",
                                     {"model": "credit", "stage": "source"}) == 1.0
    # the second tick does not pile up another blocked thread: it fails at once too
    again, took = _bounded(lambda: run_once(cfg, sources, MemoryCheckpoint(),
                                            now=T0 + 2 * H), 20)
    assert took < 5 and "source" in again[0].errors
    print(f"\nhung database: source error after {first_took:.2f} s (timeout 1 s), then "
          f"{took:.2f} s while the fetch is still blocked")


def test_hung_mlflow_costs_at_most_its_timeout_per_tick(silent_server, make_predictions, tmp_path):
    from fairmonitor.monitor.sources import MemorySource

    cfg = _config(silent_server, tmp_path)
    svc = MonitorService(cfg, registry=CollectorRegistry(), checkpoint=MemoryCheckpoint(),
                         sources={"credit": MemorySource(make_predictions(n_hours=2))},
                         clock=lambda: T0 + 2 * H, listen_address="127.0.0.1:0")
    results, took = _bounded(svc.tick, 60)
    assert [r.ok for r in results] == [True, True]
    assert svc.sink.pending > 0  # kept for the next tick
    assert svc.registry.get_sample_value("fairmonitor_errors_total",
                                         {"model": "credit", "stage": "mlflow"}) == 1.0
    assert took < 8, took
    print(f"\nhung MLflow: tick took {took:.2f} s (mlflow_timeout 1 s), counted in /metrics")
