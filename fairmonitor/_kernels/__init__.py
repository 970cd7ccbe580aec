"""The one home of fairmonitor's compiled code: Cython extension modules built at install.

One module per topic, each behind the Python functions that call it (the dispatchers stay in
their topic's package and import the kernels inside the function that needs them):

- :mod:`.groups`: group encoding (identity codes, intersections, layouts, outcome counts),
  called by :mod:`fairmonitor.utils.groups` and :mod:`fairmonitor.summaries.core`;
- :mod:`.cells`: making, merging and evaluating the cells of :mod:`fairmonitor.summaries`;
- :mod:`.madd`: MADD's ``"auto"`` search and fixed-bandwidth histograms;
- :mod:`.abcc`: ABCC's W1 pass over two sorted groups, ABPC's binning and bandwidth rule;
- :mod:`.hfm`: HFM ApproxDist's scan (AcceleDist);
- :mod:`.intervals`: the score bootstrap's Poisson draws, curves, errors and pair sums, the
  cells' fine histogram, and the rate intervals' joint maxima.
- :mod:`.regression`: the regression intervals' (group, bin) cell draws (numpy's Poisson
  sampler, the same numbers) and each draw's KS and Wasserstein-1.

**Policy** (``ARCHITECTURE.md``, "Compiled code"). A kernel is a ``.pyx`` file here,
compiled ahead of time by ``setup.py`` with the machine's C compiler into an extension module
of the same dotted name (``fairmonitor/_kernels/groups.pyx`` -> ``fairmonitor._kernels.
groups``), at ``pip install .`` / ``pip install -e .``, or ``python setup.py build_ext
--inplace`` in a checkout: nothing compiles when a user calls it, and loading one costs
about a millisecond. The directives (``setup.py``): no bounds or wraparound checks, C
division, no fast-math (IEEE results, NaN and inf kept). Kernels take typed memoryviews of
the dtypes their callers pass (fused types where several), run their loops without the GIL,
and check what would make them write out of bounds. One implementation per computation:
short and long inputs take the same kernel; numpy formulations are the tests' oracles.

A checkout that was not built raises an :class:`ImportError` naming the commands that build
the kernels (:class:`_MissingKernel`), instead of Python's bare "No module named".
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from typing import Any

#: What builds the kernels, as the error of a missing one says it.
BUILD_HINT = ("run `pip install -e .` (or `python setup.py build_ext --inplace`) in the "
              "checkout; a C compiler and Cython are needed")


class _MissingKernel(importlib.abc.MetaPathFinder):
    """Turn the import of a kernel whose ``.pyx`` is here but was not built into a clear error.

    Consulted last (after every finder that could load the extension), for
    ``fairmonitor._kernels.<name>`` only, and only where ``<name>.pyx`` lies in ``folder``: a
    checkout run without ``pip install -e .``.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        """Raise ImportError for an unbuilt kernel; None (not mine) for anything else."""
        package, _, name = fullname.rpartition(".")
        if package == __name__ and (self.folder / f"{name}.pyx").is_file():
            suffixes = ", ".join(importlib.machinery.EXTENSION_SUFFIXES[:1])
            raise ImportError(
                f"fairmonitor's compiled kernel {fullname} is not built (no {name}{suffixes} "
                f"beside {name}.pyx in {self.folder}): {BUILD_HINT}", name=fullname)
        return None


if not any(isinstance(f, _MissingKernel) for f in sys.meta_path):
    sys.meta_path.append(_MissingKernel(Path(__file__).parent))

