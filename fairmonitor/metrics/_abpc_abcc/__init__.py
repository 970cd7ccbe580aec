"""ABPC and ABCC (Han et al., paper 001): distribution-level demographic parity.

``areas`` holds the two estimators (ABCC exactly, as the 1-D Wasserstein-1 distance by sorting;
ABPC on reflected kernel density estimates), ``kde`` the binned FFT density they share.
"""

from .areas import abcc, abpc

__all__ = ["abcc", "abpc"]
