"""Format 4: the intersection's groups (the finest cells) stored once, each attribute's groups
derived from them on read (:class:`~fairmonitor.summaries.DerivedGroups`).

Checked here: a derived attribute gives what summarizing its own rows gives (format 3's
numbers: raw scores and moments identical, cells identical where every cell of the group is
raw, merged cells otherwise), merged splits equal the whole, the bytes are the layout's (one
copy of the scores), attributes not unions of the intersection's groups are stored in full,
and a summary written by format 3 (``tests/data/summary_format3.bin``) still loads, evaluates
and merges.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from fairmonitor.exceptions import InvalidInputError
from fairmonitor.report import Window, evaluate_summary, evaluate_window
from fairmonitor.summaries import (
    DerivedGroups,
    SummarySpec,
    from_bytes,
    merge_all,
    summarize,
    to_bytes,
)
from fairmonitor.utils.groups import encode_attributes

from ._format3_rows import rows as format3_rows
from .test_summaries import assert_same, rows

FIXTURE = Path(__file__).parents[1] / "data" / "summary_format3.bin"
METRICS = ["demographic_parity_difference", "equalized_odds_difference", "abcc", "abpc",
           "madd"]


def _full(sf, score, label, spec, **kw):
    """Every attribute summarized from its own rows (no derivation): format 3's groups."""
    alone = summarize(sf, y_score=score, y_true=label, spec=spec, intersection=False, **kw)
    inter = summarize(sf, y_score=score, y_true=label, spec=spec, **kw)
    name = ":".join(sf)
    return alone, inter, name


def _header(blob: bytes) -> tuple[dict, int]:
    (size,) = struct.unpack_from("<Q", blob, 8)
    return json.loads(blob[16:16 + size]), 16 + size


def _assert_values_close(got, want):
    """Counts, parity metrics and MADD equal; ABCC within its certified error; ABPC 1e-9."""
    assert got.values.keys() == want.values.keys()
    for key, value in want.values.items():
        other = got.values[key]
        if math.isnan(value):
            assert math.isnan(other), key
        elif key[0] in ("abcc", "abpc"):  # within their certified errors
            error = getattr(got.details.get(key), "error", 0.0) + getattr(
                want.details.get(key), "error", 0.0)
            assert abs(other - value) <= error + 1e-12, key
        else:
            assert other == value, key


@pytest.mark.parametrize("max_raw", [None, 1 << 19, 400, 40])
def test_derived_groups_are_the_groups_own_summary(max_raw):
    sf, score, label = rows(6000, 1)
    spec = SummarySpec(max_raw=max_raw, sample_size=16)
    alone, inter, name = _full(sf, score, label, spec)
    for attr in sf:
        derived = inter.attributes[attr]
        assert derived.parent == (name, list(sf).index(attr))
        assert isinstance(derived.groups, DerivedGroups)
        for label_, want in alone.attributes[attr].groups.items():
            got = derived.groups[label_]
            assert (got.n, got.predicted_positive, got.confusion, got.moments) == (
                want.n, want.predicted_positive, want.confusion, want.moments)
            cells_raw = all(g.scores is not None for lab, g in
                            inter.attributes[name].groups.items() if label_ in lab)
            if want.scores is not None:
                assert np.array_equal(got.scores, want.scores)
            else:  # binned from the same sorted scores, or the cells' merge
                # the same cells whether binned from the same sorted scores or merged
                # (integer steps: format 5)
                assert cells_raw in (True, False)
                for k in range(5):
                    assert np.array_equal(got.cells[k], want.cells[k])
                assert np.array_equal(got.cells.ksum, want.cells.ksum)
            assert np.array_equal(got.sample_keys, want.sample_keys)
            for c in want.sample:
                assert np.array_equal(got.sample[c], want.sample[c])
    # a summary and its bytes give the same numbers (the derived cells made the same way)
    assert_same(from_bytes(to_bytes(inter)), inter, exact_sums=True)


def test_summary_path_equals_row_path_through_derived_groups():
    sf, score, label = rows(5000, 2)
    window = evaluate_window(Window(sf, y_score=score, y_true=label), metrics=METRICS)
    stored = from_bytes(to_bytes(summarize(sf, y_score=score, y_true=label,
                                           spec=SummarySpec(sample_size=0))))
    assert evaluate_summary(stored, metrics=METRICS).values == window.values


@pytest.mark.parametrize("max_raw", [None, 300])
def test_merged_splits_equal_the_whole(max_raw):
    sf, score, label = rows(9000, 3, groups=4)
    spec = SummarySpec(max_raw=max_raw, sample_size=8)
    whole = summarize(sf, y_score=score, y_true=label, spec=spec)
    cuts = np.random.default_rng(3).permutation(score.size)
    parts = [cuts[:1000], cuts[1000:5500], cuts[5500:]]
    pieces = [from_bytes(to_bytes(summarize({k: v[p] for k, v in sf.items()},
                                            y_score=score[p], y_true=label[p], spec=spec)))
              for p in parts]
    folded = pieces[0].merge(pieces[1]).merge(pieces[2])
    for merged in (folded, merge_all(pieces)):
        assert all(merged.attributes[a].parent is not None for a in sf)
        assert_same(merged, whole, exact_sums=True)
        assert_same(from_bytes(to_bytes(merged)), merged, exact_sums=True)
    unlabelled = merge_all(pieces).without_labels()
    assert unlabelled.attributes["sex"].groups["F"].confusion is None
    assert_same(unlabelled, whole.without_labels(), exact_sums=True)


def _block_bytes(nbytes: int) -> int:
    return nbytes + (-nbytes % 8)  # each block 8-byte aligned


def _runs(scores: np.ndarray) -> int:
    """Runs of equal high 16 bits (sign, exponent, 4 mantissa bits) of consecutive scores."""
    high = scores.view(np.uint64) >> np.uint64(48)
    return 1 + int(np.count_nonzero(high[1:] != high[:-1]))


def test_bytes_are_one_copy_of_the_scores_raw():
    """All groups raw, no sample: the data area is the intersection's scores once, each its
    low 48 bits (6 bytes) and the runs of its high 16 bits (2 bytes a value, 4 a length)."""
    sf, score, label = rows(7000, 4)
    spec = SummarySpec(sample_size=0)
    s = summarize(sf, y_score=score, y_true=label, spec=spec)
    blob = to_bytes(s)
    header, start = _header(blob)
    assert header["version"] == 5
    runs = _runs(np.concatenate([g.scores for g in s.attributes["sex:race"].groups.values()]))
    layout = _block_bytes(2 * runs) + _block_bytes(4 * runs) + _block_bytes(6 * score.size)
    assert len(blob) - start - 8 == layout  # the 8-byte checksum trailer after
    assert layout < 7 * score.size  # ~100 runs a group of ~1,000 scores: < 8 bytes a score
    full = to_bytes(summarize(sf, y_score=score, y_true=label, spec=spec, intersection=False))
    per_attribute = [np.concatenate([g.scores for g in a.groups.values()]) for a in
                     summarize(sf, y_score=score, spec=spec, intersection=False
                               ).attributes.values()]
    assert len(full) - _header(full)[1] - 8 == sum(  # one copy per attribute
        _block_bytes(2 * _runs(p)) + _block_bytes(4 * _runs(p)) + _block_bytes(6 * p.size)
        for p in per_attribute)


@pytest.mark.parametrize("kind", ["sorted", "edges", "unsorted"])
def test_raw_scores_codec_is_lossless(kind):
    """Every bit of every score back (0, 1, -0.0, subnormals, one ulp apart); scores whose
    high bits change too often (unsorted) stay a plain float64 block."""
    from fairmonitor.summaries.serialize import _BlockReader, _Blocks, _raw_blocks, _read_raw

    rng = np.random.default_rng(8)
    scores = np.sort(rng.beta(0.3, 0.3, 5000))
    if kind == "edges":
        scores = np.sort(np.r_[scores, 0.0, -0.0, 1.0, 5e-324, 2.2e-308, np.nextafter(0.5, 0),
                               0.5, np.nextafter(0.5, 1)])
    if kind == "unsorted":
        scores = rng.permutation(scores)
    blocks = _Blocks()
    ref = _raw_blocks(scores, blocks)
    assert isinstance(ref, dict) == (kind != "unsorted")
    data = b"".join(bytes(p) for p in blocks.parts)
    back = _read_raw(ref, _BlockReader(data, 0, blocks.table))
    assert back.dtype == np.float64 and np.array_equal(back.view(np.uint64),
                                                       scores.view(np.uint64))


def test_bytes_are_the_layout_with_cells_and_sample():
    """Cells and a row sample, the intersection's groups only: per cell its index gap, count
    and step sum (compressed), bounds only for cells of 2+ scores; the sample as before."""
    sf, score, label = rows(20_000, 5)
    spec = SummarySpec(max_raw=1000, sample_size=32)
    s = summarize(sf, y_score=score, y_true=label, spec=spec)
    blob = to_bytes(s)
    header, start = _header(blob)
    inter = s.attributes["sex:race"].groups.values()
    cells = [g.cells for g in inter if g.cells is not None]
    n_cells = sum(c.size for c in cells)
    several = sum(int((c.count > 1).sum()) for c in cells)
    entry = next(a for a in header["attributes"] if a["name"] == "sex:race")
    assert all("cells" not in a and "scores" not in a for a in header["attributes"]
               if a["name"] != "sex:race")  # the attributes derive theirs
    assert entry["cells"]["codec"] == "steps"
    table = header["blocks"]
    assert [table[k][2] for k in entry["cells"]["blocks"]] == [n_cells] * 3 + [several] * 2
    sampled = sum(g.sample_keys.size for g in inter)
    raw = sum(g.scores.size for g in inter if g.scores is not None)
    plain = (_block_bytes(8 * raw)  # no runs worth coding at ~150 scores a group
             + 8 * sampled  # keys
             + _block_bytes(sampled) * 2 + 8 * sampled)  # y_true, y_pred (int8); y_score
    packed = sum(_block_bytes(sum(table[k][3])) for k in entry["cells"]["blocks"])
    assert len(blob) - start - 8 == plain + packed
    # the step sums and counts cost ~3 bytes a cell (a float64 sum alone cost 8)
    assert packed < 4 * n_cells


def test_attribute_not_a_union_of_the_intersection_is_stored_in_full():
    sf, score, label = rows(2000, 6)
    groups = encode_attributes(sf)
    # "race" re-encoded on other rows: not a function of the intersection's groups
    groups["race"] = encode_attributes({"race": np.roll(sf["race"], 1)})["race"]
    s = summarize(sf, y_score=score, groups=groups)
    assert s.attributes["sex"].parent is not None and s.attributes["race"].parent is None
    back = from_bytes(to_bytes(s))
    assert not isinstance(back.attributes["race"].groups, DerivedGroups)
    assert_same(back, s, exact_sums=True)


def test_corrupted_derived_counts_are_refused():
    sf, score, _ = rows(500, 7)
    blob = to_bytes(summarize(sf, y_score=score))
    header, start = _header(blob)
    text = blob[16:start]
    entry = next(a for a in header["attributes"] if a["name"] == "sex")
    entry["groups"][0]["n"] += 1
    edited = json.dumps(header, separators=(",", ":")).encode()
    edited += b" " * (len(text) - len(edited))
    assert len(edited) == len(text)
    body = blob[:16] + edited + blob[start:-8]
    import zlib
    tampered = body + b"FMCK" + struct.pack("<I", zlib.crc32(body))  # a valid checksum
    with pytest.raises(InvalidInputError, match="corrupted"):
        from_bytes(tampered).attributes["sex"].groups["F"]


def test_format3_summary_still_loads_evaluates_and_merges():
    """Written by format 3 (every attribute in full); read, evaluated and merged as today's."""
    sf, score, label, X = format3_rows()
    spec = SummarySpec(max_raw=300, sample_size=8)
    old = from_bytes(FIXTURE.read_bytes())
    assert _header(FIXTURE.read_bytes())[0]["version"] == 3
    assert all(a.parent is None for a in old.attributes.values())
    fresh = summarize(sf, y_score=score, y_true=label, X=X, spec=spec)
    assert old.spec.fingerprint == fresh.spec.fingerprint  # the numbers mean the same
    # format 3 summarized every attribute from its rows: raw scores, moments, samples equal;
    # a group with a cell above max_raw derives merged cells (sums to round-off)
    assert_same(old, fresh, exact_sums=False)
    _assert_values_close(evaluate_summary(old, metrics=METRICS),
                         evaluate_summary(fresh, metrics=METRICS))
    both = merge_all([old, from_bytes(to_bytes(fresh))])
    assert_same(both, fresh.merge(fresh), exact_sums=False)
    assert_same(from_bytes(to_bytes(both)), both, exact_sums=True)
