"""The metric registry: one hand-written table that every other layer reads.

The report layer (:func:`fairmonitor.report.evaluate_window`) uses it to know what each metric
needs and how to call it; the MLflow evaluator derives its metric keys
(``fairness/<name>/<attribute>``) from it; the Prometheus exporter derives its gauge names
(``fairmonitor_<name>``) and HELP texts from it; the common tests iterate over it.

A :class:`MetricSpec` says how to call a metric on a window: ``inputs`` are the window fields
passed positionally, in order (``y_true``, ``y_pred``, ``y_score``, ``X``, ``predict``);
``optional_inputs`` are passed as keywords when the window has them. Several specs may share one
``func`` and read different fields of its result (``field``), e.g. the robustness summaries; the
report layer calls such a function once per attribute.

A spec also carries what the metric can do, so that adding one is this table's entry plus its
function: ``summary`` (how it is computed from a window summary: ``"rates"`` from per-group
rates, ``"counts"`` from counts and score sums, ``"scores"`` from the score summaries; None
reads rows), ``weighted`` (it has a ``sample_weight`` definition), ``interval`` (which
interval method), and ``conditions_on`` (what each rate conditions on, which
``min_condition_size`` filters).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from .. import metrics as m
from ..metrics.shared import parity_from_rates
from ..robustness.ratio import robustness_ratio  # --- robustness ---
from ..robustness.regression import regression_robustness
from ..summaries import compute as _summary

__all__ = ["CLASS_SEPARATOR", "CONDITIONS", "INPUTS", "METRICS", "TASKS", "MetricSpec",
           "class_key", "get_metric", "metric_task", "split_class_key", "task_metrics",
           "worst_class"]

Direction = Literal["lower_is_fairer", "higher_is_fairer"]
#: How a metric is computed from a window summary (:mod:`fairmonitor.summaries`): from the
#: per-group rates, from counts and score sums, or from the per-group score summaries.
SummaryPath = Literal["rates", "counts", "scores"]
#: What a rate conditions on, as (successes, trials) of the per-group confusion counts
#: (tp, fp, fn, tn): the interval of a rate gap reads them, and ``min_condition_size`` leaves
#: out the groups with fewer trials.
CONDITIONS: Mapping[str, tuple[tuple[int, ...], tuple[int, ...]]] = MappingProxyType({
    "positives": ((0,), (0, 2)),            # TPR: tp / (tp + fn)
    "negatives": ((1,), (1, 3)),            # FPR: fp / (fp + tn)
    "predicted_positives": ((0,), (0, 1)),  # precision: tp / (tp + fp)
})

#: The window fields a metric can ask for.
INPUTS = ("y_true", "y_pred", "y_score", "X", "predict")
#: The kinds of model a metric applies to (a model's ``task``): a binary classifier (0/1
#: predictions, scores in [0, 1]) or a regressor (continuous predictions and targets).
TASKS = ("binary", "regression")


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """How to compute, name, read and alert on one metric.

    Attributes
    ----------
    name : str
        Registry name; also the MLflow key part and the Prometheus name suffix.
    func : callable
        The pure metric function.
    inputs : tuple of str
        Window fields passed positionally, in order.
    direction : {'lower_is_fairer', 'higher_is_fairer'}
        Which way is fairer; decides the default threshold bound.
    ideal : float
        The value of a perfectly fair model.
    lower, upper : float
        The metric's range (``inf`` if unbounded).
    unit : str
        Plain-language unit shown in reports.
    help : str
        One line, used as Prometheus HELP and in the README table.
    optional_inputs : tuple of str
        Window fields passed as keywords when present (e.g. ``y_true`` for CFair).
    field : str or None
        Attribute of the function's result holding this metric's value; None if the
        function returns a float.
    options : mapping
        Extra keyword arguments always passed (e.g. ``{"agg": "max"}``).
    interval : str or None
        How its confidence interval is computed (:mod:`fairmonitor.report.intervals`), or None
        if the metric has none (a threshold cannot then compare its bound).
    no_interval : str or None
        Why a metric whose values have a chance level has no interval (said when a threshold
        asks for ``compare: bound``).
    summary : {'rates', 'counts', 'scores'} or None
        How a window summary gives its value (:data:`SummaryPath`); None: it reads rows (on a
        stored summary, its row sample).
    from_summary : callable or None
        ``from_summary(spec, attribute_summary, kwargs, summary_spec) -> result``, set with
        ``summary``.
    weighted : bool
        It has a weighted definition (``Window.sample_weight``); the others are NaN with the
        reason on a weighted window.
    conditions_on : tuple of str
        What each of its rates conditions on (keys of :data:`CONDITIONS`), for
        ``min_condition_size`` and the rate intervals; empty for a rate of all rows.
    task : str
        The kind of model it applies to (:data:`TASKS`); a window of another task leaves it
        out.
    """

    name: str
    func: Callable[..., Any]
    inputs: tuple[str, ...]
    direction: Direction
    ideal: float
    lower: float
    upper: float
    unit: str
    help: str
    optional_inputs: tuple[str, ...] = ()
    field: str | None = None
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    interval: str | None = None
    no_interval: str | None = None
    summary: SummaryPath | None = None
    from_summary: Callable[..., Any] | None = dataclasses.field(default=None, repr=False)
    weighted: bool = False
    conditions_on: tuple[str, ...] = ()
    task: str = "binary"

    @property
    def needs_rows(self) -> bool:
        """True if a window summary cannot give its value (it reads rows)."""
        return self.from_summary is None

    @property
    def needs_labels(self) -> bool:
        """True if the metric cannot be computed before ground truth arrives."""
        return "y_true" in self.inputs

    @property
    def needs_scores(self) -> bool:
        """True if the metric reads continuous scores."""
        return "y_score" in self.inputs

    @property
    def needs_features(self) -> bool:
        """True if the metric reads the feature matrix ``X``."""
        return "X" in self.inputs

    @property
    def needs_model(self) -> bool:
        """True if the metric calls the model (``predict``)."""
        return "predict" in self.inputs

    @property
    def default_bound(self) -> Literal["upper", "lower"]:
        """Which side of a threshold is a breach: above for lower-is-fairer metrics."""
        return "upper" if self.direction == "lower_is_fairer" else "lower"


def _spec(name: str, func: Callable[..., Any], inputs: tuple[str, ...], *,
          help: str, direction: Direction = "lower_is_fairer", ideal: float = 0.0,
          lower: float = 0.0, upper: float = 1.0, unit: str = "fraction", **kw: Any) -> MetricSpec:
    return MetricSpec(name, func, inputs, direction, ideal, lower, upper, unit, help, **kw)


def _labels_by_keyword(func: Callable[..., Any]) -> Callable[..., Any]:
    """Return ``func(X, y_true, y_pred, ...)`` callable as ``(X, y_pred, *, y_true=None, ...)``.

    The registry passes optional inputs (CFair's labels) by keyword; the signature it reads
    (:func:`inspect.signature`) is ``func``'s with ``y_true`` moved among the keywords.
    """
    sig = inspect.signature(func)
    params = [p for p in sig.parameters.values() if p.name != "y_true"]
    first_keyword = next(i for i, p in enumerate(params) if p.kind is p.KEYWORD_ONLY)
    params.insert(first_keyword, inspect.Parameter("y_true", inspect.Parameter.KEYWORD_ONLY,
                                                   default=None))

    def call(X: Any, y_pred: Any, *, y_true: Any = None, **kwargs: Any) -> Any:
        return func(X, y_true, y_pred, **kwargs)

    call.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    call.__name__ = call.__qualname__ = func.__name__
    call.__doc__ = func.__doc__
    return call


# --- how a window summary gives a metric: (attribute summary, kwargs, summary spec) -> result


def _rates_value(spec: MetricSpec, a: Any, kw: Mapping[str, Any], sspec: Any) -> Any:
    """Compute a parity metric from the summary's per-group rates (exact: they are counts)."""
    rates = _summary.group_rates_from_summary(a, kw.get("min_group_size", 1))
    # the rate family is the function's (an entry may reuse one under another name)
    return parity_from_rates(spec.func.__name__, rates, kw.get("min_condition_size", 1))


def _from_counts(func: Callable[..., Any]) -> dict[str, Any]:
    """Compute from counts and score sums: exact whatever the summary keeps."""
    def compute(spec: MetricSpec, a: Any, kw: Mapping[str, Any], sspec: Any) -> Any:
        return func(a, min_group_size=kw.get("min_group_size", 1))
    return {"summary": "counts", "from_summary": compute}


def _from_scores(native: Callable[..., Any]) -> dict[str, Any]:
    """Compute a score metric from the score summaries.

    Raw scores go through the metric function itself (every option, the raw value), cells
    through ``native``.
    """
    def compute(spec: MetricSpec, a: Any, kw: Mapping[str, Any], sspec: Any) -> Any:
        if a.raw:
            scores, groups = _summary.pseudo_rows(a)
            return spec.func(scores, sensitive_features=groups, **kw)
        return native(a, max_bins_cells=sspec.max_bins, **kw)
    return {"summary": "scores", "from_summary": compute}


#: a parity metric: from the rates, weighted, an analytic rate interval
_PARITY = {"summary": "rates", "from_summary": _rates_value, "weighted": True,
           "interval": "analytic: per-group rate draws, directional derivative of the max "
                       "(Fang-Santos)"}
_BOOT = "Poisson bootstrap of per-group score histograms, directional derivative of the max"
_WALD = "Wald, from the standard error over the protocol's noise repeats"

_SPECS: list[MetricSpec] = [
    # --- parity (classical group metrics on hard predictions) ---
    # y_true first as fairlearn's, but unread: the registry calls them on y_pred alone
    _spec("demographic_parity_difference", m.without_labels(m.demographic_parity_difference),
          ("y_pred",), **_PARITY,
          help="Largest between-group difference in selection rate (0 is parity)."),
    _spec("demographic_parity_ratio", m.without_labels(m.demographic_parity_ratio), ("y_pred",),
          **_PARITY,
          direction="higher_is_fairer", ideal=1.0,
          help="Smallest group selection rate over the largest (1 is parity)."),
    _spec("equalized_odds_difference", m.equalized_odds_difference, ("y_true", "y_pred"),
          **_PARITY, conditions_on=("positives", "negatives"),
          help="Larger of the between-group TPR and FPR gaps (0 is equalized odds)."),
    _spec("equal_opportunity_difference", m.equal_opportunity_difference, ("y_true", "y_pred"),
          **_PARITY, conditions_on=("positives",),
          help="Largest between-group gap in true positive rate (0 is equal opportunity)."),
    _spec("predictive_parity_difference", m.predictive_parity_difference, ("y_true", "y_pred"),
          **_PARITY, conditions_on=("predicted_positives",),
          help="Largest between-group gap in precision, P(y=1 | predicted 1) (0 is predictive "
               "parity)."),
    _spec("calibration_difference", m.calibration_difference, ("y_true", "y_score"), upper=2.0,
          **_from_counts(_summary.calibration_from_summary), weighted=True,
          interval="Wald, per-group variance bounded by (sd(score) + sd(label))^2 / n",
          help="Largest between-group difference in calibration-in-the-large, mean score "
               "minus positive rate (0: every group calibrated alike)."),
    # --- distributional (ABCC / ABPC) ---
    _spec("abcc", m.abcc, ("y_score",), upper=1.0, unit="fraction", interval=_BOOT,
          **_from_scores(_summary.abcc_from_summary), weighted=True,
          help="Area between the groups' score CDFs, = Wasserstein-1 (0 is parity, max 1)."),
    _spec("abpc", m.abpc, ("y_score",), upper=2.0, unit="density area", interval=_BOOT,
          **_from_scores(_summary.abpc_from_summary),
          help="Area between the groups' score densities, = 2 x total variation (0 is parity, "
               "max 2)."),
    # --- madd ---
    _spec("madd", m.madd, ("y_score",), upper=2.0, unit="density distance", field="value",
          **_from_scores(_summary.madd_from_summary),
          no_interval="its value is biased upwards by the bins' noise (~0.24 at 500 rows per "
                      "group and 32 bins) and no bias-corrected interval covers "
                      "(docs/intervals_scores.md); compare its value with its chance level, or "
                      "use abcc or abpc",
          help="L1 distance between the groups' score histograms, at the paper's optimal "
               "bandwidth (0 is parity, 2 disjoint)."),
    # --- hfm ---
    # one hfm call per attribute feeds both (the report shares it); each reads one version
    _spec("hfm", m.hfm, ("X", "y_true", "y_pred"), lower=float("-inf"), upper=float("inf"),
          unit="log10 distance ratio", field="value_max",
          help="HFM, max: log10 of how much further apart the predictions put the groups "
               "than the labels do (0: no added bias)."),
    _spec("hfm_average", m.hfm, ("X", "y_true", "y_pred"), lower=float("-inf"),
          upper=float("inf"), unit="log10 distance ratio", field="value_average",
          interval="the sampled estimator's interval (option method='sampled')",
          help="HFM, average: as hfm with the mean cross-group nearest-neighbour distance "
               "(less sensitive to single rows)."),
    # --- cfair ---
    _spec("cfair", _labels_by_keyword(m.counterpart_fairness), ("X", "y_pred"),
          optional_inputs=("y_true",),
          interval="paired comparison of the counterparts (95%, cluster-robust)",
          help="Counterpart DP gap: |mean prediction difference| between look-alike "
               "individuals of two groups (0 is parity)."),
    # --- robustness ---
    # One robustness_ratio call per attribute feeds all of these (the report shares it); each
    # reads a float property of the result for its FIRST metric (DP difference by default; to
    # change it, give every robustness_* entry you request the same options, e.g.
    # {"metrics": ("equalized_odds_difference",)}). A ratio's ideal is 1 (fairness unchanged
    # by noise); lower_is_fairer puts the alert bound above it.
    _spec("robustness_ratio_max", robustness_ratio, ("predict", "X"), optional_inputs=("y_true",),
          field="max_ratio_value", interval=_WALD, ideal=1.0, upper=float("inf"), unit="ratio",
          help="Largest robustness ratio (gap under input noise / clean gap) over the noise "
               "levels; 1 is stable, > 1 less fair under noise, inf if the clean gap is ~0."),
    _spec("robustness_ratio_at_max_level", robustness_ratio, ("predict", "X"),
          optional_inputs=("y_true",), field="ratio_at_max_level_value", ideal=1.0,
          interval=_WALD,
          upper=float("inf"), unit="ratio",
          help="Robustness ratio (gap under input noise / clean gap) at the strongest noise "
               "level; < 1 means noise washes the gap out, > 1 that it widens it."),
    _spec("robustness_ratio_auc", robustness_ratio, ("predict", "X"), optional_inputs=("y_true",),
          field="auc_ratio_value", ideal=1.0, upper=float("inf"), unit="ratio",
          help="Area under the robustness-ratio curve over [0, max level], divided by the max "
               "level; 1 is stable on average."),
    _spec("robustness_delta_max", robustness_ratio, ("predict", "X"), optional_inputs=("y_true",),
          field="max_delta_value", interval=_WALD, lower=-1.0,
          help="Largest increase of the fairness gap under input noise over the clean gap "
               "(absolute, in gap units); alert on this rather than on the ratio."),
    _spec("robustness_robust", robustness_ratio, ("predict", "X"), optional_inputs=("y_true",),
          field="robust_value", direction="higher_is_fairer", ideal=1.0, unit="flag",
          help="1 if no noise level widens the fairness gap significantly (by more than "
               "max(0.02, 1.96 SE)), else 0."),
    _spec("robustness_flip_rate_gap_max", robustness_ratio, ("predict", "X"),
          optional_inputs=("y_true",), field="flip_rate_gap_max",
          help="Largest between-group difference in the share of predictions that input "
               "noise flips, over the noise levels (0: noise hits every group alike)."),
]

# --- regression (task "regression": continuous predictions and targets, no thresholding) ---
# They read rows (no summary path). As the robustness entries, each family is one function
# call per attribute that every entry of the family reads a field of (one pass, one
# resampling); the report merges the family's options into that call. The interval and chance
# level come with the value (Poisson bootstrap, permutation null:
# fairmonitor/metrics/_regression/_resample.py).
_RESAMPLED = "Poisson bootstrap of the rows (percentile); chance: permuted group labels"
_REGRESSION = {"task": "regression", "weighted": True, "interval": _RESAMPLED}
_ERRORS = {**_REGRESSION, "func": m.regression_errors, "inputs": ("y_true", "y_pred")}
_DISTRIBUTION = {**_REGRESSION, "func": m.prediction_distribution, "inputs": ("y_pred",)}
_INF = float("inf")
_NO_CG_INTERVAL = ("the matching is fitted on the window's rows; the paired interval of the "
                   "signed mean is in the result's cfair comparisons")
_NO_NOISE_INTERVAL = ("a maximum over noise levels; each level's standard error over the "
                      "noisy copies is in the result's gap_se")


def _family(name: str, family: Mapping[str, Any], **kw: Any) -> MetricSpec:
    """Return the entry reading field ``name`` of its family's shared result."""
    return _spec(name, family["func"], family["inputs"], field=name,
                 **{k: v for k, v in family.items() if k not in ("func", "inputs")}, **kw)


_SPECS += [
    _family("mae_difference", _ERRORS, upper=_INF, unit="target units",
            help="Largest between-group gap in mean absolute error (0 is parity)."),
    _family("rmse_difference", _ERRORS, upper=_INF, unit="target units",
            help="Largest between-group gap in root mean squared error (0 is parity)."),
    _family("mean_residual_difference", _ERRORS, upper=_INF, unit="target units",
            help="Largest between-group gap in mean residual (prediction minus target): one "
                 "group over-predicted relative to another (0 is parity)."),
    _family("mae_ratio", _ERRORS, direction="higher_is_fairer", ideal=1.0, unit="ratio",
            help="Smallest group mean absolute error over the largest (1 is parity)."),
    _family("rmse_ratio", _ERRORS, direction="higher_is_fairer", ideal=1.0, unit="ratio",
            help="Smallest group root mean squared error over the largest (1 is parity)."),
    _family("bounded_group_loss", _ERRORS, upper=_INF, unit="loss units",
            help="Worst excess of a group's loss (MAE by default) over the configured bound, "
                 "else over the pooled loss (0: every group within it)."),
    _family("prediction_ks_distance", _DISTRIBUTION,
            help="Largest Kolmogorov-Smirnov distance between a group's predictions and the "
                 "pooled ones (0 is statistical parity)."),
    _family("prediction_wasserstein", _DISTRIBUTION, upper=_INF, unit="prediction units",
            help="Largest Wasserstein-1 distance between two groups' predictions, in the "
                 "prediction's units (0 is parity)."),
    _family("prediction_wasserstein_scaled", _DISTRIBUTION, upper=_INF, unit="scale units",
            help="prediction_wasserstein divided by a configured scale (default: the window's "
                 "interquartile range of the predictions)."),
    _spec("prediction_madd", m.prediction_madd, ("y_pred",), task="regression", field="value",
          upper=2.0, unit="density distance",
          no_interval="as MADD's: its value is biased upwards by the bins' noise; compare "
                      "prediction_ks_distance or prediction_wasserstein instead",
          help="MADD of the predictions mapped to [0, 1] by a fixed value_range (0 is parity, "
               "2 disjoint)."),
    # CFair's matching on a regressor: one counterpart_prediction_gap call per attribute feeds
    # both (the report shares it); options (value_range, caliper, matcher...) reach both
    _spec("counterpart_prediction_gap", m.counterpart_prediction_gap, ("X", "y_pred"),
          task="regression", field="value", upper=_INF, unit="prediction units",
          no_interval=_NO_CG_INTERVAL,
          help="CFair on a regressor: mean |prediction difference| between look-alike "
               "individuals of two groups, in prediction units (0 is parity)."),
    _spec("counterpart_prediction_gap_scaled", m.counterpart_prediction_gap, ("X", "y_pred"),
          task="regression", field="scaled", upper=_INF, unit="share of value_range",
          no_interval=_NO_CG_INTERVAL,
          help="counterpart_prediction_gap divided by the width of a configured value_range "
               "(default: the window's min to max)."),
    # noise robustness of a regressor: one regression_robustness call per attribute feeds all
    # four (the report shares it), each a summary over the noise levels of one followed gap
    _spec("robustness_mae_gap_ratio_max", regression_robustness, ("predict", "X"),
          optional_inputs=("y_true",), task="regression", no_interval=_NO_NOISE_INTERVAL,
          field="mae_ratio_max", ideal=1.0,
          upper=_INF, unit="ratio",
          help="Largest ratio of a regressor's MAE gap under input noise to its clean MAE gap "
               "over the noise levels (1 is stable, > 1 less fair under noise)."),
    _spec("robustness_mae_gap_delta_max", regression_robustness, ("predict", "X"),
          optional_inputs=("y_true",), task="regression", no_interval=_NO_NOISE_INTERVAL,
          field="mae_delta_max",
          lower=-_INF, upper=_INF, unit="target units",
          help="Largest increase of a regressor's MAE gap under input noise over the clean "
               "gap, in target units; alert on this rather than on the ratio."),
    _spec("robustness_ks_gap_ratio_max", regression_robustness, ("predict", "X"),
          optional_inputs=("y_true",), task="regression", no_interval=_NO_NOISE_INTERVAL,
          field="ks_ratio_max", ideal=1.0,
          upper=_INF, unit="ratio",
          help="Largest ratio of a regressor's prediction KS gap under input noise to its "
               "clean KS gap over the noise levels (1 is stable)."),
    _spec("robustness_ks_gap_delta_max", regression_robustness, ("predict", "X"),
          optional_inputs=("y_true",), task="regression", no_interval=_NO_NOISE_INTERVAL,
          field="ks_delta_max", lower=-1.0,
          help="Largest increase of a regressor's prediction KS gap under input noise over "
               "the clean gap (0: noise does not separate the groups' predictions)."),
]

#: Registry name -> spec, in table order. Read-only.
METRICS: Mapping[str, MetricSpec] = MappingProxyType({s.name: s for s in _SPECS})


def metric_task(model_task: str) -> str:
    """Return the kind of metric (:data:`TASKS`) a model's ``task`` is measured with.

    A multiclass model is measured one class at a time, one-vs-rest, with the binary metrics.

    >>> metric_task("multiclass"), metric_task("regression")
    ('binary', 'regression')
    """
    return "regression" if model_task == "regression" else "binary"


def task_metrics(task: str) -> tuple[str, ...]:
    """Return the names of the metrics that apply to ``task``, in table order.

    >>> task_metrics("regression")[:2]
    ('mae_difference', 'rmse_difference')
    """
    return tuple(name for name, spec in METRICS.items() if spec.task == task)


def get_metric(name: str) -> MetricSpec:
    """Return the spec of ``name``, or raise listing the registered names.

    >>> get_metric("demographic_parity_ratio").direction
    'higher_is_fairer'
    """
    from ..exceptions import InvalidInputError

    try:
        return METRICS[name]
    except KeyError:
        raise InvalidInputError(
            f"unknown metric {name!r}; registered metrics are: {', '.join(METRICS)}"
        ) from None


# --- multiclass: every class one-vs-rest (issue 29) ---
# A multiclass window (``Window(classes=...)``) is evaluated once per class c on the binary
# window "c against every other class" (predictions and labels ``== c``, scores the column of
# c's probability), with each metric's own function: no metric is defined twice. The report
# keys each class's value ``<metric>__class_<c>`` and gives ``<metric>`` the worst class
# (the largest value of a lower-is-fairer metric, the smallest of a higher-is-fairer one), so
# thresholds, alerts and dashboards written for ``<metric>`` govern the worst class, and a
# class breaches exactly when its own value does. MLflow keys: ``fairness/<metric>__class_<c>/
# <attribute>`` beside ``fairness/<metric>/<attribute>``; Prometheus: the worst class in
# ``fairmonitor_<metric>`` and each class in ``fairmonitor_<metric>_by_class{class="<c>"}``,
# a label bounded by the model's classes (the config lists them).

#: Separator between a metric's name and a class label in a one-vs-rest key.
CLASS_SEPARATOR = "__class_"


def class_key(metric: str, label: Any) -> str:
    """Return the key of ``metric`` for class ``label``: ``<metric>__class_<label>``.

    >>> class_key("demographic_parity_difference", 2)
    'demographic_parity_difference__class_2'
    """
    return f"{metric}{CLASS_SEPARATOR}{label}"


def split_class_key(name: str) -> tuple[str, str | None]:
    """Return ``(metric, class label)`` of a report key; the label is None for a plain metric.

    >>> split_class_key("abcc__class_setosa"), split_class_key("abcc")
    (('abcc', 'setosa'), ('abcc', None))
    """
    metric, sep, label = name.partition(CLASS_SEPARATOR)
    if sep and metric in METRICS:
        return metric, label
    return name, None


def worst_class(metric: str, values: Mapping[Any, float]) -> tuple[Any, float]:
    """Return the worst class of ``metric`` among ``values`` (class -> value) and its value.

    Worst is the largest value of a lower-is-fairer metric, the smallest of a higher-is-fairer
    one; NaN classes are left out (the report names them), all NaN gives ``(None, nan)``.
    Ties go to the first class listed.

    >>> worst_class("demographic_parity_ratio", {"a": 0.9, "b": 0.7, "c": float("nan")})
    ('b', 0.7)
    """
    sign = -1.0 if METRICS[metric].direction == "higher_is_fairer" else 1.0
    best: tuple[Any, float] = (None, float("nan"))
    for label, value in values.items():
        if value == value and (best[0] is None or sign * value > sign * best[1]):
            best = (label, float(value))
    return best
