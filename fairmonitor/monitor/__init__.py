"""The scheduled production monitor: windows of logged predictions -> fairness reports.

Layers, each usable on its own:

- :mod:`~fairmonitor.monitor.config`: YAML -> frozen, validated dataclasses.
- :mod:`~fairmonitor.monitor.sources`: where production windows come from (SQL, files).
- :mod:`~fairmonitor.monitor.sources.logger`: :class:`PredictionLogger`, for serving apps.
- :mod:`~fairmonitor.monitor.windows`: window arithmetic, due windows, label delay, catch-up.
- :mod:`~fairmonitor.monitor.checkpoint`: restart-safe progress per model.
- :mod:`~fairmonitor.monitor.job`: plain functions evaluating due windows (no scheduler).
- :mod:`~fairmonitor.monitor.versions`, :mod:`~fairmonitor.monitor.merge`: per-version reports
  and their merge into one per window.
- :mod:`~fairmonitor.monitor.sinks`: the outputs, Prometheus gauges (``sinks.prometheus``) and
  MLflow metrics (``sinks.mlflow``).
- :mod:`~fairmonitor.monitor.service`: the APScheduler shell and the ``/metrics`` server.

Nothing here is imported by ``import fairmonitor``; submodules import their heavy dependencies
(SQLAlchemy, pandas, mlflow, prometheus_client, apscheduler) themselves.
"""
