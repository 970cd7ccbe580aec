"""Build fairmonitor's compiled kernels: every ``fairmonitor/_kernels/*.pyx`` becomes one module.

Everything else about the package is declared in ``pyproject.toml``; this file exists only
because extension modules are declared in code. The kernels are compiled ahead of time, at
install (``pip install .``, ``pip install -e .``, or ``python setup.py build_ext --inplace``
in a checkout), with the machine's C compiler, as scikit-learn builds its ``_*_fast`` engines:
no user's first window waits for a compiler (``ARCHITECTURE.md``, "Compiled code").
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

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
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            extra_compile_args=COMPILE_ARGS,
        )
        for path in sorted((HERE / "fairmonitor" / "_kernels").glob("*.pyx"))
    ]


class BuildKernels(build_ext):
    """Translate the ``.pyx`` to C when the extensions are built, on every core.

    An install runs this file three times (build requirements, metadata, build); translating
    at import cost each run Cython's full pass, while only the build needs the C. Cython
    translates the modules in parallel, and the compiler compiles them in parallel.
    """

    def finalize_options(self) -> None:
        """Compile as many extensions at once as there are cores, unless told (``-j``)."""
        super().finalize_options()
        self.parallel = self.parallel or os.cpu_count() or 1

    def run(self) -> None:
        """Translate the extensions' ``.pyx`` sources to C, then compile them."""
        import numpy
        from Cython.Build import cythonize

        translated = {ext.name: ext.sources for ext in cythonize(
            self.extensions, compiler_directives=DIRECTIVES, quiet=True,
            nthreads=os.cpu_count() or 1)}
        # the same Extension objects, which setuptools has prepared, now on the C sources
        for ext in self.extensions:
            ext.sources = translated[ext.name]
            ext.include_dirs.append(numpy.get_include())
        super().run()


setup(ext_modules=kernel_extensions(), cmdclass={"build_ext": BuildKernels})
