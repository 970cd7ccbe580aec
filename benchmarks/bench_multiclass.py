"""A multiclass window costs its classes' binary windows, no more (issue 29).

``TARGET multiclass_overhead``: time of ``evaluate_window`` on a multiclass window (K classes,
the default metric set with intervals) divided by the summed time of ``evaluate_window`` on the
K one-vs-rest binary windows built by hand from the same arrays; target <= 1.2 (the one-vs-rest
views and the fold into per-class and worst-class values cost little). The values must agree.
Also printed: one multiclass window over one binary window of the same rows (about K).
Usage: ``python benchmarks/bench_multiclass.py [--quick]`` (10^4 rows; full: 10^5, 3 classes).
"""

from __future__ import annotations

import os
import platform
import sys
from datetime import UTC, datetime

import numpy as np
from _timing import least

from fairmonitor import Window, evaluate_window
from fairmonitor.report.registry import class_key


def main(argv: list[str]) -> int:
    n = 10**4 if "--quick" in argv else 10**5
    classes = ["low", "mid", "high"]
    rng = np.random.default_rng(0)
    sf = {"sex": rng.choice(["F", "M"], n), "race": rng.choice(list("abcd"), n)}
    logits = rng.normal(size=(n, 3)) + (sf["sex"] == "M")[:, None] * np.array([0.5, 0, -0.5])
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = np.array(classes, dtype=object)
    y_true = labels[np.argmax(logits + rng.normal(size=(n, 3)), axis=1)]
    y_pred = labels[np.argmax(proba, axis=1)]

    def multiclass():
        return evaluate_window(Window(sf, y_pred=y_pred, y_true=y_true, y_score=proba,
                                      classes=classes), rng=0)

    def binary(k: int):
        c = classes[k]
        return evaluate_window(Window(sf, y_pred=(y_pred == c).astype(np.int8),
                                      y_true=(y_true == c).astype(np.int8),
                                      y_score=proba[:, k]), rng=0)

    def per_class():
        return [binary(k) for k in range(len(classes))]

    mc, bins = multiclass(), per_class()  # warm-up (compiled kernels, caches) and check
    for k, report in enumerate(bins):
        for (metric, attr), value in report.values.items():
            got = mc.values[(class_key(metric, classes[k]), attr)]
            assert np.isnan(value) and np.isnan(got) or abs(got - value) < 1e-12, (metric, k)
    t_mc, _ = least(multiclass)
    t_classes, _ = least(per_class)
    t_one, _ = least(lambda: binary(0))
    print(f"{platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"n={n}, {len(classes)} classes, 2 attributes + intersection, default metrics with "
          f"intervals: multiclass {t_mc:.2f} s CPU, the {len(classes)} binary windows "
          f"{t_classes:.2f} s, one binary window {t_one:.2f} s "
          f"(multiclass / one binary: {t_mc / t_one:.2f})")
    ratio = t_mc / t_classes
    verdict = "OK" if ratio <= 1.2 else "FAIL"
    print(f"TARGET multiclass_overhead: {ratio:.2f} (target <= 1.2) {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
