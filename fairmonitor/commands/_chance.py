"""The chance floor of a metric on a window: its permutation null, for plain-language verdicts."""

from __future__ import annotations

import warnings
from typing import Any

from .._registry import MetricSpec
from ..exceptions import GroupExclusionWarning, UndefinedMetricWarning
from ..report import Window

__all__ = ["chance_floor"]


def chance_floor(spec: MetricSpec, window: Window, attribute: str, min_group_size: int,
                 n_resamples: int, rng: Any) -> Any:
    """Permutation test of ``spec`` on one attribute of ``window`` (group labels shuffled).

    The metric's other inputs stay aligned with their rows; only the group labels move, so the
    null mean is what a model independent of the attribute would show on this sample.
    """
    from ..metrics import permutation_test

    first, *others = (window.get(i) for i in spec.inputs)
    columns = dict(window.sensitive_features)
    sf = ({attribute: columns[attribute]} if attribute in columns else columns)

    def metric(values: Any, *, sensitive_features: Any, **kw: Any) -> float:
        result = spec.func(values, *others, sensitive_features=sensitive_features,
                           **{**spec.options, **kw})
        return float(getattr(result, spec.field or "value", result))

    with warnings.catch_warnings():
        # a shuffled sample may leave a group without positives; that is part of the null
        warnings.simplefilter("ignore", GroupExclusionWarning)
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return permutation_test(metric, first, sensitive_features=sf, n_resamples=n_resamples,
                                rng=rng, min_group_size=min_group_size)
