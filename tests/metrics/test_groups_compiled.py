"""The compiled group encoding (long windows) gives what the numpy/dict path gives (short ones).

Every test runs the same input twice: once as is (at least ``COMPILED_MIN_ROWS`` rows, so the
kernels of ``fairmonitor._kernels.groups`` run) and once with the threshold raised
past the input, which takes the former numpy and dict path: the oracle. Codes, labels, counts,
missing masks, summaries and report values must be identical, not close.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import fairmonitor.summaries.core as summaries_core
import fairmonitor.utils.groups as groups_module
from fairmonitor._kernels.groups import identity_codes
from fairmonitor.report import Window, evaluate_window
from fairmonitor.summaries import SummarySpec, summarize
from fairmonitor.summaries.compute import pseudo_rows
from fairmonitor.utils.groups import encode_attributes, factorize, missing_mask

N = groups_module.COMPILED_MIN_ROWS + 1001  # the compiled path, by a margin


@pytest.fixture
def numpy_path(monkeypatch):
    """Run the block under the former (numpy and dict) encoding: the oracle."""
    def run(func, *args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(groups_module, "COMPILED_MIN_ROWS", 2**62)
            m.setattr(summaries_core, "COMPILED_MIN_ROWS", 2**62)
            return func(*args, **kwargs)
    return run


def fresh(text: str) -> str:
    """An equal string held by a new object (as a CSV reader without interning makes them)."""
    return "".join(list(text))


def columns(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Object columns in the shapes users have: one per value, equal distinct objects, mixed."""
    reused = rng.choice(np.array(["F", "M"], dtype=object), N)
    distinct = np.array([fresh(v) for v in rng.choice(["white", "black", "asian"], N)],
                        dtype=object)
    mixed = np.empty(N, dtype=object)
    mixed[:] = [1 if v < 0.3 else "1" if v < 0.6 else 2.5 for v in rng.random(N)]
    many = np.array([f"id{v}" for v in rng.integers(0, 3000, N)], dtype=object)
    return {"reused": reused, "distinct": distinct, "mixed": mixed, "many": many}


def test_identity_codes_number_objects_by_first_occurrence():
    a, b, c = fresh("ab"), fresh("ab"), fresh("cd")  # a == b, but two objects
    codes, first = identity_codes(np.array([a, c, b, a, c], dtype=object))
    assert codes.tolist() == [0, 1, 2, 0, 1]
    assert first.tolist() == [0, 1, 2]


def test_identity_codes_grow_their_table_and_take_strided_columns():
    objects = [fresh(f"v{i}") for i in range(5000)]  # far more than the first table holds
    col = np.empty(20000, dtype=object)
    col[:] = [objects[i % 5000] for i in range(20000)]
    codes, first = identity_codes(col)
    assert first.tolist() == list(range(5000))
    assert np.array_equal(codes, np.arange(20000) % 5000)
    codes, first = identity_codes(col[::2])  # a view with a stride: read through a copy
    assert np.array_equal(codes, np.arange(10000) % 2500)
    assert identity_codes(np.empty(0, dtype=object))[0].size == 0


@pytest.mark.parametrize("kind", ["reused", "distinct", "mixed", "many"])
def test_factorize_long_object_columns_as_the_dict_path(kind, numpy_path):
    col = columns(np.random.default_rng(0))[kind]
    uniques, codes = factorize(col)
    want_uniques, want_codes = numpy_path(factorize, col)
    assert groups_module._factorize_counted(col)[2] is not None  # counted: the compiled path
    assert numpy_path(groups_module._factorize_counted, col)[2] is None
    assert uniques.tolist() == want_uniques.tolist()
    assert codes.dtype == np.intp
    assert np.array_equal(codes, want_codes)


def test_missing_mask_of_long_object_columns(numpy_path):
    rng = np.random.default_rng(1)
    col = rng.choice(np.array(["a", "b"], dtype=object), N)
    assert not missing_mask(col).any()
    rows = rng.choice(N, 50, replace=False)
    for k, row in enumerate(rows):  # None, distinct NaN objects, pandas.NA
        col[row] = (None, float("nan"), pd.NA)[k % 3]
    mask = missing_mask(col)
    assert np.array_equal(mask, numpy_path(missing_mask, col))
    assert sorted(np.flatnonzero(mask).tolist()) == sorted(rows.tolist())


def test_encode_attributes_as_the_numpy_path(numpy_path):
    rng = np.random.default_rng(2)
    cols = columns(rng)
    cols["code"] = rng.integers(0, 4, N)  # an integer column beside the objects
    cols = {k: cols[k] for k in ("reused", "distinct", "code")}
    got = encode_attributes(cols)
    want = numpy_path(encode_attributes, cols)
    assert list(got) == list(want) == ["reused", "distinct", "code", "reused:distinct:code"]
    for name, g in got.items():
        w = want[name]
        assert g.labels == w.labels
        assert np.array_equal(g.codes, w.codes)
        assert np.array_equal(g.counts, w.counts)
        assert g.codes.dtype == np.int8  # 1 byte a row for < 128 groups
    assert len(got["reused:distinct:code"].labels) == 2 * 3 * 4


def _assert_same_summary(got, want):
    assert got.n_rows == want.n_rows and list(got.attributes) == list(want.attributes)
    for name, attr in got.attributes.items():
        other = want.attributes[name]
        assert list(attr.groups) == list(other.groups)
        for label, g in attr.groups.items():
            w = other.groups[label]
            assert (g.n, g.predicted_positive, g.confusion, g.moments) == (
                w.n, w.predicted_positive, w.confusion, w.moments)
            assert (g.scores is None) == (w.scores is None)
            if g.scores is not None:
                assert np.array_equal(g.scores, w.scores)
            assert (g.cells is None) == (w.cells is None)
            if g.cells is not None:
                for a, b in zip(g.cells, w.cells, strict=True):
                    assert np.array_equal(a, b)
            assert np.array_equal(g.sample_keys, w.sample_keys)
            assert g.sample.keys() == w.sample.keys()
            for c in g.sample:
                assert np.array_equal(g.sample[c], w.sample[c])


@pytest.mark.parametrize("spec", [SummarySpec(max_raw=None, sample_size=0),
                                  SummarySpec(max_raw=2000, sample_size=64)])
def test_summarize_lays_out_groups_as_the_argsort_did(spec, numpy_path):
    rng = np.random.default_rng(3)
    sf = {"sex": rng.choice(np.array(["F", "M"], dtype=object), N, p=[0.9, 0.1]),
          "race": rng.choice(np.array(list("abcde"), dtype=object), N)}
    score = rng.random(N)
    label = rng.integers(0, 2, N)
    got = summarize(sf, y_score=score, y_true=label, spec=spec)
    want = numpy_path(summarize, sf, y_score=score, y_true=label, spec=spec)
    _assert_same_summary(got, want)


def test_raw_groups_beside_cells_do_not_pin_the_layout_buffer():
    rng = np.random.default_rng(4)
    sex = np.where(rng.random(N) < 0.02, "F", "M").astype(object)  # F small (raw), M cells
    s = summarize({"sex": sex}, y_score=rng.random(N), spec=SummarySpec(max_raw=5000))
    small = s.attributes["sex"].groups["F"]
    assert small.scores is not None and s.attributes["sex"].groups["M"].cells is not None
    assert small.scores.base is None  # its own copy, not a view of the n-long buffer


def test_pseudo_rows_are_the_summary_buffer_itself():
    rng = np.random.default_rng(5)
    sex = rng.choice(np.array(["F", "M"], dtype=object), N)
    score = rng.random(N)
    s = summarize({"sex": sex}, y_score=score, spec=SummarySpec(max_raw=None, sample_size=0))
    attr = s.attributes["sex"]
    rows, groups = pseudo_rows(attr)
    assert np.shares_memory(rows, attr.groups["F"].scores)  # no concatenated copy
    assert np.array_equal(rows, np.concatenate([np.sort(score[sex == "F"]),
                                                np.sort(score[sex == "M"])]))
    assert groups.contiguous and groups.counts.tolist() == [
        int((sex == "F").sum()), int((sex == "M").sum())]


def test_evaluate_window_values_as_the_numpy_path(numpy_path):
    rng = np.random.default_rng(6)
    sf = {"sex": np.array([fresh(v) for v in rng.choice(["F", "M"], N)], dtype=object),
          "race": rng.choice(np.array(list("abc"), dtype=object), N)}
    score = np.clip(rng.beta(2, 3, N) + (sf["sex"] == "F") * 0.05, 0, 1)
    label = (rng.random(N) < score).astype(np.int64)
    got = evaluate_window(Window(sf, y_score=score, y_true=label), confidence_level=None)
    want = numpy_path(evaluate_window, Window(sf, y_score=score, y_true=label),
                      confidence_level=None)
    assert got.values.keys() == want.values.keys()
    for key, value in got.values.items():
        assert value == want.values[key] or (math.isnan(value) and math.isnan(want.values[key]))
    assert got.values[("abcc", "sex:race")] > 0.0


def test_evaluate_window_drops_missing_rows_of_long_columns(numpy_path):
    rng = np.random.default_rng(7)
    sex = rng.choice(np.array(["F", "M"], dtype=object), N)
    sex[[5, 17, N - 1]] = None
    score = rng.random(N)
    window = Window({"sex": sex}, y_score=score, missing="drop")
    assert window.missing_counts == {"sex": ("drop", 3)}
    got = evaluate_window(window, metrics=["abcc"], confidence_level=None)
    want = numpy_path(evaluate_window, Window({"sex": sex}, y_score=score, missing="drop"),
                      metrics=["abcc"], confidence_level=None)
    assert got.values == want.values


# --------------------------------------------------------------------------- a new object a row
# pandas 3 reads text as arrow strings and ``to_numpy()`` makes a new ``str`` a row (only
# one-character strings are shared by Python); database drivers do the same. Identity then
# finds nothing to share: the table grew to every row (4 GB at 10^7 rows) and every row's
# value was compared in a dict pass anyway (~7 s for three columns at 10^7 rows).


def test_identity_codes_give_up_on_a_new_object_per_row():
    col = np.array([fresh(v) for v in np.random.default_rng(8).choice(["25-40", ">60"], N)],
                   dtype=object)
    assert identity_codes(col) is None  # a quarter of the rows in distinct objects: give up
    assert identity_codes(col, limit=N) is not None  # a larger budget still codes them
    shared = np.random.default_rng(8).choice(np.array(["25-40", ">60"], dtype=object), N)
    assert identity_codes(shared)[1].size == 2


@pytest.mark.parametrize("values", [["25-40", ">60", "<25"], [1, "1", 2.5, "x"]])
def test_factorize_a_new_object_per_row_by_hash_as_the_dict_path(values, numpy_path):
    rng = np.random.default_rng(9)
    col = np.empty(N, dtype=object)
    col[:] = [fresh(v) if isinstance(v, str) else float(v) if isinstance(v, float) else v
              for v in (values[i] for i in rng.integers(0, len(values), N))]
    assert groups_module._hash_codes(col) is not None  # the hash path ran, and was checked
    uniques, codes, counts = groups_module._factorize_counted(col)
    want_uniques, want_codes = numpy_path(factorize, col)
    assert uniques.tolist() == want_uniques.tolist()
    assert np.array_equal(codes, want_codes)
    assert counts.tolist() == np.bincount(want_codes).tolist()


def test_hash_codes_defer_to_the_dict_path_when_values_do_not_compare(numpy_path):
    rng = np.random.default_rng(10)
    col = np.array([fresh(v) for v in rng.choice(["ab", "cd"], N)], dtype=object)
    col[[3, 99]] = float("nan")  # unequal to itself: the check fails, the dict pass decides
    assert groups_module._hash_codes(col) is None
    unhashable = col.copy()
    unhashable[7] = ["a", "list"]
    assert groups_module._hash_codes(unhashable) is None
    uniques, codes = factorize(col)
    want_uniques, want_codes = numpy_path(factorize, col)
    assert [repr(u) for u in uniques] == [repr(u) for u in want_uniques]
    assert np.array_equal(codes, want_codes)
    with pytest.raises(TypeError, match="unhashable"):
        factorize(unhashable)


def test_missing_mask_of_a_new_object_per_row(numpy_path):
    rng = np.random.default_rng(11)
    col = np.array([fresh(v) for v in rng.choice(["ab", "cd"], N)], dtype=object)
    col[[4, 40, N - 2]] = [None, float("nan"), pd.NA]
    assert identity_codes(col) is None
    mask = missing_mask(col)
    assert np.flatnonzero(mask).tolist() == [4, 40, N - 2]
    assert np.array_equal(mask, numpy_path(missing_mask, col))


def test_column_values_share_one_object_per_value_of_arrow_text():
    rng = np.random.default_rng(12)
    text = pd.Series(rng.choice(["25-40", ">60", "<25"], N)).astype("string[pyarrow]")
    text[[2, 50]] = pd.NA
    col = groups_module.column_values(text)
    assert col.dtype == object and col.size == N
    assert identity_codes(col)[1].size == 4  # three values and the missing marker
    assert col[[2, 50]].tolist() == [None, None]
    assert [v for v in col.tolist() if v is not None] == \
        [v for v in text.tolist() if v is not pd.NA]
    assert missing_mask(col).sum() == 2
    numbers = pd.Series(rng.integers(0, 3, N)).astype("category")
    assert groups_module.column_values(numbers).dtype == np.int64  # numbers stay numbers
    assert groups_module.column_values(text[:10]).tolist() == text[:10].to_numpy().tolist()


def test_evaluate_window_from_arrow_text_as_from_shared_objects():
    rng = np.random.default_rng(13)
    age = rng.choice(np.array(["<25", "25-40", ">60"], dtype=object), N)
    score = rng.random(N)
    frame = pd.DataFrame({"age": pd.Series(age).astype("string[pyarrow]"), "score": score})
    got = evaluate_window(Window.from_frame(frame, sensitive_features=["age"], score="score"),
                          metrics=["abcc", "demographic_parity_difference"],
                          confidence_level=None)
    want = evaluate_window(Window({"age": age}, y_score=score),
                           metrics=["abcc", "demographic_parity_difference"],
                           confidence_level=None)
    assert got.values == want.values
    assert got.values[("demographic_parity_difference", "age")] > 0.0
