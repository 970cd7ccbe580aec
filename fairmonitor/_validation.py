"""Input checks shared by every public function: the only place error texts are built.

Each check raises :class:`~fairmonitor.exceptions.InvalidInputError` with a message that names
the argument, the rule, what was received and the fix. The helpers are small on purpose: a
public function calls the two or three it needs at its top.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .exceptions import InvalidInputError, UndefinedMetricWarning

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# Scores may overshoot [0, 1] by float round-off (e.g. 1 - 1e-17 computed as 1 + 2e-16);
# anything beyond this tolerance is a real error, anything within is clipped.
SCORE_TOLERANCE = 1e-9


def first_rows(mask: NDArray[np.bool_], limit: int = 5) -> str:
    rows = np.flatnonzero(mask)
    shown = ", ".join(str(int(r)) for r in rows[:limit])
    return shown + (f", ... ({rows.size} in all)" if rows.size > limit else "")


#: The former name, for code written before it became public.
_first_rows = first_rows


def check_1d(values: ArrayLike, name: str) -> NDArray[Any]:
    """Return ``values`` as a 1-D array, or raise naming ``name``.

    >>> check_1d([1, 0, 1], "y_pred")
    array([1, 0, 1])
    """
    if values is None:
        raise InvalidInputError(f"`{name}` is required; got None.")
    arr = np.asarray(values)
    if arr.ndim == 2 and 1 in arr.shape and arr.size > 0:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise InvalidInputError(
            f"`{name}` must be 1-dimensional (one value per row); got shape {arr.shape}."
        )
    if arr.size == 0:
        raise InvalidInputError(f"`{name}` is empty; pass at least one row.")
    return arr


def check_same_length(**arrays: Any) -> int:
    """Check that all named arrays have the same number of rows; return it.

    >>> check_same_length(y_true=[1, 0], y_pred=[0, 1])
    2
    >>> check_same_length(y_pred=[0, 1, 1],
    ...                   sensitive_features=[0, 1])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fairmonitor.exceptions.InvalidInputError: `y_pred` has 3 rows but `sensitive_features` has 2;
    pass arrays aligned row by row.
    """
    items = [(k, len(v)) for k, v in arrays.items() if v is not None]
    first_name, first_len = items[0]
    for name, n in items[1:]:
        if n != first_len:
            raise InvalidInputError(
                f"`{first_name}` has {first_len} rows but `{name}` has {n}; "
                "pass arrays aligned row by row."
            )
    return first_len


def check_binary(values: ArrayLike, name: str) -> NDArray[np.float64]:
    """Return hard 0/1 labels as floats, or raise listing the values found.

    Booleans and the integers/floats 0 and 1 are accepted.

    >>> check_binary([True, False, True], "y_pred")
    array([1., 0., 1.])
    """
    arr = check_1d(values, name)
    if arr.dtype == bool:
        return arr.astype(np.float64)
    if not np.issubdtype(arr.dtype, np.number):
        found = np.unique(arr.astype(str))[:6]
        raise InvalidInputError(
            f"`{name}` must hold hard 0/1 labels; got non-numeric values {list(found)}. "
            "Encode the positive class as 1 (e.g. `y == 'yes'`)."
        )
    as_float = arr.astype(np.float64)
    check_finite(as_float, name)
    bad = (as_float != 0) & (as_float != 1)
    if bad.any():
        found = np.unique(as_float[bad])[:6]
        hint = (
            " These look like scores: threshold them first (e.g. `y_score >= 0.5`) or use a "
            "score metric (abcc, abpc, madd)."
            if ((as_float >= 0) & (as_float <= 1)).all()
            else ""
        )
        raise InvalidInputError(
            f"`{name}` must hold hard 0/1 labels; {int(bad.sum())} values are neither "
            f"(e.g. {[float(v) for v in found]}).{hint}"
        )
    return as_float


def check_finite(values: NDArray[Any], name: str) -> None:
    """Raise if ``values`` holds NaN or +-inf, naming the count and the first rows."""
    bad = ~np.isfinite(values)
    if bad.any():
        raise InvalidInputError(
            f"`{name}` has {int(bad.sum())} NaN or infinite values (rows {first_rows(bad)}); "
            "drop or impute those rows before computing fairness metrics."
        )


def check_sample_weight(sample_weight: ArrayLike | None, n: int) -> NDArray[np.float64] | None:
    """Return per-row weights as floats (finite, >= 0, not all 0, ``n`` of them), or None.

    >>> check_sample_weight([1, 2.5], 2).tolist()
    [1.0, 2.5]
    >>> check_sample_weight([1, -1], 2)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fairmonitor.exceptions.InvalidInputError: `sample_weight` must be >= 0; 1 values are negative
    (rows 1).
    """
    if sample_weight is None:
        return None
    w = check_1d(sample_weight, "sample_weight")
    if not np.issubdtype(w.dtype, np.number) or w.dtype == bool:
        raise InvalidInputError(f"`sample_weight` must be numeric; got dtype {w.dtype}.")
    w = w.astype(np.float64)
    check_finite(w, "sample_weight")
    if w.size != n:
        raise InvalidInputError(f"`sample_weight` has {w.size} rows but the data has {n}; "
                                "pass one weight per row.")
    negative = w < 0
    if negative.any():
        raise InvalidInputError(f"`sample_weight` must be >= 0; {int(negative.sum())} values "
                                f"are negative (rows {first_rows(negative)}).")
    if not w.any():
        raise InvalidInputError("`sample_weight` is 0 on every row; nothing would be measured.")
    return w


def check_scores(values: ArrayLike, name: str = "y_score", *, copy: bool = True
                 ) -> NDArray[np.float64]:
    """Return scores as floats in [0, 1], or raise naming the count and the fix.

    Values within ``SCORE_TOLERANCE`` of the interval are clipped (float round-off). The result
    is a new array unless ``copy=False``: then valid float64 input comes back as is (for callers
    that only read it; clipped values are still a new array, never written into the input).

    >>> check_scores([0.2, 1.0 + 1e-12])
    array([0.2, 1. ])
    >>> check_scores([0.2, 3.0])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fairmonitor.exceptions.InvalidInputError: `y_score` must lie in [0, 1]; 1 values are outside
    (rows 1, range [0.2, 3]). Pass probabilities (e.g. `predict_proba(X)[:, 1]`) or rescale the
    scores to [0, 1].
    """
    arr = check_1d(values, name)
    if not np.issubdtype(arr.dtype, np.number) or arr.dtype == bool:
        raise InvalidInputError(f"`{name}` must be numeric scores; got dtype {arr.dtype}.")
    owned = copy or arr.dtype != np.float64
    arr = arr.astype(np.float64, copy=copy)
    lo, hi = arr.min(), arr.max()  # NaN propagates, so NaN never takes the fast path
    if lo >= -SCORE_TOLERANCE and hi <= 1 + SCORE_TOLERANCE:
        # valid scores, the common case: two reductions instead of five passes and a copy
        if lo < 0 or hi > 1:
            return np.clip(arr, 0.0, 1.0, out=arr if owned else None)
        return arr
    check_finite(arr, name)
    bad = (arr < -SCORE_TOLERANCE) | (arr > 1 + SCORE_TOLERANCE)
    if bad.any():
        raise InvalidInputError(
            f"`{name}` must lie in [0, 1]; {int(bad.sum())} values are outside "
            f"(rows {first_rows(bad)}, range [{arr.min():.6g}, {arr.max():.6g}]). "
            "Pass probabilities (e.g. `predict_proba(X)[:, 1]`) or rescale the scores to [0, 1]."
        )
    return np.clip(arr, 0.0, 1.0)


def check_continuous(values: ArrayLike, name: str = "y_pred") -> NDArray[np.float64]:
    """Return a regression target or prediction as finite floats, or raise naming the fix.

    >>> check_continuous([1, 2.5]).tolist()
    [1.0, 2.5]
    >>> check_continuous(["a"])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fairmonitor.exceptions.InvalidInputError: `y_pred` must be numeric (a regression target or
    prediction); got dtype <U1.
    """
    arr = check_1d(values, name)
    if not np.issubdtype(arr.dtype, np.number) or arr.dtype == bool:
        raise InvalidInputError(f"`{name}` must be numeric (a regression target or "
                                f"prediction); got dtype {arr.dtype}.")
    arr = arr.astype(np.float64, copy=False)
    check_finite(arr, name)
    return arr


def check_option(value: T, name: str, allowed: Sequence[T], *, func: str = "") -> T:
    """Raise unless ``value`` is one of ``allowed``, listing the allowed values.

    >>> check_option("max", "agg", ("max", "mean"))
    'max'
    >>> check_option("median", "agg", ("max", "mean"),
    ...              func="abcc")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fairmonitor.exceptions.InvalidInputError: The 'agg' parameter of abcc must be one of
    ('max', 'mean'); got 'median'.
    """
    if value not in allowed:
        where = f" of {func}" if func else ""
        raise InvalidInputError(
            f"The '{name}' parameter{where} must be one of {tuple(allowed)!r}; got {value!r}."
        )
    return value


def check_positive_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """Raise unless ``value`` is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InvalidInputError(f"`{name}` must be an integer >= {minimum}; got {value!r}.")
    return int(value)


def warn_undefined(metric: str, reason: str) -> float:
    """Emit an :class:`UndefinedMetricWarning` naming the metric and the cause; return NaN."""
    warnings.warn(f"{metric} is undefined: {reason}. Returning nan.", UndefinedMetricWarning,
                  stacklevel=3)
    return float("nan")


def format_labels(labels: Iterable[Any], limit: int = 8) -> str:
    """Format group labels for a message: ``'a', 'b', ... (12 in all)``."""
    labels = list(labels)
    shown = ", ".join(repr(lab) for lab in labels[:limit])
    return shown + (f", ... ({len(labels)} in all)" if len(labels) > limit else "")


# ---------------------------------------------------------------- old call forms (issue 26)
# Issue 26 aligned the public signatures with fairlearn and scikit-learn where they compute the
# same quantity: ``y_true`` first (``demographic_parity_difference(y_true, y_pred, *,
# sensitive_features)``; ``counterpart_fairness(X, y_true, y_pred, *, ...)`` as ``hfm``) and the
# seed named ``random_state``, not ``rng``. These decorators turn an old call into the new one
# before the function runs, so the function knows only its new signature (which
# ``inspect.signature`` reports, through ``__wrapped__``). FutureWarning, not
# DeprecationWarning: the callers are notebooks and scripts, where Python hides a
# DeprecationWarning raised from library code (scikit-learn warns the same way).

#: The release after which the old forms stop working.
REMOVED_IN = "0.3"


def _warn_old_form(message: str) -> None:
    # stacklevel 3: the caller of the decorated function, not the wrapper
    warnings.warn(f"{message} The old form stops working in fairmonitor {REMOVED_IN}.",
                  FutureWarning, stacklevel=3)


def renamed_keyword(old: str, new: str) -> Callable[[F], F]:
    """Accept keyword ``old`` as ``new``, with a ``FutureWarning``.

    >>> @renamed_keyword("rng", "random_state")
    ... def f(*, random_state=None):
    ...     return random_state
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     f(rng=3), caught[0].category.__name__
    (3, 'FutureWarning')
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(f"{func.__name__}() got `{old}=` and `{new}=`; pass "
                                    f"`{new}=` only (`{old}=` is its deprecated name)")
                _warn_old_form(f"{func.__name__}(..., {old}=...) is deprecated: pass "
                               f"{new}=... (scikit-learn's name).")
                kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def y_true_first(n_before: int = 0) -> Callable[[F], F]:
    """Accept the old ``f(<n_before args>, y_pred, *, y_true=None)`` as ``f(..., y_true, y_pred)``.

    The new form takes ``y_true`` positionally before ``y_pred`` (None where the metric does
    not read labels). An old call passes ``y_pred`` in ``y_true``'s place with no ``y_pred``
    after it, or passes ``y_pred=`` without ``y_true``; either warns and is rewritten.

    >>> @y_true_first()
    ... def f(y_true, y_pred):
    ...     return y_true, y_pred
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     f([1]), f(None, [1]), len(caught)
    ((None, [1]), (None, [1]), 1)
    """

    def decorate(func: F) -> F:
        name = func.__name__
        before = "X, " if n_before else ""
        new_form = f"{name}({before}y_true, y_pred, *, sensitive_features=...)"

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if len(args) == n_before + 1 and "y_pred" not in kwargs:
                # old positional form: y_pred where y_true now goes, labels (if any) by keyword
                y_true = kwargs.pop("y_true", None)
                args = (*args[:n_before], y_true, args[n_before])
                _warn_old_form(f"{name}({before}y_pred, ...) is deprecated: pass y_true first, "
                               f"{new_form} (as fairlearn; y_true=None without labels).")
            elif len(args) <= n_before and "y_pred" in kwargs and "y_true" not in kwargs:
                kwargs["y_true"] = None
                _warn_old_form(f"{name}(..., y_pred=...) without y_true is deprecated: pass "
                               f"{new_form} (as fairlearn; y_true=None without labels).")
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
