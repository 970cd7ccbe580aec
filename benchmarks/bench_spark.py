"""Spark local[2] against the single-process summary path (issue 17): 24 hourly windows, Parquet.

A day of predictions (``--rows``, default 10^6; ``--full`` 10^7) with 3 sensitive attributes
(sex 2 groups, race 5, age band 4; no intersection: its 780 group pairs cost MADD's search on
both paths alike and would hide the scan), scores and labels, written
to one Parquet file (8 row groups) and evaluated per hourly window (24 windows) on the parity
and score metrics, two ways:

- **single process**: pandas reads the Parquet file; per hour ``summarize`` (the default
  ``SummarySpec``) and ``evaluate_summary``;
- **Spark local[2]**: :func:`fairmonitor.spark.summarize_spark` (one summary per window and
  partition with ``mapInPandas``, collected as bytes, merged on the driver) and
  ``evaluate_summary`` per window.

It prints wall-clock times (Spark's work runs in its JVM and Python workers, so the driver's CPU
time says little), split for Spark into startup (the session), scan (read, summarize per
partition, collect; the first job also starts the Python workers, so a second scan on the warm
session is timed too), merge (deserialize + merge on the driver) and evaluate; the driver's peak
resident memory; and checks that both paths give the same values (counts exact, floats within
1e-12). Figures only: no TARGET line (the issue asks for the figures, not a bound).

Usage: ``python benchmarks/bench_spark.py [--rows N] [--quick] [--full] [--partitions P]
[--split-mb MB]``.
"""

from __future__ import annotations

import argparse
import math
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from _spark_session import local_session

METRICS = ["demographic_parity_difference", "demographic_parity_ratio",
           "equalized_odds_difference", "equal_opportunity_difference", "abcc", "abpc", "madd"]
SENSITIVE = ["sex", "race", "age"]


def write_day(path: Path, n: int, seed: int = 0) -> None:
    import pandas as pd

    rng = np.random.default_rng(seed)
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    frame = pd.DataFrame({
        "timestamp": (pd.Timestamp("2026-01-05") + pd.to_timedelta(
            np.sort(rng.uniform(0, 86_400, n)), unit="s")).astype("datetime64[us]"),
        "sex": sex,
        "race": rng.choice(np.array(list("abcde"), dtype=object), n),
        "age": rng.choice(np.array(["<25", "25-40", "40-60", ">60"], dtype=object), n),
    })
    score = np.clip(rng.beta(2, 2, n) + np.where(sex == "F", -0.05, 0.05), 0, 1)
    frame["score"] = score
    frame["label"] = (rng.random(n) < score).astype(np.int64)
    frame.to_parquet(path, row_group_size=max(n // 8, 1))


def single_process(path: Path):
    import pandas as pd

    from fairmonitor.metrics._groups import column_values
    from fairmonitor.report import evaluate_summary
    from fairmonitor.summaries import summarize

    t0 = time.perf_counter()
    frame = pd.read_parquet(path)
    t_read = time.perf_counter() - t0
    hour = ((frame["timestamp"] - pd.Timestamp("2026-01-05")) // pd.Timedelta(hours=1)).to_numpy()
    order = np.argsort(hour, kind="stable")
    bounds = np.searchsorted(hour[order], np.arange(25))
    t1 = time.perf_counter()
    # each column converted once, text as Spark's partitions and the monitor encode it (one
    # object per value): converting the whole column again for every hour cost ~18 s at 10^7
    sensitive = {c: column_values(frame[c]) for c in SENSITIVE}
    score, label = frame["score"].to_numpy(), frame["label"].to_numpy()
    summaries = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        rows = order[a:b]
        summaries.append(summarize({c: v[rows] for c, v in sensitive.items()},
                                   y_score=score[rows], y_true=label[rows], intersection=False))
    t_summarize = time.perf_counter() - t1
    t2 = time.perf_counter()
    reports = [evaluate_summary(s, metrics=METRICS) for s in summaries]
    t_eval = time.perf_counter() - t2
    return {"read": t_read, "summarize": t_summarize, "evaluate": t_eval}, reports


def spark_path(path: Path, partitions: int, split_mb: int):
    t0 = time.perf_counter()
    spark = local_session("bench_spark", **{
        "spark.sql.shuffle.partitions": "2",
        # input splits of a few MB: the file's row groups spread over both cores
        "spark.sql.files.maxPartitionBytes": f"{split_mb}m"})
    t_startup = time.perf_counter() - t0

    from fairmonitor.report import evaluate_summary
    from fairmonitor.spark import summarize_spark

    df = spark.read.parquet(str(path))
    if partitions:
        df = df.repartition(partitions)
    def scan():
        return summarize_spark(df, sensitive_features=SENSITIVE, label="label", score="score",
                               timestamp="timestamp", window="1h", intersection=False)

    result = scan()  # the first job also starts the Python workers and their imports
    warm = min(scan().timings["scan"] for _ in range(2))
    t2 = time.perf_counter()
    reports = [evaluate_summary(s, metrics=METRICS) for s in result.windows.values()]
    t_eval = time.perf_counter() - t2
    parts = df.rdd.getNumPartitions() if hasattr(df, "rdd") else -1  # benchmark only
    spark.stop()
    return ({"startup": t_startup, "scan": result.timings["scan"],
             "merge": result.timings["merge"], "evaluate": t_eval},
            reports, result.partials, parts, warm)


def compare(a, b) -> float:
    worst = 0.0
    for ra, rb in zip(a, b, strict=True):
        assert ra.group_counts == rb.group_counts, "group counts differ"
        for key, va in ra.values.items():
            vb = rb.values[key]
            if math.isnan(va) and math.isnan(vb):
                continue
            worst = max(worst, abs(va - vb))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**6)
    parser.add_argument("--full", action="store_true", help="10^7 rows")
    parser.add_argument("--quick", action="store_true", help="10^5 rows")
    parser.add_argument("--partitions", type=int, default=0,
                        help="repartition the input (a shuffle; default: the file's splits)")
    parser.add_argument("--split-mb", type=int, default=4,
                        help="spark.sql.files.maxPartitionBytes in MB (default 4)")
    args = parser.parse_args()
    n = 10**7 if args.full else 10**5 if args.quick else args.rows
    with tempfile.TemporaryDirectory(prefix="bench_spark-") as tmp:
        path = Path(tmp) / "day.parquet"
        t0 = time.perf_counter()
        write_day(path, n)
        print(f"{n:,} rows, 24 hourly windows x 3 attributes, "
              f"{path.stat().st_size / 1e6:.1f} MB Parquet written in "
              f"{time.perf_counter() - t0:.1f} s")
        local, local_reports = single_process(path)
        rss_local = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        total_local = sum(local.values())
        print(f"single process: {total_local:.2f} s = read {local['read']:.2f} + summarize "
              f"{local['summarize']:.2f} + evaluate {local['evaluate']:.2f}; "
              f"peak RSS {rss_local:.0f} MB")
        spark, spark_reports, partials, parts, warm = spark_path(path, args.partitions,
                                                                 args.split_mb)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        total = sum(spark.values())
        print(f"spark local[2]: {total:.2f} s = startup {spark['startup']:.2f} + scan "
              f"{spark['scan']:.2f} + merge {spark['merge']:.2f} + evaluate "
              f"{spark['evaluate']:.2f} ({parts} partitions, {partials} partial summaries); "
              f"driver peak RSS {rss:.0f} MB (JVM and workers not counted)")
        print(f"spark scan again on the warm session (workers up): {warm:.2f} s")
        print(f"spark / single process: {total / total_local:.2f}x with startup, "
              f"{(total - spark['startup']) / total_local:.2f}x without, "
              f"{(total - spark['startup'] - spark['scan'] + warm) / total_local:.2f}x warm")
        print(f"largest difference between the paths: {compare(spark_reports, local_reports):.1e} "
              "(group counts equal)")


if __name__ == "__main__":
    main()
