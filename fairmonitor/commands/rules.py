"""``fairmonitor rules``: write the Prometheus rules and the opt-in Grafana alerting files.

Thresholds and alert windows stay in the monitor's YAML: the Prometheus rules compare the
streaks the monitor counts (``fairmonitor_breach_windows``) with the windows each needs
(``fairmonitor_breach_windows_required``) and read each model's cadence and routing labels
from its series, so they only change with these options. ``--windows-warning``,
``--windows-critical`` and ``--windows-undefined`` moved to ``models.<name>.alert_windows``;
given here they are an error naming the key. The Grafana-managed
rules carry the thresholds as constants; regenerate them after editing thresholds. Exit 0 on
success, 2 on an invalid config or option.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_arguments", "run"]

_DURATIONS = ("for_health", "error_window", "absent_for", "keep_firing_for", "hold_missing")
#: Options that moved to the monitor config (``alert_windows``): an error that says where.
_MOVED = ("warning", "critical", "undefined")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``rules`` options."""
    parser.add_argument("--config", required=True, metavar="PATH",
                        help="monitor configuration (YAML)")
    parser.add_argument("--out", default="dashboards", metavar="DIR",
                        help="output directory: writes alerts/fairmonitor.rules.yml and "
                             "grafana-alerting/fairmonitor.yaml (default: dashboards)")
    parser.add_argument("--grafana-url", required=True, metavar="URL",
                        help="Grafana base URL as seen by whoever receives the alert, "
                             "absolute http(s) (dashboard links in every alert)")
    parser.add_argument("--runbook-url", required=True, metavar="URL",
                        help="absolute http(s) URL where docs/runbook.md is served; every "
                             "alert links <URL>#<alertname> (docs/alert-routing.md)")
    for flag in _MOVED:  # the monitor counts the windows now (issue 24)
        parser.add_argument(f"--windows-{flag}", type=int, default=None, metavar="N",
                            help=f"removed: set models.<name>.alert_windows.{flag} in the "
                                 "monitor config (the monitor counts the windows)")
    parser.add_argument("--stale-after", type=int, default=3, metavar="N",
                        help="cadences without a successful window before the staleness "
                             "alert fires (default: 3)")
    parser.add_argument("--for-health", default="5m", metavar="DURATION",
                        help="for: of the staleness, never-evaluated, labels-overdue and error "
                             "alerts (default: 5m)")
    parser.add_argument("--error-window", default="15m", metavar="DURATION",
                        help="range of the error-rate alert (default: 15m)")
    parser.add_argument("--absent-for", default="2m", metavar="DURATION",
                        help="how long a monitor may be down or unscraped (default: 2m)")
    parser.add_argument("--keep-firing-for", default="0s", metavar="DURATION",
                        help="keep_firing_for of the threshold alerts (default: 0s; undefined "
                             "windows keep the alert state anyway)")
    parser.add_argument("--hold-missing", default="10m", metavar="DURATION",
                        help="how long the rules keep the last streaks of a series that is "
                             "missing, e.g. during a restart (default: 10m)")
    parser.add_argument("--scrape-job", default="fairmonitor", metavar="REGEX",
                        help="Prometheus job label of the monitor's targets (default: "
                             "fairmonitor)")


def run(args: Any) -> int:
    """Run the subcommand; return the exit code."""
    from datetime import timedelta
    from pathlib import Path

    from ..alerting.provisioning import write_rules
    from ..alerting.rules import AlertOptions
    from ..exceptions import ConfigError
    from ..monitor.config import load_config, parse_duration

    try:
        moved = [f for f in _MOVED if getattr(args, f"windows_{f}") is not None]
        if moved:
            raise ConfigError("; ".join(
                f"--windows-{f}: the monitor counts alert windows now; set "
                f"models.<name>.alert_windows.{f}: {getattr(args, f'windows_{f}')} in the "
                "monitor config instead" for f in moved))
        durations = {}
        for flag in _DURATIONS:
            text = getattr(args, flag)
            try:
                durations[flag] = (timedelta(0) if text.strip() in ("0", "0s")
                                   else parse_duration(text))
            except ValueError as err:
                raise ConfigError(f"--{flag.replace('_', '-')}: {err}") from None
        options = AlertOptions(
            grafana_url=args.grafana_url, runbook_url=args.runbook_url,
            stale_after=args.stale_after,
            scrape_job=args.scrape_job, **durations)
        config = load_config(args.config)
    except ConfigError as err:
        print(str(err), file=sys.stderr)
        return 2
    for path in write_rules(config, args.out, options, source=Path(args.config).name):
        print(f"wrote {path}")
    return 0
