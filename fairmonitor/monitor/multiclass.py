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
class by class (``docs/multiclass.md``), and :func:`summarize_window` its summary for the
rollups: one binary summary per class, of the same binary views the report evaluates.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..exceptions import InvalidInputError
from ..report.evaluate import Window
from ..summaries import SummarySpec, summarize
from ..summaries.multiclass import MulticlassSummary
from .rows import duplicate_rows, to_score

if TYPE_CHECKING:
    import pandas as pd

    from .config import ModelConfig

__all__ = ["class_text", "model_classes", "model_scores", "prepare", "prepare_columns",
           "score_columns", "summarize_window", "to_classes", "window"]


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
    return prepare_columns(frame, label=cfg.label, prediction=cfg.prediction,
                           classes=cfg.classes or (), scores=score_columns(cfg))


def prepare_columns(frame: pd.DataFrame, *, label: str | None, prediction: str | None,
                    classes: Sequence[Any], scores: Sequence[str]
                    ) -> tuple[pd.DataFrame, dict[str, int], int]:
    """:func:`prepare` from the columns themselves (a Spark executor has no config)."""
    frame = frame.copy(deep=False)
    keep = np.ones(len(frame), dtype=bool)
    rejected: dict[str, int] = {}
    if label is not None and label in frame.columns:
        labels, unknown = to_classes(frame[label], classes)
        if unknown.any():
            raise InvalidInputError(
                f"column {label!r} holds label(s) {_listed(frame[label][unknown])} "
                f"that are not among the classes {list(classes)}; fix the labels or "
                "'classes' in the config")
        frame[label] = labels
    for reason, bad in _invalid(frame, prediction, classes, scores):
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


def _invalid(frame: pd.DataFrame, prediction: str | None, classes: Sequence[Any],
             scores: Sequence[str]) -> Iterator[tuple[str, NDArray[np.bool_]]]:
    """Convert the prediction and score columns in place; yield (reason, invalid rows)."""
    if prediction is not None and prediction in frame.columns:
        predicted, _ = to_classes(frame[prediction], classes)
        frame[prediction] = predicted
        yield "invalid_prediction", np.array([p is None for p in predicted], dtype=bool)
    for column in scores:
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


def summarize_window(window: Window, *, intersection: bool, spec: SummarySpec,
                     **identity: Any) -> MulticlassSummary:
    """Return a multiclass window's summary: each class's one-vs-rest binary summary.

    Each class's rows are :meth:`Window.one_vs_rest`'s, the view
    :func:`~fairmonitor.report.evaluate_window` evaluates, so a merge of these summaries
    evaluates (:func:`~fairmonitor.report.evaluate_summary`) to the rows' own report. The
    groups are encoded once for every class. ``identity``: model, version, start, end.
    """
    groups = window.groups(intersection)
    parts = {}
    for label in window.classes or ():
        binary = window.one_vs_rest(label)
        parts[label] = summarize(
            binary.sensitive_features, y_pred=binary.y_pred, y_score=binary.y_score,
            y_true=binary.y_true, X=binary.X, threshold=binary.threshold,
            intersection=intersection, groups=groups, spec=spec, **identity)
    return MulticlassSummary(parts)


def model_classes(raw: Any, classes: Sequence[Any], name: str) -> NDArray[Any]:
    """Return a model's predictions as the configured classes (a model version's, ``reference``).

    Class labels are matched by their text (:func:`class_text`); one probability column per
    class (``predict_proba``-like output) gives the most probable class. A prediction that is
    not a class is an error: it would count as "rest" for every class.

    >>> model_classes(np.array([2.0, 0.0]), (0, 1, 2), "predict").tolist()
    [2, 0]
    >>> model_classes(np.array([[.1, .9], [.8, .2]]), ("a", "b"), "predict").tolist()
    ['b', 'a']
    """
    import pandas as pd

    out = np.asarray(raw)
    if out.ndim == 2 and out.shape[1] == len(classes) and out.dtype.kind == "f":
        return np.asarray(classes, dtype=object)[np.argmax(out, axis=1)]
    out = out.reshape(-1) if out.ndim == 2 and out.shape[1] == 1 else out
    mapped, unknown = to_classes(pd.Series(out), classes)
    bad = unknown | np.array([m is None for m in mapped], dtype=bool)
    if bad.any():
        raise InvalidInputError(f"{name} gives value(s) {_listed(out[bad])} that are not among "
                                f"the classes {list(classes)}; fix 'classes' in the config")
    return mapped


def model_scores(raw_model: Any, model_input: Any, classes: Sequence[Any]
                 ) -> NDArray[np.float64] | None:
    """Return ``predict_proba``'s columns in the order of ``classes``, or None.

    The columns are the model's ``classes_`` (matched by their text); a model without
    ``predict_proba`` or ``classes_``, or whose classes are not the configured ones, gives None
    (the score metrics are then skipped, with the reason).
    """
    if not hasattr(raw_model, "predict_proba") or not hasattr(raw_model, "classes_"):
        return None
    position = {class_text(c): k for k, c in enumerate(raw_model.classes_)}
    if set(position) != {class_text(c) for c in classes}:
        return None
    proba = np.asarray(raw_model.predict_proba(model_input), dtype=float)
    return proba[:, [position[class_text(c)] for c in classes]]
