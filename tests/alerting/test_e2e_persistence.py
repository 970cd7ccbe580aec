"""Persistence counted by the monitor, live: monitor -> Prometheus -> Alertmanager -> webhook.

Issue 24: persistence was wall-clock arithmetic in PromQL, where an undefined or missing
window kept a breach streak alive: one window at DP 0.41 followed by two empty windows paged
critical. Now the monitor counts breaching windows (``fairmonitor_breach_windows``) and the
rule compares the count with ``fairmonitor_breach_windows_required``. On real servers (127.0.0.1,
free ports, 2-second windows, the default ``alert_windows``: critical on the 2nd breaching
window, warning on the 3rd):

1. one biased window, then empty windows: no page (the streak stays at 1);
2. biased windows: the critical pages on the 2nd one;
3. the monitor restarts mid-breach (same port, same checkpoint): no resolve;
4. a second replica starts mid-breach (its own checkpoint, a streak from 0): no resolve and
   no second alert (the longest streak of the replicas wins);
5. fair traffic: resolved, once.
"""

from __future__ import annotations

import contextlib
import time
from datetime import timedelta

import pytest

from fairmonitor.alerting.rules import AlertOptions, render_prometheus_rules

from .alert_stack import (
    Traffic,
    Webhook,
    alertmanager,
    free_port,
    monitor,
    prometheus,
    query,
    sleep_until,
)
from .test_e2e_alerts import BREACH, DP, WINDOW, at_next_window, monitor_config

pytestmark = pytest.mark.e2e

SECONDS = WINDOW.total_seconds()
#: after a window closes: evaluated (1 s), scraped and the rules evaluated (1 s each), then
#: Alertmanager's group_wait (1 s); twice that as a margin on a loaded machine
SETTLE = 8.0


def _streak(prom: int, severity: str) -> float | None:
    found = query(prom, f'max(fairmonitor_breach_windows{{metric="{DP}",'
                        f'sensitive_attribute="sex",severity="{severity}"}})')
    return float(found[0]["value"][1]) if found else None


def _wait_streak(prom: int, severity: str, value: float, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while _streak(prom, severity) != value:
        assert time.monotonic() < deadline, (severity, value, _streak(prom, severity))
        time.sleep(0.2)


def _firing(prom: int) -> list[dict]:
    return query(prom, 'ALERTS{alertname="FairnessThresholdBreached",severity="critical",'
                       'alertstate="firing"}')


def _watch_firing(prom: int, hook: Webhook, seconds: float) -> None:
    """The critical keeps firing, as one alert, and nothing resolves, for ``seconds``."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        assert len(_firing(prom)) == 1, "the critical alert resolved or doubled"
        assert hook.matching("resolved", **BREACH) == []
        time.sleep(0.3)


def test_persistence_live(tmp_path):
    started = time.monotonic()
    url = f"sqlite:///{tmp_path / 'predictions.db'}"
    options = AlertOptions(grafana_url="http://grafana.test:3000",
                           absent_for=timedelta(minutes=5))  # replica 2 is down at first
    rules = render_prometheus_rules(None, options)
    ports = [free_port(), free_port()]
    with contextlib.ExitStack() as stack:
        traffic = stack.enter_context(Traffic(url))
        first = contextlib.ExitStack()
        stack.enter_context(first)
        first.enter_context(monitor(monitor_config(tmp_path, url, 1), ports[0]))
        hook = stack.enter_context(Webhook())
        am = stack.enter_context(alertmanager(tmp_path, hook.url))
        prom = stack.enter_context(prometheus(
            tmp_path, rules, [f"127.0.0.1:{p}" for p in ports], am))
        deadline = time.monotonic() + 30
        while _streak(prom, "critical") is None:
            assert time.monotonic() < deadline, "Prometheus never saw the streak gauge"
            time.sleep(0.2)
        assert _streak(prom, "critical") == 0

        # 1. one biased window, then empty windows: the reported false page
        at_next_window(traffic, "biased")
        gap = at_next_window(traffic, "none")
        _wait_streak(prom, "critical", 1)
        sleep_until(gap + 3 * WINDOW)  # three empty windows
        time.sleep(SETTLE)
        assert _streak(prom, "critical") == 1  # neither counted nor reset
        assert hook.matching(**BREACH) == [] and _firing(prom) == []

        # 2. biased windows: the streak goes 2 -> the critical pages on the 2nd one
        boundary = at_next_window(traffic, "biased")
        fired = hook.wait_for(30, "firing", severity="critical", **BREACH)
        latency = fired.at - (boundary + WINDOW).timestamp()
        # the earlier lone window counts (empty windows do not reset): 1 + 1 = 2 on the first
        # biased window of this run
        assert latency < 15, latency
        assert fired.labels == {**BREACH, "severity": "critical", "model": "credit",
                                "bound": "upper", "team": "risk", "owner": "alice"}
        print(f"\ncritical paged {latency:.1f} s after the first biased window of step 2")

        # 3. the monitor restarts mid-breach on its port and checkpoint
        first.close()
        time.sleep(2 * SECONDS)  # down for a window: Prometheus marks its series stale
        stack.enter_context(monitor(monitor_config(tmp_path, url, 1), ports[0]))
        _watch_firing(prom, hook, 3 * SECONDS + SETTLE)

        # 4. a second replica, its own fresh checkpoint, starts mid-breach
        stack.enter_context(monitor(monitor_config(tmp_path, url, 2), ports[1]))
        _watch_firing(prom, hook, 3 * SECONDS + SETTLE)
        streaks = query(prom, f'fairmonitor_breach_windows{{severity="critical",metric="{DP}",'
                              'sensitive_attribute="sex"}')
        assert len(streaks) == 2  # both replicas export a streak; one alert

        # 5. fair traffic: resolved, once
        at_next_window(traffic, "fair")
        hook.wait_for(30, "resolved", severity="critical", **BREACH)
        time.sleep(SETTLE)
        assert len(hook.matching("resolved", severity="critical", **BREACH)) == 1
        assert len(hook.matching("firing", severity="critical", **BREACH)) == 1
    assert time.monotonic() - started < 180
