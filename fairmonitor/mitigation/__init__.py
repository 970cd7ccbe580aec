"""Mitigation: post-processing that reduces a measured unfairness.

:class:`MADDPostProcessor` is the MADD paper's fix (paper 000, §5): each group's scores are
moved towards a common distribution by quantile mapping, as far as ``theta`` asks.
"""

from .madd_postprocessor import MADDPostProcessor, NotFittedError

__all__ = ["MADDPostProcessor", "NotFittedError"]
