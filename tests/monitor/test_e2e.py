"""End to end: PredictionLogger -> SQL -> service -> /metrics over HTTP + MLflow + Prometheus.

Predictions are written with a parity gap injected from hour 3 on (conftest's
``prediction_frame``: gap 0 before, 0.6 after). The service runs on loopback with a replayed
clock, one hour of history per 0.1 s tick, and each tick's ``/metrics`` is scraped over HTTP.
The gauges must flip from ok to critical exactly at the window of hour 3, and MLflow must hold
the same numbers at the same steps. A real Prometheus server (Debian's binary) then scrapes a
running monitor and answers the series through its HTTP API. Missing binaries FAIL the tests.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from mlflow.tracking import MlflowClient
from prometheus_client.parser import text_string_to_metric_families

from fairmonitor.monitor.config import load_config
from fairmonitor.monitor.service import MonitorService, ReplayClock
from fairmonitor.monitor.sinks.mlflow import MONITORING_TAG
from fairmonitor.monitor.sources.logger import PredictionLogger
from fairmonitor.monitor.windows import window_index

pytestmark = pytest.mark.e2e

T0 = datetime(2026, 11, 22, tzinfo=UTC)  # where conftest's prediction_frame starts
HOUR = timedelta(hours=1)
HOURS, BIAS_FROM = 6, 3
DP = "demographic_parity_difference"


def write_predictions(url, table, frame):
    with PredictionLogger(url, model="credit", version="1", sensitive_features=["sex"],
                          table=table) as log:
        return log.log_frame(frame)


def monitor_config(tmp_path, source_url, table, mlflow_uri, experiment):
    return load_config(f"""
checkpoint: {tmp_path / 'checkpoint.json'}
models:
  credit:
    tracking_uri: "{mlflow_uri}"
    experiment: {experiment}
    source: {{kind: sql, url: "{source_url}", table: {table}}}
    sensitive_features: [sex]
    label: label
    prediction: prediction
    window: 1h
    start: "{T0.isoformat()}"
    metrics: [{DP}, equalized_odds_difference]
    thresholds:
      {DP}: {{warning: 0.1, critical: 0.2}}
""", base_dir=tmp_path)


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(scraped, name, **labels):
    return scraped.get((name, tuple(sorted(labels.items()))))


def replay(config):
    """Run the service over HOURS windows, one per tick; return one scrape per tick."""
    scrapes = []
    svc = MonitorService(config, listen_address="127.0.0.1:0", tick_seconds=0.1,
                         clock=ReplayClock(T0 + HOUR, HOUR, stop=T0 + HOURS * HOUR),
                         on_tick=lambda n, results: scrapes.append(scrape(svc.address[1])))
    assert svc.run(max_ticks=HOURS) == 0
    return scrapes


def mlflow_history(uri, experiment, key):
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    (run,) = client.search_runs([exp.experiment_id],
                                filter_string=f"tags.`{MONITORING_TAG}` = 'true'")
    return [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, key)]


SEX = {"model": "credit", "version": "1", "sensitive_attribute": "sex"}


def check_replay(scrapes, mlflow_uri, experiment):
    states = [sample(s, "fairmonitor_alert_state", metric=DP, **SEX) for s in scrapes]
    assert states == [0.0] * BIAS_FROM + [2.0] * (HOURS - BIAS_FROM)
    ends = [sample(s, "fairmonitor_window_end_timestamp_seconds", model="credit")
            for s in scrapes]
    assert ends == [(T0 + (k + 1) * HOUR).timestamp() for k in range(HOURS)]
    values = [sample(s, f"fairmonitor_{DP}", **SEX) for s in scrapes]
    assert values == pytest.approx([0.0] * BIAS_FROM + [0.6] * (HOURS - BIAS_FROM))
    steps = [window_index(HOUR, T0 + (k + 1) * HOUR) for k in range(HOURS)]
    # the same numbers (bit for bit) at the window indexes
    assert mlflow_history(mlflow_uri, experiment, f"fairness/{DP}/sex") == list(
        zip(steps, values, strict=True))


def test_sqlite_replay_flips_to_critical_at_the_biased_window(tmp_path, make_predictions,
                                                                mlflow_tracking_uri):
    url = f"sqlite:///{tmp_path / 'predictions.db'}"
    write_predictions(url, "predictions", make_predictions(HOURS, bias_from=BIAS_FROM))
    experiment = f"e2e-sqlite-{uuid.uuid4().hex[:8]}"
    config = monitor_config(tmp_path, url, "predictions", mlflow_tracking_uri, experiment)
    check_replay(replay(config), mlflow_tracking_uri, experiment)


def test_postgresql_replay_flips_to_critical_at_the_biased_window(tmp_path, make_predictions,
                                                                    postgres_url,
                                                                    mlflow_tracking_uri):
    table = f"e2e_{uuid.uuid4().hex[:8]}"  # the server is shared by the session
    write_predictions(postgres_url, table, make_predictions(HOURS, bias_from=BIAS_FROM))
    experiment = f"e2e-pg-{uuid.uuid4().hex[:8]}"
    config = monitor_config(tmp_path, postgres_url, table, mlflow_tracking_uri, experiment)
    check_replay(replay(config), mlflow_tracking_uri, experiment)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())["data"]["result"]


def _poll(port, expr, deadline):
    while True:
        try:
            result = _query(port, expr)
        except OSError:  # not listening yet
            result = []
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.25)


@pytest.fixture
def running_monitor(tmp_path, make_predictions, mlflow_tracking_uri):
    url = f"sqlite:///{tmp_path / 'predictions.db'}"
    write_predictions(url, "predictions", make_predictions(HOURS, bias_from=BIAS_FROM))
    config = monitor_config(tmp_path, url, "predictions", mlflow_tracking_uri,
                            f"e2e-prom-{uuid.uuid4().hex[:8]}")
    done = threading.Event()
    svc = MonitorService(config, listen_address="127.0.0.1:0", tick_seconds=0.1,
                         clock=ReplayClock(T0 + HOUR, HOUR, stop=T0 + HOURS * HOUR),
                         on_tick=lambda n, results: n >= HOURS and done.set())
    thread = threading.Thread(target=svc.run, daemon=True)
    thread.start()
    assert done.wait(60)
    yield svc
    svc.stop()
    thread.join(30)


@pytest.fixture
def prometheus(tmp_path, running_monitor):
    binary = shutil.which("prometheus")
    assert binary is not None, "prometheus missing: apt-get install prometheus"
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: fairmonitor
    static_configs: [{{targets: ["127.0.0.1:{running_monitor.address[1]}"]}}]
""")
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    yield port
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    proc.stderr.close()


def test_real_prometheus_scrapes_the_series(prometheus):
    deadline = time.monotonic() + 45
    result = _poll(prometheus, f'fairmonitor_alert_state{{metric="{DP}"}}', deadline)
    assert [(r["metric"]["sensitive_attribute"], r["value"][1]) for r in result] == [("sex", "2")]
    (dp,) = _poll(prometheus, f'fairmonitor_{DP}{{sensitive_attribute="sex"}}', deadline)
    assert float(dp["value"][1]) == pytest.approx(0.6)
    (up,) = _poll(prometheus, 'up{job="fairmonitor"}', deadline)
    assert up["value"][1] == "1"
