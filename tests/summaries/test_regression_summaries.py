"""Regression window summaries (issue 29 item 4): merged parts equal the whole window.

The error sums add; raw predictions join; cells add on a grid fixed for every window; the
summary path's values equal the row path's (``evaluate_window(task="regression")``) where
the summary keeps raw predictions, and lie within their certified error (``detail["error"]``)
of independent oracles (scipy's KS statistic and Wasserstein distance, fairlearn's
``MetricFrame``) where it keeps cells.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from fairlearn.metrics import MetricFrame
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp, wasserstein_distance
from sklearn.metrics import mean_absolute_error

from fairmonitor.exceptions import InvalidInputError
from fairmonitor.metrics import madd
from fairmonitor.report import Window, evaluate_summary, evaluate_window
from fairmonitor.report.registry import get_metric, task_metrics
from fairmonitor.summaries import (
    RegressionSummary,
    SummarySpec,
    from_bytes,
    merge_all,
    summarize,
    summarize_regression,
    to_bytes,
)

# the regression metrics a summary carries: those of the predictions and targets (the row
# metrics, counterpart gap and noise robustness, read X and the model, which summaries keep not)
METRICS = [m for m in task_metrics("regression")
           if not {"X", "predict"} & set(get_metric(m).inputs)]
OPTIONS = {"prediction_madd": {"value_range": (-3.0, 3.0), "bandwidth": 0.1},
           "prediction_wasserstein_scaled": {"scale": 2.0}}


def rows(n: int, seed: int = 0, decimals: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    race = rng.choice(np.array(["a", "b", "c"], dtype=object), n, p=[0.5, 0.3, 0.2])
    y = rng.normal(0, 1, n)
    pred = np.round(y + rng.normal(0, 0.5, n) + np.where(sex == "F", 0.3, 0.0), decimals)
    return {"sex": sex, "race": race, "y": y, "pred": pred}


def parts_of(d: dict[str, np.ndarray], cuts: list[int], spec: SummarySpec,
             value_range=(-3.0, 3.0)) -> list[RegressionSummary]:
    edges = [0, *sorted(cuts), d["y"].size]
    return [summarize_regression({"sex": d["sex"][a:b], "race": d["race"][a:b]},
                                 y_pred=d["pred"][a:b], y_true=d["y"][a:b], spec=spec,
                                 value_range=value_range)
            for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def assert_same_groups(merged: RegressionSummary, whole: RegressionSummary) -> None:
    assert merged.n_rows == whole.n_rows
    for name, attr in whole.attributes.items():
        got = merged.attributes[name]
        assert got.labels == attr.labels
        for label, g in attr.groups.items():
            m = got.groups[label]
            assert m.n == g.n and m.clipped == g.clipped
            np.testing.assert_allclose(m.errors, g.errors, rtol=1e-10, atol=1e-9)
            np.testing.assert_allclose(m.products, g.products, rtol=1e-10, atol=1e-9)
            if g.values is not None:
                np.testing.assert_array_equal(m.values, g.values)
            else:
                for field in ("key", "count", "low", "high"):
                    np.testing.assert_array_equal(getattr(m.cells, field),
                                                  getattr(g.cells, field))
                np.testing.assert_allclose(m.cells.total, g.cells.total, rtol=1e-12,
                                           atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(4, 200), seed=st.integers(0, 10**6),
       cuts=st.lists(st.integers(1, 299), max_size=5),
       max_raw=st.sampled_from([None, 3, 40]), decimals=st.sampled_from([0, 1, 6]),
       order=st.randoms(use_true_random=False))
def test_merged_random_splits_equal_the_whole_window(n, seed, cuts, max_raw, decimals, order):
    d = rows(n, seed, decimals)
    spec = SummarySpec(max_raw=max_raw)
    parts = parts_of(d, [c for c in cuts if c < n], spec)
    order.shuffle(parts)
    merged = from_bytes(to_bytes(merge_all([from_bytes(to_bytes(p)) for p in parts])))
    (whole,) = parts_of(d, [], spec)
    assert_same_groups(merged, whole)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined values on tiny windows: NaN either way
        a = evaluate_summary(merged, metrics=METRICS, options=OPTIONS, confidence_level=None)
        b = evaluate_summary(whole, metrics=METRICS, options=OPTIONS, confidence_level=None)
    for key, value in b.values.items():
        assert a.values[key] == pytest.approx(value, rel=1e-9, abs=1e-9, nan_ok=True), key


def row_report(d: dict[str, np.ndarray], **kw):
    w = Window({"sex": d["sex"], "race": d["race"]}, y_pred=d["pred"], y_true=d["y"])
    return evaluate_window(w, task="regression", metrics=METRICS, options=OPTIONS, rng=0, **kw)


@pytest.mark.parametrize("min_group_size", [1, 300])
def test_raw_summaries_give_the_row_path_values_and_intervals(min_group_size):
    d = rows(2000, seed=3)
    merged = merge_all(parts_of(d, [500, 1100, 1700], SummarySpec(max_raw=None)))
    summary = evaluate_summary(from_bytes(to_bytes(merged)), metrics=METRICS, options=OPTIONS,
                               rng=0, min_group_size=min_group_size)
    oracle = row_report(d, min_group_size=min_group_size)
    assert set(summary.values) == set(oracle.values)
    for key, expected in oracle.values.items():
        assert summary.values[key] == pytest.approx(expected, rel=1e-12, abs=1e-12), key
        if key in oracle.intervals:
            got, want = summary.intervals[key], oracle.intervals[key]
            for part in ("lower", "upper", "chance"):  # the same draws, sums up to round-off
                assert getattr(got, part) == pytest.approx(getattr(want, part), rel=1e-7,
                                                           abs=1e-9, nan_ok=True), (key, part)
    assert summary.notes == oracle.notes  # the same groups left out, said the same way
    assert summary.group_counts == oracle.group_counts


def groups_of(d, attr):
    return d[attr] if attr != "sex:race" else np.char.add(
        d["sex"].astype(str), d["race"].astype(str))


def test_cell_summaries_are_within_their_certified_error_of_the_oracles():
    d = rows(6000, seed=4, decimals=6)
    merged = merge_all(parts_of(d, [1000, 2500, 4000], SummarySpec(max_raw=200)))
    assert all(g.cells is not None for g in merged.attributes["sex"].groups.values())
    report = evaluate_summary(from_bytes(to_bytes(merged)), metrics=METRICS, options=OPTIONS,
                              rng=0)
    for attr in ("sex", "race", "sex:race"):
        g = groups_of(d, attr)
        labels = np.unique(g)
        ks = max(ks_2samp(d["pred"][g == lab], d["pred"]).statistic for lab in labels)
        w1 = max(wasserstein_distance(d["pred"][g == a], d["pred"][g == b])
                 for i, a in enumerate(labels) for b in labels[i + 1:])
        detail = report.details[("prediction_ks_distance", attr)]
        err = detail.prediction_ks_distance.detail["error"]
        assert abs(report.values[("prediction_ks_distance", attr)] - ks) <= err + 1e-12
        assert err < 0.02
        w = detail.prediction_wasserstein
        assert abs(w.value - w1) <= w.detail["error"] + 1e-9
        assert w.detail["error"] < 0.01 * w1
        scaled = detail.prediction_wasserstein_scaled
        assert abs(scaled.value - w1 / 2.0) <= scaled.detail["error"] + 1e-9
        frame = MetricFrame(metrics=mean_absolute_error, y_true=d["y"], y_pred=d["pred"],
                            sensitive_features=g)
        assert report.values[("mae_difference", attr)] == pytest.approx(
            frame.difference(), abs=1e-12)
        # MADD from the mapped predictions' classification cells: the row function's value
        mapped = np.clip((d["pred"] + 3.0) / 6.0, 0.0, 1.0)
        assert report.values[("prediction_madd", attr)] == pytest.approx(
            madd(mapped, sensitive_features=g, bandwidth=0.1).value, abs=1e-12)


def test_a_cell_where_two_groups_cross_is_bounded_not_guessed():
    """One cell [1.0, 1.0006]: a at 1.0 and 1.0006, b at 1.0002 and 1.0004 (hand-derived).

    W1 is (0.0002 + 0.0002) / 2 = 0.0002; the cell gives the integral of each CDF (0.0003,
    the same) and bounds W1 by [0, 2 * 0.0006] = midpoint 0.0006, error 0.0006. KS (to the
    pooled CDF) is 0.25, bounded by [0, 1].
    """
    s = summarize_regression({"g": list("abba")}, y_pred=[1.0, 1.0002, 1.0004, 1.0006],
                             spec=SummarySpec(max_raw=1))
    assert s.attributes["g"].groups["a"].cells.count.tolist() == [2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = evaluate_summary(s, metrics=["prediction_wasserstein", "prediction_ks_distance"])
    w = r.details[("prediction_wasserstein", "g")].prediction_wasserstein
    assert (w.value, w.detail["error"]) == pytest.approx((0.0006, 0.0006), abs=1e-12)
    assert abs(w.value - 0.0002) <= w.detail["error"]
    ks = r.details[("prediction_ks_distance", "g")].prediction_ks_distance
    assert (ks.value, ks.detail["error"]) == pytest.approx((0.5, 0.5))


def test_cells_of_single_values_are_exact():
    """Predictions on a coarse grid (one value a cell): cells give the rows' values."""
    d = rows(3000, seed=5, decimals=0)
    merged = merge_all(parts_of(d, [1500], SummarySpec(max_raw=10)))
    report = evaluate_summary(merged, metrics=METRICS, options=OPTIONS, rng=0)
    oracle = row_report(d)
    for metric in ("prediction_ks_distance", "prediction_wasserstein"):
        for attr in ("sex", "race", "sex:race"):
            assert report.values[(metric, attr)] == pytest.approx(
                oracle.values[(metric, attr)], abs=1e-12)


def test_the_stored_bytes_are_checked_and_either_kind_loads():
    s = summarize_regression({"g": ["a", "b"]}, y_pred=[1.0, 2.0], y_true=[0.0, 0.0])
    blob = bytearray(to_bytes(s))
    blob[40] ^= 0xFF
    with pytest.raises(InvalidInputError, match="checksum"):
        from_bytes(bytes(blob))
    binary = summarize({"g": ["a", "b"]}, y_pred=[1, 0])
    assert from_bytes(to_bytes(binary)).attributes["g"].groups["a"].predicted_positive == 1
    with pytest.raises(InvalidInputError, match="regression summary with a classification"):
        merge_all([s, binary])
    other = summarize_regression({"g": ["a"]}, y_pred=[1.0], y_true=[0.0], value_range=(0, 1))
    with pytest.raises(InvalidInputError, match="value ranges"):
        merge_all([s, other])


def test_without_labels_drops_the_error_sums():
    s = summarize_regression({"g": ["a", "b"]}, y_pred=[1.0, 2.0], y_true=[0.0, 0.0])
    free = s.without_labels()
    assert free.inputs == ("y_pred",)
    assert free.attributes["g"].groups["a"].errors is None
    r = evaluate_summary(free, metrics=["mae_difference"])
    assert np.isnan(r.values[("mae_difference", "g")])
    assert r.reasons[("mae_difference", "g")] == "labels not available"


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.floats(-50, 50, allow_nan=False, width=32), min_size=4,
                       max_size=120),
       codes=st.lists(st.integers(0, 2), min_size=120, max_size=120),
       decimals=st.sampled_from([0, 2, 6]))
def test_the_certified_error_holds_on_any_data(values, codes, decimals):
    """Every group in cells (max_raw=1): each value within its error of scipy's on the rows."""
    pred = np.round(np.array(values, dtype=float), decimals)
    g = np.array(["abc"[c] for c in codes[:pred.size]], dtype=object)
    labels = np.unique(g)
    if labels.size < 2:
        return
    s = summarize_regression({"g": g}, y_pred=pred, spec=SummarySpec(max_raw=1))
    r = evaluate_summary(s, metrics=["prediction_ks_distance", "prediction_wasserstein"],
                         confidence_level=None)
    ks = r.details[("prediction_ks_distance", "g")].prediction_ks_distance
    oracle = max(ks_2samp(pred[g == lab], pred).statistic for lab in labels)
    assert abs(ks.value - oracle) <= ks.detail["error"] + 1e-12
    w = r.details[("prediction_wasserstein", "g")].prediction_wasserstein
    w1 = max(wasserstein_distance(pred[g == a], pred[g == b])
             for i, a in enumerate(labels) for b in labels[i + 1:])
    assert abs(w.value - w1) <= w.detail["error"] + 1e-9 * max(1.0, w1)
