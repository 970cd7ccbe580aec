"""Sequential evidence for fairness pages: a false-page budget per model.

A threshold with ``compare: budget`` does not page on one window. Each alerting series (metric x
attribute x severity) keeps an :class:`Evidence` state that :func:`accumulate` updates once per
evaluated window, and the series pages when ``state.statistic >= budget.page_level(...)``.

The method
----------
Per series the threshold's level ``L`` defines an indifference zone: a null gap
``g0 = null_fraction * L`` (no page wanted) and an alternative ``g1 = alternative_fraction * L``
(a page wanted quickly). A window gives an estimate ``x`` and, from its confidence interval, a
standard error ``s`` (the wider half-width over the normal quantile, floored at ``(g1 - g0) / 8``
so a degenerate interval never divides by 0). Its Gaussian log-likelihood ratio of ``g1``
against ``g0`` is ``l = (g1 - g0) / s**2 * (x - (g0 + g1) / 2)`` (Page 1954).

The gap statistics of the registry are *folded*: ``|p_a - p_b|`` (a largest pair gap) is >= 0
and biased upward when ``s`` is comparable with ``L`` (small groups). Under a folded normal
at ``g0``, ``E[exp(l)] = c = Phi((g0 + d) / s) + exp(-2 d g0 / s**2) Phi((d - g0) / s)`` with
``d = g1 - g0``, above 1 and markedly so on small groups (1.24 at ``L / s = 0.5``, 1.11 at
1.3, 1.014 at 2, with the default zone). The increment used is
``l - log c``: an e-value (``E[exp(.)] <= 1`` at every true gap ``<= g0``, folded or not, since
the folded statistic grows stochastically with the gap). On large groups ``c`` is 1.

Most gaps are a *largest* one: over the ``K (K - 1) / 2`` pairs of ``K`` groups, and over two
families for equalized odds. ``exp(a max_i y_i) <= sum_i exp(a y_i)``, so with ``m`` such
comparisons the increment is ``l - log(m c)`` (:func:`comparisons` counts them; the caller
passes it). Without it a fair model with small groups and many pairs drifts upward: the
largest of six folded pair gaps of 12-row groups sits above the midpoint on average.

The increments feed a Shiryaev-Roberts e-detector (Shin, Ramdas and Rinaldo), kept in log
scale as ``statistic = log(1 + R)``, ``R_t = exp(l_t) (1 + R_{t-1})``: ``statistic_t =
softplus(statistic_{t-1} + l_t)``. ``R_t - t`` is a supermartingale while every gap is at
most ``g0``, so a detector that pages when ``R >= A`` and restarts from 0 when its page clears
pages at most ``T / A`` times in expectation over ``T`` windows (optional stopping, summed
over the restart cycles; no assumption on how the series of one model depend on each other).
:meth:`Budget.page_level` sets ``A = n_series * windows_per_day * days / false_pages``: the
expected number of false pages of a model over ``days`` is at most ``false_pages``.

Why not the CUSUM: Page's CUSUM is ``max(0, statistic + l)`` and ``softplus(y) >= max(0, y)``,
so with the same threshold the e-detector pages no later, under the same guarantee (Lorden 1971
bounds the CUSUM's ARL0 by ``exp(h)`` through exactly this comparison; Siegmund 1985's
approximation shows that bound is loose by the overshoot). A confidence sequence (Howard et
al. 2021) on each gap would page when its lower bound crosses ``L``: valid, but it tests
``gap > L`` rather than ``g1`` against ``g0`` and needs a restart rule when the gap moves, so
it detects more slowly at ``1.5 L``. Bonferroni over series and windows (one-window level
``1 / A``) is the baseline the benchmark compares with.

Assumptions: windows are independent given the gap (tumbling windows; sliding windows share
rows, so only one evaluation in ``window / every`` may feed the state), the per-window
estimate is Gaussian with the standard error its interval implies (Wald-type: groups of a few
dozen rows and more; for the score distances, a rougher approximation), and the gap
stays at or below ``g0`` for the guarantee; between ``g0`` and ``g1`` either outcome is
acceptable.

References
----------
Page, E. S. (1954). Continuous inspection schemes. Biometrika 41, 100-115.
Lorden, G. (1971). Procedures for reacting to a change in distribution. Ann. Math. Statist.
42, 1897-1908.
Siegmund, D. (1985). Sequential Analysis: Tests and Confidence Intervals. Springer.
Shin, J., Ramdas, A. and Rinaldo, A. (2024). E-detectors: a nonparametric framework for
sequential change detection. New England J. Statist. Data Sci. 2, 229-260.
Howard, S. R., Ramdas, A., McAuliffe, J. and Sekhon, J. (2021). Time-uniform, nonparametric,
nonasymptotic confidence sequences. Ann. Statist. 49, 1055-1080.

Examples
--------
A DP difference threshold of 0.1, a model with 10 alerting series and hourly windows:

>>> budget = Budget()
>>> h = budget.page_level(windows_per_day=24, n_series=10)
>>> round(h, 2)  # log(1 + 10 * 24 * 90)
9.98

Windows whose gap is 0.15 with a standard error of 0.03 (groups of about 500 rows) page in
the second window; a fair window afterwards clears the page and restarts the evidence.

>>> state = Evidence()
>>> for value in (0.15, 0.15, 0.0):
...     state = accumulate(state, value=value, lower=value - 0.0588, upper=value + 0.0588,
...                        level=0.1, bound="upper", budget=budget, page_level=h)
...     print(round(state.statistic, 2), state.statistic >= h)
7.29 False
12.84 True
0.0 False
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

__all__ = ["CALIBRATIONS", "CAP_FACTOR", "FAMILIES", "SE_FLOOR_FRACTION", "Budget", "Evidence",
           "accumulate", "comparisons", "increment", "metric_comparisons", "overshoot_credit",
           "overshoot_factor",
           "standard_error"]

#: The standard error is at least this fraction of ``g1 - g0``: one window then adds at most
#: ``0.5 * 8**2 = 32`` to the statistic at ``g1``, and a zero-width interval is harmless.
SE_FLOOR_FRACTION = 1.0 / 8.0
#: With a page level, the statistic is capped at this multiple of it: evidence beyond that
#: only delays the all-clear after a breach ends.
CAP_FACTOR = 1.5
_NORMAL = NormalDist()
#: :attr:`Budget.calibration`'s choices: the renewal-theory level, or Ville's bound alone.
CALIBRATIONS = ("overshoot", "ville")
#: The overshoot credit applies where the fold changes the e-value by at most this factor:
#: Siegmund's ``nu`` is the Gaussian walk's, and a materially folded statistic (``c`` above
#: 1.05: ``r`` below about 1.6 with the default zone, groups so small that ``s`` is over
#: 60% of ``L``) overshoots less (simulated worst case with the full credit: 1.07 false
#: pages per budget of 1 at ``r = 0.7``, 1.03-1.10 at ``r = 1.4``; 0.71 and 0.47 without).
FOLD_CREDIT_LIMIT = 1.05
#: The credit is ``-log nu(r) - log(CREDIT_MARGIN)``: the renewal approximation is
#: asymptotic in ``A``, and the simulated worst case with the full credit ran up to 3% over
#: the budget even where the fold is negligible (``r = 2.3``); a 10% margin keeps it under,
#: at a cost of 0.1 in the level (a few hundredths of a window of delay).
CREDIT_MARGIN = 1.1
#: Below this standardized distance Siegmund's series converges slowly and its first-order
#: approximation ``exp(-0.583 r)`` is exact to 0.1%.
_SERIES_FROM = 0.5


@dataclass(frozen=True)
class Budget:
    r"""A model's false-page budget and its indifference zone.

    Parameters
    ----------
    false_pages : float, default=1.0
        Expected false pages of the whole model (all its alerting series) per ``days``.
    days : float, default=90.0
        The budget's period in days.
    null_fraction : float, default=0.5
        ``g0``, as a fraction of the threshold's level (of ``1 - level`` for a ratio): a gap
        at or below it is what the budget counts as fair.
    alternative_fraction : float, default=1.5
        ``g1``, the gap that must page quickly, as a fraction of the level.
    calibration : {'overshoot', 'ville'}, default='overshoot'
        How the page level turns into a decision. ``'ville'``: the statistic pages at
        ``log(1 + A)``, Ville's inequality, a bound that holds for any valid e-values but
        ignores how far the statistic jumps past the level (the overshoot) and so, with
        large groups, keeps a fair model's false pages several times under the budget.
        ``'overshoot'``: each window's statistic also carries the overshoot credit
        ``-log nu(r)`` (:func:`overshoot_factor`), so the expected false pages of Gaussian
        windows at ``g0`` equal the budget instead of staying below it (renewal theory;
        checked by simulation, see the module docstring).

    Examples
    --------
    >>> Budget(false_pages=1, days=90).page_level(windows_per_day=24, n_series=10) < \
    ...     Budget(false_pages=1, days=180).page_level(windows_per_day=24, n_series=10)
    True
    """

    false_pages: float = 1.0
    days: float = 90.0
    null_fraction: float = 0.5
    alternative_fraction: float = 1.5
    calibration: str = "overshoot"

    def __post_init__(self) -> None:
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"Budget.calibration: must be one of {CALIBRATIONS}; got "
                             f"{self.calibration!r}.")
        for key in ("false_pages", "days", "null_fraction", "alternative_fraction"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                    or v <= 0:
                raise ValueError(f"Budget.{key}: must be a positive number; got {v!r}.")
        if self.null_fraction >= self.alternative_fraction:
            raise ValueError(
                "Budget: null_fraction must be below alternative_fraction; got "
                f"{self.null_fraction} and {self.alternative_fraction}.")

    def page_level(self, *, windows_per_day: float, n_series: int) -> float:
        """Return the statistic's page level ``h = log(1 + n_series * windows / false_pages)``.

        ``windows`` is ``windows_per_day * days``: the e-detector pages at most
        ``windows / exp(h)`` times per series in expectation, so at most ``false_pages``
        times over the model's ``n_series`` series.
        """
        if not windows_per_day > 0 or not n_series >= 1:
            raise ValueError("page_level: windows_per_day must be > 0 and n_series >= 1; got "
                             f"{windows_per_day!r} and {n_series!r}.")
        return math.log1p(n_series * windows_per_day * self.days / self.false_pages)


@dataclass(frozen=True)
class Evidence:
    """One alerting series' sequential state.

    Parameters
    ----------
    statistic : float, default=0.0
        ``log(1 + R)`` of the Shiryaev-Roberts e-detector; the series pages at
        ``statistic >= page_level``.
    windows : int, default=0
        Defined windows accumulated since the state started or last restarted.
    credit : float, default=0.0
        The last window's overshoot credit ``-log nu(r)`` (0 with ``calibration='ville'``),
        included in ``statistic``: the recursion continues from ``statistic - credit``.

    Examples
    --------
    >>> Evidence.from_dict(Evidence(3.5, 4, 1.25).to_dict())
    Evidence(statistic=3.5, windows=4, credit=1.25)
    """

    statistic: float = 0.0
    windows: int = 0
    credit: float = 0.0

    @property
    def log_sr(self) -> float:
        """``log(1 + R)``: the Shiryaev-Roberts statistic without the credit."""
        return self.statistic - self.credit

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the checkpoint's)."""
        return {"statistic": float(self.statistic), "windows": int(self.windows),
                "credit": float(self.credit)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Evidence:
        """Inverse of :meth:`to_dict`; a missing key takes its default.

        A checkpoint written before the credit existed has none: its statistic is
        ``log(1 + R)``.
        """
        return cls(float(d.get("statistic", 0.0)), int(d.get("windows", 0)),
                   float(d.get("credit", 0.0)))


def _as_gap(value: float, lower: float, upper: float, level: float,
            bound: str) -> tuple[float, float, float, float]:
    """(estimate, lower, upper, level) on a scale where a higher gap is worse.

    An ``upper`` threshold's metric is a gap already. A ``lower`` one is a ratio with parity
    at 1: its gap is ``-log(ratio)`` (the scale its interval is built on), and the level's
    fractions are taken of ``1 - level``.
    """
    if bound == "upper":
        return value, lower, upper, level
    if bound != "lower":
        raise ValueError(f"bound: must be 'upper' or 'lower'; got {bound!r}.")
    if not 0.0 < level < 1.0:
        raise ValueError(f"a 'lower' budget threshold is a ratio level in (0, 1); got {level}.")

    def gap(r: float) -> float:
        return -math.log(max(r, 1e-12))

    return gap(value), gap(upper), gap(lower), 1.0 - level


def _zone(level: float, bound: str, budget: Budget) -> tuple[float, float]:
    """(g0, g1) on the gap scale of :func:`_as_gap`."""
    if bound == "upper":
        return budget.null_fraction * level, budget.alternative_fraction * level
    # a ratio: fractions of the distance 1 - level from parity, then the log scale
    g0 = -math.log1p(-min(budget.null_fraction * level, 1.0 - 1e-12))
    g1 = -math.log1p(-min(budget.alternative_fraction * level, 1.0 - 1e-12))
    return g0, g1


def comparisons(n_groups: int, families: int = 1) -> int:
    """Pairs of ``n_groups`` groups in each of ``families`` that a largest gap maximises over.

    Two families (TPR and FPR) for equalized odds, one for the other parity gaps; at least 1.

    >>> comparisons(2), comparisons(3), comparisons(3, families=2)
    (1, 3, 6)
    """
    return max(1, families * n_groups * (n_groups - 1) // 2)


#: Metrics whose gap is the largest over several families of rates (TPR and FPR).
FAMILIES = {"equalized_odds_difference": 2}


def metric_comparisons(metric: str, n_groups: int) -> int:
    """:func:`comparisons` of a registry metric's largest gap over ``n_groups`` groups.

    >>> metric_comparisons("equalized_odds_difference", 3), metric_comparisons("abcc", 2)
    (6, 1)
    """
    return comparisons(n_groups, FAMILIES.get(metric, 1))


def standard_error(*, value: float, lower: float, upper: float, confidence_level: float = 0.95,
                   n_comparisons: int = 1) -> float:
    """Return a window's standard error on the gap scale (before the floor).

    The wider half-width over ``z``. Not the half *away from parity* alone, although with one
    pair that side is built at exactly ``z`` while the parity side uses a joint critical value
    (2.24 for the two orders of one pair) and is clipped at 0: the away half is the Wilson
    error at the *observed* rates, smaller than the null's in the upper tail that pages
    (rates pulled apart move away from 0.5), and that breaks the e-value. Computed exactly
    over the binomial counts of two 100-row groups at rates 0.5 and 0.45 (a DP gap at
    ``g0``): ``E[exp(l)]`` is 1.31 with the away half, 0.99 with the wider half.
    ``n_comparisons`` is accepted for symmetry with :func:`increment` and not used.

    Examples
    --------
    >>> round(standard_error(value=0.15, lower=0.0, upper=0.2793), 4)  # 100-row groups
    0.0765
    """
    z = _NORMAL.inv_cdf(0.5 + confidence_level / 2.0)
    halves = [h for h in (value - lower, upper - value) if math.isfinite(h)]
    return max(halves, default=0.0) / z


@functools.lru_cache(maxsize=4096)
def overshoot_factor(r: float) -> float:
    """Siegmund's ``nu(r)``: the mean of ``exp(-overshoot)`` of a Gaussian LLR random walk.

    ``nu(r) = 2 / r**2 * exp(-2 * sum_k Phi(-r sqrt(k) / 2) / k)`` (Siegmund 1985,
    eq. 4.38) for increments ``N(r**2 / 2, r**2)``; ``exp(-0.583 r)`` below ``r = 0.5``,
    where the two agree to 0.1%. The Shiryaev-Roberts statistic that pages at ``R >= A``
    has ``ARL0 = A / nu(r) (1 + o(1))`` (Pollak 1987), so ``A nu(r)`` is the level whose
    ARL0 is ``A``.

    Examples
    --------
    >>> round(overshoot_factor(1.0), 3), round(overshoot_factor(3.2), 3)
    (0.56, 0.173)
    >>> overshoot_factor(0.0), round(overshoot_factor(1e-9), 6)
    (1.0, 1.0)
    """
    if not r > 0:
        return 1.0
    if r < _SERIES_FROM:
        return math.exp(-0.583 * r)
    terms = math.ceil((17.0 / r) ** 2)  # Phi(-8.5) ~ 1e-17 beyond
    total = sum(0.5 * math.erfc(r * math.sqrt(k) / (2.0 * math.sqrt(2.0))) / k
                for k in range(1, terms + 1))
    return min(1.0, 2.0 / (r * r) * math.exp(-2.0 * total))


def overshoot_credit(r: float, fold: float = 1.0) -> float:
    """Return the overshoot credit ``-log(nu(r) CREDIT_MARGIN)`` (:func:`overshoot_factor`).

    0 where the fold ``c`` exceeds :data:`FOLD_CREDIT_LIMIT`: the Gaussian walk's
    overshoot does not apply there.

    >>> round(overshoot_credit(3.2), 3), overshoot_credit(1.4, fold=1.09)
    (1.662, 0.0)
    """
    if fold > FOLD_CREDIT_LIMIT:
        return 0.0
    return max(0.0, -math.log(overshoot_factor(r) * CREDIT_MARGIN))


def _step(*, value: float, lower: float, upper: float, level: float, bound: str,
          budget: Budget, confidence_level: float, n_comparisons: int
          ) -> tuple[float, float, float]:
    """(log e-value, ``r = (g1 - g0) / s``, fold factor ``c``) of one window."""
    if not all(math.isfinite(v) for v in (value, lower, upper, level)):
        return math.nan, math.nan, math.nan
    x, lo, hi, gap_level = _as_gap(value, lower, upper, level, bound)
    g0, g1 = _zone(gap_level, bound, budget)
    d = g1 - g0
    se = standard_error(value=x, lower=lo, upper=hi, confidence_level=confidence_level,
                        n_comparisons=n_comparisons)
    s = max(se, SE_FLOOR_FRACTION * d)
    a = d / (s * s)
    llr = a * (x - (g0 + g1) / 2.0)
    fold = _NORMAL.cdf((g0 + d) / s) + math.exp(-2.0 * a * g0) * _NORMAL.cdf((d - g0) / s)
    return llr - math.log(max(1, n_comparisons) * fold), d / s, fold


def increment(*, value: float, lower: float, upper: float, level: float, bound: str,
              budget: Budget, confidence_level: float = 0.95, n_comparisons: int = 1) -> float:
    """One window's log e-value ``l - log(m c)`` (see the module docstring); NaN if undefined.

    ``n_comparisons`` is ``m``, the number of pair gaps the value is the largest of
    (:func:`comparisons`); the standard error is :func:`standard_error`'s.

    Examples
    --------
    A window exactly at the midpoint of ``g0 = 0.05`` and ``g1 = 0.15`` with a standard error
    of 0.03 carries no evidence apart from the fold correction (``c`` is 1 here):

    >>> abs(increment(value=0.1, lower=0.1 - 0.0588, upper=0.1 + 0.0588, level=0.1,
    ...                 bound="upper", budget=Budget())) < 1e-3
    True
    """
    return _step(value=value, lower=lower, upper=upper, level=level, bound=bound,
                 budget=budget, confidence_level=confidence_level,
                 n_comparisons=n_comparisons)[0]


def _softplus(y: float) -> float:
    return y + math.log1p(math.exp(-y)) if y > 0 else math.log1p(math.exp(y))


def accumulate(state: Evidence, *, value: float, lower: float, upper: float, level: float,
               bound: str, budget: Budget, confidence_level: float = 0.95,
               page_level: float | None = None, n_comparisons: int = 1) -> Evidence:
    """Return the series' state after one more window.

    Parameters
    ----------
    state : Evidence
        The state after the previous windows.
    value, lower, upper : float
        The window's metric value and its confidence interval at ``confidence_level``.
        Any of them NaN (an undefined window): the state is returned unchanged, neither
        advanced nor reset.
    level : float
        The threshold's level (warning or critical) this series pages on.
    bound : {'upper', 'lower'}
        The threshold's bound: ``"upper"`` a gap, higher is worse; ``"lower"`` a ratio.
    budget : Budget
        The model's budget (its indifference zone).
    confidence_level : float, default=0.95
        Level of ``lower``/``upper``.
    page_level : float or None
        The model's :meth:`Budget.page_level` (the monitor always passes it). Given, a state
        that was paging (``statistic >= page_level``) and falls below restarts at 0: the page
        cleared, and the next page needs fresh evidence (the guarantee counts pages over
        restart cycles); and the statistic is capped at ``CAP_FACTOR * page_level``, so a
        long breach clears within a few fair windows. Both only lower ``R``, which keeps
        ``R_t - t`` a supermartingale and the guarantee intact.
    n_comparisons : int, default=1
        How many pair gaps the value is the largest of (:func:`comparisons`: 1 for two
        groups, 3 for three, twice that for equalized odds). The monitor passes the window's
        count; 1 is right only for a single pair, and undercounting breaks the guarantee on
        small groups.

    Returns
    -------
    Evidence

    Examples
    --------
    >>> s = accumulate(Evidence(), value=float("nan"), lower=0.0, upper=0.1, level=0.1,
    ...                bound="upper", budget=Budget())
    >>> s
    Evidence(statistic=0.0, windows=0, credit=0.0)
    """
    step, r, fold = _step(value=value, lower=lower, upper=upper, level=level, bound=bound,
                          budget=budget, confidence_level=confidence_level,
                          n_comparisons=n_comparisons)
    if math.isnan(step):
        return state
    log_sr = _softplus(state.log_sr + step)
    if page_level is not None:
        log_sr = min(log_sr, CAP_FACTOR * page_level)
    credit = overshoot_credit(r, fold) if budget.calibration == "overshoot" else 0.0
    if page_level is not None and state.statistic >= page_level > log_sr + credit:
        return Evidence()
    return Evidence(log_sr + credit, state.windows + 1, credit)
