"""``fairmonitor warm``: check that every compiled kernel is built and loads.

The kernels are Cython extension modules compiled at install (``setup.py``), so there is no
cache to fill any more: this command imports each one (``fairmonitor/_kernels/``), prints
what loading them cost, and fails, naming the command that builds them, when one is missing
(a checkout run without ``pip install -e .``) or does not load (built for another Python).
The Docker image runs it at build as the runtime user: an image whose kernels did not build
fails there, not at its first window (``ARCHITECTURE.md``, "Compiled code").

Exit 0 when every kernel loads, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import pkgutil
import sys
import time
from pathlib import Path

__all__ = ["add_arguments", "kernel_names", "run", "warm"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``warm`` options (none)."""


def kernel_names() -> list[str]:
    """Every kernel module's name: the extensions installed, and any ``.pyx`` source beside.

    A wheel ships the extensions; a checkout has the sources, built or not, so a kernel whose
    build is missing is still listed (and reported).

    >>> {"groups", "cells"} <= set(kernel_names())
    True
    """
    from .. import _kernels

    folder = Path(_kernels.__file__).parent
    names = {path.stem for path in folder.glob("*.pyx")}
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    names |= {info.name for info in pkgutil.iter_modules([str(folder)])
              if any(p.name.startswith(info.name + ".") and p.name.endswith(suffixes)
                     for p in folder.iterdir())}
    return sorted(names)


def warm() -> tuple[float, dict[str, str]]:
    """Import every kernel; return the CPU seconds it took and the error of each that failed."""
    start = time.process_time()
    failed = {}
    for name in kernel_names():
        try:
            importlib.import_module(f"fairmonitor._kernels.{name}")
        except ImportError as error:
            failed[name] = str(error)
    return time.process_time() - start, failed


def run(args: argparse.Namespace) -> int:
    """Check the kernels; print what loading them cost, or what is missing and how to build."""
    from .._kernels import BUILD_HINT

    seconds, failed = warm()
    names = kernel_names()
    if failed:
        for name, error in failed.items():
            print(f"kernel {name}: {error}", file=sys.stderr)
        print(f"{len(failed)} of {len(names)} compiled kernels do not load: {BUILD_HINT}",
              file=sys.stderr)
        return 1
    print(f"{len(names)} compiled kernels load ({', '.join(names)}) in {seconds:.3f} s of CPU")
    return 0
