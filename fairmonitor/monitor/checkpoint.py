"""Restart-safe monitor progress: per model, how far each kind of evaluation has got.

A :class:`ModelState` holds two watermarks and a set:

- ``predictions_end``: end of the last window evaluated at close (phase ``predictions`` or
  ``full``);
- ``labels_end``: end of the last window whose labelled evaluation is done;
- ``versions``: model versions already evaluated on reference data;
- ``last``: what was last reported (:mod:`.snapshot`), so a restart exports it again at once;
- ``rollups``: per rollup (a longer window merged from stored summaries), the end of its last
  evaluated window (the summaries themselves are in :mod:`.summary_store`);
- ``streaks``: the alert streaks (:mod:`.streaks`: consecutive breaching, undefined and empty
  windows), saved with the window that moved them, so a restart mid-breach keeps counting.

:func:`~fairmonitor.monitor.job.run_once` saves the state after every completed window, so a
monitor killed at any point resumes at the first window not yet done: nothing is skipped, and at
most the window that was in flight is evaluated again. Three stores implement the
:class:`Checkpoint` protocol: a JSON file written atomically (temp file + ``os.replace``), a
table in any SQLAlchemy database (e.g. next to the predictions), and memory (tests).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .atomic import write_atomic
from .config import CheckpointConfig

__all__ = ["Checkpoint", "FileCheckpoint", "MemoryCheckpoint", "ModelState", "SQLCheckpoint",
           "open_checkpoint"]


@dataclass(frozen=True)
class ModelState:
    """Progress of one model. ``None`` watermarks mean "not started"."""

    predictions_end: datetime | None = None
    labels_end: datetime | None = None
    versions: frozenset[str] = field(default_factory=frozenset)
    last: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: windows whose labels were incomplete when evaluated: index -> labelled rows seen
    relabel: Mapping[str, int] = field(default_factory=dict, compare=False)
    #: rollup name -> end of its last evaluated window
    rollups: Mapping[str, datetime] = field(default_factory=dict, compare=False)
    #: the alert streaks (:meth:`.streaks.Streaks.to_json`); {} before the first window
    streaks: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (ISO 8601 times, sorted versions)."""
        out: dict[str, Any] = {
            "predictions_end": _iso(self.predictions_end),
            "labels_end": _iso(self.labels_end),
            "versions": sorted(self.versions, key=_version_key),
        }
        if self.last:
            out["last"] = dict(self.last)
        if self.relabel:
            out["relabel"] = dict(self.relabel)
        if self.rollups:
            out["rollups"] = {k: _iso(v) for k, v in self.rollups.items()}
        if self.streaks:
            out["streaks"] = dict(self.streaks)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelState:
        """Inverse of :meth:`to_json`."""
        return cls(
            predictions_end=_parse(data.get("predictions_end")),
            labels_end=_parse(data.get("labels_end")),
            versions=frozenset(str(v) for v in data.get("versions") or ()),
            last=dict(data.get("last") or {}),
            relabel={str(k): int(v) for k, v in (data.get("relabel") or {}).items()},
            rollups={str(k): _parse(v) for k, v in (data.get("rollups") or {}).items()
                     if v is not None},
            streaks=dict(data.get("streaks") or {}),
        )


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def _parse(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _version_key(v: str) -> tuple[int, str]:
    return (int(v), "") if v.isdigit() else (1 << 62, v)


@runtime_checkable
class Checkpoint(Protocol):
    """Where :class:`ModelState` is kept. ``save`` is durable when it returns."""

    def load(self, model: str) -> ModelState:
        """The saved state of ``model``, or an empty one."""
        ...

    def save(self, model: str, state: ModelState) -> None:
        """Persist the state of ``model``."""
        ...


class MemoryCheckpoint:
    """Keeps states in a dict (tests, or a monitor that may forget on restart)."""

    def __init__(self, states: Mapping[str, ModelState] | None = None) -> None:
        self.states: dict[str, ModelState] = dict(states or {})

    def load(self, model: str) -> ModelState:  # noqa: D102
        return self.states.get(model, ModelState())

    def save(self, model: str, state: ModelState) -> None:  # noqa: D102
        self.states[model] = state


class FileCheckpoint:
    """A JSON file ``{"format": 1, "models": {name: state}}``, replaced atomically on save.

    The new content is written to a temporary file in the same directory, flushed to disk and
    renamed over the old one (``os.replace`` is atomic on POSIX and Windows), so a crash leaves
    either the old or the new checkpoint, never a truncated one.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        #: the lease check run before every write (:mod:`.leadership`); None: unfenced
        self.fence: Any = None

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return dict(data.get("models", {}))

    def load(self, model: str) -> ModelState:  # noqa: D102
        with self._lock:
            return ModelState.from_json(self._read().get(model, {}))

    def save(self, model: str, state: ModelState) -> None:  # noqa: D102
        with self._lock:
            if self.fence is not None:  # a monitor that lost the lease writes nothing
                self.fence()
            models = self._read()
            models[model] = state.to_json()
            text = json.dumps({"format": 1, "models": models}, indent=2, sort_keys=True)
            write_atomic(self.path, text)


class SQLCheckpoint:
    """A table ``(model PRIMARY KEY, state JSON text, updated_at)`` in a SQLAlchemy database.

    Each save replaces the model's row in one transaction.
    """

    def __init__(self, url: str, table: str = "fairmonitor_checkpoint") -> None:
        import sqlalchemy as sa

        self.engine = sa.create_engine(url, pool_pre_ping=True)
        self.table = sa.Table(
            table, sa.MetaData(),
            sa.Column("model", sa.String(200), primary_key=True),
            sa.Column("state", sa.Text, nullable=False),
            sa.Column("updated_at", sa.String(40), nullable=False),
        )
        self.table.metadata.create_all(self.engine)
        #: ``fence(conn)`` run first in every write transaction (:mod:`.leadership`)
        self.fence: Any = None

    def load(self, model: str) -> ModelState:  # noqa: D102
        import sqlalchemy as sa

        with self.engine.connect() as conn:
            text = conn.execute(sa.select(self.table.c.state)
                                .where(self.table.c.model == model)).scalar()
        return ModelState() if text is None else ModelState.from_json(json.loads(text))

    def save(self, model: str, state: ModelState) -> None:  # noqa: D102
        from datetime import UTC

        import sqlalchemy as sa

        row = {"model": model, "state": json.dumps(state.to_json(), sort_keys=True),
               "updated_at": datetime.now(UTC).isoformat()}
        with self.engine.begin() as conn:
            if self.fence is not None:  # the lease row, in this transaction: stale -> rollback
                self.fence(conn)
            conn.execute(sa.delete(self.table).where(self.table.c.model == model))
            conn.execute(sa.insert(self.table).values(**row))

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()


def open_checkpoint(cfg: CheckpointConfig) -> Checkpoint:
    """The checkpoint store a config names."""
    if cfg.kind == "sql":
        assert cfg.url is not None
        return SQLCheckpoint(cfg.url, cfg.table)
    assert cfg.path is not None
    return FileCheckpoint(cfg.path)
