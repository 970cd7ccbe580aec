"""The evaluator's interval plot (issue 25): bars are never negative distances."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
from fairmonitor_mlflow import plots

from fairmonitor.metrics._intervals import Interval
from fairmonitor.report import Window, evaluate_window

PNG = b"\x89PNG\r\n\x1a\n"


def test_an_interval_that_misses_its_value_is_drawn_not_refused(tmp_path):
    # the old DP-ratio interval [0.0048, 1.0] of the value 0.0 made matplotlib raise
    # "'xerr' must not contain negative values"
    report = SimpleNamespace(
        values={("demographic_parity_ratio", "sex:race"): 0.0,
                ("abcc", "sex"): 0.3},
        intervals={("demographic_parity_ratio", "sex:race"): Interval(0.0048, 1.0, 0.6, "x"),
                   ("abcc", "sex"): Interval(0.1, 0.25, 0.05, "x")})
    path = tmp_path / "i.png"
    plots.save_png(plots.metric_intervals(report), str(path))
    assert path.read_bytes()[:8] == PNG


def test_a_zero_dp_ratio_of_an_intersection_group_is_plotted(tmp_path):
    # an intersection group with no positive prediction: DP ratio 0, inside its interval
    rng = np.random.default_rng(0)
    n = 600
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    race = rng.choice(np.array(["a", "b", "c"], dtype=object), n)
    pred = (rng.random(n) < 0.3).astype(int)
    pred[(sex == "F") & (race == "c")] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate_window(Window({"sex": sex, "race": race}, y_pred=pred),
                                 metrics=["demographic_parity_ratio"], intersection=True)
    key = ("demographic_parity_ratio", "sex:race")
    iv = report.intervals[key]
    assert report.values[key] == 0.0 and iv.lower == 0.0 < iv.upper
    path = tmp_path / "i.png"
    plots.save_png(plots.metric_intervals(report), str(path))
    assert path.read_bytes()[:8] == PNG
