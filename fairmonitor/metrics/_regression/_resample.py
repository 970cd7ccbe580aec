"""Interval and chance level of a regression metric: stratified bootstrap, permutation null.

A regression metric is a statistic of the kept rows' group codes and weights,
``statistic(weight, codes) -> float`` (the values themselves are fixed). Both resamplings
change only those two arrays, so no draw sorts or copies the values again:

- **interval**: the percentile interval of a *stratified* bootstrap: each group's rows are
  redrawn with replacement at the group's own size (a multiplicity per row, multiplied into
  the weights), so every draw keeps the window's group sizes. A gap that is a maximum over
  groups is biased upwards on small groups, and so is its bootstrap distribution: read the
  interval beside the chance level.
- **chance level**: the mean of the statistic over random permutations of the group codes,
  i.e. what a model whose groups share one distribution reads at these group sizes (the same
  definition as :class:`~fairmonitor.metrics.shared.Interval`'s ``chance`` for the
  classification metrics).

Cost: ``2 * n_resamples`` evaluations of the statistic, each O(rows) (bincounts and cumulative
sums on arrays sorted once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._intervals import Interval

#: Default number of bootstrap draws and of permutations.
N_RESAMPLES = 200
METHOD = "stratified bootstrap (percentile) per group; chance: permutation of group labels"

Statistic = Callable[[NDArray[np.float64], NDArray[np.intp]], float]


def _multiplicities(codes: NDArray[np.intp], n_groups: int, rng: np.random.Generator
                    ) -> Callable[[], NDArray[np.float64]]:
    """Return a function drawing, per row, how often a stratified bootstrap picks it."""
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=n_groups)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    sorted_codes = codes[order]
    row_start, row_size = starts[sorted_codes], sizes[sorted_codes]
    n = codes.size

    def draw() -> NDArray[np.float64]:
        picked = row_start + (rng.random(n) * row_size).astype(np.intp)
        out = np.empty(n)
        out[order] = np.bincount(picked, minlength=n)
        return out

    return draw


def resample_interval(statistic: Statistic, codes: NDArray[np.intp], n_groups: int,
                      weight: NDArray[np.float64], *, level: float,
                      n_resamples: int = N_RESAMPLES, random_state: Any = None) -> Interval:
    """Return the bootstrap interval and the permutation chance level of ``statistic``.

    Parameters
    ----------
    statistic : callable
        ``statistic(weight, codes) -> float`` on the kept rows.
    codes : ndarray of int
        Group code of each kept row, ``0..n_groups-1``.
    weight : ndarray of float
        Row weights (``sample_weight`` or ones).
    level : float
        Confidence level in (0, 1).
    n_resamples : int, default=200
        Bootstrap draws, and as many permutations.
    random_state : numpy.random.Generator, int or None

    Returns
    -------
    interval : Interval
        NaN bounds with the reason when fewer than half the draws give a value.

    Examples
    --------
    The gap of group means, on two groups of 50 rows whose means differ by 1:

    >>> codes = np.repeat([0, 1], 50)
    >>> values = np.r_[np.linspace(0, 1, 50), np.linspace(1, 2, 50)]
    >>> def gap(w, c):
    ...     m = np.bincount(c, w * values) / np.bincount(c, w)
    ...     return float(m.max() - m.min())
    >>> iv = resample_interval(gap, codes, 2, np.ones(100), level=0.95, random_state=0)
    >>> bool(iv.lower < 1.0 < iv.upper), bool(iv.chance < 0.5)
    (True, True)
    """
    if not 0.0 < level < 1.0:
        from ...exceptions import InvalidInputError

        raise InvalidInputError(f"confidence_level must lie in (0, 1); got {level!r}")
    rng = np.random.default_rng(random_state)
    draw = _multiplicities(codes, n_groups, rng)
    boot = np.array([statistic(weight * draw(), codes) for _ in range(n_resamples)])
    null = np.array([statistic(weight, rng.permutation(codes)) for _ in range(n_resamples)])
    boot = boot[np.isfinite(boot)]
    null = null[np.isfinite(null)]
    nan = float("nan")
    if boot.size < n_resamples / 2:
        return Interval(nan, nan, nan, METHOD, "fewer than half of the bootstrap draws are "
                                                "defined")
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    chance = float(null.mean()) if null.size else nan
    return Interval(float(lo), float(hi), chance, METHOD)
