"""The whole alert path, live: monitor -> Prometheus -> Alertmanager -> a webhook (issue 14).

Two replicas of the real monitor (default scheduling: each 2-second window evaluated when it
closes) read predictions logged in wall-clock time, and export the same thresholds; a real
Prometheus 2.42 scrapes them every second and evaluates the generated rules (default windows:
critical on the 2nd breaching window, warning on the 3rd); a real Alertmanager routes to a
webhook receiver, with the example config's inhibitions. All on 127.0.0.1, free ports,
private data directories; every server stops, also on failure. The scenario:

1. fair traffic: no fairness alert;
2. bias starts: the critical alert reaches the webhook (its warning is inhibited);
3. an empty window in the middle of the bias: no resolve, the alert stays firing;
4. the disadvantaged group vanishes: FairnessMetricUndefined (too_few_groups), and the breach
   holds;
5. bias stops: resolved;
6. the monitors stop: FairmonitorDown per instance.

Two replicas exporting the same thresholds run throughout (the joins used to fail then).
"""

from __future__ import annotations

import contextlib
import time
from datetime import timedelta

import pytest

from fairmonitor.alerting.rules import AlertOptions, render_prometheus_rules
from fairmonitor.monitor.config import load_config

from .alert_stack import (
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
BREACH = {"alertname": "FairnessThresholdBreached", "metric": DP, "sensitive_attribute": "sex"}


def monitor_config(tmp_path, url, replica):
    return load_config(f"""
checkpoint: {tmp_path / f'checkpoint-{replica}.json'}
mlflow_spool: null
catch_up: 5
models:
  credit:
    source: {{kind: sql, url: "{url}", table: predictions}}
    sensitive_features: [sex]
    prediction: prediction
    score: score
    window: {int(WINDOW.total_seconds())}s
    min_group_size: 5
    team: risk
    owner: alice
    metrics: [{DP}]
    thresholds:
      {DP}: {{warning: 0.1, critical: 0.2}}
""", base_dir=tmp_path)


def at_next_window(traffic, mode):
    """Switch the traffic at the next window boundary; return that boundary (once reached)."""
    boundary = next_boundary(WINDOW)
    traffic.switch_at(boundary, mode)
    sleep_until(boundary)
    return boundary


def test_alert_path_end_to_end(tmp_path):
    started = time.monotonic()
    url = f"sqlite:///{tmp_path / 'predictions.db'}"
    # default windows and hold; only the down alert's delay is shortened for the test
    options = AlertOptions(grafana_url="http://grafana.test:3000",
                           runbook_url="https://wiki.test/fairmonitor/runbook.md",
                           absent_for=timedelta(seconds=3))
    rules = render_prometheus_rules(None, options)
    with contextlib.ExitStack() as stack:
        traffic = stack.enter_context(Traffic(url))
        monitors = contextlib.ExitStack()
        stack.enter_context(monitors)
        replicas = [monitors.enter_context(monitor(monitor_config(tmp_path, url, i)))
                    for i in (1, 2)]
        targets = [f"127.0.0.1:{svc.address[1]}" for svc in replicas]
        hook = stack.enter_context(Webhook())
        am = stack.enter_context(alertmanager(tmp_path, hook.url))
        prom = stack.enter_context(prometheus(tmp_path, rules, targets, am))

        # 1. fair traffic, scraped from both replicas
        deadline = time.monotonic() + 30
        while len(query(prom, f'fairmonitor_{DP}{{sensitive_attribute="sex"}}')) < 2:
            assert time.monotonic() < deadline, "Prometheus never saw both replicas' values"
            time.sleep(0.2)
        assert len(query(prom, 'fairmonitor_threshold{severity="critical"}')) == 2  # duplicated
        time.sleep(2 * WINDOW.total_seconds())
        assert hook.matching(**BREACH) == []

        # 2. bias starts
        boundary = at_next_window(traffic, "biased")
        first_biased_end = (boundary + WINDOW).timestamp()
        fired = hook.wait_for(30, "firing", severity="critical", **BREACH)
        latency = fired.at - first_biased_end
        assert fired.labels == {**BREACH, "severity": "critical", "model": "credit",
                                "bound": "upper", "team": "risk", "owner": "alice"}
        assert fired.annotations["runbook_url"] == (  # absolute, from the configured base
            "https://wiki.test/fairmonitor/runbook.md#fairnessthresholdbreached")
        # on the 2nd biased window (one cadence after the 1st), not sooner
        assert WINDOW.total_seconds() <= latency < 15, latency
        print(f"\n2-second windows: first biased window end -> webhook {latency:.1f} s")

        # 3. an empty window in the middle of the bias: the alert keeps firing
        gap = next_boundary(WINDOW)
        traffic.switch_at(gap, "none")
        traffic.switch_at(gap + WINDOW, "biased")
        sleep_until(gap + WINDOW)
        until = time.monotonic() + 4 * WINDOW.total_seconds()  # the gap's evaluation and after
        while time.monotonic() < until:
            firing = query(prom, 'ALERTS{alertname="FairnessThresholdBreached",'
                                 'severity="critical",alertstate="firing"}')
            assert len(firing) == 1, "the empty window resolved the alert"
            time.sleep(0.3)
        undefined = query(prom, 'fairmonitor_metric_undefined{reason="no_traffic"}[30s]')
        assert len(undefined) == 2  # both replicas exported the empty window as no traffic
        assert hook.matching("resolved", **BREACH) == []

        # 4. the disadvantaged group vanishes: an alert, and the breach is not resolved
        at_next_window(traffic, "vanished")
        vanished = hook.wait_for(30, "firing", alertname="FairnessMetricUndefined",
                                 metric=DP, sensitive_attribute="sex")
        # the reason is in the description (issue 24: a changing reason is not a new alert)
        assert "reason now: too_few_groups" in vanished.annotations["description"]
        assert hook.matching("resolved", **BREACH) == []

        # 5. bias stops: resolved, and the warning never paged (inhibited by the critical)
        at_next_window(traffic, "fair")
        hook.wait_for(30, "resolved", severity="critical", **BREACH)
        hook.wait_for(30, "resolved", alertname="FairnessMetricUndefined")
        assert hook.matching("firing", severity="warning", **BREACH) == []
        failures = query(prom, 'sum(prometheus_rule_evaluation_failures_total'
                               '{rule_group=~".*;fairmonitor[.]rules"})')
        assert failures[0]["value"][1] == "0"

        # 6. the monitors stop: one down alert per instance
        monitors.close()
        for target in targets:
            hook.wait_for(30, "firing", alertname="FairmonitorDown", instance=target)
        assert hook.matching(alertname="FairmonitorAbsent") == []  # inhibited by the down
    assert time.monotonic() - started < 180
