"""The chance floor of a metric on a window: its permutation null, for plain-language verdicts."""

from __future__ import annotations

import warnings
from typing import Any

from ..exceptions import GroupExclusionWarning, UndefinedMetricWarning
from ..report.evaluate import Window
from ..report.registry import MetricSpec

__all__ = ["chance_floor"]


def chance_floor(spec: MetricSpec, window: Window, attribute: str, min_group_size: int,
                 n_resamples: int, rng: Any) -> Any:
    """Permutation test of ``spec`` on one attribute of ``window`` (group labels shuffled).

    The metric's other inputs stay aligned with their rows; only the group labels move, so the
    null mean is what a model independent of the attribute would show on this sample.
    """
    import numpy as np

    from ..metrics import encode_groups, permutation_test

    columns = dict(window.sensitive_features)
    sf = {attribute: columns[attribute]} if attribute in columns else columns
    # drop rows of small groups from EVERY input up front: the permutation test would drop them
    # from the array it shuffles only, leaving the other inputs misaligned
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GroupExclusionWarning)
        groups = encode_groups(sf, n_samples=window.n_rows, min_group_size=min_group_size)
    kept = groups.codes >= 0
    first, *others = (np.asarray(window.get(i))[kept] for i in spec.inputs)
    codes = groups.codes[kept]

    held = _held_bins(spec, first, codes)

    def metric(values: Any, *, sensitive_features: Any, **kw: Any) -> float:
        result = spec.func(values, *others, sensitive_features=sensitive_features,
                           **{**spec.options, **held, **kw})
        return float(getattr(result, spec.field or "value", result))

    with warnings.catch_warnings():
        # a shuffled sample may leave a group without positives; that is part of the null
        warnings.simplefilter("ignore", GroupExclusionWarning)
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return permutation_test(
            metric, first, sensitive_features=codes, n_resamples=n_resamples, random_state=rng,
            alternative="greater" if spec.direction == "lower_is_fairer" else "less",
        )


def _held_bins(spec: MetricSpec, scores: Any, codes: Any) -> dict[str, Any]:
    """MADD's bins on the real labels, held through the shuffles (two groups).

    The report's chance level holds each pair's bins at the window's (the "auto" search is not
    re-run per null draw); holding them here too gives one chance level, the permutation null
    at the window's bins. With more groups each pair has its own bins, which ``madd`` cannot
    take: the shuffles re-run the search (docs/intervals_scores.md: within ~10%).
    """
    if spec.name != "madd" or "n_bins" in spec.options:
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pairs = getattr(spec.func(scores, sensitive_features=codes, **spec.options), "pairs", ())
    return {"n_bins": int(pairs[0].n_bins)} if len(pairs) == 1 else {}
