"""Clock sanity: a wall clock that jumps never loses a window nor marks one done unevaluated.

The watermarks of :mod:`.checkpoint` are wall-clock times. Two failures follow from a wrong
clock, and each has its rule here:

- **Backward** (``now`` earlier than a watermark: the clock was ahead and has been put back, or
  stepped back): windows ending after ``now`` were evaluated before they had closed, on the
  rows seen so far (none, for a clock days ahead). :func:`rewind` moves each watermark back to
  the latest window closed at ``now`` (never before the model's ``start``), so those windows
  are evaluated again when they really close, with their rows. The watermark is then never
  ahead of ``now``.
- **Forward** (``now`` moved ahead of the time really elapsed since this process's previous
  tick, by more than ``catch_up`` windows): the windows between the watermark and ``now`` may
  lie in the real future. The catch-up cap used to *skip* the older ones (marked done, never
  evaluated); a wall clock that ran ahead of the monotonic clock is no downtime, so
  :class:`ClockWatch` tells the job to evaluate the oldest ``catch_up`` windows this tick and
  keep the rest due (nothing skipped). Those evaluated ahead of their time are redone by
  :func:`rewind` once the clock is back. Skipping beyond the cap stays otherwise: on the first
  tick of a process (after downtime, or with an old ``start``) and after an outage the process
  lived through (the monotonic clock agrees with the wall clock), the gap is real history, and
  that is what the cap is for.

Why not hold (evaluate nothing) on a forward jump? A jump can also be the clock being
*corrected* (an NTP step after a boot with a wrong hardware clock): holding would stop the
monitor for good, while evaluating oldest first loses nothing either way.

Each jump is counted (:data:`.incidents.INCIDENTS`, exported as
``fairmonitor_clock_jumps_total{model, direction}``) and logged once.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .windows import EPOCH, initial_watermark, window_index

if TYPE_CHECKING:
    from .checkpoint import ModelState
    from .config import ModelConfig

__all__ = ["WATCH", "ClockWatch", "rewind"]


class ClockWatch:
    """The previous tick's ``now`` and monotonic time, per (checkpoint, model), in this process.

    Keyed by the checkpoint object (weakly): two monitors in one process (tests) keep apart.

    >>> from datetime import UTC
    >>> class Owner: pass
    >>> watch, ck = ClockWatch(), Owner()
    >>> t0 = datetime(2026, 11, 22, tzinfo=UTC)
    >>> watch.tick(ck, "credit", t0) is None  # first tick of the process: nothing to compare
    True
    >>> watch.tick(ck, "credit", t0 + timedelta(days=30)) > timedelta(days=29)
    True
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: weakref.WeakKeyDictionary[Any, dict[str, tuple[datetime, float]]] = \
            weakref.WeakKeyDictionary()

    def tick(self, owner: Any, model: str, now: datetime) -> timedelta | None:
        """Record this tick; return how far ``now`` ran ahead of the elapsed time.

        The elapsed time since the previous tick of (``owner``, ``model``); None on the first
        tick of the process.
        """
        mono = time.monotonic()
        with self._lock:
            try:
                per = self._seen.setdefault(owner, {})
            except TypeError:  # not weak-referenceable: key by identity for this call only
                per = {}
            previous = per.get(model)
            per[model] = (now, mono)
        if previous is None:
            return None
        return (now - previous[0]) - timedelta(seconds=mono - previous[1])


#: the process's clock watch (what :func:`~.job.run_once` consults)
WATCH = ClockWatch()


def _latest_closed(every: timedelta, now: datetime) -> datetime:
    return EPOCH + window_index(every, now) * every


def rewind(cfg: ModelConfig, state: ModelState, now: datetime,
           phases: Iterable[tuple[str, timedelta]]) -> tuple[ModelState, timedelta]:
    """Move watermarks that are ahead of ``now`` back to the latest closed window.

    ``phases`` gives each watermark attribute with its delay (``labels_after`` for
    ``labels_end``). Rollup watermarks follow the model's. Returns the state and how far the
    furthest watermark was ahead (zero: nothing moved). A model whose ``start`` lies ahead
    keeps its watermark there.
    """
    floor_start = (initial_watermark(cfg.window, cfg.every, now=now, start=cfg.start)
                   if cfg.start is not None else None)
    ahead = timedelta(0)
    changes: dict[str, Any] = {}
    for attr, delay in phases:
        mark = getattr(state, attr)
        if mark is None:
            continue
        target = _latest_closed(cfg.every, now - delay)
        if floor_start is not None:
            target = max(target, floor_start)
        if mark > target:
            ahead = max(ahead, mark - (now - delay))
            changes[attr] = target
    if not changes:
        return state, timedelta(0)
    moved = dataclasses.replace(state, **changes)
    ends = [getattr(moved, attr) for attr, _ in phases if getattr(moved, attr) is not None]
    done = min(ends) if ends else None
    if done is not None and state.rollups:
        rollups = dict(state.rollups)
        for r in getattr(cfg, "rollups", ()):
            if r.name in rollups:
                rollups[r.name] = min(rollups[r.name], _latest_closed(r.every, done))
        moved = dataclasses.replace(moved, rollups=rollups)
    return moved, ahead
