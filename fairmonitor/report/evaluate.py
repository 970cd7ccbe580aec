"""One window of predictions in, one immutable fairness report out.

:func:`evaluate_window` is the single function behind both the MLflow evaluator (offline) and
the scheduled monitor (online), so an MLflow metric and a Prometheus gauge of the same name can
never disagree about a definition. It reads the registry to know what each metric needs, skips
what the window cannot support (with the reason), evaluates each sensitive attribute on its own
and, with several, their intersection, and turns undefined values and failures into NaN plus a
reason instead of an exception.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from .._validation import check_option
from ..exceptions import GroupExclusionWarning, InvalidInputError, UndefinedMetricWarning
from ..metrics._groups import (
    INTERSECTION_SEPARATOR,
    apply_missing_policy,
    encode_groups,
    sensitive_columns,
)
from .registry import METRICS, MetricSpec, get_metric
from .thresholds import Severity, Threshold, evaluate_thresholds, worst

__all__ = ["Window", "WindowReport", "evaluate_window", "safe_name"]

log = logging.getLogger(__name__)

_MISSING_REASON = {
    "y_true": "labels not available",
    "y_pred": "no predictions",
    "y_score": "no scores (give a score column or a model with predict_proba)",
    "X": "no feature columns",
    "predict": "no model to call",
}


def _compact(column: NDArray[Any]) -> NDArray[Any]:
    """Object columns of strings (what pandas hands out) as a numpy string array.

    Every metric groups the same columns again; numpy sorts fixed-width strings ~10x faster
    than Python objects, so converting once per window pays for itself many times over.
    """
    if column.dtype == object and all(isinstance(v, str) for v in column):
        return column.astype(str)
    return column


@dataclass(frozen=True)
class Window:
    """The rows of one evaluation: predictions, optional labels/scores/features, and groups.

    Parameters
    ----------
    sensitive_features : mapping of str to array-like, or array-like
        One column per sensitive attribute.
    y_pred : array-like of 0/1, optional
        Hard predictions. Derived as ``y_score >= threshold`` when only scores are given.
    y_score : array-like of float in [0, 1], optional
        Scores (probability of the positive class).
    y_true : array-like of 0/1, optional
        Ground truth, once it has arrived.
    X : DataFrame or 2-D array, optional
        Model inputs without the sensitive columns (feature-space metrics, robustness).
    predict : callable, optional
        The model: ``predict(X) -> 0/1 labels`` (robustness).
    threshold : float, default=0.5
        Decision threshold for deriving ``y_pred`` from ``y_score``.
    model, version : str
        Identity of the model, carried into the report.
    start, end : datetime, optional
        The window's time span.
    missing : {'raise', 'group', 'drop'} or mapping of attribute to one of them
        What to do with missing (NaN/None/NA) sensitive values, per attribute: raise an error,
        make them a group ``"missing"``, or drop those rows from every input (counted in
        :attr:`missing_counts`). See :func:`fairmonitor.metrics.apply_missing_policy`.

    Examples
    --------
    >>> w = Window({"sex": ["F", None, "M", "M"]}, y_pred=[1, 0, 1, 0], missing="drop")
    >>> w.n_rows, w.y_pred.tolist(), dict(w.missing_counts)
    (3, [1, 1, 0], {'sex': ('drop', 1)})
    """

    sensitive_features: Mapping[str, NDArray[Any]]
    y_pred: NDArray[Any] | None = None
    y_score: NDArray[Any] | None = None
    y_true: NDArray[Any] | None = None
    X: Any = None
    predict: Callable[[Any], Any] | None = None
    threshold: float = 0.5
    model: str = ""
    version: str = ""
    start: datetime | None = None
    end: datetime | None = None
    missing: str | Mapping[str, str] = "raise"
    #: attribute -> (policy, rows with a missing value); set from ``missing``
    missing_counts: Mapping[str, tuple[str, int]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        columns, keep, counts = apply_missing_policy(
            sensitive_columns(self.sensitive_features, check_missing=False), self.missing)
        object.__setattr__(self, "missing_counts", MappingProxyType(counts))
        if keep is not None:  # the "drop" policy: the same rows leave every input
            columns = {k: v[keep] for k, v in columns.items()}
            for name in ("y_pred", "y_score", "y_true"):
                value = getattr(self, name)
                if value is not None:
                    object.__setattr__(self, name, np.asarray(value)[keep])
            if self.X is not None:
                X = self.X
                object.__setattr__(self, "X", X.iloc[np.flatnonzero(keep)].reset_index(
                    drop=True) if hasattr(X, "iloc") else np.asarray(X)[keep])
        object.__setattr__(self, "sensitive_features",
                           MappingProxyType({k: _compact(v) for k, v in columns.items()}))
        for name in ("y_pred", "y_score", "y_true"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, np.asarray(value))
        if self.y_pred is None and self.y_score is not None:
            score = np.asarray(self.y_score, dtype=float)
            # paper 001 eq. 1 thresholds with ">=" (the reference code uses ">"); we follow the paper
            object.__setattr__(self, "y_pred", (score >= self.threshold).astype(np.int8))

    @property
    def n_rows(self) -> int:
        """Number of rows in the window."""
        return len(next(iter(self.sensitive_features.values())))

    def get(self, name: str) -> Any:
        """The window field ``name`` (one of the registry's inputs), or None."""
        return getattr(self, name)

    @classmethod
    def from_frame(
        cls,
        frame: Any,
        *,
        sensitive_features: Sequence[str],
        label: str | None = None,
        score: str | None = None,
        prediction: str | None = None,
        features: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> Window:
        """Build a window from the columns of a DataFrame.

        ``features`` defaults to every column not named as sensitive, label, score or
        prediction. A missing column raises an error that lists the available ones.
        """
        columns = [str(c) for c in frame.columns]
        named = [*sensitive_features, *(c for c in (label, score, prediction) if c)]
        missing = [c for c in [*named, *(features or [])] if c not in columns]
        if missing:
            raise InvalidInputError(
                f"column(s) {missing} not in the data; available columns: {columns}"
            )
        if features is None:
            features = [c for c in columns if c not in named]

        def col(name: str | None) -> NDArray[Any] | None:
            return None if name is None else frame[name].to_numpy()

        return cls(
            sensitive_features={c: frame[c].to_numpy() for c in sensitive_features},
            y_true=col(label), y_score=col(score), y_pred=col(prediction),
            X=frame[list(features)] if features else None, **kwargs,
        )


@dataclass(frozen=True)
class WindowReport:
    """The fairness report of one window. Immutable; built by :func:`evaluate_window`.

    Attributes
    ----------
    values : mapping of (metric, attribute) to float
        Every evaluated metric on every attribute; NaN where undefined.
    reasons : mapping of (metric, attribute) to str
        Why a value is NaN (undefined, failed, or its inputs are missing).
    details : mapping of (metric, attribute) to object
        The metric function's full result where it returns more than a float.
    statuses : mapping of (metric, attribute) to severity
        Threshold verdicts, for the values a threshold governs.
    group_counts : mapping of attribute to mapping of group to int
        Rows per group of every attribute (before ``min_group_size``).
    notes : tuple of str
        Other warnings raised while computing (e.g. excluded small groups).
    skipped : mapping of str to str
        Metrics not computed at all, with the reason (e.g. labels not available).
    """

    model: str
    version: str
    start: datetime | None
    end: datetime | None
    n_rows: int
    values: Mapping[tuple[str, str], float]
    reasons: Mapping[tuple[str, str], str]
    details: Mapping[tuple[str, str], Any]
    statuses: Mapping[tuple[str, str], Severity]
    group_counts: Mapping[str, Mapping[str, int]]
    notes: tuple[str, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)
    duration_seconds: float = 0.0

    @property
    def attributes(self) -> tuple[str, ...]:
        """The evaluated attributes, single ones first, then the intersection."""
        return tuple(self.group_counts)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The evaluated metric names, in registry order."""
        seen = dict.fromkeys(metric for metric, _ in self.values)
        return tuple(seen)

    @property
    def status(self) -> Severity:
        """The worst threshold verdict over all values: ``ok`` if none breach.

        ``undefined`` instead of ``ok`` when a governed value is NaN, when a metric failed
        (reason ``error: ...``), or when no value at all is defined: nothing was shown fair.
        """
        verdict = worst(self.statuses.values())
        if verdict == "ok" and self.values and (
                any(r.startswith("error:") for r in self.reasons.values())
                or all(v != v for v in self.values.values())):  # v != v: NaN
            return "undefined"
        return verdict

    def flat(self, prefix: str = "fairness") -> dict[str, float]:
        """``{"<prefix>/<metric>/<attribute>": value}``: the MLflow metric keys.

        Shared by the MLflow evaluator and the monitor's MLflow sink, so both write the same
        keys; names are passed through :func:`safe_name`.

        >>> r = evaluate_window(Window({"g": list("aabb")}, y_pred=[1, 0, 0, 0]),
        ...                     metrics=["demographic_parity_difference"])
        >>> r.flat()
        {'fairness/demographic_parity_difference/g': 0.5}
        """
        return {f"{prefix}/{safe_name(metric)}/{safe_name(attr)}": v
                for (metric, attr), v in self.values.items()}


_SYMBOLS = (("<=", "le"), (">=", "ge"), ("!=", "ne"), ("==", "eq"), ("<", "lt"), (">", "gt"),
            ("=", "eq"), ("+", "plus"), ("%", "pct"), ("&", "and"))
# MLflow metric keys allow letters, digits, "_ - . : /" and spaces; "/" separates key parts
_UNSAFE = re.compile(r"[^\w.\- :]")


def safe_name(name: Any) -> str:
    """Make ``name`` usable as one segment of an MLflow metric key.

    Comparison symbols become words so that ``<25`` and ``>=25`` stay distinct.

    >>> safe_name(">=25"), safe_name("<25"), safe_name("female:>=25"), safe_name("a/b")
    ('ge25', 'lt25', 'female:ge25', 'a_b')
    """
    text = str(name)
    for symbol, word in _SYMBOLS:
        text = text.replace(symbol, word)
    text = _UNSAFE.sub("_", text).strip()
    return "_" if text in ("", ".", "..") else text


def _group_label(label: Any) -> str:
    if isinstance(label, tuple):
        return INTERSECTION_SEPARATOR.join(str(p) for p in label)
    return str(label)


@functools.cache
def _accepted_keywords(func: Callable[..., Any]) -> frozenset[str]:
    return frozenset(inspect.signature(func).parameters)


def _attributes(window: Window, intersection: bool) -> dict[str, Any]:
    cols = dict(window.sensitive_features)
    # a one-column dict, not a bare array, so the metric's messages name the attribute
    attrs: dict[str, Any] = {name: {name: col} for name, col in cols.items()}
    if intersection and len(cols) > 1:
        attrs[INTERSECTION_SEPARATOR.join(cols)] = cols
    return attrs


def _select_metrics(window: Window, metrics: Iterable[str] | None
                    ) -> tuple[list[MetricSpec], dict[str, str]]:
    """Requested specs, and the reason each available-by-default one was skipped."""
    if metrics is not None:
        return [get_metric(name) for name in metrics], {}
    chosen, skipped = [], {}
    for spec in METRICS.values():
        missing = [i for i in spec.inputs if window.get(i) is None]
        if missing:
            skipped[spec.name] = _MISSING_REASON[missing[0]]
        else:
            chosen.append(spec)
    return chosen, skipped


def _call(spec: MetricSpec, window: Window, sf: Any, kwargs: Mapping[str, Any]) -> Any:
    args = [window.get(i) for i in spec.inputs]
    accepted = _accepted_keywords(spec.func)
    kw = {k: v for k, v in kwargs.items() if k in accepted}
    kw.update({i: window.get(i) for i in spec.optional_inputs if window.get(i) is not None})
    return spec.func(*args, sensitive_features=sf, **{**spec.options, **kw})


def evaluate_window(
    window: Window,
    *,
    metrics: Iterable[str] | None = None,
    min_group_size: int = 1,
    intersection: bool = True,
    thresholds: Iterable[Threshold] = (),
    options: Mapping[str, Mapping[str, Any]] | None = None,
    rng: Any = None,
    errors: Literal["coerce", "raise"] = "coerce",
) -> WindowReport:
    """Evaluate fairness metrics on one window, per sensitive attribute.

    Parameters
    ----------
    window : Window
        The rows to evaluate.
    metrics : iterable of str, optional
        Registry names. Default: every registered metric the window's inputs allow (the others
        are listed in ``report.skipped`` with the reason). A requested metric whose inputs are
        missing gives NaN with the reason.
    min_group_size : int, default=1
        Groups with fewer rows are left out of every metric.
    intersection : bool, default=True
        With several attributes, also evaluate their intersection (named ``"a:b"``).
    thresholds : iterable of Threshold
        Alert bounds; their verdicts land in ``report.statuses``. The intersection is governed
        only by thresholds that name it (``attribute="a:b"``).
    options : mapping of metric name to keyword arguments, optional
        Per-metric options, e.g. ``{"abpc": {"bandwidth": 0.05}}``.
    rng : numpy.random.Generator, int or None
        Passed to every metric that takes randomness. ``window.threshold`` is likewise passed
        to every metric that takes a ``threshold`` (robustness, for models that return scores).
    errors : {'coerce', 'raise'}, default='coerce'
        ``"coerce"`` turns a failing metric into NaN with the error as reason (the monitor must
        not crash); ``"raise"`` re-raises it.

    Returns
    -------
    report : WindowReport

    Examples
    --------
    >>> w = Window({"sex": ["F", "F", "M", "M"]}, y_pred=[1, 0, 1, 1], y_true=[1, 0, 1, 0])
    >>> r = evaluate_window(w, thresholds=[Threshold("demographic_parity_difference",
    ...                                              warning=0.1, critical=0.4)])
    >>> r.values[("demographic_parity_difference", "sex")], r.status
    (0.5, 'critical')
    """
    check_option(errors, "errors", ("coerce", "raise"), func="evaluate_window")
    started = time.perf_counter()
    specs, skipped = _select_metrics(window, metrics)
    options = options or {}
    values: dict[tuple[str, str], float] = {}
    reasons: dict[tuple[str, str], str] = {}
    details: dict[tuple[str, str], Any] = {}
    notes: list[str] = []
    attrs = _attributes(window, intersection)
    group_counts = {}
    for attr, sf in attrs.items():
        groups = encode_groups(sf, n_samples=window.n_rows)
        group_counts[attr] = {_group_label(lab): int(c)
                              for lab, c in zip(groups.labels, groups.counts, strict=True)}
    for attr, (how, n) in window.missing_counts.items():
        notes.append(f"sensitive attribute '{attr}': {n} row(s) with a missing value "
                     + ("grouped as 'missing'" if how == "group" else "dropped from the window"))
    cache: dict[tuple[int, str], tuple[Any, list[warnings.WarningMessage]]] = {}
    for spec in specs:
        missing = [i for i in spec.inputs if window.get(i) is None]
        for attr, sf in attrs.items():
            key = (spec.name, attr)
            if missing:
                values[key], reasons[key] = float("nan"), _MISSING_REASON[missing[0]]
                continue
            kwargs = {"min_group_size": min_group_size, "rng": rng, "threshold": window.threshold,
                      **options.get(spec.name, {})}
            # specs sharing a function (e.g. the robustness summaries) share one call per
            # attribute, and the warnings it raised
            cache_key = (id(spec.func), attr)
            try:
                if cache_key not in cache:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        cache[cache_key] = (_call(spec, window, sf, kwargs), list(caught))
                result, caught = cache[cache_key]
                value = float(getattr(result, spec.field or "value", result))
            except Exception as exc:  # a failing metric must not take the window down
                if errors == "raise":
                    raise
                log.warning("metric %s on %r failed: %s", spec.name, attr, exc)
                values[key], reasons[key] = float("nan"), f"error: {exc}"
                continue
            values[key] = value
            if not isinstance(result, float | int | np.floating):
                details[key] = result
            for w in caught:
                text = str(w.message)
                if issubclass(w.category, UndefinedMetricWarning) and np.isnan(value):
                    reasons.setdefault(key, text)
                elif issubclass(w.category, GroupExclusionWarning | UndefinedMetricWarning):
                    if text not in notes:
                        notes.append(text)
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            if np.isnan(value):
                reasons.setdefault(key, "undefined on this window")
    return WindowReport(
        model=window.model, version=window.version, start=window.start, end=window.end,
        n_rows=window.n_rows, values=MappingProxyType(values), reasons=MappingProxyType(reasons),
        details=MappingProxyType(details),
        statuses=MappingProxyType(evaluate_thresholds(
            values, thresholds, [a for a in attrs if a not in window.sensitive_features])),
        group_counts=MappingProxyType(group_counts), notes=tuple(notes),
        skipped=MappingProxyType(skipped), duration_seconds=time.perf_counter() - started,
    )
