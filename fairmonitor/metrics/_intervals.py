"""Confidence intervals and chance levels of between-group gaps, from per-group statistics.

Why this shape: every gap metric is ``max over pairs of groups of |something_i - something_j|``.
That function is not smooth where two pairs tie for the maximum or where a pair's difference
is 0 (a fair model sits exactly there), so neither a Wald interval nor a percentile bootstrap
covers the truth at the nominal rate: with five equal groups the estimate is biased upwards by
~2.5 standard errors and a percentile interval almost never contains 0. We follow Fang &
Santos (2019, "Inference on directionally differentiable functions"): the estimation error
``value_hat - value`` behaves like the *directional derivative* of the max-abs map applied to
the per-group noise. The derivative is linear (``sign(d) h``) for a pair whose difference is
clearly non-zero and ``|h|`` for one within ``KAPPA`` standard errors of 0; the max is taken
over the pairs within ``KAPPA`` standard errors of the largest. The interval is symmetric,
``value_hat +- q`` with ``q`` the ``level`` quantile of the absolute derivative, so it covers
at the nominal rate both at parity (where it is the folded two-sided interval) and far from
it (where it is the Wald interval of the worst pair); near ties it errs on the wide side.

The noise is drawn from per-group sufficient statistics only, never from rows, so the cost is
O(groups x bins x draws) whatever the window's size, and the same code serves window
summaries merged from many batches:

- means (the calibration gap): Gaussian draws with the given variances. (Rate gaps and
  ratios have score-type intervals of their own: :mod:`._rate_intervals`.)
- score distributions (ABCC, ABPC, MADD's chance level): a Poisson bootstrap of per-group
  score histograms, in :mod:`._score_intervals`.

This module holds what they share (:class:`Interval`, :data:`KAPPA`, the fixed seed, the
kernels' handle, a fast quantile) and the means' interval and the Wald interval.

Pure numpy (layer 1). Draws use a fixed seed by default so that a window's interval does not
jitter from one evaluation to the next.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Interval", "KAPPA", "N_DRAWS", "mean_gap_interval", "wald_interval"]

#: Standard errors within which a pair's difference counts as "possibly 0" and a pair as
#: "possibly the largest". Large enough that with five equal groups every pair qualifies
#: (the largest of ten pair z-scores stays below ~3 in 95% of windows); a pair further away
#: than this is treated as settled. A larger value only widens intervals near ties.
KAPPA = 3.0
#: Draws of the per-group noise; the Monte Carlo error of a 95% bound is ~1% of its width.
N_DRAWS = 2000
_SEED = 20261123
#: Beyond this many pairs near the largest the derivative is taken over the pairs that can
#: reach it (the score intervals' ``_candidates``), or folded over their groups (means).
MAX_PAIRS = 64
#: Rates need no histogram per group: their intervals scale to more groups.
MAX_RATE_GROUPS = 2048


@dataclass(frozen=True, slots=True)
class Interval:
    """A gap's confidence interval and its chance level.

    Attributes
    ----------
    lower, upper : float
        The bounds (NaN with ``reason`` when undefined).
    chance : float
        Mean of the estimator when every group shares one distribution, at these group sizes:
        what a perfectly fair model reads on such a window (the small-sample floor).
    method : str
        How the interval was computed.
    reason : str or None
        Why the bounds are NaN.
    """

    lower: float
    upper: float
    chance: float
    method: str
    reason: str | None = None


def _undefined(method: str, reason: str) -> Interval:
    return Interval(float("nan"), float("nan"), float("nan"), method, reason)


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        from .._validation import InvalidInputError

        raise InvalidInputError(f"`level` must be in (0, 1), e.g. 0.95; got {level!r}.")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def _quantile(values: NDArray[np.float64], q: float) -> float:
    """``np.quantile(values, q)`` of a 1-D array (its linear method, the same number).

    One partition at the two neighbours, then numpy's interpolation (``_lerp``: from the
    upper neighbour when the weight is at least a half); NaN if any value is. Without
    ``np.quantile``'s set-up (~40 us a call, ~40 calls a window).

    >>> bool(_quantile(np.array([3.0, 1.0, 2.0, 4.0]), 0.975) == np.quantile([3, 1, 2, 4], 0.975))
    True
    """
    n = values.size
    virtual = (n - 1) * q
    lo = min(max(math.floor(virtual), 0), n - 1)
    hi = min(lo + 1, n - 1)
    part = np.partition(values, [lo, hi, n - 1] if hi < n - 1 else [lo, hi])
    if math.isnan(part[n - 1]):  # NaN sorts last
        return float("nan")
    t = virtual - lo
    below, above = part[lo], part[hi]
    diff = above - below
    return float(above - diff * (1 - t) if t >= 0.5 else below + diff * t)


def _by_column(values: NDArray[np.floating]) -> NDArray[np.floating]:
    """Return a (draws, few) array's transpose, contiguous: its rows' max/min down the columns.

    ``_by_column(v).max(axis=0)`` is ``v.max(axis=1)``, value for value (a max and a min are
    exact in any order), without numpy's step per row along a short last axis (~100 us for
    2,000 draws of 10 groups against ~10 us).

    >>> cols = _by_column(np.array([[1.0, 3.0, 2.0], [0.5, -1.0, 4.0]]))
    >>> cols.max(axis=0).tolist(), cols.min(axis=0).tolist()
    ([3.0, 4.0], [1.0, -1.0])
    """
    return np.ascontiguousarray(np.asarray(values).T)


def _rng(rng: Any) -> np.random.Generator:
    return np.random.default_rng(_SEED if rng is None else rng)


@functools.cache
def _kernels() -> Any:
    """Return the intervals' compiled kernels (:mod:`fairmonitor._kernels.intervals`).

    Imported on first use, as every kernel module is (importing this one loads no compiled
    code), then kept: a window's intervals call kernels ~130 times, and an ``import``
    statement in a function costs ~2 us each time it runs.
    """
    from .._kernels import intervals

    return intervals


def _pair_index(defined: NDArray[np.bool_]) -> tuple[NDArray[np.intp], NDArray[np.intp],
                                                     NDArray[np.intp]]:
    """(family, i, j) of every pair of defined groups within each family."""
    fam, left, right = [], [], []
    for f, row in enumerate(defined):
        keep = np.flatnonzero(row)
        iu = np.triu_indices(keep.size, k=1)
        fam.append(np.full(iu[0].size, f))
        left.append(keep[iu[0]])
        right.append(keep[iu[1]])
    return np.concatenate(fam), np.concatenate(left), np.concatenate(right)


def _max_gap(theta: NDArray[np.float64], var: NDArray[np.float64],
             null_sd: NDArray[np.float64], defined: NDArray[np.bool_], *, level: float,
             n_draws: int, rng: Any) -> tuple[float, float, NDArray[np.float64]] | str:
    """(lower, upper, chance draws) of ``max_f max_{i,j} |theta_fi - theta_fj|``, or the reason.

    ``theta``, ``var`` (F, K): per family and group the estimate and its variance; ``null_sd``
    the standard error of each group's estimate when every group shares one value.
    """
    if defined.sum(axis=1).max() > MAX_RATE_GROUPS:
        return (f"{int(defined.sum(axis=1).max())} groups: intervals are computed for at "
                f"most {MAX_RATE_GROUPS} (raise min_group_size)")
    fam, i, j = _pair_index(defined)
    d_hat = theta[fam, i] - theta[fam, j]
    se = np.sqrt(var[fam, i] + var[fam, j])
    value = float(np.abs(d_hat).max())
    draws = _rng(rng).standard_normal((n_draws, *theta.shape))
    sd = np.sqrt(var)
    near_max = np.flatnonzero(np.abs(d_hat) >= value - KAPPA * se)
    if near_max.size <= MAX_PAIRS:
        f, a, b = fam[near_max], i[near_max], j[near_max]
        noise = draws[:, f, a] * sd[f, a] - draws[:, f, b] * sd[f, b]
        near_zero = np.abs(d_hat[near_max]) <= KAPPA * se[near_max]
        worst = np.where(near_zero, np.abs(noise), np.sign(d_hat[near_max]) * noise).max(axis=1)
    else:
        # many pairs tie for the max (a fair model with many groups): fold them all, the
        # largest |h_a - h_b| over their groups is max h - min h; an upper bound of the
        # derivative, so the interval can only be wider
        worst = np.full(n_draws, -np.inf)
        for f in np.unique(fam[near_max]):
            members = np.unique(np.concatenate([i[near_max][fam[near_max] == f],
                                                j[near_max][fam[near_max] == f]]))
            e = draws[:, f, members] * sd[f, members]
            worst = np.maximum(worst, e.max(axis=1) - e.min(axis=1))
    half = float(np.quantile(np.abs(worst), level))
    lo, hi = max(value - half, 0.0), value + half
    # chance: every group at the pooled rate; the largest pair gap of a family is max - min
    chance_gap = np.full(n_draws, -np.inf)
    for f in range(theta.shape[0]):
        keep = np.flatnonzero(defined[f])
        if keep.size >= 2:
            a = draws[:, f, keep] * null_sd[f, keep]
            chance_gap = np.maximum(chance_gap, a.max(axis=1) - a.min(axis=1))
    return lo, hi, chance_gap


def mean_gap_interval(
    means: ArrayLike,
    variances: ArrayLike,
    null_variances: ArrayLike,
    *,
    level: float = 0.95,
    n_draws: int = N_DRAWS,
    rng: Any = None,
) -> Interval:
    """Interval and chance level of the largest between-group gap in a mean.

    The machinery of :func:`rate_gap_interval` (Gaussian draws, directional derivative of the
    max) for any per-group mean with a known (or bounded) variance of its estimate.

    Parameters
    ----------
    means, variances : array-like of shape (K,)
        Each group's estimate and the variance of that estimate (NaN: the group has none).
    null_variances : array-like of shape (K,)
        The variance of each group's estimate if every group shared one distribution.
    level, n_draws, rng
        As :func:`rate_gap_interval`.

    Returns
    -------
    interval : Interval

    Examples
    --------
    >>> r = mean_gap_interval([0.0, 0.2], [1e-4, 1e-4], [1e-4, 1e-4])
    >>> round(r.lower, 2), round(r.upper, 2)
    (0.17, 0.23)
    """
    method = "mean-difference"
    _z(level)
    theta = np.atleast_2d(np.asarray(means, dtype=float))
    var = np.atleast_2d(np.asarray(variances, dtype=float))
    defined = np.isfinite(theta) & np.isfinite(var)
    if defined.sum() < 2:
        return _undefined(method, "fewer than two groups with a defined value")
    found = _max_gap(np.where(defined, theta, 0.0), np.where(defined, var, 0.0),
                     np.sqrt(np.atleast_2d(np.asarray(null_variances, dtype=float))), defined,
                     level=level, n_draws=n_draws, rng=rng)
    if isinstance(found, str):
        return _undefined(method, found)
    lo, hi, chance_gap = found
    return Interval(lo, hi, float(chance_gap.mean()), method)


def wald_interval(value: float, se: float, *, level: float = 0.95, lower: float = -np.inf,
                  upper: float = np.inf, method: str = "wald") -> Interval:
    """``value +- z se`` clipped to the metric's range; NaN with a reason without an SE.

    >>> r = wald_interval(0.2, 0.05)
    >>> round(r.lower, 3), round(r.upper, 3)
    (0.102, 0.298)
    """
    z = _z(level)
    if not (np.isfinite(value) and np.isfinite(se)):
        return _undefined(method, "no standard error for this value")
    if se <= 0:
        return _undefined(method, "standard error is 0 (too few rows to estimate it)")
    return Interval(max(value - z * se, lower), min(value + z * se, upper), float("nan"),
                       method)
