"""``fairmonitor monitor``: run the scheduled fairness monitor from a YAML config.

``--check`` validates the config and prints what would be monitored (exit 0), or every error
with its dotted key path (exit 2), without starting anything. ``--once`` runs a single tick
(due windows, MLflow writes) and exits, for cron-style use and debugging. Otherwise the service
runs until SIGTERM/SIGINT, serving Prometheus metrics on ``--web.listen-address`` (default: the
config's ``listen_address``, itself ``127.0.0.1:9464`` by default).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``monitor`` options (Prometheus exporter style: dotted flag names)."""
    parser.add_argument("--config", required=True, metavar="PATH",
                        help="monitor configuration (YAML)")
    parser.add_argument("--check", action="store_true",
                        help="validate the configuration and exit (0 valid, 2 invalid)")
    parser.add_argument("--once", action="store_true",
                        help="evaluate the due windows once, write MLflow, and exit")
    parser.add_argument("--web.listen-address", dest="listen_address", metavar="HOST:PORT",
                        help="address of the /metrics endpoint (default: the config's "
                             "listen_address, 127.0.0.1:9464)")


def run(args: Any) -> int:
    """Run the subcommand; return the exit code."""
    from ..exceptions import ConfigError
    from ..monitor.config import check_config, load_config

    try:
        if args.check:
            for line in check_config(args.config):
                print(line)
            return 0
        config = load_config(args.config)
    except ConfigError as err:
        print(str(err), file=sys.stderr)
        return 2
    if args.listen_address is not None:
        from ..monitor.service import parse_listen_address

        try:
            parse_listen_address(args.listen_address)
        except ValueError as err:
            print(f"--web.listen-address: {err}", file=sys.stderr)
            return 2
    # MLflow's HTTP timeout and retries come from the config's mlflow_timeout (the service)
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # APScheduler logs two INFO lines per tick ("Running job", "executed successfully")
        logging.getLogger("apscheduler.executors.default").setLevel(logging.WARNING)

    from ..monitor.service import MonitorService

    service = MonitorService(config, listen_address=args.listen_address)
    if args.once:
        service.run_once()
        return 0
    try:
        return service.run()
    except OSError as err:  # the address is taken or not ours to bind
        host, port = service.address
        print(f"cannot serve metrics on {host}:{port}: {err}", file=sys.stderr)
        return 1
