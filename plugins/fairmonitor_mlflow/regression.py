"""The evaluator's regressor path: ``model_type="regressor"`` (issue 29).

A regressor's ``predict`` output and the targets are continuous: they go into the window as
they are (no ``pos_label``, no threshold, no scores), and the report is the registry's
regression metric set (``evaluate_window(task="regression")``: error parity, the prediction's
distributional parity, bounded group loss). Artifacts: a per-group error table, each
attribute's per-group residual distributions and prediction CDFs, and the same report
JSON/HTML as a classifier's. The model's inputs are chosen as for a classifier
(:mod:`.window`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fairmonitor import Window
from fairmonitor._validation import check_continuous
from fairmonitor.exceptions import ConfigError
from fairmonitor.report.registry import METRICS
from fairmonitor.utils.groups import encode_groups

from .config import FairnessConfig
from .window import (
    BuiltWindow,
    _Columns,
    _declared_inputs,
    _frame,
    _predict_output,
    _select_inputs,
    _underlying,
)

__all__ = ["build_regression_window", "regression_group_table", "regression_plots"]

_NOT_REGRESSION = "applies to classifiers; this evaluation is of a regressor"


def _predictions(dataset: Any, model: Any, frame: Any, model_columns: list[str],
                 config: FairnessConfig, predictions: str | None,
                 sources: dict[str, str]) -> tuple[NDArray[np.float64], Any]:
    """Return the regressor's predictions and its predict function (None without a model).

    The predictions are ``model.predict``'s, or the static column's.
    """
    predict = None
    if model is None:
        if dataset.predictions_data is None:
            raise ConfigError("the evaluation has no model and no predictions: pass a model, "
                              "or `predictions=` naming a column of model outputs.")
        sources["y_pred"] = f"column {dataset.predictions_name!r}"
        output = np.asarray(dataset.predictions_data)
    else:
        raw, _ = _underlying(model)
        declared = _declared_inputs(model, raw)
        if declared is not None:
            model_columns[:] = _select_inputs(declared, frame, config)
            sources["model inputs"] = "the model's " + declared[1]
        predict = raw.predict if raw is not None and hasattr(raw, "predict") else model.predict
        output = _predict_output(predict, frame, model_columns, predictions)
        sources["y_pred"] = "model.predict"
    output = (np.asarray(output).reshape(len(frame), -1)[:, 0] if np.ndim(output) == 2
              else output)
    return check_continuous(output, "the model's predictions"), predict


def _predict_rows(predict: Any, columns: list[str], X: Any) -> NDArray[np.float64]:
    """Return the model's predictions of the rows ``X`` (the robustness metrics' copies)."""
    out = np.asarray(predict(X[columns]))
    return out.reshape(len(X), -1)[:, 0] if out.ndim == 2 else out


def build_regression_window(dataset: Any, model: Any, config: FairnessConfig, *,
                            predictions: str | None = None) -> BuiltWindow:
    """Build the window of one regressor evaluation (continuous predictions and targets).

    Raises
    ------
    ConfigError
        A configured column is missing, or a requested metric is a classifier's.
    """
    frame = _frame(dataset)
    cols = _Columns(dataset, frame)
    sensitive = {c: cols.get(c, "sensitive_features") for c in config.sensitive_features}
    sources: dict[str, str] = {}
    weights = None
    if config.sample_weight is not None:
        weights = cols.get(config.sample_weight, "sample_weight")
        sources["sample_weight"] = f"column {config.sample_weight!r}"
    model_columns = [c for c in frame.columns if c != config.sample_weight
                     and (config.model_uses_sensitive or c not in config.sensitive_features)]
    y_pred, predict = _predictions(dataset, model, frame, model_columns, config, predictions,
                                   sources)
    y_true = None
    if dataset.labels_data is not None:
        y_true = check_continuous(np.asarray(dataset.labels_data), "the targets")
        sources["y_true"] = f"column {dataset.targets_name!r}"
    wrong = [m for m in config.metrics or () if METRICS[m].task != "regression"]
    if wrong:
        raise ConfigError(f"metrics: {wrong} {_NOT_REGRESSION}; the regression metrics are "
                          f"{[n for n, s in METRICS.items() if s.task == 'regression']}.")
    X, row_predict = _row_inputs(frame, config, sensitive, model_columns, predict, sources)
    window = Window(sensitive, y_pred=y_pred, y_true=y_true, missing=config.missing,
                    sample_weight=weights, X=X, predict=row_predict)
    skipped = {n: _NOT_REGRESSION for n, s in METRICS.items() if s.task != "regression"}
    return BuiltWindow(window=window, robust_window=None, robust_options={}, sources=sources,
                       skipped=skipped, task="regression")


def _row_inputs(frame: Any, config: FairnessConfig, sensitive: Mapping[str, Any],
                model_columns: list[str], predict: Any, sources: dict[str, str]
                ) -> tuple[Any, Any]:
    """Return the row metrics' features and the model's row predict (None when it cannot).

    The counterpart gap reads ``features``, else the model's inputs (never sensitive); the
    noise metrics perturb those features and call the model on them, so they must be its
    inputs.
    """
    features = list(config.features or [c for c in model_columns if c not in sensitive])
    row_predict = (functools.partial(_predict_rows, predict, list(model_columns))
                   if predict is not None and features == model_columns else None)
    sources["X"] = f"columns {features}" if features else "none"
    sources["robustness"] = ("opt-in: the robustness_*_gap_* metrics" if row_predict is not None
                             else "skipped: needs a model whose inputs are the features")
    return (frame[features] if features else None), row_predict


def _groups_of(columns: Mapping[str, Any], n: int) -> Any:
    """Every group of an attribute (the table marks the ones ``min_group_size`` leaves out)."""
    return encode_groups(dict(columns), n_samples=n)


def regression_group_table(report: Any, window: Window, config: FairnessConfig) -> Any:
    """One row per (attribute, group): count, MAE, RMSE, mean residual, mean prediction/target.

    Weighted means with the window's ``sample_weight`` (``count`` stays rows).
    """
    import pandas as pd

    from .artifacts import _attributes, _label

    y_pred = np.asarray(window.y_pred, dtype=float)
    y_true = None if window.y_true is None else np.asarray(window.y_true, dtype=float)
    w = np.ones(y_pred.size) if window.sample_weight is None else window.sample_weight
    rows = []
    for attr, cols in _attributes(report, window).items():
        groups = _groups_of(cols, y_pred.size)
        codes, k = groups.codes, groups.n_groups
        total = np.bincount(codes, weights=w, minlength=k)
        means = {"mean_prediction": y_pred}
        if y_true is not None:
            residual = y_pred - y_true
            means.update(mean_target=y_true, mae=np.abs(residual), rmse=residual ** 2,
                         mean_residual=residual)
        stats = {key: np.bincount(codes, weights=w * v, minlength=k) / total
                 for key, v in means.items()}
        if "rmse" in stats:
            stats["rmse"] = np.sqrt(stats["rmse"])
        for i, label in enumerate(groups.labels):
            rows.append({"attribute": attr, "group": _label(label),
                         "count": int(groups.counts[i]),
                         "included": bool(groups.counts[i] >= config.min_group_size),
                         **{key: float(v[i]) for key, v in stats.items()}})
    return pd.DataFrame(rows)


def regression_plots(report: Any, window: Window, config: FairnessConfig,
                     attrs: Mapping[str, Any], file_part: Any) -> list[tuple[str, Any, str]]:
    """Return ``[(path, build, title)]``: per attribute, prediction CDFs and residuals.

    One figure per sensitive attribute (the intersection's groups are in the tables): the
    figures are most of the evaluator's time on a regressor.
    """
    from . import plots

    out: list[tuple[str, Any, str]] = []
    residual = (None if window.y_true is None
                else np.asarray(window.y_pred, float) - np.asarray(window.y_true, float))
    for attr, cols in attrs.items():
        if attr not in window.sensitive_features:
            continue

        def figure(attr: str = attr, cols: Any = cols) -> Any:
            return plots.regression_panels(
                attr, cols, window.y_pred, residual, min_group_size=config.min_group_size,
                ks=report.values.get(("prediction_ks_distance", attr)),
                residual_gap=report.values.get(("mean_residual_difference", attr)))

        out.append((f"plots/fairness_regression__{file_part(attr)}.png", figure,
                    f"Prediction CDFs and residuals by {attr}"))
    return out
