"""Alias of :mod:`fairmonitor._kernels.madd` for ``_intervals_compiled.py`` (its tree sums).

MADD's kernels live in :mod:`fairmonitor._kernels.madd`; this name stays until the interval
kernels move there too.
"""

from __future__ import annotations

from ..._kernels.madd import pairwise_leaf as _leaf
from ..._kernels.madd import pairwise_walk as _walk

__all__ = ["_leaf", "_walk"]
