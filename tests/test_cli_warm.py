"""``fairmonitor warm`` fills numba's cache so that a new process's first window compiles
nothing (issue 27: 35 s of CPU before the first window of a fresh install)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from fairmonitor.cli import main

CHILD = textwrap.dedent("""
    import json
    import numpy as np
    from numba.core.event import install_recorder
    from fairmonitor.report import Window, evaluate_window

    rng = np.random.default_rng(5)
    n = 10_000
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    race = rng.choice(np.array(list("abcde"), dtype=object), n)
    score = rng.random(n)
    label = (rng.random(n) < score).astype(np.int64)
    with install_recorder("numba:compile") as compiles:
        evaluate_window(Window({"sex": sex, "race": race}, y_score=score, y_true=label))
    print(json.dumps(sorted({event.data["dispatcher"].py_func.__qualname__
                             for _, event in compiles.buffer})))
""")


def test_after_warm_a_new_process_first_window_compiles_nothing(capsys):
    assert main(["warm"]) == 0
    assert "compiled kernels cached" in capsys.readouterr().out
    out = subprocess.run([sys.executable, "-c", CHILD], env=dict(os.environ), check=True,
                         capture_output=True, text=True, timeout=600).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
