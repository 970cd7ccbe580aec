"""Shared fixtures: deterministic random data and the location of the shared datasets."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    assert SHARED_DATASETS.is_dir(), f"../shared/datasets not found at {SHARED_DATASETS}"
    return SHARED_DATASETS
