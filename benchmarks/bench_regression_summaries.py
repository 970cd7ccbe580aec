"""Regression summaries (issue 29 item 4): a day merged from 24 hourly summaries vs its rows.

A day of a credit-limit regressor's predictions (``--rows``, default 10^6; ``--quick``
2 * 10^5): limits ~ lognormal around 8,000, in cents, targets around them, sex (2 groups) and
race (5) and their intersection, split into 24 hourly windows, each summarized as the monitor
stores it (``SummarySpec(max_raw=8192)``, ``prediction_madd``'s ``value_range`` configured).

- ``summary_bytes_per_hour``: one hourly summary serialized, next to its raw predictions and
  targets (16 bytes a row, per attribute as the summary keeps them per attribute).
- ``daily_from_hourly_speedup``: the day's report from the 24 stored hourly summaries
  (``from_bytes`` + ``merge_all`` + ``evaluate_summary``) against ``evaluate_window`` on the
  day's rows (``task="regression"``), every regression metric with intervals.
- accuracy, the merged day against the rows: the largest relative difference of the error
  metrics (sums: round-off), and per distribution metric the largest actual difference next to
  the largest certified error (``detail["error"]``; the actual must not exceed it).

CPU times (``time.process_time``), minimum of ``--repeats``. Usage:
``python benchmarks/bench_regression_summaries.py [--quick] [--rows N] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _timing import least

from fairmonitor.report import Window, evaluate_summary, evaluate_window
from fairmonitor.report.registry import task_metrics
from fairmonitor.summaries import (
    SummarySpec,
    from_bytes,
    merge_all,
    summarize_regression,
    to_bytes,
)

METRICS = list(task_metrics("regression"))
OPTIONS = {"prediction_madd": {"value_range": (0.0, 50_000.0)},
           "prediction_wasserstein_scaled": {"scale": 5_000.0}}
SPEC = SummarySpec(max_raw=8192)
DISTRIBUTION = ("prediction_ks_distance", "prediction_wasserstein",
                "prediction_wasserstein_scaled")


def day(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    race = rng.choice(np.array(list("abcde"), dtype=object), n, p=[.5, .2, .15, .1, .05])
    target = rng.lognormal(9.0, 0.6, n)
    pred = np.round(target * rng.lognormal(0.0, 0.2, n) * np.where(sex == "F", 0.97, 1.0), 2)
    hour = np.sort(rng.integers(0, 24, n))
    return {"sex": sex, "race": race, "y": target, "pred": pred, "hour": hour}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    n = args.rows or (200_000 if args.quick else 1_000_000)
    d = day(n)
    hours = []
    t_sum = 0.0
    for h in range(24):
        at = d["hour"] == h
        t = time.process_time()
        s = summarize_regression({"sex": d["sex"][at], "race": d["race"][at]},
                                 y_pred=d["pred"][at], y_true=d["y"][at], spec=SPEC,
                                 value_range=OPTIONS["prediction_madd"]["value_range"])
        blob = to_bytes(s)
        t_sum += time.process_time() - t
        hours.append(blob)
    per_hour = np.mean([len(b) for b in hours])
    raw = 16 * n / 24 * 3  # predictions and targets, 3 attributes (sex, race, sex:race)
    print(f"rows {n}, 24 hourly windows; summarize + serialize per hour: "
          f"{t_sum / 24 * 1e3:.1f} ms CPU")
    print(f"summary_bytes_per_hour {per_hour / 1e3:.0f} kB (raw predictions + targets per "
          f"attribute: {raw / 1e3:.0f} kB; ratio {per_hour / raw:.2f})")

    def merged():
        s = merge_all([from_bytes(b) for b in hours])
        return evaluate_summary(s, metrics=METRICS, options=OPTIONS, rng=0)

    def rows():
        w = Window({"sex": d["sex"], "race": d["race"]}, y_pred=d["pred"], y_true=d["y"])
        return evaluate_window(w, task="regression", metrics=METRICS, options=OPTIONS, rng=0)

    t_merged, got = least(merged, args.repeats)
    t_rows, want = least(rows, args.repeats)
    print(f"daily_from_hourly_speedup {t_rows / t_merged:.2f} (rows {t_rows:.2f} s, merged "
          f"summaries {t_merged:.2f} s CPU)")
    errors = [abs(got.values[k] - v) / max(abs(v), 1e-300) for k, v in want.values.items()
              if k[0] not in DISTRIBUTION and k[0] != "prediction_madd"]
    print(f"error metrics: largest relative difference {max(errors):.1e}")
    madd = max(abs(got.values[k] - v) for k, v in want.values.items()
               if k[0] == "prediction_madd")
    print(f"prediction_madd: largest difference {madd:.1e}")
    ok = True
    for metric in DISTRIBUTION:
        actual = bound = 0.0
        for attr in ("sex", "race", "sex:race"):
            r = getattr(got.details[(metric, attr)], metric)
            diff = abs(r.value - want.values[(metric, attr)])
            err = r.detail["error"] if isinstance(r.detail, dict) else 0.0
            ok &= diff <= err + 1e-9 * max(1.0, abs(r.value))
            actual, bound = max(actual, diff), max(bound, err)
        value = max(want.values[(metric, a)] for a in ("sex", "race", "sex:race"))
        print(f"{metric}: largest value {value:.4g}, actual difference {actual:.2e}, "
              f"certified error {bound:.2e}")
    print("certified errors hold:", "PASS" if ok else "FAIL")


if __name__ == "__main__":
    main()
