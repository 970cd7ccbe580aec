"""``fairmonitor demo``: the whole loop (train, evaluate, replay, monitor) on bundled data.

Trains and registers a model in a local sqlite MLflow store, evaluates it with the ``fairness``
MLflow evaluator, replays a simulated day of predictions with a bias injected part-way, and
runs the real monitor service over it, showing the alert state change over HTTP. Everything is
written under ``--workdir`` (default ``./demo``); re-running is safe. See
:mod:`fairmonitor.demo`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_arguments", "options_from_args", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``demo`` options."""
    parser.add_argument("--workdir", type=Path, default=Path("demo"), metavar="DIR",
                        help="where the MLflow store, prediction log, config, rules and "
                             "dashboard go (default: ./demo)")
    parser.add_argument("--port", type=int, default=9464,
                        help="port of the /metrics endpoint on 127.0.0.1 (default: 9464; a "
                             "free port is used if it is taken; 0: any free port)")
    parser.add_argument("--serve", action="store_true",
                        help="keep serving /metrics after the replay, until Ctrl-C")
    parser.add_argument("--fast", action="store_true",
                        help="small data, 6 windows, light robustness (about 30 s)")
    parser.add_argument("--tick", type=float, default=None, metavar="SECONDS",
                        help="wall-clock seconds per simulated hour (default: 0.5; fast: 0.1)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")


def options_from_args(args: Any) -> Any:
    """Return the :class:`~fairmonitor.demo.scenario.DemoOptions` of parsed arguments."""
    from ..demo.scenario import DemoOptions

    return DemoOptions(workdir=args.workdir, port=args.port, fast=args.fast, serve=args.serve,
                       seed=args.seed, tick_seconds=args.tick)


def run(args: Any) -> int:
    """Run the demo; exit code 0 when the alert state changed where the bias was injected."""
    import sys

    if not 0 <= args.port <= 65535:
        print(f"--port: must be in [0, 65535]; got {args.port}", file=sys.stderr)
        return 2
    if args.tick is not None and not args.tick > 0:
        print(f"--tick: must be a positive number of seconds; got {args.tick}", file=sys.stderr)
        return 2
    from ..demo.scenario import run_demo

    result = run_demo(options_from_args(args))
    return 0 if result.transition_ok else 1
