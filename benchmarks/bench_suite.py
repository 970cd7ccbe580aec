"""How long the whole test suite takes: the figure CONTRIBUTING.md and getting started quote.

Runs the suite exactly as ``make test`` does (the Makefile's ``test:`` recipe, read from the
Makefile so the two cannot drift apart) with this interpreter, from the repository root, and
prints its wall time, the CPU time of pytest and everything it started (servers, Spark, the
browser), and pytest's closing line. Record it with ``python benchmarks/run_all.py --record
--only bench_suite.py`` on a quiet machine: the suite's time is mostly CPU, so a loaded
machine inflates it in proportion to the load (the header states it).

The installs (``.venv``, the Debian packages ``.ci/run`` adds) are not timed here:
``bench_first_use.py`` measures the demo's.

Usage: ``python benchmarks/bench_suite.py``.
"""

from __future__ import annotations

import os
import re
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_test_command() -> list[str]:
    """The pytest command of the Makefile's ``test:`` recipe, run with this interpreter."""
    recipe = ROOT.joinpath("Makefile").read_text().split("\ntest:", 1)[1].splitlines()
    line = next(text.strip() for text in recipe[1:] if text.startswith("\t"))
    words = shlex.split(line)
    if words[1:3] != ["-m", "pytest"]:
        raise SystemExit(f"the Makefile's test recipe is not a pytest run: {line!r}")
    # make's shell expands the path patterns (docs/*.md); an option's value stays as written
    paths = [sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(w))
             if "*" in w and not w.startswith("-") else [w] for w in words[1:]]
    return [sys.executable, *(w for group in paths for w in group)]


def main() -> None:
    command = make_test_command()
    print("command:", shlex.join(["python", *command[1:]]))
    print("loadavg", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    closing = [line for line in proc.stdout.splitlines()
               if re.search(r"\d+ (passed|failed)", line)]
    print("pytest:", closing[-1] if closing else "(no closing line)")
    print("loadavg", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(f"TARGET suite_wall_s: {wall:.0f} (target <= 600)"
          f" {'OK' if wall <= 600 else 'MISSED'}")
    print(f"TARGET suite_cpu_s: {cpu:.0f} (reported; every process the suite started)")
    if proc.returncode != 0:
        print(proc.stdout[-3000:])
        raise SystemExit(f"the suite failed (exit {proc.returncode}): not a figure to record")


if __name__ == "__main__":
    main()
