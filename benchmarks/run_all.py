"""Run every ``bench_*.py`` in this folder and collect their ``TARGET`` lines.

Each benchmark measures ratios against a reference run in the same process (never absolute
times against a fixed budget), so the figures are comparable across machines.
Usage: ``python benchmarks/run_all.py [--quick]``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    targets: list[str] = []
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"=== {script.name}", flush=True)
        proc = subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True)
        print(proc.stdout, end="")
        if proc.returncode != 0:
            failed.append(script.name)
            print(proc.stderr, end="")
        targets += [line for line in proc.stdout.splitlines() if line.startswith("TARGET")]
    print("\n=== summary")
    print("\n".join(targets))
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
