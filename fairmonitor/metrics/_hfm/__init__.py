"""HFM (paper 004): set distances between the groups of several multi-valued attributes.

``hfm`` is the metric; ``exact`` computes every cross-group nearest distance (blocked GEMM),
``approx`` is ApproxDist/ExtendDist (Algs. 1-3), its scan compiled in ``fairmonitor._kernels.hfm``.
"""

from .hfm import HFMAttribute, HFMResult, hfm

__all__ = ["HFMAttribute", "HFMResult", "hfm"]
