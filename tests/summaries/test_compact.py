"""Compact cells (formats 3-5): bounds quantized outward to 1/255 of a cell's width hold every
score of the cell (adversarial scores: on edges, at 1, one ulp inside, cells one ulp wide),
counts stored in the narrowest dtype, a lossless round trip, and ABCC's certified error on
quantized bounds (rounded scores: many rows on one value) staying small."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fairmonitor._kernels.cells import decode_bounds, quantize_bounds
from fairmonitor.metrics import abcc
from fairmonitor.report import evaluate_summary
from fairmonitor.summaries import (
    CompactCells,
    SummarySpec,
    cell_edges,
    from_bytes,
    merge_all,
    summarize,
    to_bytes,
)
from fairmonitor.summaries.core import QUANTA, _cells_of

from .test_summaries import assert_same, rows


def _dequantize(q, left, right):
    """The numpy formula of a quantized bound: ``left + q * (width / 255)``, 255: ``right``."""
    step = (right - left) / QUANTA
    return np.where(q == QUANTA, right, left + q * step)


def _quantize(low, high, left, right):
    """The numpy oracle of ``quantize_bounds``: the largest ``qlo`` with ``_dequantize(qlo) <=
    low``, the smallest ``qhi`` with ``_dequantize(qhi) >= high`` (floor / ceil, then steps)."""
    step = (right - left) / QUANTA
    qlo = np.clip(np.floor((low - left) / step), 0, QUANTA).astype(np.int16)
    qhi = np.clip(np.ceil((high - left) / step), 0, QUANTA).astype(np.int16)
    for q, bound, outward in ((qlo, low, -1), (qhi, high, 1)):
        def holds(v, b=bound, o=outward):
            return v <= b if o < 0 else v >= b
        while not (ok := holds(_dequantize(q, left, right))).all():
            q[~ok] += outward
        while (more := (q - outward >= 0) & (q - outward <= QUANTA)
               & holds(_dequantize(q - outward, left, right))).any():
            q[more] -= outward
    return qlo.astype(np.uint8), qhi.astype(np.uint8)


def _adversarial(edges, rng):
    """Scores at every kind of awkward place: edges, one ulp inside a cell on either side,
    1.0 and 0.0, the cells one ulp wide (edges of two grids one rounding apart)."""
    left, right = edges[:-1], edges[1:]
    tiny = np.flatnonzero(right - left < 1e-15)
    assert tiny.size  # the grids' union holds such cells
    pick = rng.integers(0, left.size, 3000)
    inside = np.nextafter(left[pick], np.inf)
    before = np.nextafter(right[pick], -np.inf)
    return np.sort(np.r_[left[pick], inside, before, left[tiny], 0.0, 1.0, 1.0,
                         np.nextafter(1.0, 0.0), rng.random(3000),
                         np.round(rng.random(2000), 3)])


def _check_sound_and_tight(edges, cells):
    index, _, _, low, high = cells
    left, right = edges[index], edges[index + 1]
    qlo, qhi = quantize_bounds(index, low, high, edges)
    want = _quantize(low, high, left, right)  # the numpy oracle finds the same steps
    assert np.array_equal(qlo, want[0]) and np.array_equal(qhi, want[1])
    lo, hi = _dequantize(qlo, left, right), _dequantize(qhi, left, right)
    assert np.array_equal(decode_bounds(index, qlo, qhi, edges)[0], lo)
    assert np.all(lo <= low) and np.all(hi >= high)  # sound: the scores lie in [lo, hi]
    assert np.all(left <= lo) and np.all(hi <= right)
    # tight: one step further in does not hold (the largest qlo, the smallest qhi)
    up, down = qlo < QUANTA, qhi > 0
    assert np.all(_dequantize(qlo[up] + 1, left[up], right[up]) > low[up])
    assert np.all(_dequantize(qhi[down] - 1, left[down], right[down]) < high[down])
    return qlo, qhi, lo, hi


def test_quantized_bounds_hold_every_score_of_their_cell():
    rng = np.random.default_rng(0)
    edges = cell_edges(499)
    scores = _adversarial(edges, rng)
    cells = _cells_of(scores, edges)
    qlo, qhi, lo, hi = _check_sound_and_tight(edges, cells)
    # every score against its own cell's bounds (not only the cell's min and max)
    cell = np.minimum(np.searchsorted(edges, scores, side="right") - 1, edges.size - 2)
    at = np.searchsorted(cells[0], cell)
    assert np.all(lo[at] <= scores) and np.all(scores <= hi[at])
    # 0 is the left edge and 255 the right edge, exactly
    index = cells[0]
    assert np.array_equal(_dequantize(np.zeros(index.size, np.uint8), edges[index],
                                      edges[index + 1]), edges[index])
    assert np.array_equal(_dequantize(np.full(index.size, 255, np.uint8), edges[index],
                                      edges[index + 1]), edges[index + 1])
    # a min on the cell's left edge is kept exactly (q 0, or more in a cell one ulp wide,
    # where left + q * step rounds to left); 1.0 (the last cell is closed): qhi 255
    on_edge = np.isin(cells[3], edges)
    assert np.array_equal(lo[on_edge], cells[3][on_edge]) and qhi[-1] == 255
    wide = on_edge & (edges[index + 1] - edges[index] > 1e-12)
    assert np.all(qlo[wide] == 0) and wide.sum() > 1000


@pytest.mark.parametrize("seed", range(5))
def test_quantized_bounds_of_random_cells(seed):
    """Bounds anywhere in cells of any width, one ulp from the edges included."""
    rng = np.random.default_rng(seed)
    edges = cell_edges(499)
    index = np.sort(rng.choice(edges.size - 1, 5000, replace=False))
    left, right = edges[index], edges[index + 1]
    a = left + rng.random(index.size) * (right - left)
    b = left + rng.random(index.size) * (right - left)
    low, high = np.minimum(a, b), np.maximum(a, b)
    low[::7] = np.nextafter(left[::7], np.inf)
    high[::5] = np.nextafter(right[::5], -np.inf)
    low[::11], high[::11] = left[::11], left[::11]
    low = np.minimum(np.maximum(low, left), high)
    high = np.maximum(np.minimum(high, np.nextafter(right, -np.inf)), low)
    _check_sound_and_tight(edges, (index.astype(np.int32), None, None, low, high))


def test_bounds_are_stored_quantized_and_merge_as_the_whole():
    """In memory the bounds are already the quantized ones (what serializing keeps), and the
    bounds of merged parts are the whole's: quantizing is monotone."""
    sf, score, label = rows(30_000, 4, decimals=None)
    spec = SummarySpec(max_raw=100, sample_size=0)
    whole = summarize(sf, y_score=score, spec=spec)
    g = whole.attributes["race"].groups["a"]
    assert isinstance(g.cells, CompactCells)
    index, _, _, low, high = g.cells
    exact = _cells_of(np.sort(score[sf["race"] == "a"]), cell_edges(499))
    assert np.all(low <= exact[3]) and np.all(high >= exact[4])
    assert np.any(low < exact[3])  # quantized: not the exact min
    parts = [summarize({k: v[a:a + 7_000] for k, v in sf.items()},
                       y_score=score[a:a + 7_000], spec=spec) for a in range(0, 30_000, 7_000)]
    assert_same(merge_all(parts), whole, exact_sums=True)


@pytest.mark.parametrize(("repeat", "dtype"), [(255, "u1"), (256, "u2"), (65_535, "u2"),
                                               (65_536, "u4")])
def test_counts_stored_in_the_narrowest_dtype(repeat, dtype):
    score = np.r_[np.full(repeat, 0.3), np.linspace(0, 1, 500)]
    spec = SummarySpec(max_raw=10, sample_size=0)
    s = summarize({"g": np.zeros(score.size, dtype=int)}, y_score=score, spec=spec)
    back = from_bytes(to_bytes(s))
    cells = back.attributes["g"].groups[0].cells
    assert cells.count.dtype == np.dtype(dtype)
    assert cells[1].dtype == np.int64 and int(cells[1].max()) == repeat
    assert_same(back, s, exact_sums=True)
    # loaded narrow counts merge with in-memory int64 ones
    assert_same(merge_all([back, s]), merge_all([s, s]), exact_sums=True)


def test_counts_beyond_uint32_are_stored_as_int64():
    s = summarize({"g": np.zeros(600, dtype=int)}, y_score=np.linspace(0, 1, 600),
                  spec=SummarySpec(max_raw=10, sample_size=0))
    g = s.attributes["g"].groups[0]
    count = g.cells.count.copy()
    count[0] = 2**33
    cells = CompactCells(g.cells.edges, g.cells.index, count, g.cells.ksum, g.cells.qlo,
                         g.cells.qhi)
    big = replace(s, attributes={"g": replace(s.attributes["g"], groups={
        0: replace(g, cells=cells, n=g.n + 2**33 - 1)})})
    back = from_bytes(to_bytes(big))
    loaded = back.attributes["g"].groups[0].cells
    assert loaded.count.dtype == np.int64 and loaded[1][0] == 2**33
    assert merge_all([back, back]).attributes["g"].groups[0].cells[1][0] == 2**34


@pytest.mark.parametrize("max_raw", [0, 50, None])
def test_round_trip_is_lossless_bytes_and_arrays(max_raw):
    sf, score, label = rows(20_000, 8, decimals=3)
    s = summarize(sf, y_score=score, y_true=label, spec=SummarySpec(max_raw=max_raw))
    blob = to_bytes(s)
    back = from_bytes(blob)
    assert to_bytes(back) == blob  # loaded cells serialize to the same bytes
    assert to_bytes(merge_all([back])) == blob
    for name, attr in s.attributes.items():
        for label_, g in attr.groups.items():
            h = back.attributes[name].groups[label_]
            if g.cells is not None:
                for k in range(5):
                    assert np.array_equal(g.cells[k].view(np.uint8), h.cells[k].view(np.uint8))
                assert np.array_equal(g.cells.qlo, h.cells.qlo)
                assert np.array_equal(g.cells.qhi, h.cells.qhi)
    assert evaluate_summary(back).values == evaluate_summary(s).values


def test_loaded_cells_are_decoded_lazily():
    sf, score, _ = rows(20_000, 3)
    # the attributes alone: with their intersection, "sex"'s groups are derived on read
    blob = to_bytes(summarize(sf, y_score=score, spec=SummarySpec(max_raw=50),
                              intersection=False))
    cells = from_bytes(blob).attributes["sex"].groups["F"].cells
    assert cells._fields == [None] * 5 and cells._total is None  # nothing decoded by loading
    index, count = cells[:2]
    assert cells._fields[3] is None and cells._total is None  # sums, bounds when asked
    assert np.array_equal(index, np.flatnonzero(np.unpackbits(
        cells.bitmap, count=cell_edges(499).size - 1, bitorder="little")))
    assert count.sum() == from_bytes(blob).attributes["sex"].groups["F"].n
    assert len(cells) == 5 and len(list(cells)) == 5 and cells[-1] is cells[4]


@pytest.mark.parametrize("decimals", [3, 2])
def test_abcc_certified_error_stays_small_with_rounded_scores(decimals):
    """Rounded scores: many rows share one value, so a group's scores in a cell are all equal
    and the exact bounds certified 0 there; the quantized ones (1/255 of a cell apart around
    the value) leave an error well below 1e-6, and the value stays within it."""
    sf, score, _ = rows(200_000, 12, groups=4, decimals=decimals)
    spec = SummarySpec(max_raw=100, sample_size=0)
    hours = [summarize({k: v[a:a + 25_000] for k, v in sf.items()},
                       y_score=score[a:a + 25_000], spec=spec)
             for a in range(0, score.size, 25_000)]
    report = evaluate_summary(merge_all([from_bytes(to_bytes(h)) for h in hours]),
                              metrics=["abcc"])
    for attr in ("sex", "race", "sex:race"):
        detail = report.details[("abcc", attr)]
        exact = abcc(score, sensitive_features=sf.get(attr, sf))
        assert detail.error < 1e-7, (attr, detail.error)
        assert abs(detail.value - exact) <= detail.error + 1e-12


def test_compiled_decoding_is_the_numpy_formula_bit_for_bit():
    rng = np.random.default_rng(3)
    edges = cell_edges(499)
    index = np.sort(rng.choice(edges.size - 1, 20_000, replace=False)).astype(np.int32)
    qlo = rng.integers(0, 256, index.size).astype(np.uint8)
    qhi = rng.integers(0, 256, index.size).astype(np.uint8)
    qlo[:50], qhi[:50] = 0, 255
    low, high = decode_bounds(index, qlo, qhi, edges)
    left, right = edges[index], edges[index + 1]
    for got, q in ((low, qlo), (high, qhi)):
        assert np.array_equal(got.view(np.uint64), _dequantize(q, left, right).view(np.uint64))
