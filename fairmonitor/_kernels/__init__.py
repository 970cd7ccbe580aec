"""The one home of fairmonitor's compiled code (numba), and its one compile policy.

One module per topic, each behind the Python functions that call it (the dispatchers stay in
their topic's package and import the kernels inside the function that needs them, so ``import
fairmonitor`` does not load numba; a test keeps it that way):

- :mod:`.groups`: group encoding of long columns (identity codes, intersections, layouts),
  called by :mod:`fairmonitor.metrics.groups` and :mod:`fairmonitor.summaries.core`;
- :mod:`.madd`: MADD's ``"auto"`` search and fixed-bandwidth histograms, and numpy's pairwise
  summation that the other kernels share (:func:`.madd.pairwise_sum`);
- :mod:`.abcc`: ABCC's W1 pass over two sorted groups, ABPC's binning and bandwidth rule;
- :mod:`.cells`: making, merging and evaluating the cells of :mod:`fairmonitor.summaries`;
- :mod:`.hfm`: HFM ApproxDist's scan (AcceleDist).

(The score bootstrap's and rate intervals' kernels, ``metrics/_intervals_compiled.py``, use
this policy through the ``metrics/_numba.py`` alias and belong here as ``intervals.py``.)

Every kernel is decorated with :func:`compiled`. ``fairmonitor warm``
(:mod:`fairmonitor.commands.warm`) fills the on-disk cache once per install or image, so no
user's first window waits for a compile (``ARCHITECTURE.md``, "Compiled code").
"""

from __future__ import annotations

from typing import Any

import numba


def compiled(func: Any = None, **options: Any) -> Any:
    """``numba.njit(cache=True, nogil=True, **options)``, uncached where no cache can be written.

    No fast-math: LLVM then neither reassociates nor fuses a multiply-add, so the kernels keep
    the floating-point results their tests compare with numpy's. ``nogil`` lets threads (HFM's
    ApproxDist) run kernels in parallel. The machine code is cached on disk (compiled once per
    install, or by ``fairmonitor warm``); numba refuses ``cache=True`` at decoration when it
    finds no writable cache location (e.g. a read-only install run as another user), and the
    kernel is then compiled once per process. Used bare (``@compiled``) or with options
    (``@compiled(inline="always")``).
    """
    def decorate(function: Any) -> Any:
        try:
            return numba.njit(cache=True, nogil=True, **options)(function)
        except RuntimeError:  # "cannot cache function ...: no locator available for file ..."
            return numba.njit(nogil=True, **options)(function)

    return decorate if func is None else decorate(func)
