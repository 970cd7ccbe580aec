"""Encoding of sensitive features into groups."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fairmonitor.exceptions import GroupExclusionWarning, InvalidInputError
from fairmonitor.metrics import encode_groups, sensitive_columns
from fairmonitor.utils.groups import apply_missing_policy


def test_single_column_any_hashable_labels():
    g = encode_groups(["x", "y", "x", "z"])
    assert g.labels == ("x", "y", "z")
    assert g.codes.tolist() == [0, 1, 0, 2]
    assert g.counts.tolist() == [2, 1, 1]
    assert g.name == "sensitive_feature_0"


def test_series_name_is_kept():
    g = encode_groups(pd.Series([1, 2, 1], name="race"))
    assert g.name == "race"
    assert g.labels == (1, 2)


def test_dataframe_gives_intersection():
    df = pd.DataFrame({"sex": ["F", "M", "F", "M"], "race": ["a", "a", "b", "a"]})
    g = encode_groups(df)
    assert g.name == "sex:race"
    assert g.labels == (("F", "a"), ("F", "b"), ("M", "a"))
    assert g.codes.tolist() == [0, 2, 1, 2]


def test_dict_and_2d_array_agree():
    a = np.array([[0, 1], [1, 1], [0, 0]])
    g1 = encode_groups(a)
    g2 = encode_groups({"sensitive_feature_0": a[:, 0], "sensitive_feature_1": a[:, 1]})
    assert g1.codes.tolist() == g2.codes.tolist()
    assert g1.labels == g2.labels


def test_split_returns_groups_in_label_order_and_skips_excluded():
    with pytest.warns(GroupExclusionWarning):
        g = encode_groups(list("abacb"), min_group_size=2)
    parts = g.split(np.arange(5))
    assert [p.tolist() for p in parts] == [[0, 2], [1, 4]]


def test_missing_values_name_column_and_rows():
    with pytest.raises(InvalidInputError,
                       match=r"'race' has 2 missing values \(NaN/None\) at rows 1, 3"):
        sensitive_columns({"race": np.array(["a", None, "b", None], dtype=object)})
    with pytest.raises(InvalidInputError, match=r"'age' has 1 missing values"):
        sensitive_columns(pd.DataFrame({"age": [1.0, np.nan]}))


def test_nullable_boolean_with_pd_na_is_a_clear_missing_value_error():
    # pd.NA used to reach `NA != NA` and raise "boolean value of NA is ambiguous" (TypeError)
    col = pd.Series([True, pd.NA, False], dtype="boolean").to_numpy()
    with pytest.raises(InvalidInputError, match=r"'flag' has 1 missing values .* at rows 1.*"
                                                r"'group' or 'drop'"):
        sensitive_columns({"flag": col})


def test_missing_policy_groups_drops_or_raises_per_column():
    cols = {"flag": pd.Series([True, pd.NA, False, True], dtype="boolean").to_numpy(),
            "age": np.array([30.0, 41.0, np.nan, 25.0]),
            "sex": np.array(["F", "M", "F", "M"], dtype=object)}
    out, keep, missing = apply_missing_policy(cols, {"flag": "group", "age": "drop"})
    assert out["flag"].tolist() == ["True", "missing", "False", "True"]
    assert keep.tolist() == [True, True, False, True]
    assert missing == {"flag": ("group", 1), "age": ("drop", 1)}
    assert out["sex"] is cols["sex"]  # untouched without missing values
    assert encode_groups({"flag": out["flag"]}).labels == ("False", "True", "missing")
    with pytest.raises(InvalidInputError, match="'age' has 1 missing values"):
        apply_missing_policy(cols, {"flag": "group"})  # age: raise, the default of a mapping
    with pytest.raises(InvalidInputError, match="missing: the policy for 'age' must be one of "
                                                "group, drop, raise; got 'skip'"):
        apply_missing_policy(cols, {"flag": "group", "age": "skip"})


def test_length_mismatch_with_predictions():
    with pytest.raises(InvalidInputError, match="has 2 rows but the predictions/scores have 3"):
        encode_groups(["a", "b"], n_samples=3)


def test_columns_of_different_length():
    with pytest.raises(InvalidInputError, match="differ in length"):
        sensitive_columns({"a": [1, 2], "b": [1]})


def test_min_group_size_must_be_positive_int():
    with pytest.raises(InvalidInputError, match="`min_group_size` must be an integer >= 1"):
        encode_groups(["a"], min_group_size=0)


def test_boolean_and_integer_columns_take_the_counting_path():
    g = encode_groups(np.array([True, False, True]))
    assert g.labels == (False, True)
    assert g.codes.tolist() == [1, 0, 1]
    g = encode_groups(np.array([7, 3, 7, 9]))
    assert g.labels == (3, 7, 9)
    assert g.codes.tolist() == [1, 0, 1, 2]


@pytest.mark.parametrize("col", [[0, 1, 1, 0, 1], [1, 1, 1], [0, 0], [2, 0, 2], [True, True],
                                 [False, True, False], [0, 3, 3, 5, 0, 5, 5]])
@pytest.mark.parametrize("dtype", [None, np.int8, np.uint8, bool])
def test_counts_of_small_integer_columns_are_the_codes_counts(col, dtype):
    """One integer column is counted once, while factorizing (0/1 by count_nonzero)."""
    arr = np.asarray(col, dtype=dtype)
    g = encode_groups(arr)
    labels = np.unique(arr)
    assert g.labels == tuple(labels.tolist())
    assert np.array_equal(g.codes, np.searchsorted(labels, arr))
    assert g.counts.tolist() == np.bincount(g.codes).tolist()


def test_mixed_type_group_labels_are_groups_not_a_crash():
    """Issue 15 item 10: ints and strings in one sensitive column raised
    ``'<' not supported between 'str' and 'int'`` in every metric and in evaluate_window."""
    from fairmonitor.metrics import demographic_parity_difference
    from fairmonitor.report import Window, evaluate_window

    sex = np.array([1, "a", 1, "a", 2, "a"], dtype=object)
    y_pred = [1, 0, 1, 0, 0, 0]
    # selection rates: group 1 -> 1.0, group 2 -> 0.0, group "a" -> 0.0
    assert demographic_parity_difference(None, y_pred, sensitive_features=sex) == 1.0
    for errors in ("raise", "coerce"):
        report = evaluate_window(Window({"sex": sex}, y_pred=y_pred),
                                 metrics=["demographic_parity_difference"], errors=errors)
        assert report.values[("demographic_parity_difference", "sex")] == 1.0
        assert report.group_counts["sex"] == {"1": 2, "2": 1, "a": 3}
