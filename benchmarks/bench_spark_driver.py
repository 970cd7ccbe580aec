"""Driver bytes per window against the partition count (issue 30 item 3), Spark local[2].

``--rows`` logged predictions (default 10^5; ``--quick`` 2*10^4) over 4 hourly windows, 2
sensitive attributes and their intersection, labels and scores, repartitioned into P
partitions for each P of ``--partitions`` (default 8, 80, 800, 4000). For each P it collects

- **partials**: :func:`fairmonitor.spark.partial_summaries`, one summary per window and
  partition (what the driver received before the merge moved to the executors), and
- **merged**: :func:`fairmonitor.spark.merged_summaries`, the same summaries merged per window
  on the executors (what :func:`~fairmonitor.spark.summarize_spark` collects now),

and prints the serialized bytes the driver receives per window, the rows collected and the
wall-clock time. Target (issue 30): merged bytes per window within 10% from 8 to 4,000
partitions. Also checks that the merged summaries give the driver-merged ones' values.

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


def write_rows(path: Path, n: int, seed: int = 0) -> None:
    import pandas as pd

    rng = np.random.default_rng(seed)
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    score = np.clip(rng.beta(2, 2, n) + np.where(sex == "F", -0.05, 0.05), 0, 1)
    pd.DataFrame({
        "timestamp": (pd.Timestamp("2026-01-05") + pd.to_timedelta(
            np.sort(rng.uniform(0, 4 * 3600, n)), unit="s")).astype("datetime64[us]"),
        "sex": sex, "race": rng.choice(np.array(list("abcde"), dtype=object), n),
        "score": score, "label": (rng.random(n) < score).astype(np.int64),
    }).to_parquet(path)


def session():
    return local_session("bench_spark_driver",
                         **{"spark.sql.shuffle.partitions": "2"})


def collected(frame) -> tuple[list[dict], float]:
    started = time.perf_counter()
    rows = [r.asDict() for r in frame.collect()]
    return rows, time.perf_counter() - started


def blob_bytes(rows) -> int:
    return sum(len(r[c]) for r in rows for c in ("summary", "unlabelled") if r[c] is not None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**5)
    parser.add_argument("--partitions", type=int, nargs="+", default=[8, 80, 800, 4000])
    parser.add_argument("--quick", action="store_true", help="2*10^4 rows, 8 80 400 partitions")
    args = parser.parse_args()
    n, counts = (2 * 10**4, [8, 80, 400]) if args.quick else (args.rows, args.partitions)
    spark = session()
    from fairmonitor.report import evaluate_summary
    from fairmonitor.spark import merge_partials, merged_summaries, partial_summaries

    metrics = ["demographic_parity_difference", "equalized_odds_difference", "abpc", "madd"]
    merged_per_window = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.parquet"
        write_rows(path, n)
        print(f"rows {n}, 4 hourly windows; bytes the driver receives per window")
        print(f"{'partitions':>10} {'partials':>12} {'rows':>6} {'s':>6} "
              f"{'merged':>12} {'rows':>6} {'s':>6}  max |merged - partials|")
        for p in counts:
            df = spark.read.parquet(str(path)).repartition(p).cache()
            df.count()
            parts, plan = partial_summaries(df, **COLUMNS)
            part_rows, t_part = collected(parts)
            merged, _ = merged_summaries(df, **COLUMNS)
            merged_rows, t_merged = collected(merged)
            a, b = merge_partials(part_rows, plan), merge_partials(merged_rows, plan)
            worst = max(abs(x - y) for k in a.windows
                        for x, y in zip(evaluate_summary(a.windows[k], metrics=metrics)
                                        .values.values(),
                                        evaluate_summary(b.windows[k], metrics=metrics)
                                        .values.values(), strict=True))
            windows = len(a.windows)
            merged_per_window.append(blob_bytes(merged_rows) / windows)
            print(f"{p:>10} {blob_bytes(part_rows) / windows:>12,.0f} {len(part_rows):>6} "
                  f"{t_part:>6.1f} {merged_per_window[-1]:>12,.0f} {len(merged_rows):>6} "
                  f"{t_merged:>6.1f}  {worst:.1e}")
            df.unpersist()
    spread = max(merged_per_window) / min(merged_per_window) - 1
    print(f"merged bytes per window: spread {spread:.1%} over {counts[0]}..{counts[-1]} "
          f"partitions (target <= 10%): {'PASS' if spread <= 0.10 else 'FAIL'}")
    with open("/proc/loadavg") as f:
        print("loadavg:", f.read().strip())
    spark.stop()


if __name__ == "__main__":
    main()
