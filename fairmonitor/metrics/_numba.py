"""Alias of :func:`fairmonitor._kernels.compiled` for ``_intervals_compiled.py``.

The compile policy lives in :mod:`fairmonitor._kernels`; this name stays until the interval
kernels move there too.
"""

from __future__ import annotations

from .._kernels import compiled

__all__ = ["compiled"]
