"""What the driver receives per window, and windows evaluated on one vs two workers (issue 30).

**Driver bytes** (item 3). ``--rows`` logged predictions (default 10^5; ``--quick`` 2*10^4)
over 4 hourly windows, 2 sensitive attributes and their intersection, labels and scores,
repartitioned into P partitions for each P of ``--partitions`` (default 8, 80, 800, 4000). For
each P it collects

- **partials**: :func:`fairmonitor.spark.partial_summaries`, one summary per window and
  partition (what the driver received before the merge moved to the executors),
- **merged**: :func:`fairmonitor.spark.merged_summaries`, the same summaries merged per window
  on the executors (what :func:`~fairmonitor.spark.summarize_spark` and the monitor's Spark
  source collect), and
- **reports**: :func:`fairmonitor.spark.evaluate.evaluated_windows`, each window's summaries
  merged and evaluated on an executor (what :func:`~fairmonitor.spark.evaluate_spark`
  collects: one pickled report a window),

and prints the bytes the driver receives per window, the rows collected and the wall-clock
time. Target: merged (and report) bytes per window within 10% from 8 to 4,000 partitions.
Also checks that the merged summaries give the driver-merged ones' values.

One vs two workers (item 3's other target) is ``bench_spark_workers.py``.

Usage: ``nice -n 10 python benchmarks/bench_spark_driver.py [--rows N] [--partitions 8 80 ...]
[--quick]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _spark_session import local_session

COLUMNS = dict(sensitive_features=["sex", "race"], label="label", score="score",
               timestamp="timestamp", window="1h")


def write_rows(path: Path, n: int, seed: int = 0, hours: int = 4) -> None:
    import pandas as pd

    rng = np.random.default_rng(seed)
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    score = np.clip(rng.beta(2, 2, n) + np.where(sex == "F", -0.05, 0.05), 0, 1)
    pd.DataFrame({
        "timestamp": (pd.Timestamp("2026-01-05") + pd.to_timedelta(
            np.sort(rng.uniform(0, hours * 3600, n)), unit="s")).astype("datetime64[us]"),
        "sex": sex, "race": rng.choice(np.array(list("abcde"), dtype=object), n),
        "score": score, "label": (rng.random(n) < score).astype(np.int64),
    }).to_parquet(path)


def collected(frame) -> tuple[list[dict], float]:
    started = time.perf_counter()
    rows = [r.asDict() for r in frame.collect()]
    return rows, time.perf_counter() - started


def blob_bytes(rows, columns=("summary", "unlabelled")) -> int:
    return sum(len(r[c]) for r in rows for c in columns if r.get(c) is not None)


def max_gap(a, b, metrics) -> float:
    """Largest difference between two SparkSummaries' values, window by window."""
    from fairmonitor.report import evaluate_summary

    return max(abs(x - y) for k in a.windows
               for x, y in zip(evaluate_summary(a.windows[k], metrics=metrics).values.values(),
                               evaluate_summary(b.windows[k], metrics=metrics).values.values(),
                               strict=True))


def driver_bytes(n: int, counts: list[int], partials_up_to: int) -> None:
    spark = local_session("bench_spark_driver", **{"spark.sql.shuffle.partitions": "2"})
    from fairmonitor.spark import merge_partials, merged_summaries, partial_summaries
    from fairmonitor.spark.evaluate import evaluated_windows

    metrics = ["demographic_parity_difference", "equalized_odds_difference", "abpc", "madd"]
    merged_per_window, reports_per_window = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.parquet"
        write_rows(path, n)
        print(f"rows {n}, 4 hourly windows; bytes the driver receives per window")
        print(f"{'partitions':>10} {'partials':>12} {'rows':>6} {'s':>6} "
              f"{'merged':>12} {'rows':>6} {'s':>6} {'reports':>10} {'s':>6}  "
              "max |merged - partials|")
        for p in counts:
            df = spark.read.parquet(str(path)).repartition(p).cache()
            df.count()
            merged, plan = merged_summaries(df, **COLUMNS)
            merged_rows, t_merged = collected(merged)
            evaluated, _ = evaluated_windows(df, metrics=metrics, **COLUMNS)
            report_rows, t_reports = collected(evaluated)
            b = merge_partials(merged_rows, plan)
            windows = len(b.windows)
            merged_per_window.append(blob_bytes(merged_rows) / windows)
            reports_per_window.append(blob_bytes(report_rows, ("report",)) / windows)
            before, worst = f"{'-':>12} {'-':>6} {'-':>6}", "-"  # fields kept for the docs
            if p <= partials_up_to:  # the driver-side merge of before, for comparison
                parts, _ = partial_summaries(df, **COLUMNS)
                part_rows, t_part = collected(parts)
                a = merge_partials(part_rows, plan)
                worst = f"{max_gap(a, b, metrics):.1e}"
                before = (f"{blob_bytes(part_rows) / windows:>12,.0f} {len(part_rows):>6} "
                          f"{t_part:>6.1f}")
            print(f"{p:>10} {before:>26} {merged_per_window[-1]:>12,.0f} {len(merged_rows):>6} "
                  f"{t_merged:>6.1f} {reports_per_window[-1]:>10,.0f} {t_reports:>6.1f}  "
                  f"{worst}")
            df.unpersist()
    for name, sizes in (("merged", merged_per_window), ("reports", reports_per_window)):
        spread = max(sizes) / min(sizes) - 1
        print(f"TARGET spark_{name}_bytes_spread: {spread:.3%} over {counts[0]}..{counts[-1]} "
              f"partitions (target <= 10%) {'OK' if spread <= 0.10 else 'FAIL'}")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**5)
    parser.add_argument("--partitions", type=int, nargs="+", default=[8, 80, 800, 4000])
    parser.add_argument("--quick", action="store_true", help="2*10^4 rows, 8 80 400 partitions")
    parser.add_argument("--partials-up-to", type=int, default=800,
                        help="collect the unmerged partials (the old path) up to this count")
    args = parser.parse_args()
    n, counts = (2 * 10**4, [8, 80, 400]) if args.quick else (args.rows, args.partitions)
    driver_bytes(n, counts, args.partials_up_to)
    with open("/proc/loadavg") as f:
        print("loadavg:", f.read().strip())


if __name__ == "__main__":
    main()
