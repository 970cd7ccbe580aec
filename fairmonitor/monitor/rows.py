"""A window's rows as the metrics need them: real column types accepted, invalid rows rejected.

Databases and file formats return more than float arrays: PostgreSQL ``NUMERIC`` arrives as
``Decimal`` objects, nullable ``BOOLEAN`` columns (PostgreSQL, Parquet) as objects or pandas'
``boolean`` with ``<NA>``, integer columns with NULLs as objects of ints and ``None``, CSV files as
``"0"``/``"1"`` strings, Parquet dictionary-encoded strings as ``category``. :func:`prepare`
converts what is unambiguous and refuses the rest with a message that says how to fix it.

One rule for invalid model outputs, applied before any metric sees the window, so every
metric computes on the same rows: a row whose score is missing, not a number, infinite or
outside [0, 1], or whose prediction is missing or not 0/1, is **dropped and counted**
(reasons ``invalid_score``, ``invalid_prediction``; the job adds ``no_timestamp`` for rows of
a file source whose timestamp is empty or unparseable; exported as
``fairmonitor_window_rejected_rows``). A missing label is not invalid: it means the label has
not arrived yet (see ``labels_after``). Exact duplicate rows are counted (exported as
``fairmonitor_window_duplicate_rows``) but kept, since a source cannot tell a double-logged
prediction from two equal ones; count them, and deduplicate at the source if they are double
logging.

>>> import pandas as pd
>>> from decimal import Decimal
>>> frame = pd.DataFrame({"score": [Decimal("0.9"), Decimal("0.2"), None, Decimal("1.5")],
...                       "label": [True, None, False, True], "sex": ["F", "M", "F", "M"]})
>>> rows, rejected, duplicates = prepare(frame, score="score", label="label")
>>> rows["score"].tolist(), rows["label"].tolist(), rejected, duplicates
([0.9, 0.2], [1.0, nan], {'invalid_score': 2}, 0)
"""

from __future__ import annotations

import decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from ..exceptions import InvalidInputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["duplicate_rows", "prepare", "to_binary", "to_score"]

_TRUE = {"1", "true", "t", "yes", "y"}
_FALSE = {"0", "false", "f", "no", "n"}


def _is_missing(v: Any) -> bool:
    import pandas as pd

    return (v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and np.isnan(v))
            or (isinstance(v, decimal.Decimal) and v.is_nan()))


def to_score(values: pd.Series) -> pd.Series:
    """Scores as float64; what is not a number becomes NaN (then rejected as invalid).

    ``Decimal``, numeric strings and nullable numbers are converted.

    >>> import pandas as pd
    >>> to_score(pd.Series(["0.25", None, "x"], dtype=object)).tolist()
    [0.25, nan, nan]
    """
    import pandas as pd

    if values.dtype.kind == "f":
        return values
    return pd.to_numeric(values.astype(object).where(values.notna(), None),
                         errors="coerce").astype("float64")


def to_binary(values: pd.Series, name: str) -> pd.Series:
    """Return a 0/1 column (labels, predictions) as float64 with NaN for missing values.

    Accepts booleans (nullable too), integers and floats 0/1, ``Decimal`` 0/1 and the strings
    ``0/1``, ``true/false``, ``t/f``, ``yes/no`` (any case). Anything else is ambiguous and
    raises :class:`~fairmonitor.exceptions.InvalidInputError` naming the values.

    >>> import pandas as pd
    >>> to_binary(pd.Series(["1", "0", None, "TRUE"], dtype=object), "label").tolist()
    [1.0, 0.0, nan, 1.0]
    >>> to_binary(pd.Series([1, "maybe"], dtype=object), "label")
    Traceback (most recent call last):
    ...
    fairmonitor.exceptions.InvalidInputError: column 'label' must hold 0/1 or true/false; \
found ['maybe']. Map its values to 0/1 in the source (e.g. a SQL CASE or a view).
    """
    import pandas as pd

    if isinstance(values.dtype, pd.CategoricalDtype):  # Parquet dictionary encoding
        values = values.astype(object)
    elif pd.api.types.is_bool_dtype(values.dtype) or pd.api.types.is_numeric_dtype(values.dtype):
        # numpy and nullable (boolean, Int64, Float64) columns alike; <NA> -> NaN
        return pd.Series(values.to_numpy(dtype="float64", na_value=np.nan), index=values.index,
                         name=values.name)
    out = np.empty(len(values), dtype=np.float64)
    bad: list[Any] = []
    for i, v in enumerate(values.astype(object).tolist()):
        if _is_missing(v):
            out[i] = np.nan
        elif isinstance(v, bool | np.bool_):
            out[i] = float(v)
        elif isinstance(v, int | float | decimal.Decimal | np.integer | np.floating):
            f = float(v)
            if f in (0.0, 1.0):
                out[i] = f
            else:
                out[i] = np.nan
                bad.append(v)
        elif isinstance(v, str | bytes):
            text = (v.decode() if isinstance(v, bytes) else v).strip().lower()
            if text in _TRUE:
                out[i] = 1.0
            elif text in _FALSE:
                out[i] = 0.0
            elif text == "":
                out[i] = np.nan
            else:
                out[i] = np.nan
                bad.append(v)
        else:
            out[i] = np.nan
            bad.append(v)
    if bad:
        shown = list(dict.fromkeys(map(str, bad)))[:5]
        raise InvalidInputError(
            f"column {name!r} must hold 0/1 or true/false; found {shown}. Map its values to "
            "0/1 in the source (e.g. a SQL CASE or a view).")
    return pd.Series(out, index=values.index, name=values.name)


def duplicate_rows(frame: pd.DataFrame) -> int:
    """How many rows equal an earlier row: ``frame.duplicated().sum()``, the same count.

    ``duplicated`` factorizes every column (4.4 s CPU for a 10^7-row day of 6 columns, 45% of
    its window's cost). A row hash first (pandas' vectorized ``hash_pandas_object``, ~1.7 s)
    leaves it only the rows whose hash another row shares: equal rows hash equally, so no
    duplicate is missed, and ``duplicated`` on those rows, in their order, finds exactly the
    ones that equal an earlier row. Only columns whose equal values surely hash equally are
    hashed: floats normalized as ``duplicated`` compares them (-0.0 is 0.0, every NaN one NaN);
    object columns (where ``1 == 1.0`` but their text differs) are left to ``duplicated``.

    >>> import pandas as pd
    >>> duplicate_rows(pd.DataFrame({"a": [1.0, -0.0, 0.0, float("nan"), float("nan")],
    ...                              "b": ["x", "y", "y", "z", "z"]}))
    2
    """
    import pandas as pd

    hashed = {}
    for name in frame.columns:
        col = frame[name]
        if col.dtype == object:
            continue
        if col.dtype.kind == "f":  # as duplicated compares: -0.0 == 0.0, NaN == NaN
            values = col.to_numpy(dtype=np.float64, na_value=np.nan) + 0.0
            values[np.isnan(values)] = np.nan
            col = pd.Series(values, copy=False)
        hashed[name] = col.reset_index(drop=True)
    if not hashed or len(frame) < 2:
        return int(frame.duplicated().sum())
    keys = pd.util.hash_pandas_object(pd.DataFrame(hashed, copy=False), index=False).to_numpy()
    ordered = np.sort(keys)
    shared = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    if not shared.size:
        return 0
    at = np.minimum(np.searchsorted(shared, keys), shared.size - 1)
    return int(frame.loc[shared[at] == keys].duplicated().sum())


def _finite_numbers(values: pd.Series) -> pd.Series:
    """Return a regression column as float64: missing, non-numbers and infinities as NaN."""
    out = to_score(values)
    arr = out.to_numpy()
    return out.where(np.isfinite(arr)) if not np.isfinite(arr).all() else out


def prepare(frame: pd.DataFrame, *, score: str | None = None, prediction: str | None = None,
            label: str | None = None, task: str = "binary"
            ) -> tuple[pd.DataFrame, dict[str, int], int]:
    """Convert the model-output and label columns and drop invalid rows (module docstring).

    Returns the rows every metric of the window uses, per reason how many rows were
    rejected (reasons with zero rows are left out), and how many rows duplicate another.
    With ``task="regression"`` the prediction and label are numbers (:func:`to_score`'s
    conversion, no range): a prediction that is missing, not a number or infinite is
    invalid; a missing or non-numeric label is a label not yet arrived.

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"pred": ["12.5", None, "inf"], "y": [10, None, 3]})
    >>> rows, rejected, _ = prepare(frame, prediction="pred", label="y", task="regression")
    >>> rows["pred"].tolist(), rows["y"].tolist(), rejected
    ([12.5], [10.0], {'invalid_prediction': 2})
    """
    rejected: dict[str, int] = {}
    frame = frame.copy(deep=False)
    keep = np.ones(len(frame), dtype=bool)
    regression = task == "regression"
    if label is not None and label in frame.columns:
        frame[label] = (_finite_numbers(frame[label]) if regression
                        else to_binary(frame[label], label))
    if prediction is not None and prediction in frame.columns:
        pred = (_finite_numbers(frame[prediction]) if regression
                else to_binary(frame[prediction], prediction))
        frame[prediction] = pred
        bad = pred.isna().to_numpy()
        if bad.any():
            rejected["invalid_prediction"] = int(np.count_nonzero(bad & keep))
            keep &= ~bad
    if score is not None and score in frame.columns:
        s = to_score(frame[score])
        frame[score] = s
        arr = s.to_numpy()
        with np.errstate(invalid="ignore"):
            bad = ~((arr >= 0.0) & (arr <= 1.0))  # NaN and inf fail both comparisons
        if bad.any():
            rejected["invalid_score"] = int(np.count_nonzero(bad & keep))
            keep &= ~bad
    rejected = {k: v for k, v in rejected.items() if v}
    try:
        duplicates = duplicate_rows(frame)
    except TypeError:  # unhashable cells (e.g. parsed JSON features): not checked
        duplicates = 0
    if not keep.all():
        frame = frame.loc[keep].reset_index(drop=True)
    return frame, rejected, duplicates
