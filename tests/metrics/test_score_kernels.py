"""The score metrics' kernels (MADD, ABCC/ABPC, HFM) are compiled extensions (issue 27).

They are built ahead of time from ``fairmonitor/_kernels/*.pyx`` by ``setup.py``: importing one
loads a shared library, never numba (whose compile and cache load the issue removes).
"""

from __future__ import annotations

import doctest
import importlib
import importlib.machinery
import subprocess
import sys

import pytest

KERNELS = ["fairmonitor._kernels.abcc", "fairmonitor._kernels.hfm", "fairmonitor._kernels.madd"]


@pytest.mark.parametrize("name", KERNELS)
def test_kernel_is_a_compiled_extension(name):
    module = importlib.import_module(name)
    assert module.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    assert isinstance(module.__loader__, importlib.machinery.ExtensionFileLoader)


@pytest.mark.parametrize("name", KERNELS)
def test_kernel_examples_run(name):
    # pytest's --doctest-modules reads .py files only: run the extensions' examples here
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0


# The metrics on a few hundred rows (no long-column group encoding), in a process where numba
# cannot be imported. The package's __init__ is stood in for, so that the check covers the
# three modules and their metrics whatever the rest of _kernels imports.
_NO_NUMBA = """
import sys, types
from pathlib import Path
import fairmonitor
sys.modules["numba"] = None  # any import of numba raises ImportError
package = types.ModuleType("fairmonitor._kernels")
package.__path__ = [str(Path(fairmonitor.__file__).parent / "_kernels")]
sys.modules["fairmonitor._kernels"] = package
import numpy as np
from fairmonitor.metrics import abcc, abpc, hfm, madd
rng = np.random.default_rng(0)
y, s = rng.random(600), rng.integers(0, 3, 600)
values = [madd(y, sensitive_features=s).value, madd(y, sensitive_features=s, n_bins=20).value,
          abcc(y, sensitive_features=s), abpc(y, sensitive_features=s)]
X = {"a": rng.normal(size=600), "b": rng.integers(0, 3, 600)}
labels = rng.integers(0, 2, 600)
values.append(hfm(X, labels, labels[::-1], sensitive_features={"s": s}, method="approx",
                  m1=2, random_state=0).per_attribute["s"].distance)
mine = {"fairmonitor._kernels." + k for k in ("abcc", "hfm", "madd")}
loaded = sorted(m for m, module in sys.modules.items() if "numba" in m and module is not None)
print(all(np.isfinite(values)), mine <= set(sys.modules), loaded)
"""


def test_score_metrics_run_without_numba():
    run = subprocess.run([sys.executable, "-c", _NO_NUMBA], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["True", "True", "[]"]  # values, the three kernels, no numba
