"""Step 4 of the demo: the real monitor service over the replayed stream, watched over HTTP.

:class:`~fairmonitor.monitor.service.MonitorService` runs as in production (APScheduler ticks,
prometheus-client's HTTP server, the MLflow sink), except for its clock: a
:class:`~fairmonitor.monitor.service.ReplayClock` advances one window per tick, so a simulated
day passes in seconds. After each tick the demo scrapes the service's own ``/metrics`` over HTTP
and prints one progress line from what it read: the gauges and the alert state.
"""

from __future__ import annotations

import math
import re
import socket
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

__all__ = ["Scrape", "WindowState", "excerpt", "free_port_or", "header_line", "progress_bar",
           "replay", "scrape", "transition_line", "window_line"]

ALERT_NAMES = {0: "ok", 1: "WARNING", 2: "CRITICAL"}


@dataclass(frozen=True)
class Scrape:
    """One ``/metrics`` read: the text and its samples by (name, sorted label items)."""

    text: str
    samples: Mapping[tuple[str, tuple[tuple[str, str], ...]], float]

    def get(self, name: str, **labels: str) -> float | None:
        """Return the sample ``name{labels}`` (labels must match exactly), or None."""
        return self.samples.get((name, tuple(sorted(labels.items()))))

    def matching(self, name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Every sample of ``name`` whose labels include ``labels``."""
        want = set(labels.items())
        return {lab: v for (n, lab), v in self.samples.items()
                if n == name and want <= set(lab)}


def scrape(host: str, port: int, *, timeout: float = 10.0) -> Scrape:
    """Read ``http://host:port/metrics`` and parse it."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout) as response:
        text = response.read().decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): float(s.value)
               for family in text_string_to_metric_families(text) for s in family.samples}
    return Scrape(text, samples)


@dataclass(frozen=True)
class WindowState:
    """What ``/metrics`` said after the tick that evaluated one window."""

    number: int                                  # 1-based window number
    start: datetime
    end: datetime
    rows: int
    values: Mapping[tuple[str, str], float]      # (metric, attribute) -> gauge value
    alerts: Mapping[tuple[str, str], int]        # (metric, attribute) -> 0/1/2
    results: Sequence[Any] = field(default=(), repr=False)  # the tick's WindowResults

    @property
    def alert(self) -> int:
        """The worst alert state (0 ok, 1 warning, 2 critical)."""
        return max(self.alerts.values(), default=0)


def progress_bar(done: int, total: int, width: int = 24) -> str:
    """Return a plain-text progress bar.

    >>> progress_bar(6, 24, width=12)
    '[###.........]  6/24'
    """
    filled = int(round(width * done / total)) if total else width
    digits = len(str(total))
    return f"[{'#' * filled}{'.' * (width - filled)}] {done:{digits}d}/{total}"


def free_port_or(host: str, port: int) -> tuple[int, bool]:
    """``(port, False)`` if ``port`` can be bound on ``host``, else ``(0, True)`` (any free port).

    Port 0 is returned unchanged (the server picks a free port).
    """
    if port == 0:
        return 0, False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return 0, True
    return port, False


def _state(number: int, start: datetime, end: datetime, read: Scrape, model: str,
           shown: Sequence[tuple[str, str]], results: Sequence[Any]) -> WindowState:
    values = {}
    for metric, attr in shown:
        found = read.matching(f"fairmonitor_{metric}", model=model, sensitive_attribute=attr)
        values[(metric, attr)] = next(iter(found.values()), math.nan)
    alerts = {}
    for labels, v in read.matching("fairmonitor_alert_state", model=model).items():
        d = dict(labels)
        alerts[(d["metric"], d["sensitive_attribute"])] = int(v)
    rows = read.get("fairmonitor_window_samples", model=model)
    return WindowState(number, start, end, int(rows or 0), values, alerts, tuple(results))


def window_line(state: WindowState, total: int, shown: Sequence[tuple[str, str]],
                note: str = "") -> str:
    """One progress line: bar, window, rows, the shown gauges, the alert state."""
    cells = "".join(f"{v:>{max(7, len(_short(m, a)))}.3f}  "
                    for (m, a), v in ((k, state.values[k]) for k in shown))
    return (f"  {progress_bar(state.number, total)}  {state.start:%H:%M}-{state.end:%H:%M}  "
            f"{state.rows:6d}  {cells}{ALERT_NAMES.get(state.alert, '?'):8s}{note}").rstrip()


def header_line(total: int, shown: Sequence[tuple[str, str]]) -> str:
    """Column titles matching :func:`window_line`."""
    bar = len(progress_bar(total, total))
    cells = "".join(f"{_short(m, a):>7s}  " for m, a in shown)
    return f"  {'replay':{bar}s}  {'window':11s}  {'rows':>6s}  {cells}alert"


_ABBREV = {"demographic_parity_difference": "DPD", "equal_opportunity_difference": "EOpp",
           "equalized_odds_difference": "EOD", "demographic_parity_ratio": "DPR"}


def _short(metric: str, attr: str) -> str:
    """``equal_opportunity_difference``, ``sex`` -> ``EOpp[sex]``.

    >>> _short("abcc", "sex")
    'abcc[sex]'
    """
    return f"{_ABBREV.get(metric, metric)}[{attr}]"


def replay(config: Any, *, model: str, start: datetime, window: timedelta, n_windows: int,
           tick_seconds: float, listen_address: str, shown: Sequence[tuple[str, str]],
           out: TextIO, mark: Mapping[int, str] | None = None, serve: bool = False,
           on_done: Callable[[list[WindowState], str, str], None] | None = None,
           timeout: float = 600.0) -> tuple[list[WindowState], str, str]:
    """Run the monitor service over ``n_windows`` replayed windows.

    Returns the window states, the ``/metrics`` URL and the last scrape's text.

    One tick evaluates one window (the clock advances one ``window`` per tick). After each tick
    the service's ``/metrics`` is scraped over HTTP and a progress line printed (``mark`` adds a
    note after window numbers, 1-based). ``on_done(states, url, text)`` runs once the last
    window is in (in the scheduler thread, while ``/metrics`` is still served). Without
    ``serve`` the service then shuts down (the MLflow queue is flushed); with it, it keeps
    serving ``/metrics`` until SIGINT/SIGTERM.
    """
    from ..monitor.service import MonitorService, ReplayClock

    states: list[WindowState] = []
    clock = ReplayClock(start + window, window, stop=start + n_windows * window)
    holder: dict[str, Any] = {}

    def after_window(n: int, results: Sequence[Any]) -> None:
        host, port = holder["svc"].address
        read = scrape(host, port)
        w_start = start + (n - 1) * window
        state = _state(n, w_start, w_start + window, read, model, shown, results)
        states.append(state)
        print(window_line(state, n_windows, shown, (mark or {}).get(n, "")), file=out,
              flush=True)
        if n == n_windows:
            holder["url"] = f"http://{host}:{port}/metrics"
            if on_done is not None:
                on_done(list(states), holder["url"], read.text)
            holder["text"] = read.text

    def on_tick(n: int, results: Sequence[Any]) -> None:
        if n > n_windows:
            return  # serving after the replay: the clock has stopped, nothing new
        try:
            after_window(n, results)
        except BaseException as exc:  # stop the service; re-raised in the caller's thread
            holder.setdefault("error", exc)
            holder["svc"].stop()
            raise

    svc = MonitorService(config, listen_address=listen_address, tick_seconds=tick_seconds,
                         clock=clock, on_tick=on_tick)
    holder["svc"] = svc
    if serve:
        svc.run()  # until Ctrl-C; the summary is printed by on_done meanwhile
    else:
        svc.run(max_ticks=n_windows, run_for=timeout)
    if "error" in holder:
        raise holder["error"]
    if "text" not in holder:
        raise RuntimeError(f"the replay stopped after {len(states)} of {n_windows} windows")
    return states, holder["url"], holder["text"]


def utc_hour(now: datetime | None = None) -> datetime:
    """``now`` (default: the wall clock) rounded down to the hour, in UTC.

    >>> utc_hour(datetime(2026, 5, 1, 13, 47, tzinfo=UTC))
    datetime.datetime(2026, 5, 1, 13, 0, tzinfo=datetime.timezone.utc)
    """
    now = now or datetime.now(UTC)
    return now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def transition_line(states: Sequence[WindowState], from_window: int) -> str:
    """Where the alert state changed, compared with the window where the bias starts (0-based).

    >>> ok, warn = ({("m", "sex"): 0}, {("m", "sex"): 1})
    >>> states = [WindowState(i + 1, None, None, 0, {}, a) for i, a in enumerate([ok, warn])]
    >>> transition_line(states, 1).split(": ")[1]
    'ok for windows 1-1, WARNING from window 2 on'
    """
    k = from_window
    first_alert = next((s.number for s in states if s.alert >= 1), None)
    if first_alert == k + 1 and all(s.alert >= 1 for s in states[k:]):
        after = " or ".join(ALERT_NAMES[a] for a in sorted({s.alert for s in states[k:]}))
        return (f"  alert state: ok for windows 1-{k}, {after} from window {k + 1} on: "
                "exactly where the bias was injected.")
    return (f"  alert state per window: {[ALERT_NAMES.get(s.alert, '?') for s in states]} "
            f"(the bias starts at window {k + 1})")


def excerpt(text: str, model: str, attribute: str) -> list[str]:
    """Scraped lines of ``model``: equal opportunity, alert states, thresholds, window counts.

    Series with a ``sensitive_attribute`` label are kept for ``attribute`` only.

    >>> excerpt('fairmonitor_alert_state{model="m",sensitive_attribute="sex"} 1.0', "m", "sex")
    ['fairmonitor_alert_state{model="m",sensitive_attribute="sex"} 1.0']
    >>> excerpt('fairmonitor_alert_state{model="m",sensitive_attribute="race"} 0', "m", "sex")
    []
    """
    keep = ("fairmonitor_equal_opportunity_difference{", "fairmonitor_alert_state{",
            "fairmonitor_threshold_by_attribute{", "fairmonitor_window_samples{",
            "fairmonitor_windows_evaluated_total{")
    attr = re.compile(r'sensitive_attribute="([^"]*)"')
    out = []
    for line in text.splitlines():
        found = attr.search(line)
        if (line.startswith(keep) and f'model="{model}"' in line
                and (found is None or found.group(1) == attribute)):
            out.append(line)
    return out
