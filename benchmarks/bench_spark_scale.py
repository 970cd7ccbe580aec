"""One monitor tick over a window of 10^7..10^8 rows through the Spark source (issue 30 item 5).

Target: "a window of 10^8 rows can be monitored with a driver under 2 GB". The monitor's
``source: {kind: spark}`` summarizes a window on the executors and merges its partition
summaries there (:mod:`fairmonitor.spark.windows`), so the driver should receive one summary
per window and its memory should not grow with the window's rows.

For each row count N of ``--rows`` (default 10^7, 3*10^7, 10^8; ``--quick`` 10^6), a table of
N predictions over one day (timestamp, ``sex`` 2 groups, ``race`` 4, ``score``, ``label``) is
generated in Spark from ``spark.range`` (the JVM writes it; the Python driver holds no row)
into ``--data-dir`` as Parquet, once (kept for the next run). Then a fresh child process
starts ``local[2]`` with ``spark.driver.memory=2g`` and runs ONE ``run_once`` of the real
monitor (``window: 1d``, phase full, the default summary spec, parity, odds and score metrics
with their 95% intervals) whose only due window holds the N rows. It reports

- **driver RSS**: the Python driver's peak resident memory (``getrusage``: the monitor, its
  evaluation and py4j),
- **JVM**: the Spark driver JVM's peak resident memory (``VmHWM``) and its peak heap use (the
  sum of the heap pools' peak usage, ``MemoryPoolMXBean``; the heap is capped at 2 GB, so a
  tick that needs more fails with an ``OutOfMemoryError`` instead of passing), and the Python
  workers' peak RSS (in ``local`` mode the executors live in the driver JVM, so its heap also
  carries their shuffle of partition summaries),
- the tick's wall time and the rows the window reports,
- **exact check**: the window's group counts, demographic parity and equalized odds
  differences against the same quantities aggregated exactly by Spark SQL over the N rows
  (``count``, ``avg(score >= 0.5)`` per group and label: integers and rates, no
  summary in between).

The small exact check (``--check-rows``, 10^5): the same tick on a 10^5-row table with
``summaries: {max_raw: 10^6}`` (every group keeps its raw scores, so the summary path is
exact) against the monitor's row path (``run_once`` on a ``MemorySource`` of the same rows):
every value equal within 1e-12 and every interval within 1e-9. The score-distribution metrics
(ABCC, ABPC, MADD) at N rows come from the summaries' cells (``max_raw`` 8,192 rows a group),
not the rows, so they are printed per N beside each other: the same generator must give the
same population value, up to the cells' resolution and sampling noise.

Target line: driver (Python) peak RSS + JVM peak heap under 2 GB at the largest N, and the
driver RSS flat in N (the largest within 10% of the smallest).

Usage: ``nice -n 10 python benchmarks/bench_spark_scale.py [--rows N ...] [--quick]
[--data-dir DIR] [--check-rows N]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _spark_session import local_session

T0 = datetime(2026, 1, 5, tzinfo=UTC)
METRICS = ["demographic_parity_difference", "equalized_odds_difference", "abcc", "abpc", "madd"]
EXACT = ["demographic_parity_difference", "equalized_odds_difference"]
SESSION = {"spark.sql.shuffle.partitions": "4",
           "spark.sql.files.maxPartitionBytes": "128m"}


def generate(spark, path: Path, n: int, seed: int = 7) -> None:
    """Write ``n`` rows of one day to ``path`` (Parquet), generated on the executors."""
    from pyspark.sql import functions as F

    step = 86_400_000_000 / n  # microseconds between rows: the day evenly covered
    base = int(T0.timestamp()) * 1_000_000
    u1, u2, u3 = (F.rand(seed + k) for k in range(3))
    sex = F.when(F.rand(seed + 3) < 0.45, "F").otherwise("M")
    race = F.element_at(F.array(*map(F.lit, "abcd")),
                        (F.floor(F.rand(seed + 4) * 4) + 1).cast("int"))
    # Irwin-Hall(3)/3 (bell-shaped on [0, 1]) shifted by sex: a parity gap of ~0.1
    shift = F.when(sex == "F", -0.05).otherwise(0.05)
    score = F.least(F.greatest((u1 + u2 + u3) / 3 + shift, F.lit(0.0)), F.lit(1.0))
    parts = max(2, n // 2_000_000)
    (spark.range(0, n, numPartitions=parts)
     .select(F.timestamp_micros((F.lit(base) + F.col("id") * F.lit(step)).cast("long"))
             .alias("timestamp"), sex.alias("sex"), race.alias("race"), score.alias("score"))
     .withColumn("label", (F.rand(seed + 5) < F.col("score")).cast("int"))
     .write.mode("overwrite").parquet(str(path)))


def config_text(path: Path, max_raw: int | None) -> str:
    summaries = f"\n    summaries: {{max_raw: {max_raw}}}" if max_raw else ""
    return f"""
models:
  credit:
    source: {{kind: spark, path: "{path}", timeout: 2h}}
    sensitive_features: [sex, race]
    label: label
    score: score
    window: 1d
    start: "{T0.isoformat()}"
    metrics: [{", ".join(METRICS)}]{summaries}
"""


def _hwm_kb(pid: int) -> int:
    """Peak resident set (kB) of process ``pid``, 0 once it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return kids + [k for kid in kids for k in _descendants(kid)]


class Peaks(threading.Thread):
    """Poll the JVM's and its Python workers' peak RSS while the tick runs."""

    def __init__(self, jvm_pid: int) -> None:
        super().__init__(daemon=True)
        self.jvm_pid, self.stop, self.workers, self.jvm = jvm_pid, threading.Event(), 0, 0

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.jvm = max(self.jvm, _hwm_kb(self.jvm_pid))
            for pid in _descendants(self.jvm_pid):
                self.workers = max(self.workers, _hwm_kb(pid))


def heap_peak_mb(spark) -> float:
    """The JVM's heap pools' peak usage since start (MB)."""
    jvm = spark.sparkContext._jvm
    pools = jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
    return sum(p.getPeakUsage().getUsed() for p in pools
               if str(p.getType().toString()) == "Heap memory") / 2**20


def exact_values(spark, path: Path) -> dict:
    """Group counts, DP and EO differences aggregated exactly by Spark SQL over every row."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(path)).withColumn("hit", (F.col("score") >= 0.5).cast("int"))
    counts, dp, eo = {}, {}, {}
    for attr in ("sex", "race"):
        rows = df.groupBy(attr, "label").agg(F.count("*").alias("n"),
                                             F.sum("hit").alias("hits")).collect()
        by_group: dict = {}
        for r in rows:
            g = by_group.setdefault(r[attr], {"n": 0, "hits": 0, 0: math.nan, 1: math.nan})
            g["n"] += r["n"]
            g["hits"] += r["hits"]
            g[int(r["label"])] = r["hits"] / r["n"]
        counts[attr] = {k: v["n"] for k, v in by_group.items()}
        rates = [v["hits"] / v["n"] for v in by_group.values()]
        dp[attr] = max(rates) - min(rates)
        eo[attr] = max(max(v[y] for v in by_group.values()) - min(v[y] for v in by_group.values())
                       for y in (0, 1))
    return {"counts": counts, "demographic_parity_difference": dp,
            "equalized_odds_difference": eo}


def tick(path: Path, max_raw: int | None = None):
    """One run_once of the monitor over the day's window; its results."""
    from fairmonitor.monitor.checkpoint import MemoryCheckpoint
    from fairmonitor.monitor.config import load_config
    from fairmonitor.monitor.job import run_once
    from fairmonitor.monitor.sources import build_sources

    cfg = load_config(config_text(path, max_raw), base_dir=path.parent)
    now = T0 + timedelta(days=1, minutes=1)
    return cfg, run_once(cfg, build_sources(cfg), MemoryCheckpoint(), now=now)


def child_tick(path: Path) -> None:
    """Child process: a fresh driver, one tick, its peaks; a RESULT line."""
    spark = local_session("bench_spark_scale", **SESSION)
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    peaks = Peaks(jvm_pid)
    peaks.start()
    started = time.perf_counter()
    _, results = tick(path)
    wall = time.perf_counter() - started
    peaks.stop.set()
    peaks.join()
    heap = heap_peak_mb(spark)
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    jvm = max(peaks.jvm, _hwm_kb(jvm_pid)) / 1024
    (result,) = [r for r in results if r.report is not None]
    exact = exact_values(spark, path)
    report = result.report
    out = {"rows": result.n_rows, "wall": wall, "driver_rss_mb": driver,
           "jvm_heap_peak_mb": heap, "jvm_rss_mb": jvm, "workers_rss_mb": peaks.workers / 1024,
           "errors": dict(result.errors),
           "group_counts": {a: dict(g) for a, g in report.group_counts.items()},
           "values": {"|".join(k): v for k, v in report.values.items()}, "exact": exact}
    print("RESULT " + json.dumps(out, default=str))
    spark.stop()


def child_generate(path: Path, n: int) -> None:
    spark = local_session("bench_spark_scale_data", **SESSION)
    started = time.perf_counter()
    generate(spark, path, n)
    print(f"RESULT {json.dumps({'seconds': time.perf_counter() - started})}")
    spark.stop()


def in_child(*args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                          text=True, timeout=7200, env=os.environ.copy())
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-6000:])
    return json.loads(lines[-1][len("RESULT "):])


def _value(values: dict, metric: str, attr: str) -> float:
    """The report's value of ``metric`` for attribute ``attr`` (keys joined by ``|``)."""
    return values[f"{metric}|{attr}"]


def check_exact(got: dict) -> float:
    """Largest gap between the window's values and Spark SQL's exact ones; counts must match."""
    worst = 0.0
    for attr, want in got["exact"]["counts"].items():
        assert want == got["group_counts"][attr], (attr, want, got["group_counts"])
        for metric in EXACT:
            worst = max(worst, abs(_value(got["values"], metric, attr)
                                   - got["exact"][metric][attr]))
    return worst


def small_check(n: int) -> None:
    """The Spark source's tick equals the row path's on ``n`` rows with raw summaries."""
    import pandas as pd

    from fairmonitor.monitor.checkpoint import MemoryCheckpoint
    from fairmonitor.monitor.job import run_once
    from fairmonitor.monitor.sources import MemorySource

    spark = local_session("bench_spark_scale_check", **SESSION)
    with tempfile.TemporaryDirectory(prefix="bench_spark_scale-") as tmp:
        path = Path(tmp) / "day.parquet"
        generate(spark, path, n)
        cfg, got = tick(path, max_raw=10**6)
        rows = pd.read_parquet(path)
        rows["timestamp"] = pd.to_datetime(rows["timestamp"]).dt.tz_localize("UTC")
        want = run_once(cfg, {"credit": MemorySource(rows)}, MemoryCheckpoint(),
                        now=T0 + timedelta(days=1, minutes=1))
    spark.stop()
    (a,), (b,) = ([r for r in rs if r.report is not None] for rs in (got, want))
    assert a.report.group_counts == b.report.group_counts
    gap = max(abs(x - b.report.values[k]) for k, x in a.report.values.items()
              if not (math.isnan(x) and math.isnan(b.report.values[k])))
    igap = max((abs(getattr(iv, s) - getattr(b.report.intervals[k], s))
                for k, iv in a.report.intervals.items() for s in ("lower", "upper")
                if not math.isnan(getattr(iv, s))), default=0.0)
    ok = gap <= 1e-12 and igap <= 1e-9
    print(f"exact check, {n:,} rows, raw summaries (max_raw 10^6): Spark source vs the row "
          f"path, {len(a.report.values)} values, largest gap {gap:.1e}, intervals {igap:.1e}: "
          f"{'equal' if ok else 'DIFFERENT'}")
    if not ok:
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, nargs="+", default=[1e7, 3e7, 1e8])
    parser.add_argument("--quick", action="store_true", help="10^6 and 3*10^6 rows")
    parser.add_argument("--data-dir", default="/tmp/fairmonitor-bench-scale")
    parser.add_argument("--check-rows", type=int, default=10**5)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.child[0] == "generate":
            child_generate(Path(args.child[1]), int(args.child[2]))
        else:
            child_tick(Path(args.child[1]))
        return
    sizes = [10**6, 3 * 10**6] if args.quick else [int(n) for n in args.rows]
    small_check(10**4 if args.quick else args.check_rows)
    print(f"{'rows':>12} {'tick s':>8} {'driver RSS MB':>14} {'JVM heap peak MB':>17} "
          f"{'JVM RSS MB':>11} {'workers RSS MB':>15} {'max |exact gap|':>16}  "
          + "  ".join(f"{m.split('_')[0]}(sex)" for m in METRICS[2:]))
    got = {}
    for n in sizes:
        path = Path(args.data_dir) / f"rows-{n}.parquet"
        if not (path / "_SUCCESS").exists():
            made = in_child("generate", str(path), str(n))
            print(f"(generated {n:,} rows in {made['seconds']:.0f} s into {path})")
        got[n] = r = in_child("tick", str(path))
        (Path(args.data_dir) / f"result-{n}.json").write_text(json.dumps(r))  # kept if cut
        assert r["rows"] == n and not r["errors"], (r["rows"], r["errors"])
        gap = check_exact(r)
        dist = "  ".join(f"{_value(r['values'], m, 'sex'):9.5f}" for m in METRICS[2:])
        print(f"{n:>12,} {r['wall']:>8.1f} {r['driver_rss_mb']:>14.0f} "
              f"{r['jvm_heap_peak_mb']:>17.0f} {r['jvm_rss_mb']:>11.0f} "
              f"{r['workers_rss_mb']:>15.0f} {gap:>16.1e}  {dist}", flush=True)
    small, large = got[sizes[0]], got[sizes[-1]]
    driver = large["driver_rss_mb"] + large["jvm_heap_peak_mb"]
    flat = large["driver_rss_mb"] / small["driver_rss_mb"] - 1
    ok = driver < 2048 and flat <= 0.10
    print(f"TARGET spark monitor tick of {sizes[-1]:,} rows: driver {large['driver_rss_mb']:.0f} "
          f"MB RSS + JVM heap {large['jvm_heap_peak_mb']:.0f} MB = {driver:.0f} MB (< 2048), "
          f"driver RSS {flat:+.1%} from {sizes[0]:,} rows (<= 10%): "
          f"{'PASS' if ok else 'FAIL'}")
    with open("/proc/loadavg") as f:
        print("loadavg:", f.read().strip())


if __name__ == "__main__":
    main()
