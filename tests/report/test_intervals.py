"""Every report value with its interval and chance level; thresholds on the evidence (issue 16).

The intervals themselves are checked in ``tests/metrics/test_intervals.py`` (hand-derived cases
and coverage); here: that the report carries one for every value, computed from the same
per-group counts the value was (an oracle: the metric-level function on those counts), the same
from a merged summary as from the raw rows, and that a ``compare="bound"`` threshold reads the
bound on the unfair side.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from fairmonitor import METRICS, Threshold, Window, evaluate_window
from fairmonitor.exceptions import ConfigError
from fairmonitor.metrics._rate_intervals import rate_gap_interval
from fairmonitor.report import evaluate_summary
from fairmonitor.summaries import SummarySpec, summarize

DP, DPR, EO, EOPP = ("demographic_parity_difference", "demographic_parity_ratio",
                     "equalized_odds_difference", "equal_opportunity_difference")
SUMMARY_METRICS = [DP, DPR, EO, EOPP, "abcc", "madd", "abpc"]


@pytest.fixture(scope="module")
def window():
    rng = np.random.default_rng(7)
    n = 3000
    sex = rng.choice(["F", "M"], n)
    race = rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1])
    score = np.clip(rng.beta(2, 5, n) + 0.08 * (sex == "M"), 0, 1)
    y_true = (rng.random(n) < score).astype(int)
    return Window({"sex": sex, "race": race}, y_score=score, y_true=y_true)


@pytest.fixture(scope="module")
def report(window):
    return evaluate_window(window, metrics=SUMMARY_METRICS)


def test_every_value_has_an_interval_that_holds_it(report):
    assert set(report.intervals) == set(report.values)
    for key, value in report.values.items():
        iv = report.intervals[key]
        assert math.isfinite(iv.chance) and iv.chance >= 0, key
        if key[0] == "madd":  # issue 25: a chance level, no interval (and says why)
            assert math.isnan(iv.lower) and "biased upwards" in iv.reason
            continue
        assert iv.reason is None, (key, iv.reason)
        assert iv.lower <= value <= iv.upper, key
        assert iv.upper - iv.lower > 0, key  # never 0 wide
        assert math.isfinite(iv.chance) and iv.chance >= 0, key


def test_parity_intervals_are_the_metric_level_interval_of_the_group_counts(window, report):
    for attr in ("sex", "race"):
        labels = np.asarray(window.sensitive_features[attr])
        groups = np.unique(labels)
        pred = window.y_pred
        pos = [pred[labels == g].sum() for g in groups]
        n = [(labels == g).sum() for g in groups]
        oracle = rate_gap_interval(pos, n)
        got = report.intervals[(DP, attr)]
        assert (got.lower, got.upper, got.chance) == (oracle.lower, oracle.upper, oracle.chance)
        tp = [(pred & window.y_true)[labels == g].sum() for g in groups]
        p = [window.y_true[labels == g].sum() for g in groups]
        oracle = rate_gap_interval(tp, p)
        got = report.intervals[(EOPP, attr)]
        assert (got.lower, got.upper) == (oracle.lower, oracle.upper)


def test_a_clear_gap_is_excluded_from_zero_and_a_fair_attribute_is_not(report):
    # scores of M are shifted by 0.08: sex is unfair beyond noise; race is fair
    assert report.intervals[("abcc", "sex")].lower > 0.04
    assert report.intervals[("abcc", "race")].lower < report.intervals[("abcc", "race")].chance
    assert report.values[("abcc", "sex")] > 3 * report.intervals[("abcc", "sex")].chance


def test_merged_summaries_give_the_raw_rows_intervals(window, report):
    n = window.n_rows
    half = n // 2
    parts = [summarize({k: np.asarray(v)[s] for k, v in window.sensitive_features.items()},
                       y_score=window.y_score[s], y_true=window.y_true[s],
                       spec=SummarySpec(max_raw=None, sample_size=0))
             for s in (slice(0, half), slice(half, n))]
    merged = evaluate_summary(parts[0].merge(parts[1]), metrics=SUMMARY_METRICS)
    for key, iv in report.intervals.items():
        other = merged.intervals[key]
        if key[0] in (DP, DPR, EO, EOPP):  # counts: identical
            assert (other.lower, other.upper, other.chance) == (iv.lower, iv.upper, iv.chance)
        else:  # raw scores here, the same raw scores there: identical too
            assert other.chance == pytest.approx(iv.chance, abs=1e-12), key
            if key[0] == "madd":
                continue
            assert other.lower == pytest.approx(iv.lower, abs=1e-12), key
            assert other.upper == pytest.approx(iv.upper, abs=1e-12), key


def test_metrics_without_an_interval_say_why(report):
    no_interval = [name for name, spec in METRICS.items() if spec.interval is None]
    assert set(no_interval) == {"hfm", "robustness_ratio_auc", "robustness_robust",
                                "robustness_flip_rate_gap_max", "madd", "prediction_madd",
                                # a regressor's row metrics (issue 29), each saying why
                                "counterpart_prediction_gap", "counterpart_prediction_gap_scaled",
                                "robustness_mae_gap_ratio_max", "robustness_mae_gap_delta_max",
                                "robustness_ks_gap_ratio_max", "robustness_ks_gap_delta_max"}
    assert all(METRICS[n].no_interval for n in no_interval
               if METRICS[n].task == "regression" and n != "prediction_madd")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    g = rng.choice(["a", "b"], 300)
    y = (X[:, 0] > 0).astype(int)
    r = evaluate_window(Window({"g": g}, y_pred=y, y_true=y, X=X), metrics=["hfm", "hfm_average"])
    assert "not estimable from a sample" in r.intervals[("hfm", "g")].reason
    assert "method" in r.intervals[("hfm_average", "g")].reason  # exact: use sampled
    r = evaluate_window(Window({"g": g}, y_pred=y, y_true=y, X=X), metrics=["hfm_average"],
                        options={"hfm_average": {"method": "sampled", "n_queries": 100}})
    iv = r.intervals[("hfm_average", "g")]
    assert iv.lower <= r.values[("hfm_average", "g")] <= iv.upper


def test_undefined_values_have_nan_intervals_with_the_reason():
    r = evaluate_window(Window({"g": ["a"] * 4}, y_pred=[1, 0, 1, 0]), metrics=[DP, "abcc"])
    dp = r.intervals[(DP, "g")]
    assert math.isnan(dp.lower) and math.isnan(dp.upper) and dp.reason
    assert "no scores" in r.intervals[("abcc", "g")].reason


def test_intervals_can_be_turned_off_and_the_level_is_checked(window):
    r = evaluate_window(window, metrics=[DP], confidence_level=None)
    assert dict(r.intervals) == {} and r.flat_intervals() == {}
    wide = evaluate_window(window, metrics=[DP], confidence_level=0.99).intervals[(DP, "sex")]
    narrow = evaluate_window(window, metrics=[DP], confidence_level=0.8).intervals[(DP, "sex")]
    assert wide.upper - wide.lower > narrow.upper - narrow.lower
    with pytest.raises(ValueError, match="level"):
        evaluate_window(window, metrics=[DP], confidence_level=95, errors="raise")


def test_a_bound_threshold_compares_the_unfair_side():
    # 150 rows per group, both at 30%: the point value 0.027 crosses 0.02 by chance
    rng = np.random.default_rng(0)
    w = Window({"g": np.repeat(["a", "b"], 150)}, y_pred=(rng.random(300) < 0.3).astype(int))
    on_value = evaluate_window(w, metrics=[DP, DPR], thresholds=[
        Threshold(DP, warning=0.02), Threshold(DPR, warning=0.95, bound="lower")])
    on_bound = evaluate_window(w, metrics=[DP, DPR], thresholds=[
        Threshold(DP, warning=0.02, compare="bound"),
        Threshold(DPR, warning=0.95, bound="lower", compare="bound")])
    assert dict(on_value.statuses) == {(DP, "g"): "warning", (DPR, "g"): "warning"}
    assert dict(on_bound.statuses) == {(DP, "g"): "ok", (DPR, "g"): "ok"}
    # the compared quantities: DP's lower bound (0), the ratio's upper bound (1)
    t = Threshold(DPR, warning=0.95, bound="lower", compare="bound")
    iv = on_bound.intervals[(DPR, "g")]
    assert t.compared(on_bound.values[(DPR, "g")], iv.lower, iv.upper) == iv.upper


def test_a_bound_threshold_fires_on_evidence():
    rng = np.random.default_rng(1)
    g = np.repeat(["a", "b"], 2000)
    pred = (rng.random(4000) < np.where(g == "a", 0.3, 0.45)).astype(int)
    r = evaluate_window(Window({"g": g}, y_pred=pred), metrics=[DP],
                        thresholds=[Threshold(DP, warning=0.1, compare="bound")])
    assert r.intervals[(DP, "g")].lower > 0.1 and r.status == "warning"


def test_compare_bound_is_refused_where_there_is_no_interval():
    with pytest.raises(ConfigError, match="hfm has no confidence interval"):
        Threshold("hfm", warning=0.1, compare="bound")
    with pytest.raises(ConfigError, match="compare: must be 'value', 'bound' or 'budget'"):
        Threshold(DP, warning=0.1, compare="evidence")
    with pytest.raises(ConfigError, match=r"hfm has no confidence interval.*\(budget\)"):
        Threshold("hfm", warning=0.1, compare="budget")


def test_a_budget_threshold_compares_the_bound_in_a_single_window():
    # one window has no sequence: "budget" gives exactly the severities of "bound"
    rng = np.random.default_rng(1)
    g = np.repeat(["a", "b"], 2000)
    for shift, expected in ((0.15, "warning"), (0.01, "ok")):
        pred = (rng.random(4000) < np.where(g == "a", 0.3, 0.3 + shift)).astype(int)
        w = Window({"g": g}, y_pred=pred)
        runs = {c: evaluate_window(w, metrics=[DP, DPR], thresholds=[
            Threshold(DP, warning=0.1, compare=c),
            Threshold(DPR, warning=0.7, bound="lower", compare=c)]) for c in ("bound", "budget")}
        assert dict(runs["budget"].statuses) == dict(runs["bound"].statuses)
        assert runs["budget"].statuses[(DP, "g")] == expected
        iv = runs["budget"].intervals[(DP, "g")]
        assert Threshold(DP, warning=0.1, compare="budget").compared(
            runs["budget"].values[(DP, "g")], iv.lower, iv.upper) == iv.lower


def test_compare_bound_is_refused_for_madd_with_the_reason():
    # issue 25: MADD's interval was centred on a value biased by the bins' noise
    with pytest.raises(ConfigError, match="madd has no confidence interval .*biased upwards"):
        Threshold("madd", warning=0.1, compare="bound")
    Threshold("madd", warning=0.1)  # its value can still be compared


@pytest.mark.parametrize("rows", [2, 3, 5])
def test_chance_levels_stay_in_range_on_tiny_groups(rows):
    # issue 25: with tiny groups the Gaussian-form bootstrap made negative counts and chance
    # levels of 31.9 (MADD) and 2.87 (ABPC), for metrics bounded by 2
    rng = np.random.default_rng(rows)
    g = np.repeat(list("abcdef"), rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = evaluate_window(Window({"g": g}, y_score=rng.random(g.size)),
                            metrics=["abcc", "madd", "abpc"])
    for name, top in (("abcc", 1.0), ("madd", 2.0), ("abpc", 2.0)):
        iv = r.intervals[(name, "g")]
        assert 0.0 < iv.chance <= top, (name, iv.chance)
        if name != "madd":
            assert 0.0 <= iv.lower <= r.values[(name, "g")] <= iv.upper <= top


def _permutation_mean(metric, scores, groups, **kw):
    from fairmonitor.metrics import permutation_test

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = permutation_test(metric, scores, sensitive_features=groups, n_resamples=600,
                             random_state=1,
                             **kw)
    return r.null_mean, r.null_std / math.sqrt(r.n_resamples)


@pytest.mark.parametrize("sizes", [(6, 9), (40, 40, 25), (300, 120)])
@pytest.mark.parametrize("metric, kw", [("abcc", {}), ("abpc", {"bandwidth": 0.05}),
                                        ("madd", {"n_bins": 16})])
def test_report_chance_level_is_the_permutation_tests_null_mean(sizes, metric, kw):
    # one chance level: the report's (from the summary's fine histograms, the window's
    # bandwidths held) is permutation_test's null mean (fairmonitor report's "chance"), within
    # Monte Carlo error (60 null draws, 600 shuffles: 4 SE of the two means' difference, plus
    # the 1/512 binning of the scores)
    rng = np.random.default_rng(sum(sizes))
    groups = np.repeat(np.arange(len(sizes)), sizes)
    scores = rng.beta(2, 5, groups.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = evaluate_window(Window({"g": groups}, y_score=scores), metrics=[metric],
                            options={metric: kw})
    chance = r.intervals[(metric, "g")].chance
    mean, se = _permutation_mean(metric, scores, groups, **kw)
    null_sd = se * math.sqrt(600)
    tolerance = 4 * math.hypot(se, null_sd / math.sqrt(60)) + 0.01 * mean
    assert abs(chance - mean) <= tolerance, (chance, mean, tolerance)


def test_many_groups_give_an_interval_or_a_reason_fast():
    # an identifier-like attribute: 400 groups of 5 rows; the interval must not blow up
    rng = np.random.default_rng(0)
    g = np.repeat(np.arange(400), 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = evaluate_window(Window({"g": g}, y_score=rng.random(2000)), metrics=["abcc"])
    assert "at most 256" in r.intervals[("abcc", "g")].reason


def test_fairmonitor_report_chance_of_madd_auto_is_the_reports():
    # the CLI's chance (a permutation test) holds MADD's "auto" bins of two groups, as the
    # report's chance level does: one chance level (60 null draws vs 300 shuffles: 4 SE, plus
    # 3% for the window's bins read on 128-bin histograms)
    from fairmonitor import METRICS
    from fairmonitor.commands._chance import chance_floor

    rng = np.random.default_rng(4)
    g = np.repeat([0, 1], [300, 300])
    window = Window({"g": g}, y_score=rng.beta(2, 5, g.size))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chance = evaluate_window(window, metrics=["madd"]).intervals[("madd", "g")].chance
        floor = chance_floor(METRICS["madd"], window, "g", 1, 300, np.random.default_rng(1))
    se = math.hypot(floor.null_std / math.sqrt(300), floor.null_std / math.sqrt(60))
    assert abs(chance - floor.null_mean) <= 4 * se + 0.03 * floor.null_mean


def test_an_attribute_and_its_intersection_share_the_cells_draws():
    # sex and race are unions of the sex:race cells: their score bootstraps are the sums of
    # the cells' Poisson draws (one set of draws for the three; the same law, see
    # tests/metrics/test_intervals.py), in the order the metrics read them; the values
    # do not move (an interval never changes its value)
    from fairmonitor.metrics.shared import (
        ScoreBootstrap,
        fine_histogram_sorted,
        score_gap_interval,
    )

    rng = np.random.default_rng(12)
    n = 4000
    groups = {"sex": rng.choice(["F", "M"], n), "race": rng.choice(list("abc"), n)}
    score = np.clip(rng.beta(2, 3, n) + 0.05 * (groups["sex"] == "M"), 0, 1)
    summary = summarize(groups, y_score=score, y_true=(rng.random(n) < score).astype(int))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate_summary(summary, metrics=["abcc", "abpc"])
        plain = evaluate_summary(summary, metrics=["abcc", "abpc"], confidence_level=None)
    assert report.values == plain.values
    source = summary.attributes["sex:race"]
    cells = ScoreBootstrap(np.stack([fine_histogram_sorted(g.scores)
                                     for g in source.groups.values()]))
    index = {label: k for k, label in enumerate(source.groups)}
    for name in ("sex", "race"):  # the order the report reads them: ABCC on sex, then race
        derived = summary.attributes[name].groups
        members = [[index[c] for c in derived.members[label]] for label in derived]
        own = np.stack([fine_histogram_sorted(derived[label].scores) for label in derived])
        coarse = cells.coarsened(members, own)
        assert coarse is not None and coarse._shares_null()
        want = score_gap_interval(coarse, "abcc", value=report.values[("abcc", name)])
        got = report.intervals[("abcc", name)]
        assert (got.lower, got.upper, got.chance) == (want.lower, want.upper, want.chance)
