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

from .._validation import check_binary, check_option, check_sample_weight, check_scores
from ..exceptions import GroupExclusionWarning, InvalidInputError, UndefinedMetricWarning
from ..metrics._groups import (
    INTERSECTION_SEPARATOR,
    apply_missing_policy,
    encode_attributes,
    sensitive_columns,
)
from ..metrics._parity import parity_from_rates
from ..summaries import SummarySpec, WindowSummary, summarize
from ..summaries import compute as _from_summary
from .intervals import DEFAULT_LEVEL, interval_of, undefined
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
    #: attribute -> (policy, rows with a missing value); set from ``missing``
    missing_counts: Mapping[str, tuple[str, int]] = field(init=False, default_factory=dict)
    #: True when ``y_pred`` was derived from ``y_score``: invalid scores then void both
    pred_from_score: bool = field(init=False, default=False, repr=False)
    _encoded: dict[bool, Any] = field(init=False, default_factory=dict, repr=False,
                                      compare=False)

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
        if self.y_pred is None and self.y_score is not None:
            score = np.asarray(self.y_score, dtype=float)
            # paper 001 eq. 1 thresholds with ">=" (the reference code uses ">"): the paper wins
            object.__setattr__(self, "y_pred", (score >= self.threshold).astype(np.int8))
            object.__setattr__(self, "pred_from_score", True)

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


def _select_metrics(has: Callable[[str], bool], metrics: Iterable[str] | None
                    ) -> tuple[list[MetricSpec], dict[str, str]]:
    """Return the requested specs, and the reason each available-by-default one was skipped."""
    if metrics is not None:
        return [get_metric(name) for name in metrics], {}
    chosen, skipped = [], {}
    for spec in METRICS.values():
        missing = [i for i in spec.inputs if not has(i)]
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


#: Metrics computed from a summary's counts and score summaries (every other one reads rows).
_PARITY = ("demographic_parity_difference", "demographic_parity_ratio",
           "equalized_odds_difference", "equal_opportunity_difference",
           "predictive_parity_difference")
_NATIVE = {"abcc": _from_summary.abcc_from_summary, "abpc": _from_summary.abpc_from_summary,
           "madd": _from_summary.madd_from_summary}
#: from counts and score sums: exact whatever the summary keeps (raw scores or cells)
_COUNTED = {"calibration_difference": _from_summary.calibration_from_summary}
SUMMARY_METRICS = frozenset(_PARITY) | frozenset(_NATIVE) | frozenset(_COUNTED)
#: Metrics with a weighted definition (``Window.sample_weight``): rates become weighted shares
#: (fairlearn's ``sample_params``), ABCC compares weighted CDFs. MADD's and ABPC's bandwidth
#: rules, HFM's nearest neighbours, CFair's matching and the robustness protocol have none here.
WEIGHTED_METRICS = frozenset(_PARITY) | {"abcc", "calibration_difference"}


def _from_summary_value(spec: MetricSpec, summary: WindowSummary, attr: str,
                        kwargs: Mapping[str, Any]) -> Any:
    """One summary metric on one attribute: raw scores through the metric function itself."""
    a = summary.attributes[attr]
    accepted = _accepted_keywords(spec.func)
    kw = {**spec.options, **{k: v for k, v in kwargs.items() if k in accepted}}
    if spec.name in _PARITY:
        return parity_from_rates(spec.name, _from_summary.group_rates_from_summary(
            a, kw.get("min_group_size", 1)), kw.get("min_condition_size", 1))
    if spec.name in _COUNTED:
        return _COUNTED[spec.name](a, min_group_size=kw.get("min_group_size", 1))
    if a.raw:  # every group's scores: the metric function, every option, the raw value
        scores, groups = _from_summary.pseudo_rows(a)
        return spec.func(scores, sensitive_features=groups, **kw)
    return _NATIVE[spec.name](a, max_bins_cells=summary.spec.max_bins, **kw)


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
    min_group_size: int = 1,
    min_condition_size: int = 1,
    intersection: bool = True,
    thresholds: Iterable[Threshold] = (),
    options: Mapping[str, Mapping[str, Any]] | None = None,
    rng: Any = None,
    errors: Literal["coerce", "raise"] = "coerce",
    confidence_level: float | None = DEFAULT_LEVEL,
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
    specs, skipped = _select_metrics(lambda i: window.get(i) is not None, metrics)
    # one summary of the window (groups encoded once, string columns converted once, each
    # group's scores sorted once), which every count and score metric reads: the same path
    # as evaluate_summary. Raw scores are kept (the window holds them anyway), so every
    # option of every metric applies and the values are the raw rows' values.
    inputs, failed = _checked_inputs(window)
    summary = summarize(window.sensitive_features, **inputs, threshold=window.threshold,
                        groups=window.groups(intersection),
                        intersection=intersection, spec=_IN_PROCESS, model=window.model,
                        version=window.version, start=window.start, end=window.end)
    attrs = _attributes(window, intersection)

    def rows(attr: str) -> tuple[Window, Any]:
        return window, attrs[attr]

    return _evaluate(summary, specs, skipped, rows, lambda i: window.get(i) is not None,
                     min_group_size=min_group_size, min_condition_size=min_condition_size,
                     thresholds=thresholds, options=options,
                     rng=rng, errors=errors, threshold=window.threshold, started=started,
                     notes=_missing_notes(window), failed=failed, level=confidence_level,
                     weights=window.sample_weight)


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


def _checked_inputs(window: Window) -> tuple[dict[str, Any], dict[str, Exception]]:
    """Return the window's predictions, labels and scores, checked once for every metric.

    An input that fails its check is left out of the summary; the metrics that need it fail
    with its error (NaN plus the reason, as when each metric checked its own input), the
    others are unaffected.
    """
    # 0/1 as a byte a row, not a float; the scores are only read (the summary lays out its
    # own copy), so valid float64 scores are not copied
    checks: tuple[tuple[str, Callable[[Any, str], NDArray[Any]]], ...] = (
        ("y_pred", _binary_int8), ("y_true", _binary_int8),
        ("y_score", functools.partial(check_scores, copy=False)))
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
    summary: WindowSummary,
    *,
    metrics: Iterable[str] | None = None,
    min_group_size: int = 1,
    min_condition_size: int = 1,
    thresholds: Iterable[Threshold] = (),
    options: Mapping[str, Mapping[str, Any]] | None = None,
    predict: Callable[[Any], Any] | None = None,
    threshold: float = 0.5,
    rng: Any = None,
    errors: Literal["coerce", "raise"] = "coerce",
    confidence_level: float | None = DEFAULT_LEVEL,
    results: Mapping[tuple[str, str], tuple[Any, list[Any]]] | None = None,
) -> WindowReport:
    """Evaluate a (possibly merged) window summary: the report :func:`evaluate_window` gives.

    Counts and parity metrics are exact; MADD is exact; ABCC is exact with raw scores and
    within its certified error from cells (``report.details[("abcc", attr)].error``, at most
    1e-6 in practice); ABPC from cells is the raw value up to round-off (~1e-12) for KDE grids
    below ``2**DYADIC_BITS`` cells. HFM, CFair and robustness need rows: they run on the
    summary's row sample (``sample_size`` rows per group, a deterministic bottom-k hash
    sample), so their values are **estimates** whose error shrinks as 1/sqrt(sample), and
    ``report.notes`` says so; with ``sample_size=0`` they are NaN with the reason.

    Parameters
    ----------
    summary : WindowSummary
    predict : callable, optional
        The model, for the robustness metrics (run on the sample).
    metrics, min_group_size, min_condition_size, thresholds, options, threshold, rng, errors,
    confidence_level
        As :func:`evaluate_window`. Intervals come from the summary's counts and score
        summaries (the same as on the raw rows, up to the cells' resolution).
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
    check_option(errors, "errors", ("coerce", "raise"), func="evaluate_summary")
    started = time.perf_counter()

    def has(name: str) -> bool:
        if name == "X":
            return bool(summary.features)
        if name == "predict":
            return predict is not None
        return name in summary.inputs

    specs, skipped = _select_metrics(has, metrics)
    notes: list[str] = []
    if any(spec.name not in SUMMARY_METRICS for spec in specs) and summary.spec.sample_size:
        notes.append(f"hfm, cfair and robustness are estimated on a row sample of at most "
                     f"{summary.spec.sample_size} rows per group")

    def rows(attr: str) -> tuple[Window, Any]:
        if not summary.spec.sample_size:
            raise InvalidInputError(
                "this metric reads rows and the summary keeps no row sample "
                "(SummarySpec(sample_size=0)); summarize with sample_size > 0")
        return _sample_window(summary, attr, predict, threshold)

    return _evaluate(summary, specs, skipped, rows, has, min_group_size=min_group_size,
                     min_condition_size=min_condition_size, thresholds=thresholds,
                     options=options, rng=rng, errors=errors,
                     threshold=threshold, started=started, notes=notes, level=confidence_level,
                     results=results)


def _evaluate(summary: WindowSummary, specs: list[MetricSpec], skipped: dict[str, str],  # noqa: C901, PLR0915 (issue 26)
              rows: Callable[[str], tuple[Window, Any]], has: Callable[[str], bool], *,
              min_group_size: int, thresholds: Iterable[Threshold],
              min_condition_size: int = 1,
              options: Mapping[str, Mapping[str, Any]] | None, rng: Any, errors: str,
              threshold: float, started: float, notes: list[str],
              failed: Mapping[str, Exception] | None = None,
              level: float | None = DEFAULT_LEVEL,
              weights: NDArray[np.float64] | None = None,
              results: Mapping[tuple[str, str], tuple[Any, list[Any]]] | None = None
              ) -> WindowReport:
    """Run the one evaluation loop behind evaluate_window and evaluate_summary."""
    failed = failed or {}
    given = results or {}
    options = options or {}
    values: dict[tuple[str, str], float] = {}
    reasons: dict[tuple[str, str], str] = {}
    details: dict[tuple[str, str], Any] = {}
    intervals: dict[tuple[str, str], Any] = {}
    boot_cache: dict[Any, Any] = {}  # one score bootstrap per attribute, for every metric
    group_counts = {
        attr: {_group_label(lab): int(g.n) for lab, g in a.groups.items()}
        for attr, a in summary.attributes.items()
    }
    cache: dict[tuple[int, str], tuple[Any, list[warnings.WarningMessage]]] = {}
    for spec in specs:
        missing = [i for i in spec.inputs if not has(i)]
        for attr in summary.attributes:
            key = (spec.name, attr)
            if missing:
                values[key], reasons[key] = float("nan"), _MISSING_REASON[missing[0]]
                if level is not None:
                    intervals[key] = undefined(reasons[key])
                continue
            kwargs = {"min_group_size": min_group_size, "min_condition_size": min_condition_size,
                      "random_state": rng, "threshold": threshold, **options.get(spec.name, {})}
            if weights is not None:
                if spec.name not in WEIGHTED_METRICS:
                    values[key] = float("nan")
                    reasons[key] = (f"{spec.name} has no weighted definition here; evaluate it "
                                    "without sample_weight (weighted: "
                                    f"{', '.join(sorted(WEIGHTED_METRICS))})")
                    if level is not None:
                        intervals[key] = undefined(reasons[key])
                    continue
                kwargs["sample_weight"] = weights
            # specs sharing a function (e.g. the robustness summaries) share one call per
            # attribute, and the warnings it raised
            cache_key = (id(spec.func), attr)
            try:
                if key in given:  # computed elsewhere: not shared with the specs of its function
                    result, caught = given[key]
                    if isinstance(result, Exception):  # it failed there: as if it failed here
                        raise result
                elif cache_key not in cache:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        if spec.name in SUMMARY_METRICS and weights is None:
                            for name in spec.inputs:
                                if name in failed:
                                    raise failed[name]
                            result = _from_summary_value(spec, summary, attr, kwargs)
                        else:
                            window, sf = rows(attr)
                            result = _call(spec, window, sf, kwargs)
                        cache[cache_key] = (result, list(caught))
                if key not in given:
                    result, caught = cache[cache_key]
                value = float(getattr(result, spec.field or "value", result))
            except Exception as exc:  # a failing metric must not take the window down
                if errors == "raise":
                    raise
                log.warning("metric %s on %r failed: %s", spec.name, attr, exc)
                values[key], reasons[key] = float("nan"), f"error: {exc}"
                if level is not None:
                    intervals[key] = undefined(reasons[key])
                continue
            values[key] = value
            if level is not None and weights is not None:
                intervals[key] = undefined("intervals are not computed for weighted windows")
            elif level is not None:
                intervals[key] = _interval(spec, value, result, summary, attr, kwargs, level,
                                           boot_cache, errors)
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
        model=summary.model, version=summary.version, start=summary.start, end=summary.end,
        n_rows=summary.n_rows, values=MappingProxyType(values),
        reasons=MappingProxyType(reasons), details=MappingProxyType(details),
        statuses=MappingProxyType(evaluate_thresholds(values, thresholds,
                                                      _intersections(summary), intervals)),
        group_counts=MappingProxyType(group_counts), notes=tuple(notes),
        skipped=MappingProxyType(skipped), duration_seconds=time.perf_counter() - started,
        intervals=MappingProxyType(intervals),
    )


def _interval(spec: MetricSpec, value: float, result: Any, summary: WindowSummary, attr: str,
              kwargs: Mapping[str, Any], level: float, cache: dict[Any, Any],
              errors: str) -> Any:
    """Return the value's interval; a failure: a NaN interval with the error, not a lost value."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # empty bootstrap draws
            return interval_of(spec.name, spec.field, value, result, summary.attributes[attr],
                               kw={**spec.options, **kwargs}, level=level, cache=cache)
    except Exception as exc:
        if errors == "raise":
            raise
        log.warning("interval of %s on %r failed: %s", spec.name, attr, exc)
        return undefined(f"error: {exc}")
