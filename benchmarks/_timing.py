"""The timer the benchmark scripts share: the least of repeated runs of a function.

The least time, not the mean: on a shared machine other processes only ever add time, so the
least of a few runs is the closest to what the code itself costs. CPU time
(``time.process_time``, every thread of this process) by default: waiting for a core does not
count; the wall clock (``time.perf_counter``) where waiting is what is measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def least(func: Callable[[], Any], repeats: int = 3, *,
          clock: Callable[[], float] = time.process_time) -> tuple[float, Any]:
    """Return the least of ``repeats`` timings of ``func()`` on ``clock``, and its last result.

    >>> seconds, result = least(lambda: sum(range(1000)), 2)
    >>> seconds >= 0.0, result
    (True, 499500)
    """
    best, result = float("inf"), None
    for _ in range(repeats):
        start = clock()
        result = func()
        best = min(best, clock() - start)
    return best, result
