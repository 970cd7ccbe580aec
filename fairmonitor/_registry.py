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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from . import metrics as m

__all__ = ["INPUTS", "METRICS", "MetricSpec", "get_metric"]

Direction = Literal["lower_is_fairer", "higher_is_fairer"]

#: The window fields a metric can ask for.
INPUTS = ("y_true", "y_pred", "y_score", "X", "predict")


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


_SPECS: list[MetricSpec] = [
    # --- parity (classical group metrics on hard predictions) ---
    _spec("demographic_parity_difference", m.demographic_parity_difference, ("y_pred",),
          help="Largest between-group difference in selection rate (0 is parity)."),
    _spec("demographic_parity_ratio", m.demographic_parity_ratio, ("y_pred",),
          direction="higher_is_fairer", ideal=1.0,
          help="Smallest group selection rate over the largest (1 is parity)."),
    _spec("equalized_odds_difference", m.equalized_odds_difference, ("y_true", "y_pred"),
          help="Larger of the between-group TPR and FPR gaps (0 is equalized odds)."),
    _spec("equal_opportunity_difference", m.equal_opportunity_difference, ("y_true", "y_pred"),
          help="Largest between-group gap in true positive rate (0 is equal opportunity)."),
    # --- distributional (ABCC / ABPC) ---
    # --- madd ---
    # --- hfm ---
    # --- cfair ---
    # --- robustness ---
]

#: Registry name -> spec, in table order. Read-only.
METRICS: Mapping[str, MetricSpec] = MappingProxyType({s.name: s for s in _SPECS})


def get_metric(name: str) -> MetricSpec:
    """Return the spec of ``name``, or raise listing the registered names.

    >>> get_metric("demographic_parity_ratio").direction
    'higher_is_fairer'
    """
    from .exceptions import InvalidInputError

    try:
        return METRICS[name]
    except KeyError:
        raise InvalidInputError(
            f"unknown metric {name!r}; registered metrics are: {', '.join(METRICS)}"
        ) from None
