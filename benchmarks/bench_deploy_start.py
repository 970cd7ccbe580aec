"""What a container and a Spark executor pay before their first summary (issue 27 items 3, 6).

Two deployments ``bench_cold_start.py`` does not reach, each measured from inside the process
that pays:

- **The image's path, without a Docker daemon.** The wheel ``pip wheel`` builds (the
  Dockerfile's first stage compiles the kernels the same way) is unpacked read-only, and a
  child running as ``nobody`` with no writable home evaluates the first window from it
  (``bench_cold_start.CHILD``: 10^4 rows, default metrics, intervals on). Whatever a first
  window would compile or cache has nowhere to go. Target: the first window <= 0.3 s of CPU
  above a warm call. Needs root, to switch user.
- **A Spark executor.** One job of 6 partitions of 2^17 rows on ``local[2]`` whose tasks run
  the package's partition function (``summarize_partition``, what ``partial_summaries`` runs)
  inside the Python workers and time it there: per task, whether its worker process was
  fresh, the CPU of importing the package with its kernels, and the CPU of the summary. A
  fresh worker's first summary against a reused worker's is what an executor pays beyond the
  per-process load. Target <= 0.3 s. Spark's own start-up is outside every figure.

Usage: ``python benchmarks/bench_deploy_start.py [--no-spark]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

from bench_cold_start import CHILD, target

# One Spark job on local[2]: every task wraps the package's own partition function
# (``summarize_partition``, what ``partial_summaries`` runs) and reports, from inside the Python
# worker, whether that worker process had loaded fairmonitor before, and the CPU it spent
# importing the package and its kernels and then summarizing. A task on a fresh worker process
# pays the per-process load; a task on a reused worker shows the warm cost of the same summary.
SPARK = r"""
import json, os, sys, time
import numpy as np, pandas as pd
from pyspark.sql import SparkSession, functions as F
from fairmonitor.spark.summarize import KEY, window_key
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.python.worker.reuse", "true")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())
rng = np.random.default_rng(0); n = 1 << 17; parts = 6
offsets = pd.to_timedelta(rng.integers(0, 3600, n * parts), "s")
pdf = pd.DataFrame({"ts": pd.Timestamp("2026-01-01") + offsets,
                    "sex": rng.choice(["F", "M"], n * parts),
                    "race": rng.choice(list("abcde"), n * parts),
                    "score": rng.random(n * parts), "label": rng.integers(0, 2, n * parts)})
df = spark.createDataFrame(pdf).repartition(parts)
key, key_type, window_us, key_is_long = window_key(df, "ts", "1h", None, None)
selected = df.select("sex", "race", F.col("label").cast("long"), F.col("score").cast("double"),
                     key.alias(KEY))

def timed(batches):
    # nothing of fairmonitor's is pickled into the task (the plan is built here), so a fresh
    # worker process imports the package inside this function, where it is timed
    import builtins, os, sys, time
    fresh = not getattr(builtins, "_fairmonitor_bench_seen", False)
    builtins._fairmonitor_bench_seen = True
    t0 = time.process_time()
    import importlib, pathlib
    import fairmonitor._kernels as k
    for p in sorted(pathlib.Path(k.__file__).parent.glob("*.pyx")):
        importlib.import_module("fairmonitor._kernels." + p.stem)
    t1 = time.process_time()
    from fairmonitor.spark._partition import PartitionPlan, summarize_partition
    from fairmonitor.summaries import SummarySpec
    plan = PartitionPlan(("sex", "race"), "label", "score", None, (), 0.5, True,
                         SummarySpec(), "raise", "", "", window_us, key_is_long)
    t2 = time.process_time()
    rows = sum(int(f["rows"].sum()) for f in summarize_partition(plan, batches))
    t3 = time.process_time()
    numba = sum(m.split(".")[0] in ("numba", "llvmlite") for m in sys.modules)
    yield pd.DataFrame({"pid": [os.getpid()], "fresh": [fresh], "kernels": [t1 - t0],
                        "package": [t2 - t1], "summary": [t3 - t2], "rows": [rows],
                        "numba": [numba]})

schema = ("pid long, fresh boolean, kernels double, package double, summary double, "
          "rows long, numba long")
out = selected.mapInPandas(timed, schema).toPandas()
print(json.dumps(out.to_dict("list")))
spark.stop()
"""


def spark_round() -> None:
    """Per task, from inside the Python workers: fresh-process load vs warm summary CPU."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYSPARK_PYTHON=sys.executable,
                   SPARK_LOCAL_IP="127.0.0.1")
        out = subprocess.run([sys.executable, "-c", SPARK], env=env, capture_output=True,
                             text=True, cwd=cache)  # cwd: see child_cpu
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    tasks = json.loads(out.stdout.strip().splitlines()[-1])
    rows = list(zip(*(tasks[k] for k in ("pid", "fresh", "kernels", "package", "summary",
                                          "rows", "numba")), strict=True))
    print(f"{'task':<6}{'worker pid':>12}{'fresh':>7}{'kernels s':>11}{'package s':>11}"
          f"{'summary s':>11}{'rows':>9}{'numba':>7}")
    for i, (pid, fresh, kern, pkg, summ, n, numba) in enumerate(rows):
        print(f"{i:<6}{pid:>12}{fresh!s:>7}{kern:>11.3f}{pkg:>11.3f}{summ:>11.3f}{n:>9}"
              f"{numba:>7}")
    fresh = [r for r in rows if r[1]]
    warm = [r for r in rows if not r[1]]
    if not fresh or not warm:
        raise SystemExit("need tasks on fresh and on reused workers; got "
                         f"{len(fresh)} fresh, {len(warm)} reused")
    first = min(r[4] for r in fresh)
    steady = min(r[4] for r in warm)
    print(f"spark_first_summary {first:.3f} s CPU, reused worker {steady:.3f} s CPU "
          f"({len(fresh)} fresh, {len(warm)} reused tasks)")
    # the package's import (numpy, pandas, scipy come with it) is what any Python library costs
    # a fresh worker; the kernels' share of it is in the first column
    print(f"spark_fresh_worker_load {max(r[2] + r[3] for r in fresh):.3f} s CPU (kernels and "
          "package imports)")
    target("spark_first_summary_above_warm", first - steady, 0.3)
    if any(r[6] for r in rows):
        print("TARGET spark_numba_modules: numba loaded in a worker FAIL")


def as_nobody() -> None:
    """Become ``nobody`` in a child before it runs (``preexec_fn``)."""
    os.setgid(65534)
    os.setuid(65534)


def interpreter_for_nobody() -> str:
    """This Python's interpreter, or the system's of the same version when ``nobody`` cannot
    run it (a pyenv build under root's home): the dependencies come from this environment's
    site-packages either way."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/{version}"):
        try:
            probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                                   capture_output=True, text=True, preexec_fn=as_nobody)
        except PermissionError:
            continue
        if probe.returncode == 0 and probe.stdout.strip() == str(sys.version_info[:2]):
            return candidate
    raise SystemExit(f"no {version} interpreter that nobody can run")


def wheel_round() -> None:
    """The image's path without a Docker daemon: the wheel, read-only, run by another user.

    ``pip wheel`` builds the package as the Dockerfile's first stage does; its files are
    unpacked read-only into a fresh directory and a child running as ``nobody`` (no writable
    home, no byte-code writes) imports the package from there and evaluates the first window.
    Whatever the first window would compile or cache has nowhere to go; the figure is what a
    fresh container pays. Needs root (to switch user).
    """
    import sysconfig
    import zipfile

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        wheels = os.path.join(tmp, "wheels")
        # built in isolation, as the image's first stage builds it
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                                wheels, root], capture_output=True, text=True)
        if built.returncode:
            raise SystemExit(f"pip wheel failed:\n{built.stderr[-3000:]}")
        (wheel,) = os.listdir(wheels)
        site = os.path.join(tmp, "site")
        with zipfile.ZipFile(os.path.join(wheels, wheel)) as zf:
            zf.extractall(site)
        stored = sorted(os.path.relpath(os.path.join(d, f), site)
                        for d, _, files in os.walk(site) for f in files)
        kernels = [f for f in stored if "/_kernels/" in f and f.endswith(".so")]
        env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent",
               "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.pathsep.join([site, sysconfig.get_paths()["purelib"]])}
        code = CHILD.replace("import json, sys, time",
                             "import json, sys, time\nimport fairmonitor\n"
                             "print(fairmonitor.__file__, file=sys.stderr)")

        python = interpreter_for_nobody()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([python, "-c", code], env=env, cwd=tmp, check=True,
                             capture_output=True, text=True, preexec_fn=as_nobody)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        after_files = sorted(os.path.relpath(os.path.join(d, f), site)
                             for d, _, files in os.walk(site) for f in files)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"wheel {wheel}: {len(stored)} files, {len(kernels)} compiled kernels, "
          f"{sum(f.endswith(('.pyx', '.c')) for f in stored)} .pyx/.c")
    print(f"package imported from {out.stderr.strip().splitlines()[-1]} by {python}")
    print(f"as nobody, read-only: process {cpu:.3f} s CPU, first window {result['first']:.3f} "
          f"s, warm {result['warm']:.3f} s, numba modules {result['numba_modules']}, files "
          f"written into the package {len(after_files) - len(stored)}")
    target("wheel_first_above_warm", result["first"] - result["warm"], 0.3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-spark", action="store_true", help="the wheel's figure alone")
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        print("loadavg", f.read().strip())
    wheel_round()
    if not args.no_spark:
        spark_round()
    with open("/proc/loadavg") as f:
        print("loadavg", f.read().strip())


if __name__ == "__main__":
    main()
