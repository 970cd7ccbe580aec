"""Feature matrix for CFair's matching: columns in, a frozen numeric encoding out.

``X`` may be a 2-D numeric array, a dict of columns or a DataFrame (duck typing on
``.columns``; pandas is never imported). Numeric and boolean columns are kept as numbers, with
missing values (NaN) imputed by the mean of the rows the encoding was fitted on plus a
``<name>__missing`` indicator column; other columns (strings, categories, mixed objects) are
one-hot encoded, a missing value being its own category (spec §5, "Features"). The encoding is
frozen so that a matcher fitted on one window encodes later windows identically: a category
unseen at fit time gets all-zero indicators.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ..._validation import first_rows
from ...exceptions import InvalidInputError

__all__ = ["FeatureEncoding", "fit_encoding"]

#: A column with more distinct values than this is not treated as categorical (likely an ID).
MAX_CATEGORIES = 256


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    kind: Literal["numeric", "categorical"]
    fill: float = 0.0
    indicator: bool = False
    categories: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FeatureEncoding:
    """How columns of ``X`` become the numeric matrix matching works on.

    Attributes
    ----------
    columns : tuple
        One entry per used input column: name, kind, imputation value, categories.
    positional : bool
        True if ``X`` was a plain 2-D array (columns are matched by position, named ``x0``...).
    names : tuple of str
        Names of the encoded columns (``age``, ``age__missing``, ``sex=F``...).
    """

    columns: tuple[_Column, ...]
    positional: bool
    names: tuple[str, ...]

    def transform(self, X: Any, n_rows: int) -> NDArray[np.float64]:
        """Encode ``X`` (same columns as at fit time) into an ``(n_rows, len(names))`` array."""
        raw, positional = _raw_columns(X, n_rows)
        if positional != self.positional:
            kind = "a 2-D array" if self.positional else "named columns (dict or DataFrame)"
            raise InvalidInputError(f"`X` must be {kind}, as when the matcher was fitted.")
        missing = [c.name for c in self.columns if c.name not in raw]
        if missing:
            raise InvalidInputError(
                f"`X` lacks column(s) {missing} that the matcher was fitted on; available "
                f"columns: {list(raw)}. Pass the same feature columns, or refit the matcher."
            )
        parts = []
        for col in self.columns:
            values = raw[col.name]
            if col.kind == "numeric":
                num = _as_numeric(values, col.name)
                if num is None:
                    raise InvalidInputError(
                        f"`X` column '{col.name}' was numeric when the matcher was fitted but now "
                        "holds non-numeric values; pass the same column types, or refit."
                    )
                nan = np.isnan(num)
                parts.append(np.where(nan, col.fill, num)[:, None])
                if col.indicator:
                    parts.append(nan[:, None].astype(np.float64))
            else:
                text = values.astype(str)
                parts.append((text[:, None] == np.array(col.categories)[None, :])
                             .astype(np.float64))
        if not parts:
            return np.empty((n_rows, 0))
        return np.hstack(parts)


def _raw_columns(X: Any, n_rows: int) -> tuple[dict[str, NDArray[Any]], bool]:
    if X is None:
        raise InvalidInputError("`X` (the non-protected features) is required; got None.")
    if hasattr(X, "columns"):
        cols, positional = {str(c): np.asarray(X[c]) for c in X.columns}, False
    elif isinstance(X, Mapping):
        cols, positional = {str(k): np.asarray(v) for k, v in X.items()}, False
    else:
        arr = np.asarray(X)
        if arr.ndim != 2:
            raise InvalidInputError(
                f"`X` must be 2-D (one row per sample, one column per feature), a dict of "
                f"columns or a DataFrame; got shape {arr.shape}. For one feature pass "
                "`X.reshape(-1, 1)`."
            )
        cols, positional = {f"x{j}": arr[:, j] for j in range(arr.shape[1])}, True
    for name, col in cols.items():
        if col.ndim != 1:
            raise InvalidInputError(f"`X` column '{name}' must be 1-D; got shape {col.shape}.")
        if len(col) != n_rows:
            raise InvalidInputError(
                f"`X` has {len(col)} rows but the other inputs have {n_rows}; pass arrays "
                "aligned row by row."
            )
    return cols, positional


def _as_numeric(values: NDArray[Any], name: str) -> NDArray[np.float64] | None:
    """Return the column as floats (NaN for missing), or None if it is not numeric."""
    if values.dtype.kind in "biuf":
        num = values.astype(np.float64)
    elif values.dtype.kind == "O" and all(
            v is None or (isinstance(v, int | float | np.number) and not isinstance(v, str))
            for v in values):
        num = np.array([np.nan if v is None else float(v) for v in values])
    else:
        return None
    inf = np.isinf(num)
    if inf.any():
        raise InvalidInputError(
            f"`X` column '{name}' has {int(inf.sum())} infinite values (rows "
            f"{first_rows(inf)}); replace them before computing CFair."
        )
    return num


def fit_encoding(X: Any, n_rows: int, *, exclude: Collection[str] = ()) -> FeatureEncoding:
    """Fit the encoding of ``X``, leaving out the columns named in ``exclude``.

    ``exclude`` holds the sensitive attributes' names: CFair matches on the *non-protected*
    features only, so a sensitive column left in ``X`` is dropped rather than matched on.
    """
    raw, positional = _raw_columns(X, n_rows)
    columns, names = [], []
    for name, values in raw.items():
        if name in exclude and not positional:
            continue
        num = _as_numeric(values, name)
        if num is not None:
            nan = np.isnan(num)
            fill = float(np.mean(num[~nan])) if (~nan).any() else 0.0
            columns.append(_Column(name, "numeric", fill=fill, indicator=bool(nan.any())))
            names += [name] + ([f"{name}__missing"] if nan.any() else [])
            continue
        categories = tuple(np.unique(values.astype(str)).tolist())
        if len(categories) > MAX_CATEGORIES:
            raise InvalidInputError(
                f"`X` column '{name}' has {len(categories)} distinct non-numeric values (more "
                f"than {MAX_CATEGORIES}); it looks like an identifier. Drop it from `X` or "
                "encode it numerically."
            )
        columns.append(_Column(name, "categorical", categories=categories))
        names += [f"{name}={c}" for c in categories]
    if not columns:
        raise InvalidInputError(
            "`X` has no feature columns besides the sensitive attribute(s); CFair matches "
            "individuals on their non-protected features."
        )
    return FeatureEncoding(tuple(columns), positional, tuple(names))
