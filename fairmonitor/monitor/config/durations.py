"""Durations in the monitor config: ``"30s"``, ``"5m"``, ``"1h"``, ``"1d"``."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

__all__ = ["DURATION_HELP", "MAX_DURATION", "format_duration", "parse_duration"]

DURATION_HELP = "a duration like '30s', '5m', '1h' or '1d'"
_DURATION = re.compile(r"^(\d+)\s*([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
#: longest accepted duration: windows, delays and ticks are hours to weeks; beyond ten years a
#: value is a typo, and timedelta itself overflows at 999999999 days
MAX_DURATION = timedelta(days=3660)


def parse_duration(text: Any) -> timedelta:
    """``"5m"`` -> ``timedelta(minutes=5)``; units s, m, h, d.

    >>> parse_duration("90s"), parse_duration("1d")
    (datetime.timedelta(seconds=90), datetime.timedelta(days=1))
    """
    match = _DURATION.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"must be {DURATION_HELP}; got {text!r}")
    try:
        delta = timedelta(**{_UNITS[match[2]]: int(match[1])})
    except OverflowError:
        delta = MAX_DURATION + timedelta(days=1)
    if delta > MAX_DURATION:
        raise ValueError(f"must be at most {MAX_DURATION.days}d (ten years); got {text!r}")
    return delta


def format_duration(delta: timedelta) -> str:
    """Return :func:`parse_duration`'s inverse, in the largest exact unit (``"90m"``, ``"1d"``)."""
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
