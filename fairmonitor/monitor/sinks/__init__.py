"""Where a window's report goes.

Prometheus gauges (``prometheus``) and MLflow metrics (``mlflow``).
"""
