"""Alerting and dashboards as code, generated from the monitor's YAML and metric names.

- :mod:`.rules`: Prometheus rules (one generic threshold alert per severity reading the
  ``fairmonitor_threshold*`` series, staleness, errors, absence) — ``fairmonitor rules``.
- :mod:`.grafana_alerts`: the same thresholds as Grafana-managed alert rules (provisioning).
- :mod:`.dashboard`: the Grafana dashboard (grafana-foundation-sdk, the ``dashboards`` extra) —
  ``fairmonitor dashboards``.
- :mod:`.provisioning`: Grafana data source / dashboard provisioning and the file layout.

Nothing here is imported by ``import fairmonitor``.
"""

from .rules import AlertOptions, prometheus_rules, render_prometheus_rules

__all__ = ["AlertOptions", "prometheus_rules", "render_prometheus_rules"]
