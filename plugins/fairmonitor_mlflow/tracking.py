"""MLflow metric keys, per-level robustness metrics, run tags, and logging them to the run.

Metric keys (stable; documented in the README):

=============================================================  ==============================
``fairness/<metric>/<attribute>``                              one value per registry metric
                                                               and attribute (as
                                                               :meth:`WindowReport.flat`)
``fairness/ci_lower/<metric>/<attribute>``                     its confidence interval (95%
``fairness/ci_upper/<metric>/<attribute>``                     unless ``confidence_level``)
``fairness/chance/<metric>/<attribute>``                       what a fair model reads at
                                                               these group sizes
``fairness/group_count/<attribute>/<group>``                   rows per group
``fairness/missing_count/<attribute>``                         rows with a missing value
``fairness/robustness_ratio/<fairness metric>/<attribute>``    R_k at ``step`` = level index
``fairness/robustness_gap/<fairness metric>/<attribute>``      mean gap under noise, per step
``fairness/robustness_gap_se/<fairness metric>/<attribute>``   its standard error, per step
``fairness/robustness_flip_rate/<attribute>``                  flipped predictions, per step
``fairness/robustness_level/<attribute>``                      the noise level k of each step
=============================================================  ==============================

MLflow allows only letters, digits and ``_ - . : / space`` in keys, so attribute and group names
are made safe by :func:`safe_name` (``">=25"`` becomes ``"ge25"``); the exact labels are in the
group table artifact. Keys of names that are already safe equal :meth:`WindowReport.flat`'s.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fairmonitor import WindowReport
from fairmonitor.report import safe_name

__all__ = ["PREFIX", "ArtifactWarning", "log_metrics", "result_metrics", "robustness_details",
           "safe_name", "status_tags", "step_metrics", "sync_active_run"]

PREFIX = "fairness"

def _key(*parts: Any) -> str:
    return "/".join([PREFIX, *(safe_name(p) for p in parts)])


def result_metrics(report: WindowReport,
                   missing: Mapping[str, tuple[str, int]] | None = None) -> dict[str, float]:
    """Return the scalar metrics of the evaluation: values, group counts, missing counts.

    These go into ``EvaluationResult.metrics`` (so ``validate_evaluation_results`` sees them).
    ``missing`` is the window's ``missing_counts``: ``fairness/missing_count/<attribute>`` is
    the number of rows whose value was missing (grouped or dropped, as configured).
    """
    out = {_key(metric, attr): float(v) for (metric, attr), v in report.values.items()}
    for (metric, attr), iv in report.intervals.items():
        for part, v in (("ci_lower", iv.lower), ("ci_upper", iv.upper), ("chance", iv.chance)):
            out[_key(part, metric, attr)] = float(v)
    for attr, (_, n) in (missing or {}).items():
        out[_key("missing_count", attr)] = float(n)
    for attr, counts in report.group_counts.items():
        for group, n in counts.items():
            key = base = _key("group_count", attr, group)
            i = 2
            while key in out:  # two labels made identical by safe_name stay distinct
                key, i = f"{base}_{i}", i + 1
            out[key] = float(n)
    return out


def robustness_details(report: WindowReport) -> dict[str, Any]:
    """Return the robustness result of each attribute (shared by its summaries)."""
    out: dict[str, Any] = {}
    for (_, attr), detail in report.details.items():
        if attr not in out and hasattr(detail, "levels") and hasattr(detail, "ratios"):
            out[attr] = detail
    return out


def _series(detail: Any, name: str) -> Mapping[str, Any]:
    value = getattr(detail, name, None)
    return value if isinstance(value, Mapping) else {}


def step_metrics(report: WindowReport) -> list[tuple[str, float, int]]:
    """Per-level robustness metrics as ``(key, value, step)``; step = index into the levels."""
    rows: list[tuple[str, float, int]] = []
    for attr, detail in robustness_details(report).items():
        levels = [float(k) for k in np.asarray(detail.levels, dtype=float)]
        rows += [(_key("robustness_level", attr), k, i) for i, k in enumerate(levels)]
        for field, attribute in (("ratio", "ratios"), ("gap", "gaps"), ("gap_se", "gap_se")):
            for metric, values in _series(detail, attribute).items():
                arr = np.asarray(values, dtype=float).reshape(-1)
                rows += [(_key(f"robustness_{field}", metric, attr), float(v), i)
                         for i, v in enumerate(arr[: len(levels)])]
        flips = getattr(detail, "flip_rate", None)
        if flips is not None:
            arr = np.asarray(flips, dtype=float).reshape(-1)
            rows += [(_key("robustness_flip_rate", attr), float(v), i)
                     for i, v in enumerate(arr[: len(levels)])]
    return rows


class ArtifactWarning(UserWarning):
    """A fairness artifact (table, plot, report, upload) failed; the metrics are complete."""


def status_tags(report: WindowReport, robustness: str,
                failures: Iterable[str] = ()) -> dict[str, str]:
    """Run tags: ``fairness.status``, the breaching keys, robustness, artifact failures.

    ``fairness.status`` is :attr:`WindowReport.status`: ``ok``, ``warning``, ``critical``, or
    ``undefined`` (a governed value is NaN, a metric failed, or nothing is defined).
    """
    breaches = sorted(_key(m, a) for (m, a), s in report.statuses.items()
                      if s in ("warning", "critical"))
    failed = list(failures)
    return {
        "fairness.status": report.status,
        "fairness.breaches": ", ".join(breaches) if breaches else "none",
        "fairness.robustness": robustness[:5000],
        "fairness.failures": "; ".join(failed)[:5000] if failed else "none",
    }


def log_metrics(run_id: str, scalars: Mapping[str, float],
                steps: Iterable[tuple[str, float, int]], tags: Mapping[str, str], *,
                model_id: str | None, dataset: Any) -> None:
    """Log to the run in one batch: scalars (at step 0), per-level metrics and tags.

    Pass ``scalars={}`` when ``model_id`` is set: ``mlflow.models.evaluate`` then logs the
    returned metrics itself (to the run and the LoggedModel), and logging them here as well would
    give every key two history entries (integration.md §1.7).
    """
    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient

    ts = int(time.time() * 1000)
    name = getattr(dataset, "name", None)
    digest = getattr(dataset, "digest", None)
    if name is None or digest is None:
        name = digest = None

    def metric(key: str, value: float, step: int) -> Metric:
        # NaN and inf are fine: the tracking stores record them (sqlalchemy_store.py:1379)
        return Metric(key, value, ts, step, model_id=model_id, dataset_name=name,
                      dataset_digest=digest, run_id=run_id)

    metrics = [metric(k, v, 0) for k, v in scalars.items()]
    metrics += [metric(k, v, step) for k, v, step in steps]
    MlflowClient().log_batch(run_id, metrics=metrics,
                             tags=[RunTag(k, v) for k, v in tags.items()])


def sync_active_run(run_id: str) -> bool:
    """Bring the active run object's inputs up to date with the store; return whether it was.

    ``mlflow.models.evaluate`` logs the metrics an evaluator returns with
    ``mlflow.log_metrics(..., dataset=data, model_id=...)``, against the active run *object*
    made by ``mlflow.start_run`` (since mlflow/mlflow#18241 it is no longer re-read). Its inputs
    predate the evaluation, so the evaluation dataset (logged meanwhile) looks new to it and is
    sent to the store again once per returned metric: ~140 dataset inputs a run, which cost a
    regressor's evaluation about 0.07 s of CPU (``benchmarks/bench_regression.py``). With the
    object's inputs re-read here, the dataset is sent once, by ``evaluate`` itself, and the
    run's logged inputs are the same.

    Only an optimization: when there is no active run of ``run_id`` (or the store cannot be
    read) nothing changes and MLflow logs as before.
    """
    import mlflow
    from mlflow.tracking import MlflowClient

    active = mlflow.active_run()
    if active is None or active.info.run_id != run_id or not hasattr(active, "_inputs"):
        return False
    try:
        inputs = MlflowClient().get_run(run_id).inputs
    except Exception:  # an unreadable store: MLflow's own logging will say so, not this
        return False
    active._inputs = inputs  # the attribute MLflow itself updates after logging inputs
    return True
