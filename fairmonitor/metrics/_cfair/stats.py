"""Statistics of one CFair comparison: the paired gap, its tests and CI, rate gaps, balance.

Kept apart from the matching so each module does one job. Every function takes plain arrays of
the matched pairs; none fits anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._validation import warn_undefined

__all__ = ["CounterpartComparison", "max_smd", "paired_tests", "rate_gaps"]

_NAN = float("nan")


@dataclass(frozen=True, slots=True)
class CounterpartComparison:
    """CFair for one comparison: ``group`` against ``reference`` (a group, or ``"rest"``).

    Attributes
    ----------
    group, reference : object
        Compared group and reference (``"rest"``: all other groups together).
    status : str
        ``"ok"``; ``"insufficient_pairs"`` (fewer than ``min_pairs``); ``"no_overlap"`` (the
        propensity logits barely overlap); ``"missing_group"`` (a side has no rows).
    reason : str or None
        Why the figures are NaN, when ``status != "ok"``.
    value, signed : float
        ``|mean d|`` and ``mean d``, with ``d = f(group member) - f(its counterpart)``.
    ci_low, ci_high : float
        95% CI of ``value``: from the signed CI, ``[min|lo|, max|hi|]`` if it excludes 0,
        else ``[0, max(|lo|, |hi|)]``.
    signed_ci_low, signed_ci_high : float
        95% CI of ``signed``.
    p_value : float
        Two-sided paired t-test of ``mean d = 0`` (cluster-robust when counterparts are reused).
    wilcoxon_p_value : float
        Two-sided Wilcoxon signed-rank test on ``d`` (zero differences dropped).
    effect_size : float
        ``mean d / sd(d)``.
    n_pairs, n_unmatched : int
        Pairs, and units of the matched side left without a counterpart.
    n_group, n_reference : int
        Rows on each side.
    coverage : float
        ``n_pairs`` over the matched side's rows.
    caliper : float
        Caliper in logit units.
    ps_auc : float
        AUC of the propensity logits on these rows (0.5: indistinguishable, 1: separated).
    dp_gap : float
        Classical ``|mean f(group) - mean f(reference)|`` on all rows of both sides.
    dp_gap_unmatched : float
        The same on the rows outside the pairs (paper's "unmatched population"); NaN if a side
        has none.
    tpr_gap, fpr_gap, ppv_gap : float
        Counterpart rate gaps ``|rate(group members) - rate(counterparts)|`` (NaN without
        labels).
    max_smd_before, max_smd_after : float
        Largest standardised mean difference of the features between the sides, before and
        after matching (balance diagnostics).
    pairs : ndarray of shape (n_pairs, 2)
        Row indices ``(group member, counterpart)`` into the input arrays.
    """

    group: Any
    reference: Any
    status: str
    reason: str | None
    value: float = _NAN
    signed: float = _NAN
    ci_low: float = _NAN
    ci_high: float = _NAN
    signed_ci_low: float = _NAN
    signed_ci_high: float = _NAN
    p_value: float = _NAN
    wilcoxon_p_value: float = _NAN
    effect_size: float = _NAN
    n_pairs: int = 0
    n_unmatched: int = 0
    n_group: int = 0
    n_reference: int = 0
    coverage: float = _NAN
    caliper: float = _NAN
    ps_auc: float = _NAN
    dp_gap: float = _NAN
    dp_gap_unmatched: float = _NAN
    tpr_gap: float = _NAN
    fpr_gap: float = _NAN
    ppv_gap: float = _NAN
    max_smd_before: float = _NAN
    max_smd_after: float = _NAN
    pairs: NDArray[np.intp] = field(default_factory=lambda: np.empty((0, 2), np.intp),
                                    repr=False)


def paired_tests(d: NDArray[np.float64], clusters: NDArray[np.intp]) -> dict[str, float]:
    """Signed and absolute gap, 95% CIs, t and Wilcoxon p-values and d_z of differences ``d``.

    The t statistic uses the cluster-robust (CR1) standard error with one cluster per reused
    counterpart, ``se^2 = C/(C-1) * sum_c (sum_{i in c} (d_i - mean))^2 / N^2`` on ``C - 1``
    degrees of freedom. With no counterpart reused (``C = N``) it is exactly the ordinary paired
    t-test, ``scipy.stats.ttest_rel``. Degenerate cases follow the spec (§5): all ``d = 0`` gives
    p = 1 (scipy returns NaN), a constant non-zero ``d`` gives p = 0. Both tests use the same
    conventions.
    """
    # imported here: scipy.stats takes ~1 s to import, which `import fairmonitor` (every CLI
    # command, the MLflow plugin's discovery) should not pay for one metric's p-values
    from scipy import stats

    n = d.size
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    counts = np.bincount(clusters)
    sums = np.bincount(clusters, weights=d)
    used = counts > 0
    c = int(used.sum())
    resid = sums[used] - counts[used] * mean
    se = math.sqrt(c / (c - 1) * float(resid @ resid)) / n if c > 1 else 0.0
    if se > 0:
        t = mean / se
        p = float(2 * stats.t.sf(abs(t), c - 1))
        half = float(stats.t.ppf(0.975, c - 1)) * se
    else:
        p, half = (1.0 if mean == 0 else 0.0), 0.0
    lo, hi = mean - half, mean + half
    if lo > 0 or hi < 0:
        abs_lo, abs_hi = min(abs(lo), abs(hi)), max(abs(lo), abs(hi))
    else:
        abs_lo, abs_hi = 0.0, max(abs(lo), abs(hi))
    # scipy returns NaN (with a RuntimeWarning) when every difference is 0
    wilcoxon = (float(stats.wilcoxon(d, zero_method="wilcox").pvalue) if np.any(d != 0)
                else 1.0)
    effect = mean / sd if sd > 0 else (0.0 if mean == 0 else math.copysign(math.inf, mean))
    return {"value": abs(mean), "signed": mean, "ci_low": abs_lo, "ci_high": abs_hi,
            "signed_ci_low": lo, "signed_ci_high": hi, "p_value": p,
            "wilcoxon_p_value": wilcoxon, "effect_size": effect}


def _rate(num: float, den: float) -> float:
    return float(num / den) if den > 0 else _NAN


def rate_gaps(f_g: NDArray[np.float64], y_g: NDArray[np.float64], f_r: NDArray[np.float64],
              y_r: NDArray[np.float64], where: str) -> dict[str, float]:
    """Counterpart TPR, FPR and PPV gaps between the group members and their counterparts.

    ``f`` may be hard 0/1 predictions or probabilities; with probabilities the rates are the
    usual soft versions (expected TPR = mean score of the positives, PPV = sum(f y) / sum(f)).
    A rate with an empty denominator on either side makes that gap NaN with a warning.
    """
    out = {}
    for name, num, den in (
        ("tpr_gap", lambda f, y: f @ y, lambda f, y: y.sum()),
        ("fpr_gap", lambda f, y: f @ (1 - y), lambda f, y: (1 - y).sum()),
        ("ppv_gap", lambda f, y: f @ y, lambda f, y: f.sum()),
    ):
        a = _rate(num(f_g, y_g), den(f_g, y_g))
        b = _rate(num(f_r, y_r), den(f_r, y_r))
        if math.isnan(a) or math.isnan(b):
            what = {"tpr_gap": "no actual positives", "fpr_gap": "no actual negatives",
                    "ppv_gap": "no predicted positives"}[name]
            out[name] = warn_undefined(f"cfair {name}", f"{where}: a side of the pairs has {what}")
        else:
            out[name] = float(abs(a - b))
    return out


def max_smd(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    """Largest ``|mean_a - mean_b| / sqrt((var_a + var_b) / 2)`` over the columns (0 if none)."""
    if a.shape[1] == 0 or a.shape[0] == 0 or b.shape[0] == 0:
        return 0.0 if a.shape[1] == 0 else _NAN
    diff = np.abs(a.mean(axis=0) - b.mean(axis=0))
    pooled = np.sqrt((a.var(axis=0) + b.var(axis=0)) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        smd = np.where(pooled > 0, diff / np.where(pooled > 0, pooled, 1.0),
                       np.where(diff > 0, np.inf, 0.0))
    return float(smd.max())
