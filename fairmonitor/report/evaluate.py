"""One window of predictions in, one immutable fairness report out.

:func:`evaluate_window` is the single function behind both the MLflow evaluator (offline) and
the scheduled monitor (online), so an MLflow metric and a Prometheus gauge of the same name can
never disagree about a definition. It reads the registry to know what each metric needs, skips
what the window cannot support (with the reason), evaluates each sensitive attribute on its own
and, with several, their intersection, and turns undefined values and failures into NaN plus a
reason instead of an exception.
"""

from __future__ import annotations

import copy
import dataclasses
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

from .._validation import (
    check_binary,
    check_continuous,
    check_option,
    check_sample_weight,
    check_scores,
)
from ..exceptions import GroupExclusionWarning, InvalidInputError, UndefinedMetricWarning
from ..summaries import (
    MulticlassSummary,
    RegressionSummary,
    SummarySpec,
    WindowSummary,
    summarize,
)
from ..summaries.regression import regression_result
from ..utils.groups import (
    INTERSECTION_SEPARATOR,
    apply_missing_policy,
    encode_attributes,
    sensitive_columns,
)
from . import multiclass as _multiclass
from .intervals import interval_of, undefined
from .options import DEFAULT, DefaultType, EvaluationOptions, resolve
from .registry import METRICS, MetricSpec, get_metric
from .thresholds import Severity, Threshold, evaluate_thresholds, worst

__all__ = ["WEIGHTED_METRICS", "Window", "WindowReport", "evaluate_summary", "evaluate_window",
           "safe_name"]

log = logging.getLogger(__name__)

_MISSING_REASON = {
    "y_true": "labels not available",
    "y_pred": "no predictions",
    "y_score": "no scores (give a score column or a model with predict_proba)",
    "X": "no feature columns",
    "predict": "no model to call",
}


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
    sample_weight : array-like of float, optional
        Per-row weights (e.g. inverse sampling probabilities). The metrics with a weighted
        definition (:data:`WEIGHTED_METRICS`: the parity gaps and ABCC) become weighted; the
        others are NaN with the reason, never silently unweighted. No intervals then.
    missing : {'raise', 'group', 'drop'} or mapping of attribute to one of them
        What to do with missing (NaN/None/NA) sensitive values, per attribute: raise an error,
        make them a group ``"missing"``, or drop those rows from every input (counted in
        :attr:`missing_counts`). See :func:`fairmonitor.metrics.apply_missing_policy`.
    classes : sequence, optional
        A multiclass window (:mod:`fairmonitor.report.multiclass`): the class labels, in the
        order of the score columns. ``y_pred`` and ``y_true`` then hold class labels (each one
        of ``classes``) and ``y_score`` one probability column per class, shape
        ``(n_rows, n_classes)`` (``predict_proba``'s output); without ``y_pred`` the
        predicted class is the most probable one. ``predict`` returns class labels.
        :func:`evaluate_window` evaluates every class one-vs-rest. None: a binary window.

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
    sample_weight: NDArray[Any] | None = None
    classes: tuple[Any, ...] | None = None
    #: attribute -> (policy, rows with a missing value); set from ``missing``
    missing_counts: Mapping[str, tuple[str, int]] = field(init=False, default_factory=dict)
    #: True when ``y_pred`` was derived from ``y_score``: invalid scores then void both
    pred_from_score: bool = field(init=False, default=False, repr=False)
    _encoded: dict[bool, Any] = field(init=False, default_factory=dict, repr=False,
                                      compare=False)
    #: multiclass: each row's position in ``classes``, per ``y_pred``/``y_true`` given
    _class_codes: dict[str, NDArray[np.int32]] = field(init=False, default_factory=dict,
                                                       repr=False, compare=False)

    def __post_init__(self) -> None:
        columns, keep, counts = apply_missing_policy(
            sensitive_columns(self.sensitive_features, check_missing=False), self.missing)
        object.__setattr__(self, "missing_counts", MappingProxyType(counts))
        if keep is not None:  # the "drop" policy: the same rows leave every input
            columns = {k: v[keep] for k, v in columns.items()}
            for name in ("y_pred", "y_score", "y_true", "sample_weight"):
                value = getattr(self, name)
                if value is not None:
                    object.__setattr__(self, name, np.asarray(value)[keep])
            if self.X is not None:
                X = self.X
                object.__setattr__(self, "X", X.iloc[np.flatnonzero(keep)].reset_index(
                    drop=True) if hasattr(X, "iloc") else np.asarray(X)[keep])
        object.__setattr__(self, "sensitive_features",
                           MappingProxyType(columns))  # as given: factorized once, by hashing
        for name in ("y_pred", "y_score", "y_true"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, np.asarray(value))
        if self.sample_weight is not None:
            object.__setattr__(self, "sample_weight",
                               check_sample_weight(self.sample_weight, self.n_rows))
        if self.classes is not None:
            self._check_multiclass()
        elif self.y_pred is None and self.y_score is not None:
            score = np.asarray(self.y_score, dtype=float)
            # paper 001 eq. 1 thresholds with ">=" (the reference code uses ">"): the paper wins
            object.__setattr__(self, "y_pred", (score >= self.threshold).astype(np.int8))
            object.__setattr__(self, "pred_from_score", True)

    def _check_multiclass(self) -> None:
        """Check a multiclass window's classes, labels and scores; derive the predicted class."""
        classes = _multiclass.check_classes(self.classes)
        object.__setattr__(self, "classes", classes)
        if self.y_score is not None:
            object.__setattr__(self, "y_score", _multiclass.check_class_scores(
                self.y_score, len(classes), self.n_rows))
            if self.y_pred is None:  # the most probable class (NaN scores void it, as binary)
                object.__setattr__(self, "y_pred", np.asarray(classes, dtype=object)[
                    np.argmax(np.nan_to_num(self.y_score, nan=-1.0), axis=1)])
                object.__setattr__(self, "pred_from_score", True)
        for name in ("y_pred", "y_true"):
            value = getattr(self, name)
            if value is not None:  # each row's class position, once: 0/1 columns are cheap
                self._class_codes[name] = _multiclass.check_class_labels(value, classes, name)

    def one_vs_rest(self, label: Any) -> Window:
        """Return the binary window of class ``label`` against the others (a multiclass window).

        Predictions and labels become ``== label``, the scores that class's probability column,
        the model ``predict(X) == label``; the rows, groups (encoded once, shared), weights and
        features are the same.

        >>> w = Window({"g": list("aabb")}, y_pred=["x", "y", "z", "x"], classes=["x", "y", "z"])
        >>> w.one_vs_rest("x").y_pred.tolist()
        [1, 0, 0, 1]
        """
        if self.classes is None:
            raise InvalidInputError("one_vs_rest needs a multiclass window (give `classes`)")
        k = self.classes.index(label)
        binary = copy.copy(self)  # no __post_init__: the checked rows and groups are kept
        fields_ = {"classes": None, "_class_codes": {},
                   **{name: None if code is None else (code == k).astype(np.int8)
                      for name, code in self._class_codes.items()},
                   "y_score": None if self.y_score is None else self.y_score[:, k],
                   "predict": None if self.predict is None
                   else functools.partial(_predict_class, self.predict, label)}
        for name, value in fields_.items():
            object.__setattr__(binary, name, value)
        return binary

    @property
    def n_rows(self) -> int:
        """Number of rows in the window."""
        return len(next(iter(self.sensitive_features.values())))

    def get(self, name: str) -> Any:
        """Return the window field ``name`` (one of the registry's inputs), or None."""
        return getattr(self, name)

    def groups(self, intersection: bool = True) -> dict[str, Any]:
        """Every attribute's encoded groups (and the intersection), computed once per window.

        What :func:`evaluate_window` and a summary of the same rows
        (:func:`fairmonitor.summaries.summarize` with ``groups=``) share.
        """
        if intersection not in self._encoded:
            self._encoded[intersection] = encode_attributes(
                self.sensitive_features, intersection=intersection,
                validated=True)  # checked in __post_init__
        return self._encoded[intersection]

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
            # the columns themselves: text is encoded through its own factorize
            sensitive_features={c: frame[c] for c in sensitive_features},
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
    intervals : mapping of (metric, attribute) to Interval
        Each value's confidence interval (``lower``, ``upper``, at ``confidence_level``), its
        chance level (``chance``: what a fair model reads at these group sizes) and the
        method; NaN with a ``reason`` where undefined. Empty when intervals are turned off.
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
    intervals: Mapping[tuple[str, str], Any] = field(default_factory=dict)

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


    def flat_intervals(self, prefix: str = "fairness") -> dict[str, float]:
        """``{"<prefix>/ci_lower/<metric>/<attribute>": lower, .../ci_upper/..., .../chance/...}``.

        The MLflow keys of each value's interval and chance level (NaN where undefined),
        beside :meth:`flat`'s values.

        >>> r = evaluate_window(Window({"g": list("aabb")}, y_pred=[1, 0, 0, 0]),
        ...                     metrics=["demographic_parity_difference"])
        >>> for key, v in r.flat_intervals().items():
        ...     print(key, round(v, 3))
        fairness/ci_lower/demographic_parity_difference/g 0.0
        fairness/ci_upper/demographic_parity_difference/g 0.987
        fairness/chance/demographic_parity_difference/g 0.309
        """
        out: dict[str, float] = {}
        for (metric, attr), iv in self.intervals.items():
            for part, v in (("ci_lower", iv.lower), ("ci_upper", iv.upper),
                            ("chance", iv.chance)):
                out[f"{prefix}/{part}/{safe_name(metric)}/{safe_name(attr)}"] = float(v)
        return out


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


def _predict_class(predict: Callable[[Any], Any], label: Any, X: Any) -> NDArray[np.int8]:
    """Return the 0/1 predictions of one class from a multiclass model (robustness)."""
    return _multiclass.indicator(np.asarray(predict(X)).reshape(-1), label)


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


def _select_metrics(has: Callable[[str], bool], metrics: Iterable[str] | None,
                    task: str = "binary") -> tuple[list[MetricSpec], dict[str, str]]:
    """Return requested specs, and the reason each available-by-default one was skipped.

    By default only the metrics of the window's ``task`` (the registry's ``task`` column).
    """
    if metrics is not None:
        return [get_metric(name) for name in metrics], {}
    chosen, skipped = [], {}
    for spec in METRICS.values():
        if spec.task != task:
            continue
        missing = [i for i in spec.inputs if not has(i)]
        if missing:
            skipped[spec.name] = _MISSING_REASON[missing[0]]
        else:
            chosen.append(spec)
    return chosen, skipped


def _accepted(spec: MetricSpec, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Return the keywords of ``kwargs`` the metric's function takes, and its options."""
    accepted = _accepted_keywords(spec.func)
    return {**spec.options, **{k: v for k, v in kwargs.items() if k in accepted}}


def _call(spec: MetricSpec, window: Window, sf: Any, kwargs: Mapping[str, Any]) -> Any:
    args = [window.get(i) for i in spec.inputs]
    accepted = _accepted_keywords(spec.func)
    kw = {k: v for k, v in kwargs.items() if k in accepted}
    kw.update({i: window.get(i) for i in spec.optional_inputs if window.get(i) is not None})
    return spec.func(*args, sensitive_features=sf, **{**spec.options, **kw})


#: Metrics computed from a summary's counts and score summaries (every other one reads rows).
SUMMARY_METRICS = frozenset(name for name, spec in METRICS.items() if not spec.needs_rows)
#: Metrics with a weighted definition (``Window.sample_weight``): rates become weighted shares
#: (fairlearn's ``sample_params``), ABCC compares weighted CDFs. MADD's and ABPC's bandwidth
#: rules, HFM's nearest neighbours, CFair's matching and the robustness protocol have none here.
WEIGHTED_METRICS = frozenset(name for name, spec in METRICS.items() if spec.weighted)


def _from_summary_value(spec: MetricSpec, summary: WindowSummary, attr: str,
                        kwargs: Mapping[str, Any]) -> Any:
    """One summary metric on one attribute, the registry's way (``spec.from_summary``)."""
    accepted = _accepted_keywords(spec.func)
    kw = {**spec.options, **{k: v for k, v in kwargs.items() if k in accepted}}
    assert spec.from_summary is not None
    return spec.from_summary(spec, summary.attributes[attr], kw, summary.spec)


def _sample_window(summary: WindowSummary, attr: str, predict: Any, threshold: float
                   ) -> tuple[Window, dict[str, Any]]:
    """Return the row sample of one attribute's groups as a window (the row metrics' input)."""
    a = summary.attributes[attr]
    groups = list(a.groups.values())
    columns = {c: np.concatenate([g.sample[c] for g in groups]) for c in groups[0].sample}
    parts = attr.split(INTERSECTION_SEPARATOR) if isinstance(a.labels[0], tuple) else [attr]
    labels = [lab if isinstance(lab, tuple) else (lab,) for lab in a.labels]
    sf = {p: np.concatenate([np.array([lab[k]] * g.sample_keys.size, dtype=object)
                             for lab, g in zip(labels, groups, strict=True)])
          for k, p in enumerate(parts)}
    X = None
    features = [c for c in columns if c.startswith("x:")]
    if features:
        import pandas as pd  # the row sample's features as the DataFrame the metrics take

        X = pd.DataFrame({c[2:]: columns[c] for c in features})
    window = Window(sf, y_pred=columns.get("y_pred"), y_score=columns.get("y_score"),
                    y_true=columns.get("y_true"), X=X, predict=predict, threshold=threshold)
    return window, dict(window.sensitive_features)


def evaluate_window(
    window: Window,
    *,
    metrics: Iterable[str] | None = None,
    min_group_size: int | DefaultType = DEFAULT,
    min_condition_size: int | DefaultType = DEFAULT,
    intersection: bool | DefaultType = DEFAULT,
    thresholds: Iterable[Threshold] | DefaultType = DEFAULT,
    options: Mapping[str, Mapping[str, Any]] | None | DefaultType = DEFAULT,
    rng: Any = DEFAULT,
    errors: Literal["coerce", "raise"] | DefaultType = DEFAULT,
    confidence_level: float | None | DefaultType = DEFAULT,
    evaluation: EvaluationOptions | None = None,
    task: str | DefaultType = DEFAULT,
) -> WindowReport:
    """Evaluate fairness metrics on one window, per sensitive attribute.

    Parameters
    ----------
    window : Window
        The rows to evaluate. A multiclass window (``classes``) is evaluated for every class
        against the rest: ``<metric>__class_<c>`` per class and ``<metric>`` the worst class
        (:mod:`fairmonitor.report.multiclass`).
    metrics : iterable of str, optional
        Registry names. Default: every registered metric the window's inputs allow (the others
        are listed in ``report.skipped`` with the reason). A requested metric whose inputs are
        missing gives NaN with the reason.
    min_group_size : int, default=1
        Groups with fewer rows are left out of every metric.
    min_condition_size : int, default=1
        Per rate, groups with fewer rows of what it conditions on (actual positives for a
        TPR, actual negatives for an FPR, predicted positives for precision) are left out of
        that rate's gap, with the reason. The monitor and the evaluator default to
        :data:`~fairmonitor.report.MIN_GROUP_SIZE` and
        :data:`~fairmonitor.report.MIN_CONDITION_SIZE` (``docs/intervals.md``).
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
    confidence_level : float or None, default=0.95
        Level of each value's confidence interval (``report.intervals``; the methods are in
        the registry's ``interval`` column and :mod:`fairmonitor.report.intervals`). None
        skips intervals and chance levels.
    evaluation : EvaluationOptions, optional
        All of the above settings in one object (built once from a config, as the monitor and
        the evaluator do); a keyword given explicitly wins over its field.
    task : {'binary', 'regression'}, default='binary'
        The kind of model. ``"regression"``: ``y_pred`` and ``y_true`` are continuous (never
        thresholded) and the default metrics are the registry's regression ones
        (``docs/regression.md``); they read the rows, and their intervals are resampled.

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
    if errors is not DEFAULT:
        check_option(errors, "errors", ("coerce", "raise"), func="evaluate_window")
    settings = resolve(evaluation, min_group_size=min_group_size,
                       min_condition_size=min_condition_size, intersection=intersection,
                       thresholds=thresholds, options=options, rng=rng, errors=errors,
                       confidence_level=confidence_level, task=task
                       ).replace(threshold=window.threshold)
    if window.classes is not None:  # every class one-vs-rest, then the worst class
        reports = {c: evaluate_window(window.one_vs_rest(c), metrics=metrics, evaluation=settings)
                   for c in window.classes}
        return dataclasses.replace(next(iter(reports.values())),
                                   **_multiclass.combine_class_reports(reports,
                                                                       settings.thresholds))
    started = time.perf_counter()
    specs, skipped = _select_metrics(lambda i: window.get(i) is not None, metrics,
                                     settings.task)
    # one summary of the window (groups encoded once, string columns converted once, each
    # group's scores sorted once), which every count and score metric reads: the same path
    # as evaluate_summary. Raw scores are kept (the window holds them anyway), so every
    # option of every metric applies and the values are the raw rows' values.
    inputs, failed = (_regression_inputs(window) if settings.task == "regression"
                      else _checked_inputs(window))
    intersection = settings.intersection
    summary = summarize(window.sensitive_features, **inputs, threshold=window.threshold,
                        groups=window.groups(intersection),
                        intersection=intersection, spec=_IN_PROCESS, model=window.model,
                        version=window.version, start=window.start, end=window.end)
    attrs = _attributes(window, intersection)
    if settings.task == "regression":  # its metrics read rows: the groups encoded once
        attrs = window.groups(intersection)

    def rows(attr: str) -> tuple[Window, Any]:
        return window, attrs[attr]

    run = _Run(summary, rows, lambda i: window.get(i) is not None, settings, failed=failed,
               weights=window.sample_weight)
    return _evaluate(run, specs, skipped, started=started, notes=_missing_notes(window))


def _missing_notes(window: Window) -> list[str]:
    """Return what the window's missing-value policy did, one note per attribute."""
    return [f"sensitive attribute '{attr}': {n} row(s) with a missing value "
            + ("grouped as 'missing'" if how == "group" else "dropped from the window")
            for attr, (how, n) in window.missing_counts.items()]


def _intersections(summary: WindowSummary) -> list[str]:
    """Return the summary's automatic intersections (``"a:b"`` of attributes it also holds).

    Only a threshold that names one governs it.
    """
    return [a for a in summary.attributes if INTERSECTION_SEPARATOR in a
            and all(p in summary.attributes for p in a.split(INTERSECTION_SEPARATOR))]


def _regression_inputs(window: Window) -> tuple[dict[str, Any], dict[str, Exception]]:
    """Check a regression window's continuous predictions and targets, once.

    Nothing goes to the summary (its counts and score summaries are the classification
    path's): the regression metrics read the rows, and a failed check is their error.
    """
    _, failed = _run_checks(window, (("y_pred", check_continuous),
                                     ("y_true", check_continuous)))
    return {}, failed


def _run_checks(window: Window, checks: tuple[tuple[str, Callable[[Any, str], NDArray[Any]]],
                                                ...]
                ) -> tuple[dict[str, Any], dict[str, Exception]]:
    """Return each present input checked (and of the window's length), or its error."""
    inputs: dict[str, Any] = {}
    failed: dict[str, Exception] = {}
    for name, check in checks:
        value = window.get(name)
        if value is None:
            continue
        try:
            checked = check(value, name)
            if checked.size != window.n_rows:
                raise InvalidInputError(
                    f"`sensitive_features` has {window.n_rows} rows but `{name}` has "
                    f"{checked.size}; pass arrays aligned row by row.")
            inputs[name] = checked
        except InvalidInputError as exc:
            failed[name] = exc
    return inputs, failed


def _checked_inputs(window: Window) -> tuple[dict[str, Any], dict[str, Exception]]:
    """Return the window's predictions, labels and scores, checked once for every metric.

    An input that fails its check is left out of the summary; the metrics that need it fail
    with its error (NaN plus the reason, as when each metric checked its own input), the
    others are unaffected.
    """
    # 0/1 as a byte a row, not a float; the scores are only read (the summary lays out its
    # own copy), so valid float64 scores are not copied
    inputs, failed = _run_checks(window, (
        ("y_pred", _binary_int8), ("y_true", _binary_int8),
        ("y_score", functools.partial(check_scores, copy=False))))
    if window.pred_from_score and "y_score" in failed:
        # predictions thresholded from invalid scores (NaN -> 0, inf -> 1) would be made-up
        # numbers: every metric reads the same verdict on those rows, the scores' error
        inputs.pop("y_pred", None)
        failed["y_pred"] = failed["y_score"]
    return inputs, failed


def _binary_int8(value: Any, name: str) -> NDArray[np.int8]:
    """0/1 labels or predictions as int8, checked (integers and booleans in two reductions)."""
    arr = np.asarray(value)
    if arr.ndim == 1 and arr.size and arr.dtype.kind in "biu" \
            and arr.min() >= 0 and arr.max() <= 1:
        return arr.astype(np.int8, copy=False)
    return check_binary(arr, name).astype(np.int8)


#: evaluate_window's summary: raw scores, no row sample (the rows are at hand).
_IN_PROCESS = SummarySpec(max_raw=None, sample_size=0)


def evaluate_summary(
    summary: WindowSummary | RegressionSummary | MulticlassSummary,
    *,
    metrics: Iterable[str] | None = None,
    min_group_size: int | DefaultType = DEFAULT,
    min_condition_size: int | DefaultType = DEFAULT,
    thresholds: Iterable[Threshold] | DefaultType = DEFAULT,
    options: Mapping[str, Mapping[str, Any]] | None | DefaultType = DEFAULT,
    predict: Callable[[Any], Any] | None = None,
    threshold: float | DefaultType = DEFAULT,
    rng: Any = DEFAULT,
    errors: Literal["coerce", "raise"] | DefaultType = DEFAULT,
    confidence_level: float | None | DefaultType = DEFAULT,
    results: Mapping[tuple[str, str], tuple[Any, list[Any]]] | None = None,
    evaluation: EvaluationOptions | None = None,
) -> WindowReport:
    """Evaluate a (possibly merged) window summary: the report :func:`evaluate_window` gives.

    Counts and parity metrics are exact; MADD is exact; ABCC and ABPC are exact with raw
    scores and within their certified errors from cells (``report.details[("abcc",
    attr)].error``, ``report.details[("abpc", attr)].error``, at most 1e-6 in practice; ABPC
    for KDE grids below ``2**DYADIC_BITS`` cells). HFM, CFair and robustness need rows: they
    run on the summary's row sample (``sample_size`` rows per group, a deterministic bottom-k hash
    sample), so their values are **estimates** whose error shrinks as 1/sqrt(sample), and
    ``report.notes`` says so; with ``sample_size=0`` they are NaN with the reason. A
    regression model's summary (:func:`~fairmonitor.summaries.summarize_regression`) gives
    the regression metrics: the error metrics and their intervals from the groups' sums (the
    rows' values), the distribution metrics from raw predictions (the rows' values) or from
    cells (within ``detail["error"]``, certified), ``prediction_madd`` exactly with the
    ``value_range`` it was summarized with.

    Parameters
    ----------
    summary : WindowSummary or MulticlassSummary
        A multiclass summary (:mod:`fairmonitor.summaries.multiclass`, one binary summary per
        class) is evaluated class by class and folded as :func:`evaluate_window` folds a
        multiclass window: ``<metric>__class_<c>`` per class and ``<metric>`` the worst.
    predict : callable, optional
        The model, for the robustness metrics (run on the sample).
    metrics, min_group_size, min_condition_size, thresholds, options, threshold, rng, errors,
    confidence_level, evaluation
        As :func:`evaluate_window` (``threshold``: the decision threshold, default 0.5).
        Intervals come from the summary's counts and score summaries (the same as on the raw
        rows, up to the cells' resolution).
    results : mapping of (metric, attribute) to (result, warnings), optional
        Metric results computed elsewhere (e.g. ``hfm_average`` scanned over all rows on
        Spark), with the warnings their computation raised: used instead of calling the
        metric on the row sample; value, interval, reason and thresholds follow as usual. An
        exception as the result is the metric's failure (``errors`` decides).

    Returns
    -------
    report : WindowReport

    Examples
    --------
    >>> from fairmonitor.summaries import summarize
    >>> hour1 = summarize({"sex": ["F", "M"]}, y_pred=[1, 0])
    >>> hour2 = summarize({"sex": ["F", "M"]}, y_pred=[0, 0])
    >>> evaluate_summary(hour1.merge(hour2)).values[("demographic_parity_difference", "sex")]
    0.5
    """
    if errors is not DEFAULT:
        check_option(errors, "errors", ("coerce", "raise"), func="evaluate_summary")
    settings = resolve(evaluation, min_group_size=min_group_size,
                       min_condition_size=min_condition_size, thresholds=thresholds,
                       options=options, threshold=threshold, rng=rng, errors=errors,
                       confidence_level=confidence_level)
    if isinstance(summary, MulticlassSummary):  # every class's summary, as evaluate_window
        return _evaluate_class_summaries(summary, metrics, predict, results, settings)
    started = time.perf_counter()
    regression = isinstance(summary, RegressionSummary)
    if regression:  # a regression model's summary: its metrics, from its sums and values
        settings = settings.replace(task="regression")

    def has(name: str) -> bool:
        if name == "X":
            return bool(summary.features)
        if name == "predict":
            return predict is not None
        return name in summary.inputs

    specs, skipped = _select_metrics(has, metrics, settings.task)
    notes: list[str] = []
    if not regression and any(spec.needs_rows for spec in specs) and summary.spec.sample_size:
        notes.append(f"hfm, cfair and robustness are estimated on a row sample of at most "
                     f"{summary.spec.sample_size} rows per group")

    def rows(attr: str) -> tuple[Window, Any]:
        if not summary.spec.sample_size:
            raise InvalidInputError(
                "this metric reads rows and the summary keeps no row sample "
                "(SummarySpec(sample_size=0)); summarize with sample_size > 0")
        return _sample_window(summary, attr, predict, settings.threshold)

    run = _Run(summary, rows, has, settings, given=results or {})
    return _evaluate(run, specs, skipped, started=started, notes=notes)


def _evaluate_class_summaries(summary: MulticlassSummary, metrics: Iterable[str] | None,
                              predict: Callable[[Any], Any] | None, results: Any,
                              settings: EvaluationOptions) -> WindowReport:
    """Evaluate a multiclass summary: each class's binary summary, folded as the rows' are."""
    if results:
        raise InvalidInputError("`results` computed elsewhere are for binary summaries; a "
                                "multiclass summary's classes are evaluated on their own")
    reports = {c: evaluate_summary(part, metrics=metrics, evaluation=settings,
                                   predict=None if predict is None
                                   else functools.partial(_predict_class, predict, c))
               for c, part in summary.parts.items()}
    return dataclasses.replace(next(iter(reports.values())),
                               **_multiclass.combine_class_reports(reports, settings.thresholds))


@dataclass
class _Run:
    """What every metric step of one evaluation reads."""

    summary: WindowSummary
    #: an attribute's rows (a window and its sensitive features), for the row metrics
    rows: Callable[[str], tuple[Window, Any]]
    #: whether the evaluated data has an input (a registry input name)
    has: Callable[[str], bool]
    settings: EvaluationOptions
    #: inputs that failed their check: the metrics reading them fail with their error
    failed: Mapping[str, Exception] = field(default_factory=dict)
    weights: NDArray[np.float64] | None = None
    #: results computed elsewhere, (metric, attribute) -> (result, warnings)
    given: Mapping[tuple[str, str], tuple[Any, list[Any]]] = field(default_factory=dict)
    #: specs sharing a function (the robustness summaries) share one call per attribute
    calls: dict[tuple[int, str], tuple[Any, list[Any]]] = field(default_factory=dict)
    #: one score bootstrap per attribute, for every score metric's interval
    boot: dict[Any, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Outcome:
    """One metric on one attribute: the value, and its reason, interval, result, warnings."""

    value: float
    reason: str | None = None
    interval: Any = None
    result: Any = None
    caught: tuple[Any, ...] = ()


def _undefined(run: _Run, reason: str) -> _Outcome:
    """NaN with ``reason``, and an undefined interval saying it (when intervals are on)."""
    level = run.settings.confidence_level
    return _Outcome(float("nan"), reason, None if level is None else undefined(reason))


def _step(run: _Run, spec: MetricSpec, attr: str) -> _Outcome:
    """Evaluate one metric on one attribute; a failure is NaN with the error (``coerce``)."""
    missing = [i for i in spec.inputs if not run.has(i)]
    if missing:
        return _undefined(run, _MISSING_REASON[missing[0]])
    if spec.task != run.settings.task:
        return _undefined(run, f"{spec.name} applies to {spec.task} models; this window's "
                               f"task is {run.settings.task}")
    kwargs = run.settings.metric_kwargs(spec.name)
    if spec.task == "regression":  # its interval comes with its value (its own resampling)
        kwargs["confidence_level"] = run.settings.confidence_level
        for other in METRICS.values():  # one call per family: every member's options
            if other.func is spec.func:
                kwargs.update(run.settings.options.get(other.name, {}))
    if run.weights is not None:
        if not spec.weighted:
            return _undefined(run, f"{spec.name} has no weighted definition here; evaluate it "
                                   "without sample_weight (weighted: "
                                   f"{', '.join(sorted(WEIGHTED_METRICS))})")
        kwargs["sample_weight"] = run.weights
    try:
        result, caught = _result(run, spec, attr, kwargs)
        value = float(getattr(result, spec.field or "value", result))
    except Exception as exc:  # a failing metric must not take the window down
        if run.settings.errors == "raise":
            raise
        log.warning("metric %s on %r failed: %s", spec.name, attr, exc)
        return _undefined(run, f"error: {exc}")
    interval = None
    if run.settings.confidence_level is not None:
        interval = (undefined("intervals are not computed for weighted windows")
                    if run.weights is not None
                    else _interval(spec, value, result, run, attr, kwargs))
    return _Outcome(value, None, interval, result, tuple(caught))


def _result(run: _Run, spec: MetricSpec, attr: str, kwargs: Mapping[str, Any]
            ) -> tuple[Any, list[Any]]:
    """Return the metric function's result on ``attr`` and the warnings it raised."""
    if (spec.name, attr) in run.given:  # computed elsewhere: not shared with other specs
        result, caught = run.given[(spec.name, attr)]
        if isinstance(result, Exception):  # it failed there: as if it failed here
            raise result
        return result, caught
    key = (id(spec.func), attr)
    if key not in run.calls:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if spec.task == "regression" and isinstance(run.summary, RegressionSummary):
                result = regression_result(spec.func, run.summary, attr,
                                           _accepted(spec, kwargs))
            elif not spec.needs_rows and run.weights is None:
                for name in spec.inputs:
                    if name in run.failed:
                        raise run.failed[name]
                result = _from_summary_value(spec, run.summary, attr, kwargs)
            else:
                window, sf = run.rows(attr)
                result = _call(spec, window, sf, kwargs)
        run.calls[key] = (result, list(caught))
    return run.calls[key]


def _record(report: dict[str, dict[tuple[str, str], Any]], notes: list[str],
            key: tuple[str, str], outcome: _Outcome) -> None:
    """File an outcome: its value, interval and detail; its warnings as reason or note."""
    value = report["values"][key] = outcome.value
    if outcome.reason is not None:
        report["reasons"][key] = outcome.reason
    if outcome.interval is not None:
        report["intervals"][key] = outcome.interval
    if outcome.result is not None and not isinstance(outcome.result, float | int | np.floating):
        report["details"][key] = outcome.result
    for w in outcome.caught:
        text = str(w.message)
        if issubclass(w.category, UndefinedMetricWarning) and np.isnan(value):
            report["reasons"].setdefault(key, text)
        elif issubclass(w.category, GroupExclusionWarning | UndefinedMetricWarning):
            if text not in notes:
                notes.append(text)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if np.isnan(value):
        report["reasons"].setdefault(key, "undefined on this window")


def _evaluate(run: _Run, specs: list[MetricSpec], skipped: dict[str, str], *,
              started: float, notes: list[str]) -> WindowReport:
    """Run the one evaluation loop behind evaluate_window and evaluate_summary."""
    summary = run.summary
    found: dict[str, dict[tuple[str, str], Any]] = {
        "values": {}, "reasons": {}, "details": {}, "intervals": {}}
    for spec in specs:
        for attr in summary.attributes:
            _record(found, notes, (spec.name, attr), _step(run, spec, attr))
    group_counts = {
        attr: {_group_label(lab): int(g.n) for lab, g in a.groups.items()}
        for attr, a in summary.attributes.items()
    }
    statuses = evaluate_thresholds(found["values"], run.settings.thresholds,
                                   _intersections(summary), found["intervals"])
    return WindowReport(
        model=summary.model, version=summary.version, start=summary.start, end=summary.end,
        n_rows=summary.n_rows, values=MappingProxyType(found["values"]),
        reasons=MappingProxyType(found["reasons"]),
        details=MappingProxyType(found["details"]), statuses=MappingProxyType(statuses),
        group_counts=MappingProxyType(group_counts), notes=tuple(notes),
        skipped=MappingProxyType(skipped), duration_seconds=time.perf_counter() - started,
        intervals=MappingProxyType(found["intervals"]),
    )


def _interval(spec: MetricSpec, value: float, result: Any, run: _Run, attr: str,
              kwargs: Mapping[str, Any]) -> Any:
    """Return the value's interval; a failure is a NaN interval with the error."""
    level = run.settings.confidence_level
    assert level is not None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # empty bootstrap draws
            return interval_of(spec.name, spec.field, value, result,
                               run.summary.attributes[attr], kw={**spec.options, **kwargs},
                               level=level, cache=run.boot)
    except Exception as exc:
        if run.settings.errors == "raise":
            raise
        log.warning("interval of %s on %r failed: %s", spec.name, attr, exc)
        return undefined(f"error: {exc}")
