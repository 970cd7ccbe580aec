"""``fairmonitor rules``: write the Prometheus rules and Grafana alert rules for a monitor config.

Thresholds stay in the monitor's YAML: the Prometheus rules compare every fairness gauge with
the ``fairmonitor_threshold`` series the monitor exports, so they only change when models or
their cadence change. The Grafana-managed rules carry the thresholds as constants; regenerate
them after editing thresholds. Exit 0 on success, 2 on an invalid config or option.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``rules`` options."""
    parser.add_argument("--config", required=True, metavar="PATH",
                        help="monitor configuration (YAML)")
    parser.add_argument("--out", default="dashboards", metavar="DIR",
                        help="output directory: writes alerts/fairmonitor.rules.yml and "
                             "provisioning/alerting/fairmonitor.yaml (default: dashboards)")
    parser.add_argument("--grafana-url", default="http://localhost:3000", metavar="URL",
                        help="Grafana base URL for the dashboard link in alerts "
                             "(default: http://localhost:3000)")
    parser.add_argument("--stale-after", type=int, default=3, metavar="N",
                        help="cadences without a successful window before the staleness "
                             "alert fires (default: 3)")
    parser.add_argument("--for-warning", default="15m", metavar="DURATION",
                        help="how long a warning threshold must be breached (default: 15m)")
    parser.add_argument("--for-critical", default="5m", metavar="DURATION",
                        help="how long a critical threshold must be breached (default: 5m)")
    parser.add_argument("--error-window", default="15m", metavar="DURATION",
                        help="range of the error-rate alert (default: 15m)")
    parser.add_argument("--absent-for", default="5m", metavar="DURATION",
                        help="how long the monitor may be unscraped (default: 5m)")


def run(args: Any) -> int:
    """Run the subcommand; return the exit code."""
    from pathlib import Path

    from ..alerting.provisioning import write_rules
    from ..alerting.rules import AlertOptions
    from ..exceptions import ConfigError
    from ..monitor.config import load_config, parse_duration

    try:
        durations = {}
        for flag in ("for_warning", "for_critical", "error_window", "absent_for"):
            try:
                durations[flag] = parse_duration(getattr(args, flag))
            except ValueError as err:
                raise ConfigError(f"--{flag.replace('_', '-')}: {err}") from None
        options = AlertOptions(grafana_url=args.grafana_url, stale_after=args.stale_after,
                               **durations)
        config = load_config(args.config)
    except ConfigError as err:
        print(str(err), file=sys.stderr)
        return 2
    for path in write_rules(config, args.out, options, source=Path(args.config).name):
        print(f"wrote {path}")
    return 0
