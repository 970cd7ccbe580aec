"""Parity metrics vs fairlearn's MetricFrame (issue 2).

``TARGET parity_vs_fairlearn``: time of fairlearn's ``demographic_parity_difference`` +
``equalized_odds_difference`` (both built on ``MetricFrame``) divided by the time of
fairmonitor's, on the same 10^6 rows with 8 groups; target >= 10. The values must agree.
Usage: ``python benchmarks/bench_parity.py [--quick]``.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from _timing import least
from fairlearn import metrics as flm

from fairmonitor.metrics import demographic_parity_difference, equalized_odds_difference


def main(argv: list[str]) -> int:
    n = 10**5 if "--quick" in argv else 10**6
    rng = np.random.default_rng(0)
    groups = rng.choice([f"g{k}" for k in range(8)], n)
    y_true = rng.integers(0, 2, n)
    y_pred = np.where(rng.random(n) < 0.8, y_true, 1 - y_true)

    def ours():
        return (demographic_parity_difference(None, y_pred, sensitive_features=groups),
                equalized_odds_difference(y_true, y_pred, sensitive_features=groups))

    def theirs():
        return (flm.demographic_parity_difference(y_true, y_pred, sensitive_features=groups),
                flm.equalized_odds_difference(y_true, y_pred, sensitive_features=groups))

    a, b = ours(), theirs()
    assert np.allclose(a, b, atol=1e-12), (a, b)
    t_ours, _ = least(ours, clock=time.perf_counter)
    t_theirs, _ = least(theirs, clock=time.perf_counter)
    ratio = t_theirs / t_ours
    print(f"n={n}, 8 groups: fairmonitor {t_ours:.3f} s, fairlearn {t_theirs:.3f} s")
    verdict = "OK" if ratio >= 10 else "MISSED"
    print(f"TARGET parity_vs_fairlearn: {ratio:.1f} (target >= 10) {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
