"""The scheduled production monitor: windows of logged predictions -> fairness reports.

Layers, each usable on its own:

- :mod:`~fairmonitor.monitor.config`: YAML -> frozen, validated dataclasses.
- :mod:`~fairmonitor.monitor.sources`: where production windows come from (SQL, files).
- :mod:`~fairmonitor.monitor.logger`: :class:`PredictionLogger`, for serving apps.
- :mod:`~fairmonitor.monitor.windows`: window arithmetic, due windows, label delay, catch-up.
- :mod:`~fairmonitor.monitor.checkpoint`: restart-safe progress per model.
- :mod:`~fairmonitor.monitor.job`: plain functions evaluating due windows (no scheduler).
- :mod:`~fairmonitor.monitor.exporter`, ``mlflow_sink``, ``service``: the outputs and the
  APScheduler shell.

Nothing here is imported by ``import fairmonitor``; submodules import their heavy dependencies
(SQLAlchemy, pandas, mlflow, prometheus_client, apscheduler) themselves.
"""
