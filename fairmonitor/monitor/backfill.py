"""Backfill: evaluate past windows again, from a given time (``--backfill-from``).

The checkpoint says where each model is; a backfill moves both watermarks back to just before
the first window starting at or after ``start`` (never forward), and the ordinary catch-up does
the rest, oldest first, at most ``catch_up`` windows per run. Windows evaluated again give the
same numbers (the random generator is seeded per window) and the same MLflow step and
timestamp, and MLflow keeps one copy of an identical metric, so nothing is doubled.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from .windows import initial_watermark

__all__ = ["rewind"]


def rewind(config: Any, checkpoint: Any, start: datetime, *,
           now: datetime | None = None) -> list[str]:
    """Move every model's watermarks back to ``start``; one line per model, saying where."""
    now = now or datetime.now(UTC)
    lines = []
    for name, cfg in config.models.items():
        state = checkpoint.load(name)
        first = initial_watermark(cfg.window, cfg.every, now=now, start=start)
        moved = dataclasses.replace(
            state, predictions_end=min(state.predictions_end or first, first),
            labels_end=min(state.labels_end or first, first))
        checkpoint.save(name, moved)
        lines.append(f"{name}: backfill from the window ending "
                     f"{(first + cfg.every).isoformat()} (at most {config.catch_up} windows "
                     "per run)")
    return lines
