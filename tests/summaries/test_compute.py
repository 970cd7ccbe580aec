"""The summary metrics' fast paths against their pair-by-pair references: ABCC of every pair
from the attribute's table equals the numpy reference ``_oracles.abcc_cells`` (value to
round-off, the same error bound), with raw and cell groups mixed, scores on edges, and
groups far apart."""

from __future__ import annotations

import numpy as np
import pytest

from fairmonitor.metrics import abcc
from fairmonitor.summaries import SummarySpec, cell_edges, merge_all, summarize
from fairmonitor.summaries.compute import _AbccTable, _steps

from ._oracles import abcc_cells as _abcc_cells
from .test_summaries import rows


@pytest.mark.parametrize(("decimals", "max_raw"), [(None, 100), (2, 100), (3, 2000), (None, 0)])
def test_abcc_table_equals_the_pairwise_cells(decimals, max_raw):
    sf, score, label = rows(30_000, 4, groups=6, decimals=decimals)
    score = np.where(sf["race"] == "f", score ** 3, score)  # one group far from the others
    sf["race"] = sf["race"].astype("<U1")
    sf["race"][::600] = "g"  # a small group: raw scores beside the cells
    parts = [summarize({k: v[a:a + 5_000] for k, v in sf.items()}, y_score=score[a:a + 5_000],
                       spec=SummarySpec(max_raw=max_raw, sample_size=0))
             for a in range(0, score.size, 5_000)]
    s = merge_all(parts)
    edges = cell_edges(499)
    for name, attr in s.attributes.items():
        groups = list(attr.groups.values())
        table = _AbccTable(groups, edges)
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                want, want_err = _abcc_cells(groups[i], groups[j], edges)
                got, got_err = table.pair(i, j)
                assert got == pytest.approx(want, abs=1e-13), (name, i, j)
                assert got_err == pytest.approx(want_err, rel=1e-9, abs=1e-15), (name, i, j)
        if name == "race":  # and within the bound of the raw rows' value
            assert attr.groups["g"].scores is not None or max_raw == 0
            for i, j in ((0, 5), (1, 2), (0, 6)):
                la, lb = attr.labels[i], attr.labels[j]
                keep = (sf["race"] == la) | (sf["race"] == lb)
                exact = abcc(score[keep], sensitive_features=sf["race"][keep])
                got, err = table.pair(i, j)
                # plus what the cells' step sums can move it (as abcc_from_summary adds)
                err += 3 * (_steps(attr.groups[la]) + _steps(attr.groups[lb]))
                assert abs(got - exact) <= err + 1e-12
