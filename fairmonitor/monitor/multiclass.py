"""A multiclass model's window rows (``task: multiclass``): class columns in, one window out.

The monitor's side of issue 29. A multiclass model logs a class label as its prediction
(``prediction:``), the true class as its label (``label:``) and, optionally, one probability
column per class (``scores: {class: column}``); ``classes:`` lists the labels (default: the
keys of ``scores``). :func:`prepare` is :func:`.rows.prepare` for those columns: the values
are matched to the configured classes by their text (``1``, ``1.0`` and ``"1"`` are class
``1``), a prediction that is missing or not a class is dropped and counted
(``invalid_prediction``), an invalid probability likewise (``invalid_score``), a label that is
not a class is a data error that holds the window (as a binary label that is not 0/1), and a
missing label is a label not arrived yet. :func:`window` builds the multiclass
:class:`~fairmonitor.report.Window` that :func:`~fairmonitor.report.evaluate_window` evaluates
class by class (``docs/multiclass.md``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..exceptions import InvalidInputError
from ..report.evaluate import Window
from .rows import duplicate_rows, to_score

if TYPE_CHECKING:
    import pandas as pd

    from .config import ModelConfig

__all__ = ["class_text", "prepare", "score_columns", "to_classes", "window"]


def class_text(value: Any) -> str:
    """Return the text a value is matched to a class by (integral numbers without a fraction).

    >>> class_text(2.0), class_text(np.int64(2)), class_text("2"), class_text("mid")
    ('2', '2', '2', 'mid')
    """
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    if isinstance(value, np.generic):
        value = value.item()
    return str(value)


def to_classes(values: pd.Series, classes: Sequence[Any]
               ) -> tuple[NDArray[Any], NDArray[np.bool_]]:
    """Return the configured class of each value (None if missing or unknown) and the unknown.

    Each distinct value is matched once (``pandas.factorize``), not each row.

    >>> import pandas as pd
    >>> out, unknown = to_classes(pd.Series([1.0, None, 3, "2"]), [1, 2])
    >>> out.tolist(), unknown.tolist()
    ([1, None, None, 2], [False, False, True, False])
    """
    import pandas as pd

    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    lookup = {class_text(c): c for c in classes}
    mapped = [lookup.get(class_text(u)) for u in uniques]
    table = np.empty(len(mapped) + 1, dtype=object)  # the last slot: missing (code -1)
    table[:-1] = mapped
    known = np.array([m is not None for m in mapped] + [True])
    return table[codes], ~known[codes] & (codes >= 0)


def score_columns(cfg: ModelConfig) -> list[str]:
    """Return the model's per-class probability columns, in the order of its classes."""
    return list(cfg.class_scores.values())


def _listed(values: Any) -> list[Any]:
    return list(dict.fromkeys(v.item() if isinstance(v, np.generic) else v for v in values))[:8]


def prepare(frame: pd.DataFrame, cfg: ModelConfig) -> tuple[pd.DataFrame, dict[str, int], int]:
    """Convert a multiclass model's columns and drop invalid rows (module docstring).

    Returns what :func:`.rows.prepare` returns: the rows, the rejected rows per reason and
    the duplicate rows.
    """
    classes = cfg.classes or ()
    frame = frame.copy(deep=False)
    keep = np.ones(len(frame), dtype=bool)
    rejected: dict[str, int] = {}
    if cfg.label is not None and cfg.label in frame.columns:
        labels, unknown = to_classes(frame[cfg.label], classes)
        if unknown.any():
            raise InvalidInputError(
                f"column {cfg.label!r} holds label(s) {_listed(frame[cfg.label][unknown])} "
                f"that are not among the classes {list(classes)}; fix the labels or "
                "'classes' in the config")
        frame[cfg.label] = labels
    for reason, bad in _invalid(frame, cfg):
        if bad.any():
            rejected[reason] = rejected.get(reason, 0) + int(np.count_nonzero(bad & keep))
            keep &= ~bad
    try:
        duplicates = duplicate_rows(frame)
    except TypeError:  # unhashable cells (e.g. parsed JSON features): not checked
        duplicates = 0
    if not keep.all():
        frame = frame.loc[keep].reset_index(drop=True)
    return frame, {k: v for k, v in rejected.items() if v}, duplicates


def _invalid(frame: pd.DataFrame, cfg: ModelConfig) -> Iterator[tuple[str, NDArray[np.bool_]]]:
    """Convert the prediction and score columns in place; yield (reason, invalid rows)."""
    if cfg.prediction is not None and cfg.prediction in frame.columns:
        predicted, _ = to_classes(frame[cfg.prediction], cfg.classes or ())
        frame[cfg.prediction] = predicted
        yield "invalid_prediction", np.array([p is None for p in predicted], dtype=bool)
    for column in score_columns(cfg):
        if column in frame.columns:
            s = to_score(frame[column])
            frame[column] = s
            arr = s.to_numpy()
            with np.errstate(invalid="ignore"):
                yield "invalid_score", ~((arr >= 0.0) & (arr <= 1.0))


def window(cfg: ModelConfig, frame: pd.DataFrame, *, labels: bool, features: list[str],
           **kwargs: Any) -> Window:
    """Return the multiclass window of prepared rows (``kwargs``: model, version, start...)."""
    scores = score_columns(cfg)
    return Window(
        sensitive_features={c: frame[c] for c in cfg.sensitive_features},
        y_pred=None if cfg.prediction is None else frame[cfg.prediction].to_numpy(),
        y_true=frame[cfg.label].to_numpy() if labels and cfg.label is not None else None,
        y_score=frame[scores].to_numpy(dtype=float) if scores else None,
        X=frame[features] if features else None, classes=cfg.classes, missing=cfg.missing,
        **kwargs)
