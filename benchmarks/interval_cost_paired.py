"""What intervals add to a window in two checkouts, paired window by window in one process.

``interval_cost_ab.py`` alternates the checkouts in fresh processes. On a machine whose speed
drifts by 1.5-2x within minutes (this VM's), its least times and medians move between runs by
as much as a change of a few ms. Here both checkouts run in one process: this script's own
checkout and BEFORE_DIR, each ``fairmonitor`` package loaded under a name of its own
(``fairmonitor_this``, ``fairmonitor_before``: the package imports its modules relatively,
so each alias runs its checkout's code throughout; BEFORE_DIR's kernels must be built in
place, ``python setup.py build_ext --inplace`` there). Both are aliases so that they are
loaded alike: with this checkout imported as plain ``fairmonitor``, the same code on both
sides read 0.5-0.7 ms apart. Each new seeded window (``_interval_cost.cost_window``) is
evaluated by one checkout, then the other (the order alternating), each without and then with
intervals. The two measurements of a pair are milliseconds apart, so the drift cancels in
their difference. Printed: each checkout's median added CPU time, and the median and
quartiles of the paired differences (this checkout minus BEFORE; negative: this one is
cheaper). Run it against its own checkout first: it should read about 0.

Usage: ``nice -n 10 python benchmarks/interval_cost_paired.py BEFORE_DIR [--rows 10000 100000]
[--windows 40]``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np
from _interval_cost import added_cpu, cost_window
from bench_intervals import DEFAULT

HERE = Path(__file__).resolve().parent


def load(tree: Path, alias: str) -> types.ModuleType:
    """Import ``tree``'s ``fairmonitor`` package as ``alias`` and return its ``report``."""
    root = tree / "fairmonitor"
    spec = importlib.util.spec_from_file_location(
        alias, root / "__init__.py", submodule_search_locations=[str(root)])
    if spec is None or spec.loader is None:
        raise SystemExit(f"{root} is not a fairmonitor package")
    package = importlib.util.module_from_spec(spec)
    sys.modules[alias] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{alias}.report")


def paired(rows: int, windows: int, this: types.ModuleType, before: types.ModuleType) -> None:
    """Print both checkouts' added time over ``windows`` new windows, and their paired gap."""
    sides = {"this": (this.Window, this.evaluate_window),
             "before": (before.Window, before.evaluate_window)}
    for window_type, evaluate in sides.values():  # imports and first-call caches
        added_cpu(cost_window(rows, "scores", windows + 1, window_type), DEFAULT, evaluate)
    found: dict[str, list[float]] = {"this": [], "before": []}
    for seed in range(windows):
        order = list(sides) if seed % 2 == 0 else list(reversed(sides))
        for side in order:
            window_type, evaluate = sides[side]
            window = cost_window(rows, "scores", seed, window_type)
            found[side].append(added_cpu(window, DEFAULT, evaluate))
    diff = np.subtract(found["this"], found["before"]) * 1e3
    low, mid, high = np.percentile(diff, [25, 50, 75])
    print(f"\n== {rows:.0e} rows, {windows} new windows, each by both checkouts in turn "
          f"(CPU time a window's intervals add)")
    print(f"this checkout {statistics.median(found['this']) * 1e3:.1f} ms, BEFORE "
          f"{statistics.median(found['before']) * 1e3:.1f} ms (medians)")
    print(f"paired difference, this - BEFORE: median {mid:+.2f} ms, quartiles {low:+.2f} to "
          f"{high:+.2f} ms")
    print(f"INFO paired_difference_ms_{rows:.0e}: {mid:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the other checkout (kernels built)")
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--windows", type=int, default=40)
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; {os.cpu_count()} CPUs; "
          f"BEFORE {args.before.resolve()}")
    this = load(HERE.parent, "fairmonitor_this")
    before = load(args.before.resolve(), "fairmonitor_before")
    for rows in args.rows:
        paired(rows, args.windows, this, before)


if __name__ == "__main__":
    main()
