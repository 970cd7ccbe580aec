"""The one way fairmonitor compiles a kernel with numba.

Every compiled module (:mod:`._groups_compiled`, :mod:`._madd.compiled`,
:mod:`._abpc_abcc.compiled`, :mod:`._intervals_compiled`,
:mod:`fairmonitor.summaries._compiled`) decorates its kernels
with :func:`compiled`, and each is imported only when a kernel is needed, so ``import
fairmonitor`` does not load numba (a test keeps it that way). HFM's scan
(:mod:`._hfm.accele`) passes its own options the same way.
"""

from __future__ import annotations

from typing import Any

import numba


def compiled(func: Any) -> Any:
    """``numba.njit(cache=True, nogil=True)``, or without the cache where none can be written.

    No fast-math: the kernels give numpy's bits (LLVM then neither reassociates nor fuses a
    multiply-add). The machine code is cached on disk (compiled once per install); numba
    refuses ``cache=True`` at decoration when it finds no writable cache location (e.g. a
    read-only install run as another user), and the kernel is then compiled once per process.
    """
    try:
        return numba.njit(cache=True, nogil=True)(func)
    except RuntimeError:  # no writable cache location: compile once per process instead
        return numba.njit(nogil=True)(func)
