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

Integrity (format 2): each model's entry carries its own name (``model``) and a SHA-256 of its
content (``checksum``), checked on load. Every save keeps the previous generation (the file
``<checkpoint>.1``, or the table ``<table>_previous``): a corrupt checkpoint (truncated,
edited, checksum or identity mismatch) falls back to it, says so (logged, counted as
``fairmonitor_repairs_total{kind="checkpoint_previous"}``) and is rewritten from it (the
corrupt file is kept as ``<checkpoint>.corrupt``). A format this fairmonitor does not know (a
newer one, or a malformed document such as ``{"models": []}``) is refused with
:class:`CheckpointFormatError`: the model stops rather than restart from ``start``. Format 1
(no checksums) is still read; it is rewritten as format 2 at the next save.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .atomic import write_atomic
from .config import CheckpointConfig
from .incidents import INCIDENTS

__all__ = ["FORMAT", "Checkpoint", "CheckpointCorruptError", "CheckpointFormatError",
           "FileCheckpoint", "MemoryCheckpoint", "ModelState", "SQLCheckpoint", "open_checkpoint"]

log = logging.getLogger(__name__)

#: the checkpoint format written (1: no checksums, still read)
FORMAT = 2
_KNOWN = (1, 2)


class CheckpointFormatError(ValueError):
    """A checkpoint this fairmonitor cannot read (newer format, malformed): refused."""


class CheckpointCorruptError(ValueError):
    """A checkpoint whose content fails its check (truncated, checksum, identity)."""


def _digest(entry: Mapping[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def seal(model: str, state: ModelState, **extra: Any) -> dict[str, Any]:
    """Return a model's entry as stored: its state, its name and the SHA-256 of both.

    >>> entry = seal("credit", ModelState())
    >>> entry["model"], len(entry["checksum"])
    ('credit', 64)
    >>> unseal("credit", entry) == ModelState()
    True
    """
    entry = {**state.to_json(), **extra, "model": model}
    entry["checksum"] = _digest(entry)
    return entry


def unseal(model: str, entry: Any, *, checked: bool = True) -> ModelState:
    """Return the state in a stored entry, after checking its checksum and name.

    ``checked=False`` reads a format-1 entry (no checksum). Raises
    :class:`CheckpointCorruptError` on a mismatch.
    """
    if not isinstance(entry, Mapping):
        raise CheckpointCorruptError(f"the entry of model {model!r} is not an object")
    if checked or "checksum" in entry:
        if entry.get("checksum") != _digest(entry):
            raise CheckpointCorruptError(f"the entry of model {model!r} fails its checksum "
                                         "(edited or damaged)")
        if entry.get("model") != model:
            raise CheckpointCorruptError(f"the entry stored for model {model!r} is model "
                                         f"{entry.get('model')!r}'s")
    try:
        return ModelState.from_json(entry)
    except Exception as exc:
        raise CheckpointCorruptError(f"the entry of model {model!r} cannot be read: "
                                     f"{type(exc).__name__}: {exc}") from None


def _format_of(doc: Any, where: str) -> int:
    """Return the format of a checkpoint document; refuse what this fairmonitor does not know."""
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt not in _KNOWN or isinstance(fmt, bool):
        raise CheckpointFormatError(
            f"{where}: checkpoint format {fmt!r} is not one this fairmonitor reads "
            f"({', '.join(map(str, _KNOWN))}); written by a newer fairmonitor (upgrade) or not "
            "a fairmonitor checkpoint. Refused: the models are not restarted from `start`. "
            "Fix or move the file (its previous generation is beside it, suffix .1)")
    return int(fmt)


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
        """Return a JSON-serialisable dict (ISO 8601 times, sorted versions)."""
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
        """Return the saved state of ``model``, or an empty one."""
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
    """A JSON file ``{"format": 2, "models": {name: entry}}``, replaced atomically on save.

    The new content is written to a temporary file in the same directory, flushed to disk and
    renamed over the old one (``os.replace`` is atomic on POSIX and Windows), so a crash leaves
    either the old or the new checkpoint, never a truncated one. The old content is kept as
    ``<path>.1`` first (the previous generation), and each entry is checked on load (module
    docstring).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.previous = self.path.with_name(self.path.name + ".1")
        self._lock = threading.Lock()
        #: the lease check run before every write (:mod:`.leadership`); None: unfenced
        self.fence: Any = None

    def _parse(self, path: Path) -> dict[str, Any] | None:
        """Return the checked models of one generation (None: no file); raises on a bad one."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise CheckpointCorruptError(f"{path}: not JSON (truncated?): {exc}") from None
        fmt = _format_of(doc, str(path))
        models = doc.get("models")
        if not isinstance(models, dict):
            raise CheckpointFormatError(
                f"{path}: checkpoint format {fmt} needs an object of models, found "
                f"{type(models).__name__}. Refused: the models are not restarted from `start`")
        for name, entry in models.items():
            unseal(name, entry, checked=fmt >= 2)
        return models

    def _read(self) -> dict[str, Any]:
        """Return the current generation's models, or the previous one's if it is corrupt."""
        try:
            models = self._parse(self.path)
        except CheckpointCorruptError as exc:
            return self._fall_back(exc)
        return {} if models is None else models

    def _fall_back(self, problem: Exception) -> dict[str, Any]:
        for name in self._names():
            INCIDENTS.count("integrity_errors", name, "checkpoint_corrupt")
        log.error("checkpoint %s is corrupt: %s", self.path, problem)
        try:
            models = self._parse(self.previous)
        except (CheckpointCorruptError, CheckpointFormatError) as exc:
            raise CheckpointCorruptError(f"{problem}; its previous generation {self.previous} "
                                         f"is not usable either: {exc}") from None
        if models is None:
            raise CheckpointCorruptError(f"{problem}; no previous generation "
                                         f"({self.previous}) to fall back to") from None
        # repair: keep the damaged file for a post-mortem, restore the previous generation
        if self.fence is not None:  # a repair is a write: only the lease holder's
            self.fence()
        os.replace(self.path, self.path.with_name(self.path.name + ".corrupt"))
        write_atomic(self.path, self.previous.read_text(encoding="utf-8"))
        for name in models:
            INCIDENTS.count("repairs", name, "checkpoint_previous")
        log.warning("checkpoint %s: using its previous generation %s (the windows done since "
                    "are evaluated again; the damaged file is kept as %s.corrupt)", self.path,
                    self.previous, self.path.name)
        return models

    def _names(self) -> list[str]:
        """Model names of the previous generation (what a corrupt file is counted against)."""
        try:
            return list(json.loads(self.previous.read_text(encoding="utf-8"))["models"])
        except Exception:
            return [""]

    def load(self, model: str) -> ModelState:  # noqa: D102
        with self._lock:
            entry = self._read().get(model)
            return ModelState() if entry is None else unseal(model, entry, checked=False)

    def save(self, model: str, state: ModelState) -> None:  # noqa: D102
        with self._lock:
            if self.fence is not None:  # a monitor that lost the lease writes nothing
                self.fence()
            # format-1 entries are sealed as they are rewritten (the file is format 2 after)
            models = {n: seal(n, unseal(n, e, checked=False)) for n, e in self._read().items()}
            models[model] = seal(model, state)
            text = json.dumps({"format": FORMAT, "models": models}, indent=2, sort_keys=True)
            if self.path.exists():  # sound (just read): it becomes the previous generation
                write_atomic(self.previous, self.path.read_bytes())
            write_atomic(self.path, text)


class SQLCheckpoint:
    """A table ``(model PRIMARY KEY, state JSON text, updated_at)`` in a SQLAlchemy database.

    Each save copies the model's row to ``<table>_previous`` (the previous generation) and
    replaces it, in one transaction. A row is a sealed entry (:func:`seal`, with ``format``);
    a row written before format 2 (no ``format``) is read unchecked.
    """

    def __init__(self, url: str, table: str = "fairmonitor_checkpoint") -> None:
        import sqlalchemy as sa

        self.engine = sa.create_engine(url, pool_pre_ping=True)
        metadata = sa.MetaData()
        self.table, self.previous = (sa.Table(
            name, metadata,
            sa.Column("model", sa.String(200), primary_key=True),
            sa.Column("state", sa.Text, nullable=False),
            sa.Column("updated_at", sa.String(40), nullable=False),
        ) for name in (table, f"{table}_previous"))
        metadata.create_all(self.engine)
        #: ``fence(conn)`` run first in every write transaction (:mod:`.leadership`)
        self.fence: Any = None

    def _row(self, conn: Any, table: Any, model: str) -> str | None:
        import sqlalchemy as sa

        return conn.execute(sa.select(table.c.state).where(table.c.model == model)).scalar()

    def _parse(self, model: str, text: str | None, where: str) -> ModelState | None:
        if text is None:
            return None
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise CheckpointCorruptError(f"{where}: the row of model {model!r} is not JSON "
                                         f"(truncated?): {exc}") from None
        if not isinstance(doc, dict):
            raise CheckpointCorruptError(f"{where}: the row of model {model!r} is not an object")
        if "format" not in doc:  # format 1: the bare state
            return unseal(model, doc, checked=False)
        _format_of(doc, f"{where}, model {model!r}")
        return unseal(model, doc)

    def load(self, model: str) -> ModelState:  # noqa: D102
        with self.engine.connect() as conn:
            text = self._row(conn, self.table, model)
        try:
            state = self._parse(model, text, self.table.name)
        except CheckpointCorruptError as exc:
            return self._fall_back(model, exc)
        return ModelState() if state is None else state

    def _fall_back(self, model: str, problem: Exception) -> ModelState:
        import sqlalchemy as sa

        INCIDENTS.count("integrity_errors", model, "checkpoint_corrupt")
        log.error("checkpoint %s is corrupt: %s", self.table.name, problem)
        with self.engine.begin() as conn:
            if self.fence is not None:  # a repair is a write: only the lease holder's
                self.fence(conn)
            text = self._row(conn, self.previous, model)
            try:
                state = self._parse(model, text, self.previous.name)
            except (CheckpointCorruptError, CheckpointFormatError) as exc:
                raise CheckpointCorruptError(f"{problem}; its previous generation is not "
                                             f"usable either: {exc}") from None
            if state is None:
                raise CheckpointCorruptError(f"{problem}; no previous generation to fall "
                                             "back to") from None
            t = self.table  # repair: the previous generation becomes the current one
            conn.execute(sa.delete(t).where(t.c.model == model))
            conn.execute(sa.insert(t).values(model=model, state=text,
                                             updated_at=_stamp()))
        INCIDENTS.count("repairs", model, "checkpoint_previous")
        log.warning("checkpoint %s: model %r uses its previous generation (the windows done "
                    "since are evaluated again)", self.table.name, model)
        return state

    def save(self, model: str, state: ModelState) -> None:  # noqa: D102
        import sqlalchemy as sa

        text = json.dumps(seal(model, state, format=FORMAT), sort_keys=True)
        with self.engine.begin() as conn:
            if self.fence is not None:  # the lease row, in this transaction: stale -> rollback
                self.fence(conn)
            current = self._row(conn, self.table, model)
            try:
                sound = self._parse(model, current, self.table.name) is not None
            except CheckpointCorruptError:
                sound = False  # keep the previous generation as it is
            for t, value in ((self.previous, current), (self.table, text)):
                if t is self.previous and not sound:
                    continue
                conn.execute(sa.delete(t).where(t.c.model == model))
                conn.execute(sa.insert(t).values(model=model, state=value,
                                                 updated_at=_stamp()))

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()


def _stamp() -> str:
    from datetime import UTC

    return datetime.now(UTC).isoformat()


def open_checkpoint(cfg: CheckpointConfig) -> Checkpoint:
    """Return the checkpoint store a config names."""
    if cfg.kind == "sql":
        assert cfg.url is not None
        return SQLCheckpoint(cfg.url, cfg.table)
    assert cfg.path is not None
    return FileCheckpoint(cfg.path)
