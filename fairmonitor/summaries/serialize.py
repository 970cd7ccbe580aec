"""Summaries as bytes: versioned, with the spec's fingerprint, no pickle.

One ``.npz`` archive: a JSON header (format version, spec, fingerprint, attributes, group
labels, counts, moments) and one array per score summary and sample column. Loading checks the
version (a newer format is refused with the fix) and rebuilds an equal summary.
"""

from __future__ import annotations

import io
import json
from datetime import datetime
from typing import Any

import numpy as np

from ..exceptions import InvalidInputError
from .core import (
    SUMMARY_VERSION,
    AttributeSummary,
    GroupSummary,
    SummarySpec,
    WindowSummary,
)

__all__ = ["from_bytes", "to_bytes"]

_CELLS = ("index", "count", "sum", "min", "max")


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


def to_bytes(summary: WindowSummary) -> bytes:
    """Serialize ``summary`` (see :func:`from_bytes`).

    >>> from fairmonitor.summaries import summarize
    >>> s = summarize({"g": ["a", "b"]}, y_score=[0.25, 0.75])
    >>> from_bytes(to_bytes(s)).attributes["g"].groups["b"].scores.tolist()
    [0.75]
    """
    arrays: dict[str, np.ndarray] = {}
    attributes = []
    for a, attr in enumerate(summary.attributes.values()):
        groups = []
        for k, (label, g) in enumerate(attr.groups.items()):
            prefix = f"{a}/{k}/"
            if g.scores is not None:
                arrays[prefix + "scores"] = g.scores
            if g.cells is not None:
                for name, arr in zip(_CELLS, g.cells, strict=True):
                    if name == "count" and arr.size and arr.max() < 2**32:
                        arr = arr.astype(np.uint32)  # 4 bytes a cell; read back as int64
                    arrays[prefix + name] = arr
            arrays[prefix + "keys"] = g.sample_keys
            for c, col in g.sample.items():
                arrays[prefix + "sample/" + c] = col.astype(str) if col.dtype == object else col
            groups.append({"label": _label(label), "n": g.n, "pos": g.predicted_positive,
                           "confusion": g.confusion, "moments": g.moments,
                           "sample": list(g.sample)})
        attributes.append({"name": attr.name, "groups": groups})
    spec = summary.spec
    header = {
        "format": "fairmonitor-window-summary", "version": SUMMARY_VERSION,
        "fingerprint": spec.fingerprint,
        "spec": {"max_raw": spec.max_raw, "max_bins": spec.max_bins,
                 "sample_size": spec.sample_size},
        "n_rows": summary.n_rows, "inputs": list(summary.inputs),
        "features": list(summary.features), "model": summary.model, "version_": summary.version,
        "start": _time(summary.start), "end": _time(summary.end), "attributes": attributes,
    }
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    # not compressed: scores and sums barely compress, and inflating 24 hourly archives cost
    # more than the day's merge itself
    np.savez(buffer, allow_pickle=False, **arrays)
    return buffer.getvalue()


def from_bytes(data: bytes) -> WindowSummary:
    """Load a summary written by :func:`to_bytes`.

    Raises
    ------
    InvalidInputError
        Not a summary, or written by a newer format version, or its fingerprint does not
        match its spec (corrupted or hand-edited).
    """
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
        header = json.loads(archive["header"].tobytes().decode())
    except Exception as exc:
        raise InvalidInputError(f"not a fairmonitor window summary ({exc})") from None
    if header.get("format") != "fairmonitor-window-summary":
        raise InvalidInputError("not a fairmonitor window summary (no summary header)")
    if header["version"] != SUMMARY_VERSION:
        raise InvalidInputError(
            f"window summary format version {header['version']} is not readable by this "
            f"fairmonitor (format {SUMMARY_VERSION}); upgrade fairmonitor, or re-summarize "
            "the window's rows")
    spec = SummarySpec(**header["spec"])
    if spec.fingerprint != header["fingerprint"]:
        raise InvalidInputError(
            f"window summary fingerprint {header['fingerprint']} does not match its spec "
            f"({spec.fingerprint}); the data is corrupted: re-summarize the window")
    attributes = {}
    for a, attr in enumerate(header["attributes"]):
        groups = {}
        for k, g in enumerate(attr["groups"]):
            prefix = f"{a}/{k}/"
            scores = archive.get(prefix + "scores")
            cells = (tuple(archive[prefix + n].astype(np.int64) if n == "count"
                           else archive[prefix + n] for n in _CELLS)
                     if prefix + "index" in archive else None)
            groups[_unlabel(g["label"])] = GroupSummary(
                g["n"], g["pos"], None if g["confusion"] is None else tuple(g["confusion"]),
                None if g["moments"] is None else tuple(g["moments"]), scores, cells,
                archive[prefix + "keys"],
                {c: archive[prefix + "sample/" + c] for c in g["sample"]})
        attributes[attr["name"]] = AttributeSummary(attr["name"], groups)

    def when(text: str | None) -> datetime | None:
        return None if text is None else datetime.fromisoformat(text)

    return WindowSummary(spec, header["n_rows"], attributes, tuple(header["inputs"]),
                         tuple(header["features"]), header["model"], header["version_"],
                         when(header["start"]), when(header["end"]))
