"""What a new process pays before its first window (issue 27): compile, cache load, first call.

Every figure is CPU time (user + system) of a fresh child interpreter, read with
``resource.getrusage(RUSAGE_CHILDREN)`` around it, plus the child's own split of it
(``time.process_time`` around the import and around each call). The window is
``evaluate_window`` on 10^4 rows (sex: 2 groups, race: 5, their intersection), default
metrics, intervals on (the default ``confidence_level``), scores and labels.

- ``cold_first_window``: empty ``NUMBA_CACHE_DIR``, no warm-up step: the first call's CPU
  (everything it compiles). Target <= 3 s.
- ``warm_call``: the same process's second call on the same rows (nothing left to compile).
- ``cached_first_window``: a new process whose cache was filled by the previous one: first
  call's CPU; ``load_per_process`` = it minus ``warm_call`` (loading compiled code).
  Target <= 0.2 s.
- ``after_warm_command``: empty cache, then ``fairmonitor warm`` (the install/image step), then
  a new process's first call minus its warm call. Target <= 0.3 s.
- ``process_total``: the child's total CPU (interpreter start, imports, first call) in the
  cold and cached cases, for scale.
- ``spark_first_partition`` (``--spark``, on its own): a ``partial_summaries`` job of one
  partition of 2^17 rows (the compiled group layout) on ``local[1]``, with an empty cache
  exported to the executor: the Python worker's CPU is not visible to this process, so the
  job's wall time is printed, cold and after ``fairmonitor warm``.

Usage: ``python benchmarks/bench_cold_start.py [--quick] [--spark]`` (quick: one repeat).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

CHILD = r"""
import json, time
t0 = time.process_time()
import numpy as np
from fairmonitor.report import Window, evaluate_window
t1 = time.process_time()
rng = np.random.default_rng(0)
n = 10_000
sex = rng.choice(np.array(["F", "M"], dtype=object), n)
race = rng.choice(np.array(list("abcde"), dtype=object), n)
score = np.clip(rng.beta(2, 2, n) + np.where(sex == "F", -0.05, 0.05), 0, 1)
label = (rng.random(n) < score).astype(np.int64)
window = Window({"sex": sex, "race": race}, y_score=score, y_true=label)
t2 = time.process_time()
evaluate_window(window)
t3 = time.process_time()
warm = float("inf")
for _ in range(3):
    s = time.process_time()
    evaluate_window(window)
    warm = min(warm, time.process_time() - s)
print(json.dumps({"import": t1 - t0, "first": t3 - t2, "warm": warm}))
"""


def child_cpu(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """CPU seconds (user + system) of one child process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, out


def window_process(cache: str) -> dict[str, float]:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    total, out = child_cpu([sys.executable, "-c", CHILD], env)
    result = json.loads(out.strip().splitlines()[-1])
    result["total"] = total
    return result


def warm_command(cache: str) -> float:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    cpu, _ = child_cpu([sys.executable, "-m", "fairmonitor.cli", "warm"], env)
    return cpu


def target(name: str, value: float, bound: float) -> None:
    verdict = "OK" if value <= bound else "FAIL"
    print(f"TARGET {name}: {value:.3g} s (target <= {bound:g}) {verdict}")


def one_round(has_warm: bool) -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cache:
        cold = window_process(cache)
        cached = window_process(cache)
    figures.update(cold_first=cold["first"], warm_call=cold["warm"], cold_total=cold["total"],
                   cold_import=cold["import"], cached_first=cached["first"],
                   cached_total=cached["total"],
                   load=cached["first"] - cached["warm"])
    if has_warm:
        with tempfile.TemporaryDirectory() as cache:
            figures["warm_command"] = warm_command(cache)
            after = window_process(cache)
            figures["after_warm_above_warm"] = after["first"] - after["warm"]
    return figures


def spark_round() -> None:
    code = r"""
import time, numpy as np, pandas as pd
from pyspark.sql import SparkSession
from fairmonitor.spark import partial_summaries
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .getOrCreate())
rng = np.random.default_rng(0); n = 1 << 17
offsets = pd.to_timedelta(rng.integers(0, 3600, n), "s")
pdf = pd.DataFrame({"ts": pd.Timestamp("2026-01-01") + offsets, "sex": rng.choice(["F", "M"], n),
                    "score": rng.random(n), "label": rng.integers(0, 2, n)})
df = spark.createDataFrame(pdf).coalesce(1)
s = time.perf_counter()
partial_summaries(df, timestamp="ts", window="1h", sensitive_features=["sex"], score="score",
                  label="label")[0].collect()
print("SPARK first partition job wall", round(time.perf_counter() - s, 2), "s")
spark.stop()
"""
    for warm in (False, True):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYSPARK_PYTHON=sys.executable,
                       SPARK_LOCAL_IP="127.0.0.1")
            if warm:
                warm_command(cache)
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True)
            print("after warm" if warm else "cold", (out.stdout or out.stderr).strip()[-300:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--spark", action="store_true")
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        print("loadavg", f.read().strip())
    if args.spark:
        spark_round()
        return
    has_warm = subprocess.run([sys.executable, "-m", "fairmonitor.cli", "warm", "--help"],
                              capture_output=True).returncode == 0
    rounds = [one_round(has_warm) for _ in range(1 if args.quick else 2)]
    best = {key: min(r[key] for r in rounds) for key in rounds[0]}
    for key, value in best.items():
        print(f"{key}: {value:.3f} s")
    target("cold_first_window", best["cold_first"], 3.0)
    target("load_per_process", best["load"], 0.2)
    if has_warm:
        target("after_warm_command_above_warm", best["after_warm_above_warm"], 0.3)


if __name__ == "__main__":
    main()
