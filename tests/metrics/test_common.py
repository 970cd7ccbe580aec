"""Invariance tests over every registered metric (scikit-learn's ``test_common`` idea).

The registry says which inputs each metric takes, so the same properties are checked for every
metric, including ones added later, without a line here:
- row order does not matter (deterministic metrics);
- renaming the groups does not matter;
- two groups with identical data get the ideal value;
- a length mismatch, NaN in the sensitive features and a single group give the documented
  error or NaN-with-warning, never a crash or a silent number.
"""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairmonitor import METRICS, InvalidInputError, UndefinedMetricWarning
from fairmonitor.exceptions import GroupExclusionWarning

N = 400


def _predict(X):
    return (np.asarray(X)[:, 0] > 0).astype(int)


def _inputs(rng, n=N):
    X = rng.normal(size=(n, 3))
    y_true = (X[:, 0] + rng.normal(size=n) > 0).astype(int)
    score = 1 / (1 + np.exp(-(X[:, 0] + 0.5 * X[:, 1])))
    return {"y_true": y_true, "y_pred": (score >= 0.5).astype(int), "y_score": score, "X": X,
            "predict": _predict}


def _value(spec, data, sf, **kw):
    args = [data[i] for i in spec.inputs]
    kw.update({i: data[i] for i in spec.optional_inputs})
    params = inspect.signature(spec.func).parameters
    if "random_state" in params:
        kw.setdefault("random_state", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupExclusionWarning)
        result = spec.func(*args, sensitive_features=sf, **{**spec.options, **kw})
    return float(getattr(result, spec.field or "value", result))


def _takes_rng(spec):
    return "random_state" in inspect.signature(spec.func).parameters


DETERMINISTIC = sorted(n for n, s in METRICS.items() if not _takes_rng(s))
NO_FEATURES = sorted(n for n, s in METRICS.items() if not (s.needs_features or s.needs_model))


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_row_order_invariance(name, rng):
    spec = METRICS[name]
    data = _inputs(rng)
    sf = rng.choice(["a", "b", "c"], N)
    perm = rng.permutation(N)
    shuffled = {k: (v[perm] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    assert _value(spec, shuffled, sf[perm]) == pytest.approx(_value(spec, data, sf), rel=1e-12,
                                                             abs=1e-12, nan_ok=True)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_group_relabelling_invariance(name, rng):
    spec = METRICS[name]
    data = _inputs(rng)
    sf = rng.choice(["a", "b", "c"], N)
    renamed = np.array([{"a": "z", "b": "y", "c": "x"}[s] for s in sf])
    assert _value(spec, data, renamed) == pytest.approx(_value(spec, data, sf), rel=1e-9,
                                                        abs=1e-12, nan_ok=True)


@pytest.mark.parametrize("name", NO_FEATURES)
def test_identical_groups_get_the_ideal_value(name, rng):
    spec = METRICS[name]
    half = _inputs(rng, N // 2)
    data = {k: (np.concatenate([v, v]) if isinstance(v, np.ndarray) else v)
            for k, v in half.items()}
    sf = np.repeat(["a", "b"], N // 2)
    assert _value(spec, data, sf) == pytest.approx(spec.ideal, abs=1e-12)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_length_mismatch_raises(name, rng):
    spec = METRICS[name]
    data = _inputs(rng)
    with pytest.raises(InvalidInputError, match="rows"):
        _value(spec, data, rng.choice(["a", "b"], N - 1))


@pytest.mark.parametrize("name", sorted(METRICS))
def test_missing_sensitive_value_raises(name, rng):
    spec = METRICS[name]
    sf = rng.choice(["a", "b"], N).astype(object)
    sf[7] = None
    with pytest.raises(InvalidInputError, match="missing values"):
        _value(spec, _inputs(rng), sf)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_single_group_is_nan_with_warning(name, rng):
    spec = METRICS[name]
    with pytest.warns(UndefinedMetricWarning):
        value = _value(spec, _inputs(rng), np.full(N, "a"))
    assert math.isnan(value)


@pytest.mark.parametrize("name", NO_FEATURES)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(4, 60), seed=st.integers(0, 2**32 - 1), n_groups=st.integers(2, 4))
def test_values_stay_in_range(name, n, seed, n_groups):
    spec = METRICS[name]
    rng = np.random.default_rng(seed)
    data = _inputs(rng, n)
    sf = np.arange(n) % n_groups  # every group non-empty
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        value = _value(spec, data, sf)
    assert math.isnan(value) or spec.lower - 1e-12 <= value <= spec.upper + 1e-12


def test_the_order_test_can_fail():
    """Test the test: a metric that depends on row order is caught."""
    def first_row_metric(y_pred, *, sensitive_features):
        return float(np.asarray(y_pred)[0])
    data = np.array([1, 0, 0, 0])
    perm = np.array([1, 0, 2, 3])
    assert first_row_metric(data[perm], sensitive_features=None) != first_row_metric(
        data, sensitive_features=None)
