"""ABPC and ABCC (Han et al., paper 001): distribution-level demographic parity.

``areas`` holds the two estimators (ABCC exactly, as the 1-D Wasserstein-1 distance by sorting;
ABPC on reflected kernel density estimates), ``kde`` the binned FFT density ABPC and the
summaries share; their compiled kernels (ABCC's pass over a pair, the binning) are
:mod:`fairmonitor._kernels.abcc`.
"""

from .areas import abcc, abpc

__all__ = ["abcc", "abpc"]
