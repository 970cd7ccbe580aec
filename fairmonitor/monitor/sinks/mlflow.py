"""MLflow output of the monitor: window metrics into one monitoring run per model version.

Each model version gets one run in the model's monitoring experiment, found again after a
restart by its tags (``fairmonitor.monitoring=true``, ``fairmonitor.model``,
``fairmonitor.version``). It receives each window's values under the keys of the MLflow evaluator
plugin (``WindowReport.flat()``: ``fairness/<metric>/<attribute>``, and each value's interval and
chance level, ``fairness/ci_lower|ci_upper|chance/<metric>/<attribute>``) with ``step`` = the
window index and ``timestamp`` = the window end, so the run's metric charts are the production
history of that version. The evaluation of a version on its reference data goes to a separate
run tagged ``fairmonitor.evaluation=reference``, with the same keys at step 0, so it does not
interleave with the window history.

Choices:

- Nothing is written synchronously in the job: :meth:`MlflowSink.submit` only queues, and
  :meth:`MlflowSink.flush` (once per tick) writes. A write that fails (server unreachable,
  database locked) stays queued, in order, and is retried at the next flush; values already
  written are not sent twice. The queue is bounded (``max_pending`` values); when it overflows
  the oldest windows are dropped and counted (:attr:`MlflowSink.dropped`), with a warning.
- With a ``spool`` file the queue also survives a restart or a crash: an append-only journal
  (:mod:`.spool`; one fsynced line per window, compacted when mostly written, private to the
  user, tracking URIs masked) read back when the sink starts and removed once everything is
  written. :meth:`MlflowSink.submit` returns only once the values are durable (in the spool,
  or written to MLflow when the spool cannot be written), else it raises
  :class:`SpoolWriteError`, and the job then keeps its checkpoint before that window. A window
  submitted again (a crash between ``submit`` and the checkpoint) replaces its queued values;
  a crash between a write and its journal line sends those values again, and MLflow's stores
  ignore a metric identical to one already logged (same key, value, step and timestamp), so
  nothing is doubled. An unreadable spool is moved aside (``<name>.corrupt``) with an error,
  never silently emptied. Spool write failures are counted (``on_error(model, "spool")``).
- NaN values are not logged (MLflow would store them, but a chart point of NaN says nothing the
  missing point does not); the report's reasons go to logs and Prometheus.
- ``mlflow`` is imported on first write (2-5 s), never at import time.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..redact import mask_url, mask_urls_in
from .spool import Spool, SpoolCorruptError

__all__ = ["MONITORING_TAG", "MlflowSink", "SpoolWriteError"]

log = logging.getLogger(__name__)

MONITORING_TAG = "fairmonitor.monitoring"
_MODEL_TAG = "fairmonitor.model"
_VERSION_TAG = "fairmonitor.version"
_KIND_TAG = "fairmonitor.evaluation"  # "window" (production history) or "reference"
_BATCH = 1000  # MLflow's MAX_METRICS_PER_BATCH


@dataclass(slots=True, eq=False)  # identity equality: the queue removes this very item
class _Pending:
    """Values of one window (or reference evaluation) not yet written."""

    tracking_uri: str | None
    experiment: str
    model: str
    version: str
    kind: str  # "window" | "reference"
    points: list[tuple[str, float, int, int]]  # key, value, timestamp (ms), step
    sid: int = -1  # id of its spool record
    rollup: str = ""  # a rollup's name: its steps are on the rollup's own grid

    @property
    def key(self) -> tuple[Any, ...]:
        """What a re-evaluation of the same window shares with it."""
        step = self.points[0][3] if self.points else None
        return (self.tracking_uri, self.experiment, self.model, self.version, self.kind,
                self.rollup, step)

    def record(self) -> dict[str, Any]:
        """Return the spool record (credentials masked)."""
        out = {"id": self.sid, "tracking_uri": mask_url(self.tracking_uri),
               "experiment": self.experiment, "model": self.model, "version": self.version,
               "kind": self.kind, "points": [list(p) for p in self.points]}
        if self.rollup:
            out["rollup"] = self.rollup
        return out


class SpoolWriteError(OSError):
    """Values could be neither spooled nor written: they are not durable."""


def _from_record(d: Mapping[str, Any], uri: str | None) -> _Pending:
    """Return a spool record as a queue item; ValueError/KeyError/TypeError if it is not one."""
    points = [(str(k), float(v), int(ts), int(step)) for k, v, ts, step in d["points"]]
    return _Pending(uri, str(d["experiment"]), str(d["model"]), str(d["version"]),
                    str(d["kind"]), points, int(d["id"]), str(d.get("rollup", "")))


def _keys(report: Any, prefix: str = "fairness") -> dict[str, float]:
    """Return the values' keys and their intervals' (``fairness/ci_lower/...``), as evaluated."""
    return {**report.flat(prefix), **report.flat_intervals(prefix)}


def _points(values: Mapping[str, float], timestamp_ms: int,
            step: int) -> list[tuple[str, float, int, int]]:
    return [(k, float(v), timestamp_ms, step) for k, v in values.items() if not math.isnan(v)]


class MlflowSink:
    """Queue window metrics and write them to MLflow, retrying failed writes on the next flush.

    Parameters
    ----------
    models : mapping of str to model config, optional
        ``MonitorConfig.models``: gives each model's ``tracking_uri`` and ``experiment``.
    tracking_uri : str, optional
        Used for models without a configuration (default: MLflow's own default).
    experiment : str, default='fairmonitor-monitoring'
        Experiment for models without a configuration.
    max_pending : int, default=100_000
        Most values held while MLflow is unreachable; beyond it the oldest windows are dropped.
    on_error : callable, optional
        ``on_error(model, "mlflow")`` for each failed write (the collector's ``record_error``).
    spool : path-like, optional
        File that keeps the queue across restarts and crashes (JSON lines); without it the
        queue lives in memory only.
    write_through : bool, default=False
        Without a spool: write each window to MLflow in :meth:`submit` (raising
        :class:`SpoolWriteError` when that fails), so values are durable before the checkpoint
        moves. The monitor sets it for a shared (SQL) checkpoint, whose standby replica could
        not reach this process's memory after a failover.

    Examples
    --------
    >>> sink = MlflowSink(tracking_uri="sqlite:///unused.db")
    >>> sink.pending, sink.dropped
    (0, 0)
    """

    def __init__(self, models: Mapping[str, Any] | None = None, *, tracking_uri: str | None = None,
                 experiment: str = "fairmonitor-monitoring", max_pending: int = 100_000,
                 on_error: Callable[[str, str], None] | None = None,
                 spool: str | os.PathLike[str] | None = None, write_through: bool = False):
        self._models = dict(models or {})
        self._default = (tracking_uri, experiment)
        self._max_pending = int(max_pending)
        self._on_error = on_error
        self._queue: deque[_Pending] = deque()
        self._size = 0
        self._dropped = 0
        self._lock = threading.Lock()
        self._clients: dict[str | None, Any] = {}
        self._runs: dict[tuple[str | None, str, str, str, str], str] = {}
        self._spool = Spool(spool) if spool is not None else None
        self._write_through = bool(write_through) and self._spool is None
        self._next_id = 0
        self._spool_failures = 0
        if self._spool is not None:
            self._restore()

    @property
    def pending(self) -> int:
        """Values queued and not yet written."""
        return self._size

    @property
    def spool_bytes(self) -> int:
        """Size of the spool file (0 without a spool or when nothing is pending)."""
        return 0 if self._spool is None else self._spool.size_bytes

    @property
    def spool_failures(self) -> int:
        """Spool writes that failed (full disk, unwritable directory) since the start."""
        return self._spool_failures

    @property
    def dropped(self) -> int:
        """Values dropped because the queue overflowed."""
        return self._dropped

    def _target(self, model: str) -> tuple[str | None, str]:
        cfg = self._models.get(model)
        if cfg is None:
            return self._default
        return cfg.tracking_uri, cfg.experiment

    # ------------------------------------------------------------------ spool
    def _restore(self) -> None:
        """Queue the values a previous process left in the spool."""
        assert self._spool is not None
        path = self._spool.path
        try:
            records = self._spool.load()
            items = [_from_record(r, self._unmask(r.get("tracking_uri"), str(r["model"])))
                     for r in records]
        except FileNotFoundError:
            return
        except (SpoolCorruptError, ValueError, KeyError, TypeError) as exc:
            aside = path.with_name(path.name + ".corrupt")
            os.replace(path, aside)
            log.error("MLflow spool %s is unreadable (%s); moved to %s, starting with an "
                      "empty queue", path, _short(exc), aside)
            return
        except OSError as exc:  # e.g. a file where its directory should be: say so, go on
            log.error("cannot read the MLflow spool %s (%s); starting with an empty queue",
                      path, _short(exc))
            return
        for item in items:
            self._next_id = max(self._next_id, item.sid + 1)
            self._enqueue(item)
        log.info("MLflow spool %s: %d values from a previous run queued", path, self._size)

    def reload_spool(self) -> None:
        """Forget the queue and read the spool again.

        For a standby that becomes the leader: the spool (shared with the other replica, beside
        a file checkpoint) is what the former leader left, not what this process read at start.
        """
        if self._spool is None:
            return
        with self._lock:
            self._queue.clear()
            self._size = 0
        self._restore()

    def _unmask(self, stored: str | None, model: str) -> str | None:
        """Return the real tracking URI behind a masked one: the configured URI it masks."""
        for uri in (self._target(model)[0], self._default[0]):
            if mask_url(uri) == stored:
                return uri
        return stored

    def _journal(self, model: str, write: Callable[[Spool], None]) -> bool:
        """Append to the spool; on failure count it, log it and return False."""
        if self._spool is None:
            return True
        try:
            write(self._spool)
            return True
        except OSError as exc:
            self._spool_failures += 1
            log.warning("cannot write the MLflow spool %s (%s): free space or fix its "
                        "permissions (%d spool failures so far)", self._spool.path,
                        _short(exc), self._spool_failures)
            if self._on_error is not None:
                self._on_error(model, "spool")
            return False

    def _compact(self) -> None:
        if self._spool is None:
            return
        with self._lock:
            live = [item.record() for item in self._queue if item.points]
        if live and not self._spool.needs_compaction(self._size):
            return
        try:
            self._spool.rewrite(live)
        except OSError as exc:  # the journal stays valid: only its size is not reduced
            log.warning("cannot compact the MLflow spool %s (%s)", self._spool.path,
                        _short(exc))

    # ------------------------------------------------------------------ queueing
    def _enqueue(self, item: _Pending) -> tuple[_Pending | None, list[_Pending]]:
        """Queue ``item``; return the item it replaced (same window) and those dropped."""
        if not item.points:
            return None, []
        with self._lock:
            replaced = next((q for q in self._queue if q.kind == "window" and q.points
                             and q.key == item.key), None)
            if replaced is not None:
                self._queue.remove(replaced)
                self._size -= len(replaced.points)
            self._queue.append(item)
            self._size += len(item.points)
            lost: list[_Pending] = []
            while self._size > self._max_pending and len(self._queue) > 1:
                old = self._queue.popleft()
                self._size -= len(old.points)
                lost.append(old)
            self._dropped += sum(len(o.points) for o in lost)
        if lost:
            log.warning("MLflow queue full (max_pending=%d): dropped the %d oldest values "
                        "(%d dropped in all); is the tracking server reachable?",
                        self._max_pending, sum(len(o.points) for o in lost), self._dropped)
        return replaced, lost

    def _submit(self, item: _Pending) -> None:
        """Queue ``item`` and make it durable (module docstring); SpoolWriteError if not."""
        if not item.points:
            return
        item.sid, self._next_id = self._next_id, self._next_id + 1
        replaced, lost = self._enqueue(item)
        gone = [g for g in (replaced, *lost) if g is not None]
        if not self._write_through and self._journal(
                item.model, lambda sp: (sp.add(item.record()), *(sp.done(g.sid) for g in gone))):
            return
        try:  # the spool cannot keep them: only MLflow itself can
            self._write(item)
        except Exception as exc:
            if self._write_through:  # the job redoes the window: nothing stays queued
                with self._lock, contextlib.suppress(ValueError):
                    self._queue.remove(item)
                    self._size -= len(item.points)
            raise SpoolWriteError(
                f"the values of {item.model} step {item.key[-1]} could be neither spooled "
                f"({self._spool.path if self._spool else '-'}) nor written to MLflow "
                f"({_short(exc)})") from None
        with self._lock, contextlib.suppress(ValueError):
            self._queue.remove(item)

    def submit(self, result: Any) -> None:
        """Queue one ``WindowResult``'s values (use as the job's ``on_result`` hook)."""
        if result.report is None:
            return
        uri, experiment = self._target(result.model)
        ms = int(result.end.timestamp() * 1000)
        rollup = getattr(result, "rollup", "")
        # a rollup's values: fairness_1d/<metric>/<attribute>, step = its index on its grid
        prefix = f"fairness_{rollup}" if rollup else "fairness"
        self._submit(_Pending(uri, experiment, result.model, result.version, "window",
                              _points(_keys(result.report, prefix), ms, int(result.index)),
                              rollup=rollup))

    def submit_reference(self, model: str, version: str, report: Any, *,
                         when: datetime | None = None) -> None:
        """Queue the evaluation of ``model`` at ``version`` on its reference data (step 0)."""
        uri, experiment = self._target(model)
        ms = int((when or datetime.now().astimezone()).timestamp() * 1000)
        self._submit(_Pending(uri, experiment, model, str(version), "reference",
                              _points(_keys(report), ms, 0)))

    # ------------------------------------------------------------------ writing
    def _client(self, uri: str | None) -> Any:
        if uri not in self._clients:
            from mlflow.tracking import MlflowClient

            self._clients[uri] = MlflowClient(tracking_uri=uri)
        return self._clients[uri]

    def _run_id(self, client: Any, item: _Pending) -> str:
        key = (item.tracking_uri, item.experiment, item.model, item.version, item.kind)
        if key in self._runs:
            return self._runs[key]
        exp = client.get_experiment_by_name(item.experiment)
        exp_id = (exp.experiment_id if exp is not None
                  else client.create_experiment(item.experiment))
        tags = {MONITORING_TAG: "true", _MODEL_TAG: item.model, _VERSION_TAG: item.version,
                _KIND_TAG: item.kind}
        run_id = self._find_run(client, exp_id, tags)
        if run_id is None:
            name = f"{item.model} v{item.version or '?'} {item.kind}"
            run_id = client.create_run(exp_id, tags=tags, run_name=name).info.run_id
        self._runs[key] = run_id
        return run_id

    @staticmethod
    def _find_run(client: Any, exp_id: str, tags: Mapping[str, str]) -> str | None:
        # filter on the fixed tag server-side; compare the user-given ones here, so names with
        # quotes need no escaping in the filter grammar
        token = None
        while True:
            page = client.search_runs([exp_id], filter_string=f"tags.`{MONITORING_TAG}` = 'true'",
                                      order_by=["attributes.start_time ASC"], page_token=token)
            for run in page:
                if all(run.data.tags.get(k) == v for k, v in tags.items()):
                    return str(run.info.run_id)
            token = page.token
            if not token:
                return None

    def _write(self, item: _Pending) -> None:
        from mlflow.entities import Metric

        client = self._client(item.tracking_uri)
        run_id = self._run_id(client, item)
        while item.points:
            chunk = item.points[:_BATCH]
            client.log_batch(run_id, metrics=[Metric(k, v, ts, step) for k, v, ts, step in chunk])
            del item.points[:_BATCH]  # written: never re-sent by a retry
            with self._lock:
                self._size -= len(chunk)

    def flush(self, budget: float | None = None) -> bool:
        """Write everything queued; return True if the queue is empty afterwards.

        Windows are written oldest first. After a failure the remaining windows of the same
        tracking server are kept for the next flush (order preserved); other servers go on.
        With ``budget`` (seconds), no new window is started once it has passed (a monitor
        stopping on SIGTERM): the rest stays queued, and in the spool.
        """
        import time

        deadline = None if budget is None else time.monotonic() + budget
        with self._lock:
            items = list(self._queue)
        failed: set[str | None] = set()
        for item in items:
            if deadline is not None and time.monotonic() > deadline:
                break
            if item.tracking_uri in failed:
                continue
            before = len(item.points)
            try:
                self._write(item)
            except Exception as exc:  # any failure: keep it queued, the next tick retries
                failed.add(item.tracking_uri)
                if len(item.points) < before:  # part of the window was written
                    self._journal(item.model, lambda sp, i=item: sp.done(i.sid,
                                                                         left=len(i.points)))
                # rebuild client and run lookup next time (the run may have been deleted)
                self._clients.pop(item.tracking_uri, None)
                self._runs = {k: v for k, v in self._runs.items() if k[0] != item.tracking_uri}
                log.warning("MLflow write for model %s version %s failed, %d values kept for "
                            "the next tick: %s", item.model, item.version or "?", self._size,
                            _short(exc))
                if self._on_error is not None:
                    self._on_error(item.model, "mlflow")
                continue
            with self._lock, contextlib.suppress(ValueError):  # ValueError: dropped meanwhile
                self._queue.remove(item)
            self._journal(item.model, lambda sp, i=item: sp.done(i.sid))
        self._compact()
        return not self._queue


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return mask_urls_in(f"{type(exc).__name__}: {text[0] if text else ''}"[:300])
