"""A multiclass window's summary: one binary summary per class (issue 29).

A multiclass model's window is evaluated one class against the rest
(:mod:`fairmonitor.report.multiclass`); its summary is therefore one binary
:class:`~fairmonitor.summaries.WindowSummary` per class, made from that class's binary view of
the rows (predictions and labels ``== c``, scores the probability of ``c``), and merging two
is merging them class by class. Every exactness guarantee of a binary summary holds for each
class, so a rollup of multiclass windows gives, per class and for the worst class, the values
of the rows' own evaluation (counts, parity and MADD exact; ABCC within its certified error).

:func:`merge_all`, :func:`to_bytes` and :func:`from_bytes` take every kind: a multiclass
summary is handled here, any other is handed to :mod:`.regression`'s, which handles a
regression summary and hands a binary one to the core's. The package exports these three, so
a caller that stores any kind (the monitor's rollups, Spark's partitions) calls
``fairmonitor.summaries.merge_all`` and friends for all of them.

Bytes: an 8-byte magic (``FMMCSUM``), the length of a JSON header (little-endian uint64), the
header (format version, the classes tagged with their type, each class's byte length), each
class's :func:`fairmonitor.summaries.to_bytes` (checked on load by its own checksum), and a
trailer ``FMCK`` + the CRC-32 of every byte before it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..exceptions import InvalidInputError
from .core import SummarySpec, WindowSummary
from .regression import from_bytes as _binary_from_bytes
from .regression import merge_all as _merge_binary
from .regression import to_bytes as _binary_to_bytes

# a class's part is a binary summary; ``.regression``'s three functions take it (and a
# regression one), so this module's functions are the package's one entry for every kind

__all__ = ["MulticlassSpec", "MulticlassSummary", "from_bytes", "merge_all", "replace",
           "to_bytes"]

_MAGIC = b"FMMCSUM\x00"
_FORMAT = "fairmonitor-multiclass-summary"
_VERSION = 1
_TRAILER = b"FMCK"
_TAGS = {bool: "b", int: "i", float: "f", str: "s"}


def _tagged(classes: Sequence[Any]) -> list[list[Any]]:
    """Return the classes as JSON with their type (``1`` and ``"1"`` stay distinct)."""
    out = []
    for c in classes:
        tag = _TAGS.get(type(c))
        if tag is None:
            raise InvalidInputError(f"a multiclass summary's class must be a bool, int, float "
                                    f"or str; got {c!r} ({type(c).__name__})")
        out.append([tag, c])
    return out


def _untagged(tagged: Sequence[Sequence[Any]]) -> tuple[Any, ...]:
    kinds = {"b": bool, "i": int, "f": float, "s": str}
    return tuple(kinds[tag](value) for tag, value in tagged)


@dataclass(frozen=True)
class MulticlassSpec:
    """The spec of a multiclass summary: each class's binary spec and the classes.

    Its fingerprint changes with either, so summaries made under other classes never merge
    (a config that adds a class leaves the older windows out of a rollup, as a changed
    ``summaries:`` does).

    >>> a = MulticlassSpec(SummarySpec(), ("low", "high"))
    >>> a.fingerprint == MulticlassSpec(SummarySpec(), ("low", "high")).fingerprint
    True
    >>> a.fingerprint == MulticlassSpec(SummarySpec(), ("low", "mid", "high")).fingerprint
    False
    """

    base: SummarySpec
    classes: tuple[Any, ...]

    @property
    def fingerprint(self) -> str:
        """Hash of the binary spec's fingerprint and the classes (with their types)."""
        text = json.dumps({"base": self.base.fingerprint, "classes": _tagged(self.classes)})
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def sample_size(self) -> int:
        """Each class's row sample size."""
        return self.base.sample_size

    @property
    def max_raw(self) -> int | None:
        """Each class's raw-score limit."""
        return self.base.max_raw


@dataclass(frozen=True, eq=False)
class MulticlassSummary:
    """One binary :class:`~fairmonitor.summaries.WindowSummary` per class of a window.

    Parameters
    ----------
    parts : mapping of class label to WindowSummary
        Each class's one-vs-rest summary, in the order of the classes; all of the same rows
        (same counts, model and window).

    Examples
    --------
    >>> from fairmonitor.summaries import summarize
    >>> g = {"g": ["a", "a", "b"]}
    >>> s = MulticlassSummary({"x": summarize(g, y_pred=[1, 0, 0]),
    ...                        "y": summarize(g, y_pred=[0, 1, 1])})
    >>> merged = merge_all([s, s])
    >>> merged.classes, merged.n_rows, merged.parts["y"].attributes["g"].groups["b"].n
    (('x', 'y'), 6, 2)
    """

    parts: Mapping[Any, WindowSummary]

    def __post_init__(self) -> None:
        if len(self.parts) < 2:
            raise InvalidInputError("a multiclass summary needs at least two classes; got "
                                    f"{list(self.parts)}")
        rows = {s.n_rows for s in self.parts.values()}
        if len(rows) != 1:
            raise InvalidInputError(f"a multiclass summary's classes must summarize the same "
                                    f"rows; got row counts {sorted(rows)}")

    @property
    def classes(self) -> tuple[Any, ...]:
        """The class labels, in order."""
        return tuple(self.parts)

    @property
    def _first(self) -> WindowSummary:
        return next(iter(self.parts.values()))

    @property
    def spec(self) -> MulticlassSpec:
        """The classes' spec and the classes (their fingerprint)."""
        return MulticlassSpec(self._first.spec, self.classes)

    @property
    def n_rows(self) -> int:
        """Rows summarized (every class summarizes the same rows)."""
        return self._first.n_rows

    @property
    def inputs(self) -> tuple[str, ...]:
        """Which of y_true, y_pred, y_score the rows had."""
        return self._first.inputs

    @property
    def model(self) -> str:
        """The model's name."""
        return self._first.model

    @property
    def version(self) -> str:
        """The model version of the rows."""
        return self._first.version

    @property
    def start(self) -> datetime | None:
        """The window's start."""
        return self._first.start

    @property
    def end(self) -> datetime | None:
        """The window's end."""
        return self._first.end

    def merge(self, other: MulticlassSummary) -> MulticlassSummary:
        """Return the summary of both windows' rows, class by class."""
        return merge_all([self, other])  # type: ignore[return-value]

    def without_labels(self) -> MulticlassSummary:
        """Return the same rows without their labels, class by class."""
        return MulticlassSummary({c: s.without_labels() for c, s in self.parts.items()})

    def replace(self, **changes: Any) -> MulticlassSummary:
        """Return the summary with every class's fields changed (version, start, end...)."""
        return MulticlassSummary({c: dataclasses.replace(s, **changes)
                                  for c, s in self.parts.items()})

    def nbytes(self) -> int:
        """Bytes of the arrays every class's summary holds."""
        return sum(s.nbytes() for s in self.parts.values())


def replace(summary: Any, **changes: Any) -> Any:
    """Return a binary or multiclass summary with its fields (every class's) changed.

    >>> from fairmonitor.summaries import summarize
    >>> replace(summarize({"g": ["a"]}, y_pred=[1]), version="7").version
    '7'
    """
    if isinstance(summary, MulticlassSummary):
        return summary.replace(**changes)
    return dataclasses.replace(summary, **changes)


def merge_all(summaries: Sequence[Any]) -> Any:
    """Merge binary summaries (:func:`fairmonitor.summaries.merge_all`) or multiclass ones.

    Multiclass summaries merge class by class; they must share their classes (in order), and
    never mix with binary ones.
    """
    if not summaries or not any(isinstance(s, MulticlassSummary) for s in summaries):
        return _merge_binary(list(summaries))
    first = summaries[0]
    for other in summaries:
        if not isinstance(other, MulticlassSummary) or other.classes != first.classes:
            theirs = other.classes if isinstance(other, MulticlassSummary) else "binary"
            raise InvalidInputError(
                f"cannot merge a multiclass summary of classes {list(first.classes)} with one "
                f"of {theirs if isinstance(theirs, str) else list(theirs)}")
    return MulticlassSummary({c: _merge_binary([s.parts[c] for s in summaries])
                              for c in first.classes})


def to_bytes(summary: Any) -> bytes:
    """Return a binary or multiclass summary as bytes (module docstring)."""
    if not isinstance(summary, MulticlassSummary):
        return _binary_to_bytes(summary)
    blobs = [_binary_to_bytes(s) for s in summary.parts.values()]
    header = json.dumps({"format": _FORMAT, "version": _VERSION,
                         "classes": _tagged(summary.classes),
                         "sizes": [len(b) for b in blobs]}).encode()
    body = b"".join([_MAGIC, struct.pack("<Q", len(header)), header, *blobs])
    return body + _TRAILER + struct.pack("<I", zlib.crc32(body))


def from_bytes(data: bytes) -> Any:
    """Return the binary or multiclass summary of :func:`to_bytes`'s bytes, checked.

    Raises
    ------
    InvalidInputError
        The bytes are truncated, altered (checksum), or of an unknown format version.
    """
    data = bytes(data)
    if not data.startswith(_MAGIC):
        return _binary_from_bytes(data)
    body, trailer = data[:-8], data[-8:]
    if len(data) < 24 or trailer[:4] != _TRAILER or \
            struct.unpack("<I", trailer[4:])[0] != zlib.crc32(body):
        raise InvalidInputError("multiclass summary: checksum mismatch (truncated or altered "
                                "bytes)")
    (size,) = struct.unpack("<Q", body[8:16])
    header = json.loads(body[16:16 + size])
    if header.get("format") != _FORMAT or header.get("version") != _VERSION:
        raise InvalidInputError(f"multiclass summary of format {header.get('format')!r} "
                                f"version {header.get('version')!r}; this fairmonitor reads "
                                f"version {_VERSION}: re-summarize the window")
    at, parts = 16 + size, {}
    for label, n in zip(_untagged(header["classes"]), header["sizes"], strict=True):
        parts[label] = _binary_from_bytes(body[at:at + n])
        at += n
    if at != len(body):
        raise InvalidInputError("multiclass summary: its class parts do not fill its bytes")
    return MulticlassSummary(parts)
