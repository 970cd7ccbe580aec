"""One window at the cost of a few sorts (issue 18): ``evaluate_window`` against ``np.sort``.

- ``window_vs_sort_<n>``: CPU time of ``evaluate_window`` with the default metric set a window
  with scores and labels allows (DP difference/ratio, EO, equal opportunity, ABCC, ABPC, MADD
  "auto") on 2 attributes (sex: 2 groups, race: 5) and their intersection (10 groups),
  divided by one ``np.sort`` of the same scores. The values only (``confidence_level=None``):
  the intervals are a fixed cost per window, measured by ``bench_intervals.py``. Targets:
  <= 20 at 10^6 and 10^7 rows; at 10^4 rows the absolute time (target <= 50 ms) is printed
  too.
- ``window_bytes_per_row``: peak memory traced by ``tracemalloc`` (numpy reports its buffers)
  during the call, beyond the inputs, per row. Target <= 40 at 10^7 rows (the issue's); at
  10^6 it is printed, not judged: MADD "auto" holds ~1.5 MB of bin shares per group whatever
  the rows (~14 MB for the 10-group intersection): 14 B/row at 10^6, 1.4 at 10^7.
- ``import_above_numpy``: median over 7 fresh interpreters of ``import numpy, fairmonitor``
  minus ``import numpy``. Target <= 0.5 s.
- ``madd_40_groups``: ``madd`` "auto" with 40 groups at 10^5 rows, seconds. Target <= 1 s.
- ``madd_fixed_vs_two_histograms``: the whole public call ``madd(scores,
  sensitive_features=groups, bandwidth=0.01)`` (100 bins; input checks, group encoding of the
  0/1 integer column, the histograms, the pair) at 10^7 rows (2 groups, 70/30) over maddlib's
  binning: two ``np.histogram(part, bins=100, range=(0, 1))`` calls on the already split
  groups. Minimum CPU time of each over 5 interleaved repeats, numba loaded beforehand.
  Target <= 1.

Timings are process CPU times, minimum of interleaved repeats; the load average is printed:
the machine is shared. Usage: ``python benchmarks/bench_window.py [--quick] [--full]``
(quick: 10^4 and 10^6 only; full adds 10^7 for the window; the default runs 10^4, 10^6).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tracemalloc

import numpy as np
from _timing import least

from fairmonitor.metrics import madd
from fairmonitor.report import Window, evaluate_window


def data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)  # what pandas hands out
    race = rng.choice(np.array(list("abcde"), dtype=object), n)
    score = np.clip(rng.beta(2, 2, n) + np.where(sex == "F", -0.05, 0.05), 0, 1)
    label = (rng.random(n) < score).astype(np.int64)
    return {"sex": sex, "race": race}, score, label


def target(name: str, value: float, op: str, bound: float) -> None:
    ok = value <= bound if op == "<=" else value >= bound
    print(f"TARGET {name}: {value:.3g} (target {op} {bound:g}) {'OK' if ok else 'FAIL'}")


def window(n: int, repeats: int) -> None:
    sf, score, label = data(n)

    def values() -> None:
        evaluate_window(Window(sf, y_score=score, y_true=label), confidence_level=None)

    values()  # warm: numba, caches
    ratios, times = [], []
    for _ in range(repeats):  # interleaved: each ratio from neighbouring measurements
        sort = least(lambda: np.sort(score), 3)[0]
        t = least(values, 1)[0]
        ratios.append(t / sort)
        times.append(t)
    tracemalloc.start()
    values()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"window n={n:.0e}: {min(times):.3f} s CPU, {min(ratios):.1f}x one np.sort, "
          f"peak extra {peak / n:.1f} B/row ({peak / 2**20:.0f} MiB)")
    if n <= 10**4:
        target(f"window_seconds_{n:.0e}", min(times), "<=", 0.05)
    else:
        target(f"window_vs_sort_{n:.0e}", min(ratios), "<=", 20)
    if n >= 10**7:
        target(f"window_bytes_per_row_{n:.0e}", peak / n, "<=", 40)


def import_time() -> None:
    def fresh(code: str) -> float:
        out = subprocess.run([sys.executable, "-c",
                              f"import time; t = time.perf_counter(); {code}; "
                              "print(time.perf_counter() - t)"],
                             capture_output=True, text=True, check=True)
        return float(out.stdout)

    base = statistics.median(fresh("import numpy") for _ in range(7))
    full = statistics.median(fresh("import numpy, fairmonitor") for _ in range(7))
    print(f"import: numpy {base:.3f} s, numpy + fairmonitor {full:.3f} s")
    target("import_above_numpy", full - base, "<=", 0.5)


def madd_many_groups() -> None:
    rng = np.random.default_rng(1)
    n = 10**5
    scores, groups = rng.beta(2, 5, n), rng.integers(0, 40, n)
    madd(scores[:2000], sensitive_features=groups[:2000] % 2)  # warm numba
    t = least(lambda: madd(scores, sensitive_features=groups), 2)[0]
    target("madd_40_groups_seconds", t, "<=", 1.0)


def madd_fixed(n: int) -> None:
    rng = np.random.default_rng(2)
    scores, groups = rng.beta(2, 5, n), (rng.random(n) < 0.3).astype(np.int64)
    a, b = scores[groups == 0], scores[groups == 1]

    def two() -> None:
        np.histogram(a, bins=100, range=(0, 1))
        np.histogram(b, bins=100, range=(0, 1))

    def ours() -> None:
        madd(scores, sensitive_features=groups, bandwidth=0.01)

    ours()  # loads numba (once a process) and the compiled kernel
    best = {"madd": float("inf"), "two": float("inf")}
    for _ in range(5):
        best["madd"] = min(best["madd"], least(ours, 1)[0])
        best["two"] = min(best["two"], least(two, 1)[0])
    print(f"n = {n:.0e}: madd(bandwidth=0.01) {best['madd']:.4f} s, two np.histogram "
          f"{best['two']:.4f} s")
    target(f"madd_fixed_vs_two_histograms_{n:.0e}", best["madd"] / best["two"], "<=", 1.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--full", action="store_true", help="also 10^7 rows")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    sizes = [10**4, 10**6] + ([10**7] if args.full else [])
    for n in sizes:
        window(n, 5 if n <= 10**4 else 3 if n <= 10**6 else 2)
    import_time()
    madd_many_groups()
    madd_fixed(10**6 if args.quick else 10**7)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
