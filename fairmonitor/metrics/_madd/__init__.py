"""MADD (Verger et al., paper 000): the distance between the groups' score histograms.

``madd`` is the metric and its result types; ``bandwidth`` is the ``"auto"`` bandwidth search
(Algorithm 1) and the paper's optimal bandwidth order :func:`madd_h_sup`.
"""

from .bandwidth import madd_h_sup
from .madd import MADDPair, MADDResult, madd

__all__ = ["MADDPair", "MADDResult", "madd", "madd_h_sup"]
