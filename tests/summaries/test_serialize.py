"""The bytes format: a round trip gives an equal summary (raw scores, cells, samples of every
dtype, no scores at all), and blobs of another format version are refused with the fix."""

from __future__ import annotations

import io
import json
import struct

import numpy as np
import pytest

from fairmonitor import InvalidInputError
from fairmonitor.report import evaluate_summary
from fairmonitor.summaries import (
    SUMMARY_VERSION,
    SummarySpec,
    from_bytes,
    merge_all,
    summarize,
    to_bytes,
)

from .test_summaries import assert_same, rows


@pytest.mark.parametrize("max_raw", [None, 50, 1000])
def test_round_trip_raw_cells_and_mixed(max_raw):
    sf, score, label = rows(4_000, 3, groups=5)
    X = np.column_stack([score, label])
    spec = SummarySpec(max_raw=max_raw, sample_size=8)
    s = summarize(sf, y_score=score, y_true=label, X=X, spec=spec)
    back = from_bytes(to_bytes(s))
    assert_same(back, s, exact_sums=True)
    for attr in s.attributes.values():
        for label_, g in attr.groups.items():
            h = back.attributes[attr.name].groups[label_]
            assert h.sample_keys.dtype == np.uint64
            if g.cells is not None:
                assert [c.dtype for c in h.cells] == [c.dtype for c in g.cells]
            for c in g.sample:
                assert h.sample[c].dtype == g.sample[c].dtype
    assert back.spec == s.spec and back.inputs == s.inputs and back.features == s.features
    # a merge of loaded summaries (read-only views) is the merge of the summaries
    assert_same(merge_all([back, back]), merge_all([s, s]), exact_sums=True)
    assert evaluate_summary(back).values.keys() == evaluate_summary(s).values.keys()


def test_round_trip_without_scores_and_with_string_samples():
    s = summarize({"g": np.array(["a", "bb", "a"], dtype=object)}, y_pred=[1, 0, 1],
                  X=np.array([["x", "yy"], ["z", "w"], ["u", "v"]], dtype=object))
    back = from_bytes(to_bytes(s))
    counts = [(g.n, g.predicted_positive, g.scores, g.cells)
              for g in back.attributes["g"].groups.values()]
    assert counts == [(2, 2, None, None), (1, 0, None, None)]
    assert back.attributes["g"].groups["bb"].sample["x:1"].tolist() == ["w"]
    for label, g in s.attributes["g"].groups.items():
        for c, col in g.sample.items():
            assert back.attributes["g"].groups[label].sample[c].tolist() == col.tolist()


def test_old_format_version_is_refused_with_the_fix():
    header = {"format": "fairmonitor-window-summary", "version": 1}
    buffer = io.BytesIO()
    np.savez(buffer, header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))
    with pytest.raises(InvalidInputError, match="version 1 was written by an older "
                       "fairmonitor.*re-summarize the window's rows"):
        from_bytes(buffer.getvalue())


def test_format_2_blob_is_refused_with_the_fix():
    """Format 2 (32-byte cells: index, count, sum, min, max) is not read: re-summarize."""
    blob = to_bytes(summarize({"g": ["a", "b"]}, y_pred=[1, 0]))
    size = struct.unpack_from("<Q", blob, 8)[0]
    header = json.loads(blob[16:16 + size])
    header["version"] = 2
    text = json.dumps(header).encode()
    older = blob[:8] + struct.pack("<Q", len(text)) + text
    with pytest.raises(InvalidInputError, match="version 2 was written by an older "
                       "fairmonitor.*re-summarize the window's rows"):
        from_bytes(older)


def test_newer_format_version_is_refused_with_the_fix():
    blob = to_bytes(summarize({"g": ["a", "b"]}, y_pred=[1, 0]))
    size = struct.unpack_from("<Q", blob, 8)[0]
    header = json.loads(blob[16:16 + size])
    header["version"] = SUMMARY_VERSION + 1
    text = json.dumps(header).encode()
    newer = blob[:8] + struct.pack("<Q", len(text)) + text
    with pytest.raises(InvalidInputError, match="upgrade fairmonitor"):
        from_bytes(newer)


@pytest.mark.parametrize("data", [b"", b"PK\x03\x04 not a zip", b"FMWSUM\x00\x00\x05"])
def test_not_a_summary(data):
    with pytest.raises(InvalidInputError, match="not a fairmonitor window summary"):
        from_bytes(data)


def test_truncated_blob_is_refused():
    sf, score, label = rows(500, 2)
    blob = to_bytes(summarize(sf, y_score=score, spec=SummarySpec(max_raw=10)))
    with pytest.raises(InvalidInputError, match="truncated"):
        from_bytes(blob[:-100])
