"""The MLflow sink's spool: an append-only journal of values not yet written, private and bounded.

Each line is one JSON record, appended and fsynced (a few hundred bytes per window, whatever the
backlog, where rewriting the whole queue cost O(backlog) per window):

- ``{"id": 7, "tracking_uri": ..., "experiment": ..., "model": ..., "version": ..., "kind": ...,
  "points": [[key, value, timestamp_ms, step], ...]}`` adds a window's values;
- ``{"done": 7, "left": 0}`` says that only the last ``left`` points of record 7 remain to be
  written (0: all written, or replaced by a newer evaluation of the same window).

Reading replays the journal. A crash in the middle of an append leaves a last line without its
newline, which is ignored (its window was not acknowledged, so the job evaluates it again); any
other unreadable line makes the file "corrupt": it is moved aside, never silently emptied.

The file is removed when nothing is pending, and compacted (the live records rewritten to a
private temporary file in the same directory, fsynced, then renamed over the journal) once it
is larger than ``compact_bytes`` and twice the live records, so its size stays within a small
multiple of the pending values, which the sink itself bounds (``max_pending``). Files are
created with mode 0600: they hold tracking URIs (masked, see :mod:`..redact`) and model names.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "pending.jsonl"
>>> spool = Spool(path)
>>> head = {"model": "credit", "kind": "window"}
>>> spool.add({**head, "id": 1, "points": [["k", 0.5, 0, 1], ["j", 0.1, 0, 1]]})
>>> spool.add({**head, "id": 2, "points": [["k", 0.2, 0, 2]]})
>>> spool.done(1, left=1)
>>> [(r["id"], r["points"]) for r in Spool(path).load()]
[(1, [['j', 0.1, 0, 1]]), (2, [['k', 0.2, 0, 2]])]
>>> oct(path.stat().st_mode & 0o777)
'0o600'
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..atomic import write_atomic

__all__ = ["Spool", "SpoolCorruptError"]

log = logging.getLogger(__name__)


class SpoolCorruptError(ValueError):
    """The journal has a line that is not a record (moved aside by the sink)."""


class Spool:
    """An append-only JSON-lines journal at ``path`` (module docstring)."""

    def __init__(self, path: str | os.PathLike[str], *, compact_bytes: int = 1 << 20) -> None:
        self.path = Path(path)
        self.compact_bytes = int(compact_bytes)

    @property
    def size_bytes(self) -> int:
        """Current size of the journal on disk (0 when absent)."""
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def load(self) -> list[dict[str, Any]]:
        """Return the live records, oldest first, with only their remaining points.

        Raises FileNotFoundError when there is no journal, OSError when it cannot be read,
        :class:`SpoolCorruptError` when a complete line is not a record.
        """
        text = self.path.read_text(encoding="utf-8")
        lines = text.split("\n")
        records: dict[int, dict[str, Any]] = {}
        next_id = 0
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                if i == len(lines) - 1:  # no newline after it: an append cut by a crash
                    log.warning("MLflow spool %s: ignoring a last line cut short by a crash",
                                self.path)
                    continue
                raise SpoolCorruptError(f"line {i + 1}: {exc}") from None
            if not isinstance(data, Mapping):
                raise SpoolCorruptError(f"line {i + 1}: not a JSON object")
            if "done" in data:
                rid, left = int(data["done"]), int(data["left"])
                if rid in records:
                    if left <= 0:
                        del records[rid]
                    else:
                        pts = records[rid]["points"]
                        records[rid]["points"] = pts[len(pts) - left:]
                continue
            if not {"points", "model", "kind"} <= data.keys():
                raise SpoolCorruptError(f"line {i + 1}: not a queue record")
            # files of earlier releases have no ids: number their lines
            rid = int(data["id"]) if "id" in data else next_id
            next_id = max(next_id, rid) + 1
            records[rid] = {**data, "id": rid}
        return list(records.values())

    def _append(self, records: Iterable[Mapping[str, Any]]) -> None:
        data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_APPEND: concurrent appends never interleave inside a line; 0600 at creation
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)  # durable when add() returns: the checkpoint may move past the window
        finally:
            os.close(fd)

    def add(self, record: Mapping[str, Any]) -> None:
        """Append one record (it must carry an ``id``); OSError when the disk refuses."""
        self._append([record])

    def done(self, rid: int, *, left: int = 0) -> None:
        """Record that only the last ``left`` points of record ``rid`` remain."""
        self._append([{"done": int(rid), "left": int(left)}])

    def rewrite(self, live: list[Mapping[str, Any]]) -> None:
        """Replace the journal by ``live`` (removed when empty), atomically and privately."""
        if not live:
            self.path.unlink(missing_ok=True)
            return
        write_atomic(self.path, "".join(json.dumps(r, separators=(",", ":")) + "\n"
                                        for r in live))

    def needs_compaction(self, live_points: int) -> bool:
        """Return True when the journal is large and mostly acknowledged records."""
        size = self.size_bytes
        # about 80 bytes per point once serialised
        return size > self.compact_bytes and size > 2 * 80 * max(live_points, 1)
