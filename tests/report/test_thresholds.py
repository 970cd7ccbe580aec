"""Threshold verdicts and their validation."""

from __future__ import annotations

import math

import pytest

from fairmonitor.exceptions import ConfigError
from fairmonitor.report.thresholds import Threshold, evaluate_thresholds, severity_code, worst


@pytest.mark.parametrize(("value", "expected"), [
    (0.0, "ok"), (0.05, "ok"), (0.0500001, "warning"), (0.1, "warning"), (0.11, "critical"),
    (math.nan, "undefined"),
])
def test_upper_bound_severity(value, expected):
    assert Threshold("abcc", warning=0.05, critical=0.1).severity(value) == expected


@pytest.mark.parametrize(("value", "expected"),
                         [(0.95, "ok"), (0.85, "warning"), (0.5, "critical")])
def test_lower_bound_severity(value, expected):
    t = Threshold("demographic_parity_ratio", warning=0.9, critical=0.8, bound="lower")
    assert t.severity(value) == expected


def test_only_critical():
    t = Threshold("m", critical=0.2)
    assert t.severity(0.19) == "ok"
    assert t.severity(0.21) == "critical"


def test_inverted_bounds_rejected():
    with pytest.raises(ConfigError, match="warning must be <= critical"):
        Threshold("m", warning=0.3, critical=0.1)
    with pytest.raises(ConfigError, match="warning must be >= critical"):
        Threshold("m", warning=0.7, critical=0.8, bound="lower")


def test_bad_values_rejected():
    with pytest.raises(ConfigError, match="give at least one"):
        Threshold("m")
    with pytest.raises(ConfigError,
                       match=r"thresholds.m.warning: must be a finite number; got 'x'"):
        Threshold("m", warning="x")
    with pytest.raises(ConfigError, match="bound: must be 'upper' or 'lower'"):
        Threshold("m", warning=1, bound="above")


def test_attribute_specific_threshold_wins():
    values = {("m", "sex"): 0.15, ("m", "race"): 0.15}
    out = evaluate_thresholds(values, [Threshold("m", warning=0.1),
                                       Threshold("m", warning=0.2, attribute="sex")])
    assert out == {("m", "sex"): "ok", ("m", "race"): "warning"}


def test_worst_and_codes():
    assert worst([]) == "ok"
    assert worst(["undefined", "warning"]) == "warning"
    # a governed value that is NaN must not read "ok" (MLflow's validation fails on it too)
    assert worst(["ok", "undefined"]) == "undefined"
    assert worst(["undefined"]) == "undefined"
    codes = [severity_code(s) for s in ("ok", "warning", "critical", "undefined")]
    assert codes == [0, 1, 2, None]


def test_a_bound_against_the_metric_direction_needs_the_override():
    with pytest.raises(ConfigError, match=r"thresholds\.demographic_parity_ratio\.bound: 'upper' "
                                          r"on demographic_parity_ratio, where higher is fairer"):
        Threshold("demographic_parity_ratio", warning=0.8, critical=0.9, bound="upper")
    t = Threshold("demographic_parity_ratio", warning=0.8, critical=0.9, bound="upper",
                  against_direction=True)
    assert t.severity(0.85) == "warning"
    # metrics unknown to the registry (custom names) are not checked
    assert Threshold("m", warning=0.7, critical=0.6, bound="lower").severity(0.5) == "critical"
