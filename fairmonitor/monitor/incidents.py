"""Counters of state incidents: clock jumps, integrity errors and repairs, process-wide.

Some incidents happen where no window result is at hand: a checkpoint that falls back to its
previous generation inside ``load``, a clock jump on a tick with nothing due. They are counted
here, by (counter, model, label), and :class:`~.sinks.prometheus.FairnessCollector` exports the
counts at every scrape:

- ``clock_jumps`` (label ``direction``: ``forward``, ``backward``): :mod:`.clock`;
- ``integrity_errors`` (label ``kind``): a stored summary or checkpoint whose checksum or
  identity does not match (``summary_corrupt``, ``summary_identity``, ``checkpoint_corrupt``);
- ``repairs`` (label ``kind``): what was re-made (``summary_missing``, ``summary_corrupt``,
  ``checkpoint_previous``).

Counters live for the process, as Prometheus counters should (a restart resets them, which
``increase()`` handles).

>>> box = Incidents()
>>> box.count("repairs", "credit", "summary_corrupt")
>>> box.get("repairs", "credit", "summary_corrupt")
1
"""

from __future__ import annotations

import threading

__all__ = ["DIRECTIONS", "INCIDENTS", "INTEGRITY_KINDS", "REPAIR_KINDS", "Incidents"]

DIRECTIONS = ("forward", "backward")
INTEGRITY_KINDS = ("summary_corrupt", "summary_identity", "checkpoint_corrupt")
REPAIR_KINDS = ("summary_missing", "summary_corrupt", "checkpoint_previous")


class Incidents:
    """Thread-safe counts by (counter, model, label)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str, str], int] = {}

    def count(self, counter: str, model: str, label: str, n: int = 1) -> None:
        """Add ``n`` to one counter."""
        with self._lock:
            key = (counter, model, label)
            self._counts[key] = self._counts.get(key, 0) + n

    def get(self, counter: str, model: str, label: str) -> int:
        """Return the count so far (0 if never counted)."""
        with self._lock:
            return self._counts.get((counter, model, label), 0)

    def items(self, counter: str) -> list[tuple[str, str, int]]:
        """(model, label, count) of one counter."""
        with self._lock:
            return [(m, lab, n) for (c, m, lab), n in self._counts.items() if c == counter]


#: the process's incidents (what the exporter reads)
INCIDENTS = Incidents()
