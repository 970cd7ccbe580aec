"""The regression intervals' compiled kernels against numpy's formulations (the oracles).

``_kernels/regression.pyx`` replaced, in ``cell_intervals``, numpy's ``rng.poisson`` over a
(draws, groups, bins) array and the (draws, groups, groups, bins) array pass of KS and W1: the
draws must be the same numbers from the same generator state, and the intervals the same
endpoints (to 1e-12) as the numpy computation they replaced, which is spelled out here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fairmonitor._kernels.regression import cell_statistics, poisson_scaled
from fairmonitor.metrics._regression import distribution as d
from fairmonitor.metrics._regression._common import prepare
from fairmonitor.metrics._regression._resample import CELL_METHOD, N_RESAMPLES, _interval


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
    """``cell_intervals`` before the kernels: ``rng.poisson`` and the numpy statistics."""
    rng = np.random.default_rng(seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = np.where(counts > 0, mass / counts, 0.0)
        group_unit = mass.sum(axis=1) / counts.sum(axis=1)
    share = counts.sum(axis=0) / counts.sum()
    expected = counts.sum(axis=1)[:, None] * share[None, :]
    shape = (N_RESAMPLES, *counts.shape)
    b = _numpy_statistics(unit * rng.poisson(counts, size=shape), dx, scale)
    z = _numpy_statistics(group_unit[:, None] * rng.poisson(expected, size=shape), dx, scale)
    return [_interval(b[:, k], z[:, k], level, N_RESAMPLES, CELL_METHOD) for k in range(3)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_poisson_draws_are_numpys_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    # both samplers (multiplication below 10, PTRS from 10), their boundary, 0, tiny and
    # large rates, whole and fractional
    lam = np.r_[rng.uniform(0, 30, 200), rng.integers(0, 40, 200), 0.0, 10.0,
                np.nextafter(10.0, 0.0), 1e-9, 500.0, 5000.5]
    scale = rng.uniform(0.5, 2.0, lam.size)
    scale[[0, 400, 401]] = np.nan, np.inf, np.nan  # a group without rows: NaN x 0 is NaN
    lam[[0, 400]] = 0.0
    mine, numpys = np.random.default_rng(seed), np.random.default_rng(seed)
    drawn = poisson_scaled(mine, lam, scale, 300)
    with np.errstate(invalid="ignore"):
        expected = scale * numpys.poisson(lam, size=(300, lam.size))
    np.testing.assert_array_equal(drawn, expected)
    assert mine.random() == numpys.random()  # the generator left where numpy leaves it


@pytest.mark.parametrize("bit_generator", [np.random.MT19937, np.random.Philox,
                                           np.random.SFC64])
def test_the_poisson_draws_follow_any_bit_generator(bit_generator: Any) -> None:
    lam = np.r_[np.linspace(0.0, 25.0, 51), 0.0, 3.5]
    mine, numpys = (np.random.Generator(bit_generator(7)) for _ in range(2))
    drawn = poisson_scaled(mine, lam, np.ones(lam.size), 2500)  # several blocks read ahead
    np.testing.assert_array_equal(drawn, numpys.poisson(lam, size=(2500, lam.size)))
    assert mine.random() == numpys.random()


def test_the_poisson_kernel_refuses_what_numpy_refuses() -> None:
    for lam in ([-1.0], [np.nan]):
        with pytest.raises(ValueError):
            poisson_scaled(np.random.default_rng(0), np.array(lam), np.ones(1), 3)
    assert poisson_scaled(np.random.default_rng(0), np.zeros(0), np.zeros(0), 4).shape == (4, 0)


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
