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

**One vs two workers** (item 3, ``--workers``): ``evaluate_spark`` on ``--windows`` (24)
hourly windows of ``--window-rows`` rows each (default metrics with their intervals), timed
in a fresh ``local[1]`` and a fresh ``local[2]`` session (subprocesses), or with ``--cluster``
on a standalone cluster started here from pyspark's ``bin/spark-class`` (a master and one,
then two, workers of one core and 1 GB each, bound to 127.0.0.1, stopped by PID at the end;
the driver runs in the child process, the evaluation in the workers' executors). Target: two
workers at least 1.5x faster. On a shared machine the ratio
is bounded by the cores actually free: the load average is printed.

Usage: ``nice -n 10 python benchmarks/bench_spark_driver.py [--rows N] [--partitions 8 80 ...]
[--quick] [--bytes-only | --workers-only] [--cluster]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
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
            before, worst = "(skipped)", "-"
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
        print(f"{name} bytes per window: spread {spread:.1%} over {counts[0]}..{counts[-1]} "
              f"partitions (target <= 10%): {'PASS' if spread <= 0.10 else 'FAIL'}")
    spark.stop()


def time_evaluate(master: str, path: str, windows: int, cores: int) -> None:
    """Child process: evaluate_spark on ``path``'s windows on ``master``; print the seconds."""
    conf = {"spark.sql.shuffle.partitions": str(2 * windows)}
    if master.startswith("spark://"):  # wait for every worker's executor before timing
        conf |= {"spark.cores.max": str(cores), "spark.executor.cores": "1",
                 "spark.executor.memory": "1g",
                 "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                 "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
                 "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    spark = local_session(f"bench_spark_evaluate_{cores}", master=master, **conf)
    from fairmonitor.spark import evaluate_spark

    df = spark.read.parquet(path).repartition(4).cache()  # the same tasks for 1 or 2 cores
    df.count()
    evaluate_spark(df.limit(2000), **COLUMNS)  # every worker's imports and kernels loaded
    times = []
    for _ in range(2):
        started = time.perf_counter()
        reports = evaluate_spark(df, **COLUMNS, rng=0)
        times.append(time.perf_counter() - started)
    assert len(reports) == windows, len(reports)
    print("RESULT " + json.dumps({"master": master, "seconds": min(times),
                                  "values": sum(len(r.values) for r in reports.values())}))
    spark.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def standalone(workers: int, tmp: str):
    """A standalone master and ``workers`` one-core workers on 127.0.0.1; stopped by PID.

    pyspark's ``bin/spark-class`` execs the JVM, so each ``Popen``'s PID is the daemon's own:
    terminating it (SIGTERM) runs the daemon's shutdown hook, which ends its executors.
    """
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOCAL_DIRS": tmp, "SPARK_LOG_DIR": tmp, "SPARK_NO_DAEMONIZE": "1"}
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    daemons = []
    log = open(Path(tmp) / "daemons.log", "w")  # noqa: SIM115 (closed below)
    try:
        daemons.append(subprocess.Popen(
            [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
             "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port())],
            env=env, stdout=log, stderr=subprocess.STDOUT))
        for k in range(workers):
            work = Path(tmp) / f"worker{k}"
            work.mkdir()
            daemons.append(subprocess.Popen(
                [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
                 "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                 "--webui-port", str(_free_port()), "--work-dir", str(work), url],
                env=env, stdout=log, stderr=subprocess.STDOUT))
        yield url
    finally:
        for proc in reversed(daemons):
            proc.terminate()
        for proc in reversed(daemons):
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def _timed(master: str, path: Path, windows: int, cores: int) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", master, str(path), str(windows), str(cores)],
        capture_output=True, text=True, timeout=3600, env=os.environ.copy())
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-4000:])
    return json.loads(lines[0][len("RESULT "):])


def workers(windows: int, window_rows: int, cluster: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "day.parquet"
        write_rows(path, windows * window_rows, seed=1, hours=windows)
        got = {}
        for cores in (1, 2):
            if cluster:
                with standalone(cores, tempfile.mkdtemp(dir=tmp)) as url:
                    got[cores] = _timed(url, path, windows, cores)
            else:
                got[cores] = _timed(f"local[{cores}]", path, windows, cores)
    one, two = got[1]["seconds"], got[2]["seconds"]
    names = (("standalone, 1 worker", "2 workers (1 core each)") if cluster
             else ("local[1]", "local[2]"))
    print(f"evaluate_spark, {windows} hourly windows of {window_rows} rows, default metrics "
          f"and intervals ({got[2]['values']} values): {names[0]} {one:.1f} s, "
          f"{names[1]} {two:.1f} s, speed-up {one / two:.2f}x (target >= 1.5x): "
          f"{'PASS' if one / two >= 1.5 else 'FAIL'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**5)
    parser.add_argument("--partitions", type=int, nargs="+", default=[8, 80, 800, 4000])
    parser.add_argument("--windows", type=int, default=24)
    parser.add_argument("--window-rows", type=int, default=5000)
    parser.add_argument("--quick", action="store_true",
                        help="2*10^4 rows, 8 80 400 partitions; 8 windows of 2000 rows")
    parser.add_argument("--bytes-only", action="store_true")
    parser.add_argument("--partials-up-to", type=int, default=800,
                        help="collect the unmerged partials (the old path) up to this count")
    parser.add_argument("--workers-only", action="store_true")
    parser.add_argument("--cluster", action="store_true",
                        help="one vs two workers of a standalone cluster on 127.0.0.1")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        time_evaluate(args.child[0], args.child[1], int(args.child[2]), int(args.child[3]))
        return
    n, counts = (2 * 10**4, [8, 80, 400]) if args.quick else (args.rows, args.partitions)
    if not args.workers_only:
        driver_bytes(n, counts, args.partials_up_to)
    if not args.bytes_only:
        workers(*((8, 2000) if args.quick else (args.windows, args.window_rows)), args.cluster)
    with open("/proc/loadavg") as f:
        print("loadavg:", f.read().strip())


if __name__ == "__main__":
    main()
