"""Run the ``bench_*.py`` scripts in this folder and collect their ``TARGET`` lines.

Each benchmark measures ratios against a reference run in the same process (never absolute
times against a fixed budget), so the figures are comparable across machines.

Usage::

    python benchmarks/run_all.py [--record] [--only bench_madd.py ...] [script arguments]

``--record`` keeps each script's output in ``benchmarks/results/<script>.txt`` under a header
that states the command, the date, the machine and the load at its start and end; the
documentation's benchmarks page is generated from those files (``docs/_scripts/
benchmark_results.py``), so every figure it shows is a script's output with its conditions.
``--only`` runs the named scripts alone (the others' recorded results are kept).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def cpu_model() -> str:
    """The CPU's model name (Linux's ``/proc/cpuinfo``), or the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine() -> str:
    """One line saying where a run happened: CPU, core count, OS and Python."""
    return (f"{cpu_model()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def load() -> str:
    """The 1, 5 and 15-minute load averages."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def record(script: Path, arguments: list[str], output: str, started: dict[str, str]) -> Path:
    """Write one run's output under the header the docs page reads, and return its path."""
    RESULTS.mkdir(exist_ok=True)
    header = [
        f"# command: python benchmarks/{script.name} {' '.join(arguments)}".rstrip(),
        f"# date: {started['date']}",
        f"# machine: {machine()}",
        f"# load: {started['load']} at the start, {load()} at the end",
        f"# wall: {time.monotonic() - float(started['clock']):.0f} s",
    ]
    path = RESULTS / f"{script.stem}.txt"
    path.write_text("\n".join(header) + "\n" + output, encoding="utf-8")
    return path


def run(script: Path, arguments: list[str], keep: bool) -> tuple[int, str]:
    """Run one script; return its exit status and its standard output (recorded if ``keep``)."""
    started = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": load(),
               "clock": str(time.monotonic())}
    proc = subprocess.run([sys.executable, str(script), *arguments], capture_output=True,
                          text=True)
    print(proc.stdout, end="")
    if proc.returncode != 0:
        print(proc.stderr, end="")
    elif keep:
        print(f"recorded in {record(script, arguments, proc.stdout, started)}")
    return proc.returncode, proc.stdout


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true",
                        help="keep each script's output in benchmarks/results/")
    parser.add_argument("--only", nargs="+", metavar="SCRIPT", default=None,
                        help="run only these bench_*.py scripts")
    options, arguments = parser.parse_known_args(argv)
    scripts = ([HERE / name for name in options.only] if options.only
               else sorted(HERE.glob("bench_*.py")))
    targets: list[str] = []
    failed = []
    for script in scripts:
        print(f"=== {script.name}", flush=True)
        status, output = run(script, arguments, options.record)
        if status != 0:
            failed.append(script.name)
        targets += [line for line in output.splitlines() if line.startswith("TARGET")]
    print("\n=== summary")
    print("\n".join(targets))
    if failed:
        print(f"failed (not recorded): {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
