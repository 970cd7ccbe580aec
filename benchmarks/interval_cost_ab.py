"""What the intervals add to a window, two checkouts timed alternately (before/after a change).

Each round runs, per checkout and in a fresh process (``PYTHONPATH`` at that checkout), the
set-up of ``bench_intervals.py``'s cost (the default metric set on 2 attributes and their
intersection) and ``bench_coverage.py --cost`` (the rate metrics alone); the table keeps the
minimum over rounds. Alternating the checkouts puts both under the same machine load.

Usage: ``nice -n 10 python benchmarks/interval_cost_ab.py BEFORE_DIR AFTER_DIR [--rounds 3]
[--repeats 9]`` (e.g. ``/work/main /work/wt/interval-cost``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = (10 ** 4, 10 ** 5, 10 ** 6)


def child(repeats: int) -> None:
    """In the checkout's process: per size, the least CPU time without and with intervals and
    the median a window's intervals add."""
    sys.path.insert(0, str(HERE))
    from _interval_cost import interval_cpu
    from bench_intervals import DEFAULT

    for n in SIZES:
        rounds = repeats if n < 10 ** 6 else max(repeats // 2, 3)
        found = interval_cpu(n, "scores", DEFAULT, rounds)
        print(f"n={n} without={found.without * 1e3:.1f} with={found.with_ * 1e3:.1f} "
              f"added={found.added * 1e3:.1f}")


def measure(tree: str, repeats: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{tree}:{tree}/plugins"}
    out = subprocess.run([sys.executable, __file__, "--child", "--repeats", str(repeats)],
                         env=env, capture_output=True, text=True, check=True).stdout
    got = {}
    for n, wo, w, add in re.findall(r"n=(\d+) without=([\d.]+) with=([\d.]+) added=([\d.-]+)",
                                    out):
        got[f"without {n}"], got[f"with {n}"], got[f"added {n}"] = float(wo), float(w), float(add)
    rates = subprocess.run([sys.executable, str(HERE / "bench_coverage.py"), "--cost"], env=env,
                           capture_output=True, text=True, check=True).stdout
    for ms, n in re.findall(r"add ([\d.]+) ms per window at (\S+) rows", rates):
        got[f"rates {int(float(n))}"] = float(ms)
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.repeats)
        return
    before, after = args.trees
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {os.getloadavg()}")
    best: dict[str, dict[str, float]] = {before: {}, after: {}}
    for _ in range(args.rounds):
        for tree in (before, after):
            for key, v in measure(tree, args.repeats).items():
                best[tree][key] = min(best[tree].get(key, float("inf")), v)
    print(f"end {time.strftime('%H:%M UTC', time.gmtime())}; load {os.getloadavg()}")
    print("| rows | without (before / after) | with, before | with, after | added (median) |")
    print("|---|---|---|---|---|")
    b, a = best[before], best[after]
    for n in SIZES:
        wo_b, wo_a, w_b, w_a = b[f"without {n}"], a[f"without {n}"], b[f"with {n}"], a[f"with {n}"]
        print(f"| {n:.0e} | {wo_b:.1f} / {wo_a:.1f} ms | {w_b:.1f} ms ({w_b / wo_b:.2f}x) | "
              f"{w_a:.1f} ms ({w_a / wo_a:.2f}x) | +{b[f'added {n}']:.1f} -> "
              f"+{a[f'added {n}']:.1f} ms |")
    for n in SIZES[:2]:
        print(f"| rate metrics alone, {n:.0e} | | +{b[f'rates {n}']:.1f} ms | "
              f"+{a[f'rates {n}']:.1f} ms | |")


if __name__ == "__main__":
    main()
