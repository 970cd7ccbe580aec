"""Multiclass windows: every class one-vs-rest, per class and as the worst class (issue 29).

A multiclass window (:class:`~fairmonitor.report.Window` with ``classes``) holds class labels
as predictions and ground truth, and one probability column per class as scores (an
``(n_rows, n_classes)`` array in the order of ``classes``, as ``predict_proba`` returns it).
:func:`~fairmonitor.report.evaluate_window` evaluates it once per class c on the binary window
"c against the rest" (:meth:`Window.one_vs_rest`: predictions and labels ``== c``, scores the
probability of c), with each registered metric's own function; this module checks the
inputs and folds the per-class reports into one: ``<metric>__class_<c>`` per class and
``<metric>`` the worst class (:func:`fairmonitor.report.registry.worst_class`; the keys are
the registry's, :func:`~fairmonitor.report.registry.class_key`).

The worst class's value is the largest per-class value (the smallest for a higher-is-fairer
ratio). Its interval is ``[max lower, max upper]`` of the per-class intervals (``[min, min]``
for a ratio): it covers the worst class's true value whenever every class's interval covers
its own, so at a level of at least ``1 - K (1 - level)`` for ``K`` classes (Bonferroni), and
its chance level is the largest per-class chance level, a lower bound of the chance level of
a maximum. Thresholds govern the worst class and, through their own value, each class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..exceptions import InvalidInputError
from ..metrics.shared import Interval
from ..utils.groups import INTERSECTION_SEPARATOR
from .registry import METRICS, class_key, worst_class
from .thresholds import Threshold, evaluate_thresholds

__all__ = ["ClassWorst", "check_class_labels", "check_class_scores", "check_classes",
           "combine_class_reports", "indicator"]

_NAN = float("nan")


def check_classes(classes: Sequence[Any]) -> tuple[Any, ...]:
    """Return the class labels as a tuple of plain Python values: at least two, unique.

    >>> check_classes(np.array([0, 1, 2]))
    (0, 1, 2)
    """
    if isinstance(classes, str | bytes):
        raise InvalidInputError(f"`classes` must be a list of class labels; got {classes!r}")
    out = tuple(c.item() if isinstance(c, np.generic) else c for c in classes)
    if len(out) < 2:
        raise InvalidInputError(f"`classes` needs at least two class labels; got {list(out)}")
    if len({str(c) for c in out}) != len(out):
        raise InvalidInputError(f"`classes` must be unique (as text); got {list(out)}")
    return out


def indicator(values: Any, label: Any) -> NDArray[np.int8]:
    """Return 1 where ``values`` equals class ``label``, else 0 (the one-vs-rest 0/1 column).

    >>> indicator(np.array(["a", "b", "c", "a"], dtype=object), "a").tolist()
    [1, 0, 0, 1]
    """
    return (np.asarray(values) == label).astype(np.int8)


def check_class_labels(values: Any, classes: Sequence[Any], name: str) -> NDArray[np.int32]:
    """Return each value's position in ``classes`` (predictions or labels), or raise.

    A value outside ``classes`` (a typo, a class the model does not know, or text labels
    against numeric classes) would silently count as "rest" in every class: an error instead.
    The positions make each class's 0/1 column one integer comparison.

    >>> check_class_labels(np.array(["b", "a", "b"], dtype=object), ("a", "b"), "y_pred")
    array([1, 0, 1], dtype=int32)
    """
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InvalidInputError(f"`{name}` must be one class label a row; got shape {arr.shape}")
    codes = np.full(arr.shape, -1, dtype=np.int32)
    for k, label in enumerate(classes):
        codes[arr == label] = k
    if (codes < 0).any():
        unknown = list(dict.fromkeys(v.item() if isinstance(v, np.generic) else v
                                     for v in arr[codes < 0]))[:8]
        raise InvalidInputError(
            f"`{name}` holds value(s) {unknown} that are not among the classes "
            f"{list(classes)}; give every class in `classes` (with the labels' own type)")
    return codes


def check_class_scores(y_score: Any, n_classes: int, n_rows: int) -> NDArray[np.float64]:
    """Return per-class scores as an ``(n_rows, n_classes)`` float array, or raise."""
    arr = np.asarray(y_score, dtype=float)
    if arr.ndim != 2 or arr.shape != (n_rows, n_classes):
        raise InvalidInputError(
            f"multiclass `y_score` must hold one probability column per class, shape "
            f"({n_rows}, {n_classes}) in the order of `classes`; got shape {arr.shape}")
    return arr


@dataclass(frozen=True)
class ClassWorst:
    """The detail of a multiclass value ``<metric>``: which class is the worst, and each one.

    Attributes
    ----------
    label : object or None
        The worst class (None when no class is defined).
    values : mapping of class label to float
        Every class's value (NaN where undefined).
    result : object
        The worst class's own result (e.g. MADD's, with its pairwise matrix), or None.
    """

    label: Any
    values: Mapping[Any, float] = field(default_factory=dict)
    result: Any = None


def _worst_interval(metric: str, intervals: Mapping[Any, Any]) -> Interval:
    """Return the worst class's interval from the defined classes' (module docstring).

    Bounds and chance level each need every class's: one class without them (MADD has a
    chance level but no bounds) leaves them NaN, with that class's reason.
    """
    pick = min if METRICS[metric].direction == "higher_is_fairer" else max
    method = (f"worst class: {pick.__name__} of the per-class bounds (covers when every "
              "class's interval covers)")
    if not intervals:
        return Interval(_NAN, _NAN, _NAN, method, "no class is defined")
    ivs = {c: iv if iv is not None else Interval(_NAN, _NAN, _NAN, "none", "no interval")
           for c, iv in intervals.items()}
    chances = [iv.chance for iv in ivs.values()]
    chance = pick(chances) if all(math.isfinite(v) for v in chances) else _NAN
    for c, iv in ivs.items():
        if not (math.isfinite(iv.lower) and math.isfinite(iv.upper)):
            return Interval(_NAN, _NAN, chance, method, f"class {c!r}: {iv.reason or 'none'}")
    return Interval(pick(iv.lower for iv in ivs.values()), pick(iv.upper for iv in ivs.values()),
                    chance, method)


def _intersections(attributes: Sequence[str]) -> list[str]:
    return [a for a in attributes if INTERSECTION_SEPARATOR in a
            and all(p in attributes for p in a.split(INTERSECTION_SEPARATOR))]


def _class_notes(reports: Mapping[Any, Any]) -> list[str]:
    """Every class's notes: once when all classes share one, else prefixed with the class."""
    shared = set.intersection(*(set(r.notes) for r in reports.values()))
    notes = [n for n in next(iter(reports.values())).notes if n in shared]
    for c, r in reports.items():
        notes += [f"class {c!r}: {n}" for n in r.notes if n not in shared]
    return notes


def combine_class_reports(reports: Mapping[Any, Any], thresholds: Sequence[Threshold]
                          ) -> dict[str, Any]:
    """Fold the per-class reports of one window into the fields of one report.

    Parameters
    ----------
    reports : mapping of class label to WindowReport
        Each class's one-vs-rest report, in the order of the classes (thresholds applied).
    thresholds : sequence of Threshold
        The evaluation's thresholds, which govern the worst class too.

    Returns
    -------
    dict
        ``values``, ``reasons``, ``details``, ``statuses``, ``intervals``, ``notes`` and
        ``skipped`` for :class:`~fairmonitor.report.WindowReport` (the other fields are every
        class's).
    """
    first = next(iter(reports.values()))
    found: dict[str, dict[Any, Any]] = {k: {} for k in (
        "values", "reasons", "details", "statuses", "intervals")}
    worst_values: dict[tuple[str, str], float] = {}
    worst_intervals: dict[tuple[str, str], Any] = {}
    notes = _class_notes(reports)
    for key in first.values:
        metric, attr = key
        per_class = {c: float(r.values.get(key, _NAN)) for c, r in reports.items()}
        label, value = worst_class(metric, per_class)
        worst_values[key] = found["values"][key] = value
        undefined = [c for c, v in per_class.items() if v != v]
        if label is None:
            found["reasons"][key] = (f"undefined for every class ({first.reasons.get(key)})")
        elif undefined:
            notes.append(f"{metric} on '{attr}': class(es) {undefined} undefined "
                         f"({reports[undefined[0]].reasons.get(key)}); the worst class is "
                         "over the others")
        found["details"][key] = ClassWorst(label, MappingProxyType(per_class),
                                           None if label is None
                                           else reports[label].details.get(key))
        if first.intervals:
            worst_intervals[key] = found["intervals"][key] = _worst_interval(
                metric, {c: r.intervals.get(key) for c, r in reports.items()
                         if per_class[c] == per_class[c]})
        for c, r in reports.items():
            ckey = (class_key(metric, c), attr)
            found["values"][ckey] = per_class[c]
            for part in ("reasons", "details", "statuses", "intervals"):
                if key in getattr(r, part):
                    found[part][ckey] = getattr(r, part)[key]
    found["statuses"].update(evaluate_thresholds(
        worst_values, thresholds, _intersections(list(first.group_counts)), worst_intervals))
    skipped = {k: v for r in reports.values() for k, v in r.skipped.items()}
    return {**{k: MappingProxyType(v) for k, v in found.items()}, "notes": tuple(notes),
            "skipped": MappingProxyType(skipped),
            "duration_seconds": sum(r.duration_seconds for r in reports.values())}
