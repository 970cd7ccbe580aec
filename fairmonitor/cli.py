"""The ``fairmonitor`` command line.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``, imported only when that subcommand runs, so ``fairmonitor report`` never
pays for importing mlflow and ``fairmonitor --help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

__all__ = ["main"]

#: subcommand -> (module implementing it, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "report": ("fairmonitor.commands.report",
               "Train a model on bundled data and print every fairness metric per attribute."),
    "monitor": ("fairmonitor.commands.monitor", "Run the scheduled fairness monitor."),
    "rules": ("fairmonitor.commands.rules", "Write Prometheus and Grafana alert rules."),
    "dashboards": ("fairmonitor.commands.dashboards", "Write the Grafana dashboard files."),
    "demo": ("fairmonitor.commands.demo",
             "Run the whole loop locally: train, evaluate, replay, monitor."),
    "warm": ("fairmonitor.commands.warm",
             "Check that the compiled kernels are built and load (after install or image build)."),
    # further subcommands register here
}


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand's arguments."""
    parser = argparse.ArgumentParser(
        prog="fairmonitor", description="Fairness as a monitored production signal."
    )
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="verbosity of fairmonitor's logs (other libraries log warnings "
                             "and errors only)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
    return parser


def configure_logging(level: str) -> None:
    """``--log-level`` for fairmonitor's own loggers; other libraries stay at WARNING.

    The root logger (numba, urllib3, APScheduler, MLflow...) keeps WARNING: ``DEBUG`` on it
    made numba's compiler print tens of thousands of lines. fairmonitor's records reach the
    same handler through propagation.
    """
    logging.basicConfig(level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("fairmonitor").setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (testable without a subprocess)."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level)
    result: int = importlib.import_module(args._module).run(args)
    return result


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
