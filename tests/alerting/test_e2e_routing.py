"""Routing live: the shipped ``docker/alertmanager.yml`` between real servers (issue 24).

The real monitor, a real Prometheus 2.42 evaluating the generated rules, a real Alertmanager
0.25 running the shipped routing file (its routes, groups and inhibitions as they are, only
the receivers pointed at a webhook on 127.0.0.1), all on free loopback ports, stopped by PID.

Time is scaled by ``SCALE`` (default 1/15, stated in every assertion): windows of
``60 s x SCALE`` stand for 1-minute windows, scrape and evaluation every ``15 s x SCALE``
(``docker/prometheus.yml``), every group_wait, group_interval and repeat_interval of the
Alertmanager file and the rules' durations (for_health, error_window, absent_for) times
``SCALE``. ``FAIRMONITOR_ROUTING_SCALE=1`` runs the shipped values with 1-minute windows
(about 10 minutes for the first test): how ``docs/alert-routing.md``'s figures were measured.

1. A critical of an existing group is paged, firing and resolved, even when it fires and
   resolves within one of the old 5-minute group_intervals; the routing before issue 24 never
   sent the second episode (the reproduction, kept as a test).
2. One cause, one notification to the monitoring on-call: a failing checkpoint write on two
   replicas of two models gives one FairmonitorErrors notification, and the staleness it
   causes (firing in Prometheus) is not notified; stopping both replicas gives one
   FairmonitorDown notification (FairmonitorAbsent inhibited).
"""

from __future__ import annotations

import contextlib
import os
import time
from datetime import datetime, timedelta
from fractions import Fraction
from pathlib import Path

import pytest

from fairmonitor.alerting.routing import SYMPTOMS
from fairmonitor.alerting.rules import AlertOptions, render_prometheus_rules
from fairmonitor.monitor.config import load_config

from .alert_stack import (
    Traffic,
    Webhook,
    alertmanager_with,
    monitor,
    next_boundary,
    prometheus,
    query,
    routing_config,
    sleep_until,
)
from .conftest import DOCKER, REPO

pytestmark = pytest.mark.e2e

SCALE = float(Fraction(os.environ.get("FAIRMONITOR_ROUTING_SCALE", "1/15")))
WINDOW = timedelta(seconds=60 * SCALE)  # a "1-minute" window
INTERVAL_S = 15 * SCALE  # docker/prometheus.yml's scrape and evaluation interval
SHIPPED = DOCKER / "alertmanager.yml"
BEFORE = REPO / "tests" / "alerting" / "data" / "alertmanager_before_issue24.yml"
DP = "demographic_parity_difference"
CRITICAL = {"alertname": "FairnessThresholdBreached", "metric": DP, "sensitive_attribute": "sex",
            "severity": "critical"}
#: the shipped timings of pages and batches (docker/alertmanager.yml), scaled
PAGE_INTERVAL_S = 30 * SCALE
BATCH_WAIT_S = 30 * SCALE
#: monitor compute time and HTTP hops: not scaled
SLACK_S = 3.0


def _options() -> AlertOptions:
    return AlertOptions(grafana_url="http://grafana.test:3000",
                        runbook_url="https://wiki.test/fairmonitor/runbook.md",
                        for_health=timedelta(minutes=5) * SCALE,
                        error_window=timedelta(minutes=15) * SCALE,
                        absent_for=timedelta(minutes=2) * SCALE)


def _config(tmp_path: Path, url: str, replica: int, *, second_model: bool = False):
    fraud = f"""
  fraud:                       # no team: routed by model (fraud-model); the same rows
    source: {{kind: sql, url: "{url}", table: predictions, model_column: null}}
    sensitive_features: [sex]
    prediction: prediction
    window: {WINDOW.total_seconds():g}s
    min_group_size: 5
    metrics: [{DP}]
    thresholds:
      {DP}: {{warning: 0.1, critical: 0.2}}
""" if second_model else ""
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
    window: {WINDOW.total_seconds():g}s
    min_group_size: 5
    team: risk
    owner: alice
    metrics: [{DP}]
    thresholds:
      {DP}: {{warning: 0.1, critical: 0.2}}
{fraud}""", base_dir=tmp_path)


def _interval() -> str:
    return f"{round(INTERVAL_S * 1000)}ms"


def _wait(what: str, timeout: float, check) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout:.0f}s"
        time.sleep(min(0.2, INTERVAL_S / 4))


def _two_short_episodes(traffic: Traffic) -> datetime:
    """Windows biased, biased, fair, biased, biased, fair from the next boundary ``t0``.

    Critical episode A fires after window 2 (t0 + 2W) and resolves after window 3 (t0 + 3W);
    episode B fires after window 5 and resolves after window 6: each lasts one window, and
    B starts within 5 minutes (scaled) of A, in A's group. Returns ``t0``.
    """
    t0 = next_boundary(WINDOW)
    for i, mode in enumerate(("biased", "biased", "fair", "biased", "biased", "fair")):
        traffic.switch_at(t0 + i * WINDOW, mode)
    sleep_until(t0 + 5 * WINDOW)
    return t0


def _run_episodes(tmp_path: Path, config_file: Path, horizon: float):
    """The two episodes through ``config_file``; (webhook, t0 as a Unix time)."""
    url = f"sqlite:///{tmp_path / 'predictions.db'}"
    rules = render_prometheus_rules(None, _options())
    with contextlib.ExitStack() as stack:
        traffic = stack.enter_context(Traffic(url))
        svc = stack.enter_context(monitor(_config(tmp_path, url, 1)))
        hook = stack.enter_context(Webhook())
        am = stack.enter_context(alertmanager_with(
            tmp_path, routing_config(config_file, hook.url.rsplit("/", 1)[0], scale=SCALE)))
        prom = stack.enter_context(prometheus(tmp_path, rules, [f"127.0.0.1:{svc.address[1]}"],
                                              am, interval=_interval()))
        _wait("Prometheus sees the fair value", 30 + 4 * INTERVAL_S,
              lambda: query(prom, f'fairmonitor_{DP}{{sensitive_attribute="sex"}}'))
        start = _two_short_episodes(traffic)
        sleep_until(start + 6 * WINDOW)
        t0 = start.timestamp()
        _wait("the end of the observation", horizon, lambda: horizon_reached(hook, t0))
        failures = query(prom, 'sum(prometheus_rule_evaluation_failures_total'
                               '{rule_group=~".*;fairmonitor[.]rules"})')
        assert failures[0]["value"][1] == "0"
    return hook, t0


def horizon_reached(hook: Webhook, t0: float) -> bool:
    """A resolve of the critical after episode B's end: Alertmanager has flushed B."""
    w = WINDOW.total_seconds()
    return any(n.at > t0 + 6 * w for n in hook.matching("resolved", **CRITICAL))


def _batches(notifications) -> list[list]:
    """Notifications grouped by the POST that carried them, in arrival order."""
    posts: dict[int, list] = {}
    for n in notifications:
        posts.setdefault(n.batch, []).append(n)
    return [posts[b] for b in sorted(posts)]


def test_shipped_routing_pages_every_episode(tmp_path):
    """Both one-window critical episodes are paged, firing and resolved, promptly."""
    started = time.monotonic()
    w = WINDOW.total_seconds()
    hook, t0 = _run_episodes(tmp_path, SHIPPED, horizon=6 * INTERVAL_S + PAGE_INTERVAL_S + 30)
    firing = hook.matching("firing", **CRITICAL)
    resolved = hook.matching("resolved", **CRITICAL)
    assert {n.receiver for n in firing + resolved} == {"risk-team-page"}
    # the schedule: fires after windows 2 and 5, resolves after windows 3 and 6
    bound = 2 * INTERVAL_S + PAGE_INTERVAL_S + SLACK_S  # scrape + evaluation + group_interval
    figures = {}
    for name, fires, resolves in (("A", 2, 3), ("B", 5, 6)):
        page = [n.at - (t0 + fires * w) for n in firing
                if t0 + fires * w < n.at < t0 + resolves * w + bound]
        gone = [n.at - (t0 + resolves * w) for n in resolved if t0 + resolves * w < n.at]
        assert page, f"episode {name} was never paged (scale {SCALE:g})"
        assert gone, f"episode {name} was never resolved (scale {SCALE:g})"
        figures[name] = (min(page), min(gone))
        assert 0 < min(page) < bound, (name, min(page), bound)
        assert 0 < min(gone) < bound, (name, min(gone), bound)
    print(f"\nscale {SCALE:g}, windows {w:g}s: time-to-page / time-to-resolve (s) "
          + ", ".join(f"{k}: {p:.1f} / {r:.1f}" for k, (p, r) in figures.items()))
    assert time.monotonic() - started < 40 + 12 * w + 3 * PAGE_INTERVAL_S


def test_routing_before_issue24_dropped_the_second_episode(tmp_path):
    """The reproduction: with one 5-minute group_interval, episode B never paged.

    Episode A's group still existed (its resolve waits for the next tick), B joined it,
    fired and resolved between two ticks, and the tick sent only a resolve.
    """
    w = WINDOW.total_seconds()
    old_interval = 300 * SCALE
    hook, t0 = _run_episodes(tmp_path, BEFORE, horizon=old_interval + 30)
    firing = hook.matching("firing", **CRITICAL)
    assert firing and all(n.at < t0 + 5 * w for n in firing), [n.at - t0 for n in firing]
    # A's resolve reached the pager only at the group's next tick, long after A ended
    late = min(n.at for n in hook.matching("resolved", **CRITICAL)) - (t0 + 3 * w)
    assert late > 2 * w, late
    print(f"\nbefore issue 24, scale {SCALE:g}: episode B never paged; A's resolve {late:.1f}s "
          "after A ended")


def _break_checkpoints(paths: list[Path]) -> None:
    """A checkpoint that can no longer be read or written (a directory in its place)."""
    for path in paths:
        path.unlink()
        path.mkdir()


def test_one_cause_is_one_notification_to_the_oncall(tmp_path):
    started = time.monotonic()
    w = WINDOW.total_seconds()
    url = f"sqlite:///{tmp_path / 'predictions.db'}"
    rules = render_prometheus_rules(None, _options())
    with contextlib.ExitStack() as stack:
        stack.enter_context(Traffic(url))
        monitors = stack.enter_context(contextlib.ExitStack())
        replicas = [monitors.enter_context(monitor(_config(tmp_path, url, i, second_model=True)))
                    for i in (1, 2)]
        targets = [f"127.0.0.1:{svc.address[1]}" for svc in replicas]
        hook = stack.enter_context(Webhook())
        am = stack.enter_context(alertmanager_with(
            tmp_path, routing_config(SHIPPED, hook.url.rsplit("/", 1)[0], scale=SCALE)))
        prom = stack.enter_context(prometheus(tmp_path, rules, targets, am,
                                              interval=_interval()))
        _wait("both replicas evaluate both models", 30 + 4 * w, lambda: len(query(
            prom, "fairmonitor_window_last_success_timestamp_seconds > 0")) == 4)

        # 1. the checkpoint of both replicas fails: errors for each model, then staleness
        sleep_until(next_boundary(WINDOW))
        _break_checkpoints([tmp_path / f"checkpoint-{i}.json" for i in (1, 2)])
        health = _options()
        expected = (3 * w + health.for_health.total_seconds()  # stale after 3 cadences + for
                    + 4 * INTERVAL_S + BATCH_WAIT_S + 30)
        _wait("FairmonitorWindowStale fires in Prometheus for both models", expected,
              lambda: len(query(prom, 'ALERTS{alertname="FairmonitorWindowStale",'
                                      'alertstate="firing"}')) == 2)
        # the stale alerts are firing: give Alertmanager a group_wait to (not) send them
        time.sleep(BATCH_WAIT_S + 2 * INTERVAL_S + SLACK_S)
        oncall = [n for n in hook.matching("firing") if n.receiver == "monitoring-oncall"]
        posts = _batches(oncall)
        assert len(posts) == 1, [[(n.labels["alertname"], n.labels.get("model")) for n in p]
                                 for p in posts]
        assert {(n.labels["alertname"], n.labels["model"], n.labels["stage"])
                for n in posts[0]} == {("FairmonitorErrors", "credit", "checkpoint"),
                                       ("FairmonitorErrors", "fraud", "checkpoint")}
        # the model's team hears about it too (continue), each team once for its model
        teams = {(n.receiver, n.labels["model"]) for n in hook.matching(
            "firing", alertname="FairmonitorErrors") if n.receiver != "monitoring-oncall"}
        assert teams == {("risk-team", "credit"), ("fraud-model", "fraud")}
        assert [n for n in hook.received if n.labels["alertname"] in SYMPTOMS] == []

        # 2. both replicas stop: one FairmonitorDown notification for both instances
        stopped = len(hook.received)
        monitors.close()
        _wait("FairmonitorDown reaches the on-call",
              _options().absent_for.total_seconds() + 30 * SCALE + 4 * INTERVAL_S + 30,
              lambda: hook.matching("firing", alertname="FairmonitorDown"))
        time.sleep(30 * SCALE + 2 * INTERVAL_S + SLACK_S)  # a group_wait more: no second page
        after = [n for n in hook.received[stopped:] if n.status == "firing"]
        posts = _batches(after)
        assert len(posts) == 1, [[n.labels for n in p] for p in posts]
        assert {(n.receiver, n.labels["alertname"], n.labels["instance"])
                for n in posts[0]} == {("monitoring-oncall", "FairmonitorDown", t)
                                       for t in targets}
        assert query(prom, 'ALERTS{alertname="FairmonitorAbsent",alertstate="firing"}')
        assert hook.matching(alertname="FairmonitorAbsent") == []  # inhibited by the down
    assert time.monotonic() - started < 120 + 20 * w
