"""Process-wide state the demo touches, set for its duration and restored after.

MLflow keeps its tracking and registry URIs in module globals and mirrors them in environment
variables; library loggers print INFO lines the demo's own output already says better. Both are
restored on exit, so the demo can run inside a larger process (the test session).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

__all__ = ["mlflow_store", "quiet_logs"]


@contextlib.contextmanager
def mlflow_store(uri: str) -> Iterator[None]:
    """Use ``uri`` as MLflow's tracking and registry URI; restore both (and the env) after."""
    import mlflow
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils

    env = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    saved = (getattr(tracking_utils, "_tracking_uri", None),
             getattr(registry_utils, "_registry_uri", None))
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(saved[0])  # type: ignore[arg-type]
        registry_utils._registry_uri = saved[1]
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    """Keep library INFO chatter out of the demo's output (unless --log-level DEBUG)."""
    if logging.getLogger("fairmonitor").getEffectiveLevel() <= logging.DEBUG:
        yield
        return
    levels = {"mlflow": logging.WARNING, "alembic": logging.WARNING,
              "fairmonitor.metrics": logging.WARNING, "fairmonitor.robustness": logging.WARNING,
              "fairmonitor.monitor.service": logging.WARNING,
              # a tick slower than --tick is skipped, by design; not worth a warning here
              "apscheduler": logging.ERROR}
    saved = {n: logging.getLogger(n).level for n in levels}
    for n, level in levels.items():
        logging.getLogger(n).setLevel(level)
    try:
        yield
    finally:
        for n, level in saved.items():
            logging.getLogger(n).setLevel(level)
