"""HFM (paper 000): spec hand cases T1-T6, a brute-force oracle, ApproxDist invariants, data sets.

The oracle builds the one-hot, min-max scaled points ``z = (label, x)`` by hand and takes every
cross-group distance with ``scipy.spatial.distance.cdist``: Eqs. (4)-(7) read off directly.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cdist

from fairmonitor import InvalidInputError, UndefinedMetricWarning
from fairmonitor.exceptions import GroupExclusionWarning
from fairmonitor.metrics import HFMResult, hfm
from fairmonitor.report import Window, evaluate_window

DIGITS10 = 5e-11
FIELDS = ("distance", "distance_model", "distance_average", "distance_model_average")


# --- oracle -----------------------------------------------------------------------------------

def _dense(columns, scale=True):
    parts = []
    for col in columns:
        col = np.asarray(col)
        if col.dtype.kind in "biuf":
            col = col.astype(float)
            span = col.max() - col.min()
            parts.append((col - col.min()) / span if scale and span > 0
                         else (np.zeros_like(col) if scale else col))
        else:
            parts += [(col == level).astype(float) for level in np.unique(col)]
    return np.column_stack(parts)


def _oracle(columns, y_true, y_pred, attributes, scale=True):
    """Per attribute [D, D_f, D_avg, D_f,avg] straight from the definitions (cdist)."""
    x = _dense(columns, scale)
    classes = np.unique(np.concatenate([y_true, y_pred]))
    out = {}
    for name, codes in attributes.items():
        codes = np.asarray(codes)
        row = []
        for labels in (y_true, y_pred):
            z = np.column_stack([np.searchsorted(classes, labels).astype(float), x])
            d = cdist(z, z)
            d[codes[:, None] == codes[None, :]] = np.inf
            delta = d.min(axis=1)
            row.append((delta.max(), delta.mean()))
        out[name] = np.array([row[0][0], row[1][0], row[0][1], row[1][1]])
    return out


def _random_case(rng, n=180):
    columns = {
        "num0": rng.normal(size=n),
        "num1": rng.integers(0, 5, n),
        "cat0": rng.choice(["a", "b", "c"], n),
        "cat1": rng.choice(["u", "v", "w", "x", "y"], n),
    }
    y_true = rng.integers(0, 3, n)
    y_pred = np.where(rng.random(n) < 0.3, rng.integers(0, 3, n), y_true)
    attributes = {"s2": rng.choice(["p", "q"], n), "s3": rng.integers(0, 3, n),
                  "s4": rng.choice(["k", "l", "m", "o"], n)}
    return columns, y_true, y_pred, attributes


def _fields(obj):
    return np.array([getattr(obj, f) for f in FIELDS])


# --- spec hand cases T1-T6 (hfm.md §7), raw features ------------------------------------------

def _t1():
    return hfm([0.0, 0.2, 0.5, 0.5], [0, 0, 0, 1], [0, 0, 0, 0], sensitive_features=[1, 1, 0, 0],
               scale=False)


@pytest.mark.parametrize(("field", "expected"), [
    ("distance", 1.0440306509), ("distance_average", 0.5360076627),
    ("distance_model", 0.5), ("distance_model_average", 0.35),
    ("value_max", -0.3197432446), ("value_average", -0.1851029540),
])
def test_t1_binary_attribute_label_matters(field, expected):
    assert getattr(_t1(), field) == pytest.approx(expected, abs=DIGITS10)


def test_t1_value_is_the_max_version_by_default():
    assert _t1().value == _t1().value_max


def test_t1_average_version():
    r = hfm([0.0, 0.2, 0.5, 0.5], [0, 0, 0, 1], [0, 0, 0, 0], sensitive_features=[1, 1, 0, 0],
            scale=False, version="average")
    assert r.value == pytest.approx(-0.1851029540, abs=DIGITS10)


def test_t1_approx_with_small_m2_is_exact():
    r = hfm([0.0, 0.2, 0.5, 0.5], [0, 0, 0, 1], [0, 0, 0, 0], sensitive_features=[1, 1, 0, 0],
            scale=False, method="approx", m2=1, random_state=0)
    assert r.value_max == pytest.approx(-0.3197432446, abs=DIGITS10)


@pytest.mark.parametrize(("field", "expected"), [("distance", 2.0),
                                                 ("distance_average", 4 / 3)])
def test_t2_multi_valued_is_each_group_versus_the_rest(field, expected):
    r = hfm([0, 1, 3], [0, 0, 0], [0, 0, 0], sensitive_features=[1, 2, 3], scale=False)
    assert getattr(r, field) == pytest.approx(expected, abs=DIGITS10)


T3_X = [0, 1, 2, 4, 7, 11]
T3_SF = {"sa1": [1, 1, 2, 2, 1, 2], "sa2": [1, 2, 1, 2, 3, 3]}


def _t3():
    return hfm(T3_X, [0] * 6, [0, 0, 0, 0, 0, 1], sensitive_features=T3_SF, scale=False)


@pytest.mark.parametrize(("field", "expected"), [
    ("distance", 7.0), ("distance_average", 29 / 12), ("distance_model", math.sqrt(50)),
    ("distance_model_average", (18 + math.sqrt(17) + math.sqrt(50)) / 12),
    ("value_max", 0.0043869622), ("value_average", 0.0028981859),
])
def test_t3_two_attributes(field, expected):
    assert getattr(_t3(), field) == pytest.approx(expected, abs=DIGITS10)


@pytest.mark.parametrize(("attribute", "expected"), [
    ("sa1", [4.0, math.sqrt(17), 14 / 6, (10 + math.sqrt(17)) / 6]),
    ("sa2", [7.0, math.sqrt(50), 15 / 6, (8 + math.sqrt(50)) / 6]),
])
def test_t3_per_attribute_distances(attribute, expected):
    got = _fields(_t3().per_attribute[attribute])
    assert got == pytest.approx(expected, abs=DIGITS10)


@pytest.mark.parametrize("version", ["value_max", "value_average"])
def test_t3_combined_lies_between_the_attributes(version):
    r = _t3()
    per = [getattr(a, version) for a in r.per_attribute.values()]
    assert min(per) <= getattr(r, version) <= max(per)


@pytest.mark.parametrize(("field", "expected"), [
    ("distance", 0.05), ("distance_average", 0.05), ("distance_model", 1.0012492197),
    ("value_max", 1.3015721863), ("value_average", 1.3015721863),
])
def test_t4_model_labelling_by_group(field, expected):
    r = hfm([0, 0.1, 0.05, 0.15], [0, 0, 0, 0], [0, 0, 1, 1], sensitive_features=[0, 0, 1, 1],
            scale=False)
    assert getattr(r, field) == pytest.approx(expected, abs=DIGITS10)


@pytest.mark.parametrize(("field", "expected"), [("distance", 5.0), ("distance_average", 3.75)])
def test_t5_a_group_of_one_row_is_measured(field, expected):
    r = hfm([0, 1, 2, 5], [0] * 4, [0] * 4, sensitive_features=[0, 0, 0, 1], scale=False)
    assert getattr(r, field) == pytest.approx(expected, abs=DIGITS10)


def _t6(**kw):
    rows = np.array([[0.1, 0.7], [0.4, 0.2], [0.9, 0.5]])
    return hfm(np.vstack([rows, rows]), [0, 1, 1, 0, 1, 1], [0, 1, 1, 0, 1, 1],
               sensitive_features=[0, 0, 0, 1, 1, 1], **kw)


def test_t6_identical_groups_have_zero_distance():
    with pytest.warns(UndefinedMetricWarning, match="data distance is 0"):
        r = _t6()
    assert r.distance == 0.0


def test_t6_identical_groups_hfm_is_nan():
    with pytest.warns(UndefinedMetricWarning, match="data distance is 0"):
        assert math.isnan(_t6().value)


def test_t6_approx_also_finds_zero():
    with pytest.warns(UndefinedMetricWarning, match="data distance is 0"):
        r = _t6(method="approx", random_state=3)
    assert r.distance_average == 0.0


# --- exact against the brute-force oracle ----------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_equals_brute_force_per_attribute(seed):
    rng = np.random.default_rng(seed)
    columns, y_true, y_pred, attrs = _random_case(rng)
    r = hfm(columns, y_true, y_pred, sensitive_features=attrs)
    expected = _oracle(list(columns.values()), y_true, y_pred, attrs)
    got = np.array([_fields(r.per_attribute[a]) for a in attrs])
    assert got == pytest.approx(np.array([expected[a] for a in attrs]), rel=1e-12, abs=1e-14)


def test_exact_equals_brute_force_combined(rng):
    columns, y_true, y_pred, attrs = _random_case(rng)
    r = hfm(columns, y_true, y_pred, sensitive_features=attrs)
    per = np.array(list(_oracle(list(columns.values()), y_true, y_pred, attrs).values()))
    expected = [per[:, 0].max(), per[:, 1].max(), per[:, 2].mean(), per[:, 3].mean()]
    assert _fields(r) == pytest.approx(expected, rel=1e-12)


def test_exact_equals_brute_force_raw_features(rng):
    columns, y_true, y_pred, attrs = _random_case(rng, n=120)
    r = hfm(columns, y_true, y_pred, sensitive_features=attrs, scale=False)
    expected = _oracle(list(columns.values()), y_true, y_pred, attrs, scale=False)
    assert _fields(r.per_attribute["s4"]) == pytest.approx(expected["s4"], rel=1e-12)


@pytest.mark.parametrize("loop_cells", [0, 64])
@pytest.mark.parametrize("own_block_rows", [1, 10**9])
def test_every_exact_code_path_equals_brute_force(monkeypatch, rng, loop_cells, own_block_rows):
    """Own-tuple blocks or shared blocks, per-cell argmin loop or segmented reduction."""
    from fairmonitor.metrics._hfm import exact as _manifold_exact
    monkeypatch.setattr(_manifold_exact, "_LOOP_CELLS", loop_cells)
    monkeypatch.setattr(_manifold_exact, "_OWN_BLOCK_ROWS", own_block_rows)
    columns, y_true, y_pred, attrs = _random_case(rng, n=240)
    attrs["s40"] = rng.integers(0, 40, 240)  # many cells
    r = hfm(columns, y_true, y_pred, sensitive_features=attrs)
    expected = _oracle(list(columns.values()), y_true, y_pred, attrs)
    got = np.array([_fields(r.per_attribute[a]) for a in attrs])
    assert got == pytest.approx(np.array([expected[a] for a in attrs]), rel=1e-12)


def test_rows_of_an_excluded_group_leave_the_computation(rng):
    columns, y_true, y_pred, attrs = _random_case(rng, n=150)
    g = np.where(np.arange(150) < 3, 7, attrs["s3"])
    with pytest.warns(GroupExclusionWarning):
        r = hfm(columns, y_true, y_pred, sensitive_features={"g": g}, min_group_size=4,
                scale=False)
    keep = g != 7
    expected = _oracle([np.asarray(c)[keep] for c in columns.values()], y_true[keep],
                       y_pred[keep], {"g": g[keep]}, scale=False)
    assert _fields(r) == pytest.approx(expected["g"], rel=1e-12)


def test_min_group_size_drops_the_small_group_from_its_attribute_only(rng):
    columns, y_true, y_pred, attrs = _random_case(rng, n=150)
    attrs["s3"] = np.where(np.arange(150) < 4, 9, attrs["s3"])  # group 9 has 4 rows
    with pytest.warns(GroupExclusionWarning, match="s3"):
        # raw features: scaling is fitted on all rows, the oracle would refit on the kept ones
        r = hfm(columns, y_true, y_pred, sensitive_features=attrs, min_group_size=5, scale=False)
    keep = attrs["s3"] != 9
    expected = _oracle([np.asarray(c)[keep] for c in columns.values()], y_true[keep],
                       y_pred[keep], {"s3": attrs["s3"][keep]}, scale=False)
    assert _fields(r.per_attribute["s3"]) == pytest.approx(expected["s3"], rel=1e-12)


def test_excluded_rows_still_count_for_the_other_attributes(rng):
    columns, y_true, y_pred, attrs = _random_case(rng, n=150)
    attrs["s3"] = np.where(np.arange(150) < 4, 9, attrs["s3"])
    with pytest.warns(GroupExclusionWarning):
        r = hfm(columns, y_true, y_pred, sensitive_features=attrs, min_group_size=5)
    expected = _oracle(list(columns.values()), y_true, y_pred, {"s4": attrs["s4"]})
    assert _fields(r.per_attribute["s4"]) == pytest.approx(expected["s4"], rel=1e-12)


def test_exact_duplicates_give_exactly_zero_not_rounding_noise(rng):
    x = rng.random((40, 5)) * 1e3  # large norms: the GEMM identity alone leaves ~1e-5 here
    y = np.zeros(80)
    with pytest.warns(UndefinedMetricWarning, match="data distance is 0"):
        r = hfm(np.vstack([x, x]), y, y, sensitive_features=np.repeat([0, 1], 40), scale=False)
    assert r.distance == 0.0


# --- properties --------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["exact", "approx"])
@pytest.mark.parametrize("version", ["value_max", "value_average"])
def test_perfect_predictions_give_exactly_zero(rng, method, version):
    columns, y_true, _, attrs = _random_case(rng)
    r = hfm(columns, y_true, y_true.copy(), sensitive_features=attrs, method=method,
            random_state=1)
    assert getattr(r, version) == 0.0


def test_constant_predictor_cannot_add_bias(rng):
    columns, y_true, _, attrs = _random_case(rng)
    r = hfm(columns, y_true, np.zeros_like(y_true), sensitive_features=attrs)
    assert max(r.value_max, r.value_average) <= 0.0


def test_several_attributes_are_not_intersected(rng):
    columns, y_true, y_pred, attrs = _random_case(rng)
    both = hfm(columns, y_true, y_pred, sensitive_features={k: attrs[k] for k in ("s2", "s3")})
    alone = hfm(columns, y_true, y_pred, sensitive_features={"s3": attrs["s3"]})
    assert _fields(both.per_attribute["s3"]) == pytest.approx(_fields(alone), rel=1e-15)


def test_combined_is_max_and_mean_of_attributes(rng):
    columns, y_true, y_pred, attrs = _random_case(rng)
    r = hfm(columns, y_true, y_pred, sensitive_features=attrs)
    per = np.array([_fields(a) for a in r.per_attribute.values()])
    expected = [per[:, 0].max(), per[:, 1].max(), per[:, 2].mean(), per[:, 3].mean()]
    assert _fields(r) == pytest.approx(expected, rel=1e-15)


def test_row_order_does_not_matter(rng):
    columns, y_true, y_pred, attrs = _random_case(rng)
    perm = rng.permutation(len(y_true))
    r = hfm(columns, y_true, y_pred, sensitive_features=attrs)
    shuffled = hfm({k: v[perm] for k, v in columns.items()}, y_true[perm], y_pred[perm],
                   sensitive_features={k: v[perm] for k, v in attrs.items()})
    assert _fields(shuffled) == pytest.approx(_fields(r), rel=1e-12)


def test_translation_and_uniform_scaling_of_raw_features(rng):
    x = rng.random((90, 3))
    y = rng.integers(0, 2, 90)
    pred = rng.integers(0, 2, 90)
    g = rng.integers(0, 3, 90)
    r = hfm(x, y, pred, sensitive_features=g, scale=False)
    moved = hfm(x + 5.0, y, pred, sensitive_features=g, scale=False)
    assert moved.value_max == pytest.approx(r.value_max, rel=1e-9)


def test_min_max_scaling_removes_feature_units(rng):
    x = rng.random((90, 3))
    y, pred, g = rng.integers(0, 2, 90), rng.integers(0, 2, 90), rng.integers(0, 3, 90)
    r = hfm(x, y, pred, sensitive_features=g)
    rescaled = hfm(x * [1.0, 1000.0, 0.01] - 3.0, y, pred, sensitive_features=g)
    assert _fields(rescaled) == pytest.approx(_fields(r), rel=1e-9)


def test_categorical_strings_equal_their_one_hot_columns(rng):
    columns, y_true, y_pred, attrs = _random_case(rng)
    frame = pd.DataFrame(columns)
    one_hot = pd.get_dummies(frame, columns=["cat0", "cat1"], dtype=float)
    a = hfm(frame, y_true, y_pred, sensitive_features=attrs)
    b = hfm(one_hot.to_numpy(), y_true, y_pred, sensitive_features=attrs)
    assert _fields(a) == pytest.approx(_fields(b), rel=1e-12)


def test_dataframe_dict_and_array_inputs_agree(rng):
    x = rng.random((60, 3))
    y, pred, g = rng.integers(0, 2, 60), rng.integers(0, 2, 60), rng.integers(0, 2, 60)
    from_array = hfm(x, y, pred, sensitive_features=g)
    from_frame = hfm(pd.DataFrame(x, columns=list("abc")), y, pred,
                     sensitive_features=pd.Series(g, name="g"))
    assert from_frame.value == from_array.value


def test_string_class_labels(rng):
    x = rng.random((60, 2))
    y, pred, g = rng.integers(0, 3, 60), rng.integers(0, 3, 60), rng.integers(0, 2, 60)
    names = np.array(["cat", "dog", "eel"])
    assert hfm(x, names[y], names[pred], sensitive_features=g).value == \
        hfm(x, y, pred, sensitive_features=g).value


def test_result_is_frozen():
    r = _t1()
    with pytest.raises(AttributeError):
        r.value = 0.0  # type: ignore[misc]


def test_progress_is_logged(caplog):
    with caplog.at_level(logging.INFO, logger="fairmonitor.metrics"):
        _t1()
    assert any("hfm exact" in rec.getMessage() for rec in caplog.records)


# --- ApproxDist ---------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_approx_is_an_upper_bound(seed):
    rng = np.random.default_rng(seed)
    columns, y_true, y_pred, attrs = _random_case(rng, n=200)
    exact = hfm(columns, y_true, y_pred, sensitive_features=attrs)
    approx = hfm(columns, y_true, y_pred, sensitive_features=attrs, method="approx", m1=3, m2=2,
                 random_state=seed)
    got = np.array([_fields(approx.per_attribute[a]) for a in attrs])
    bound = np.array([_fields(exact.per_attribute[a]) for a in attrs])
    assert (got >= bound - 1e-12).all()


def test_approx_with_all_neighbours_is_exact(rng):
    columns, y_true, y_pred, attrs = _random_case(rng, n=200)
    exact = hfm(columns, y_true, y_pred, sensitive_features=attrs)
    approx = hfm(columns, y_true, y_pred, sensitive_features=attrs, method="approx", m1=1,
                 m2=199, random_state=0)
    assert _fields(approx) == pytest.approx(_fields(exact), rel=1e-12)


def test_approx_is_deterministic_per_seed(rng):
    columns, y_true, y_pred, attrs = _random_case(rng)
    a = hfm(columns, y_true, y_pred, sensitive_features=attrs, method="approx", m1=4,
            random_state=11)
    b = hfm(columns, y_true, y_pred, sensitive_features=attrs, method="approx", m1=4,
            random_state=np.random.default_rng(11))
    assert _fields(a).tolist() == _fields(b).tolist()


def test_approx_depends_on_the_seed(rng):
    columns, y_true, y_pred, attrs = _random_case(rng)
    a = hfm(columns, y_true, y_pred, sensitive_features=attrs, method="approx", m1=2, m2=1,
            random_state=11)
    b = hfm(columns, y_true, y_pred, sensitive_features=attrs, method="approx", m1=2, m2=1,
            random_state=12)
    assert _fields(a).tolist() != _fields(b).tolist()


def test_approx_attribute_does_not_depend_on_the_others(rng):
    columns, y_true, y_pred, attrs = _random_case(rng)
    both = hfm(columns, y_true, y_pred, sensitive_features=attrs, method="approx", m1=3,
               random_state=5)
    alone = hfm(columns, y_true, y_pred, sensitive_features={"s3": attrs["s3"]},
                method="approx", m1=3, random_state=5)
    assert _fields(both.per_attribute["s3"]).tolist() == _fields(alone).tolist()


def test_approx_records_its_parameters(rng):
    columns, y_true, y_pred, attrs = _random_case(rng)
    r = hfm(columns, y_true, y_pred, sensitive_features=attrs, method="approx", m1=2,
            random_state=0)
    assert (r.method, r.m1, r.m2) == ("approx", 2, 5)  # m2 = ceil(2 log10 180)


def _accele_literal(z, groups, w, m2):
    """Alg. 3 as written: sort by the projection, walk out from every row, skip rows of its
    own group without counting them, measure up to m2 others on each side. -> (max, sum)."""
    order = np.argsort(z @ w, kind="stable")
    zs, gs = z[order], groups[order]
    best = np.full(len(gs), np.inf)
    for i in range(len(gs)):
        for step in (-1, 1):
            j, seen = i + step, 0
            while 0 <= j < len(gs) and seen < m2:
                if gs[j] != gs[i]:
                    best[i] = min(best[i], math.dist(zs[i], zs[j]))
                    seen += 1
                j += step
    return best.max(), best.sum()


def _approx_literal(columns, y_true, y_pred, attributes, *, m1, m2, seed):
    """Algs. 1-3 on the dense one-hot points, with the directions hfm draws: per attribute
    [D, D_f, D_avg, D_f,avg], each the min over all 2 m1 directions (Alg. 2 lines 6-9)."""
    x = _dense(list(columns.values()))
    classes = np.unique(np.concatenate([y_true, y_pred]))
    rng = np.random.default_rng(seed)
    directions = [w for _ in range(m1)
                  for w in np.linalg.qr(rng.standard_normal((1 + x.shape[1], 2)))[0].T]
    out = {}
    for name, codes in attributes.items():
        codes = np.unique(np.asarray(codes), return_inverse=True)[1].reshape(-1)
        row = []
        for labels in (y_true, y_pred):
            z = np.column_stack([np.searchsorted(classes, labels).astype(float), x])
            scans = np.array([_accele_literal(z, codes, w, m2) for w in directions])
            row.append((scans[:, 0].min(), scans[:, 1].min() / len(codes)))
        out[name] = np.array([row[0][0], row[1][0], row[0][1], row[1][1]])
    return out


@pytest.mark.parametrize(("seed", "m1", "m2"), [(0, 2, 1), (1, 3, 2), (2, 2, 5)])
def test_approx_equals_a_literal_transcription_of_algorithms_1_to_3(seed, m1, m2):
    """hfm(method="approx") equals Algs. 1-3 read literally (dense one-hot points, a walk that
    skips same-group rows one by one), on attributes whose groups take both of the compiled
    scan's routes: big groups by index, small ones by walking (a 60/10/10/10/10 split)."""
    rng = np.random.default_rng(seed)
    columns, y_true, y_pred, attrs = _random_case(rng, n=150)
    attrs["s5"] = rng.choice(5, 150, p=[0.6, 0.1, 0.1, 0.1, 0.1])
    got = hfm(columns, y_true, y_pred, sensitive_features=attrs, method="approx", m1=m1, m2=m2,
              random_state=seed)
    expected = _approx_literal(columns, y_true, y_pred, attrs, m1=m1, m2=m2, seed=seed)
    for name in attrs:
        assert _fields(got.per_attribute[name]) == pytest.approx(expected[name], rel=1e-12)


@pytest.mark.parametrize("shares", [(0.5, 0.5), (0.9, 0.1), (0.2,) * 5, (0.6, 0.1, 0.1, 0.2),
                                    (1.0,)])
@pytest.mark.parametrize("m2", [1, 3, 500])
def test_compiled_scan_equals_the_walk_bit_for_bit(rng, shares, m2):
    """The compiled scan finds, for every row, the minimum over exactly Alg. 3's candidates,
    with FeatureSpace.sqdist's distances to the last bit. Groups of >= 25% of the rows take
    the indexed route, smaller ones the walk; one group alone has no candidates (inf)."""
    from fairmonitor._kernels.hfm import nearest_other_group_sqdist
    from fairmonitor.metrics._hfm.approx import _compact_table
    from fairmonitor.metrics._hfm.exact import feature_space

    n = 300
    space = feature_space({"a": rng.normal(size=n), "b": rng.integers(0, 3, n),
                           "c": rng.choice(list("pqrs"), n), "d": rng.choice(list("xy"), n)},
                          scale=True)
    label = rng.integers(0, 2, n).astype(float)
    groups = rng.choice(len(shares), n, p=shares)
    got = nearest_other_group_sqdist(_compact_table(space, label), space.packed,
                                     space.lane_bits, groups, m2)
    expected = np.full(n, np.inf)
    for i in range(n):
        for step in (-1, 1):
            j, seen = i + step, 0
            while 0 <= j < n and seen < m2:
                if groups[j] != groups[i]:
                    d = space.sqdist(np.array([i]), np.array([j]), label)[0]
                    expected[i] = min(expected[i], d)
                    seen += 1
                j += step
    assert got.tolist() == expected.tolist()


def test_approx_does_not_depend_on_how_ties_are_ordered(rng):
    """Identical rows tie in every projection; the sort may order them either way (it is not
    stable). Whatever the order, every row finds the same minimum: shuffling the rows of a
    data set made of triplicated points leaves the estimate unchanged."""
    base = {"num": rng.normal(size=60), "cat": rng.choice(list("abc"), 60)}
    columns = {k: np.repeat(v, 3) for k, v in base.items()}
    y = np.repeat(rng.integers(0, 2, 60), 3)
    attrs = {"s": rng.choice(list("pqr"), 180), "t": rng.choice(list("uv"), 180)}
    r = hfm(columns, y, y[::-1], sensitive_features=attrs, method="approx", m1=3, m2=2,
            random_state=4)
    perm = rng.permutation(180)
    shuffled = hfm({k: v[perm] for k, v in columns.items()}, y[perm], y[::-1][perm],
                   sensitive_features={k: v[perm] for k, v in attrs.items()}, method="approx",
                   m1=3, m2=2, random_state=4)
    for name in attrs:
        assert _fields(shuffled.per_attribute[name]) == pytest.approx(
            _fields(r.per_attribute[name]), rel=1e-14)


@pytest.mark.parametrize("seed", [0, 1])
def test_approx_is_close_on_separated_groups(seed):
    """Spec T11: three well-separated groups, paper defaults: over-estimate within 5%."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, 1000)
    u = rng.normal(size=6)
    x = 0.1 * rng.normal(size=(1000, 6)) + a[:, None] * (u / np.linalg.norm(u))
    y = np.zeros(1000)
    exact = hfm(x, y, y, sensitive_features=a, scale=False)
    approx = hfm(x, y, y, sensitive_features=a, scale=False, method="approx", random_state=seed)
    ratio = np.array([approx.distance, approx.distance_average]) / \
        np.array([exact.distance, exact.distance_average]) - 1
    assert ((ratio >= -1e-12) & (ratio <= 0.05)).all()


# --- undefined cases: NaN with a reason, never a sentinel -------------------------------------

@pytest.mark.parametrize("method", ["exact", "approx"])
def test_single_valued_attribute_is_nan_with_reason(method):
    with pytest.warns(UndefinedMetricWarning, match="single group"):
        r = hfm([0.0, 0.5, 1.0], [0, 1, 0], [0, 1, 1], sensitive_features=["a", "a", "a"],
                method=method, random_state=0)
    assert math.isnan(r.distance)


def test_undefined_attribute_is_left_out_of_the_combination(rng):
    columns, y_true, y_pred, attrs = _random_case(rng)
    with pytest.warns(UndefinedMetricWarning, match="'const'"):
        r = hfm(columns, y_true, y_pred,
                sensitive_features={"s3": attrs["s3"], "const": np.zeros(len(y_true))})
    assert r.value_max == r.per_attribute["s3"].value_max


def test_zero_model_distance_is_nan_not_minus_13():
    # with the predictions every row has a twin in the other group; with the labels not
    x = [[0.0], [0.0], [1.0], [1.0]]
    with pytest.warns(UndefinedMetricWarning, match="model distance is 0"):
        r = hfm(x, [0, 1, 0, 1], [0, 0, 0, 0], sensitive_features=[0, 1, 0, 1])
    assert math.isnan(r.value_average)


def test_all_attributes_undefined_gives_nan(rng):
    with pytest.warns(UndefinedMetricWarning):
        r = hfm(rng.random((5, 2)), [0, 1, 0, 1, 0], [0, 1, 0, 1, 1],
                sensitive_features={"a": ["x"] * 5, "b": [1] * 5})
    assert math.isnan(r.value)


# --- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "match"), [
    ({"version": "median"}, "'version' parameter of hfm"),
    ({"method": "kdtree"}, "'method' parameter of hfm"),
    ({"method": "approx", "m1": 0}, "`m1` must be an integer >= 1"),
    ({"method": "approx", "m2": 0}, "`m2` must be an integer >= 1"),
    ({"scale": "yes"}, "`scale` must be True or False"),
    ({"min_group_size": 0}, "`min_group_size` must be an integer >= 1"),
])
def test_bad_options_raise(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        hfm([0.0, 1.0], [0, 1], [0, 1], sensitive_features=[0, 1], **kwargs)


@pytest.mark.parametrize(("X", "y_true", "y_pred", "sf", "match"), [
    (None, [0, 1], [0, 1], [0, 1], "`X` is required"),
    (np.zeros((2, 2, 2)), [0, 1], [0, 1], [0, 1], "`X` must be 2-dimensional"),
    ([0.0, 1.0, 2.0], [0, 1], [0, 1], [0, 1], "rows"),
    ([0.0, 1.0], [0, 1], [0, 1, 1], [0, 1], "rows"),
    ([0.0, 1.0], [0, 1], [0, 1], [0, 1, 0], "rows"),
    ([0.0, np.nan], [0, 1], [0, 1], [0, 1], "NaN or infinite"),
    ({"c": np.array(["a", None], dtype=object)}, [0, 1], [0, 1], [0, 1], "missing values"),
    ({"t": np.array(["2024-01-01", "2024-02-01"], dtype="datetime64[D]")}, [0, 1], [0, 1],
     [0, 1], "dtype datetime64"),
    ({}, [0, 1], [0, 1], [0, 1], "no feature columns"),
    ([0.0, 1.0], ["no", "yes"], [0, 1], [0, 1], "same class labels"),
    ([0.0, 1.0], [0, np.nan], [0, 1], [0, 1], "NaN or infinite"),
    ([0.0, 1.0], [0, 1], [0, 1], [0, None], "missing values"),
    ([0.0, 1.0], [0, 1], [0.2, 0.9], [0, 1], "look like scores"),
    ({"c": pd.array(["a", pd.NA], dtype=object)}, [0, 1], [0, 1], [0, 1], "missing values"),
])
def test_bad_input_raises(X, y_true, y_pred, sf, match):
    with pytest.raises(InvalidInputError, match=match):
        hfm(X, y_true, y_pred, sensitive_features=sf)


# --- the report layer ---------------------------------------------------------------------------

def test_report_gives_per_attribute_and_combined_rows(rng):
    columns, y_true, y_pred, attrs = _random_case(rng, n=150)
    window = Window({"s2": attrs["s2"], "s3": attrs["s3"]}, y_pred=y_pred, y_true=y_true,
                    X=pd.DataFrame(columns))
    report = evaluate_window(window, metrics=["hfm", "hfm_average"], errors="raise")
    direct = hfm(columns, y_true, y_pred, sensitive_features={"s2": attrs["s2"],
                                                              "s3": attrs["s3"]})
    assert [report.values[("hfm", "s2")], report.values[("hfm_average", "s2:s3")]] == \
        [direct.per_attribute["s2"].value_max, direct.value_average]


def test_report_without_labels_skips_hfm(rng):
    window = Window({"g": rng.integers(0, 2, 20)}, y_pred=rng.integers(0, 2, 20),
                    X=rng.random((20, 2)))
    report = evaluate_window(window)
    assert report.skipped["hfm"] == "labels not available"


# --- bundled data sets, end to end ---------------------------------------------------------------

def _compas(compas_raw):
    df = compas_raw
    df = df[df["days_b_screening_arrest"].between(-30, 30) & (df["is_recid"] != -1)
            & (df["c_charge_degree"] != "O") & (df["score_text"] != "N/A")]
    features = df[["age", "priors_count", "juv_fel_count", "juv_misd_count", "juv_other_count",
                   "c_charge_degree", "age_cat"]]
    y_true = df["two_year_recid"].to_numpy()
    y_pred = (df["decile_score"] >= 5).to_numpy().astype(int)  # COMPAS "medium or high"
    return features, y_true, y_pred, df[["race", "sex"]]


def test_compas_end_to_end(compas_raw):
    features, y_true, y_pred, sf = _compas(compas_raw)
    assert len(y_true) == 6172
    r = hfm(features, y_true, y_pred, sensitive_features=sf)
    per = [a.value_average for a in r.per_attribute.values()]
    assert isinstance(r, HFMResult)
    assert min(per) <= r.value_average <= max(per)


def test_compas_exact_equals_brute_force_on_a_sample(compas_raw):
    features, y_true, y_pred, sf = _compas(compas_raw)
    rows = np.random.default_rng(0).choice(len(y_true), 1500, replace=False)
    sample = features.iloc[rows]
    r = hfm(sample, y_true[rows], y_pred[rows], sensitive_features=sf.iloc[rows])
    expected = _oracle([sample[c].to_numpy() for c in sample.columns], y_true[rows],
                       y_pred[rows], {"race": sf["race"].to_numpy()[rows]})["race"]
    assert _fields(r.per_attribute["race"]) == pytest.approx(expected, rel=1e-12)


def test_adult_end_to_end(adult_raw):
    df = adult_raw
    df = df.sample(3000, random_state=0)
    y_true = (df["income-per-year"] == ">50K").to_numpy().astype(int)
    X = df.drop(columns=["income-per-year", "race", "sex"])
    y_pred = ((df["education-num"] >= 13) | (df["capital-gain"] > 5000)).to_numpy().astype(int)
    exact = hfm(X, y_true, y_pred, sensitive_features=df[["race", "sex"]])
    approx = hfm(X, y_true, y_pred, sensitive_features=df[["race", "sex"]], method="approx",
                 m1=5, random_state=0)
    assert (_fields(approx) >= _fields(exact) - 1e-12).all()


@pytest.mark.parametrize("n_levels", [(3, 5, 2, 7, 4, 9, 3, 2, 6), (300, 4)])
def test_approx_compact_distances_match_the_one_hot_ones(rng, n_levels):
    """The approx scan's compact distances (label, numeric columns, packed codes) equal
    ``FeatureSpace.sqdist`` bit for bit and the dense one-hot distances to 1e-12; 9 columns of
    8-bit lanes need two packed words, 300 levels 16-bit lanes. A two-row scan measures
    exactly one pair."""
    from fairmonitor._kernels.hfm import nearest_other_group_sqdist
    from fairmonitor.metrics._hfm.approx import _compact_table
    from fairmonitor.metrics._hfm.exact import feature_space

    n = 300
    columns = {f"c{k}": rng.choice([f"v{v}" for v in range(m)], n)
               for k, m in enumerate(n_levels)}
    columns |= {"a": rng.normal(size=n), "b": rng.integers(0, 5, n), "c": np.full(n, 2.0)}
    space = feature_space(columns, scale=True)
    assert space.packed.shape[0] == (2 if len(n_levels) > 8 else 1)
    label = rng.integers(0, 3, n).astype(float)
    i = rng.integers(0, n, 200)
    j = rng.integers(0, n, 200)
    coords = _compact_table(space, label)
    got = np.array([nearest_other_group_sqdist(coords[:, [a, b]], space.packed[:, [a, b]],
                                               space.lane_bits, np.array([0, 1]), 1)[0]
                    for a, b in zip(i, j, strict=True)])
    assert got.tolist() == space.sqdist(i, j, label).tolist()
    z = np.column_stack([label, _dense(list(columns.values()))])
    expected = ((z[j] - z[i]) ** 2).sum(axis=1)
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-14)


# --- method="sampled": the average version from exactly scanned query rows --------------------

def _sampled_case(n: int = 400, seed: int = 3):
    gen = np.random.default_rng(seed)
    X = pd.DataFrame({"a": gen.normal(size=n), "b": gen.uniform(size=n),
                      "c": gen.choice(list("xyz"), size=n)})
    sf = {"s": gen.choice(["p", "q"], size=n), "t": gen.choice(["u", "v", "w"], size=n)}
    y = gen.integers(0, 2, size=n)
    pred = np.where(gen.uniform(size=n) < 0.8, y, 1 - y)
    return X, y, pred, sf


def test_sampled_with_every_row_as_query_equals_exact():
    X, y, pred, sf = _sampled_case()
    exact = hfm(X, y, pred, sensitive_features=sf, version="average")
    full = hfm(X, y, pred, sensitive_features=sf, version="average", method="sampled",
               n_queries=10_000, random_state=0)
    assert full.n_queries == 400
    np.testing.assert_allclose(
        [full.value, full.distance_average, full.distance_model_average],
        [exact.value, exact.distance_average, exact.distance_model_average], rtol=1e-12)
    for name in sf:
        assert full.per_attribute[name].value_average == pytest.approx(
            exact.per_attribute[name].value_average, rel=1e-12)
    lo, hi = full.average_ci
    assert lo == pytest.approx(exact.value) and hi == pytest.approx(exact.value)  # no error left


def test_sampled_average_distance_is_unbiased_and_its_interval_covers():
    X, y, pred, sf = _sampled_case()
    exact = hfm(X, y, pred, sensitive_features=sf, version="average")
    runs = [hfm(X, y, pred, sensitive_features=sf, version="average", method="sampled",
                n_queries=40, random_state=seed) for seed in range(300)]
    means = np.array([r.distance_average for r in runs])
    # unbiased: the average of 300 estimates is within 3 standard errors of the exact mean
    assert abs(means.mean() - exact.distance_average) < 3 * means.std(ddof=1) / np.sqrt(300)
    covered = np.mean([r.average_ci[0] <= exact.value <= r.average_ci[1] for r in runs])
    assert 0.88 <= covered <= 0.99  # a 95% interval, up to the delta method's approximation


def test_sampled_maximal_version_is_undefined_with_the_reason():
    X, y, pred, sf = _sampled_case(n=60)
    with pytest.warns(UndefinedMetricWarning, match="estimates the average version only"):
        r = hfm(X, y, pred, sensitive_features=sf, method="sampled", n_queries=20, random_state=0)
    assert np.isnan(r.value) and np.isnan(r.value_max) and np.isfinite(r.value_average)
