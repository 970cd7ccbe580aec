"""Each window value's confidence interval and chance level, from the window's summary.

Called by the report loop (:func:`fairmonitor.report.evaluate_window` and
:func:`~fairmonitor.report.evaluate_summary`) after a metric's value: the interval reads the
same per-group counts and score summaries the value was computed from, never the rows again,
so it costs O(groups x bins x draws) whatever the window's size and it works on merged
summaries. Which method serves which metric (the registry's ``interval`` column):

- parity gaps and ratios (and predictive parity):
  :func:`~fairmonitor.metrics._rate_intervals.rate_gap_interval`, score-type intervals from
  per-group counts (Newcombe's hybrid score interval per pair of groups, MOVER-R for the DP
  ratio, a joint critical value over the pairs that may be the largest; ``docs/intervals.md``);
  the calibration gap by
  :func:`~fairmonitor.metrics._intervals.mean_gap_interval` with a bounded variance;
- ABCC, ABPC: :func:`~fairmonitor.metrics._score_intervals.score_gap_interval`, a Poisson
  bootstrap of per-group score histograms, one :class:`ScoreBootstrap` per attribute shared by
  the score metrics, an attribute derived from an intersection reading the sums of the cells'
  draws (one set of draws for the attributes and their intersection); MADD: its chance level
  only, no bounds (the reason says why);
- the chance level of a score metric is the permutation null of the group labels read on the
  same histograms (bandwidths held at the window's): what
  :func:`~fairmonitor.metrics.permutation_test` and ``fairmonitor report`` give as "chance",
  within Monte Carlo error;
- HFM average: the sampled estimator's own interval (``method="sampled"``); HFM max has none
  (a maximum over nearest-neighbour distances is not estimable from a sample);
- CFair: the paired comparison's (cluster-robust) 95% interval of the absolute gap;
- robustness ratio and delta: Wald intervals from the protocol's repeated-noise standard
  errors; the 0/1 verdict, the AUC and the flip-rate gap have none;
- regression metrics: computed with the value by the metric function (``confidence_level``):
  a stratified bootstrap of the groups' rows and a permutation null
  (:mod:`fairmonitor.metrics._regression._resample`); ``prediction_madd`` has none.

Undefined intervals are NaN with a reason, never 0-width.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..metrics.shared import (
    RESOLUTION,
    Interval,
    ScoreBootstrap,
    fine_histogram_sorted,
    madd_chance_pairs,
    mean_gap_interval,
    rate_gap_interval,
    score_gap_interval,
    wald_interval,
)
from ..summaries import compute as _compute
from ..summaries.core import AttributeSummary, DerivedGroups, GroupSummary
from .registry import CONDITIONS, METRICS, MetricSpec

__all__ = ["DEFAULT_LEVEL", "interval_of", "undefined"]

#: Confidence level of every interval unless the caller says otherwise.
DEFAULT_LEVEL = 0.95
_NAN = float("nan")


def undefined(reason: str, method: str = "none") -> Interval:
    """Return a NaN interval with its reason."""
    return Interval(_NAN, _NAN, _NAN, method, reason)


def _kept(attr: AttributeSummary, min_group_size: int,
          cache: dict[Any, Any] | None = None) -> list[GroupSummary]:
    """Return the groups of at least ``min_group_size`` rows (made once per window)."""
    key = ("kept", attr.name, min_group_size)
    if cache is not None and key in cache:
        return cache[key]  # type: ignore[no-any-return]
    with warnings.catch_warnings():  # the value's computation already said it
        warnings.simplefilter("ignore")
        labels = _compute._kept(attr, min_group_size).labels
    groups = [attr.groups[label] for label in labels]
    if cache is not None:
        cache[key] = groups
    return groups


def _rates(spec: MetricSpec, groups: list[GroupSummary], level: float,
           min_condition_size: int = 1) -> Interval:
    """Return the interval of a rate gap; ``spec.conditions_on`` names each rate's trials."""
    n = np.array([g.n for g in groups], dtype=float)
    if not spec.needs_labels:  # selection rates: of every row
        if any(g.predicted_positive is None for g in groups):
            return undefined("no predictions")
        pos = np.array([g.predicted_positive for g in groups], dtype=float)
        return rate_gap_interval(pos, n, ratio=spec.direction == "higher_is_fairer",
                                 level=level)
    if any(g.confusion is None for g in groups):
        return undefined("labels not available")
    counts = np.array([g.confusion for g in groups], dtype=float).reshape(-1, 4).T
    if not spec.conditions_on:  # the calibration gap: means, not rates
        return _calibration(groups, n, counts[0] + counts[2], level)
    successes, trials = [], []
    for condition in spec.conditions_on:
        hits, of = CONDITIONS[condition]
        total = counts[list(of)].sum(axis=0)
        successes.append(counts[hits[0]])
        # the metric's filter: a group with fewer conditioning rows has no rate (0 trials)
        trials.append(np.where(total < min_condition_size, 0.0, total))
    if len(successes) == 1:
        return rate_gap_interval(successes[0], trials[0], level=level)
    return rate_gap_interval(np.stack(successes), np.stack(trials), level=level)


def _calibration(groups: list[GroupSummary], n: NDArray[np.float64],
                 positives: NDArray[np.float64], level: float) -> Interval:
    """Return a Wald-type interval: Var(score - y) <= (sd(score) + sd(y))^2 (Cauchy-Schwarz).

    The summary holds no sum of score x label; conservative, never too narrow.
    """
    if any(g.moments is None for g in groups):
        return undefined("no scores")
    total, squares = (np.array([g.moments[k] for g in groups], dtype=float)  # type: ignore
                      for k in (0, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        means = total / n - positives / n
        sd_score = np.sqrt(np.maximum(squares / n - (total / n) ** 2, 0.0))
        p = positives / n
        spread = sd_score + np.sqrt(p * (1 - p))
        pooled = (np.sqrt(max(squares.sum() / n.sum() - (total.sum() / n.sum()) ** 2, 0.0))
                  + np.sqrt(p.mean() * (1 - p.mean())))
        variances = np.where(n > 1, spread ** 2 / np.maximum(n - 1, 1), np.nan)
        null = pooled ** 2 / np.maximum(n - 1, 1)
    return mean_gap_interval(means, variances, null, level=level)


def _fine(g: GroupSummary) -> NDArray[np.float64]:
    """Return the group's fine score histogram, from raw scores or from cells."""
    if g.scores is not None:  # sorted, as a summary keeps them
        return fine_histogram_sorted(g.scores)
    from ..metrics.shared import cell_histogram  # compiled: one pass over the cells

    # the counts and sums as stored (unpacking the cells would decode their bounds too)
    return cell_histogram(g.cells.count, g.cells.total, RESOLUTION)  # type: ignore[union-attr]


def _bootstrap(attr: AttributeSummary, groups: list[GroupSummary], labels: list[Any],
               cache: dict[Any, Any]) -> ScoreBootstrap:
    """Return the attribute's score bootstrap (its kept groups), made once per window.

    An attribute derived from an intersection (its groups unions of the intersection's
    cells) reads the sums of the cells' draws, and the intersection itself those cells'
    draws, when the histograms add up (:meth:`ScoreBootstrap.coarsened`: the same law for
    each interval): the attributes and their intersection cost one set of Poisson draws.
    """
    key = (attr.name, tuple(map(repr, labels)))
    if key not in cache:
        hist = np.stack([_fine(g) for g in groups])
        cells = _cells_of(attr, cache)
        found = None
        if cells is not None:
            source, members = cells
            index = {label: k for k, label in enumerate(source.groups)}
            found = _cell_bootstrap(source, cache).coarsened(
                [[index[m] for m in members(lab)] for lab in labels], hist)
        cache[key] = found if found is not None else ScoreBootstrap(hist)
    return cache[key]  # type: ignore[no-any-return]


def _cells_of(attr: AttributeSummary, cache: dict[Any, Any]
              ) -> tuple[AttributeSummary, Any] | None:
    """Return the intersection whose cells make ``attr``'s groups and each group's cells.

    None if there is none (or its cells have no scores).
    """
    if isinstance(attr.groups, DerivedGroups):
        derived = attr.groups
        source = derived.source
        if all(g.scores is not None or g.cells is not None for g in source.groups.values()):
            return source, derived.members.__getitem__
        return None
    if ("cells", attr.name) in cache:  # the intersection, its cells already drawn
        return attr, lambda label: [label]
    return None


def _cell_bootstrap(source: AttributeSummary, cache: dict[Any, Any]) -> ScoreBootstrap:
    """Return the bootstrap of every cell of the intersection ``source`` (made once)."""
    key = ("cells", source.name)
    if key not in cache:
        cache[key] = ScoreBootstrap(np.stack([_fine(g) for g in source.groups.values()]))
    return cache[key]  # type: ignore[no-any-return]


def _scores(name: str, value: float, result: Any, attr: AttributeSummary,
            groups: list[GroupSummary], kw: Mapping[str, Any], level: float,
            cache: dict[Any, Any]) -> Interval:
    if kw.get("agg", "max") != "max":
        return undefined("intervals are computed for agg='max' only")
    if kw.get("compat") is not None:
        return undefined("no interval for the paper-compatible estimator")
    if any(g.moments is None for g in groups):
        return undefined("no scores")
    kept = {id(g) for g in groups}
    labels = [lab for lab, g in attr.groups.items() if id(g) in kept]
    boot = _bootstrap(attr, groups, labels, cache)
    if name == "abcc":
        return score_gap_interval(boot, "abcc", value=value, level=level)
    if name == "madd":
        # the pairs the chance level reads, and their bins: not every pair (the value's
        # search scored only those that may be the worst)
        pairs, bins = madd_chance_pairs(result, labels, boot.hist.sum(axis=1))
        return score_gap_interval(boot, "madd", value=value, pairs=pairs, pair_bins=bins,
                                  level=level)
    widths = [_compute._bandwidth(g, kw.get("bandwidth", "scott"))[0] for g in groups]
    with_density = [k for k, h in enumerate(widths) if math.isfinite(h)]
    pairs = [(i, j) for i in with_density for j in with_density if i < j]
    return score_gap_interval(boot, "abpc", value=value, pairs=pairs, bandwidths=widths,
                              level=level)


def _rows(name: str, field: str | None, value: float, result: Any, level: float) -> Interval:
    if name == "hfm_average":
        ci = getattr(result, "average_ci", None)
        if ci is None:
            return undefined("exact HFM has no sampling interval; use options "
                             "{'hfm_average': {'method': 'sampled'}} for one")
        return Interval(float(ci[0]), float(ci[1]), _NAN, "sampled-hfm")
    if name == "hfm":
        return undefined("a maximum over nearest-neighbour distances is not estimable from a "
                         "sample: HFM max has no interval (hfm_average has one)")
    if name == "cfair":  # the paired comparison's interval of |gap| (95%, cluster-robust)
        lo, hi = float(result.ci_low), float(result.ci_high)
        if level != DEFAULT_LEVEL:
            return undefined("CFair's paired comparison gives 95% intervals only")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return undefined("too few counterpart pairs for an interval", "paired-comparison")
        return Interval(lo, hi, _NAN, "paired-comparison")
    metric = getattr(result, "metrics", (None,))[0]
    if field == "ratio_at_max_level_value":
        return wald_interval(value, float(np.asarray(result.ratio_se[metric])[-1]),
                             level=level, lower=0.0, method="wald-noise-repeats")
    if field in ("max_ratio_value", "max_delta_value"):
        series = result.ratios if field == "max_ratio_value" else result.deltas
        se = result.ratio_se if field == "max_ratio_value" else result.delta_se
        values = np.asarray(series[metric], dtype=float)
        if not np.isfinite(values).any():
            return undefined("the ratios are undefined on this window")
        k = int(np.nanargmax(values))
        return wald_interval(value, float(np.asarray(se[metric])[k]), level=level,
                             lower=0.0 if field == "max_ratio_value" else -1.0,
                             method="wald-noise-repeats")
    return undefined(f"{name} has no interval (see the registry's interval column)")


def interval_of(name: str, field: str | None, value: float, result: Any,
                attr: AttributeSummary, *, kw: Mapping[str, Any], level: float,
                cache: dict[Any, Any]) -> Interval:
    """Return the interval and chance level of metric ``name``'s ``value`` on one attribute.

    ``result`` is the metric function's full result (MADD's pairs, HFM's sampled interval,
    the robustness standard errors); ``kw`` the options the metric ran with; ``cache`` is
    shared by the metrics of one window (one score bootstrap per attribute).
    """
    if not math.isfinite(value):
        return undefined("the value is undefined")
    spec = METRICS[name]
    if spec.task == "regression":  # computed with the value (the metric's own resampling)
        iv = getattr(getattr(result, field or "value", result), "interval", None)
        return iv if iv is not None else undefined(
            spec.no_interval or f"{name} has no interval on this window")
    try:
        if spec.summary in ("rates", "counts"):
            groups = _kept(attr, int(kw.get("min_group_size", 1)), cache)
            return _rates(spec, groups, level, int(kw.get("min_condition_size", 1)))
        if spec.summary == "scores":
            groups = _kept(attr, int(kw.get("min_group_size", 1)), cache)
            return _scores(name, value, result, attr, groups, kw, level, cache)
        return _rows(name, field, value, result, level)
    except (AttributeError, KeyError, IndexError, TypeError) as exc:  # a result without SEs
        return undefined(f"no interval: {exc}")
