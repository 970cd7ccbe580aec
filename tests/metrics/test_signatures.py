"""Public signatures aligned with fairlearn and scikit-learn (issue 26, item 6).

``y_true`` comes first in the parity metrics (fairlearn's order) and in
``counterpart_fairness`` (as in ``hfm``); the seed is ``random_state`` (scikit-learn's name).
The old forms keep working for one release: each warns with a FutureWarning naming the new
form and gives the same value as the new form.
"""

from __future__ import annotations

import inspect
import warnings

import fairlearn.metrics as flm
import numpy as np
import pytest

from fairmonitor.exceptions import InvalidInputError
from fairmonitor.metrics import (
    abcc,
    counterpart_fairness,
    demographic_parity_difference,
    demographic_parity_ratio,
    equal_opportunity_difference,
    equalized_odds_difference,
    fit_matcher,
    hfm,
    permutation_test,
)
from fairmonitor.robustness import robustness_ratio

rng = np.random.default_rng(7)
N = 600
GROUP = rng.choice(["a", "b", "c"], N)
Y_TRUE = rng.integers(0, 2, N)
Y_PRED = (rng.random(N) < np.where(GROUP == "a", 0.6, 0.4)).astype(int)
X = rng.normal(size=(N, 2)) + np.where(GROUP == "a", 0.5, 0.0)[:, None]
SCORE = 1 / (1 + np.exp(-(X[:, 0] + X[:, 1])))
DP_METRICS = [demographic_parity_difference, demographic_parity_ratio]


def _new_form(func):
    """The value of ``func`` called without any warning (the new form must not warn)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return func()


@pytest.mark.parametrize("metric", DP_METRICS)
def test_parity_takes_y_true_first_as_fairlearn(metric):
    assert list(inspect.signature(metric).parameters)[:2] == ["y_true", "y_pred"]
    ours = _new_form(lambda: metric(Y_TRUE, Y_PRED, sensitive_features=GROUP,
                                    method="between_groups", sample_weight=None))
    theirs = getattr(flm, metric.__name__)(Y_TRUE, Y_PRED, sensitive_features=GROUP,
                                           method="between_groups", sample_weight=None)
    assert ours == pytest.approx(theirs, abs=1e-12)
    # labels are not read: None gives the same value
    assert _new_form(lambda: metric(None, Y_PRED, sensitive_features=GROUP)) == ours


@pytest.mark.parametrize("metric", [equalized_odds_difference, equal_opportunity_difference])
def test_label_metrics_take_fairlearns_method(metric):
    ours = metric(Y_TRUE, Y_PRED, sensitive_features=GROUP, method="between_groups")
    theirs = getattr(flm, metric.__name__)(Y_TRUE, Y_PRED, sensitive_features=GROUP,
                                           method="between_groups")
    assert ours == pytest.approx(theirs, abs=1e-12)


@pytest.mark.parametrize("metric", DP_METRICS + [equalized_odds_difference])
def test_to_overall_is_refused_with_the_reason(metric):
    with pytest.raises(InvalidInputError, match="method='to_overall'.*not offered"):
        metric(Y_TRUE, Y_PRED, sensitive_features=GROUP, method="to_overall")


@pytest.mark.parametrize("metric", DP_METRICS)
def test_parity_old_forms_warn_and_agree(metric):
    new = _new_form(lambda: metric(None, Y_PRED, sensitive_features=GROUP))
    name = metric.__name__
    with pytest.warns(FutureWarning, match=rf"pass y_true first, {name}\(y_true, y_pred"):
        assert metric(Y_PRED, sensitive_features=GROUP) == new
    with pytest.warns(FutureWarning, match=r"y_pred=\.\.\.\) without y_true is deprecated"):
        assert metric(y_pred=Y_PRED, sensitive_features=GROUP) == new


def test_parity_checks_the_length_of_y_true():
    with pytest.raises(InvalidInputError, match="`y_true` has 3 rows but `y_pred` has 6"):
        demographic_parity_difference([0, 1, 0], [1, 1, 0, 1, 0, 0],
                                      sensitive_features=list("aaabbb"))


def test_counterpart_fairness_takes_y_true_before_y_pred_as_hfm():
    names = list(inspect.signature(counterpart_fairness).parameters)
    assert names[:3] == list(inspect.signature(hfm).parameters)[:3] == ["X", "y_true", "y_pred"]
    matcher = fit_matcher(X, sensitive_features=GROUP)
    new = _new_form(lambda: counterpart_fairness(X, Y_TRUE, SCORE, sensitive_features=GROUP,
                                                 matcher=matcher))
    new_unlabelled = _new_form(lambda: counterpart_fairness(X, None, SCORE,
                                                            sensitive_features=GROUP,
                                                            matcher=matcher))
    with pytest.warns(FutureWarning, match=r"counterpart_fairness\(X, y_true, y_pred"):
        old = counterpart_fairness(X, SCORE, sensitive_features=GROUP, y_true=Y_TRUE,
                                   matcher=matcher)
    assert (old.value, old.signed, old.p_value) == (new.value, new.signed, new.p_value)
    with pytest.warns(FutureWarning, match="pass y_true first"):
        old = counterpart_fairness(X, SCORE, sensitive_features=GROUP, matcher=matcher)
    assert (old.value, old.signed) == (new_unlabelled.value, new_unlabelled.signed)


def _seeded_calls():
    """(name, call(**seed)) of every public function with a seed, on small data."""
    small = slice(0, 300)
    return [
        ("hfm", lambda **s: hfm(X[small], Y_TRUE[small], Y_PRED[small],
                                sensitive_features=GROUP[small], method="approx", m1=2,
                                **s).value),
        ("counterpart_fairness", lambda **s: counterpart_fairness(
            X, None, SCORE, sensitive_features=GROUP, learn_metric=True, **s).value),
        ("fit_matcher", lambda **s: fit_matcher(X, sensitive_features=GROUP,
                                                learn_metric=True, **s).pairs[0].caliper),
        ("permutation_test", lambda **s: permutation_test(
            abcc, SCORE, sensitive_features=GROUP, n_resamples=20, **s).null_mean),
        ("robustness_ratio", lambda **s: robustness_ratio(
            lambda a: (a[:, 0] > 0).astype(int), X, sensitive_features=GROUP, levels=[0.5],
            n_repeats=2, **s).gaps["demographic_parity_difference"][0]),
    ]


@pytest.mark.parametrize(("name", "call"), _seeded_calls(), ids=lambda v: v
                         if isinstance(v, str) else "")
def test_rng_is_now_random_state(name, call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # small-sample notes, not under test
        warnings.simplefilter("error", FutureWarning)
        new = call(random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.warns(FutureWarning, match=rf"{name}\(\.\.\., rng=\.\.\.\) is deprecated: "
                                               "pass random_state="):
            old = call(rng=3)
    assert old == new or (np.isnan(old) and np.isnan(new))
    with pytest.raises(TypeError, match="pass `random_state=` only"):
        call(rng=3, random_state=3)


def test_permutation_test_calls_the_parity_metric_in_its_new_form():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        by_function = permutation_test(demographic_parity_difference, Y_PRED,
                                       sensitive_features=GROUP, n_resamples=20, random_state=0)
        by_name = permutation_test("demographic_parity_difference", Y_PRED,
                                   sensitive_features=GROUP, n_resamples=20, random_state=0)
    assert by_function.observed == by_name.observed == demographic_parity_difference(
        None, Y_PRED, sensitive_features=GROUP)
    assert by_function.p_value == by_name.p_value
