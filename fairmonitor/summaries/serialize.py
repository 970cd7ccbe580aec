"""Summaries as bytes: versioned, with the spec's fingerprint, no pickle.

Format 4 (format 3 is still read): an 8-byte magic, the length of a JSON header
(little-endian uint64), the header (format version, spec, fingerprint, attributes, group labels,
counts, moments, and where each array block lies), then the blocks, each 8-byte aligned. An
attribute's arrays are stored as a few contiguous blocks, every group's part one after the
other: its raw scores, its cells, its sample keys and each sample column. Loading is then a
handful of ``np.frombuffer`` calls per attribute (no copy but the raw scores' decoding; each
group's other arrays are read-only views of the blocks), not one archive member per group
(format 1, an ``.npz``: its per-member parsing cost more than the day's merge).

Raw scores (format 4), exactly: each score's low 48 bits (6 bytes) and the runs of the high 16
(sign, exponent, 4 bits of the mantissa; a uint16 value and a uint32 length a run): a group's
scores are sorted, so those change ~16 times a binade (~100 runs for 10^4 scores in [0, 1]),
~6 bytes a score instead of 8; a block whose runs would not pay stays plain float64. Loading
decodes them (numpy, a copy: ~1 ms per 10^5 scores); format 3 stored plain float64 blocks.

A group's cells (:class:`~fairmonitor.summaries.core.CompactCells`), 11 or 12 bytes a
non-empty cell (format 2: 32, an int32 index, a uint32 count and a float64 sum, min and max):

- a bitmap of the grid's cells, ``ceil(cells / 8)`` bytes (12 KB), bit ``k % 8`` of byte
  ``k // 8`` set where cell ``k`` is not empty;
- the counts, in the narrowest of uint8 / uint16 / uint32 / int64 that holds the attribute's
  largest (uint8, or uint16 once a cell holds 256 scores in an hour);
- the sums, float64;
- the bounds ``qlo`` and ``qhi``, uint8: the scores' min and max quantized outward to 1/255
  of the cell's width when summarized (the same numbers in memory: lossless).

An attribute derived from the intersection (:class:`~fairmonitor.summaries.core.
DerivedGroups`: with several attributes and their intersection, each attribute's group is a
union of intersection groups) stores its groups' counts and moments in the header and no
block: its scores and row sample are the intersection's groups', merged on read. The finest
groups are stored once, not once per attribute (format 3 stored each attribute's groups in
full: an hour with two attributes and their intersection three copies of its scores).

Loaded cells stay in that form (views of the blocks); merging reads it directly, and the
tuple form is decoded only when read (no per-group decoding when loading).

Loading checks the format version: format 3 (every attribute stored in full) is read as it is,
and merges with format 4 (same fingerprint: the numbers mean the same); an older or a newer
format is refused with the fix (re-summarize, or upgrade fairmonitor).

Checksum: the header says ``"checksum": "crc32"`` and an 8-byte trailer follows the data
(``FMCK`` and the CRC-32 of every byte before it, little-endian uint32), so a changed count in
the header, a flipped bit in a block or a truncated file is refused on load. The trailer comes
after every block, so a reader that predates it still reads the summary; a summary written
before it (no ``checksum`` in its header) is still read, unchecked. The summary's identity
(model, window start and end) is in its header; the monitor compares it with where the summary
is stored (``monitor/rollups.py``).
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..exceptions import InvalidInputError
from .core import (
    SUMMARY_VERSION,
    AttributeSummary,
    CompactCells,
    DerivedGroups,
    GroupSummary,
    SummarySpec,
    WindowSummary,
    cell_edges,
)

__all__ = ["from_bytes", "to_bytes"]

_MAGIC = b"FMWSUM\x00\x00"
_FORMAT = "fairmonitor-window-summary"
_TRAILER = b"FMCK"
#: Formats this fairmonitor reads (3: every attribute's groups stored in full).
_READABLE = (3, SUMMARY_VERSION)


def _label(value: Any) -> Any:
    if isinstance(value, tuple):
        return ["t", [_label(v) for v in value]]
    if isinstance(value, bool):
        return ["b", value]
    if isinstance(value, int):
        return ["i", value]
    if isinstance(value, float):
        return ["f", value]
    return ["s", str(value)]


def _unlabel(tagged: Any) -> Any:
    kind, value = tagged
    if kind == "t":
        return tuple(_unlabel(v) for v in value)
    return {"b": bool, "i": int, "f": float, "s": str}[kind](value)


def _time(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


class _Blocks:
    """The data area being written: arrays laid out 8-byte aligned, described by the header."""

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.table: list[list[Any]] = []  # [dtype, offset, count] per block
        self.size = 0

    def add(self, parts: list[NDArray[Any]]) -> int:
        """One block: ``parts`` concatenated (same dtype). Returns its number."""
        arr = parts[0] if len(parts) == 1 else np.concatenate(parts)
        arr = np.ascontiguousarray(arr)
        self.table.append([arr.dtype.str, self.size, int(arr.size)])
        if arr.nbytes:
            self.parts.append(memoryview(arr).cast("B"))
            pad = -arr.nbytes % 8
            if pad:
                self.parts.append(b"\x00" * pad)
            self.size += arr.nbytes + pad
        return len(self.table) - 1


def _sample_column(col: NDArray[Any]) -> NDArray[Any]:
    return col.astype(str) if col.dtype == object else col


def to_bytes(summary: WindowSummary) -> bytes:
    """Serialize ``summary`` (see :func:`from_bytes`).

    >>> from fairmonitor.summaries import summarize
    >>> s = summarize({"g": ["a", "b"]}, y_score=[0.25, 0.75])
    >>> from_bytes(to_bytes(s)).attributes["g"].groups["b"].scores.tolist()
    [0.75]
    """
    blocks = _Blocks()
    attributes = [_attribute_entry(attr, blocks) for attr in summary.attributes.values()]
    spec = summary.spec
    header = {
        "format": _FORMAT, "version": SUMMARY_VERSION, "fingerprint": spec.fingerprint,
        "spec": {"max_raw": spec.max_raw, "max_bins": spec.max_bins,
                 "sample_size": spec.sample_size},
        "n_rows": summary.n_rows, "inputs": list(summary.inputs),
        "features": list(summary.features), "model": summary.model, "version_": summary.version,
        "start": _time(summary.start), "end": _time(summary.end), "attributes": attributes,
        "blocks": blocks.table, "checksum": "crc32",
    }
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data area starts 8-byte aligned
    out = io.BytesIO()
    out.write(_MAGIC)
    out.write(struct.pack("<Q", len(text)))
    out.write(text)
    for part in blocks.parts:
        out.write(part)
    body = out.getvalue()
    return body + _TRAILER + struct.pack("<I", zlib.crc32(body))


def _attribute_entry(attr: Any, blocks: _Blocks) -> dict[str, Any]:
    """Return an attribute's header entry; its arrays go to ``blocks`` (in this order)."""
    entry: dict[str, Any] = {"name": attr.name}
    if isinstance(attr.groups, DerivedGroups):  # counts only: the rest is the intersection's
        entry["parent"] = list(attr.parent)
        entry["groups"] = [_head_entry(label, g) for label, g in attr.groups.heads.items()]
        return entry
    values = list(attr.groups.values())
    raw = [g.scores for g in values if g.scores is not None]
    cells = [g.cells for g in values if g.cells is not None]
    if raw:
        entry["scores"] = _raw_blocks(np.concatenate(raw) if len(raw) > 1 else raw[0],
                                      blocks)
    if cells:
        entry["cells"] = _cell_blocks(cells, blocks)
    entry["keys"] = blocks.add([g.sample_keys.astype(np.uint64, copy=False)
                                for g in values] or [np.zeros(0, np.uint64)])
    columns = list(values[0].sample) if values else []
    if any(list(g.sample) != columns for g in values):
        raise InvalidInputError("the groups of an attribute must sample the same columns")
    entry["sample"] = {}
    for c in columns:
        parts = [_sample_column(g.sample[c]) for g in values]
        kinds = {p.dtype.kind for p in parts}
        if len(kinds) > 1 or kinds & {"O", "V"}:
            raise InvalidInputError(f"sample column {c!r} mixes dtypes {sorted(kinds)}")
        entry["sample"][c] = blocks.add(parts)
    entry["groups"] = [_group_entry(label, g, columns) for label, g in attr.groups.items()]
    return entry


#: Bits of a raw score stored per score (its low 48); the high 16 (sign, exponent and 4
#: bits of the mantissa) as runs: the groups' scores are sorted, so they change a few
#: hundred times a group (16 steps a binade), not once a score.
_LOW_BITS = 48


def _raw_blocks(scores: NDArray[np.float64], blocks: _Blocks) -> int | dict[str, Any]:
    """Add the groups' raw scores to ``blocks``, exactly; return the header's reference.

    Run-length coded high 16 bits (values uint16, lengths uint32) and the low 48 bits (6
    bytes a score): 6 bytes a score instead of 8, lossless, when the runs are few (sorted
    scores: a group of 10^4 rows in [0, 1] has ~100); otherwise the plain float64 block.
    """
    bits = np.ascontiguousarray(scores, dtype="<f8").view("<u8")
    high = (bits >> np.uint64(_LOW_BITS)).astype("<u2")
    starts = np.flatnonzero(np.r_[True, high[1:] != high[:-1]]) if high.size else high[:0]
    if 6 * starts.size >= 2 * bits.size * 0.9:  # runs cost more than they save
        return blocks.add([bits.view("<f8")])
    lengths = np.diff(np.r_[starts, bits.size]).astype("<u4")
    low = bits.view(np.uint8).reshape(-1, 8)[:, :_LOW_BITS // 8]
    return {"codec": "hi16rle", "blocks": [blocks.add([high[starts]]), blocks.add([lengths]),
                                           blocks.add([low.ravel()])]}


def _read_raw(ref: Any, block: _BlockReader) -> NDArray[np.float64]:
    """Return the raw scores a header's reference points to (see :func:`_raw_blocks`)."""
    if not isinstance(ref, dict):  # a plain float64 block (format 3, and runs not worth it)
        return block(ref)
    if ref.get("codec") != "hi16rle":
        raise InvalidInputError(f"window summary codec {ref.get('codec')!r} is not known to this "
                                "fairmonitor; upgrade fairmonitor, or re-summarize the window")
    values, lengths, low = (block(k) for k in ref["blocks"])
    size = int(lengths.sum(dtype=np.int64))
    width = _LOW_BITS // 8
    if values.size != lengths.size or low.size != size * width:
        raise InvalidInputError("window summary scores are inconsistent: the data is "
                                "corrupted; re-summarize the window")
    bits = np.zeros((size, 8), dtype=np.uint8)
    bits[:, :width] = low.reshape(size, width)
    out = bits.view("<u8").ravel() | (np.repeat(values.astype("<u8"), lengths)
                                      << np.uint64(_LOW_BITS))
    scores = out.view("<f8").astype(np.float64, copy=False)
    scores.flags.writeable = False  # as the views of the other blocks
    return scores


def _cell_blocks(cells: list[Any], blocks: _Blocks) -> list[int]:
    """Add the groups' cell arrays to ``blocks``; return their block numbers."""
    # the narrowest count type the block needs (most cells of an hour hold a few
    # scores: 1 byte); the merge reads any
    top = max(int(c.count.max()) if c.size else 0 for c in cells)
    dtype = next((t for t in (np.uint8, np.uint16, np.uint32)
                  if top <= np.iinfo(t).max), np.int64)
    return [blocks.add([c.bitmap for c in cells]),
            blocks.add([c.count.astype(dtype, copy=False) for c in cells]),
            blocks.add([c.total.astype(np.float64, copy=False) for c in cells]),
            blocks.add([c.qlo for c in cells]),
            blocks.add([c.qhi for c in cells])]


def _head_entry(label: Any, g: Any) -> dict[str, Any]:
    """Return a derived group's header entry: its counts and moments."""
    return {"label": _label(label), "n": g.n, "pos": g.predicted_positive,
            "confusion": g.confusion, "moments": g.moments}


def _group_entry(label: Any, g: Any, columns: list[Any]) -> dict[str, Any]:
    """Return a group's header entry: counts, and where its arrays are in the blocks."""
    if g.scores is not None:
        mode, size = "raw", int(g.scores.size)
    elif g.cells is not None:
        mode, size = "cells", int(g.cells.size)
    else:
        mode, size = None, 0
    return {
        "label": _label(label), "n": g.n, "pos": g.predicted_positive,
        "confusion": g.confusion, "moments": g.moments,
        # which score summary, and its length (scores or cells) in the block
        "mode": mode, "size": size,
        "keys": int(g.sample_keys.size),
        "dtypes": [_sample_column(g.sample[c]).dtype.str for c in columns]}


def _refuse(version: Any) -> InvalidInputError:
    if isinstance(version, int) and version < min(_READABLE):
        return InvalidInputError(
            f"window summary format version {version} was written by an older fairmonitor; "
            f"this one reads formats {min(_READABLE)} to {SUMMARY_VERSION} only (summaries "
            "are not converted between formats): re-summarize the window's rows")
    return InvalidInputError(
        f"window summary format version {version} is not readable by this fairmonitor "
        f"(format {SUMMARY_VERSION}); upgrade fairmonitor, or re-summarize the window's rows")


def _old_version(data: bytes) -> Any:
    """Read the format version of a format-1 archive (an ``.npz``); raise if not a summary."""
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
        header = json.loads(archive["header"].tobytes().decode())
    except Exception as exc:
        raise InvalidInputError(f"not a fairmonitor window summary ({exc})") from None
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        raise InvalidInputError("not a fairmonitor window summary (no summary header)")
    return header.get("version")


def _header(data: bytes) -> dict[str, Any]:
    if data[:2] == b"PK":  # a zip archive: format 1 (.npz)
        raise _refuse(_old_version(data))
    if data[:len(_MAGIC)] != _MAGIC or len(data) < len(_MAGIC) + 8:
        raise InvalidInputError("not a fairmonitor window summary (no summary header)")
    (size,) = struct.unpack_from("<Q", data, len(_MAGIC))
    start = len(_MAGIC) + 8
    try:
        header = json.loads(data[start:start + size].decode())
    except Exception as exc:
        raise InvalidInputError(f"not a fairmonitor window summary ({exc})") from None
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        raise InvalidInputError("not a fairmonitor window summary (no summary header)")
    if header.get("version") not in _READABLE:
        raise _refuse(header.get("version"))
    if "checksum" in header:
        _check(data, header["checksum"])
    header["_data"] = start + size
    return header


def _check(data: bytes, kind: Any) -> None:
    """Compare the trailer's CRC-32 with the bytes before it."""
    if kind != "crc32":
        raise InvalidInputError(f"window summary checksum {kind!r} is not known to this "
                                "fairmonitor; upgrade fairmonitor, or re-summarize the window")
    trailer = data[-8:]
    if len(data) < 8 or trailer[:4] != _TRAILER:
        raise InvalidInputError("window summary is truncated (no checksum trailer): the data is "
                                "corrupted; re-summarize the window")
    (stored,) = struct.unpack("<I", trailer[4:])
    actual = zlib.crc32(memoryview(data)[:-8])
    if actual != stored:
        raise InvalidInputError(f"window summary checksum mismatch (stored {stored:08x}, "
                                f"computed {actual:08x}): the data is corrupted; re-summarize "
                                "the window")


def from_bytes(data: bytes) -> WindowSummary:
    """Load a summary written by :func:`to_bytes`.

    The groups' arrays are read-only views of ``data``.

    Raises
    ------
    InvalidInputError
        Not a summary, or written in another format version (older: re-summarize; newer:
        upgrade), or its checksum or fingerprint does not match (corrupted, truncated or
        hand-edited).
    """
    data = bytes(data) if not isinstance(data, bytes) else data
    header = _header(data)
    spec = SummarySpec(**header["spec"])
    if spec.fingerprint != header["fingerprint"]:
        raise InvalidInputError(
            f"window summary fingerprint {header['fingerprint']} does not match its spec "
            f"({spec.fingerprint}); the data is corrupted: re-summarize the window")
    block = _BlockReader(data, header["_data"], header["blocks"])
    edges = cell_edges(spec.max_bins)
    width = -(-(edges.size - 1) // 8)  # bytes of a group's bitmap
    attributes: dict[str, AttributeSummary] = {}
    # the intersection first: the attributes derived from it read its groups
    for attr in sorted(header["attributes"], key=lambda a: "parent" in a):
        attributes[attr["name"]] = (_read_derived(attr, attributes, spec) if "parent" in attr
                                    else _read_attribute(attr, block, edges, width))
    attributes = {attr["name"]: attributes[attr["name"]] for attr in header["attributes"]}

    def when(text: str | None) -> datetime | None:
        return None if text is None else datetime.fromisoformat(text)

    return WindowSummary(spec, header["n_rows"], attributes, tuple(header["inputs"]),
                         tuple(header["features"]), header["model"], header["version_"],
                         when(header["start"]), when(header["end"]))


class _BlockReader:
    """``reader(k)``: block ``k`` of ``data`` as a read-only array view (truncation refused)."""

    def __init__(self, data: bytes, base: int, table: list[list[Any]]) -> None:
        self.data, self.base, self.table = data, base, table

    def __call__(self, k: int) -> NDArray[Any]:
        dtype, offset, count = self.table[k]
        if self.base + offset + count * np.dtype(dtype).itemsize > len(self.data):
            raise InvalidInputError("window summary is truncated: re-summarize the window")
        if not count:
            return np.zeros(0, dtype=dtype)
        return np.frombuffer(self.data, dtype=dtype, count=count, offset=self.base + offset)


def _read_derived(attr: Mapping[str, Any], attributes: Mapping[str, AttributeSummary],
                  spec: SummarySpec) -> AttributeSummary:
    """Return an attribute derived from the intersection, from its groups' header entries."""
    parent = attr["parent"]
    if (not isinstance(parent, list) or len(parent) != 2 or parent[0] not in attributes
            or attributes[parent[0]].parent is not None):
        raise InvalidInputError(f"window summary attribute {attr['name']!r} derives from "
                                f"{parent!r}, which it does not hold: the data is corrupted; "
                                "re-summarize the window")
    source = attributes[parent[0]]
    columns = next(iter(source.groups.values())).sample if source.groups else {}
    heads = {_unlabel(g["label"]): GroupSummary(
        g["n"], g["pos"], None if g["confusion"] is None else tuple(g["confusion"]),
        None if g["moments"] is None else tuple(g["moments"]), None, None,
        np.zeros(0, dtype=np.uint64), {c: v[:0] for c, v in columns.items()})
        for g in attr["groups"]}
    try:
        groups = DerivedGroups(heads, source, int(parent[1]), spec)
    except (KeyError, IndexError, TypeError):
        raise InvalidInputError(f"window summary attribute {attr['name']!r} does not match "
                                "its intersection's groups: the data is corrupted; "
                                "re-summarize the window") from None
    return AttributeSummary(attr["name"], groups, (parent[0], int(parent[1])))


@dataclass
class _Cursor:
    """Where the next group's part starts in each of an attribute's blocks."""

    raw: int = 0
    cells: int = 0
    bitmap: int = 0
    keys: int = 0


def _read_attribute(attr: Mapping[str, Any], block: _BlockReader, edges: NDArray[Any],
                    width: int) -> AttributeSummary:
    """Return one attribute of a summary from its header entry and blocks."""
    entries = attr["groups"]
    scores = _read_raw(attr["scores"], block) if "scores" in attr else None
    cells = None
    if "cells" in attr:
        cells = [block(k) for k in attr["cells"]]
        groups_ = [g["size"] for g in entries if g["mode"] == "cells"]
        if cells[0].size != len(groups_) * width or {c.size for c in cells[1:]} != {
                sum(groups_)}:
            raise InvalidInputError(
                "window summary cells are inconsistent: the data is corrupted; "
                "re-summarize the window")
    keys = block(attr["keys"])
    columns = {c: block(k) for c, k in attr["sample"].items()}
    at = _Cursor()
    groups = {}
    for g in entries:
        groups[_unlabel(g["label"])] = _read_group(g, scores, cells, keys, columns, edges,
                                                   width, at)
    return AttributeSummary(attr["name"], groups)


def _read_group(g: Mapping[str, Any], scores: NDArray[Any] | None,
                cells: list[NDArray[Any]] | None, keys: NDArray[Any],
                columns: Mapping[str, NDArray[Any]], edges: NDArray[Any], width: int,
                at: _Cursor) -> GroupSummary:
    """Return one group from its header entry and its attribute's blocks; move ``at`` on."""
    size, mode = g["size"], g["mode"]
    raw_part = cell_part = None
    if mode == "raw":
        raw_part = scores[at.raw:at.raw + size]  # type: ignore[index]
        at.raw += size
    elif mode == "cells":  # views of the blocks: the merge reads them as they are
        count, total, qlo, qhi = (c[at.cells:at.cells + size]
                                  for c in cells[1:])  # type: ignore[index]
        cell_part = CompactCells(
            edges, count, total, qlo, qhi,
            bitmap=cells[0][at.bitmap:at.bitmap + width])  # type: ignore[index]
        at.cells += size
        at.bitmap += width
    m = g["keys"]
    sample = {}
    for (c, col), dtype in zip(columns.items(), g["dtypes"], strict=True):
        part = col[at.keys:at.keys + m]
        sample[c] = part if part.dtype.str == dtype else part.astype(dtype)
    group = GroupSummary(
        g["n"], g["pos"], None if g["confusion"] is None else tuple(g["confusion"]),
        None if g["moments"] is None else tuple(g["moments"]), raw_part,
        cell_part, keys[at.keys:at.keys + m], sample)  # type: ignore[arg-type]
    at.keys += m
    return group
