"""Robustness ratio (Small et al., paper 003): how fairness moves when inputs carry noise.

``ratio`` runs the protocol, ``noise`` draws the noise, ``inputs`` checks and prepares the
model's inputs, ``stats`` turns per-level gaps into ratios and summaries.
"""

from .noise import ConstantColumnWarning
from .ratio import DEFAULT_LEVELS, PAPER_LEVELS, robustness_ratio
from .result import RobustnessResult

__all__ = [
    "DEFAULT_LEVELS", "PAPER_LEVELS", "ConstantColumnWarning", "RobustnessResult",
    "robustness_ratio",
]
