"""A multiclass model's day from 24 stored hourly summaries (issue 29).

``TARGET multiclass_rollup_overhead``: CPU time of the multiclass rollup (load the 24 stored
hourly multiclass summaries, merge them class by class, ``evaluate_summary``, fold the classes)
divided by the summed time of the same rollup of each class's binary summaries stored on their
own; target <= 1.2 (the container, its bytes and the fold cost little). The values must agree
with ``evaluate_window`` on the day's rows (parity and MADD exactly, ABCC within 1e-6).
Also printed: the rollup against ``evaluate_window`` on the day's rows already in memory (the
rollup's gain is mostly not reading the rows again, which this does not count), a stored
hour's bytes (about K times one class's), and summarizing the hours beside evaluating them.
Usage: ``python benchmarks/bench_multiclass_rollups.py [--quick]`` (2,000 rows an hour; full:
20,000, 3 classes, 2 attributes and their intersection).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from datetime import UTC, datetime

import numpy as np

from fairmonitor import Window, evaluate_window
from fairmonitor.monitor.multiclass import summarize_window
from fairmonitor.report import evaluate_summary
from fairmonitor.summaries import SummarySpec, summarize
from fairmonitor.summaries import to_bytes as binary_to_bytes
from fairmonitor.summaries.multiclass import from_bytes, merge_all, to_bytes

CLASSES = ("low", "mid", "high")
METRICS = ["demographic_parity_difference", "equalized_odds_difference", "abcc", "madd"]


def cpu(func):
    t = time.process_time()
    out = func()
    return out, time.process_time() - t


def hour(rng: np.random.Generator, n: int) -> Window:
    sf = {"sex": rng.choice(["F", "M"], n), "race": rng.choice(list("abcd"), n)}
    logits = rng.normal(size=(n, 3)) + (sf["sex"] == "M")[:, None] * np.array([0.5, 0, -0.5])
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = np.array(CLASSES, dtype=object)
    return Window(sf, y_pred=labels[np.argmax(proba, axis=1)],
                  y_true=labels[np.argmax(logits + rng.normal(size=(n, 3)), axis=1)],
                  y_score=proba, classes=CLASSES)


def concat(windows: list[Window]) -> Window:
    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(w, name) for w in windows])

    return Window({a: np.concatenate([w.sensitive_features[a] for w in windows])
                   for a in ("sex", "race")}, y_pred=cat("y_pred"), y_true=cat("y_true"),
                  y_score=cat("y_score"), classes=CLASSES)


def main(argv: list[str]) -> int:
    n = 2_000 if "--quick" in argv else 20_000
    rng = np.random.default_rng(0)
    spec = SummarySpec()
    hours = [hour(rng, n) for _ in range(24)]
    blobs, t_summarize, t_hour = [], 0.0, 0.0
    for w in hours:
        summary, t = cpu(lambda w=w: summarize_window(w, intersection=True, spec=spec))
        blobs.append(to_bytes(summary))
        t_summarize += t
        t_hour += cpu(lambda w=w: evaluate_window(w, metrics=METRICS, rng=0))[1]
    per_class = [[binary_to_bytes(summarize(
        w.sensitive_features, y_pred=w.one_vs_rest(c).y_pred, y_true=w.one_vs_rest(c).y_true,
        y_score=w.one_vs_rest(c).y_score, spec=spec)) for w in hours] for c in CLASSES]
    _, t_binary = cpu(lambda: [evaluate_summary(
        merge_all([from_bytes(b) for b in blobs_c]), metrics=METRICS, rng=0)
        for blobs_c in per_class])
    day = concat(hours)
    rows, t_rows = cpu(lambda: evaluate_window(day, metrics=METRICS, rng=0))
    rollup, t_rollup = cpu(lambda: evaluate_summary(
        merge_all([from_bytes(b) for b in blobs]), metrics=METRICS, rng=0))
    for key, value in rows.values.items():
        tol = 1e-6 if key[0].startswith("abcc") else 0.0
        got = rollup.values[key]
        assert (np.isnan(value) and np.isnan(got)) or abs(got - value) <= tol, key
    per_hour = sum(map(len, blobs)) / 24
    print(f"{platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"{n} rows an hour, {len(CLASSES)} classes, 2 attributes + intersection, metrics "
          f"{METRICS} with intervals: the day's rows {t_rows:.2f} s CPU, the rollup from 24 "
          f"stored hours {t_rollup:.2f} s; a stored hour {per_hour / 1e3:.0f} KB "
          f"({per_hour / len(per_class[0][0]):.2f}x one class's binary summary); summarizing "
          f"the 24 hours {t_summarize:.2f} s beside their evaluation {t_hour:.2f} s")
    print(f"the {len(CLASSES)} classes' binary rollups {t_binary:.2f} s")
    ratio = t_rollup / t_binary
    print(f"TARGET multiclass_rollup_overhead: {ratio:.2f} (target <= 1.2) "
          f"{'OK' if ratio <= 1.2 else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
