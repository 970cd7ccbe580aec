"""The kernels ported to Cython are compiled extension modules that load without numba
(issue 27: numba cost 31 s of CPU compiling and ~1.2 s a process loading its cache)."""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import subprocess
import sys
import textwrap

import pytest

PORTED = ("groups", "cells")

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np

    import fairmonitor._kernels.cells, fairmonitor._kernels.groups
    from fairmonitor.summaries import SummarySpec, merge_all, summarize

    rng = np.random.default_rng(0)
    parts = [summarize({"sex": rng.choice(np.array(["F", "M"], dtype=object), 5_000)},
                       y_score=rng.random(5_000), y_true=rng.integers(0, 2, 5_000),
                       spec=SummarySpec(max_raw=100, sample_size=8)) for _ in range(3)]
    merged = merge_all(parts)
    print(json.dumps({"numba": sorted(m for m in sys.modules if m.split(".")[0] in
                                      ("numba", "llvmlite")),
                      "n": merged.n_rows}))
""")


@pytest.mark.parametrize("name", PORTED)
def test_ported_kernels_are_compiled_extensions(name):
    module = importlib.import_module(f"fairmonitor._kernels.{name}")
    assert module.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), \
        module.__file__


def test_ported_kernels_and_summaries_of_cells_load_no_numba():
    """A new process encodes groups, summarizes into cells and merges them (every kernel of
    groups.pyx and cells.pyx's making and merging) without importing numba or llvmlite."""
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["numba"] == []
    assert result["n"] == 15_000
