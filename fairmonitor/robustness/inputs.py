"""Inputs of the robustness ratio: the model adapter, X and sensitive-feature checks, sampling.

Kept apart from :mod:`fairmonitor.robustness` so that module reads as the algorithm. DataFrames
are handled by duck typing (``.columns``, ``.iloc``); nothing here imports pandas.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import check_same_length
from ..exceptions import InvalidInputError
from ..utils.groups import encode_groups, sensitive_columns

log = logging.getLogger("fairmonitor.robustness")

#: Spec §5.5: fewer sampled rows than this in a (group, label) cell makes the gaps noisy.
MIN_CELL_ROWS = 500


def as_predict(predict: Any) -> Callable[[Any], Any]:
    """Return the model's predict function: its ``.predict`` method, or ``predict`` itself."""
    method = getattr(predict, "predict", None)
    if callable(method):  # scikit-learn estimators, MLflow pyfunc models
        return method
    if callable(predict):
        return predict
    raise InvalidInputError(
        "`predict` must be a callable X -> 0/1 labels (or scores), or a model with a .predict "
        f"method (scikit-learn estimator, MLflow pyfunc model); got {type(predict).__name__}."
    )


def to_labels(out: Any, n_rows: int, threshold: float) -> NDArray[np.float64]:
    """Return the model's output as 0/1 floats: labels as they are, scores thresholded."""
    arr = np.asarray(out)
    if arr.ndim == 2 and arr.shape[1] in (1, 2):  # one column, or predict_proba's two
        arr = arr[:, -1]
    if arr.ndim != 1 or len(arr) != n_rows:
        raise InvalidInputError(
            f"`predict` returned shape {arr.shape} for {n_rows} input rows; it must return one "
            "0/1 label (or score in [0, 1]) per row, in the input's order."
        )
    if arr.dtype == bool:
        return arr.astype(np.float64)
    try:
        values = arr.astype(np.float64)
    except (TypeError, ValueError):
        values = np.array([np.nan])
    if np.isfinite(values).all():
        if ((values == 0) | (values == 1)).all():
            return values
        if ((values >= 0) & (values <= 1)).all():
            return (values >= threshold).astype(np.float64)
    raise InvalidInputError(
        "`predict` must return hard 0/1 labels or scores in [0, 1]; got values such as "
        f"{list(np.unique(arr.astype(str))[:4])}. Wrap the model, e.g. "
        "`lambda X: model.predict(X) == 'yes'`."
    )


class Scorer:
    """Calls the model in chunks of at most ``max_rows`` rows, counting calls and rows."""

    def __init__(self, predict: Callable[[Any], Any], threshold: float, max_rows: int) -> None:
        self.predict, self.threshold, self.max_rows = predict, threshold, max_rows
        self.calls = self.rows = 0

    def __call__(self, X: Any) -> NDArray[np.float64]:
        """Return the 0/1 predictions of the rows of ``X``, one model call per chunk."""
        n = len(X)
        parts = []
        for a in range(0, n, self.max_rows):
            chunk = X if n <= self.max_rows else (
                X.iloc[a:a + self.max_rows] if hasattr(X, "iloc") else X[a:a + self.max_rows])
            self.calls += 1
            self.rows += len(chunk)
            parts.append(to_labels(self.predict(chunk), len(chunk), self.threshold))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def check_X(X: Any) -> Any:
    """Return ``X`` checked: a non-empty DataFrame with unique columns, or a 2-D array."""
    if hasattr(X, "columns") and hasattr(X, "iloc"):
        if X.shape[0] == 0 or X.shape[1] == 0:
            raise InvalidInputError(f"`X` is empty (shape {X.shape}); pass rows and features.")
        if X.columns.duplicated().any():
            raise InvalidInputError(
                f"`X` has duplicated column names {list(X.columns[X.columns.duplicated()])}."
            )
        return X
    arr = np.asarray(X)
    if arr.ndim != 2 or arr.size == 0:
        raise InvalidInputError(
            f"`X` must be a DataFrame or a non-empty 2-D array (rows x features); got shape "
            f"{arr.shape}."
        )
    return arr


def resolve_sensitive(X: Any, sf: Any) -> tuple[dict[str, NDArray[Any]], tuple[Any, ...]]:
    """Sensitive columns, and the X columns they come from (model inputs, kept unperturbed)."""
    n = len(X)
    names = None
    if isinstance(sf, str):
        names = [sf]
    elif isinstance(sf, list | tuple) and sf and all(isinstance(c, str) for c in sf):
        in_x = hasattr(X, "columns") and all(c in X.columns for c in sf)
        names = list(sf) if (len(sf) != n or in_x) else None
    if names is None:
        cols = sensitive_columns(sf)
        check_same_length(X=X, sensitive_features=next(iter(cols.values())))
        return cols, ()
    if not hasattr(X, "columns"):
        raise InvalidInputError(
            f"`sensitive_features` names column(s) {names}, but X is an array without column "
            "names; pass the sensitive attribute as an array aligned with X, or X as a DataFrame."
        )
    missing = [c for c in names if c not in X.columns]
    if missing:
        raise InvalidInputError(
            f"`sensitive_features` names column(s) {missing} that are not in X; columns are "
            f"{list(X.columns)}. Pass column names of X (model inputs, kept unperturbed) or "
            "arrays aligned with X (not passed to the model)."
        )
    return sensitive_columns({c: X[c].to_numpy() for c in names}), tuple(names)


def stratified_sample(strata: NDArray[np.intp], size: int, rng: np.random.Generator
                       ) -> NDArray[np.intp]:
    """``size`` row positions, proportional per stratum (largest remainder, >= 1 each), sorted."""
    _, inverse, counts = np.unique(strata, return_inverse=True, return_counts=True)
    quota = counts * size / counts.sum()
    alloc = np.floor(quota).astype(np.intp)
    order = np.argsort(-(quota - alloc), kind="stable")
    alloc[order[: size - alloc.sum()]] += 1
    for s in np.flatnonzero(alloc == 0):  # keep every stratum; take the row from the largest
        alloc[np.argmax(alloc)] -= 1
        alloc[s] = 1
    perm = rng.permutation(len(strata))
    perm = perm[np.argsort(inverse[perm], kind="stable")]  # strata blocks, random order inside
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    take = np.concatenate([perm[a:a + k] for a, k in zip(starts, alloc, strict=True)])
    return np.sort(take)


def check_levels(levels: Any) -> tuple[float, ...]:
    """Return the noise levels checked (finite, > 0, distinct), in increasing order."""
    values = np.asarray(levels, dtype=np.float64).reshape(-1)
    if values.size == 0 or not np.isfinite(values).all() or (values <= 0).any():
        raise InvalidInputError(
            "`levels` must be finite noise strengths k > 0 (the clean level k = 0 is always "
            f"evaluated); got {np.asarray(levels).reshape(-1).tolist()}."
        )
    if len(np.unique(values)) != values.size:
        raise InvalidInputError(f"`levels` has duplicates: {values.tolist()}.")
    return tuple(float(v) for v in np.sort(values))


def subsample(X: Any, sf: dict[str, NDArray[Any]], y: NDArray[np.float64] | None,
              max_rows: int | None, rng: np.random.Generator) -> tuple[Any, dict[str, Any],
                                                                        Any, NDArray[np.intp]]:
    """Return the rows to evaluate: all, or a ``max_rows`` sample stratified by (group, label)."""
    n_total = len(X)
    if max_rows is None or n_total <= max_rows:
        index = np.arange(n_total)
        return (X.reset_index(drop=True) if hasattr(X, "iloc") else X), sf, y, index
    strata = encode_groups(sf, n_samples=n_total).codes * 2
    strata = strata + (0 if y is None else y.astype(np.intp))
    index = stratified_sample(strata, max_rows, rng)
    _, full_counts = np.unique(strata, return_counts=True)
    _, kept_counts = np.unique(strata[index], return_counts=True)
    if ((kept_counts < MIN_CELL_ROWS) & (full_counts > kept_counts)).any():
        log.warning("robustness_ratio: the %d-row sample keeps fewer than %d rows in some "
                    "(group, label) cells (smallest: %d); raise max_rows for steadier gaps",
                    max_rows, MIN_CELL_ROWS, kept_counts.min())
    X = X.iloc[index].reset_index(drop=True) if hasattr(X, "iloc") else X[index]
    return X, {k: v[index] for k, v in sf.items()}, None if y is None else y[index], index
