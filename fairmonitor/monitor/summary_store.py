"""Where the monitor keeps each window's summary, so longer windows merge instead of re-reading.

Every evaluated window of a model with ``rollups`` leaves its :class:`~fairmonitor.summaries.
WindowSummary` here, serialized (:func:`fairmonitor.summaries.to_bytes`: versioned, with the
spec's fingerprint), under ``(model, window index, part)``:

- part ``predictions``: every row of the window, without labels (the label-free metrics);
- part ``labels``: the rows whose label had arrived, with their labels (the label metrics).
  A window whose rows were all labelled when evaluated stores this part only; it then serves
  both (:meth:`~fairmonitor.summaries.WindowSummary.without_labels`).

The job writes a window's parts before its checkpoint moves past it; one it could not write
(a full store: stage ``summary_store``) or that is damaged is re-made from the source's rows
when a rollup needs it (:mod:`.rollups`: every summary is checked against its checksum and
identity on load). Three stores, beside the checkpoint they go with
(:func:`open_summary_store`): a directory of files next to a checkpoint file
(``<checkpoint>.summaries/<folder>/<index>.<part>``, each written atomically; ``<folder>`` is
the model name percent-encoded (:func:`folder_name`): collision-free and reversible), a table
``<checkpoint table>_summaries`` in the checkpoint's SQL database, and memory (tests).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from .atomic import write_atomic
from .config import CheckpointConfig

__all__ = ["PARTS", "FileSummaryStore", "MemorySummaryStore", "SQLSummaryStore", "SummaryStore",
           "folder_name", "model_of_folder", "open_summary_store"]

Part = Literal["predictions", "labels"]
PARTS: tuple[Part, ...] = ("predictions", "labels")


@runtime_checkable
class SummaryStore(Protocol):
    """Serialized window summaries by (model, window index, part). Writes are durable."""

    def put(self, model: str, index: int, part: Part, blob: bytes) -> None:
        """Store (or replace) one part of one window's summary."""
        ...

    def get(self, model: str, indices: Iterable[int], part: Part) -> dict[int, bytes]:
        """Return the stored parts of the given windows (absent ones are left out)."""
        ...

    def prune(self, model: str, before: int) -> int:
        """Delete every part of the windows with index < ``before``; how many were deleted."""
        ...


class MemorySummaryStore:
    """A dict (tests, or a monitor without rollups across restarts)."""

    def __init__(self) -> None:
        self.blobs: dict[tuple[str, int, str], bytes] = {}

    def put(self, model: str, index: int, part: Part, blob: bytes) -> None:  # noqa: D102
        self.blobs[(model, int(index), part)] = bytes(blob)

    def get(self, model: str, indices: Iterable[int], part: Part) -> dict[int, bytes]:  # noqa: D102
        return {i: self.blobs[(model, i, part)] for i in indices
                if (model, i, part) in self.blobs}

    def prune(self, model: str, before: int) -> int:  # noqa: D102
        old = [k for k in self.blobs if k[0] == model and k[1] < before]
        for k in old:
            del self.blobs[k]
        return len(old)


def _legacy(model: str) -> str:
    """Return the folder name used before percent-encoding (it collided: a read fallback only)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", model).lstrip(".") or "_"


_KEEP = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def folder_name(model: str) -> str:
    """Return a model name as one directory name: collision-free and reversible.

    Every UTF-8 byte outside ``[A-Za-z0-9_-]`` becomes ``%XX`` (so no separator, no dot, no
    ``..``; the empty name is ``%``). On a case-insensitive file system, names differing in
    case only still share a folder: the summaries' identity check then refuses the other
    model's (re-made from the source), never merges it.

    >>> [folder_name(m) for m in ("credit eu", "credit_eu", "credit/eu", "..")]
    ['credit%20eu', 'credit_eu', 'credit%2Feu', '%2E%2E']
    >>> model_of_folder(folder_name("crédit/eu")) == "crédit/eu"
    True
    """
    if not model:
        return "%"
    return "".join(chr(b) if b in _KEEP else f"%{b:02X}" for b in model.encode())


def model_of_folder(folder: str) -> str:
    """Inverse of :func:`folder_name`."""
    from urllib.parse import unquote_to_bytes

    return "" if folder == "%" else unquote_to_bytes(folder).decode()


class FileSummaryStore:
    """One file per window part under ``directory/<folder>/``, each replaced atomically.

    ``<folder>`` is :func:`folder_name`; a part not found there is read from the folder name
    of earlier versions (which collided: ``credit eu`` and ``credit_eu`` shared one), whose
    summaries the rollup checks for their model before merging. New parts go to the new folder.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()
        #: the lease check run before every write (:mod:`.leadership`); None: unfenced
        self.fence: Any = None

    def folder(self, model: str) -> str:
        """Return the folder name of ``model``'s summaries."""
        return folder_name(model)

    def _path(self, model: str, index: int, part: str, *, legacy: bool = False) -> Path:
        name = _legacy(model) if legacy else folder_name(model)
        return self.directory / name / f"{int(index)}.{part}"

    def put(self, model: str, index: int, part: Part, blob: bytes) -> None:  # noqa: D102
        path = self._path(model, index, part)
        with self._lock:
            if self.fence is not None:
                self.fence()
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, bytes(blob))

    def get(self, model: str, indices: Iterable[int], part: Part) -> dict[int, bytes]:  # noqa: D102
        out = {}
        fallback = _legacy(model) != folder_name(model) and \
            (self.directory / _legacy(model)).is_dir()
        for i in indices:
            for legacy in (False, True) if fallback else (False,):
                try:
                    out[i] = self._path(model, i, part, legacy=legacy).read_bytes()
                    break
                except FileNotFoundError:
                    continue
        return out

    def prune(self, model: str, before: int) -> int:  # noqa: D102
        n = 0
        with self._lock:
            if self.fence is not None:  # a former leader must not prune the new one's windows
                self.fence()
            for name in {folder_name(model), _legacy(model)}:
                # the legacy folder may be another model's too: what it loses is re-made
                folder = self.directory / name
                for path in folder.glob("*.*") if folder.is_dir() else ():
                    head = path.name.split(".", 1)[0]
                    if head.lstrip("-").isdigit() and int(head) < before:
                        path.unlink(missing_ok=True)
                        n += 1
        return n


class SQLSummaryStore:
    """A table ``(model, window_index, part, summary BLOB)`` in a SQLAlchemy database."""

    def __init__(self, url: str, table: str = "fairmonitor_checkpoint_summaries") -> None:
        import sqlalchemy as sa

        self.engine = sa.create_engine(url, pool_pre_ping=True)
        self.table = sa.Table(
            table, sa.MetaData(),
            sa.Column("model", sa.String(200), primary_key=True),
            sa.Column("window_index", sa.BigInteger, primary_key=True),
            sa.Column("part", sa.String(16), primary_key=True),
            sa.Column("summary", sa.LargeBinary, nullable=False),
        )
        self.table.metadata.create_all(self.engine)
        #: ``fence(conn)`` run first in every write transaction (:mod:`.leadership`)
        self.fence: Any = None

    def put(self, model: str, index: int, part: Part, blob: bytes) -> None:  # noqa: D102
        import sqlalchemy as sa

        t = self.table
        with self.engine.begin() as conn:  # replace in one transaction
            if self.fence is not None:
                self.fence(conn)
            conn.execute(sa.delete(t).where(t.c.model == model, t.c.window_index == int(index),
                                            t.c.part == part))
            conn.execute(sa.insert(t).values(model=model, window_index=int(index), part=part,
                                             summary=bytes(blob)))

    def get(self, model: str, indices: Iterable[int], part: Part) -> dict[int, bytes]:  # noqa: D102
        import sqlalchemy as sa

        wanted = sorted({int(i) for i in indices})
        if not wanted:
            return {}
        t = self.table
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.c.window_index, t.c.summary).where(
                t.c.model == model, t.c.part == part,
                t.c.window_index.between(wanted[0], wanted[-1]))).all()
        keep = set(wanted)
        return {int(i): bytes(b) for i, b in rows if int(i) in keep}

    def prune(self, model: str, before: int) -> int:  # noqa: D102
        import sqlalchemy as sa

        t = self.table
        with self.engine.begin() as conn:
            if self.fence is not None:  # a former leader must not prune the new one's windows
                self.fence(conn)
            result = conn.execute(sa.delete(t).where(t.c.model == model,
                                                     t.c.window_index < int(before)))
        return int(result.rowcount or 0)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()


def open_summary_store(cfg: CheckpointConfig) -> SummaryStore:
    """Return the summary store that goes with a checkpoint: beside its file, or in its database.

    >>> from pathlib import Path
    >>> store = open_summary_store(CheckpointConfig("file", path=Path("/var/lib/fm/ck.json")))
    >>> str(store.directory)
    '/var/lib/fm/ck.json.summaries'
    """
    if cfg.kind == "sql":
        assert cfg.url is not None
        return SQLSummaryStore(cfg.url, f"{cfg.table}_summaries")
    assert cfg.path is not None
    return FileSummaryStore(cfg.path.with_name(cfg.path.name + ".summaries"))
