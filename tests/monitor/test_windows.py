from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fairmonitor.monitor.windows import (
    EPOCH,
    WindowSpan,
    due_windows,
    initial_watermark,
    labels_pending,
    labels_ready,
    span,
    window_index,
)

T0 = datetime(2026, 11, 22, tzinfo=UTC)
H = timedelta(hours=1)
M5 = timedelta(minutes=5)


def test_tumbling_windows_tile_time():
    k = window_index(H, T0)
    a, b = span(H, H, k), span(H, H, k + 1)
    assert a.end == T0
    assert a.start == T0 - H
    assert b.start == a.end


def test_sliding_windows_overlap_and_advance_by_every():
    k = window_index(M5, T0)
    a, b = span(H, M5, k), span(H, M5, k + 1)
    assert (a.start, a.end) == (T0 - H, T0)
    assert (b.start, b.end) == (T0 - H + M5, T0 + M5)


def test_window_index_is_anchored_at_the_epoch():
    assert window_index(H, EPOCH + 5 * H) == 5
    assert window_index(H, EPOCH + 5 * H + timedelta(microseconds=1)) == 5
    assert window_index(H, EPOCH + 5 * H - timedelta(microseconds=1)) == 4


def test_naive_times_are_rejected():
    with pytest.raises(ValueError, match="must be timezone-aware"):
        window_index(H, datetime(2026, 11, 22))


def test_a_window_is_due_exactly_when_it_closes():
    after = T0 - H
    assert due_windows(H, H, after=after, now=T0 - timedelta(microseconds=1)) == ([], 0)
    wins, _ = due_windows(H, H, after=after, now=T0)
    assert [w.end for w in wins] == [T0]


def test_nothing_due_twice():
    wins, _ = due_windows(H, H, after=T0, now=T0 + timedelta(minutes=59))
    assert wins == []


def test_catch_up_is_oldest_first():
    wins, skipped = due_windows(H, M5, after=T0, now=T0 + timedelta(minutes=17))
    assert [w.end for w in wins] == [T0 + M5, T0 + 2 * M5, T0 + 3 * M5]
    assert [w.start for w in wins] == [T0 + M5 - H, T0 + 2 * M5 - H, T0 + 3 * M5 - H]
    assert skipped == 0


def test_catch_up_cap_keeps_the_newest_and_counts_the_rest():
    wins, skipped = due_windows(H, H, after=T0, now=T0 + 10 * H, cap=3)
    assert [w.end for w in wins] == [T0 + 8 * H, T0 + 9 * H, T0 + 10 * H]
    assert skipped == 7


def test_label_delay_shifts_due_windows():
    wins, _ = due_windows(H, H, after=T0, now=T0 + 30 * H, delay=24 * H)
    assert [w.end for w in wins] == [T0 + k * H for k in range(1, 7)]


def test_labels_ready_boundary():
    w = WindowSpan(0, T0 - H, T0)
    assert not labels_ready(w, 24 * H, T0 + 24 * H - timedelta(seconds=1))
    assert labels_ready(w, 24 * H, T0 + 24 * H)


def test_initial_watermark_without_start_is_the_latest_closed_window():
    first = initial_watermark(H, M5, now=T0 + timedelta(minutes=12))
    wins, _ = due_windows(H, M5, after=first, now=T0 + timedelta(minutes=12))
    assert [w.end for w in wins] == [T0 + 2 * M5]


def test_initial_watermark_with_start_begins_at_the_first_full_window():
    start = T0 + timedelta(minutes=3)
    first = initial_watermark(H, M5, now=T0 + 3 * H, start=start)
    wins, _ = due_windows(H, M5, after=first, now=T0 + 3 * H, cap=1000)
    assert wins[0].start == T0 + M5  # the first window starting at or after `start`
    assert wins[-1].end == T0 + 3 * H
    assert len(wins) == 24  # ends 01:05, 01:10, ..., 03:00


def test_labels_pending_counts_closed_windows_after_the_labels_watermark():
    assert labels_pending(H, labels_end=T0, now=T0 + timedelta(hours=24, minutes=30)) == 24
    assert labels_pending(H, labels_end=T0, now=T0) == 0
    assert labels_pending(H, labels_end=None, now=T0) == 0


def test_cap_must_be_positive():
    with pytest.raises(ValueError, match="cap must be a positive integer; got 0"):
        due_windows(H, H, after=T0, now=T0, cap=0)
