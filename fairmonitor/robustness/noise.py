"""Input noise for the robustness ratio: column kinds, per-column scales, common random numbers.

Follows spec ``robustness.md`` §1.3 (paper Defs 11-12) and §5.1-5.2 (product mapping):

- *Continuous* columns get ``x + level * unit_j * E``, E standard Laplace (scale 1) or standard
  normal, drawn once. ``unit_j`` depends on the scale basis: ``"std"`` gives noise of standard
  deviation ``level * sigma_j`` (Laplace scale ``level * sigma_j / sqrt(2)``), ``"range"`` the
  reference code's min-max units (Laplace scale ``level * (max_j - min_j)``), ``"absolute"`` the
  paper's raw units (scale ``level``).
- *Categorical* cells are replaced, with probability ``rate(level)``, by the value of a random
  row of the same column, i.e. a draw from the column's own empirical distribution (Def 12).
  ``"bernoulli"`` decides each cell independently (paper); ``"fixed_count"`` replaces exactly
  ``ceil(rate * n)`` cells per column and repeat (reference code).
- *Frozen* columns (sensitive attributes, datetimes, user-listed ones, constant columns) are
  never perturbed.

Common random numbers: the uniforms, replacement rows and standard noise are drawn once for all
levels, so the replaced cells are nested across levels and the continuous noise only grows; this
changes the correlation between levels, never a level's expectation.

DataFrames are read by duck typing; pandas is imported lazily (dtype checks, distinct counts,
the stacked frame handed to the model), so ``import fairmonitor`` does not load it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import check_option
from ..exceptions import InvalidInputError

__all__ = ["ConstantColumnWarning", "NoiseModel", "build_noise_model", "infer_column_kinds"]

KINDS = ("continuous", "categorical", "frozen")
SCALES = ("std", "range", "absolute")
DISTRIBUTIONS = ("laplace", "gaussian")
SCHEMES = ("bernoulli", "fixed_count")

#: A numeric column with more distinct values than this is continuous (spec §7 decision 4).
MAX_CATEGORIES = 20


class ConstantColumnWarning(UserWarning):
    """Columns chosen for noise hold a single value; they are left unperturbed.

    Adding noise to a constant column would invent a signal the model never saw (its standard
    deviation and range are 0, so the ``std`` and ``range`` bases cannot scale it anyway).
    """


def column_names(X: Any) -> list[Any]:
    """Column labels of a DataFrame, or positions ``0..d-1`` of a 2-D array."""
    return list(X.columns) if hasattr(X, "columns") else list(range(X.shape[1]))


def _column(X: Any, col: Any) -> Any:
    """One column: an ndarray, or the pandas array of an extension dtype (dtype preserved)."""
    if hasattr(X, "columns"):
        series = X[col]
        return series.to_numpy() if isinstance(series.dtype, np.dtype) else series.array
    return X[:, col]


def _is_number(v: Any) -> bool:
    return v is None or (isinstance(v, int | float | np.integer | np.floating)
                         and not isinstance(v, bool | np.bool_))


def _as_float(values: Any) -> NDArray[np.float64] | None:
    """Return the column as float64 (missing -> NaN), or None if it does not hold numbers."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype):
        if dtype.kind in "biuf":
            return values.astype(np.float64)
        if dtype.kind == "O" and all(_is_number(v) for v in values):
            return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        return None
    import pandas as pd

    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
        return np.asarray(values.to_numpy(dtype=np.float64, na_value=np.nan))
    return None


def _n_distinct(values: Any) -> int:
    import pandas as pd

    return int(pd.Series(values, copy=False).nunique(dropna=True))


def _default_kind(values: Any, n_distinct: int) -> str:
    dtype = values.dtype
    kind = dtype.kind if isinstance(dtype, np.dtype) else None
    if kind is None:  # a pandas extension dtype
        import pandas as pd

        if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(
                dtype):
            return "frozen"
        kind = "b" if pd.api.types.is_bool_dtype(dtype) else "O"
    if kind in "mM":  # datetimes and durations: no meaningful additive noise
        return "frozen"
    if kind == "b":
        return "categorical"
    if n_distinct > MAX_CATEGORIES and _as_float(values) is not None:
        return "continuous"
    return "categorical"


def infer_column_kinds(
    X: Any, *, overrides: Mapping[Any, str] | None = None, frozen: tuple[Any, ...] = ()
) -> dict[Any, str]:
    """Kind of every column: ``continuous``, ``categorical`` or ``frozen``.

    The rule (spec §7 decision 4): numeric with more than 20 distinct values is continuous;
    bool, category, string/object, or at most 20 distinct values is categorical; datetimes are
    frozen. ``overrides`` wins, except that the ``frozen`` columns (the sensitive attributes)
    can never be perturbed. Columns that would be perturbed but hold a single value are frozen
    with one :class:`ConstantColumnWarning` naming them all.

    >>> import numpy as np
    >>> X = np.c_[np.arange(30.0), np.arange(30) % 2]
    >>> infer_column_kinds(X)
    {0: 'continuous', 1: 'categorical'}
    """
    names = column_names(X)
    overrides = dict(overrides or {})
    unknown = [c for c in overrides if c not in names]
    if unknown:
        raise InvalidInputError(
            f"`column_kinds` names column(s) {unknown} that are not in X; columns are {names}."
        )
    for col, kind in overrides.items():
        check_option(kind, f"column_kinds[{col!r}]", KINDS, func="robustness_ratio")
        if col in frozen and kind != "frozen":
            raise InvalidInputError(
                f"`column_kinds` asks for {kind} noise on {col!r}, a sensitive attribute; "
                "sensitive attributes are never perturbed (the metric groups by their clean "
                "values). Drop it from `column_kinds`."
            )
    kinds: dict[Any, str] = {}
    constant = []
    for col in names:
        if col in frozen:
            kinds[col] = "frozen"
            continue
        values = _column(X, col)
        distinct = _n_distinct(values)
        kind = overrides.get(col) or _default_kind(values, distinct)
        if kind != "frozen" and distinct <= 1:
            constant.append(col)
            kind = "frozen"
        kinds[col] = kind
    if constant:
        warnings.warn(
            f"robustness_ratio: column(s) {constant} hold a single value and are left "
            "unperturbed (noise scaled by a zero spread would be zero, and any other scale "
            "would invent a signal).",
            ConstantColumnWarning,
            stacklevel=3,
        )
    return kinds


def _unit_scales(X: Any, cont: list[Any], scale: str, distribution: str) -> NDArray[np.float64]:
    """Noise multiplier per continuous column, so that noise = level * unit * standard draw."""
    units = np.ones(len(cont))
    for j, col in enumerate(cont):
        x = _as_float(_column(X, col))
        if x is None:
            raise InvalidInputError(
                f"column {col!r} is marked continuous but is not numeric; mark it "
                "'categorical' in `column_kinds`."
            )
        if scale == "std":
            units[j] = np.nanstd(x) / (math.sqrt(2.0) if distribution == "laplace" else 1.0)
        elif scale == "range":
            units[j] = np.nanmax(x) - np.nanmin(x)
    return units


def default_rate(scale: str) -> Callable[[float], float]:
    """Categorical resampling probability at a level: 0.1*k for ``std``, k/100 otherwise."""
    factor = 0.1 if scale == "std" else 0.01
    return lambda level: min(1.0, factor * level)


@dataclass(frozen=True, slots=True)
class NoiseModel:
    """What to perturb and how much, fitted on the reference rows.

    Attributes
    ----------
    kinds : dict
        Column -> ``continuous`` | ``categorical`` | ``frozen``.
    continuous, categorical : tuple
        The perturbed columns, in X's order.
    units : ndarray
        Noise multiplier per continuous column (see the module docstring).
    distribution, scale, scheme : str
        Noise distribution, scale basis and categorical scheme.
    rate : callable
        Level -> categorical resampling probability in [0, 1].
    round_integers : bool
        Round noisy values of integer columns back to the column's integer dtype.
    """

    kinds: Mapping[Any, str]
    continuous: tuple[Any, ...]
    categorical: tuple[Any, ...]
    units: NDArray[np.float64]
    distribution: str
    scale: str
    scheme: str
    rate: Callable[[float], float]
    round_integers: bool = False

    def draw(self, rng: np.random.Generator, n_repeats: int, n_rows: int) -> NoiseDraws:
        """Draw the standard noise, uniforms and replacement rows for every repeat once."""
        shape_c = (len(self.continuous), n_repeats, n_rows)
        shape_k = (len(self.categorical), n_repeats, n_rows)
        if self.distribution == "laplace":
            E = rng.laplace(0.0, 1.0, size=shape_c)
        else:
            E = rng.standard_normal(size=shape_c)
        U = rng.random(size=shape_k)
        if self.scheme == "fixed_count":
            # rank of each cell's uniform within its (column, repeat): the m smallest are
            # replaced, so the sets are nested across levels as in the Bernoulli scheme
            U = np.argsort(np.argsort(U, axis=-1), axis=-1).astype(np.float64)
        V = rng.integers(0, n_rows, size=shape_k, dtype=np.int64)
        return NoiseDraws(E, U, V)

    def stack(self, Xs: Any, draws: NoiseDraws, level: float, r0: int, r1: int) -> Any:
        """Repeats ``r0..r1-1`` of the rows ``Xs`` perturbed at ``level``, stacked row-wise."""
        n = len(Xs)
        k = r1 - r0
        rate = self.rate(level) if level > 0 else 0.0
        m = min(n, math.ceil(rate * n - 1e-9))
        columns: dict[Any, Any] = {}
        for j, col in enumerate(self.continuous):
            x = _as_float(_column(Xs, col))
            out = np.multiply(draws.E[j, r0:r1], level * self.units[j])
            out += x
            columns[col] = self._maybe_round(_column(Xs, col), out.reshape(-1))
        own = np.arange(n)
        for j, col in enumerate(self.categorical):
            if self.scheme == "fixed_count":
                replace = draws.U[j, r0:r1] < m
            else:
                replace = draws.U[j, r0:r1] < rate
            idx = np.where(replace, draws.V[j, r0:r1], own).reshape(-1)
            columns[col] = _column(Xs, col).take(idx)
        to_float = bool(self.continuous) and not self.round_integers
        return _assemble(Xs, columns, k, to_float=to_float)

    def _maybe_round(self, original: Any, noisy: NDArray[np.float64]) -> Any:
        dtype = getattr(original, "dtype", None)
        if self.round_integers and getattr(dtype, "kind", "") in "iu" and isinstance(
                dtype, np.dtype):
            info = np.iinfo(dtype)
            return np.clip(np.rint(noisy), info.min, info.max).astype(dtype)
        return noisy


@dataclass(frozen=True, slots=True)
class NoiseDraws:
    """Common random numbers, drawn once for every level.

    ``E``: standard noise (continuous columns x repeats x rows); ``U``: uniforms, or their
    ranks for ``fixed_count`` (categorical columns x repeats x rows); ``V``: replacement rows.
    """

    E: NDArray[np.float64]
    U: NDArray[np.float64]
    V: NDArray[np.int64]


def tile_rows(Xs: Any, k: int) -> Any:
    """``k`` unperturbed copies of ``Xs`` stacked row-wise (dtypes kept)."""
    idx = np.tile(np.arange(len(Xs)), k)
    if hasattr(Xs, "columns"):
        return Xs.take(idx).reset_index(drop=True)
    return Xs[idx]


def _assemble(Xs: Any, columns: dict[Any, Any], k: int, *, to_float: bool) -> Any:
    """Stack k copies of Xs, with the perturbed ``columns`` replaced."""
    n = len(Xs)
    if hasattr(Xs, "columns"):
        import pandas as pd

        data = {}
        for col in Xs.columns:
            if col in columns:
                data[col] = columns[col]
                continue
            values = _column(Xs, col)
            data[col] = (np.tile(values, k) if isinstance(values, np.ndarray)
                         else values.take(np.tile(np.arange(n), k)))
        return pd.DataFrame(data, columns=Xs.columns, copy=False)
    out = np.tile(Xs, (k, 1))
    if to_float and out.dtype.kind in "biu":
        out = out.astype(np.float64)
    for j, values in columns.items():
        out[:, j] = values
    return out


def build_noise_model(
    X: Any,
    kinds: Mapping[Any, str],
    *,
    distribution: str = "laplace",
    scale: str = "std",
    scheme: str = "bernoulli",
    categorical_rate: float | Callable[[float], float] | None = None,
    round_integers: bool = False,
) -> NoiseModel:
    """Fit the per-column noise scales on the reference rows ``X``.

    ``categorical_rate`` is None (0.1*k for the ``std`` basis, k/100 for ``range`` and
    ``absolute``, spec §5.1), a factor c (rate ``min(1, c*k)``) or a callable ``level -> rate``.
    """
    check_option(distribution, "noise", DISTRIBUTIONS, func="robustness_ratio")
    check_option(scale, "scale", SCALES, func="robustness_ratio")
    check_option(scheme, "categorical_scheme", SCHEMES, func="robustness_ratio")
    if categorical_rate is None:
        rate = default_rate(scale)
    elif callable(categorical_rate):
        user = categorical_rate
        rate = lambda level: float(np.clip(user(level), 0.0, 1.0))  # noqa: E731
    elif isinstance(categorical_rate, int | float) and categorical_rate >= 0:
        factor = float(categorical_rate)
        rate = lambda level: min(1.0, factor * level)  # noqa: E731
    else:
        raise InvalidInputError(
            "`categorical_rate` must be None, a factor c >= 0 (rate min(1, c*level)) or a "
            f"callable level -> rate; got {categorical_rate!r}."
        )
    cont = tuple(c for c, k in kinds.items() if k == "continuous")
    cat = tuple(c for c, k in kinds.items() if k == "categorical")
    return NoiseModel(kinds=dict(kinds), continuous=cont, categorical=cat,
                      units=_unit_scales(X, list(cont), scale, distribution),
                      distribution=distribution, scale=scale, scheme=scheme, rate=rate,
                      round_integers=round_integers)
