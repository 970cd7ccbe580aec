"""Where a window's interval time goes, and how much of it the Monte Carlo draws are.

Two measurements on the window of ``bench_intervals.py``'s cost (10^4 rows, two attributes of
2 and 5 groups and their intersection, the default metric set):

- ``parts``: every function of the interval modules (``metrics/_score_intervals.py``,
  ``metrics/_rate_intervals.py``, ``report/intervals.py``) wrapped in a timer, over new
  windows: per window, its calls, its own time (compiled kernels count in their caller's)
  and its time with its callees. The wrappers add their own cost (~1 us a call), so the
  total reads higher than ``bench_intervals.py``'s; the shares are what this is for.
- ``draws``: the time intervals add a window (the median over new windows, as
  ``bench_intervals.py`` measures it) at the shipped numbers of draws, with the score
  bootstrap's and null's draws halved, and with the rate intervals' draws halved, alternately
  in the same process. If the draws were the cost, halving them would halve it.

Usage: ``python benchmarks/bench_interval_parts.py [--rows N] [--windows N]``.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import time
import types
import warnings
from collections.abc import Callable
from typing import Any

from _interval_cost import added_cpu, cost_window
from bench_intervals import DEFAULT

import fairmonitor.metrics._rate_intervals as rate_module
import fairmonitor.metrics._score_intervals as score_module
import fairmonitor.report.evaluate as evaluate_module
import fairmonitor.report.intervals as report_module
from fairmonitor.report import evaluate_window


class Timers:
    """Per function: calls, own time and time with callees (a stack of the callees' time)."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.own: collections.Counter[str] = collections.Counter()
        self.total: collections.Counter[str] = collections.Counter()
        self._stack: list[float] = []

    def wrap(self, function: Callable[..., Any], label: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            self._stack.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                spent, inner = time.perf_counter() - start, self._stack.pop()
                self.calls[label] += 1
                self.total[label] += spent
                self.own[label] += spent - inner
                if self._stack:
                    self._stack[-1] += spent
        return timed


def _functions(owner: Any) -> list[tuple[str, Any]]:
    """The plain functions defined in ``owner`` (a module or a class), not lru-cached ones."""
    module = owner.__name__ if isinstance(owner, types.ModuleType) else owner.__module__
    return [(name, obj) for name, obj in vars(owner).items()
            if isinstance(obj, types.FunctionType) and obj.__module__ == module
            and name != "__init__"]


def parts(rows: int, windows: int) -> None:
    timers = Timers()
    owners = [(score_module, "scores"), (rate_module, "rates"), (report_module, "report"),
              (score_module.ScoreBootstrap, "ScoreBootstrap"), (score_module._Curves, "_Curves")]
    saved = []
    for owner, tag in owners:
        for name, function in _functions(owner):
            saved.append((owner, name, function))
            setattr(owner, name, timers.wrap(function, f"{tag}.{name}"))
    evaluate_module.interval_of = report_module.interval_of  # the wrapped one
    try:
        evaluate_window(cost_window(rows, "scores", windows + 1), metrics=DEFAULT,
                        confidence_level=0.95)
        for counter in (timers.calls, timers.own, timers.total):
            counter.clear()
        for seed in range(windows):
            evaluate_window(cost_window(rows, "scores", seed), metrics=DEFAULT,
                            confidence_level=0.95)
    finally:
        for owner, name, function in saved:
            setattr(owner, name, function)
        evaluate_module.interval_of = report_module.interval_of
    print(f"\n== parts: {windows} windows of {rows} rows, ms a window (wrapped: read the shares)")
    print(f"{'function':42s} {'calls':>6s} {'own':>7s} {'with callees':>13s}")
    for label, own in timers.own.most_common(25):
        print(f"{label:42s} {timers.calls[label] / windows:6.1f} {own / windows * 1e3:7.2f} "
              f"{timers.total[label] / windows * 1e3:13.2f}")
    entry = "report.interval_of"
    print(f"INFO intervals_wrapped_ms: {timers.total[entry] / windows * 1e3:.2f}")
    for tag, label in (("scores", "report._scores"), ("rates", "report._rates")):
        share = timers.total[label] / timers.total[entry]
        print(f"INFO share_{tag}: {share:.2f}")


def _added(rows: int, seed: int) -> float:
    """CPU seconds intervals add to one new window (without, then with)."""
    return added_cpu(cost_window(rows, "scores", seed), DEFAULT)


def draws(rows: int, windows: int) -> None:
    score_defaults = score_module.ScoreBootstrap.__init__.__defaults__
    null_draws = score_module.NULL_DRAWS
    rate_defaults = dict(rate_module.rate_gap_interval.__kwdefaults__)

    def shipped() -> None:
        score_module.ScoreBootstrap.__init__.__defaults__ = score_defaults
        score_module.NULL_DRAWS = null_draws
        rate_module.rate_gap_interval.__kwdefaults__.update(rate_defaults)

    def half_scores() -> None:
        shipped()
        score_module.ScoreBootstrap.__init__.__defaults__ = (score_module.SCORE_DRAWS // 2,
                                                            None)
        score_module.NULL_DRAWS = null_draws // 2

    def half_rates() -> None:
        shipped()
        rate_module.rate_gap_interval.__kwdefaults__["n_draws"] = rate_module.N_DRAWS // 2

    settings = {"shipped": shipped, "score draws halved": half_scores,
                "rate draws halved": half_rates}
    added: dict[str, list[float]] = {name: [] for name in settings}
    try:
        _added(rows, windows + 1)
        for seed in range(windows):  # each setting on the same new window, in turn
            for name, apply in settings.items():
                apply()
                added[name].append(_added(rows, seed))
    finally:
        shipped()
    print(f"\n== draws: intervals' added CPU time, median over {windows} new windows of "
          f"{rows} rows")
    base = statistics.median(added["shipped"])
    for name, values in added.items():
        median = statistics.median(values)
        print(f"{name:20s} {median * 1e3:6.1f} ms  ({median / base:.2f} of the shipped)")
        print(f"INFO added_ms_{name.replace(' ', '_')}: {median * 1e3:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--windows", type=int, default=40)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; {os.cpu_count()} CPUs")
    parts(args.rows, args.windows)
    draws(args.rows, args.windows)


if __name__ == "__main__":
    main()
