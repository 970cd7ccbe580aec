"""How a window is evaluated, as one object built once from a config.

:class:`EvaluationOptions` is the bundle of settings every evaluation path passes to
:func:`~fairmonitor.report.evaluate_window` and :func:`~fairmonitor.report.evaluate_summary`:
the group minimums, the thresholds, the per-metric options, the decision threshold, the random
generator, the error policy and the interval level. The monitor builds it from a model's config
(``ModelConfig.evaluation``), the MLflow evaluator from its ``evaluator_config``
(``FairnessConfig.evaluation``), so the window, rollup, version, Spark and evaluator paths read
the same settings the same way.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from .._validation import check_option
from .intervals import DEFAULT_LEVEL
from .registry import TASKS
from .thresholds import Threshold

__all__ = ["DEFAULT", "DefaultType", "EvaluationOptions", "resolve"]


class _Default(enum.Enum):
    """A keyword argument not given: its value comes from ``evaluation`` (or the defaults)."""

    TOKEN = "default"

    def __repr__(self) -> str:
        return "DEFAULT"


#: The type of :data:`DEFAULT`, for annotations.
DefaultType = _Default
#: The default of the individual option keywords of ``evaluate_window``/``evaluate_summary``.
DEFAULT = _Default.TOKEN


def _frozen_options(options: Mapping[str, Mapping[str, Any]] | None
                    ) -> Mapping[str, Mapping[str, Any]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in (options or {}).items()})


@dataclass(frozen=True)
class EvaluationOptions:
    """The settings of an evaluation, shared by every window of a model or run.

    Parameters
    ----------
    min_group_size : int, default=1
        Groups with fewer rows are left out of every metric (the monitor and the evaluator
        default to :data:`~fairmonitor.report.MIN_GROUP_SIZE`).
    min_condition_size : int, default=1
        Per rate, groups with fewer rows of what it conditions on are left out of its gap.
    intersection : bool, default=True
        With several attributes, also evaluate their intersection (``evaluate_window``).
    thresholds : iterable of Threshold
        Alert bounds; their verdicts land in ``report.statuses``.
    options : mapping of metric name to keyword arguments
        Per-metric options, e.g. ``{"abpc": {"bandwidth": 0.05}}``.
    threshold : float, default=0.5
        Decision threshold passed to the metrics that take one (``evaluate_summary``;
        ``evaluate_window`` uses its window's).
    rng : numpy.random.Generator, int or None
        Passed to every metric that takes randomness.
    errors : {'coerce', 'raise'}, default='coerce'
        A failing metric is NaN with the error as reason, or re-raised.
    confidence_level : float or None, default=0.95
        Level of each value's interval; None skips intervals and chance levels.
    task : {'binary', 'regression'}, default='binary'
        The kind of model (:data:`~fairmonitor.report.registry.TASKS`): which metrics apply
        and how predictions and labels are read (0/1, or continuous without thresholding).

    Examples
    --------
    >>> base = EvaluationOptions(min_group_size=30)
    >>> base.replace(rng=7).min_group_size, base.metric_kwargs("abcc")["random_state"]
    (30, None)
    """

    min_group_size: int = 1
    min_condition_size: int = 1
    intersection: bool = True
    thresholds: tuple[Threshold, ...] = ()
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    threshold: float = 0.5
    rng: Any = None
    errors: Literal["coerce", "raise"] = "coerce"
    confidence_level: float | None = DEFAULT_LEVEL
    task: str = "binary"

    def __post_init__(self) -> None:
        check_option(self.errors, "errors", ("coerce", "raise"), func="EvaluationOptions")
        check_option(self.task, "task", TASKS, func="EvaluationOptions")
        object.__setattr__(self, "thresholds", tuple(self.thresholds))
        object.__setattr__(self, "options", _frozen_options(self.options))

    def replace(self, **changes: Any) -> EvaluationOptions:
        """Return a copy with ``changes`` (e.g. each window's own ``rng``)."""
        return dataclasses.replace(self, **changes) if changes else self

    def metric_kwargs(self, metric: str) -> dict[str, Any]:
        """Return the keyword arguments a metric may take (its function keeps what it takes)."""
        return {"min_group_size": self.min_group_size,
                "min_condition_size": self.min_condition_size,
                # scikit-learn's name, which the metric functions take (issue 26)
                "random_state": self.rng,
                "threshold": self.threshold, **self.options.get(metric, {})}


def resolve(evaluation: EvaluationOptions | None, **given: Any) -> EvaluationOptions:
    """Return ``evaluation`` (default: :class:`EvaluationOptions`) with the keywords given.

    The individual keywords of ``evaluate_window`` and ``evaluate_summary`` keep working: a
    keyword given explicitly wins over the same field of ``evaluation``.

    >>> resolve(EvaluationOptions(min_group_size=30), min_group_size=DEFAULT,
    ...         thresholds=DEFAULT).min_group_size
    30
    """
    changes = {k: v for k, v in given.items() if v is not DEFAULT}
    if "thresholds" in changes and not isinstance(changes["thresholds"], tuple):
        changes["thresholds"] = tuple(changes["thresholds"] or ())
    return (evaluation or EvaluationOptions()).replace(**changes)

