"""Intervals and chance levels of regression metrics: Poisson bootstrap, permutation null.

A regression metric is a statistic of the kept rows' group codes and weights,
``statistic(weight, codes) -> values`` (one value per metric computed together; the
predictions and targets themselves are fixed). Both resamplings change only those two arrays,
so no draw sorts or copies the values again:

- **interval**: the percentile interval of a Poisson bootstrap of the rows: each row weighted
  by an independent Poisson(1) count (multiplied into its weight), the large-sample
  equivalent of drawing the rows with replacement (the Poisson bootstrap the score metrics'
  histograms use), in one O(rows) pass a draw. A gap that is a maximum over groups is biased
  upwards on small groups, and so is its bootstrap distribution: read the interval beside the
  chance level.
- **chance level**: the mean of the statistic over random permutations of the group codes,
  i.e. what a model whose groups share one distribution reads at these group sizes (the same
  definition as :class:`~fairmonitor.metrics.shared.Interval`'s ``chance`` for the
  classification metrics).

Cost: ``2 * n_resamples`` evaluations of the statistic, each O(rows) (bincounts and cumulative
sums on arrays sorted once), shared by every metric the statistic returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._intervals import Interval, _kernels

#: Default number of bootstrap draws and of permutations.
N_RESAMPLES = 200
METHOD = "Poisson bootstrap of the rows (percentile); chance: permutation of group labels"
SUM_METHOD = ("Poisson bootstrap of the group sums, Gaussian form (percentile); chance: "
              "permutation null of the group sums, Gaussian form")
CELL_METHOD = ("Poisson bootstrap of (group, prediction bin) cells (percentile); chance: "
               "groups drawn from the pooled cells")

Statistic = Callable[[NDArray[np.float64], NDArray[np.intp]], Any]


def resample_intervals(statistic: Statistic, codes: NDArray[np.intp],
                       weight: NDArray[np.float64], *, level: float,
                       n_resamples: int = N_RESAMPLES, random_state: Any = None
                       ) -> list[Interval]:
    """Return the bootstrap interval and the permutation chance level of each statistic.

    Parameters
    ----------
    statistic : callable
        ``statistic(weight, codes) -> float or array of m floats`` on the kept rows.
    codes : ndarray of int
        Group code of each kept row.
    weight : ndarray of float
        Row weights (``sample_weight`` or ones).
    level : float
        Confidence level in (0, 1).
    n_resamples : int, default=200
        Bootstrap draws, and as many permutations.
    random_state : numpy.random.Generator, int or None

    Returns
    -------
    intervals : list of Interval
        One per value of the statistic; NaN bounds with the reason when fewer than half the
        draws give that value.

    Examples
    --------
    The gap of group means, on two groups of 50 rows whose means differ by 1:

    >>> codes = np.repeat([0, 1], 50)
    >>> values = np.r_[np.linspace(0, 1, 50), np.linspace(1, 2, 50)]
    >>> def gap(w, c):
    ...     m = np.bincount(c, w * values) / np.bincount(c, w)
    ...     return float(m.max() - m.min())
    >>> (iv,) = resample_intervals(gap, codes, np.ones(100), level=0.95, random_state=0)
    >>> bool(iv.lower < 1.0 < iv.upper), bool(iv.chance < 0.5)
    (True, True)
    """
    if not 0.0 < level < 1.0:
        from ...exceptions import InvalidInputError

        raise InvalidInputError(f"confidence_level must lie in (0, 1); got {level!r}")
    rng = np.random.default_rng(random_state)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = np.array([np.atleast_1d(statistic(weight * rng.poisson(1.0, codes.size), codes))
                         for _ in range(n_resamples)], dtype=float)
        null = np.array([np.atleast_1d(statistic(weight, rng.permutation(codes)))
                         for _ in range(n_resamples)], dtype=float)
    return [_interval(boot[:, k], null[:, k], level, n_resamples, METHOD)
            for k in range(boot.shape[1])]


def _interval(boot: NDArray[np.float64], null: NDArray[np.float64], level: float,
              n_resamples: int, method: str) -> Interval:
    boot, null = boot[np.isfinite(boot)], null[np.isfinite(null)]
    nan = float("nan")
    if boot.size < n_resamples / 2:
        return Interval(nan, nan, nan, method, "fewer than half of the bootstrap draws are "
                                                "defined")
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(lo), float(hi), float(null.mean()) if null.size else nan, method)


def _gaussian_sums(mean: NDArray[np.float64], cov: NDArray[np.float64], size: int,
                   rng: np.random.Generator) -> NDArray[np.float64]:
    """Draw ``size`` vectors ~ N(mean, cov) (eigh: a singular cov is fine).

    Each eigenvector's sign is fixed (its largest component positive): eigh's signs may flip
    on a round-off change of ``cov``, which would change the draws; a summary's sums (added
    in another order than the rows') then give the rows' draws.
    """
    vals, vecs = np.linalg.eigh(cov)
    pick = np.argmax(np.abs(vecs), axis=0)
    vecs = vecs * np.where(vecs[pick, np.arange(vecs.shape[1])] < 0, -1.0, 1.0)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    return mean + rng.standard_normal((size, mean.size)) @ root.T


def sum_intervals(statistic: Callable[[NDArray[np.float64]], Any], values: NDArray[np.float64],
                  codes: NDArray[np.intp], n_groups: int, *, level: float,
                  n_resamples: int = N_RESAMPLES, random_state: Any = None,
                  vectorized: bool = False) -> list[Interval]:
    """Intervals and chance levels of statistics of per-group sums, without row draws.

    ``values`` (rows x d, weights included) are summed per group; ``statistic(sums)`` reads
    the (groups x d) sums, or with ``vectorized=True`` every draw's at once (draws x groups x
    d, returning draws x statistics: one array pass instead of a Python call a draw). The
    draws read each group's sums and sums of products only (:func:`moment_intervals`, which
    a window summary calls with its stored sums).

    Examples
    --------
    >>> codes = np.repeat([0, 1], 200)
    >>> v = np.c_[np.ones(400), np.r_[np.zeros(200), np.ones(200)] + np.tile([-1, 1], 200)]
    >>> gap = lambda s: float(np.ptp(s[:, 1] / s[:, 0]))
    >>> (iv,) = sum_intervals(gap, v, codes, 2, level=0.95, random_state=0)
    >>> bool(iv.lower < 1.0 < iv.upper), bool(iv.chance < 0.3)
    (True, True)
    """
    sums, second = group_moments(values, codes, n_groups)
    return moment_intervals(statistic, sums, second,
                            np.bincount(codes, minlength=n_groups).astype(float), level=level,
                            n_resamples=n_resamples, random_state=random_state,
                            vectorized=vectorized)


def group_moments(values: NDArray[np.float64], codes: NDArray[np.intp], n_groups: int
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each group's sums (groups x d) and sums of products (groups x d x d) of ``values``.

    Sums are bincounts in row order (what the metrics' own group sums are).

    >>> s, q = group_moments(np.array([[1.0, 2.0], [1.0, 3.0]]), np.array([0, 0]), 1)
    >>> s.tolist(), q[0].tolist()
    ([[2.0, 5.0]], [[2.0, 5.0], [5.0, 13.0]])
    """
    d = values.shape[1]
    sums = np.stack([np.bincount(codes, weights=values[:, j], minlength=n_groups)
                     for j in range(d)], axis=1)
    second = np.empty((n_groups, d, d))
    for g in range(n_groups):
        rows = values[codes == g]
        second[g] = rows.T @ rows
    return sums, second


def moment_intervals(statistic: Callable[[NDArray[np.float64]], Any],
                     sums: NDArray[np.float64], second: NDArray[np.float64],
                     counts: NDArray[np.float64], *, level: float,
                     n_resamples: int = N_RESAMPLES, random_state: Any = None,
                     vectorized: bool = False) -> list[Interval]:
    """Intervals and chance levels of ``statistic(sums)`` from group sums and sums of products.

    ``vectorized``: as :func:`sum_intervals`'s (``statistic`` reads every draw at once).

    The Poisson bootstrap's group sums are ``sum_i P_i v_i`` with independent Poisson(1)
    ``P_i``: mean ``sum_i v_i`` (``sums[g]``), covariance ``sum_i v_i v_i^T``
    (``second[g]``); they are drawn from that Gaussian (the bootstrap's central-limit form),
    in O(groups x d^2) a draw. The chance level reads the permutation null the same way: a
    group of ``n_g`` of the ``N`` rows drawn without replacement has sum mean ``n_g mu`` and
    covariance ``n_g (1 - n_g / N) C`` (``mu``, ``C`` the pooled rows' mean and covariance,
    from the same sums). Everything is a sum over rows, so summaries of disjoint rows add.

    Examples
    --------
    >>> sums = np.array([[100.0, 0.0], [100.0, 100.0]])
    >>> second = np.array([[[100.0, 0], [0, 100]], [[100, 100], [100, 200]]])
    >>> gap = lambda s: float(np.ptp(s[:, 1] / s[:, 0]))
    >>> (iv,) = moment_intervals(gap, sums, second, np.array([100.0, 100.0]), level=0.95,
    ...                          random_state=0)
    >>> bool(iv.lower < 1.0 < iv.upper)
    True
    """
    rng = np.random.default_rng(random_state)
    n_groups, d = sums.shape
    n = counts.sum()
    mu = sums.sum(axis=0) / n
    pooled_cov = (second.sum(axis=0) - n * np.outer(mu, mu)) / max(n - 1.0, 1.0)
    boot = np.empty((n_resamples, n_groups, d))
    null = np.empty((n_resamples, n_groups, d))
    for g in range(n_groups):
        boot[:, g] = _gaussian_sums(sums[g], second[g], n_resamples, rng)
        null[:, g] = _gaussian_sums(counts[g] * mu, counts[g] * (1 - counts[g] / n)
                                    * pooled_cov, n_resamples, rng)
    with np.errstate(invalid="ignore", divide="ignore"):
        if vectorized:
            b = np.asarray(statistic(boot), dtype=float).reshape(n_resamples, -1)
            z = np.asarray(statistic(null), dtype=float).reshape(n_resamples, -1)
        else:
            b = np.array([np.atleast_1d(statistic(x)) for x in boot], dtype=float)
            z = np.array([np.atleast_1d(statistic(x)) for x in null], dtype=float)
    return [_interval(b[:, k], z[:, k], level, n_resamples, SUM_METHOD)
            for k in range(b.shape[1])]


def cell_intervals(statistic: Callable[[NDArray[np.float64]], Any],
                   counts: NDArray[np.float64], mass: NDArray[np.float64], *, level: float,
                   n_resamples: int = N_RESAMPLES, random_state: Any = None) -> list[Interval]:
    """Intervals and chance levels of statistics of (group x bin) cells of weight.

    ``counts`` and ``mass`` (groups x bins) hold each cell's rows and weight;
    ``statistic(mass)`` reads the cells of every draw at once (``mass``: draws x groups x
    bins) and returns draws x statistics. The Poisson bootstrap of the rows gives each cell a
    Poisson(count) number of rows (a sum of independent Poisson(1) counts), drawn per cell,
    at the cell's mean weight. The chance level draws each group's cells from the pooled
    rows' shares (Poisson(n_g x share)): every group distributed as the pooled rows.

    Examples
    --------
    >>> counts = np.array([[50.0, 50.0], [50.0, 50.0]])
    >>> gap = lambda m: np.ptp(m[..., 0] / m.sum(axis=-1), axis=-1)
    >>> (iv,) = cell_intervals(gap, counts, counts, level=0.95, random_state=0)
    >>> bool(iv.lower < 0.05 < iv.upper)
    True
    """
    rng = np.random.default_rng(random_state)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = np.where(counts > 0, mass / counts, 0.0)
        group_unit = mass.sum(axis=1) / counts.sum(axis=1)
    share = counts.sum(axis=0) / counts.sum()
    expected = counts.sum(axis=1)[:, None] * share[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):  # every draw in one call
        b = np.asarray(statistic(_scaled_draws(rng, counts, unit, n_resamples)), dtype=float)
        z = np.asarray(statistic(_scaled_draws(rng, expected, np.broadcast_to(
            group_unit[:, None], counts.shape), n_resamples)), dtype=float)
        b, z = b.reshape(n_resamples, -1), z.reshape(n_resamples, -1)
    return [_interval(b[:, k], z[:, k], level, n_resamples, CELL_METHOD)
            for k in range(b.shape[1])]


def _scaled_draws(rng: np.random.Generator, rate: NDArray[np.float64],
                  scale: NDArray[np.float64], draws: int) -> NDArray[np.float64]:
    """``scale`` times Poisson(``rate``) counts, ``draws`` of each cell: (draws, *rate.shape).

    The score intervals' sampler (``_kernels/intervals.poisson_counts``): each cell's counts
    invert ``rng``'s uniforms, drawn as one (draws, cells) array, through a CDF table built once
    per cell (the rate is the same in every draw), about twice as fast as ``rng.poisson``,
    which recomputes a rate's constants at every sample. The counts are
    ``scipy.stats.poisson.ppf`` of those uniforms; a cell of rate 0 is 0 (NaN for a NaN scale).

    >>> rate, scale = np.array([[0.5, 12.0]]), np.array([[2.0, 0.5]])
    >>> a = _scaled_draws(np.random.default_rng(0), rate, scale, 20)
    >>> from scipy import stats
    >>> u = np.random.default_rng(0).random((20, 2))
    >>> bool((a.reshape(20, 2) == scale.ravel() * stats.poisson.ppf(u, rate.ravel())).all())
    True
    """
    kernels = _kernels()
    flat = np.ascontiguousarray(rate, dtype=float).ravel()
    counts = kernels.poisson_counts(flat, rng.random((draws, flat.size)))
    return kernels.scaled(counts, np.ascontiguousarray(scale, dtype=float).ravel()).reshape(
        draws, *rate.shape)
