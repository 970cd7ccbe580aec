"""Compute the report of one evaluation: the shared report layer, called once per window.

The metrics that call the model run on the robustness window (the model's inputs), all others
on the main window (the features); the two reports are merged into one.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

from fairmonitor import METRICS, WindowReport, evaluate_window

from .config import FairnessConfig
from .window import BuiltWindow, model_metrics

__all__ = ["compute_report", "robustness_status"]

_MISSING = {"y_true": "labels not available", "y_score": "no scores", "X": "no feature columns",
            "y_pred": "no predictions", "predict": "no model to call"}


def _merge(a: WindowReport, b: WindowReport) -> WindowReport:
    """Add ``b``'s values to ``a`` (same rows and groups, disjoint metrics)."""
    computed = {metric for metric, _ in b.values}

    def both(name: str) -> Any:
        return MappingProxyType({**getattr(a, name), **getattr(b, name)})

    return dataclasses.replace(
        a, values=both("values"), reasons=both("reasons"), details=both("details"),
        statuses=both("statuses"),
        notes=a.notes + tuple(n for n in b.notes if n not in a.notes),
        skipped=MappingProxyType({**{k: v for k, v in a.skipped.items() if k not in computed},
                                  **b.skipped}),
        duration_seconds=a.duration_seconds + b.duration_seconds,
    )


def compute_report(built: BuiltWindow, config: FairnessConfig) -> WindowReport:
    """Evaluate every requested (or, by default, every available) metric; return one report."""
    calls_model = model_metrics()
    robust_window = built.robust_window
    skipped: dict[str, str] = {}
    if config.metrics is None:
        main = None
        robust = []
        for name in calls_model:
            missing = [i for i in METRICS[name].inputs
                       if robust_window is None or robust_window.get(i) is None]
            if not missing:
                robust.append(name)
            else:  # the real reason, instead of the main window's "no model to call"
                skipped[name] = built.skipped.get(name) or _MISSING[missing[0]]
    else:
        main = [m for m in config.metrics if m not in calls_model]
        robust = [m for m in config.metrics if m in calls_model]
    common = {"min_group_size": config.min_group_size, "intersection": config.intersection,
              "thresholds": config.thresholds, "rng": config.rng}
    report = evaluate_window(built.window, metrics=main, options=config.options, **common)
    report = dataclasses.replace(report, skipped=MappingProxyType({**report.skipped, **skipped}))
    if robust_window is not None and robust:
        options = {name: _robust_options(name, built, config) for name in robust}
        report = _merge(report, evaluate_window(robust_window, metrics=robust, options=options,
                                                **common))
    return report


def _robust_options(name: str, built: BuiltWindow, config: FairnessConfig) -> dict[str, Any]:
    options = {**config.robustness, **config.options.get(name, {})}
    for key, value in built.robust_options.items():  # e.g. frozen sensitive columns, added
        options[key] = {**options.get(key, {}), **value} if isinstance(value, dict) else value
    return options


def robustness_status(report: WindowReport, built: BuiltWindow) -> str:
    """``on``, or ``skipped: <why>``: the value of the run tag ``fairness.robustness``."""
    if built.robust_window is None:
        return built.sources["robustness"]
    calls_model = set(model_metrics())
    if any(metric in calls_model for metric, _ in report.values):
        return "on"
    return "skipped: no robustness metric requested (`metrics`)"
