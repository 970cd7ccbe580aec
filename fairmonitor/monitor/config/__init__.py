"""Monitor configuration: YAML in, frozen validated dataclasses out.

Validation reads the whole file before failing, so one :class:`~fairmonitor.exceptions.ConfigError`
lists every problem, one per line, each naming the dotted key path, the bad value and what is
allowed (pve-exporter's ``ConfigInvalid``, nannyml's scheduling messages). Metric names are
checked against :data:`fairmonitor.METRICS`; thresholds become
:class:`fairmonitor.report.thresholds.Threshold` objects with the registry's ``default_bound``.

The schema, with defaults (``load_config`` of this text works as is)::

    listen_address: 127.0.0.1:9464       # the Prometheus endpoint
    checkpoint: fairmonitor-checkpoint.json   # a path (JSON) or a SQLAlchemy URL (a table)
    mlflow_spool: fairmonitor-mlflow-pending.jsonl  # MLflow values not yet written, kept
                                          #   across restarts; default: beside a checkpoint
                                          #   file (none with a SQL checkpoint); null: memory
    catch_up: 100                         # at most this many missed windows per model and phase
    timezone: UTC                         # windows are aligned on the Unix epoch in UTC
    mlflow_timeout: 10s                   # per MLflow request, no retries within a tick
    models:
      credit:                             # monitor name = the `model` value in the source
        model: models:/credit@champion    # or models:/credit/3, a registered name, or
                                          #   {name: credit, version: 3} / {name:, alias:}
        tracking_uri: sqlite:///mlflow.db
        source: {kind: sql, url: "sqlite:///predictions.db", table: predictions,
                 timeout: 5m}             # a fetch taking longer is a source error
        sensitive_features: [sex]
        prediction: prediction            # and/or score: score
        label: label                      # ground truth, when it arrives
        window: 1h
        every: 5m                         # omitted: tumbling windows
        labels_after: 24h                 # label metrics wait this long after the window end
        team: risk                        # routing labels of every alert of the model
        owner: alice                      #   (optional; exported as fairmonitor_model_info)
        relabel_within: 24h               # default labels_after: windows with missing labels
                                          #   are evaluated again when more labels arrive
        min_label_coverage: 0.5           # labelled fraction due by labels_after; below it:
                                          #   labels overdue (FairmonitorLabelsOverdue)
        metrics: [demographic_parity_difference]
        alerting:                         # the false-page budget of compare: budget
          budget: {false_pages: 1, per: 90d, null_fraction: 0.5, alternative_fraction: 1.5}
        thresholds:                       # bound defaults to the metric's direction; the
                                          #   other side needs against_direction: true
          demographic_parity_difference: {warning: 0.1, critical: 0.2, compare: budget}
                                          # compare: value (the default), bound or budget
                                          #   (docs/alert-modes.md)
        alert_windows: {warning: 3, critical: 2, undefined: 2}  # consecutive windows before
                                          #   each alert fires, counted by the monitor

Every relative path resolves against the config file's directory, never the working directory:
files, the checkpoint, the spool and relative SQLite URLs (``sqlite:///predictions.db`` of a
source, a checkpoint or ``tracking_uri``). Other URLs are left as written. A missing SQLite
source file is an error (``--check`` reports it; the monitor never creates it).
"""

from .durations import DURATION_HELP, format_duration, parse_duration
from .load import check_config, load_config
from .model import (
    DEFAULT_CHECKPOINT,
    DEFAULT_LISTEN_ADDRESS,
    DEFAULT_MLFLOW_SPOOL,
    DEFAULT_TRACKING_URI,
    AlertWindows,
    CheckpointConfig,
    ModelConfig,
    MonitorConfig,
    ReferenceConfig,
    SourceConfig,
)

__all__ = [
    "DEFAULT_CHECKPOINT", "DEFAULT_LISTEN_ADDRESS", "DEFAULT_MLFLOW_SPOOL", "DEFAULT_TRACKING_URI",
    "DURATION_HELP", "AlertWindows", "CheckpointConfig", "ModelConfig", "MonitorConfig",
    "ReferenceConfig", "SourceConfig", "check_config", "format_duration", "load_config",
    "parse_duration",
]
