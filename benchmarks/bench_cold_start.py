"""What a new process pays before its first window (issue 27): compiled code, its load, first call.

The kernels are Cython extension modules compiled at install (``setup.py``); this measures
what is left to pay at run time. Every figure is CPU time (user + system) of a fresh child
interpreter, read with ``resource.getrusage(RUSAGE_CHILDREN)`` around it, plus the child's
own split of it (``time.process_time`` around the import and around each call). The window
is ``evaluate_window`` on 10^4 rows (sex: 2 groups, race: 5, their intersection), default
metrics, intervals on (the default ``confidence_level``), scores and labels.

- ``kernel_import``: a new process importing every Cython kernel (``fairmonitor warm``'s
  list): loading compiled code. Target <= 0.2 s.
- ``cold_first``: the first call in a new process with an empty ``NUMBA_CACHE_DIR`` (no
  warm-up step of any kind): everything it compiles or loads. Target <= 3 s.
- ``warm_call``: the same process's later calls on the same rows (best of 3).
- ``first_above_warm``: ``cold_first - warm_call``, what the first call pays. Target <= 0.3 s.
- ``cached_first`` / ``load``: a second process on the cache the first one filled (numba
  kernels not ported yet still cache), its first call, and that minus its warm call.
- ``numba_modules``: numba/llvmlite modules the first window imported (0 once every kernel is
  Cython).
- ``cells_*``: the group and cell kernels' paths alone (``CELLS``), cold cache: summaries of
  2^17 rows made of cells (object columns encoded, laid out by group, binned), merged, and a
  rollup's ABCC and DP evaluated from the cells, no intervals; its first call, a warm one,
  the difference, and the numba modules it imported.

``--before PATH`` runs the same children on another checkout (``PYTHONPATH=PATH``: e.g. a
worktree of the commit before the port, its kernels numba) and prints both side by side.
What a container and a Spark executor pay is measured by ``bench_deploy_start.py``.

Usage: ``python benchmarks/bench_cold_start.py [--quick] [--before PATH]``.
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
import json, sys, time
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
numba = [m for m in sys.modules if m.split(".")[0] in ("numba", "llvmlite")]
print(json.dumps({"import": t1 - t0, "first": t3 - t2, "warm": warm,
                  "numba_modules": len(numba)}))
"""

# the paths of the group and cell kernels alone: a Spark partition's or an hour's summary of
# 2^17 rows (object columns encoded, laid out by group, binned into cells), 24 of them merged
# and a rollup's ABCC and DP evaluated from the cells (no intervals: their kernels are others')
CELLS = r"""
import json, sys, time
import numpy as np
from fairmonitor.report import evaluate_summary
from fairmonitor.summaries import SummarySpec, merge_all, summarize
rng = np.random.default_rng(0)
n = 1 << 17
sex = rng.choice(np.array(["F", "M"], dtype=object), n)
race = rng.choice(np.array(list("abcde"), dtype=object), n)
score = rng.beta(2, 5, n)
label = (rng.random(n) < score).astype(np.int64)
spec = SummarySpec(max_raw=2048, sample_size=64)

def rollup():
    parts = [summarize({"sex": sex[a:a + n // 8], "race": race[a:a + n // 8]},
                       y_score=score[a:a + n // 8], y_true=label[a:a + n // 8], spec=spec)
             for a in range(0, n, n // 8)]
    parts.append(summarize({"sex": sex, "race": race}, y_score=score, y_true=label,
                           spec=spec))
    evaluate_summary(merge_all(parts), metrics=["abcc", "demographic_parity_difference"],
                     confidence_level=None)

t0 = time.process_time()
rollup()
first = time.process_time() - t0
warm = float("inf")
for _ in range(3):
    s = time.process_time()
    rollup()
    warm = min(warm, time.process_time() - s)
numba = [m for m in sys.modules if m.split(".")[0] in ("numba", "llvmlite")]
print(json.dumps({"first": first, "warm": warm, "numba_modules": len(numba)}))
"""

KERNELS = r"""
import importlib, json, time
from pathlib import Path
import fairmonitor._kernels as k
names = sorted(p.stem for p in Path(k.__file__).parent.glob("*.pyx"))
start = time.process_time()
for name in names:
    importlib.import_module("fairmonitor._kernels." + name)
print(json.dumps({"kernel_import": time.process_time() - start, "kernels": names}))
"""


def child_cpu(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """CPU seconds (user + system) of one child process, and its stdout.

    Run from the temporary directory: ``python -c`` puts the working directory first on
    ``sys.path``, which would shadow the checkout ``PYTHONPATH`` names.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True,
                         cwd=env["NUMBA_CACHE_DIR"]).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, out


def _env(checkout: str | None, cache: str) -> dict[str, str]:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    if checkout:
        env["PYTHONPATH"] = os.pathsep.join([checkout, os.path.join(checkout, "plugins")])
    return env


def run_child(code: str, checkout: str | None, cache: str) -> dict[str, float]:
    total, out = child_cpu([sys.executable, "-c", code], _env(checkout, cache))
    result = json.loads(out.strip().splitlines()[-1])
    result["total"] = total
    return result


def target(name: str, value: float, bound: float) -> None:
    verdict = "OK" if value <= bound else "FAIL"
    print(f"TARGET {name}: {value:.3g} s (target <= {bound:g}) {verdict}")


def one_round(checkout: str | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as cache:
        kernels = run_child(KERNELS, checkout, cache)
        cold = run_child(CHILD, checkout, cache)
        cached = run_child(CHILD, checkout, cache)
    with tempfile.TemporaryDirectory() as cache:
        cells = run_child(CELLS, checkout, cache)
    return {"kernel_import": kernels["kernel_import"], "kernels": len(kernels["kernels"]),
            "package_import": cold["import"],
            "cold_first": cold["first"], "warm_call": cold["warm"],
            "first_above_warm": cold["first"] - cold["warm"], "cold_total": cold["total"],
            "cached_first": cached["first"], "load": cached["first"] - cached["warm"],
            "cached_total": cached["total"], "numba_modules": cold["numba_modules"],
            "cells_cold_first": cells["first"], "cells_warm": cells["warm"],
            "cells_above_warm": cells["first"] - cells["warm"],
            "cells_numba_modules": cells["numba_modules"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--before", help="another checkout to measure the same way")
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        print("loadavg", f.read().strip())
    repeats = 1 if args.quick else 2
    runs = {"after": None} if not args.before else {"before": args.before, "after": None}
    best = {}
    for label, checkout in runs.items():
        rounds = [one_round(checkout) for _ in range(repeats)]
        best[label] = {key: min(r[key] for r in rounds) for key in rounds[0]}
    print(f"{'figure':<18}" + "".join(f"{label:>12}" for label in best))
    for key in best["after"]:
        print(f"{key:<18}" + "".join(f"{best[label][key]:>12.3f}" for label in best))
    with open("/proc/loadavg") as f:
        print("loadavg", f.read().strip())
    after = best["after"]
    target("kernel_import", after["kernel_import"], 0.2)
    target("cold_first_window", after["cold_first"], 3.0)
    target("first_above_warm", after["first_above_warm"], 0.3)


if __name__ == "__main__":
    main()
