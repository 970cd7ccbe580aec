"""MADD from a summary with many groups: the worst pair found without scoring every pair
(``madd_worst_fixed`` / ``madd_worst_auto``, as :func:`~fairmonitor.metrics.madd` on rows),
its value the all-pairs maximum to the last bit."""

from __future__ import annotations

import numpy as np
import pytest

from fairmonitor.metrics import madd
from fairmonitor.summaries import SummarySpec, from_bytes, summarize, to_bytes
from fairmonitor.summaries.compute import madd_from_summary


def _groups(k: int, seed: int):
    """``k`` groups of Zipf-like sizes (some raw, some cells), shifted score distributions."""
    rng = np.random.default_rng(seed)
    sizes = np.maximum(40, (6000 / np.arange(1, k + 1) ** 0.8).astype(int))
    group = np.repeat(np.arange(k), sizes)
    shift = rng.normal(0, 0.04, k)[group]
    score = np.clip(rng.beta(2, 3, group.size) + shift, 0, 1)
    return {"g": group}, score


@pytest.mark.parametrize(("k", "kw"), [(30, {}), (12, {"n_bins": 20})])
def test_worst_pair_equals_all_pairs(k, kw):
    sf, score = _groups(k, k)
    spec = SummarySpec(max_raw=1000, sample_size=0)
    attr = from_bytes(to_bytes(summarize(sf, y_score=score, spec=spec))).attributes["g"]
    assert {g.cells is None for g in attr.groups.values()} == {True, False}  # both kinds
    every = madd_from_summary(attr, max_bins_cells=499, agg="mean", **kw)
    worst = madd_from_summary(attr, max_bins_cells=499, **kw)
    matrix = every.matrix.matrix
    assert worst.value == matrix.max()
    i, j = np.unravel_index(np.argmax(np.triu(matrix, 1) == matrix.max()), matrix.shape)
    assert worst.worst.groups == (i, j)  # the first of ties, row by row
    scored = len(worst._source.scored)  # noqa: SLF001 - the pruning is what is tested
    assert scored < k * (k - 1) // 2
    # the pairs read later are every pair, each the all-pairs loop's
    assert np.array_equal(worst.matrix.matrix, matrix)
    # and the rows' values: MADD from cells is exact
    rows = madd(score, sensitive_features=sf["g"], **kw)
    assert rows.value == worst.value and np.array_equal(rows.matrix.matrix, matrix)
