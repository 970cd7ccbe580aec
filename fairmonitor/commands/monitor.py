"""``fairmonitor monitor``: run the scheduled fairness monitor from a YAML config.

``--check`` validates the config and prints what would be monitored (exit 0), or every error with
its dotted key path (exit 2), without starting anything; it also reports files that are not there
(a missing SQLite source file) and connects to each source: the table or files must exist and hold
every configured column with a plausible type (the available columns are listed on a mismatch).
``--once`` runs a single tick (due windows, MLflow writes) and exits, for cron-style use and
debugging: exit 0 when every window was evaluated and saved and every MLflow value written, 1 when
something failed (a source down, a data error such as a missing column, a checkpoint that cannot be
saved, MLflow values still pending; the failures are on stderr), 2 for a bad config.
``--backfill-from TIME`` first rewinds every model's checkpoint to the windows starting at
``TIME``, so they are evaluated again (at most ``catch_up`` per run: repeat ``--once`` until it
reports no window). Otherwise the service runs until SIGTERM/SIGINT, serving Prometheus metrics on
``--web.listen-address`` (default: the config's ``listen_address``, itself ``127.0.0.1:9464`` by
default).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

__all__ = ["add_arguments", "once_failures", "run"]

#: stages whose failure makes ``--once`` exit 1 (an empty window or an undefined metric is a
#: result, not a failure)
FAILING_STAGES = ("source", "data", "checkpoint", "mlflow", "export", "scheduler")


def once_failures(results: Any, sink: Any) -> list[str]:
    """Return what went wrong in a ``--once`` run, one line each (empty: exit 0)."""
    lines = [f"{r.model} window ending {r.end.isoformat()}: {stage}: {why}"
             for r in results for stage, why in r.errors.items() if stage in FAILING_STAGES]
    pending = getattr(sink, "pending", 0)
    if pending:
        lines.append(f"{pending} MLflow values could not be written (kept in the spool for "
                     "the next run)")
    return lines


def _source_problems(config: Any) -> list[str]:
    """Each model's configured columns against its source (``--check``)."""
    from ..monitor.columns import source_problems

    return [p for cfg in config.models.values() for p in source_problems(cfg)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``monitor`` options (Prometheus exporter style: dotted flag names)."""
    parser.add_argument("--config", required=True, metavar="PATH",
                        help="monitor configuration (YAML)")
    parser.add_argument("--check", action="store_true",
                        help="validate the configuration and exit (0 valid, 2 invalid)")
    parser.add_argument("--once", action="store_true",
                        help="evaluate the due windows once, write MLflow, and exit")
    parser.add_argument("--backfill-from", dest="backfill_from", metavar="TIME",
                        help="re-evaluate the windows from TIME (ISO 8601, UTC), e.g. "
                             "2026-11-01T00:00:00Z: rewinds the checkpoint first")
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
            # the YAML is valid; now its columns against each source
            config = load_config(args.config)
            for cfg in config.models.values():
                if cfg.source.kind == "spark":  # starting a session is too heavy for a check
                    print(f"{cfg.name}: columns of the spark source are checked on the first "
                          "window (a data error then)")
            problems = _source_problems(config)
            if problems:
                print(f"monitor sources have {len(problems)} problem(s):", file=sys.stderr)
                for line in problems:
                    print(f"  {line}", file=sys.stderr)
                return 2
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

    from ..monitor.redact import mask_urls_in
    from ..monitor.service import MonitorService

    backfill = None
    if getattr(args, "backfill_from", None):
        from datetime import UTC, datetime

        try:
            backfill = datetime.fromisoformat(args.backfill_from)
        except ValueError:
            print(f"--backfill-from: must be an ISO 8601 time like 2026-11-01T00:00:00Z; got "
                  f"{args.backfill_from!r}", file=sys.stderr)
            return 2
        backfill = backfill.replace(tzinfo=UTC) if backfill.tzinfo is None else backfill
    try:
        service = MonitorService(config, listen_address=args.listen_address)
        if backfill is not None:
            from ..monitor.backfill import rewind

            for line in rewind(config, service.checkpoint, backfill):
                print(line, file=sys.stderr)
    except Exception as err:  # a checkpoint store that is down, a directory not ours
        print(f"cannot start the monitor: {mask_urls_in(f'{type(err).__name__}: {err}')}"
              .splitlines()[0], file=sys.stderr)
        return 1
    if args.once:
        if not service.is_leader:  # another monitor evaluates this checkpoint's windows
            print(f"another monitor holds the checkpoint's lease "
                  f"({mask_urls_in(service.lease.describe())}); nothing evaluated",
                  file=sys.stderr)
            service.shutdown()
            return 1
        results = service.run_once()
        failures = once_failures(results, service.sink)
        for line in failures:
            print(mask_urls_in(line), file=sys.stderr)
        return 1 if failures else 0
    try:
        return service.run()
    except OSError as err:  # the address is taken or not ours to bind
        host, port = service.address
        print(f"cannot serve metrics on {host}:{port}: {err}", file=sys.stderr)
        return 1
