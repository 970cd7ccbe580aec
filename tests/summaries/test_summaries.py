"""Window summaries: merge of any split equals the summary of the whole; evaluation from a
summary (raw scores or cells) equals evaluate_window on the rows; bytes round-trip; specs that
differ refuse to merge."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairmonitor import InvalidInputError
from fairmonitor.metrics import abcc, abpc, madd
from fairmonitor.report import Window, evaluate_summary, evaluate_window
from fairmonitor.summaries import SummarySpec, from_bytes, merge_all, summarize, to_bytes
from fairmonitor.summaries.core import STEP_BITS

COUNT_METRICS = ["demographic_parity_difference", "demographic_parity_ratio",
                 "equalized_odds_difference", "equal_opportunity_difference"]
SCORE_METRICS = ["abcc", "abpc", "madd"]


def rows(n: int, seed: int, *, groups: int = 3, decimals: int | None = None):
    r = np.random.default_rng(seed)
    sex = r.choice(np.array(["F", "M"]), n)
    race = r.choice(np.array(list("abcdefg"[:groups])), n)
    score = np.clip(r.beta(2, 3, n) + np.where(sex == "F", -0.05, 0.05), 0, 1)
    if decimals is not None:  # scores on cell and bin edges
        score = np.round(score, decimals)
    label = (r.random(n) < score).astype(np.int64)
    return {"sex": sex, "race": race}, score, label


def split_summaries(sf, score, label, cuts, spec):
    bounds = [0, *sorted(cuts), score.size]
    parts = [summarize({k: v[a:b] for k, v in sf.items()}, y_score=score[a:b],
                       y_true=label[a:b], spec=spec)
             for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
    return parts


def assert_same(a, b, *, exact_sums: bool):
    assert a.n_rows == b.n_rows and list(a.attributes) == list(b.attributes)
    for name, attr in a.attributes.items():
        other = b.attributes[name]
        assert attr.labels == other.labels
        for label, g in attr.groups.items():
            h = other.groups[label]
            assert (g.n, g.predicted_positive, g.confusion) == (h.n, h.predicted_positive,
                                                                h.confusion)
            assert g.moments[2:] == h.moments[2:]  # min, max
            np.testing.assert_allclose(g.moments[:2], h.moments[:2], rtol=1e-12)
            assert (g.scores is None) == (h.scores is None)
            if g.scores is not None:
                assert np.array_equal(g.scores, h.scores)
            else:
                for k in (0, 1, 3, 4) if exact_sums else (0, 1):  # index, count, min, max
                    assert np.array_equal(g.cells[k], h.cells[k])
                if exact_sums:  # integer step sums: merges add them exactly
                    assert np.array_equal(g.cells.ksum, h.cells.ksum)
                    assert np.array_equal(g.cells[2], h.cells[2])
                else:  # converted from float sums (format 3): within a step a score, the
                    # bounds those stored (from the scores, not their steps)
                    index, count = g.cells[0], g.cells[1]
                    edges = g.cells.edges
                    step = np.ldexp(edges[index + 1] - edges[index], -STEP_BITS)
                    assert np.all(np.abs(g.cells[2] - h.cells[2]) <= count * step)
            assert np.array_equal(g.sample_keys, h.sample_keys)
            for c in g.sample:
                assert np.array_equal(g.sample[c], h.sample[c])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 600),
       cuts=st.lists(st.integers(0, 600), max_size=5), max_raw=st.sampled_from([None, 40, 5000]),
       order=st.permutations(range(6)))
def test_merge_of_any_split_is_the_summary_of_the_whole(seed, n, cuts, max_raw, order):
    sf, score, label = rows(n, seed, decimals=seed % 3 or None)
    spec = SummarySpec(max_raw=max_raw, sample_size=16)
    whole = summarize(sf, y_score=score, y_true=label, spec=spec)
    parts = split_summaries(sf, score, label, [c % (n + 1) for c in cuts], spec)
    parts = [parts[i] for i in order if i < len(parts)]  # any order: commutative
    left = parts[0]
    for p in parts[1:]:
        left = left.merge(p)
    right = parts[-1]  # associative: fold from the other end
    for p in reversed(parts[:-1]):
        right = p.merge(right)
    # cells' counts and step sums are integers: every merge is the whole, bit for bit
    assert_same(left, whole, exact_sums=True)
    assert_same(right, whole, exact_sums=True)
    assert_same(merge_all(parts), whole, exact_sums=True)  # all at once
    # and the report of the merge is the report of the rows
    merged, direct = evaluate_summary(left), evaluate_window(
        Window(sf, y_score=score, y_true=label))
    for key, value in direct.values.items():
        got = merged.values[key]
        if np.isnan(value):
            assert np.isnan(got)
        elif key[0] in COUNT_METRICS or key[0] == "madd":
            assert got == value, key  # counts and MADD exact
        else:  # ABCC and ABPC within their certified bounds
            bound = getattr(merged.details.get(key), "error", 0.0)
            assert got == pytest.approx(value, abs=bound + 1e-12), key


@pytest.mark.parametrize("decimals", [None, 2, 3])
def test_cells_reproduce_the_raw_metrics(decimals):
    sf, score, label = rows(60_000, 7, groups=4, decimals=decimals)
    cells = summarize(sf, y_score=score, y_true=label, spec=SummarySpec(max_raw=100))
    assert all(g.cells is not None for a in cells.attributes.values()
               for g in a.groups.values() if g.n > 100)
    report = evaluate_summary(cells)
    for attr in ("sex", "race", "sex:race"):
        groups = sf.get(attr, sf)
        # MADD: exact, auto and a fixed bandwidth
        assert report.values[("madd", attr)] == madd(score, sensitive_features=groups).value
        # ABCC: within the certified bound, and the bound is at most 1e-6
        detail = report.details[("abcc", attr)]
        exact = abcc(score, sensitive_features=groups)
        assert detail.error <= 1e-6
        assert abs(detail.value - exact) <= detail.error + 1e-12
        # ABPC: the raw KDE's binning from counts and sums, the sums known to their steps:
        # within its certified error (format 5; before, to round-off), itself <= 1e-6
        detail = report.details[("abpc", attr)]
        assert 0 < detail.error <= 1e-6
        assert abs(report.values[("abpc", attr)] - abpc(score, sensitive_features=groups)
                   ) <= detail.error + 1e-12


def test_cells_fixed_madd_is_exact_and_unresolvable_bins_refused():
    sf, score, label = rows(20_000, 3)
    s = summarize(sf, y_score=score, spec=SummarySpec(max_raw=10))
    r = evaluate_summary(s, metrics=["madd"], options={"madd": {"n_bins": 37}})
    expected = madd(score, sensitive_features=sf["race"], n_bins=37).value
    assert r.values[("madd", "race")] == expected
    r = evaluate_summary(s, metrics=["madd"], options={"madd": {"n_bins": 1000}})
    assert "SummarySpec(max_bins=1000)" in r.reasons[("madd", "race")]


def test_summary_metrics_equal_evaluate_window_with_options():
    sf, score, label = rows(5_000, 11)
    options = {"abpc": {"bandwidth": 0.05}, "madd": {"compat": "maddlib"}, "abcc": {"agg": "mean"}}
    w = evaluate_window(Window(sf, y_score=score, y_true=label), options=options,
                        min_group_size=700)
    s = evaluate_summary(summarize(sf, y_score=score, y_true=label, spec=SummarySpec(500)),
                         options=options, min_group_size=700)
    assert w.values.keys() == s.values.keys()
    for key, value in w.values.items():
        assert s.values[key] == pytest.approx(value, abs=1e-6, nan_ok=True), key
    assert w.notes == s.notes  # the same exclusions, with the same text


def test_bytes_round_trip_and_version_refusal():
    sf, score, label = rows(3_000, 5)
    X = np.column_stack([score, label])
    s = summarize(sf, y_score=score, y_true=label, X=X, spec=SummarySpec(max_raw=50))
    back = from_bytes(to_bytes(s))
    assert_same(back, s, exact_sums=True)
    assert evaluate_summary(back).values == evaluate_summary(s).values
    with pytest.raises(InvalidInputError, match="not a fairmonitor window summary"):
        from_bytes(b"not a summary")


def test_different_specs_refuse_to_merge_with_the_fix():
    sf, score, label = rows(100, 1)
    a = summarize(sf, y_score=score, spec=SummarySpec(max_raw=10))
    b = summarize(sf, y_score=score, spec=SummarySpec(max_raw=20))
    with pytest.raises(InvalidInputError, match="re-summarize one of them"):
        a.merge(b)
    c = summarize(sf, y_pred=(score > 0.5).astype(int), spec=SummarySpec(max_raw=10))
    with pytest.raises(InvalidInputError, match="same columns"):
        a.merge(c)


def test_row_metrics_from_the_sample_and_without_one():
    sf, score, label = rows(2_000, 9)
    X = np.column_stack([score + 0.01, label * 1.0, np.arange(score.size) % 7])
    s = summarize(sf, y_score=score, y_true=label, X=X, spec=SummarySpec(sample_size=64))
    r = evaluate_summary(s, metrics=["hfm"])
    assert np.isfinite(r.values[("hfm", "sex")])
    assert any("row sample" in note for note in r.notes)
    none = summarize(sf, y_score=score, y_true=label, X=X, spec=SummarySpec(sample_size=0))
    r = evaluate_summary(none, metrics=["hfm"])
    assert "sample_size > 0" in r.reasons[("hfm", "sex")]


def test_group_sample_is_the_bottom_k_of_the_union():
    sf, score, label = rows(1_000, 2)
    spec = SummarySpec(sample_size=8)
    whole = summarize(sf, y_score=score, spec=spec)
    half = [summarize({k: v[a:b] for k, v in sf.items()}, y_score=score[a:b], spec=spec)
            for a, b in ((0, 500), (500, 1000))]
    merged = half[0].merge(half[1])
    g, h = whole.attributes["sex"].groups["F"], merged.attributes["sex"].groups["F"]
    assert g.sample_keys.size == 8 and np.array_equal(g.sample_keys, h.sample_keys)
    assert np.all(np.diff(g.sample_keys.astype(np.float64)) >= 0)
