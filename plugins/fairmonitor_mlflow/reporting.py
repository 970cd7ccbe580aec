"""Compute the report of one evaluation: the shared report layer, called once per window.

The metrics that call the model run on the robustness window (the model's inputs), all others
on the main window (the features); the two reports are merged into one.
"""

from __future__ import annotations

import dataclasses
import logging
from types import MappingProxyType
from typing import Any

from fairmonitor import METRICS, WindowReport, evaluate_window
from fairmonitor.report.defaults import MIN_GROUP_SIZE

from .config import DEFAULT_METRICS, FairnessConfig
from .window import BuiltWindow, model_metrics

__all__ = ["compute_report", "robustness_status"]

log = logging.getLogger(__name__)

_OPT_IN = ("opt-in, not in the default set: name it in `metrics` (or metrics='all'; "
           "robustness also with robustness=True)")
_MISSING = {"y_true": "labels not available", "y_score": "no scores", "X": "no feature columns",
            "y_pred": "no predictions", "predict": "no model to call"}


def _merge(a: WindowReport, b: WindowReport) -> WindowReport:
    """Add ``b``'s values to ``a`` (same rows and groups, disjoint metrics)."""
    computed = {metric for metric, _ in b.values}

    def both(name: str) -> Any:
        return MappingProxyType({**getattr(a, name), **getattr(b, name)})

    return dataclasses.replace(
        a, values=both("values"), reasons=both("reasons"), details=both("details"),
        statuses=both("statuses"), intervals=both("intervals"),
        notes=a.notes + tuple(n for n in b.notes if n not in a.notes),
        skipped=MappingProxyType({**{k: v for k, v in a.skipped.items() if k not in computed},
                                  **b.skipped}),
        duration_seconds=a.duration_seconds + b.duration_seconds,
    )


def _default_selection(built: BuiltWindow, config: FairnessConfig
                       ) -> tuple[list[str] | None, list[str], dict[str, str]]:
    """Return the default metrics of the main and the robustness window, and the skipped.

    Without ``metrics``: the main window's and the robustness window's metrics, and why each
    other registered metric is skipped (``main`` None: every one the inputs allow).
    """
    calls_model = model_metrics()
    robust_window = built.robust_window
    skipped: dict[str, str] = {}
    robust = []
    with_robustness = config.all_metrics or config.robustness_enabled
    for name in calls_model:
        missing = [i for i in METRICS[name].inputs
                   if robust_window is None or robust_window.get(i) is None]
        if missing:  # the real reason, instead of the main window's "no model to call"
            skipped[name] = built.skipped.get(name) or _MISSING[missing[0]]
        elif with_robustness:
            robust.append(name)
        else:
            skipped[name] = _OPT_IN
    if config.all_metrics:
        return None, robust, skipped
    main = []
    for name in METRICS:
        if name in calls_model:
            continue
        missing = [i for i in METRICS[name].inputs if built.window.get(i) is None]
        if missing:
            skipped[name] = _MISSING[missing[0]]
        elif name in DEFAULT_METRICS:
            main.append(name)
        else:
            skipped[name] = _OPT_IN
    return main, robust, skipped


def _rule_notes(config: FairnessConfig) -> tuple[str, str]:
    """Which small-group rules shaped every value (issue 13 item 4)."""
    rule = (f"min_group_size={config.min_group_size}"
            + (" (the default)" if config.min_group_size == MIN_GROUP_SIZE else "")
            + ": groups with fewer rows are left out of every metric")
    conditioning = (f"min_condition_size={config.min_condition_size}: groups with fewer rows "
                    "of what a rate conditions on (positives for TPR, negatives for FPR, "
                    "predicted positives for precision) are left out of that rate's gap")
    return rule, conditioning


def compute_report(built: BuiltWindow, config: FairnessConfig) -> WindowReport:
    """Evaluate every requested (or, by default, every available) metric; return one report."""
    if built.task == "regression":  # its own metric set, on the one window (no robustness)
        metrics, opt_in = _regression_selection(config)
        report = evaluate_window(built.window, metrics=metrics,
                                 evaluation=config.evaluation.replace(task="regression"))
        return dataclasses.replace(
            report, skipped=MappingProxyType({**report.skipped, **built.skipped, **opt_in}),
            notes=(_rule_notes(config)[0], *report.notes))
    if config.metrics is None:
        main, robust, skipped = _default_selection(built, config)
    else:
        calls_model = model_metrics()
        main = [m for m in config.metrics if m not in calls_model]
        robust = [m for m in config.metrics if m in calls_model]
        skipped = {}
    _announce(built, config, main, robust)
    report = evaluate_window(built.window, metrics=main, evaluation=config.evaluation)
    log.info("fairness: %d metric values in %.1f s", len(report.values),
             report.duration_seconds)
    report = dataclasses.replace(report, skipped=MappingProxyType({**report.skipped, **skipped}),
                                 notes=(*_rule_notes(config), *report.notes))
    if built.robust_window is not None and robust:
        options = {name: _robust_options(name, built, config) for name in robust}
        report = _merge(report, evaluate_window(
            built.robust_window, metrics=robust,
            evaluation=config.evaluation.replace(options=options)))
    return report


def _regression_selection(config: FairnessConfig) -> tuple[list[str] | None, dict[str, str]]:
    """Return a regressor's metrics, and the opt-in ones left out of the default set.

    The counterpart gap (a CFair matching per attribute) is opt-in as CFair is for a
    classifier: by name in ``metrics``, or ``metrics="all"``.
    """
    if config.metrics is not None or config.all_metrics:
        return config.metrics, {}
    names = [n for n, s in METRICS.items() if s.task == "regression"]
    return ([n for n in names if not METRICS[n].needs_features],
            {n: _OPT_IN for n in names if METRICS[n].needs_features})


#: above this many rows exact HFM (quadratic in the rows) takes minutes: say so before it runs
_HFM_EXACT_ROWS = 20_000


def _announce(built: BuiltWindow, config: FairnessConfig, main: list[str] | None,
              robust: list[str]) -> None:
    """Progress: what is about to run, and a warning before work that takes minutes."""
    n = built.window.n_rows
    names = list(main) if main is not None else [
        m for m in METRICS if m not in model_metrics()]
    log.info("fairness: computing %d metric(s)%s on %d rows, %d attribute(s)", len(names),
             f" + robustness ({len(robust)} summaries)" if robust else "", n,
             len(config.attributes))
    hfm = [m for m in names if m.startswith("hfm")]
    method = {**config.options.get("hfm", {}), **config.options.get("hfm_average", {})}.get(
        "method", "exact")
    if hfm and method == "exact" and n > _HFM_EXACT_ROWS:
        log.warning("fairness: exact HFM on %d rows compares every pair of rows (cost grows "
                    "with the square of the rows: minutes from ~10^5 rows); for the average "
                    "version with a 95%% interval in a fraction of the time set "
                    "options={'hfm': {'method': 'sampled'}} (or 'approx' for upper bounds), "
                    "or leave hfm out of `metrics`.", n)


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
    return ("off: opt-in (robustness=True, a robustness dict, or a robustness_* metric in "
            "`metrics`)")
