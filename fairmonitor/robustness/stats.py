"""Group gaps per repeat, sampling floors and curve summaries for the robustness ratio.

Vectorised over repeats: one matrix product of the (repeats x rows) 0/1 predictions with a
(rows x 3G) table of group indicators gives every group's selected, true-positive and
false-positive counts in every repeat at once. The gaps are then max-minus-min over the groups,
as :mod:`fairmonitor.metrics` computes them; sums of 0/1 values are exact in float64, so the
per-repeat values equal the metric functions' bit for bit (the tests check it).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import format_labels, warn_undefined
from ..exceptions import GroupExclusionWarning, InvalidInputError
from ..utils.groups import Groups

DP = "demographic_parity_difference"
EO = "equalized_odds_difference"
EOP = "equal_opportunity_difference"
FPR = "false_positive_rate_difference"
SUPPORTED = (DP, EO, EOP, FPR)
#: Short names of spec §2.1 (dp, eo, tp, fp).
ALIASES = {"dp": DP, "eo": EO, "tp": EOP, "eop": EOP, "fp": FPR}
_RATES = {DP: ("selection",), EOP: ("tpr",), FPR: ("fpr",), EO: ("tpr", "fpr")}
_WHAT = {"selection": "selection rate", "tpr": "true positive rate",
         "fpr": "false positive rate"}


def resolve_metrics(metrics: Iterable[str] | str, has_labels: bool) -> tuple[str, ...]:
    """Full metric names, checked: supported, no duplicates, labels present when needed."""
    names = (metrics,) if isinstance(metrics, str) else tuple(metrics)
    if not names:
        raise InvalidInputError("`metrics` is empty; pass at least one metric name.")
    resolved = []
    for name in names:
        full = ALIASES.get(name, name)
        if full not in SUPPORTED:
            raise InvalidInputError(
                f"robustness_ratio cannot compute {name!r}; supported metrics are {SUPPORTED} "
                f"(or the short names {tuple(ALIASES)})."
            )
        if full != DP and not has_labels:
            raise InvalidInputError(
                f"{full} needs labels: pass `y_true`, or use metrics=('{DP}',)."
            )
        if full not in resolved:
            resolved.append(full)
    return tuple(resolved)


@dataclass(frozen=True, slots=True)
class GroupTable:
    """Per-row group indicators and group sizes of the evaluated sample."""

    groups: Groups
    indicators: NDArray[np.float64]  # (n, G) or (n, 3G): rows, rows*y, rows*(1-y)
    sizes: dict[str, NDArray[np.float64]]  # rate -> denominator per group

    @classmethod
    def build(cls, groups: Groups, y: NDArray[np.float64] | None) -> GroupTable:
        """Build the indicators of the kept groups (rows of excluded groups are all-zero)."""
        n, G = len(groups.codes), groups.n_groups
        onehot = np.zeros((n, G))
        kept = groups.codes >= 0
        onehot[np.flatnonzero(kept), groups.codes[kept]] = 1.0
        sizes = {"selection": onehot.sum(axis=0)}
        if y is None:
            return cls(groups, onehot, sizes)
        pos, neg = onehot * y[:, None], onehot * (1.0 - y)[:, None]
        sizes.update(tpr=pos.sum(axis=0), fpr=neg.sum(axis=0))
        return cls(groups, np.hstack([onehot, pos, neg]), sizes)

    def rates(self, yhat: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
        """Rate name -> (K, G) per-repeat group rates of the 0/1 predictions ``yhat`` (K, n)."""
        counts = yhat @ self.indicators
        G = self.groups.n_groups
        out = {}
        for i, (rate, size) in enumerate(self.sizes.items()):
            with np.errstate(invalid="ignore", divide="ignore"):
                out[rate] = counts[:, i * G:(i + 1) * G] / np.maximum(size, 1)
        return out


def check_defined(metrics: tuple[str, ...], table: GroupTable) -> dict[str, str]:
    """Metric -> why it is undefined on these groups ('' if defined), warning as the metrics do.

    A group without rows of a class has no TPR (FPR); it is left out of that gap with a
    :class:`GroupExclusionWarning`, as :mod:`fairmonitor.metrics` does. The groups and labels
    never change across levels, so this is decided (and warned) once.
    """
    g = table.groups
    two = g.two_group_reason()
    reasons = {}
    for metric in metrics:
        reason = two or ""
        for rate in _RATES[metric]:
            if reason:
                break
            empty = table.sizes[rate] == 0
            if empty.any() and rate != "selection":
                names = format_labels(lab for lab, e in zip(g.labels, empty, strict=True) if e)
                warnings.warn(
                    f"{metric}: left out group(s) {names} of '{g.name}' whose {_WHAT[rate]} is "
                    "undefined (no rows of that class in the group)",
                    GroupExclusionWarning, stacklevel=4)
            if np.count_nonzero(~empty) < 2:
                reason = f"fewer than two groups of '{g.name}' have a defined {_WHAT[rate]}"
        if reason:
            warn_undefined(metric, reason)
        reasons[metric] = reason
    return reasons


def _spread(rates: NDArray[np.float64], defined: NDArray[np.bool_]) -> NDArray[np.float64]:
    r = rates[:, defined]
    return r.max(axis=1) - r.min(axis=1)


def gaps(metric: str, table: GroupTable, rates: dict[str, NDArray[np.float64]]
         ) -> NDArray[np.float64]:
    """Per-repeat value of ``metric`` (K,), from :meth:`GroupTable.rates`."""
    parts = [_spread(rates[r], table.sizes[r] > 0) for r in _RATES[metric]]
    return parts[0] if len(parts) == 1 else np.maximum(*parts)


def sampling_floor(metric: str, table: GroupTable, clean: dict[str, NDArray[np.float64]]
                   ) -> float:
    """Typical gap of a perfectly fair model on groups of these sizes (spec §5.5).

    ``sqrt(2/pi) * sqrt(p(1-p) (1/n_a + 1/n_b))`` with p the pooled clean rate and n_a, n_b the
    two smallest groups' denominators (the noisiest pair); for EO the larger of the TPR and FPR
    floors. With more than two groups it is a lower bound of the expected max-minus-min.
    """
    floors = []
    for rate in _RATES[metric]:
        size = table.sizes[rate]
        defined = size > 0
        if np.count_nonzero(defined) < 2:
            return float("nan")
        # pooled rate = size-weighted mean of the group rates, averaged over clean copies
        p = float(np.mean(clean[rate][:, defined] @ size[defined]) / size[defined].sum())
        a, b = np.sort(size[defined])[:2]
        floors.append(math.sqrt(2 / math.pi) * math.sqrt(p * (1 - p) * (1 / a + 1 / b)))
    return max(floors)


@dataclass(frozen=True, slots=True)
class Curve:
    """Ratio curve and summaries of one metric (see ``RobustnessResult``)."""

    ratios: NDArray[np.float64]
    ratio_se: NDArray[np.float64]
    ratios_floored: NDArray[np.float64]
    deltas: NDArray[np.float64]
    delta_se: NDArray[np.float64]
    worse: NDArray[np.bool_]
    ratio_at_max_level: float
    max_ratio: float
    argmax_level: float
    auc_ratio: float
    max_delta: float
    robust: bool
    frac_levels_worse: float
    reason: str


def _nanmax(values: NDArray[np.float64]) -> float:
    return float(np.max(values[~np.isnan(values)])) if (~np.isnan(values)).any() else math.nan


def summarise(metric: str, levels: NDArray[np.float64], gap: NDArray[np.float64],
              gap_se: NDArray[np.float64], clean: float, clean_se: float, floor: float,
              undefined: str, *, tol_abs: float, tol_ratio: float | None, strict: bool
              ) -> Curve:
    """Ratios R_k, deltas and the summaries of spec §1.6, §5.3 and §5.6."""
    deltas = gap - clean
    delta_se = np.sqrt(gap_se**2 + clean_se**2)
    reason = undefined
    with np.errstate(invalid="ignore", divide="ignore"):
        tiny = clean == 0 or (np.isfinite(floor) and clean < floor)
        if tiny and not undefined:
            ratios = np.where(gap > 0, np.inf, np.nan)
            reason = (
                "the clean gap is 0" if clean == 0 else
                f"the clean gap {clean:.4g} is below the sampling floor {floor:.4g} of this "
                "sample, so it cannot be told apart from 0"
            ) + ("; the ratio is +inf where noise opens a gap and NaN (0/0) where it stays 0. "
                 "Read `deltas` (and `ratios_floored`) instead.")
        else:
            ratios = gap / clean
        # delta method (spec §5.6): Var(R) ~ R^2 (SE_k^2 / M_k^2 + SE_0^2 / M_0^2)
        clean_rel = (clean_se / clean) ** 2 if clean else (0.0 if clean_se == 0 else math.inf)
        ratio_se = np.abs(ratios) * np.sqrt((gap_se / gap) ** 2 + clean_rel)
        ratios_floored = gap / max(clean, floor) if np.isfinite(floor) else ratios.copy()
        # a level is "worse" if the gap grew by more than tol_abs and by more than 1.96 SE
        worse = deltas > np.fmax(tol_abs, 1.96 * delta_se)
        if tol_ratio is not None:
            worse &= ratios > 1 + tol_ratio
        if strict:  # the paper's criterion: R_k <= 1 at every level
            worse = ratios > 1
        significant = deltas - 1.96 * np.nan_to_num(delta_se) > 0
    if np.isinf(ratios).any():
        max_ratio, auc = math.inf, math.inf
    else:
        max_ratio = _nanmax(ratios)
        curve = np.concatenate([[1.0], ratios])
        auc = float(np.trapezoid(curve, np.concatenate([[0.0], levels])) / levels[-1])
    if not undefined and np.isnan(ratios).all():
        warn_undefined(f"robustness ratio of {metric}",
                       "the clean gap is 0 (or below the sampling floor) and the gap under "
                       "noise is 0 at every level (0/0)")
    finite = np.where(np.isnan(ratios), -np.inf, ratios)
    return Curve(
        ratios=ratios, ratio_se=ratio_se, ratios_floored=ratios_floored, deltas=deltas,
        delta_se=delta_se,
        worse=worse, ratio_at_max_level=float(ratios[-1]), max_ratio=max_ratio,
        argmax_level=float(levels[int(np.argmax(finite))]) if not math.isnan(max_ratio)
        else math.nan,
        auc_ratio=auc, max_delta=_nanmax(deltas),
        robust=bool(not undefined and not worse.any()),
        frac_levels_worse=float(np.mean(significant)) if not undefined else math.nan,
        reason=reason,
    )


def readonly(values: Any) -> Any:
    """Freeze an ndarray in place (results are immutable); pass other values through."""
    if isinstance(values, np.ndarray):
        values.flags.writeable = False
    return values
