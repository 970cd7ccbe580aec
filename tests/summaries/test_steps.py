"""Format 5: cells keep their sums as integer steps, stored compressed.

Checked here: merges of split summaries are the whole's cells bit for bit (integer counts
and step sums, bounds from the steps); the values against the row path (counts and MADD
exact, ABCC and ABPC within the certified errors the details report, those errors small at
10^5 rows a group); the certified errors hold against an oracle that moves every score
within its step on purpose (the worst case the bound covers); the byte round trip (any
sizes, hypothesis); and a summary written by format 4 (``tests/data/summary_format4.bin``,
made by fairmonitor at commit 1d04af8 from :func:`._format3_rows.rows` with
``SummarySpec(max_raw=300, sample_size=8)``) still loads, is converted, evaluates within
the certified errors and merges with format 5's.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairmonitor.metrics import abcc, abpc, madd
from fairmonitor.report import Window, evaluate_summary, evaluate_window
from fairmonitor.summaries import SummarySpec, from_bytes, merge_all, summarize, to_bytes
from fairmonitor.summaries.compute import abcc_from_summary, abpc_from_summary
from fairmonitor.summaries.core import STEP_BITS, cell_edges

from ._format3_rows import rows as fixture_rows
from .test_summaries import assert_same, rows

FIXTURE = Path(__file__).parents[1] / "data" / "summary_format4.bin"
SCORE_METRICS = ["abcc", "abpc", "madd"]


def _version(blob: bytes) -> int:
    (size,) = struct.unpack_from("<Q", blob, 8)
    return json.loads(blob[16:16 + size])["version"]


def _hour(n: int, seed: int):
    """Two attributes, scores full precision (a Beta), shifted by group."""
    rng = np.random.default_rng(seed)
    sf = {"sex": rng.choice(np.array(["F", "M"]), n),
          "race": rng.choice(np.array(list("abc")), n)}
    score = np.clip(rng.beta(2, 2, n) + np.where(sf["sex"] == "F", -0.05, 0.05), 0, 1)
    return sf, score


def test_merged_splits_are_the_whole_and_the_row_values_within_the_certified_errors():
    """Groups of ~10^5 rows kept as cells (above the default max_raw): stored parts merged
    give the whole's cells bit for bit; counts and MADD equal the row path, ABCC and ABPC
    within the errors their details certify, which stay below 1e-6 (measured ~1e-8)."""
    sf, score = _hour(600_000, 1)
    spec = SummarySpec(sample_size=0)
    whole = summarize(sf, y_score=score, spec=spec)
    assert all(g.cells is not None for g in whole.attributes["sex"].groups.values())
    cuts = np.array_split(np.random.default_rng(2).permutation(score.size), 3)
    parts = [from_bytes(to_bytes(summarize({k: v[c] for k, v in sf.items()},
                                           y_score=score[c], spec=spec))) for c in cuts]
    merged = merge_all(parts)
    assert_same(merged, whole, exact_sums=True)
    report = evaluate_summary(merged, metrics=SCORE_METRICS)
    rows_ = evaluate_window(Window(sf, y_score=score), metrics=SCORE_METRICS)
    for attr in ("sex", "race", "sex:race"):
        assert report.values[("madd", attr)] == rows_.values[("madd", attr)]
        for metric in ("abcc", "abpc"):
            detail = report.details[(metric, attr)]
            assert 0 < detail.error <= 1e-6, (metric, attr, detail.error)
            gap = abs(report.values[(metric, attr)] - rows_.values[(metric, attr)])
            assert gap <= detail.error + 1e-12, (metric, attr, gap, detail.error)


def _moved(score: np.ndarray, edges: np.ndarray, side: float) -> np.ndarray:
    """Every score moved to one end of its step (``side`` 0: its start; 1: just below the
    next step): the same cells and steps, the sums as far from the decoded ones as they go."""
    cell = np.clip(np.searchsorted(edges, score, side="right") - 1, 0, edges.size - 2)
    left, right = edges[cell], edges[cell + 1]
    scale = np.ldexp(1.0, STEP_BITS) / (right - left)
    step = np.clip(np.floor((score - left) * scale), 0, (1 << STEP_BITS) - 1)
    u = (right - left) / np.ldexp(1.0, STEP_BITS)
    out = left + (step + side * 0.999) * u
    # keep each score in its step (rounding at the step's end)
    same = np.clip(np.floor((out - left) * scale), 0, (1 << STEP_BITS) - 1) == step
    return np.sort(np.where(same & (out >= left) & (out < right), out, score))


@pytest.mark.parametrize("side", [0.0, 1.0])
def test_certified_errors_hold_for_scores_anywhere_in_their_steps(side):
    """The oracle: scores moved to the ends of their steps summarize to the same cells, so
    the summary's values must be within its certified errors of both the scores' and the
    moved scores' row values (the bound covers any scores behind the steps)."""
    rng = np.random.default_rng(7)
    edges = cell_edges(499)
    a, b = np.sort(rng.beta(2, 3, 40_000)), np.sort(rng.beta(2.2, 3, 40_000))
    spec = SummarySpec(max_raw=100, sample_size=0)
    sf = np.r_[np.zeros(a.size, dtype=int), np.ones(b.size, dtype=int)]
    s = summarize({"g": sf}, y_score=np.r_[a, b], spec=spec)
    moved = [_moved(x, edges, side) for x in (a, b)]
    same = summarize({"g": sf}, y_score=np.r_[moved[0], moved[1]], spec=spec)
    for label in (0, 1):
        assert np.array_equal(s.attributes["g"].groups[label].cells.ksum,
                              same.attributes["g"].groups[label].cells.ksum)
    got_abcc = abcc_from_summary(s.attributes["g"], max_bins_cells=499)
    got_abpc = abpc_from_summary(s.attributes["g"], max_bins_cells=499)
    for x, y in ((a, b), tuple(moved)):
        scores = np.r_[x, y]
        assert abs(got_abcc.value - abcc(scores, sensitive_features=sf)) <= got_abcc.error
        assert abs(got_abpc.value - abpc(scores, sensitive_features=sf)) <= got_abpc.error
    assert got_abpc.error < 1e-6 and got_abcc.error < 1e-6
    assert madd(np.r_[a, b], sensitive_features=sf).value == evaluate_summary(
        s, metrics=["madd"]).values[("madd", "g")]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 3000),
       max_raw=st.sampled_from([0, 5, 200, None]), decimals=st.sampled_from([None, 1, 3]))
def test_round_trip_is_lossless(seed, n, max_raw, decimals):
    sf, score, label = rows(n, seed, decimals=decimals)
    s = summarize(sf, y_score=score, y_true=label, spec=SummarySpec(max_raw=max_raw,
                                                                    sample_size=4))
    blob = to_bytes(s)
    assert _version(blob) == 5
    back = from_bytes(blob)
    assert_same(back, s, exact_sums=True)
    for attr in s.attributes.values():
        for label_, g in attr.groups.items():
            if g.cells is not None:
                h = back.attributes[attr.name].groups[label_].cells
                for f in ("index", "count", "ksum", "qlo", "qhi"):
                    assert np.array_equal(getattr(g.cells, f), getattr(h, f)), f
    assert to_bytes(back) == blob


def test_corrupted_compressed_cells_are_refused():
    from fairmonitor.exceptions import InvalidInputError

    sf, score, _ = rows(5000, 4)
    blob = bytearray(to_bytes(summarize(sf, y_score=score, spec=SummarySpec(max_raw=10))))
    (size,) = struct.unpack_from("<Q", blob, 8)
    header = json.loads(blob[16:16 + size])
    entry = next(a for a in header["attributes"] if "cells" in a)
    _, offset, _, planes = header["blocks"][entry["cells"]["blocks"][1]]
    at = 16 + size + offset + planes[0] // 2  # inside the counts' first byte plane
    blob[at] ^= 0xFF
    import zlib
    body = bytes(blob[:-8])
    tampered = body + b"FMCK" + struct.pack("<I", zlib.crc32(body))  # a valid checksum
    with pytest.raises(InvalidInputError, match="corrupted"):
        s = from_bytes(tampered)
        for attr in s.attributes.values():
            for g in attr.groups.values():
                assert g.n >= 0


def test_format4_summary_loads_converted_and_merges_with_format5():
    sf, score, label, X = fixture_rows()
    spec = SummarySpec(max_raw=300, sample_size=8)
    blob = FIXTURE.read_bytes()
    assert _version(blob) == 4
    old = from_bytes(blob)
    fresh = summarize(sf, y_score=score, y_true=label, X=X, spec=spec)
    assert old.spec.fingerprint == fresh.spec.fingerprint  # converted: it merges
    assert any(g.cells is not None for g in old.attributes["race:sex"].groups.values())
    # counts, raw scores and samples identical; cells' counts identical, sums within a step
    assert_same(old, fresh, exact_sums=False)
    metrics = ["demographic_parity_difference", "equalized_odds_difference", "abcc", "abpc",
               "madd"]
    got, want = (evaluate_summary(s, metrics=metrics) for s in (old, fresh))
    for key, value in want.values.items():
        other = got.values[key]
        if math.isnan(value):
            assert math.isnan(other), key
        elif key[0] in ("abcc", "abpc"):
            error = getattr(got.details.get(key), "error", 0.0) + getattr(
                want.details.get(key), "error", 0.0)
            assert abs(other - value) <= error + 1e-12, key
        else:
            assert other == value, key
    both = merge_all([old, from_bytes(to_bytes(fresh))])
    assert_same(both, fresh.merge(fresh), exact_sums=False)
    assert_same(from_bytes(to_bytes(both)), both, exact_sums=True)
