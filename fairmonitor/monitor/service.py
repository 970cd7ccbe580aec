"""The long-running monitor: APScheduler ticks around :func:`~fairmonitor.monitor.job.run_once`.

This is the only module that imports APScheduler. Each tick:

1. ``job.run_once`` evaluates every due window of every model (catch-up included), with the
   Prometheus collector and the MLflow sink as ``on_result`` hooks;
2. new model versions are evaluated on their reference data (models with ``reference`` only);
3. the labels-pending gauges are refreshed from the checkpoint;
4. the MLflow queue is flushed (a failed write waits for the next tick).

A ``BackgroundScheduler`` runs the ticks (``coalesce=True, max_instances=1``: a slow tick is
never run twice at once, and missed ticks collapse into one), while the calling thread waits for
SIGTERM/SIGINT, :meth:`MonitorService.stop`, ``max_ticks`` or ``run_for``. Prometheus is served
by prometheus-client's own HTTP server thread on the configured address (default
``127.0.0.1:9464``), from a registry owned by the service.

Logs: one INFO line per evaluated window with its verdict; a WARNING when a value crosses into
warning or critical (and an INFO line when it is back to ok); faults are logged by the job.

Time is injectable (``clock``): :class:`ReplayClock` replays history at tick speed, which is how
the end-to-end tests and a backfill demo run hours of windows in seconds.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

from .sinks.mlflow import MlflowSink
from .sinks.prometheus import FairnessCollector

__all__ = ["MonitorService", "ReplayClock", "parse_listen_address"]

log = logging.getLogger(__name__)


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
        """The current simulated time; the next call returns one ``step`` later."""
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
        head = f"{r.model} v{r.version or '?'} {window} {r.phase}"
        if r.report is None:
            why = "; ".join(f"{k}: {v}" for k, v in r.errors.items()) or "no report"
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

    def _crossing(self, r: Any, metric: str, attr: str, severity: str, value: float) -> None:
        key = (r.model, metric, attr)
        before = self._last.get(key, "ok")
        if severity == "undefined" or severity == before:
            return
        self._last[key] = severity
        if severity in ("warning", "critical"):
            log.warning("threshold crossed: %s %s[%s]=%.4g %s -> %s (window ending %s)",
                        r.model, metric, attr, value, before, severity, r.end.isoformat())
        else:
            log.info("back to ok: %s %s[%s]=%.4g (was %s)", r.model, metric, attr, value, before)


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
    """

    def __init__(self, config: Any, *, registry: CollectorRegistry | None = None,
                 sources: Mapping[str, Any] | None = None, checkpoint: Any = None,
                 sink: MlflowSink | None = None, clock: Callable[[], datetime] | None = None,
                 tick_seconds: float | None = None, listen_address: str | None = None,
                 on_tick: Callable[[int, Sequence[Any]], None] | None = None):
        from . import job
        from .checkpoint import open_checkpoint
        from .sources import build_sources

        self._job = job
        self.config = config
        if registry is None:
            registry = CollectorRegistry()
            ProcessCollector(registry=registry)  # RSS and CPU of the monitor itself
        self.registry = registry
        self.collector = FairnessCollector(registry, models=config.models)
        self.sink = sink or MlflowSink(config.models, on_error=self.collector.record_error,
                                       spool=config.mlflow_spool)
        # what the service builds itself, it also closes at shutdown
        self._owned: list[Any] = []
        if sources is None:
            sources = build_sources(config)
            self._owned += list({id(s): s for s in sources.values()}.values())
        if checkpoint is None:
            checkpoint = open_checkpoint(config.checkpoint)
            self._owned.append(checkpoint)
        self.sources, self.checkpoint = sources, checkpoint
        self._clock = clock or (lambda: datetime.now(UTC))
        self._interval = float(tick_seconds or config.tick.total_seconds())
        self._listen = parse_listen_address(listen_address or config.listen_address)
        self._on_tick = on_tick
        self._window_log = _WindowLog(config.models)
        self._stop = threading.Event()
        self._ticks = 0
        self._max_ticks: int | None = None
        self._server: Any = None
        # bound here, before the tick closure that stops it can ever run (nannyml's runner
        # read its scheduler before binding it)
        self._scheduler = BackgroundScheduler(timezone=UTC, job_defaults={
            "coalesce": True, "max_instances": 1,
            "misfire_grace_time": max(1, int(self._interval)),
        })

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
        now = self._clock()
        results: list[Any] = []
        try:
            results = self._job.run_once(
                self.config, self.sources, self.checkpoint, now=now,
                on_result={"export": self.collector.observe, "mlflow": self.sink.submit})
        except Exception:  # the job should not raise; if it does, the service survives
            log.exception("tick at %s failed", now.isoformat())
            for model in self.config.models:
                self.collector.record_error(model, "scheduler")
        for r in results:
            for stage in r.errors:
                if stage in ("export", "mlflow"):  # hook failures; the hook could not count them
                    self.collector.record_error(r.model, stage)
            self._window_log(r)
        self._evaluate_versions()
        self._refresh_labels_pending(now)
        self.sink.flush()
        self._ticks += 1
        if self._max_ticks is not None and self._ticks >= self._max_ticks:
            self._stop.set()  # run() still waits for this tick (and on_tick) to finish
        if self._on_tick is not None:
            self._on_tick(self._ticks, results)
        return results

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
        self._scheduler.add_job(self.tick, "interval", seconds=self._interval, id="tick",
                                name="fairmonitor tick", next_run_time=datetime.now(UTC))
        self._scheduler.start()
        log.info("monitoring %d model(s): %s; tick every %s", len(self.config.models),
                 ", ".join(self.config.models), timedelta(seconds=self._interval))

    def stop(self) -> None:
        """Ask :meth:`run` to return (thread- and signal-safe)."""
        self._stop.set()

    def shutdown(self) -> None:
        """Stop the ticks (waiting for a running one), flush MLflow, stop the HTTP server."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)
        if not self.sink.flush():
            log.warning("%d MLflow values could not be written before shutdown",
                        self.sink.pending)
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
            log.info("received %s, shutting down", signal.Signals(signum).name)
            self.stop()

        return {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
