"""Summaries as bytes: versioned, with the spec's fingerprint, no pickle.

Format 5 (formats 3 and 4 are still read): an 8-byte magic, the length of a JSON header
(little-endian uint64), the header (format version, spec, fingerprint, attributes, group labels,
counts, moments, and where each array block lies), then the blocks, each 8-byte aligned. An
attribute's arrays are stored as a few contiguous blocks, every group's part one after the
other: its raw scores, its cells, its sample keys and each sample column. Loading is then a
handful of ``np.frombuffer`` calls (or decompressions) per attribute, not one archive member
per group (format 1, an ``.npz``: its per-member parsing cost more than the day's merge).

Raw scores (formats 4 and 5), exactly: each score's low 48 bits (6 bytes) and the runs of the
high 16 (sign, exponent, 4 bits of the mantissa; a uint16 value and a uint32 length a run): a
group's scores are sorted, so those change ~16 times a binade (~100 runs for 10^4 scores in
[0, 1]), ~6 bytes a score instead of 8; a block whose runs would not pay stays plain float64.
Loading decodes them (numpy, a copy: ~1 ms per 10^5 scores); format 3 stored plain float64.

A group's cells (:class:`~fairmonitor.summaries.core.CompactCells`), format 5: ~3.5 bytes a
non-empty cell (format 4: 11-12 and a 12 KB bitmap a group; format 2: 32). Five blocks per
attribute, each a *packed* block (its table entry ends with the stored length of each byte
plane): the values' bytes shuffled (every value's byte 0, then byte 1, ...) and each plane
compressed with zlib at level 1, or stored (level 0) where a probe of its first 4 KB says it
does not compress (the low bytes of the step sums: a score's position within its step is
noise). The blocks:

- the gap from the previous non-empty cell's index (the first: index + 1), narrowest type;
- the counts, narrowest type;
- the step sums (:attr:`CompactCells.ksum`), narrowest type;
- the bounds ``qlo`` and ``qhi`` (uint8) of the cells holding two scores or more only: a
  cell of one score has the bounds of its step (:func:`~.core._step_bounds`), re-made on load
  exactly as summarizing made them.

Loading decompresses them into the same arrays the summary held in memory (a round trip is
lossless, and re-serializing gives the same bytes). Formats 3 and 4 stored per cell a bitmap
bit, the count, the float64 sum and the bounds; their cells are converted on load
(:func:`_converted_cells`: a cell of one score gets its score's step, as summarizing it now
does; of several, the step sum nearest the float sum and the stored bounds), so they merge
with format 5's: their fingerprint is checked as content version 3 and then becomes the
current one.

An attribute derived from the intersection (:class:`~fairmonitor.summaries.core.
DerivedGroups`: with several attributes and their intersection, each attribute's group is a
union of intersection groups) stores its groups' counts and moments in the header and no
block: its scores and row sample are the intersection's groups', merged on read. The finest
groups are stored once, not once per attribute (format 3 stored each attribute's groups in
full: an hour with two attributes and their intersection three copies of its scores).

Loaded cells' sums and bounds are decoded to floats only when read (merging reads the
integers as they are).

Loading checks the format version: formats 3 (every attribute stored in full) and 4 are read
(cells converted, above) and merge with format 5; an older or a newer format is refused with
the fix (re-summarize, or upgrade fairmonitor).

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
    STEP_BITS,
    SUMMARY_VERSION,
    AttributeSummary,
    CompactCells,
    DerivedGroups,
    GroupSummary,
    SummarySpec,
    WindowSummary,
    _step_bounds,
    cell_edges,
)

__all__ = ["from_bytes", "to_bytes"]

_MAGIC = b"FMWSUM\x00\x00"
_FORMAT = "fairmonitor-window-summary"
_TRAILER = b"FMCK"
#: Formats this fairmonitor reads (3: every attribute's groups stored in full; 3 and 4: cells
#: with float sums, converted to step sums on load).
_READABLE = (3, 4, SUMMARY_VERSION)


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

    def add_packed(self, parts: list[NDArray[Any]]) -> int:
        """Add one block, its bytes shuffled and each byte plane compressed; return its number.

        Byte ``i`` of every value, then byte ``i + 1``...: the high bytes of small counts and
        steps, mostly zero, cost almost nothing under zlib. A plane that does not compress
        (a probe of its first 4 KB saves < 10%: the low bytes of the step sums) is stored
        (zlib's level 0, as fast as a copy). The table gives each plane's stored length.
        """
        arr = np.ascontiguousarray(parts[0] if len(parts) == 1 else np.concatenate(parts))
        planes = arr.view(np.uint8).reshape(-1, arr.dtype.itemsize).T
        packed = [_pack(np.ascontiguousarray(plane).tobytes()) for plane in planes]
        self.table.append([arr.dtype.str, self.size, int(arr.size), [len(p) for p in packed]])
        stored = sum(len(p) for p in packed)
        self.parts.extend(packed)
        pad = -stored % 8
        if pad:
            self.parts.append(b"\x00" * pad)
        self.size += stored + pad
        return len(self.table) - 1


def _pack(plane: bytes) -> bytes:
    """Compress a byte plane (zlib level 1), or store it (level 0) if a probe says so."""
    probe = plane[:_PROBE]
    level = _LEVEL if len(zlib.compress(probe, _LEVEL)) < 0.9 * len(probe) else 0
    return zlib.compress(plane, level)


#: Bytes of a plane compressed to decide whether to compress it.
_PROBE = 4096
#: zlib's level for the cells' blocks: the fastest (level 6 saves ~3% more, at 4x the time).
_LEVEL = 1


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


def _narrow(values: NDArray[Any]) -> NDArray[Any]:
    """``values`` (non-negative integers) in the narrowest unsigned type that holds them."""
    top = int(values.max()) if values.size else 0
    dtype = next((t for t in (np.uint8, np.uint16, np.uint32) if top <= np.iinfo(t).max),
                 np.int64)
    return values.astype(dtype, copy=False)


def _cell_blocks(cells: list[Any], blocks: _Blocks) -> dict[str, Any]:
    """Add the groups' cells to ``blocks`` (format 5); return the header's reference.

    Per cell: the gap to the previous non-empty cell's index, the count and the step sum,
    each in the narrowest type, shuffled and compressed; the bounds of cells holding two
    or more scores only (a single score's are its step's, derived on load).
    """
    gaps = [np.diff(c.index, prepend=np.int32(-1)) for c in cells]
    several = [c.count > 1 for c in cells]
    return {"codec": "steps", "blocks": [
        blocks.add_packed([_narrow(np.concatenate(gaps))]),
        blocks.add_packed([_narrow(np.concatenate([c.count for c in cells]))]),
        blocks.add_packed([_narrow(np.concatenate([c.ksum for c in cells]))]),
        blocks.add_packed([c.qlo[m] for c, m in zip(cells, several, strict=True)]),
        blocks.add_packed([c.qhi[m] for c, m in zip(cells, several, strict=True)])]}


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
    # formats 3 and 4 hold content version 3 (float cell sums), converted below
    expected = spec.fingerprint_of(3) if header["version"] < 5 else spec.fingerprint
    if expected != header["fingerprint"]:
        raise InvalidInputError(
            f"window summary fingerprint {header['fingerprint']} does not match its spec "
            f"({expected}); the data is corrupted: re-summarize the window")
    block = _BlockReader(data, header["_data"], header["blocks"])
    edges = cell_edges(spec.max_bins)
    attributes: dict[str, AttributeSummary] = {}
    # the intersection first: the attributes derived from it read its groups
    for attr in sorted(header["attributes"], key=lambda a: "parent" in a):
        attributes[attr["name"]] = (_read_derived(attr, attributes, spec) if "parent" in attr
                                    else _read_attribute(attr, block, edges))
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
        dtype, offset, count, *packed = self.table[k]
        size = count * np.dtype(dtype).itemsize
        stored = sum(packed[0]) if packed else size
        if self.base + offset + stored > len(self.data):
            raise InvalidInputError("window summary is truncated: re-summarize the window")
        if not count:
            return np.zeros(0, dtype=dtype)
        if not packed:
            return np.frombuffer(self.data, dtype=dtype, count=count, offset=self.base + offset)
        return self._unpacked(np.dtype(dtype), self.base + offset, count, packed[0])

    def _unpacked(self, dtype: np.dtype[Any], start: int, count: int, lengths: list[int]
                  ) -> NDArray[Any]:
        """Return a block of byte planes, each compressed (:meth:`_Blocks.add_packed`)."""
        if len(lengths) != dtype.itemsize:
            raise _corrupt_block()
        out = np.empty((count, dtype.itemsize), dtype=np.uint8)
        view = memoryview(self.data)
        for plane, length in enumerate(lengths):
            try:
                raw = zlib.decompress(view[start:start + length])
            except zlib.error:
                raise _corrupt_block() from None
            if len(raw) != count:
                raise _corrupt_block()
            out[:, plane] = np.frombuffer(raw, dtype=np.uint8)
            start += length
        return out.view(dtype).ravel()


def _corrupt_block() -> InvalidInputError:
    return InvalidInputError("window summary block does not decompress to its size: the data "
                             "is corrupted; re-summarize the window")


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
    keys: int = 0


def _corrupt_cells() -> InvalidInputError:
    return InvalidInputError("window summary cells are inconsistent: the data is corrupted; "
                             "re-summarize the window")


def _read_cells(ref: Any, block: _BlockReader, sizes: list[int], edges: NDArray[Any]
                ) -> list[CompactCells]:
    """Return the groups' cells a header's reference points to (format 5, or 3 and 4)."""
    if not isinstance(ref, dict):  # formats 3 and 4: bitmaps, float sums; converted
        return _converted_cells([block(k) for k in ref], sizes, edges)
    if ref.get("codec") != "steps":
        raise InvalidInputError(f"window summary codec {ref.get('codec')!r} is not known to this "
                                "fairmonitor; upgrade fairmonitor, or re-summarize the window")
    from .._kernels.cells import decode_cells

    gaps, count, ksum, qlo2, qhi2 = (block(k) for k in ref["blocks"])
    if {gaps.size, count.size, ksum.size} != {sum(sizes)}:
        raise _corrupt_cells()
    # one compiled pass: indices from the gaps, a single score's bounds from its step
    decoded = decode_cells(gaps.astype(np.int64), count.astype(np.int64),
                           ksum.astype(np.int64), qlo2, qhi2, np.array(sizes, dtype=np.int64),
                           edges, STEP_BITS)
    if decoded is None:
        raise _corrupt_cells()
    index, qlo, qhi = decoded
    wide = ksum.astype(np.int64, copy=False)
    out, at = [], 0
    for size in sizes:
        part = slice(at, at + size)
        out.append(CompactCells(edges, index[part], count[part], wide[part], qlo[part],
                                qhi[part]))
        at += size
    return out


def _converted_cells(blocks: list[NDArray[Any]], sizes: list[int], edges: NDArray[Any]
                     ) -> list[CompactCells]:
    """Return formats 3 and 4's cells (bitmap, count, float sum, bounds) as step sums.

    A cell of one score: its step, from the score (its sum), exactly as summarizing it now
    gives; of several: the sum's nearest step sum (within half a step of the float sum,
    inside the certified ``count * u``), the stored bounds kept.
    """
    bitmap, count, total, qlo, qhi = blocks
    width = -(-(edges.size - 1) // 8)
    if bitmap.size != len(sizes) * width or {b.size for b in blocks[1:]} != {sum(sizes)}:
        raise _corrupt_cells()
    out, at = [], 0
    top = (1 << STEP_BITS) - 1
    for k, size in enumerate(sizes):
        bits = np.unpackbits(bitmap[k * width:(k + 1) * width], count=edges.size - 1,
                             bitorder="little")
        index = np.flatnonzero(bits)
        if index.size != size:
            raise _corrupt_cells()
        c = count[at:at + size].astype(np.int64)
        t = total[at:at + size]
        left, right = edges[index], edges[index + 1]
        one = np.floor((t - left) * (np.ldexp(1.0, STEP_BITS) / (right - left)))
        several = np.rint((t - c * left) / np.ldexp(right - left, -STEP_BITS) - 0.5 * c)
        ksum = np.where(c == 1, np.clip(one, 0, top), np.clip(several, 0, c * top))
        ksum = ksum.astype(np.int64)
        low, high = _step_bounds(index, ksum, ksum, edges)
        single = c == 1
        lo, hi = qlo[at:at + size].copy(), qhi[at:at + size].copy()
        lo[single], hi[single] = low[single], high[single]
        out.append(CompactCells(edges, index, c, ksum, lo, hi))
        at += size
    return out


def _read_attribute(attr: Mapping[str, Any], block: _BlockReader, edges: NDArray[Any]
                    ) -> AttributeSummary:
    """Return one attribute of a summary from its header entry and blocks."""
    entries = attr["groups"]
    scores = _read_raw(attr["scores"], block) if "scores" in attr else None
    cells: Any = iter(())
    if "cells" in attr:
        cells = iter(_read_cells(attr["cells"], block,
                                 [g["size"] for g in entries if g["mode"] == "cells"], edges))
    keys = block(attr["keys"])
    columns = {c: block(k) for c, k in attr["sample"].items()}
    at = _Cursor()
    groups = {}
    for g in entries:
        groups[_unlabel(g["label"])] = _read_group(g, scores, cells, keys, columns, at)
    return AttributeSummary(attr["name"], groups)


def _read_group(g: Mapping[str, Any], scores: NDArray[Any] | None, cells: Any,
                keys: NDArray[Any], columns: Mapping[str, NDArray[Any]], at: _Cursor
                ) -> GroupSummary:
    """Return one group from its header entry and its attribute's blocks; move ``at`` on."""
    size, mode = g["size"], g["mode"]
    raw_part = cell_part = None
    if mode == "raw":
        raw_part = scores[at.raw:at.raw + size]  # type: ignore[index]
        at.raw += size
    elif mode == "cells":
        cell_part = next(cells, None)
        if cell_part is None:
            raise _corrupt_cells()
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
