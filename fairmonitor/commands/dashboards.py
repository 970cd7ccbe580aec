"""``fairmonitor dashboards``: (re)generate the Grafana dashboard and its provisioning files.

Writes ``fairmonitor.json`` (built with grafana-foundation-sdk, Grafana 11.6 flavour) and the
data source / dashboard provider provisioning YAML under ``--out`` (default ``dashboards``).
The dashboard reads models, metrics and thresholds from Prometheus, so it does not depend on
the monitor config. Needs the ``dashboards`` extra (``pip install 'fairmonitor[dashboards]'``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``dashboards`` options."""
    parser.add_argument("--out", default="dashboards", metavar="DIR",
                        help="output directory (default: dashboards)")
    parser.add_argument("--prometheus-url", default="http://prometheus:9090", metavar="URL",
                        help="URL of Prometheus as seen from Grafana, for the provisioned "
                             "data source (default: http://prometheus:9090)")


def run(args: Any) -> int:
    """Run the subcommand; return the exit code."""
    try:
        from ..alerting.provisioning import write_dashboards

        paths = write_dashboards(args.out, prometheus_url=args.prometheus_url)
    except ModuleNotFoundError as err:
        if err.name is None or not err.name.startswith("grafana_foundation_sdk"):
            raise
        print("fairmonitor dashboards needs grafana-foundation-sdk: "
              "pip install 'fairmonitor[dashboards]'", file=sys.stderr)
        return 1
    for path in paths:
        print(f"wrote {path}")
    return 0
