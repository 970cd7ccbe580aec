"""What intervals add to one window: the window and the timing that the cost benchmarks share.

``bench_intervals.py`` (the default metric set), ``bench_coverage.py --cost`` (the rate metrics
alone) and ``interval_cost_ab.py`` (two checkouts alternately) time the same thing: one window
of two attributes (2 and 5 groups) and their intersection, evaluated without and with
intervals, interleaved: the least CPU time of each and the median a window's intervals add.
``bench_interval_parts.py`` times the same windows with :func:`added_cpu`, one setting of the
draws after another, and ``interval_cost_paired.py`` each window in two checkouts in turn.

Every repeat is a new window (its own seed), as every production window is: the interval
code keeps the fixed seed's chance draws per family of group sizes and pooled rate, so one
window evaluated again and again found its chance draws cached after the first run and read
~5 ms a window less than a new one costs (issue 25's measurements up to 2026-11-27 did so).
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from fairmonitor.report import Window, evaluate_window


def cost_window(n: int, inputs: Literal["scores", "predictions"], seed: int = 0,
                window_type: Callable[..., Any] = Window) -> Any:
    """Return a seeded window of ``n`` rows: scores and labels, or hard predictions and labels.

    ``window_type``: another checkout's ``Window`` (``interval_cost_paired.py``).
    """
    rng = np.random.default_rng(seed)
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    race = rng.choice(np.array(list("abcde"), dtype=object), n)
    groups = {"sex": sex, "race": race}
    if inputs == "predictions":
        y = (rng.random(n) < 0.3).astype(int)
        pred = (rng.random(n) < np.where(sex == "F", 0.25, 0.35)).astype(int)
        return window_type(groups, y_pred=pred, y_true=y)
    score = np.clip(rng.beta(2, 2, n) + np.where(sex == "F", -0.05, 0.05), 0, 1)
    label = (rng.random(n) < score).astype(np.int64)
    return window_type(groups, y_score=score, y_true=label)


def window_cpu(window: Any, metrics: Sequence[str], level: float | None,
               evaluate: Callable[..., Any] = evaluate_window) -> float:
    """Return the CPU seconds of one ``evaluate_window`` call (``level`` None: no intervals).

    ``evaluate``: another checkout's ``evaluate_window`` (``interval_cost_paired.py``).
    """
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluate(window, metrics=list(metrics), confidence_level=level)
    return time.process_time() - start


def added_cpu(window: Any, metrics: Sequence[str],
              evaluate: Callable[..., Any] = evaluate_window) -> float:
    """Return the CPU seconds intervals add to one window: evaluated without, then with them."""
    without = window_cpu(window, metrics, None, evaluate)
    return window_cpu(window, metrics, 0.95, evaluate) - without


class Cost(NamedTuple):
    """CPU seconds of a window: the least without and with intervals, and the median added."""

    without: float
    with_: float
    added: float


def interval_cpu(n: int, inputs: Literal["scores", "predictions"], metrics: Sequence[str],
                 repeats: int, *, warm: bool = True) -> Cost:
    """Return the CPU time of a window of ``n`` rows without and with 95% intervals.

    Each of the ``repeats`` rounds makes a new window (:func:`cost_window`, seed = the round)
    outside the timing and runs it without, then with intervals, so both meet the same machine
    load and no interval reads draws cached from an earlier run of its window; ``warm`` first
    runs another window once with intervals (imports and first-call caches out of the timing).
    ``added`` is the median over the rounds of each window's with minus without: on this VM,
    whose speed drifts by up to 1.5x within minutes, the two least times can come from
    different minutes.
    """
    if warm:
        window_cpu(cost_window(n, inputs, seed=repeats + 1), metrics, 0.95)
    without, with_ = [], []
    for seed in range(repeats):
        window = cost_window(n, inputs, seed=seed)
        without.append(window_cpu(window, metrics, None))
        with_.append(window_cpu(window, metrics, 0.95))
        del window  # 10^6 rows: one window at a time
    added = statistics.median(b - a for a, b in zip(without, with_, strict=True))
    return Cost(min(without), min(with_), added)
