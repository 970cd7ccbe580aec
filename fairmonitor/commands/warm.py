"""``fairmonitor warm``: compile every kernel into numba's on-disk cache, once per install.

numba compiles a kernel at its first call and caches the machine code on disk; without this
step the first window of a fresh install, container or Spark executor waits ~25-35 s of CPU
for ~100 compilations. Run it where the package is installed, as the user that will run it
(``docker/Dockerfile`` does, at image build): later processes load the cache instead
(``ARCHITECTURE.md``, "Compiled code"). It runs the paths that call kernels on synthetic
data, so each kernel compiles for the argument types those paths pass:

- ``evaluate_window`` with intervals, on a short window (numpy group encoding) and on one of
  ``2**17`` rows (the compiled encoding of text and integer columns, MADD's one-pass
  histograms);
- summaries made of cells, merged, serialized and evaluated (``evaluate_summary``), and one of
  a long window with a row sample;
- HFM's ApproxDist scan.

Exit 0, printing the CPU time it took and where numba caches. ``NUMBA_CACHE_DIR`` chooses
the place; without a writable one numba compiles in each process (nothing to warm).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

__all__ = ["add_arguments", "run", "warm"]

#: A window this long takes every compiled path (``utils.groups.COMPILED_MIN_ROWS``, MADD's
#: one-pass histograms); about a second of CPU once compiled.
_LONG = 1 << 17


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``warm`` options (none)."""


def _window(n: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    race = rng.choice(np.array(list("abcde"), dtype=object), n)
    score = np.clip(rng.beta(2, 2, n) + np.where(sex == "F", -0.05, 0.05), 0, 1)
    label = (rng.random(n) < score).astype(np.int64)
    return {"sensitive_features": {"sex": sex, "race": race, "age": rng.integers(0, 3, n)},
            "y_score": score, "y_true": label, "X": rng.random((n, 2))}


def _windows() -> None:
    from ..report import Window, evaluate_window

    for n in (10_000, _LONG):
        data = _window(n, n)
        evaluate_window(Window(data["sensitive_features"], y_score=data["y_score"],
                               y_true=data["y_true"]))
        evaluate_window(Window(data["sensitive_features"], y_score=data["y_score"],
                               y_true=data["y_true"]), options={"madd": {"bandwidth": 0.01}},
                        metrics=["madd"], confidence_level=None)


def _summaries() -> None:
    from ..report import evaluate_summary
    from ..summaries import SummarySpec, from_bytes, merge_all, summarize, to_bytes

    spec = SummarySpec(max_raw=1000)  # every group keeps cells
    parts = []
    for seed in (1, 2):
        data = _window(20_000, seed)
        parts.append(summarize(data["sensitive_features"], y_score=data["y_score"],
                               y_true=data["y_true"], spec=spec))
    merged = merge_all([from_bytes(to_bytes(p)) for p in parts])
    evaluate_summary(merged)
    data = _window(_LONG, 4)  # the compiled layout of long windows, with a row sample
    to_bytes(summarize(data["sensitive_features"], y_score=data["y_score"], y_true=data["y_true"],
                       X=data["X"], spec=spec))


def _hfm() -> None:
    from ..metrics import hfm

    data = _window(2_000, 3)
    hfm(data["X"], data["y_true"], (data["y_score"] > 0.5).astype(np.int64),
        sensitive_features=data["sensitive_features"]["sex"], method="approx")


def warm() -> float:
    """Run every path that calls a kernel once; return the CPU seconds it took."""
    import warnings

    start = time.process_time()
    with warnings.catch_warnings():  # synthetic data: undefined values are not the point
        warnings.simplefilter("ignore")
        _windows()
        _summaries()
        _hfm()
    return time.process_time() - start


def run(args: argparse.Namespace) -> int:
    """Warm the cache; print what it cost and where it went."""
    seconds = warm()
    where = os.environ.get("NUMBA_CACHE_DIR") or "beside the package, else the user's cache"
    print(f"compiled kernels cached in {seconds:.1f} s of CPU ({where})")
    return 0
