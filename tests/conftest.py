"""Shared fixtures: deterministic random data and the bundled datasets the tests read."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

REPO = Path(__file__).resolve().parents[1]
TEST_DATA = Path(__file__).resolve().parent / "data"

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


@pytest.fixture(scope="session")
def compas_raw():
    """ProPublica COMPAS, all 7,214 rows, the columns the tests use (``tests/data/README.md``)."""
    import pandas as pd

    return pd.read_csv(TEST_DATA / "compas.csv.gz")


@pytest.fixture(scope="session")
def adult_raw():
    """UCI Adult as published (32,561 rows), from the package's bundled copy."""
    from fairmonitor.datasets import load_adult

    return load_adult().drop(columns="income")


def _inverse_cdf(pdf):
    """The MADD paper's sampler: pdf normalised on [0, 1], trapezoid CDF (1000 points) inverted."""
    area = integrate.quad(lambda x: pdf(np.asarray(x)), 0, 1)[0]
    x = np.linspace(0, 1, 1000)
    cdf = integrate.cumulative_trapezoid(pdf(x) / area, x, initial=0)

    def inverse(u):
        out = np.interp(u, cdf, x)
        out[u > cdf[-1]] = 1.0
        return out
    return inverse


@pytest.fixture(scope="session")
def madd_paper_scores():
    """``simulated(seed0, seed1, n)``: the MADD paper's two simulated score groups (§4.4.1).

    Group 0 ~ Gamma(4, 1)(11x), group 1 ~ N(0.55, 0.1^2), both on [0, 1], drawn with the
    paper's ``RandomState(seed).uniform`` so seeds give the published samples.
    """
    f8 = _inverse_cdf(lambda x: stats.gamma(a=4).pdf(11 * x))
    f9 = _inverse_cdf(lambda x: stats.norm.pdf(10 * (x - 0.55)))

    def simulated(seed0, seed1, n=10_000):
        return (f8(np.random.RandomState(seed0).uniform(0, 1, n)),
                f9(np.random.RandomState(seed1).uniform(0, 1, n)))
    return simulated
