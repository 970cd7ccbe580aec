"""What a newcomer pays once: the first use in a fresh process, and (``--venv``) the install.

Default (and ``--quick``): the CPU seconds of a fresh interpreter evaluating one window with the
default metric set (2 attributes and their intersection, scores and labels, 10^4 rows) and
ApproxDist HFM, run twice in two fresh processes. The kernels are compiled at install (Cython,
``setup.py``), so the first process pays no compile: the two runs cost the same, and the
difference (the ``first_use_extra_cpu_s`` figure) is what a first use costs above a later
one. (With numba, the first run paid 25-37 s of compile; ``bench_cold_start.py`` has the
per-process detail.)

``--venv DIR`` also measures ``make demo`` from nothing: a fresh virtual environment in ``DIR``
(outside the repository), the package alone installed as the Makefile does (pip installs uv,
then ``uv pip install -e .``; ``--installer pip``: ``pip install --no-compile -e .``, as before
uv; no extras; needs the package index), its size after the install and after the demo's first
run, and the time of ``fairmonitor demo`` in it. The installers' caches are used as they are
(pip's and uv's, or ``UV_CACHE_DIR``): the run prints their size before the install, so a
figure says whether it was a warm-cache one.

Every run prints the machine (CPUs, model), its load (``/proc/loadavg``) and the date, so a
figure can be traced to its run. Usage::

    python benchmarks/bench_first_use.py [--quick] [--venv /tmp/demo-venv [--installer pip]]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WINDOW = """
import numpy as np
from fairmonitor import Window, evaluate_window
from fairmonitor.metrics import hfm
rng = np.random.default_rng(0)
n = 10_000
sex, race = rng.choice(["F", "M"], n), rng.choice(["a", "b", "c"], n)
score = rng.beta(2, 3, n)
label = (rng.random(n) < score).astype(int)
evaluate_window(Window({"sex": sex, "race": race}, y_score=score, y_true=label))
X = rng.random((2000, 4))
hfm(X, label[:2000], (score[:2000] > 0.5).astype(int), sensitive_features=sex[:2000],
    method="approx", rng=0)
"""


def machine() -> str:
    """CPUs, model, load and date of this run."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        load = Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        load = ["?"] * 3
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f"machine: {os.cpu_count()} CPUs, {model}, {platform.system()}; "
            f"load {' '.join(load)}; {now}")


def child_cpu(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, float]:
    """Run ``cmd``; its CPU seconds (user + system, children included) and wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), wall


def compile_cost() -> None:
    """The first fresh process's run against a second one's (Python's bytecode cache warm)."""
    with tempfile.TemporaryDirectory(prefix="fm-first-") as pycache:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": pycache,
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        cmd = [sys.executable, "-c", WINDOW]
        cold_cpu, cold_wall = child_cpu(cmd, env)
        warm_cpu, warm_wall = child_cpu(cmd, env)
    print(f"first process (empty bytecode cache): {cold_cpu:.2f} s CPU ({cold_wall:.1f} s wall)")
    print(f"second process:                        {warm_cpu:.2f} s CPU ({warm_wall:.1f} s wall)")
    print(f"TARGET first_use_cpu_s: {cold_cpu:.2f} (reported; numba's first use was 25-37)")
    print(f"TARGET first_use_extra_cpu_s: {cold_cpu - warm_cpu:.2f} (reported)")


def du(path: Path, flag: str = "-sh") -> str:
    """``du -sh`` of ``path`` (``flag="-sm"``: megabytes, as a bare number)."""
    out = subprocess.run(["du", flag, str(path)], capture_output=True, text=True, check=True)
    return out.stdout.split()[0]


def cache_state(env: dict[str, str]) -> str:
    """The sizes of pip's and uv's caches, as this run's installs find them."""
    home = Path(env.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    caches = {"pip": Path(env.get("PIP_CACHE_DIR", home / "pip")),
              "uv": Path(env.get("UV_CACHE_DIR", home / "uv"))}
    return ", ".join(f"{name} {du(path) if path.exists() else 'empty'} ({path})"
                     for name, path in caches.items())


def install(venv: Path, installer: str, env: dict[str, str]) -> None:
    """The package alone into the fresh ``venv``, editable, as the Makefile installs it."""
    python = str(venv / "bin" / "python")
    if installer == "pip":  # before uv: no byte-compiling (pip would compile ~240 MB)
        pip = [python, "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True, env=env)
        subprocess.run([*pip, "--no-compile", "-e", str(ROOT)], check=True, env=env)
        return
    subprocess.run([python, "-m", "pip", "install", "--quiet", "uv>=0.13,<0.14"], check=True,
                   env=env)
    subprocess.run([str(venv / "bin" / "uv"), "pip", "install", "--quiet", "--python", python,
                    "-e", str(ROOT)], check=True, env=env)


def demo_install(venv: Path, installer: str = "uv") -> None:
    """A fresh venv with the package alone, its size, and the demo's time in it."""
    if venv.resolve().is_relative_to(ROOT):
        raise SystemExit("--venv must be outside the repository")
    shutil.rmtree(venv, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    print(f"installer: {installer}; caches before the install: {cache_state(env)}")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install(venv, installer, env)
    seconds = time.perf_counter() - start
    print(f"demo venv: install {seconds:.0f} s wall, size {du(venv)}")
    with tempfile.TemporaryDirectory(prefix="fm-demo-") as work:
        _, wall = child_cpu([str(venv / "bin" / "fairmonitor"), "demo", "--workdir", work],
                            env, cwd=Path(work))
    print(f"demo: {wall:.0f} s wall after the install; install + demo {seconds + wall:.0f} s")
    print(f"demo venv after the demo's first run: {du(venv)}")
    print(f"TARGET demo_install_wall_s: {seconds:.0f} (reported; {installer})")
    print(f"TARGET demo_run_wall_s: {wall:.0f} (reported)")
    print(f"TARGET install_plus_demo_wall_s: {seconds + wall:.0f} (target <= 180) "
          f"{'OK' if seconds + wall <= 180 else 'MISSED'}")
    size = int(du(venv, "-sm"))
    print(f"TARGET demo_venv_mb: {size} (target <= 800) {'OK' if size <= 800 else 'MISSED'}")
    mlflow_alone(venv, env)


def mlflow_alone(venv: Path, env: dict[str, str]) -> None:
    """The base install's weight on top of MLflow's own: a venv of the same mlflow alone."""
    version = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import importlib.metadata as m; print(m.version('mlflow'))"],
                             capture_output=True, text=True, check=True, env=env).stdout.strip()
    alone = venv.with_name(venv.name + "-mlflow")
    shutil.rmtree(alone, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(alone)], check=True)
    python = str(alone / "bin" / "python")
    if (venv / "bin" / "uv").exists():  # the same installer as the demo venv's
        subprocess.run([str(venv / "bin" / "uv"), "pip", "install", "--quiet", "--python", python,
                        f"mlflow=={version}"], check=True, env=env)
    else:
        pip = [python, "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True, env=env)
        subprocess.run([*pip, "--no-compile", f"mlflow=={version}"], check=True, env=env)
    ours, theirs = (int(du(p, "-sm")) for p in (venv, alone))
    print(f"mlflow {version} alone: {theirs} MB; the demo venv (after its run): {ours} MB")
    print(f"TARGET base_install_above_mlflow_mb: {ours - theirs} (target <= 150)")
    shutil.rmtree(alone, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Print the machine line, then the figures asked for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="same as the default")
    parser.add_argument("--venv", type=Path, help="also measure a fresh demo venv here")
    parser.add_argument("--installer", choices=("uv", "pip"), default="uv",
                        help="how --venv installs the package (uv: as the Makefile)")
    args = parser.parse_args(argv)
    print(machine())
    compile_cost()
    if args.venv is not None:
        demo_install(args.venv, args.installer)
        print(machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
