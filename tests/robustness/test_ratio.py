"""Robustness ratio under input noise: spec robustness.md §6 closed forms, cost, determinism."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from fairmonitor import (
    METRICS,
    GroupExclusionWarning,
    InvalidInputError,
    UndefinedMetricWarning,
    Window,
    evaluate_window,
)
from fairmonitor.datasets import load_adult
from fairmonitor.metrics import (
    demographic_parity_difference,
    equal_opportunity_difference,
    equalized_odds_difference,
)
from fairmonitor.robustness import PAPER_LEVELS, ConstantColumnWarning, robustness_ratio

DP, EO, EOP = ("demographic_parity_difference", "equalized_odds_difference",
               "equal_opportunity_difference")
FPR = "false_positive_rate_difference"


def grid(n, mu=0.0, sd=1.0):
    """n exact normal quantiles: the clean gaps equal the population values up to O(1/n)."""
    return mu + sd * norm.ppf((np.arange(n) + 0.5) / n)


class Recorder:
    """A model that records every input batch and output, and counts its calls."""

    def __init__(self, fn):
        self.fn, self.inputs, self.outputs = fn, [], []

    def __call__(self, X):
        out = np.asarray(self.fn(X))
        self.inputs.append(X)
        self.outputs.append(out)
        return out

    @property
    def calls(self):
        return len(self.inputs)


def threshold_x(X):
    return (np.asarray(X)[:, 0] > 0).astype(int)


@pytest.fixture(scope="module")
def gaussian_dp():
    """Spec §6 B: X|A=a ~ N(-/+0.5, 1), f = 1[x > 0]; 100k rows per group."""
    n = 100_000
    x = np.concatenate([grid(n, -0.5), grid(n, 0.5)])
    return x[:, None], np.repeat([0, 1], n)


# --- spec §6 closed-form cases ------------------------------------------------------------

def test_model_reading_only_the_sensitive_attribute_is_perfectly_robust(rng):
    # §6 A: f(x, a) = 1[a = 1]; a is a model input, frozen, so predictions never change
    X = pd.DataFrame({"x": rng.normal(size=2000), "a": np.repeat([0, 1], 1000)})
    res = robustness_ratio(lambda X: X["a"].to_numpy() == 1, X, sensitive_features="a")
    assert res.clean_gaps[DP] == 1.0
    np.testing.assert_array_equal(res.ratios[DP], np.ones(6))
    np.testing.assert_array_equal(res.flip_rate, np.zeros(6))
    assert res.robust[DP] is True
    assert res.value == 1.0


def test_constant_model_has_undefined_ratio_and_zero_delta(rng):
    # §6 A variant: f = 1 gives M0 = 0 at every level, R = 0/0 = NaN, Delta = 0 exactly
    X = rng.normal(size=(500, 2))
    with pytest.warns(UndefinedMetricWarning, match="0/0"):
        res = robustness_ratio(lambda X: np.ones(len(X)), X, sensitive_features=np.arange(500) % 2)
    assert np.isnan(res.ratios[DP]).all()
    np.testing.assert_array_equal(res.deltas[DP], np.zeros(6))
    assert "clean gap is 0" in res.reason[DP]
    assert math.isnan(res.value)


@pytest.mark.parametrize(("scale", "expected_dp", "expected_r"), [
    (0.5, 0.326049, 0.851469), (1.0, 0.255988, 0.668508), (2.0, 0.172519, 0.450528)])
def test_thresholded_gaussian_feature_laplace(gaussian_dp, scale, expected_dp, expected_r):
    # §6 B, Laplace scale b in raw units (scale="absolute")
    X, a = gaussian_dp
    res = robustness_ratio(threshold_x, X, sensitive_features=a, levels=[scale], n_repeats=5,
                           scale="absolute", max_rows=None, max_batch_rows=10**6)
    assert res.clean_gaps[DP] == pytest.approx(0.382925, abs=1e-4)
    assert res.gaps[DP][0] == pytest.approx(expected_dp, abs=0.005)
    assert res.ratios[DP][0] == pytest.approx(expected_r, abs=0.02)


def test_thresholded_gaussian_feature_gaussian_noise(gaussian_dp):
    # §6 B, Gaussian noise of SD s: R = (2 Phi(0.5 / sqrt(1 + s^2)) - 1) / DP0
    X, a = gaussian_dp
    res = robustness_ratio(threshold_x, X, sensitive_features=a, levels=[0.5, 1, 2, 5],
                           n_repeats=5, noise="gaussian", scale="absolute", max_rows=None,
                           max_batch_rows=10**6)
    np.testing.assert_allclose(res.ratios[DP], [0.901689, 0.721620, 0.462066, 0.203993],
                               atol=0.02)
    assert res.robust[DP] is True  # R decreases to 0: the paper's expected behaviour
    assert res.max_ratio[DP] == res.ratios[DP][0]


def test_tpr_fpr_and_equalized_odds_closed_form():
    # §6 C: Y, A independent Bernoulli(1/2); X | Y=y, A=a ~ N(m_ya, 1); f = 1[x > 0]
    n = 50_000
    means = {(1, 1): 1.5, (1, 0): 0.5, (0, 1): -0.5, (0, 0): -1.0}
    x = np.concatenate([grid(n, m) for m in means.values()])
    y = np.repeat([k[0] for k in means], n)
    a = np.repeat([k[1] for k in means], n)
    res = robustness_ratio(threshold_x, x[:, None], sensitive_features=a, y_true=y,
                           metrics=("eo", "tp", "fp"), levels=[1, 2], n_repeats=10,
                           scale="absolute", max_rows=None, max_batch_rows=2 * 10**6)
    assert res.metrics == (EO, EOP, FPR)
    assert res.clean_gaps[EOP] == pytest.approx(0.241730, abs=1e-4)
    assert res.clean_gaps[FPR] == pytest.approx(0.149882, abs=1e-4)
    np.testing.assert_allclose(res.gaps[EOP], [0.200953, 0.149051], atol=0.005)
    np.testing.assert_allclose(res.gaps[FPR], [0.112697, 0.079874], atol=0.005)
    np.testing.assert_allclose(res.gaps[EO], [0.200953, 0.149051], atol=0.005)


def _binary_categorical(n=100_000):
    """§6 D: P(x=1 | A=0) = 0.2, P(x=1 | A=1) = 0.6, exactly; f(x) = x."""
    x = np.concatenate([np.arange(n) < 0.2 * n, np.arange(n) < 0.6 * n]).astype(int)
    return pd.DataFrame({"x": x}), np.repeat([0, 1], n)


@pytest.mark.parametrize("scheme", ["bernoulli", "fixed_count"])
def test_categorical_resampling_gives_ratio_one_minus_rate(scheme):
    # §6 D: resampling at rate r from the pooled marginal gives R = 1 - r exactly
    X, a = _binary_categorical()
    model = Recorder(lambda X: X["x"].to_numpy())
    res = robustness_ratio(model, X, sensitive_features=a, levels=[10, 50, 100], n_repeats=5,
                           scale="absolute", categorical_scheme=scheme, max_rows=None,
                           max_batch_rows=10**6)
    assert res.column_kinds == {"x": "categorical"}
    np.testing.assert_allclose(res.categorical_rates, [0.1, 0.5, 1.0])
    np.testing.assert_allclose(res.ratios[DP], [0.9, 0.5, 0.0], atol=0.02)
    # the column's marginal (0.4) is preserved at every level
    for batch in model.inputs[1:]:
        assert batch["x"].mean() == pytest.approx(0.4, abs=0.003)
    # share of cells that change: r (1 - sum_b p_b^2) = 0.5 * 0.48 at level 50
    changed = (model.inputs[2]["x"].to_numpy() != np.tile(X["x"].to_numpy(), 5)).mean()
    assert changed == pytest.approx(0.24, abs=0.003)


def test_fixed_count_replaces_exactly_ceil_rate_n_cells_per_repeat():
    n, k = 1000, 4
    X = pd.DataFrame({"id": [f"row{i}" for i in range(n)]})  # every value distinct
    model = Recorder(lambda X: np.zeros(len(X)))
    with pytest.warns(UndefinedMetricWarning):
        robustness_ratio(model, X, sensitive_features=np.arange(n) % 2, levels=[25],
                         scale="absolute", n_repeats=k, categorical_scheme="fixed_count",
                         column_kinds={"id": "categorical"})
    replaced = (model.inputs[1]["id"].to_numpy().reshape(k, n) != X["id"].to_numpy())
    # 250 cells are drawn per repeat; one drawn replacement may be the row itself (p = 1/n)
    assert ((replaced.sum(axis=1) <= 250) & (replaced.sum(axis=1) >= 245)).all()


def test_common_random_numbers_nest_the_replaced_cells_across_levels():
    n = 2000
    X = pd.DataFrame({"id": [f"r{i}" for i in range(n)]})
    model = Recorder(lambda X: np.zeros(len(X)))
    with pytest.warns(UndefinedMetricWarning):
        robustness_ratio(model, X, sensitive_features=np.arange(n) % 2, levels=[10, 30],
                         scale="absolute", n_repeats=3, column_kinds={"id": "categorical"})
    clean = np.tile(X["id"].to_numpy(), 3)
    low, high = (model.inputs[i]["id"].to_numpy() != clean for i in (1, 2))
    assert (low <= high).all()
    assert high.mean() == pytest.approx(0.3, abs=0.02)


def test_group_thresholds_tuned_on_clean_data_get_less_fair_under_noise():
    # §6 F: X|A=0 ~ N(0, 1), t0 = 1.0; X|A=1 ~ N(0, 2^2), t1 = 2.1; R > 1, peaking near s = 2
    n = 100_000
    X = pd.DataFrame({"x": np.concatenate([grid(n), grid(n, sd=2.0)]), "a": np.repeat([0, 1], n)})

    def model(X):
        return X["x"].to_numpy() > np.where(X["a"].to_numpy() == 1, 2.1, 1.0)

    res = robustness_ratio(model, X, sensitive_features="a", levels=[0.5, 1, 2, 5], n_repeats=5,
                           noise="gaussian", scale="absolute", max_rows=None,
                           max_batch_rows=10**6)
    assert res.clean_gaps[DP] == pytest.approx(0.011796, abs=1e-4)
    np.testing.assert_allclose(res.gaps[DP], [0.031362, 0.065923, 0.098457, 0.073977],
                               atol=0.005)
    assert res.argmax_level[DP] == 2.0
    assert res.max_ratio[DP] == pytest.approx(8.3465, rel=0.05)
    assert res.robust[DP] is False


def test_stochastic_model_that_ignores_x_stays_at_ratio_one(rng):
    # §6 E: f ~ Bernoulli(p_a), p = (0.3, 0.6): E[DP] = 0.3 at every level
    n = 20_000
    a = np.repeat([0, 1], n // 2)
    draw = np.random.default_rng(7)
    model = Recorder(lambda X: draw.random(len(X)) < np.tile(np.where(a == 1, 0.6, 0.3),
                                                              len(X) // n))
    res = robustness_ratio(model, rng.normal(size=(n, 2)), sensitive_features=a,
                           stochastic=True, levels=[0.5, 2.0])
    assert res.n_predict_calls == 3
    assert len(model.inputs[0]) == 10 * n  # K0 = K clean copies, in one call
    assert res.clean_gaps[DP] == pytest.approx(0.3, abs=0.01)
    assert res.clean_gap_se[DP] > 0
    np.testing.assert_allclose(res.ratios[DP], [1.0, 1.0], atol=0.05)
    assert res.robust[DP] is True


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_std_basis_noise_sd_is_level_times_column_sd(rng, noise):
    # §6 H: std basis, the empirical SD of the added noise is k * sigma_j within 1%
    x = rng.normal(3.0, 4.0, size=20_000)
    model = Recorder(threshold_x)
    robustness_ratio(model, x[:, None], sensitive_features=np.arange(20_000) % 2, levels=[0.5],
                     noise=noise)
    added = model.inputs[1][:, 0] - np.tile(x, 10)
    assert added.std() == pytest.approx(0.5 * x.std(), rel=0.01)


def test_range_basis_is_laplace_on_the_min_max_scaled_column(rng):
    # §6 H: range basis = FairR's min-max normalise then Laplace(scale=k): b = k (max - min)
    x = rng.uniform(10.0, 30.0, size=20_000)
    model = Recorder(threshold_x)
    robustness_ratio(model, x[:, None], sensitive_features=np.arange(20_000) % 2, levels=[0.1],
                     scale="range")
    added = model.inputs[1][:, 0] - np.tile(x, 10)
    assert np.abs(added).mean() == pytest.approx(0.1 * np.ptp(x), rel=0.01)  # E|L| = b


# --- cost: batching, determinism, early stop ----------------------------------------------

def test_exactly_one_predict_call_per_level(gaussian_dp):
    X, a = gaussian_dp
    model = Recorder(threshold_x)
    res = robustness_ratio(model, X[::10], sensitive_features=a[::10])
    assert model.calls == 7
    assert res.n_predict_calls == 7
    assert [len(b) for b in model.inputs] == [20_000] + [200_000] * 6
    assert res.n_rows_scored == 1_220_000
    np.testing.assert_array_equal(res.repeats_used, np.full(6, 10))


def test_one_call_per_draw_gives_the_same_curve(gaussian_dp):
    # §6 J: the batched call equals K separate calls on the same noise
    X, a = gaussian_dp
    kw = dict(sensitive_features=a[::50], metrics="dp", random_state=3)
    batched = robustness_ratio(threshold_x, X[::50], **kw)
    model = Recorder(threshold_x)
    separate = robustness_ratio(model, X[::50], max_batch_rows=4000, early_stop=False, **kw)
    assert separate.n_predict_calls == model.calls == 61  # the reference protocol: 1 + 6 x 10
    np.testing.assert_array_equal(batched.gaps[DP], separate.gaps[DP])
    np.testing.assert_array_equal(batched.flip_rate, separate.flip_rate)


def test_same_seed_is_bit_identical_and_another_seed_differs(rng):
    X = pd.DataFrame({"x": rng.normal(size=3000), "c": rng.choice(list("abc"), 3000)})
    a = rng.integers(0, 2, 3000)

    def model(X):
        return (X["x"].to_numpy() + (X["c"] == "a").to_numpy() > 0.3).astype(int)

    one, two = (robustness_ratio(model, X, sensitive_features=a, random_state=5) for _ in range(2))
    other = robustness_ratio(model, X, sensitive_features=a, random_state=6)
    np.testing.assert_array_equal(one.gaps[DP], two.gaps[DP])
    np.testing.assert_array_equal(one.flip_rate, two.flip_rate)
    assert not np.array_equal(one.gaps[DP], other.gaps[DP])
    default = robustness_ratio(model, X, sensitive_features=a)  # rng=None means seed 0
    np.testing.assert_array_equal(default.gaps[DP],
                                  robustness_ratio(model, X, sensitive_features=a,
                                                   random_state=0).gaps[DP])


def test_early_stop_between_chunks_when_the_standard_error_is_small(gaussian_dp):
    X, a = gaussian_dp
    kw = dict(sensitive_features=a[::50], levels=[0.5, 1.0], n_repeats=30, max_batch_rows=4000)
    res = robustness_ratio(threshold_x, X[::50], **kw)
    np.testing.assert_array_equal(res.repeats_used, [3, 3])
    assert res.n_predict_calls == 1 + 2 * 3
    full = robustness_ratio(threshold_x, X[::50], early_stop=False, **kw)
    np.testing.assert_array_equal(full.repeats_used, [30, 30])


def test_crn_off_draws_new_noise_per_level(gaussian_dp):
    X, a = gaussian_dp
    kw = dict(sensitive_features=a[::20], levels=[1.0, 1.0 + 1e-12], n_repeats=3)
    same = robustness_ratio(threshold_x, X[::20], **kw)
    fresh = robustness_ratio(threshold_x, X[::20], crn=False, **kw)
    assert same.gaps[DP][0] == same.gaps[DP][1]
    assert fresh.gaps[DP][0] != fresh.gaps[DP][1]


def test_stratified_subsample_is_capped_and_proportional(rng):
    n = 5000
    g = rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1])
    y = rng.integers(0, 2, n)
    model = Recorder(threshold_x)
    res = robustness_ratio(model, rng.normal(size=(n, 2)), sensitive_features=g, y_true=y,
                           max_rows=1000, levels=[1.0])
    assert (res.n_rows_used, res.n_rows_total, res.subsampled) == (1000, 5000, True)
    assert len(model.inputs[0]) == 1000
    idx = res.sample_index
    assert (np.diff(idx) > 0).all()
    for cell in {(gi, yi) for gi, yi in zip(g, y, strict=True)}:
        full = np.mean((g == cell[0]) & (y == cell[1]))
        kept = np.sum((g[idx] == cell[0]) & (y[idx] == cell[1]))
        assert abs(kept - 1000 * full) <= 1


def test_progress_callback_and_logging(rng, caplog):
    seen = []
    with caplog.at_level("INFO", logger="fairmonitor.robustness"):
        robustness_ratio(threshold_x, rng.normal(size=(300, 2)),
                         sensitive_features=np.arange(300) % 2, levels=[0.5, 1, 2],
                         progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert "level 3/3 (k=2)" in caplog.text


# --- vectorised gaps equal the metric functions -----------------------------------------

def test_gaps_equal_the_metric_functions_per_repeat(rng):
    n = 900
    g = rng.choice(["a", "b", "c"], n)
    y = rng.integers(0, 2, n)
    y[g == "c"] = 0  # group c has no positives: left out of TPR, as the metrics do
    x = rng.normal(size=n) + (g == "a")
    model = Recorder(threshold_x)
    with pytest.warns(GroupExclusionWarning, match="'c'"):
        res = robustness_ratio(model, x[:, None], sensitive_features=g, y_true=y,
                               metrics=("dp", "eo", "tp"), levels=[0.3, 1.0], n_repeats=4)
    for i in range(2):
        yhat = model.outputs[i + 1].reshape(4, n)
        with pytest.warns(GroupExclusionWarning):
            eo = [equalized_odds_difference(y, p, sensitive_features=g) for p in yhat]
            eop = [equal_opportunity_difference(y, p, sensitive_features=g) for p in yhat]
        dp = [demographic_parity_difference(None, p, sensitive_features=g) for p in yhat]
        assert res.gaps[DP][i] == np.mean(dp)
        assert res.gaps[EO][i] == np.mean(eo)
        assert res.gaps[EOP][i] == np.mean(eop)
        assert res.accuracy[i] == np.mean(yhat == y)
        assert res.flip_rate[i] == np.mean(yhat != model.outputs[0])


# --- ratios, floors and the robust rule -----------------------------------------------------

def test_summaries_follow_their_definitions(gaussian_dp):
    X, a = gaussian_dp
    res = robustness_ratio(threshold_x, X[::20], sensitive_features=a[::20])
    r, k = res.ratios[DP], np.array(res.levels)
    np.testing.assert_array_equal(r, res.gaps[DP] / res.clean_gaps[DP])
    np.testing.assert_array_equal(res.deltas[DP], res.gaps[DP] - res.clean_gaps[DP])
    assert res.ratio_at_max_level[DP] == r[-1]
    assert res.max_ratio[DP] == r.max() == res.value
    assert res.argmax_level[DP] == k[np.argmax(r)]
    assert res.auc_ratio[DP] == pytest.approx(
        np.trapezoid(np.r_[1.0, r], np.r_[0.0, k]) / k[-1], rel=1e-12)
    assert res.max_delta[DP] == res.deltas[DP].max()
    # deterministic model: SE(R_k) = R_k SE_k / gap_k (the clean gap has no SE)
    np.testing.assert_allclose(res.ratio_se[DP], r * res.gap_se[DP] / res.gaps[DP], rtol=1e-12)
    assert res.max_ratio_value == res.max_ratio[DP]


def test_zero_clean_gap_gives_infinite_ratio_but_robust_by_delta():
    # the model ignores A and the groups have identical x: clean gap 0; noise opens a tiny gap
    n = 5000
    x = np.tile(grid(n), 2)
    a = np.repeat([0, 1], n)
    res = robustness_ratio(threshold_x, x[:, None], sensitive_features=a)
    assert res.clean_gaps[DP] == 0.0
    assert np.isinf(res.ratios[DP]).all() and res.value == math.inf
    assert "clean gap is 0" in res.reason[DP]
    assert res.robust[DP] is True  # every delta stays below tol_abs = 0.02
    assert robustness_ratio(threshold_x, x[:, None], sensitive_features=a,
                            strict=True).robust[DP] is False  # the paper's R <= 1 rule


def test_clean_gap_below_the_sampling_floor_is_reported():
    n = 1000  # selection rates 0.500 and 0.505: gap 0.005, floor ~ 0.018
    x = np.concatenate([grid(n), grid(n, norm.ppf(0.505))])
    res = robustness_ratio(threshold_x, x[:, None], sensitive_features=np.repeat([0, 1], n))
    floor = res.noise_floor[DP]
    assert floor == pytest.approx(math.sqrt(2 / math.pi) * math.sqrt(0.25 * 2 / n), rel=0.01)
    assert res.clean_gaps[DP] < floor
    assert "below the sampling floor" in res.reason[DP]
    assert res.max_ratio[DP] == math.inf
    np.testing.assert_allclose(res.ratios_floored[DP], res.gaps[DP] / floor)


def test_result_is_read_only(rng):
    res = robustness_ratio(threshold_x, rng.normal(size=(200, 1)),
                           sensitive_features=np.arange(200) % 2)
    with pytest.raises(ValueError):
        res.gaps[DP][0] = 1.0
    with pytest.raises(TypeError):
        res.gaps[DP] = None  # type: ignore[index]
    with pytest.raises(AttributeError):
        res.value = 2.0  # type: ignore[misc]


# --- inputs ---------------------------------------------------------------------------------

def test_sensitive_columns_of_x_reach_the_model_unperturbed(rng):
    X = pd.DataFrame({"x": rng.normal(size=400), "sex": rng.choice(["F", "M"], 400),
                      "age": rng.integers(18, 90, 400)})
    model = Recorder(lambda X: (X["x"] > 0).to_numpy())
    res = robustness_ratio(model, X, sensitive_features=["sex"], levels=[2.0], n_repeats=2,
                           round_integers=True)
    batch = model.inputs[1]
    assert list(batch.columns) == ["x", "sex", "age"]
    np.testing.assert_array_equal(batch["sex"].to_numpy(), np.tile(X["sex"].to_numpy(), 2))
    assert res.column_kinds["sex"] == "frozen" and res.column_kinds["age"] == "continuous"
    assert batch["age"].dtype == X["age"].dtype  # round_integers keeps the integer dtype
    assert res.attribute == "sex"


def test_array_sensitive_features_are_not_model_inputs(rng):
    X = pd.DataFrame({"x": rng.normal(size=400)})
    model = Recorder(lambda X: (X["x"] > 0).to_numpy())
    res = robustness_ratio(model, X, sensitive_features={"sex": rng.choice(["F", "M"], 400)},
                           levels=[1.0])
    assert list(model.inputs[1].columns) == ["x"]
    assert res.attribute == "sex"


def test_sklearn_estimator_and_scores_are_accepted(rng):
    from sklearn.linear_model import LogisticRegression

    X = rng.normal(size=(600, 3))
    y = (X[:, 0] + rng.normal(size=600) > 0).astype(int)
    clf = LogisticRegression().fit(X, y)
    a = np.arange(600) % 2
    by_estimator = robustness_ratio(clf, X, sensitive_features=a, levels=[1.0])
    by_scores = robustness_ratio(clf.predict_proba, X, sensitive_features=a, levels=[1.0])
    np.testing.assert_array_equal(by_estimator.gaps[DP], by_scores.gaps[DP])


def test_constant_columns_are_left_alone_with_a_warning(rng):
    X = pd.DataFrame({"x": rng.normal(size=300), "c": np.full(300, 7.0)})
    model = Recorder(lambda X: (X["x"] > 0).to_numpy())
    with pytest.warns(ConstantColumnWarning, match=r"\['c'\]"):
        res = robustness_ratio(model, X, sensitive_features=np.arange(300) % 2, levels=[1.0])
    assert res.column_kinds["c"] == "frozen"
    assert (model.inputs[1]["c"] == 7.0).all()


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(predict=42), "`predict` must be a callable"),
    (dict(sensitive_features="nope"), r"column\(s\) \['nope'\] that are not in X"),
    (dict(predict=lambda X: np.zeros(len(X) - 1)), r"returned shape \(299,\) for 300 input rows"),
    (dict(predict=lambda X: np.full(len(X), "yes")), "hard 0/1 labels or scores"),
    (dict(metrics=("eo",)), "needs labels"),
    (dict(metrics=("accuracy",)), "cannot compute 'accuracy'"),
    (dict(levels=[0.0, 1.0]), "noise strengths k > 0"),
    (dict(y_true=np.zeros(299)), "`X` has 300 rows but `y_true` has 299"),
    (dict(sensitive_features=np.arange(299) % 2), "`X` has 300 rows but `sensitive_features`"),
    (dict(column_kinds={"z": "continuous"}), r"column\(s\) \['z'\] that are not in X"),
    (dict(column_kinds={"x": "noisy"}), "must be one of"),
    (dict(column_kinds={"g": "categorical"}), "never perturbed"),
    (dict(scale="zscore"), "The 'scale' parameter of robustness_ratio must be one of"),
    (dict(n_repeats=0), "`n_repeats` must be an integer >= 1"),
])
def test_bad_input_raises_a_clear_error(rng, kwargs, match):
    X = pd.DataFrame({"x": rng.normal(size=300), "g": np.arange(300) % 2})
    args = dict(predict=threshold_x, X=X, sensitive_features="g") | kwargs
    with pytest.raises(InvalidInputError, match=match):
        robustness_ratio(args.pop("predict"), args.pop("X"), **args)


def test_column_names_need_a_dataframe(rng):
    with pytest.raises(InvalidInputError, match="array without column names"):
        robustness_ratio(threshold_x, rng.normal(size=(10, 2)), sensitive_features="g")


def test_paper_preset(rng):
    res = robustness_ratio(threshold_x, rng.normal(size=(100, 1)),
                           sensitive_features=np.arange(100) % 2, preset="paper")
    assert res.levels == PAPER_LEVELS and res.levels[-1] == 10.0 and len(res.levels) == 50
    assert res.scale == "range"
    np.testing.assert_array_equal(res.repeats_used, np.full(50, 100))
    assert res.categorical_rates[-1] == pytest.approx(0.1)


# --- report layer and an end-to-end run -----------------------------------------------------

@pytest.fixture(scope="module")
def adult_model():
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    df = load_adult().sample(8000, random_state=0).reset_index(drop=True)
    y, sex = df["income"].to_numpy(), df["sex"].to_numpy()
    X = df.drop(columns=["income", "income-per-year", "sex"])
    cat = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    num = [c for c in X.columns if c not in cat]
    model = make_pipeline(
        ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), cat),
                           ("num", StandardScaler(), num)]),
        LogisticRegression(max_iter=1000))
    model.fit(X.iloc[:5000], y[:5000])
    return model, X.iloc[5000:].reset_index(drop=True), y[5000:], sex[5000:]


def test_adult_logistic_regression_full_curve(adult_model):
    model, X, y, sex = adult_model
    res = robustness_ratio(model, X, sensitive_features={"sex": sex}, y_true=y,
                           metrics=("dp", "eo"), n_repeats=5)
    assert res.n_predict_calls == 7 and res.n_rows_used == 3000
    assert res.column_kinds["age"] == "continuous" and res.column_kinds["race"] == "categorical"
    assert res.column_kinds["education-num"] == "categorical"  # 16 distinct values
    assert res.clean_gaps[DP] > 0.1  # the model is unfair on sex without seeing it
    assert (np.diff(res.flip_rate) > 0).all()  # more noise, more flipped predictions
    assert res.accuracy[-1] < res.accuracy[0] <= res.clean_accuracy + 0.005
    assert res.gaps[DP][-1] < 0.8 * res.clean_gaps[DP]  # strong noise washes the gap out
    assert res.ratios[DP][0] == pytest.approx(1.0, abs=0.05)  # 5% of an SD changes little
    assert res.reason == {DP: "", EO: ""}


def test_evaluate_window_computes_the_robustness_summaries(adult_model):
    model, X, y, sex = adult_model
    calls = Recorder(model.predict)
    names = [n for n in METRICS if n.startswith("robustness_")]
    w = Window({"sex": sex}, X=X, predict=calls, y_true=y)
    report = evaluate_window(w, metrics=names)
    assert calls.calls == 7  # one shared robustness_ratio call for every summary
    direct = robustness_ratio(model, X, sensitive_features={"sex": sex}, y_true=y)
    assert report.values[("robustness_ratio_max", "sex")] == direct.max_ratio_value
    assert report.values[("robustness_delta_max", "sex")] == direct.max_delta_value
    assert report.values[("robustness_robust", "sex")] == direct.robust_value
    assert report.values[("robustness_flip_rate_gap_max", "sex")] == direct.flip_rate_gap_max
    assert report.details[("robustness_ratio_max", "sex")].n_predict_calls == 7
    assert "fairness/robustness_ratio_auc/sex" in report.flat()
