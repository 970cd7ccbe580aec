"""The regression intervals' draws and compiled statistics against independent oracles.

``cell_intervals`` draws each cell's Poisson counts by inverting the generator's uniforms
(the oracle: ``scipy.stats.poisson.ppf`` of the same uniforms) and reads KS and W1 of every
draw in ``_kernels/regression.pyx`` (the oracle: the (draws, groups, groups, bins) numpy pass
it replaced, spelled out here); the intervals must be the same endpoints (to 1e-12) as that
computation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from fairmonitor._kernels.regression import cell_statistics
from fairmonitor.metrics._regression import distribution as d
from fairmonitor.metrics._regression._common import prepare
from fairmonitor.metrics._regression._resample import (
    CELL_METHOD,
    N_RESAMPLES,
    _interval,
    _scaled_draws,
)


def _numpy_statistics(mass: np.ndarray, dx: np.ndarray, scale: float) -> np.ndarray:
    """The numpy formulation ``_cell_statistics`` had: every ordered pair, one array pass."""
    with np.errstate(invalid="ignore", divide="ignore"):
        cum = np.cumsum(mass, axis=-1)
        groups = cum / cum[..., -1:]
        pooled = cum.sum(axis=-2, keepdims=True)
        pooled = pooled / pooled[..., -1:]
        ks = np.nanmax(np.abs(groups - pooled), axis=(-2, -1))
        lead = groups[..., :-1]
        w1 = np.nanmax(np.abs(lead[..., :, None, :] - lead[..., None, :, :]) @ dx,
                       axis=(-2, -1))
        return np.stack([ks, w1, w1 / scale], axis=-1)


def _numpy_cell_intervals(counts: np.ndarray, mass: np.ndarray, dx: np.ndarray,
                          scale: float, level: float, seed: int) -> list[Any]:
    """``cell_intervals`` from scipy's Poisson quantiles and the numpy statistics."""
    rng = np.random.default_rng(seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = np.where(counts > 0, mass / counts, 0.0)
        group_unit = mass.sum(axis=1) / counts.sum(axis=1)
    share = counts.sum(axis=0) / counts.sum()
    expected = counts.sum(axis=1)[:, None] * share[None, :]
    shape = (N_RESAMPLES, *counts.shape)
    b = _numpy_statistics(unit * stats.poisson.ppf(rng.random(shape), counts), dx, scale)
    z = _numpy_statistics(group_unit[:, None] * stats.poisson.ppf(rng.random(shape), expected),
                          dx, scale)
    return [_interval(b[:, k], z[:, k], level, N_RESAMPLES, CELL_METHOD) for k in range(3)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_draws_are_scipys_poisson_quantiles_of_the_uniforms(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    # 0, tiny, small, around 10, large and fractional rates; a (groups x bins) layout
    lam = np.r_[rng.uniform(0, 30, 200), rng.integers(0, 40, 200), 0.0, 10.0,
                np.nextafter(10.0, 0.0), 1e-9, 500.0, 5000.5].reshape(2, -1)
    scale = rng.uniform(0.5, 2.0, lam.shape)
    scale[0, 0], scale[1, 0] = np.nan, np.inf
    lam[0, 0] = lam[1, 0] = 0.0  # a group without rows: NaN x 0 is NaN
    drawn = _scaled_draws(np.random.default_rng(seed), lam, scale, 300)
    u = np.random.default_rng(seed).random((300, lam.size))  # the same uniforms, C order
    with np.errstate(invalid="ignore"):
        expected = scale.ravel() * stats.poisson.ppf(u, lam.ravel())
    assert drawn.shape == (300, *lam.shape)
    np.testing.assert_array_equal(drawn.reshape(300, -1), expected)


def test_the_draws_have_the_poisson_law() -> None:
    # means and variances of 20,000 draws at each rate within 5 standard errors of the rate
    lam = np.array([0.2, 3.5, 9.99, 10.0, 40.0, 700.0])
    drawn = _scaled_draws(np.random.default_rng(5), lam, np.ones(lam.size), 20_000)
    mean, var = drawn.mean(axis=0), drawn.var(axis=0, ddof=1)
    np.testing.assert_array_less(np.abs(mean - lam), 5 * np.sqrt(lam / 20_000))
    # var of a sample variance of a Poisson: (mu_4 - sigma^4 (n-3)/(n-1)) / n, mu_4 = lam + 3 lam^2
    se_var = np.sqrt((lam + 3 * lam ** 2 - lam ** 2 * (20_000 - 3) / (20_000 - 1)) / 20_000)
    np.testing.assert_array_less(np.abs(var - lam), 5 * se_var)


@pytest.mark.parametrize(("groups", "bins"), [(2, 256), (5, 40), (9, 1)])
def test_the_cell_statistics_are_the_numpy_formulation(groups: int, bins: int) -> None:
    rng = np.random.default_rng(groups)
    mass = rng.poisson(3.0, size=(60, groups, bins)) * rng.uniform(0.5, 2.0, (groups, bins))
    mass[4, 1] = 0.0  # a group without weight in one draw: its CDF NaN, left out
    mass[7] = 0.0  # no weight at all: every value NaN
    dx = rng.random(bins - 1)
    with np.errstate(invalid="ignore", divide="ignore"), pytest.warns(RuntimeWarning):
        expected = _numpy_statistics(mass, dx, 3.0)  # numpy warns of the all-NaN draw
    np.testing.assert_allclose(cell_statistics(mass, dx, 3.0), expected, rtol=1e-12,
                               atol=0.0, equal_nan=True)
    # leading axes as the package calls it: none, or several
    np.testing.assert_allclose(d._cell_statistics(mass[0], dx, 3.0), expected[0], rtol=1e-12)
    np.testing.assert_allclose(d._cell_statistics(mass[:6].reshape(2, 3, groups, bins), dx,
                                                  3.0), expected[:6].reshape(2, 3, 3),
                               rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize(("seed", "n_groups", "decimals"), [(0, 2, 1), (1, 4, 6), (2, 7, 3)])
def test_the_distribution_intervals_are_the_numpy_computations(seed: int, n_groups: int,
                                                               decimals: int) -> None:
    # seeded windows: KS, W1 and scaled W1's intervals and chance levels equal, to 1e-12,
    # what rng.poisson and the numpy statistics gave from the same seed
    rng = np.random.default_rng(seed)
    n = 3000
    g = rng.integers(0, n_groups, n)
    pred = np.round(rng.normal(size=n) + 0.2 * g, decimals)
    weight = rng.uniform(0.5, 2.0, n)
    got = d.prediction_distribution(pred, sensitive_features=g, sample_weight=weight,
                                    scale=1.5, confidence_level=0.9, random_state=seed)
    s = d._Sorted(prepare(None, pred, g, min_group_size=1, sample_weight=weight))
    counts, mass, dx = d._cells(s)
    expected = _numpy_cell_intervals(counts, mass, dx, 1.5, 0.9, seed)
    for metric, want in zip(d.DISTRIBUTION_METRICS, expected, strict=True):
        have = getattr(got, metric).interval
        for field in ("lower", "upper", "chance"):
            assert getattr(have, field) == pytest.approx(getattr(want, field), rel=1e-12,
                                                         abs=1e-15), (metric, field)
        assert have.method == want.method
