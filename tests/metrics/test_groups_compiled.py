"""The compiled group encoding (:mod:`fairmonitor._kernels.groups`) against numpy oracles.

One implementation encodes columns of every length; the oracles are written here with numpy
and Python's dict and sort (the former short-column path): codes, labels, counts, missing
masks and summaries' counts must be identical (integers), report values equal to those of
the same rows encoded another way (fixed-width numpy strings, ``np.unique``'s path).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import fairmonitor.utils.groups as groups_module
from fairmonitor._kernels.groups import identity_codes
from fairmonitor.report import Window, evaluate_window
from fairmonitor.summaries import SummarySpec, summarize
from fairmonitor.summaries.compute import pseudo_rows
from fairmonitor.utils.groups import encode_attributes, factorize, missing_mask
from fairmonitor.utils.rowkeys import row_keys

N = 20_000


def factorize_oracle(col):
    """Sorted distinct values (numbers before text, by type name) and each row's index."""
    values = col.tolist()
    distinct = list(dict.fromkeys(values))
    try:
        distinct.sort()
    except TypeError:
        distinct.sort(key=groups_module._mixed_key)
    index = {v: i for i, v in enumerate(distinct)}
    return distinct, np.array([index[v] for v in values], dtype=np.intp)


def missing_oracle(col):
    return np.array([v is None or v is pd.NA or (isinstance(v, float) and v != v)
                     for v in col.tolist()])


def encode_oracle(cols):
    """Each column's and the intersection's labels, codes and counts, by tuples of values."""
    out = {}
    for name, col in cols.items():
        labels, codes = factorize_oracle(np.asarray(col, dtype=object))
        out[name] = ([groups_module.plain(v) for v in labels], codes)
    rows = list(zip(*(np.asarray(c, dtype=object).tolist() for c in cols.values()),
                    strict=True))
    labels = sorted(set(rows), key=lambda t: tuple(out[n][0].index(v)
                                                    for n, v in zip(cols, t, strict=True)))
    index = {t: i for i, t in enumerate(labels)}
    out[":".join(cols)] = (labels, np.array([index[t] for t in rows]))
    return {k: (lab, codes, np.bincount(codes, minlength=len(lab)))
            for k, (lab, codes) in out.items()}


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
@pytest.mark.parametrize("n", [N, 3, 1])
def test_factorize_object_columns_as_the_dict_oracle(kind, n):
    col = columns(np.random.default_rng(0))[kind][:n]
    uniques, codes = factorize(col)
    want_uniques, want_codes = factorize_oracle(col)
    assert groups_module._factorize_counted(col)[2] is not None  # counted: the compiled path
    assert uniques.tolist() == want_uniques
    assert codes.dtype == np.intp
    assert np.array_equal(codes, want_codes)


@pytest.mark.parametrize("n", [N, 10])
def test_missing_mask_of_object_columns(n):
    rng = np.random.default_rng(1)
    col = rng.choice(np.array(["a", "b"], dtype=object), n)
    assert not missing_mask(col).any()
    rows = rng.choice(n, min(50, n // 2), replace=False)
    for k, row in enumerate(rows):  # None, distinct NaN objects, pandas.NA
        col[row] = (None, float("nan"), pd.NA)[k % 3]
    mask = missing_mask(col)
    assert np.array_equal(mask, missing_oracle(col))
    assert sorted(np.flatnonzero(mask).tolist()) == sorted(rows.tolist())


@pytest.mark.parametrize("n", [N, 7])
def test_encode_attributes_as_the_tuple_oracle(n):
    rng = np.random.default_rng(2)
    cols = columns(rng)
    cols["code"] = rng.integers(0, 4, N)  # an integer column beside the objects
    cols = {k: cols[k][:n] for k in ("reused", "distinct", "code")}
    got = encode_attributes(cols)
    want = encode_oracle(cols)
    assert list(got) == list(want) == ["reused", "distinct", "code", "reused:distinct:code"]
    for name, g in got.items():
        labels, codes, counts = want[name]
        assert list(g.labels) == [tuple(v) if isinstance(v, tuple) else v for v in labels]
        assert np.array_equal(g.codes, codes)
        assert np.array_equal(g.counts, counts)
        assert g.codes.dtype == np.int8  # 1 byte a row for < 128 groups
    if n == N:
        assert len(got["reused:distinct:code"].labels) == 2 * 3 * 4


def test_kernels_refuse_codes_that_do_not_match_their_counts():
    """Nothing is written out of bounds: a code beyond the groups or a group with more rows
    than its count raises."""
    from fairmonitor._kernels import groups as kernels

    codes = np.array([0, 1, 1], dtype=np.int8)
    with pytest.raises(ValueError, match="outside"):
        kernels.group_order(codes, np.array([2, 1]), np.empty(3, dtype=np.intp))
    with pytest.raises(ValueError, match="add up"):
        kernels.group_layout(codes, np.array([1, 1]), np.zeros(3), np.empty(3))
    with pytest.raises(ValueError, match="outside"):
        kernels.count_codes(codes, 1)
    with pytest.raises(ValueError, match="outside"):
        kernels.outcome_counts(codes, 1, np.zeros(3, np.int8), np.zeros(0, np.int8))
    with pytest.raises(ValueError, match="other than 0 and 1"):
        kernels.outcome_counts(codes, 2, np.full(3, 2, np.int8), np.zeros(0, np.int8))
    with pytest.raises(ValueError, match="outside"):
        kernels.remap_codes(codes, np.zeros(1, np.int8), np.empty(3, np.int8))
    with pytest.raises(ValueError, match="outside"):
        kernels.cross_codes(codes, codes, 2, 3, np.empty(3, np.int32))


@pytest.mark.parametrize("spec", [SummarySpec(max_raw=None, sample_size=0),
                                  SummarySpec(max_raw=2000, sample_size=64)])
def test_summarize_counts_and_lays_out_groups_as_the_masks(spec):
    """Every group's counts (confusion included) and raw scores are those of a boolean mask
    of its rows; its row sample is the bottom of its rows' keys; cells count its scores."""
    rng = np.random.default_rng(3)
    sf = {"sex": rng.choice(np.array(["F", "M"], dtype=object), N, p=[0.9, 0.1]),
          "race": rng.choice(np.array(list("abcde"), dtype=object), N)}
    score = rng.random(N)
    label = rng.integers(0, 2, N)
    got = summarize(sf, y_score=score, y_true=label, spec=spec)
    pred = (score >= 0.5).astype(np.int8)
    keys = row_keys({"y_true": label.astype(np.int8), "y_pred": pred, "y_score": score}, N)
    for name, attr in got.attributes.items():
        values = sf[name] if name in sf else np.array(
            [(a, b) for a, b in zip(sf["sex"], sf["race"], strict=True)], dtype=object)
        for label_, g in attr.groups.items():
            rows = np.array([v == label_ for v in values]) if name in sf else np.array(
                [tuple(v) == label_ for v in values])
            tp = int((rows & (pred == 1) & (label == 1)).sum())
            fp = int((rows & (pred == 1) & (label == 0)).sum())
            fn = int((rows & (pred == 0) & (label == 1)).sum())
            tn = int((rows & (pred == 0) & (label == 0)).sum())
            assert (g.n, g.predicted_positive, g.confusion) == (
                int(rows.sum()), tp + fp, (tp, fp, fn, tn))
            mine = np.sort(score[rows])
            if g.scores is not None:
                assert np.array_equal(g.scores, mine)
            else:
                assert int(g.cells.count.sum()) == g.n
                # cells keep each score's position to an integer step of the cell: the
                # sum is certified to within the cells' step error, not to round-off
                assert abs(float(g.cells.total.sum()) - float(mine.sum())) <= (
                    g.cells.step_error * (1 + 1e-12))
            assert np.array_equal(g.sample_keys, np.sort(keys[rows])[:spec.sample_size])


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


def test_evaluate_window_values_as_fixed_width_strings():
    """Object columns (identity and hash kernels) give the values of the same columns as
    numpy fixed-width strings (``np.unique``'s path)."""
    rng = np.random.default_rng(6)
    sf = {"sex": np.array([fresh(v) for v in rng.choice(["F", "M"], N)], dtype=object),
          "race": rng.choice(np.array(list("abc"), dtype=object), N)}
    score = np.clip(rng.beta(2, 3, N) + (sf["sex"] == "F") * 0.05, 0, 1)
    label = (rng.random(N) < score).astype(np.int64)
    got = evaluate_window(Window(sf, y_score=score, y_true=label), confidence_level=None)
    want = evaluate_window(Window({k: v.astype(str) for k, v in sf.items()}, y_score=score,
                                  y_true=label), confidence_level=None)
    assert got.values.keys() == want.values.keys()
    for key, value in got.values.items():
        assert value == want.values[key] or (math.isnan(value) and math.isnan(want.values[key]))
    assert got.values[("abcc", "sex:race")] > 0.0


def test_evaluate_window_drops_missing_rows_of_object_columns():
    rng = np.random.default_rng(7)
    sex = rng.choice(np.array(["F", "M"], dtype=object), N)
    sex[[5, 17, N - 1]] = None
    score = rng.random(N)
    window = Window({"sex": sex}, y_score=score, missing="drop")
    assert window.missing_counts == {"sex": ("drop", 3)}
    got = evaluate_window(window, metrics=["abcc"], confidence_level=None)
    keep = np.ones(N, dtype=bool)
    keep[[5, 17, N - 1]] = False
    want = evaluate_window(Window({"sex": sex[keep].astype(str)}, y_score=score[keep]),
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
def test_factorize_a_new_object_per_row_by_hash_as_the_dict_oracle(values):
    rng = np.random.default_rng(9)
    col = np.empty(N, dtype=object)
    col[:] = [fresh(v) if isinstance(v, str) else float(v) if isinstance(v, float) else v
              for v in (values[i] for i in rng.integers(0, len(values), N))]
    assert groups_module._hash_codes(col) is not None  # the hash path ran, and was checked
    uniques, codes, counts = groups_module._factorize_counted(col)
    want_uniques, want_codes = factorize_oracle(col)
    assert uniques.tolist() == want_uniques
    assert np.array_equal(codes, want_codes)
    assert counts.tolist() == np.bincount(want_codes).tolist()


def test_hash_codes_defer_to_the_dict_path_when_values_do_not_compare():
    rng = np.random.default_rng(10)
    col = np.array([fresh(v) for v in rng.choice(["ab", "cd"], N)], dtype=object)
    col[[3, 99]] = float("nan")  # unequal to itself: the check fails, the dict pass decides
    assert groups_module._hash_codes(col) is None
    unhashable = col.copy()
    unhashable[7] = ["a", "list"]
    assert groups_module._hash_codes(unhashable) is None
    uniques, codes = factorize(col)
    want_uniques, want_codes = groups_module._factorize_values(col.tolist())
    assert [repr(u) for u in uniques] == [repr(u) for u in want_uniques]
    assert np.array_equal(codes, want_codes)
    with pytest.raises(TypeError, match="unhashable"):
        factorize(unhashable)


def test_missing_mask_of_a_new_object_per_row():
    rng = np.random.default_rng(11)
    col = np.array([fresh(v) for v in rng.choice(["ab", "cd"], N)], dtype=object)
    col[[4, 40, N - 2]] = [None, float("nan"), pd.NA]
    assert identity_codes(col) is None
    mask = missing_mask(col)
    assert np.flatnonzero(mask).tolist() == [4, 40, N - 2]
    assert np.array_equal(mask, missing_oracle(col))


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
    short = groups_module.column_values(text[:10])  # the same path at every length
    assert short.tolist() == [None if v is pd.NA else v for v in text[:10].tolist()]


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
