"""The long-running monitor: APScheduler ticks around :func:`~fairmonitor.monitor.job.run_once`.

This is the only module that imports APScheduler. A tick does anything only on the replica that
holds the checkpoint's lease (:mod:`.leadership`: one active monitor per checkpoint; the others
are hot standbys serving ``fairmonitor_leader 0`` and no values, and take over when the leader
dies or hangs). Each tick of the leader:

1. ``job.run_once`` evaluates every due window of every model (catch-up included), with the
   Prometheus collector, the MLflow sink (the lease checked first) and the window log as
   ``on_result`` hooks, and stops between two windows on SIGTERM or when the lease is lost;
2. new model versions are evaluated on their reference data (models with ``reference`` only);
3. the labels-pending gauges are refreshed from the checkpoint;
4. the MLflow queue is flushed (a failed write waits for the next tick).

A ``BackgroundScheduler`` runs the ticks (``coalesce=True, max_instances=1``: a slow tick is
never run twice at once, and missed ticks collapse into one), while the calling thread waits for
SIGTERM/SIGINT, :meth:`MonitorService.stop`, ``max_ticks`` or ``run_for``.

When ticks happen: on the wall clock, the next tick runs when the next window of any model
closes (``job.next_run``: the window end, or end + ``labels_after`` for the labelled phase)
plus ``settle_seconds``, so a window is evaluated as soon as it closes: an hourly window is not
left waiting for a tick counted from start-up. The catch-up tick (at start-up, and when a standby
takes the lease over) runs at once, unless a window closed within its settle: then it waits for
that settle (:meth:`MonitorService.catch_up_at`). ``config.tick`` is only the retry interval (a
source that was down is retried at the next tick, if it comes before the next window end; a
retry is never run inside a window's settle). With an injected
``clock`` or an explicit ``tick_seconds`` (replays, tests) ticks run at that fixed interval.
Prometheus is served by prometheus-client's own HTTP server thread on the configured address
(default ``127.0.0.1:9464``), from a registry owned by the service.

SIGTERM/SIGINT: the tick stops after the window in flight, the MLflow flush gets
:data:`STOP_FLUSH_SECONDS`, the lease is released: exit within 5 s plus that window.

Logs: one INFO line per evaluated window with its verdict, as each window completes; a WARNING when
a value crosses into warning or critical (and an INFO line when it is back to ok); faults are
logged by the job.

Time is injectable (``clock``): :class:`ReplayClock` replays history at tick speed, which is how
the end-to-end tests and a backfill demo run hours of windows in seconds.
"""

from __future__ import annotations

import inspect
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .leadership import LeaseKeeper, NoLease, SQLLease, guard_engine, open_lease
from .sinks.mlflow import MlflowSink
from .sinks.prometheus import FairnessCollector
from .streaks import Streaks

__all__ = ["AFTER_LEADING", "STOP_FLUSH_SECONDS", "MonitorService", "ReplayClock",
           "parse_listen_address"]

log = logging.getLogger(__name__)

#: what a replica that led, then stepped down (the lease lost), still exports: its liveness,
#: frozen at the step-down, never values nor the window counts that drive alerts. The rules take
#: the freshest ``last_success`` over replicas, so a new leader hides it, and an outage of every
#: leader (the checkpoint's database down) still ends in FairmonitorWindowStale, not silence
AFTER_LEADING = frozenset({
    "fairmonitor_window_last_success_timestamp_seconds",
    "fairmonitor_window_end_timestamp_seconds",
    "fairmonitor_window_cadence_seconds", "fairmonitor_labels_after_seconds",
    "fairmonitor_model_info", "fairmonitor_windows_evaluated", "fairmonitor_errors",
    "fairmonitor_clock_jumps", "fairmonitor_integrity_errors", "fairmonitor_repairs"})

#: on SIGTERM/SIGINT, the most time spent flushing MLflow before exiting (plus the request in
#: flight, itself bounded by ``mlflow_timeout``); what is left stays in the spool
STOP_FLUSH_SECONDS = 5.0


class ReplayClock:
    """Simulated UTC time: ``start`` at the first call, ``step`` later at each further call.

    Stops advancing at ``stop`` (if given), so a replay can end on a fixed state.

    >>> from datetime import datetime, timedelta, UTC
    >>> clock = ReplayClock(datetime(2026, 1, 1, tzinfo=UTC), timedelta(hours=1),
    ...                     stop=datetime(2026, 1, 1, 1, tzinfo=UTC))
    >>> [clock().hour for _ in range(3)]
    [0, 1, 1]
    """

    def __init__(self, start: datetime, step: timedelta, *, stop: datetime | None = None):
        self._next, self._step, self._stop = start, step, stop
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        """Return the current simulated time; the next call returns one ``step`` later."""
        with self._lock:
            now = self._next
            if self._stop is None or now + self._step <= self._stop:
                self._next = now + self._step
            else:
                self._next = self._stop
            return now


def parse_listen_address(text: str) -> tuple[str, int]:
    """``"127.0.0.1:9464"`` or ``"[::1]:9464"`` -> (host, port).

    >>> parse_listen_address("[::1]:9000")
    ('::1', 9000)
    """
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"listen address must look like 127.0.0.1:9464; got {text!r}")
    return host.strip("[]"), int(port)


def _bound_mlflow_requests(timeout: timedelta | None) -> None:
    """Bound each MLflow HTTP request to ``timeout``, without retries.

    A hung tracking server then costs one timeout per tick (the sink keeps the values and the
    next tick retries) instead of MLflow's default 120 s times 7 retries. MLflow reads these
    variables on every request.
    """
    if timeout is None:
        return
    import math
    import os

    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(max(1, math.ceil(timeout.total_seconds())))
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"


def _threshold_for(cfg: Any, metric: str, attribute: str) -> Any:
    single = attribute in getattr(cfg, "sensitive_features", (attribute,))
    matching = [t for t in getattr(cfg, "thresholds", ())
                if t.applies_to(metric, attribute, intersection=not single)]
    return max(matching, key=lambda t: t.attribute is not None) if matching else None


class _WindowLog:
    """One INFO line per window, WARNING on threshold crossings (state kept per value)."""

    def __init__(self, models: Mapping[str, Any]):
        self._models = models
        self._last: dict[tuple[str, str, str], str] = {}

    def __call__(self, r: Any) -> None:
        window = f"[{r.start:%Y-%m-%d %H:%M}, {r.end:%H:%M})"
        rollup = getattr(r, "rollup", "")
        head = (f"{r.model} v{r.version or '?'} {window} {r.phase}"
                + (f" ({rollup} rollup)" if rollup else ""))
        if r.report is None:
            # a data error repeats every tick while the window is held: the job logs it once
            # per cause with the fix, this line only says the window waits
            why = "; ".join("data: held until fixed (see the data error logged once)"
                            if k == "data" else f"{k}: {v}" for k, v in r.errors.items()) or (
                "labels overdue" if getattr(r, "labels_overdue", False) else "no traffic")
            log.info("%s rows=%d verdict=none (%s)", head, r.n_rows, why)
            return
        cfg = self._models.get(r.model)
        breaches = []
        for (metric, attr), severity in r.report.statuses.items():
            value = r.report.values[(metric, attr)]
            t = _threshold_for(cfg, metric, attr)
            if severity in ("warning", "critical"):
                limit = getattr(t, severity) if t is not None else float("nan")
                sign = ">" if t is None or t.bound == "upper" else "<"
                breaches.append(f"{metric}[{attr}]={value:.3g}{sign}{limit:g}")
            self._crossing(r, metric, attr, severity, value)
        errors = f" errors={','.join(r.errors)}" if r.errors else ""
        detail = f" ({'; '.join(breaches)})" if breaches else ""
        log.info("%s rows=%d verdict=%s%s%s in %.2fs", head, r.n_rows, r.status, detail, errors,
                 r.duration_seconds)

    def restore(self, model: str, snapshot: Any) -> None:
        """Threshold states as last reported: a restart logs no crossing that is not one."""
        for metric, attrs in (snapshot.get("values") or {}).items():
            for attr, v in attrs.items():
                if v.get("status") in ("ok", "warning", "critical"):
                    self._last[(model, metric, attr)] = v["status"]

    def _crossing(self, r: Any, metric: str, attr: str, severity: str, value: float) -> None:
        rollup = getattr(r, "rollup", "")
        key = (r.model + (f"@{rollup}" if rollup else ""), metric, attr)
        before = self._last.get(key, "ok")
        if severity == "undefined" or severity == before:
            return
        self._last[key] = severity
        if severity in ("warning", "critical"):
            log.warning("threshold crossed: %s %s[%s]=%.4g %s -> %s (%swindow ending %s)",
                        r.model, metric, attr, value, before, severity,
                        f"{rollup} rollup " if rollup else "", r.end.isoformat())
        else:
            log.info("back to ok: %s %s[%s]=%.4g (was %s)%s", r.model, metric, attr, value,
                     before, f" on the {rollup} rollup" if rollup else "")


class MonitorService:
    """The scheduled monitor: HTTP exporter + APScheduler ticks + MLflow sink.

    Parameters
    ----------
    config : MonitorConfig
        The validated configuration (:func:`fairmonitor.monitor.config.load_config`).
    registry : prometheus_client.CollectorRegistry, optional
        Registry to serve; default a fresh one (with the process collector).
    sources, checkpoint : optional
        Default: built from the configuration.
    sink : MlflowSink, optional
        Default: one writing to each model's tracking URI and experiment.
    clock : callable returning an aware datetime, optional
        The job's notion of "now"; default the UTC wall clock.
    tick_seconds : float, optional
        Seconds between ticks; default ``config.tick``.
    listen_address : str, optional
        ``host:port`` to serve ``/metrics`` on; default ``config.listen_address``. Port 0 picks a
        free port (see :attr:`address`).
    on_tick : callable, optional
        ``on_tick(tick_number, results)`` after each tick, in the scheduler thread.
    settle_seconds : float
        Wait after a window end before evaluating it, for rows logged just before the end
        and written just after (window-end scheduling only).
    summaries : SummaryStore, optional
        Where models with ``rollups`` keep their window summaries. Default: beside the
        checkpoint built from the configuration, or in memory with a given ``checkpoint``.
    """

    def __init__(self, config: Any, *, registry: CollectorRegistry | None = None,
                 sources: Mapping[str, Any] | None = None, checkpoint: Any = None,
                 sink: MlflowSink | None = None, clock: Callable[[], datetime] | None = None,
                 tick_seconds: float | None = None, listen_address: str | None = None,
                 on_tick: Callable[[int, Sequence[Any]], None] | None = None,
                 settle_seconds: float = 1.0, summaries: Any = None, lease: Any = None):
        from . import job
        from .checkpoint import open_checkpoint
        from .sources import build_sources
        from .summary_store import MemorySummaryStore, open_summary_store

        self._job = job
        self.config = config
        _bound_mlflow_requests(getattr(config, "mlflow_timeout", None))
        if registry is None:
            registry = CollectorRegistry()
            ProcessCollector(registry=registry)  # RSS and CPU of the monitor itself
        self.registry = registry
        # registered behind the role gate: a standby exports no fairness values of its own
        self.collector = FairnessCollector(None, models=config.models)
        # what the service builds itself, it also closes at shutdown
        self._owned: list[Any] = []
        if sources is None:
            sources = build_sources(config)
            self._owned += list({id(s): s for s in sources.values()}.values())
        rollups = any(m.rollups for m in config.models.values())
        if checkpoint is None:
            checkpoint = open_checkpoint(config.checkpoint)
            self._owned.append(checkpoint)
            if summaries is None and rollups:  # the window summaries go with the checkpoint
                summaries = open_summary_store(config.checkpoint)
                self._owned.append(summaries)
        if summaries is None and rollups:
            summaries = MemorySummaryStore()
        self.sources, self.checkpoint, self.summaries = sources, checkpoint, summaries
        self._init_lease(lease, own=checkpoint in self._owned)
        # with a shared (SQL) checkpoint and no spool file, MLflow itself is the durable store:
        # a window's values are written before its checkpoint moves, so a standby taking over
        # finds nothing missing (a spool on this host would be out of its reach)
        self.sink = sink or MlflowSink(
            config.models, on_error=self.collector.record_error, spool=config.mlflow_spool,
            write_through=isinstance(self.lease, SQLLease) and config.mlflow_spool is None)
        # window-end scheduling needs the wall clock; a replay ticks at a fixed interval
        self._at_window_ends = clock is None and tick_seconds is None
        self._settle = timedelta(seconds=settle_seconds)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._interval = float(tick_seconds or config.tick.total_seconds())
        self._listen = parse_listen_address(listen_address or config.listen_address)
        self._on_tick = on_tick
        self._window_log = _WindowLog(config.models)
        self._stop = threading.Event()
        self._signalled = False
        self._ticks = 0
        self._max_ticks: int | None = None
        self._server: Any = None
        # bound here, before the tick closure that stops it can ever run (nannyml's runner
        # read its scheduler before binding it)
        self._scheduler = BackgroundScheduler(timezone=UTC, job_defaults={
            "coalesce": True, "max_instances": 1,
            "misfire_grace_time": max(1, int(self._interval)),
        })
        registry.register(_RoleGate(self))
        # leader from the start (the gauges restored), or a standby until the lease frees
        self.keeper.step()

    def _init_lease(self, lease: Any, *, own: bool) -> None:
        """Set the checkpoint's lease: built from the config with the checkpoint, else as given."""
        if lease is None:
            lease = open_lease(self.config.checkpoint) if own else NoLease()
        self.lease = lease
        for store in (self.checkpoint, self.summaries):
            if store is not None and hasattr(store, "fence"):
                store.fence = lease.fence  # every write checks the lease (fencing token)
            if own and getattr(store, "engine", None) is not None:
                guard_engine(store.engine, lease.seconds / 2)  # a paused leader's locks end
        self.leader_changes = 0
        self.has_led = False  # led at some point: its frozen liveness stays exported
        self.keeper = LeaseKeeper(lease, self._role_changed)

    @property
    def is_leader(self) -> bool:
        """True while this monitor holds the checkpoint's lease and evaluates."""
        return self.keeper.is_leader

    def _role_changed(self, leader: bool) -> None:
        """From the lease thread (or a refused write): restore the gauges, or stop evaluating."""
        self.leader_changes += 1
        self.has_led = self.has_led or leader
        if not leader or not hasattr(self, "_scheduler"):
            return  # an in-flight tick stops at its next window (keep_going)
        self._restore()  # the values the previous leader last reported
        reload = getattr(getattr(self, "sink", None), "reload_spool", None)
        if reload is not None:  # a spool beside a shared checkpoint is the former leader's
            reload()
        if self._scheduler.running:  # catch up now, not at the next scheduled tick
            try:
                if self._at_window_ends:
                    self._schedule(self.catch_up_at(datetime.now(UTC)))
                else:
                    self._scheduler.modify_job("tick", next_run_time=datetime.now(UTC))
            except Exception as exc:  # the scheduler is shutting down
                log.debug("cannot schedule a tick at once: %s", exc)

    def _keep_going(self) -> bool:
        """Asked between windows: False on SIGTERM/SIGINT or when the lease is lost."""
        return not self._stop.is_set() and self.keeper.is_leader

    def _submit_mlflow(self, result: Any) -> None:
        """Submit to MLflow, the lease checked first: a former leader logs nothing."""
        self.lease.fence()
        self.sink.submit(result)

    def _restore(self) -> None:
        """Export again what the previous process last reported (the checkpoint's snapshot)."""
        for name in self.config.models:
            try:
                state = self.checkpoint.load(name)
                last = state.last
            except Exception as exc:  # the job reports the store at its first tick too
                log.error("%s: cannot restore the last reported values from the checkpoint "
                          "(%s); they come back with the next window", name, exc)
                self.collector.record_error(name, "checkpoint")
                continue
            if last:
                self.collector.restore(name, last)
                self._window_log.restore(name, last)
            if state.streaks:  # a restart mid-breach neither resolves nor restarts the count
                self.collector.restore_streaks(name, Streaks.from_json(state.streaks))

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) actually served; the port is known once :meth:`start` returned."""
        if self._server is None:
            return self._listen
        return self._listen[0], int(self._server.server_port)

    @property
    def ticks(self) -> int:
        """Ticks completed so far."""
        return self._ticks

    # ------------------------------------------------------------------ one tick
    def tick(self) -> list[Any]:
        """Run one tick now (also what the scheduler calls); never raises."""
        if self._stop.is_set():
            return []  # stopping: a tick that starts now has nothing to do
        now = self._clock()
        results: list[Any] = []
        if self._keeper_idle():
            self.keeper.step()  # no lease thread (a tick called directly): renew or seek here
        if self.keeper.is_leader:
            results = self._lead(now)
        self._ticks += 1
        if self._max_ticks is not None and self._ticks >= self._max_ticks:
            self._stop.set()  # run() still waits for this tick (and on_tick) to finish
        if self._on_tick is not None:
            self._on_tick(self._ticks, results)
        return results

    def _keeper_idle(self) -> bool:
        return self.keeper._thread is None or not self.keeper._thread.is_alive()

    def _lead(self, now: datetime) -> list[Any]:
        """Run the leader's tick: due windows (each logged as it completes), versions, MLflow."""
        results: list[Any] = []
        try:
            results = self._job.run_once(
                self.config, self.sources, self.checkpoint, now=now,
                on_result={"export": self.collector.observe, "mlflow": self._submit_mlflow,
                           "log": self._window_log},
                summaries=self.summaries, keep_going=self._keep_going)
        except Exception:  # the job should not raise; if it does, the service survives
            log.exception("tick at %s failed", now.isoformat())
            for model in self.config.models:
                self.collector.record_error(model, "scheduler")
        for r in results:
            for stage, why in r.errors.items():
                # hook failures, which the hook could not count; a refused write is counted
                # by the lease (fairmonitor_lease_fenced_writes_total)
                if stage in ("export", "mlflow") and not why.startswith("LeaseLost"):
                    self.collector.record_error(r.model, stage)
        if not self._keep_going():  # stopping, or no longer the leader: nothing more to do
            return results
        self._evaluate_versions()
        self._refresh_labels_pending(now)
        self.sink.flush()
        self._report_mlflow_queue()
        return results

    def _report_mlflow_queue(self) -> None:
        self.collector.set_mlflow_queue(spool_bytes=getattr(self.sink, "spool_bytes", 0),
                                        pending=getattr(self.sink, "pending", 0),
                                        dropped=getattr(self.sink, "dropped", 0))

    def _evaluate_versions(self) -> None:
        with_reference = [m for m, cfg in self.config.models.items() if cfg.reference is not None]
        if not with_reference:
            return

        def on_report(new: Any, report: Any) -> None:
            self.collector.observe_reference(new.model, new.version, report)
            self.sink.submit_reference(new.model, new.version, report)
            log.info("%s v%s reference evaluation: verdict=%s", new.model, new.version,
                     report.status)

        try:
            results = self._job.evaluate_new_versions(self.config, self.checkpoint,
                                                      on_report=on_report)
        except Exception:  # it should not raise; if it does, the service survives
            log.exception("evaluating new model versions failed")
            for model in with_reference:
                self.collector.record_error(model, "scheduler")
            return
        for r in results:  # registry down, model not loadable, a failing hook
            for stage in r.errors:
                self.collector.record_error(r.model, stage)

    def _refresh_labels_pending(self, now: datetime) -> None:
        try:
            pending = self._job.labels_pending_count(self.config, self.checkpoint, now=now)
        except Exception as exc:  # the checkpoint store is down; the job reports it too
            log.warning("counting labels-pending windows failed: %s", exc)
            return
        for name, n in pending.items():
            self.collector.set_labels_pending(name, n)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Serve ``/metrics`` and start the ticks (the first one runs immediately)."""
        host, port = self._listen
        self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        log.info("serving Prometheus metrics on http://%s:%d/metrics", *self.address)
        if self._at_window_ends:
            self._scheduler.start()
            self._schedule(self.catch_up_at(datetime.now(UTC)))  # the first tick catches up
            log.info("monitoring %d model(s): %s; each window evaluated when it closes "
                     "(retry every %s)", len(self.config.models), ", ".join(self.config.models),
                     timedelta(seconds=self._interval))
            return
        self._scheduler.add_job(self.tick, "interval", seconds=self._interval, id="tick",
                                name="fairmonitor tick", next_run_time=datetime.now(UTC))
        self._scheduler.start()
        log.info("monitoring %d model(s): %s; tick every %s", len(self.config.models),
                 ", ".join(self.config.models), timedelta(seconds=self._interval))

    def next_tick(self, now: datetime) -> datetime:
        """When the tick after one ending at ``now`` runs (window-end scheduling).

        The next window end of any model plus ``settle_seconds``, or the retry interval
        (``config.tick``) if it comes before that window end. A retry that would land after the
        end but within its settle waits for the settle: run there, it would evaluate the window
        before the rows written just after its end arrived, and each later retry would keep
        that phase.
        """
        retry = now + timedelta(seconds=self._interval)
        due = self._job.next_run(self.config, now)
        return retry if due is None or retry < due else due + self._settle

    def catch_up_at(self, now: datetime) -> datetime:
        """When a catch-up tick runs: at start-up, or on taking the lease over (window ends).

        At once, unless a window became due within the last ``settle_seconds``: then at its
        settle, as its scheduled tick would have run. At once it would evaluate that window
        before the rows written just after its end arrived, and move the checkpoint past it.
        """
        due = self._job.next_run(self.config, now - self._settle)
        return due + self._settle if due is not None and due <= now else now

    def _schedule(self, run_at: datetime) -> None:
        if self._stop.is_set() or not self._scheduler.running:
            return
        # a date job runs however late it is (misfire_grace_time None): skipping it would
        # stop the chain of ticks for good
        self._scheduler.add_job(self._tick_and_reschedule, "date", run_date=run_at, id="tick",
                                name="fairmonitor tick", replace_existing=True,
                                misfire_grace_time=None)

    def _tick_and_reschedule(self) -> None:
        try:
            self.tick()
        finally:
            self._schedule(self.next_tick(datetime.now(UTC)))

    def stop(self) -> None:
        """Ask :meth:`run` to return (thread- and signal-safe)."""
        self._stop.set()

    def shutdown(self) -> None:
        """Stop the ticks (waiting for a running one), flush MLflow, stop the HTTP server.

        After SIGTERM/SIGINT the tick in flight stops after its current window, and the
        MLflow flush gets :data:`STOP_FLUSH_SECONDS` (what is left stays in the spool); the
        lease is released last, so a standby takes over at its next attempt.
        """
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)
        flush = self.sink.flush
        bounded = self._signalled and "budget" in inspect.signature(flush).parameters
        # a standby never flushes: a spool it shares with the leader is the leader's
        flushed = not self.keeper.is_leader or (
            flush(budget=STOP_FLUSH_SECONDS) if bounded else flush())
        if not flushed:
            log.warning("%d MLflow values could not be written before shutdown%s",
                        self.sink.pending, " (kept in the spool)"
                        if getattr(self.config, "mlflow_spool", None) else "")
        self.keeper.stop(release=True)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        while self._owned:
            close = getattr(self._owned.pop(), "close", None)
            if close is not None:
                close()

    def run_once(self) -> list[Any]:
        """One tick without the HTTP server or the scheduler, then flush and close (``--once``)."""
        try:
            return self.tick()
        finally:
            self.shutdown()

    def run(self, *, max_ticks: int | None = None, run_for: float | None = None) -> int:
        """Start, block until a signal, :meth:`stop`, ``max_ticks`` or ``run_for`` seconds; 0."""
        self._max_ticks = max_ticks
        previous = self._install_signal_handlers()
        deadline = None if run_for is None else time.monotonic() + run_for
        try:
            self.start()
            self.keeper.start()
            if not isinstance(self.lease, NoLease):  # a standby takes over without the import
                threading.Thread(target=_import_mlflow, name="fairmonitor-warmup",
                                 daemon=True).start()
            # wake up regularly: a deadline must be honoured even without any event
            while not self._stop.wait(0.2):
                if deadline is not None and time.monotonic() >= deadline:
                    break
        finally:
            self.shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        log.info("monitor stopped after %d tick(s)", self._ticks)
        return 0

    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}  # only the main thread may install handlers (tests run us in a thread)

        def handle(signum: int, _frame: Any) -> None:
            log.info("received %s, stopping after the window in flight",
                     signal.Signals(signum).name)
            self._signalled = True
            self.stop()

        return {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}


def _import_mlflow() -> None:
    """Import MLflow's client ahead of the first write (2-5 s).

    A standby that takes over then writes its first window at once, not after the import.
    """
    try:
        import mlflow.entities  # noqa: F401
        import mlflow.tracking  # noqa: F401
    except Exception as exc:  # the first write says it again, with the context
        log.debug("cannot import mlflow ahead of time: %s", exc)


class _RoleGate:
    """The service's role families, and the fairness collector's only while it leads.

    A standby exports ``fairmonitor_leader 0``, the lease's counters and
    ``fairmonitor_build_info``, never values of its own: the alert rules aggregate over
    replicas, and a standby's stale copy of the leader's values would only add noise.
    """

    def __init__(self, service: MonitorService) -> None:
        self._service = service

    def collect(self) -> Any:
        """One scrape: ``fairmonitor_leader`` and the lease's counters, then the values."""
        svc = self._service
        leader = svc.is_leader
        yield _single(GaugeMetricFamily, "fairmonitor_leader",
                      "1 while this monitor holds the checkpoint's lease and evaluates, 0 for a "
                      "hot standby (which exports no fairness values)", float(leader))
        yield _single(GaugeMetricFamily, "fairmonitor_lease_token",
                      "The fencing token of the lease this monitor holds (0: none)",
                      float(svc.lease.token or 0) if leader else 0.0)
        yield _single(GaugeMetricFamily, "fairmonitor_lease_seconds",
                      "How long the lease lasts without renewal", float(svc.lease.seconds))
        yield _single(CounterMetricFamily, "fairmonitor_lease_fenced_writes",
                      "Writes refused because this monitor no longer held the lease",
                      float(getattr(svc.lease, "refused", 0)))
        yield _single(CounterMetricFamily, "fairmonitor_leader_changes",
                      "Times this monitor became leader or stepped down",
                      float(svc.leader_changes))
        for family in svc.collector.collect():
            # a standby keeps build_info (FairmonitorAbsent reads it: the replica is there), and
            # one that led its frozen liveness (module constant)
            if leader or family.name == "fairmonitor_build_info" or (
                    svc.has_led and family.name in AFTER_LEADING):
                yield family


def _single(kind: Any, name: str, doc: str, value: float) -> Any:
    family = kind(name, doc)
    family.add_metric([], value)
    return family
