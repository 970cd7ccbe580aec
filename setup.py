"""Build fairmonitor's compiled kernels: every ``fairmonitor/_kernels/*.pyx`` becomes one module.

Everything else about the package is declared in ``pyproject.toml``; this file exists only
because extension modules are declared in code. The kernels are compiled ahead of time, at
install (``pip install .``, ``pip install -e .``, or ``python setup.py build_ext --inplace``
in a checkout), with the machine's C compiler, as scikit-learn builds its ``_*_fast`` engines:
no user's first window waits for a compiler (``ARCHITECTURE.md``, "Compiled code").
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent

# No -ffast-math: the kernels keep IEEE results (NaN, inf, summation order) their tests compare
# with numpy's. cdivision: a float division by zero gives IEEE's inf/NaN instead of raising.
DIRECTIVES = {
    "language_level": "3",
    "boundscheck": False,
    "wraparound": False,
    "initializedcheck": False,
    "cdivision": True,
    "embedsignature": True,
}


# No debug information in the built modules: with it, groups' module is 4.2 MB instead of 0.7.
COMPILE_ARGS = [] if sys.platform == "win32" else ["-g0"]


def kernel_extensions() -> list[Extension]:
    """One extension per ``.pyx`` under ``fairmonitor/_kernels``, named by its path."""
    return [
        Extension(
            ".".join(path.with_suffix("").relative_to(HERE).parts),
            [str(path.relative_to(HERE))],
            include_dirs=[numpy.get_include()],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            extra_compile_args=COMPILE_ARGS,
        )
        for path in sorted((HERE / "fairmonitor" / "_kernels").glob("*.pyx"))
    ]


setup(ext_modules=cythonize(kernel_extensions(), compiler_directives=DIRECTIVES, quiet=True))
