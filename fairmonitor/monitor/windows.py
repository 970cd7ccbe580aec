"""Window arithmetic: which windows exist, which are due at ``now``, and catch-up.

Windows sit on a fixed grid anchored at the Unix epoch in UTC: window ``k`` ends at
``EPOCH + k * every`` and starts ``window`` earlier, covering ``[start, end)``. Tumbling windows
have ``every == window``; sliding windows overlap (``every < window``). Because the grid depends
only on the config, a restarted monitor computes the same windows, and ``k`` (the window index)
is a stable MLflow ``step``.

A window is due once it has closed (``end <= now``); its labelled evaluation is due once
``end + labels_after <= now``. Progress is a watermark, the end of the last done window, so
"due" means: past the watermark and closed. After downtime the missed windows are evaluated
oldest first, at most ``cap`` of them; older ones beyond the cap are skipped (and counted), on
the first tick of a process only: a running monitor whose clock jumps keeps them due
(:mod:`.clock`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["EPOCH", "WindowSpan", "due_windows", "initial_watermark", "labels_pending",
           "labels_ready", "next_due", "span", "window_index"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, order=True)
class WindowSpan:
    """One window of the grid: ``[start, end)`` with its index (``end = EPOCH + index*every``)."""

    index: int
    start: datetime
    end: datetime


def _check_aware(t: datetime, name: str) -> None:
    if t.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware (UTC); got naive {t.isoformat()}")


def span(window: timedelta, every: timedelta, index: int) -> WindowSpan:
    """Return the window with index ``index``.

    >>> span(timedelta(hours=1), timedelta(minutes=30), 3)
    ... # doctest: +NORMALIZE_WHITESPACE
    WindowSpan(index=3, start=datetime.datetime(1970, 1, 1, 0, 30, tzinfo=datetime.timezone.utc),
               end=datetime.datetime(1970, 1, 1, 1, 30, tzinfo=datetime.timezone.utc))
    """
    end = EPOCH + index * every
    return WindowSpan(index, end - window, end)


def window_index(every: timedelta, t: datetime) -> int:
    """Index of the latest window ending at or before ``t``."""
    _check_aware(t, "time")
    return (t - EPOCH) // every


def due_windows(
    window: timedelta,
    every: timedelta,
    *,
    after: datetime,
    now: datetime,
    delay: timedelta = timedelta(0),
    cap: int = 100,
    skip: bool = True,
) -> tuple[list[WindowSpan], int]:
    """Windows ending after the watermark ``after`` and at or before ``now - delay``.

    Returns the windows oldest first, at most ``cap`` (the newest ones), and how many older
    due windows the cap skipped. With ``skip=False`` (a running monitor whose clock jumped,
    :mod:`.clock`) the ``cap`` oldest are returned instead and nothing is skipped: the rest
    stay due for the next tick.

    >>> h = timedelta(hours=1)
    >>> now = datetime(2026, 11, 22, 5, 10, tzinfo=UTC)
    >>> wins, skipped = due_windows(h, h, after=datetime(2026, 11, 22, 1, tzinfo=UTC), now=now)
    >>> [w.end.hour for w in wins], skipped
    ([2, 3, 4, 5], 0)
    >>> wins, skipped = due_windows(h, h, after=datetime(2026, 11, 22, 1, tzinfo=UTC), now=now,
    ...                             cap=2)
    >>> [w.end.hour for w in wins], skipped
    ([4, 5], 2)
    >>> due_windows(h, h, after=datetime(2026, 11, 22, 1, tzinfo=UTC), now=now,
    ...             delay=timedelta(hours=3))[0][-1].end.hour
    2
    >>> wins, skipped = due_windows(h, h, after=datetime(2026, 11, 22, 1, tzinfo=UTC), now=now,
    ...                             cap=2, skip=False)
    >>> [w.end.hour for w in wins], skipped
    ([2, 3], 0)
    """
    _check_aware(after, "after")
    _check_aware(now, "now")
    if cap < 1:
        raise ValueError(f"cap must be a positive integer; got {cap!r}")
    hi = window_index(every, now - delay)
    lo = window_index(every, after) + 1
    n = hi - lo + 1
    if n <= 0:
        return [], 0
    if not skip:
        return [span(window, every, k) for k in range(lo, min(hi, lo + cap - 1) + 1)], 0
    skipped = max(0, n - cap)
    return [span(window, every, k) for k in range(lo + skipped, hi + 1)], skipped


def next_due(every: timedelta, now: datetime, delay: timedelta = timedelta(0)) -> datetime:
    """When the next window becomes due, strictly after ``now``.

    That is its end, plus ``delay`` (the label delay) for the labelled phase. The service
    schedules the job at this time, so a window is evaluated as soon as it closes instead of
    up to one tick later.

    >>> h = timedelta(hours=1)
    >>> next_due(h, datetime(2026, 11, 22, 5, 10, tzinfo=UTC)).hour
    6
    >>> next_due(h, datetime(2026, 11, 22, 5, 0, tzinfo=UTC)).hour  # 05:00 is already due
    6
    >>> next_due(h, datetime(2026, 11, 22, 5, 10, tzinfo=UTC), delay=timedelta(minutes=30))
    datetime.datetime(2026, 11, 22, 5, 30, tzinfo=datetime.timezone.utc)
    """
    _check_aware(now, "now")
    return EPOCH + (window_index(every, now - delay) + 1) * every + delay


def initial_watermark(window: timedelta, every: timedelta, *, now: datetime,
                      start: datetime | None = None) -> datetime:
    """Where a model without a checkpoint starts: just before its first window.

    With ``start``, the first window is the first one starting at or after ``start`` (older
    history is backfilled, subject to the catch-up cap); without it, the latest closed window,
    so a new monitor does not replay history by surprise.

    >>> h = timedelta(hours=1)
    >>> initial_watermark(h, h, now=datetime(2026, 11, 22, 5, 10, tzinfo=UTC)).hour
    4
    >>> initial_watermark(h, h, now=datetime(2026, 11, 22, 5, 10, tzinfo=UTC),
    ...                   start=datetime(2026, 11, 22, 0, 30, tzinfo=UTC)).hour
    1
    """
    if start is None:
        first = window_index(every, now)
    else:
        _check_aware(start, "start")
        # ceil: the first window end with end - window >= start
        first = -((EPOCH - (start + window)) // every)
    return EPOCH + (first - 1) * every


def labels_ready(window: WindowSpan, labels_after: timedelta, now: datetime) -> bool:
    """Return True once the labels of ``window`` are expected to be in."""
    return window.end + labels_after <= now


def labels_pending(every: timedelta, *, labels_end: datetime | None, now: datetime) -> int:
    """Return closed windows whose labelled evaluation is not done (waiting for labels, or due).

    >>> h = timedelta(hours=1)
    >>> labels_pending(h, labels_end=datetime(2026, 11, 21, 5, tzinfo=UTC),
    ...                now=datetime(2026, 11, 22, 5, 10, tzinfo=UTC))
    24
    """
    if labels_end is None:
        return 0
    return max(0, window_index(every, now) - window_index(every, labels_end))
