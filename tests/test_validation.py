"""Every validation message: what it names and the fix it suggests."""

from __future__ import annotations

import numpy as np
import pytest

from fairmonitor._validation import (
    check_1d,
    check_binary,
    check_option,
    check_same_length,
    check_scores,
)
from fairmonitor.exceptions import InvalidInputError


def test_check_scores_clips_round_off_only():
    assert check_scores([1 + 5e-10, -5e-10]).tolist() == [1.0, 0.0]
    with pytest.raises(InvalidInputError,
                       match=r"1 values are outside \(rows 0, range \[-0.1, 0.5\]\)"):
        check_scores([-0.1, 0.5])


def test_check_scores_copy_false_returns_float64_input_and_never_writes_it():
    scores = np.array([0.2, 0.5, 1.0])
    assert check_scores(scores, copy=False) is scores
    assert check_scores(scores) is not scores
    rounded = np.array([1 + 5e-10, 0.5])
    assert check_scores(rounded, copy=False).tolist() == [1.0, 0.5]
    assert rounded[0] == 1 + 5e-10  # clipped into a new array
    assert check_scores(np.array([0, 1]), copy=False).dtype == np.float64


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_scores_rejects_non_finite(bad):
    with pytest.raises(InvalidInputError,
                       match=r"`y_score` has 1 NaN or infinite values \(rows 2\)"):
        check_scores([0.1, 0.2, bad])


def test_check_binary_messages():
    with pytest.raises(InvalidInputError, match="non-numeric values"):
        check_binary(["yes", "no"], "y_true")
    with pytest.raises(InvalidInputError, match=r"2 values are neither"):
        check_binary([0, 2, 3], "y_pred")
    assert check_binary(np.array([True, False]), "y").tolist() == [1.0, 0.0]


def test_check_1d_shapes():
    assert check_1d([[1], [2]], "y").tolist() == [1, 2]
    with pytest.raises(InvalidInputError, match=r"must be 1-dimensional .* got shape \(2, 2\)"):
        check_1d([[1, 2], [3, 4]], "y")
    with pytest.raises(InvalidInputError, match="`y` is empty"):
        check_1d([], "y")
    with pytest.raises(InvalidInputError, match="`y` is required; got None"):
        check_1d(None, "y")


def test_option_lists_allowed_values():
    with pytest.raises(InvalidInputError) as exc:
        check_option("median", "agg", ("max", "mean"), func="abcc")
    assert str(exc.value) == ("The 'agg' parameter of abcc must be one of ('max', 'mean'); "
                              "got 'median'.")


def test_same_length_names_both():
    with pytest.raises(InvalidInputError) as exc:
        check_same_length(y_true=[1, 2], y_pred=[1])
    assert str(exc.value) == ("`y_true` has 2 rows but `y_pred` has 1; "
                              "pass arrays aligned row by row.")


def test_errors_are_value_errors():
    assert issubclass(InvalidInputError, ValueError)
