"""The data pipeline's own alarms, live: monitor -> Prometheus -> Alertmanager -> a webhook.

Issue 24 item 4: labels that stop arriving and a renamed column were silent. Two real monitors
(2-second windows, default scheduling) read predictions logged in wall-clock time into one
SQLite table; a real Prometheus evaluates the generated rules every second and a real
Alertmanager (the example config's inhibitions) routes to a webhook receiver. All on 127.0.0.1,
free ports, private data directories, every server stopped (by PID) also on failure.

- ``labelled``: labels arrive with the predictions (a labeller attaches them), ``labels_after``
  2s. Labels stop: ``FairmonitorLabelsOverdue`` reaches the webhook, the label metric is
  undefined with reason ``labels_overdue`` (never ``no_traffic``); labels resume: resolved.
- ``renamed``: the config names ``gender``, the table has ``sex`` (the column was renamed
  upstream): ``FairmonitorDataErrors`` reaches the webhook from the first window, the windows
  are held (no value is exported), and ``fairmonitor monitor --once`` on that config exits 1
  naming the column.
"""

from __future__ import annotations

import contextlib
import time
from datetime import timedelta

import pytest

from fairmonitor.alerting.rules import AlertOptions, render_prometheus_rules
from fairmonitor.cli import main
from fairmonitor.monitor.config import load_config

from .alert_stack import (
    Labeller,
    Traffic,
    Webhook,
    alertmanager,
    monitor,
    next_boundary,
    prometheus,
    query,
    sleep_until,
)

pytestmark = pytest.mark.e2e

WINDOW = timedelta(seconds=2)
DP = "demographic_parity_difference"
EO = "equalized_odds_difference"


def _config(tmp_path, url, name, *, sensitive="sex", labels=""):
    text = f"""
checkpoint: {tmp_path / f'checkpoint-{name}.json'}
mlflow_spool: null
catch_up: 50
models:
  {name}:
    tracking_uri: sqlite:///{tmp_path / 'unused-mlflow.db'}
    source: {{kind: sql, url: "{url}", table: predictions, model_column: null}}
    sensitive_features: [{sensitive}]
    prediction: prediction
    score: score
    label: label
    window: {int(WINDOW.total_seconds())}s
    min_group_size: 5
{labels}    metrics: [{DP}, {EO}]
"""
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path, load_config(path)


def _at_next_window(switch):
    boundary = next_boundary(WINDOW)
    sleep_until(boundary)
    switch()
    return boundary


def test_pipeline_alarms_end_to_end(tmp_path, capsys):
    started = time.monotonic()
    url = f"sqlite:///{tmp_path / 'predictions.db'}"
    # default rules; only for: of the health alerts is shortened for the test
    options = AlertOptions(grafana_url="http://grafana.test:3000",
                           runbook_url="https://wiki.test/fairmonitor/runbook.md",
                           for_health=timedelta(seconds=2), absent_for=timedelta(seconds=3))
    rules = render_prometheus_rules(None, options)
    _, labelled = _config(tmp_path, url, "labelled", labels="    labels_after: 2s\n")
    renamed_path, renamed = _config(tmp_path, url, "renamed", sensitive="gender")
    with contextlib.ExitStack() as stack:
        stack.enter_context(Traffic(url))  # creates the table, logs fair traffic
        labeller = stack.enter_context(Labeller(url))
        monitors = [stack.enter_context(monitor(cfg)) for cfg in (labelled, renamed)]
        targets = [f"127.0.0.1:{svc.address[1]}" for svc in monitors]
        hook = stack.enter_context(Webhook())
        am = stack.enter_context(alertmanager(tmp_path, hook.url))
        prom = stack.enter_context(prometheus(tmp_path, rules, targets, am))

        # renamed column: a data-error page from the first window, the windows held
        fired = hook.wait_for(30, "firing", alertname="FairmonitorDataErrors", model="renamed")
        assert fired.labels == {"alertname": "FairmonitorDataErrors", "model": "renamed",
                                "severity": "warning"}
        assert fired.annotations["runbook_url"] == (  # absolute, from the configured base
            "https://wiki.test/fairmonitor/runbook.md#fairmonitordataerrors")
        errors = query(prom, 'fairmonitor_errors_total{model="renamed",stage="data"}')
        assert float(errors[0]["value"][1]) >= 1
        assert query(prom, f'fairmonitor_{DP}{{model="renamed"}}') == []  # nothing evaluated
        assert hook.matching(alertname="FairmonitorErrors", model="renamed") == []
        # --once on that config: exit 1, the column named with the table's columns
        capsys.readouterr()
        # (its own checkpoint: the running monitor holds the lease of the shared one, and a
        # second monitor on it is refused before it reads anything)
        once_path = tmp_path / "renamed-once.yaml"
        once_path.write_text(renamed_path.read_text().replace("checkpoint-renamed.json",
                                                              "checkpoint-renamed-once.json"))
        assert main(["monitor", "--config", str(once_path), "--once"]) == 1
        err = capsys.readouterr().err
        assert ("data: models.renamed.sensitive_features[0]: sensitive feature column 'gender' "
                "is not in the source; available columns: ['id', 'timestamp', 'model', ") in err

        # labels arrive: the label metric is evaluated, nothing is overdue
        deadline = time.monotonic() + 30
        while not query(prom, f'fairmonitor_{EO}{{model="labelled"}}'):
            assert time.monotonic() < deadline, "no labelled window was evaluated"
            time.sleep(0.2)
        assert hook.matching(alertname="FairmonitorLabelsOverdue") == []

        # labels stop: overdue, undefined as labels_overdue (never no traffic)
        stopped = _at_next_window(lambda: setattr(labeller, "on", False))
        overdue = hook.wait_for(40, "firing", alertname="FairmonitorLabelsOverdue",
                                model="labelled")
        # the first window without labels is due 2s after it closes; then for: 2s
        latency = overdue.at - (stopped + 2 * WINDOW).timestamp()
        assert 2 <= latency < 20, latency
        print(f"\nlabels stop -> overdue page {latency:.1f} s after the first window's labels "
              "were due")
        reasons = {s["metric"]["reason"] for s in query(
            prom, f'fairmonitor_metric_undefined{{model="labelled",metric="{EO}"}}[20s]')}
        assert "labels_overdue" in reasons and "no_traffic" not in reasons
        assert float(query(prom, 'fairmonitor_labels_overdue_windows{model="labelled"}')
                     [0]["value"][1]) >= 1

        # labels resume: resolved
        _at_next_window(lambda: setattr(labeller, "on", True))
        hook.wait_for(40, "resolved", alertname="FairmonitorLabelsOverdue", model="labelled")
        assert query(prom, 'fairmonitor_labels_overdue_windows{model="labelled"}'
                           )[0]["value"][1] == "0"
    assert time.monotonic() - started < 180
