"""Rules for a regression model (issue 29): its metrics are alertable like any other."""

from __future__ import annotations

from fairmonitor.alerting.rules import AlertOptions, render_prometheus_rules
from fairmonitor.monitor.config import load_config

from .conftest import RUNBOOK_URL, run_promtool

CONFIG = """
models:
  limits:
    task: regression
    source: {kind: sql, url: "sqlite://"}
    sensitive_features: [sex]
    prediction: prediction
    label: label
    window: 1h
    metrics: [mae_difference, mae_ratio, mean_residual_difference, prediction_ks_distance]
    thresholds:
      mean_residual_difference: {warning: 1.0, critical: 2.0}
      mae_ratio: {warning: 0.8, critical: 0.6}
      prediction_ks_distance: {warning: 0.1, critical: 0.2, compare: bound}
"""


def test_rules_of_a_regression_model_pass_promtool(promtool, tmp_path):
    text = render_prometheus_rules(load_config(CONFIG), AlertOptions(
        grafana_url="http://localhost:3000", runbook_url=RUNBOOK_URL))
    for name in ("mae_ratio", "mean_residual_difference", "prediction_ks_distance"):
        assert name in text  # the one metric-value recording rule lists every registry name
    path = tmp_path / "rules.yml"
    path.write_text(text)
    result = run_promtool(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
