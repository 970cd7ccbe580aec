"""Float ties at a threshold (issue 25, item 5): rounding never decides a verdict."""

from __future__ import annotations

import sys

import pytest

from fairmonitor import Threshold
from fairmonitor.report.thresholds import TIE_ULPS


@pytest.mark.parametrize("a, b", [(0.4, 0.3), (0.3, 0.2), (0.7, 0.6), (0.9, 0.8), (1.0, 0.9)])
def test_a_difference_that_rounds_to_the_level_ties_with_it(a, b):
    # 0.4 - 0.3 = 0.10000000000000003 and 0.3 - 0.2 = 0.09999999999999998: one verdict
    t = Threshold("demographic_parity_difference", warning=0.1, critical=a - b + 0.5)
    assert a - b != 0.1 or (a, b) == (1.0, 0.9)  # the cases really are off by rounding
    assert t.severity(a - b) == "ok"


def test_a_ratio_that_rounds_to_the_level_ties_with_it():
    t = Threshold("demographic_parity_ratio", warning=0.8, bound="lower")
    assert 0.56 / 0.7 != 0.8  # 0.8000000000000002
    assert t.severity(0.56 / 0.7) == t.severity(0.8) == "ok"
    assert t.severity(0.24 / 0.3) == "ok"  # 0.7999999999999999


def test_a_value_beyond_rounding_still_breaches():
    t = Threshold("demographic_parity_difference", warning=0.1, critical=0.2)
    tol = TIE_ULPS * sys.float_info.epsilon
    assert t.severity(0.1 + 2 * tol) == "warning"
    assert t.severity(0.1 + tol / 2) == "ok"
    assert t.severity(0.2 + 1e-12) == "critical"
    lower = Threshold("demographic_parity_ratio", warning=0.8, bound="lower")
    assert lower.severity(0.8 - 1e-12) == "warning"
    # far above 1 the tolerance is relative to the values
    big = Threshold("demographic_parity_difference", warning=1e6, against_direction=False)
    assert big.severity(1e6 * (1 + sys.float_info.epsilon)) == "ok"
    assert big.severity(1e6 * (1 + 1e-12)) == "warning"
