"""Score-type confidence intervals of between-group rate gaps and ratios, from counts.

Why score-type: a Wald interval (estimate +- z SE) is centred on the raw rate, so with 0 of 5
positives it is centred on 0 with a near-zero SE; it can leave [0, 1], and it can miss its own
point value once clipped. Wilson's score interval of one rate (Wilson 1927) stays inside
[0, 1], is never of zero width and contains the estimate; Newcombe (1998, method 10: the
"hybrid score" interval) combines two Wilson intervals into one for a difference of two
proportions, and the MOVER-R of Donner & Zou (2012) into one for a ratio. Both have close to
nominal coverage down to a handful of trials, where the Wald interval has 70-90%.

The metrics are a largest gap ``max_{i,j} (p_i - p_j)`` over ordered pairs of groups (and, for
equalized odds, over the TPR and FPR families) or a smallest ratio ``min_{i,j} p_i / p_j``.
Each ordered pair gets its Newcombe (or MOVER-R) interval and the metric's bounds are the
largest (smallest) of the pairs' bounds. Of the two sides:

- the bound *away from parity* (the upper bound of a gap, the lower bound of a ratio) needs no
  multiplicity correction: the true extreme is one pair's, and that pair's one-sided bound
  holds at ``1 - (1 - level) / 2``;
- the bound *towards parity* (the lower bound of a gap, the upper bound of a ratio) is the
  extreme over every pair that may be the extreme, so it uses a critical value ``c`` that
  keeps the family of those pairs at ``1 - (1 - level) / 2`` jointly: the quantile of the
  largest standardized error over the pairs in contention (those whose Bonferroni-level
  interval reaches the extreme's), from Gaussian draws of the per-group errors (closed form
  for one pair: ``z_{1 - a/2}``; for the two orders of one pair: ``z_{1 - a/4}``). Where that
  bound excludes parity and the extreme is settled, its value uses the same quantile with each
  pair shifted by its distance below the extreme less that distance's one-sided margin of
  error (:func:`_apart`): a pair surely below the extreme no longer counts in full, one that
  may tie with it still does. Which windows exclude parity is unchanged.

So at parity (every pair in contention, both orders) the lower bound of a gap excludes 0 in at
most ``(1 - level) / 2`` of windows (2.5% at 95%): ``compare: bound`` is then a one-sided test at
97.5%, as it is away from parity. For two groups whose gap is settled (Newcombe's interval
at ``z_{1 - a/4}``, 2.24 instead of 1.96 at 95%, excludes 0) the lower bound is Newcombe's;
otherwise it is 0.

Two groups' bound away from parity inverts the test of the folded statistic (issue 25 item 6).
Folding the signed interval, ``|d| + 1.96 SE`` cannot fall below a true gap under 1.96 SE, so
near parity it never missed and coverage was 97.5% or more. For ``X ~ N(theta, 1)`` the upper
end of the interval of ``|theta|`` from ``P_t(|X| <= |x|) = a/2``, both tails of ``X`` counted,
is ``|x| + z_far(|x|)`` (:func:`folded_far`, ``z_far <= z_{1-a/2}``) and misses ``|theta|`` in
exactly ``a/2`` of draws at every ``theta != 0``. Carried to the score scale: ``|x|`` is the
critical value at which the pair's Newcombe lower bound of ``|p1 - p2|`` reaches 0 (at the gap
plus the continuity correction ``0.5 / n`` of the smaller group), and the bound is Newcombe's
(MOVER-R's) at ``z_far``, at least :data:`FOLDED_FLOOR`. Two SEs from parity ``z_far`` is
1.96: the interval is then Newcombe's. Every interval holds its point value and stays within
the metric's range.

Weighted rates (``sample_weight``): pass Kish's effective number of trials per group,
``(sum w)^2 / sum w^2``, as ``effective_trials``; the Wilson intervals then use that ``n`` and
the weighted share as the rate (an approximation that ignores the weights' correlation with the
outcome; exact for equal weights).

Pure numpy (layer 1) around compiled kernels (:mod:`fairmonitor._kernels.intervals`, Cython,
imported when first needed): Wilson's bounds, the pairs' Newcombe and MOVER-R bounds, the
joint critical value's draws and the chance level's extremes.
"""

from __future__ import annotations

import collections
import functools
import math
import threading
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._intervals import (
    _SEED,
    MAX_RATE_GROUPS,
    N_DRAWS,
    Interval,
    _by_column,
    _kernels,
    _quantile,
    _rng,
    _undefined,
    _z,
)

__all__ = ["folded_far", "mover_ratio", "newcombe_difference", "rate_gap_interval",
           "wilson_interval"]

#: Pairs in contention beyond which the critical value is Bonferroni's (conservative) instead
#: of the simulated maximum: bounds the draws' cost at many tied groups.
MAX_SIMULATED_PAIRS = 512
#: Up to this many ordered pairs a gap's bounds are computed over every pair at once: the
#: few-pairs search (:func:`_gap_in_contention`, the same result) pays its set-up only where
#: it saves pair arithmetic (at 2-10 groups it cost 0.4-0.7 ms a call more than every pair).
EVERY_PAIR_MAX = 1024
_F = NDArray[np.float64]


def wilson_interval(successes: ArrayLike, trials: ArrayLike, z: float | ArrayLike
                    ) -> tuple[_F, _F]:
    """Return Wilson's score interval of ``successes / trials`` at normal quantile ``z``.

    Vectorised, with Brown, Cai & DasGupta's (2001, 4.1.1) fix for rare counts.

    Wilson's bound is too close to 0 at a few successes near a rate of 0 (and to 1 at a few
    failures): its one-sided coverage there drops to ~90%, and a group of 20 rows with 2
    positives excluded parity with a large group at 0.02 in 4% of fair windows. There (1-2
    successes, up to 10 at a rate up to 0.1) the bound is Clopper-Pearson's exact one where
    it is further out.

    Examples
    --------
    >>> lo, hi = wilson_interval(0, 5, 1.959964)
    >>> float(lo), round(float(hi), 4)
    (0.0, 0.4345)
    """
    x, n = np.asarray(successes, dtype=float), np.asarray(trials, dtype=float)
    if np.ndim(z) == 0 and x.ndim and x.shape == n.shape:
        # compiled, the same arithmetic element by element; the numpy path for rare counts
        lo, hi, rare = _kernels().wilson_bounds(x, n, float(z))
        if not rare:
            return lo, hi
    z = np.asarray(z, dtype=float)
    z2 = z ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        p = x / n
        centre = (x + z2 / 2.0) / (n + z2)
        half = z * np.sqrt(x * (n - x) / n + z2 / 4.0) / (n + z2)
    # the exact endpoints at 0 and n (the formula gives them up to rounding), and p inside
    lo = np.where(x <= 0, 0.0, np.minimum(centre - half, p))
    hi = np.where(x >= n, 1.0, np.maximum(centre + half, p))
    lo = np.minimum(lo, _rare_bound(x, n, z))
    hi = np.maximum(hi, 1.0 - _rare_bound(n - x, n, z))
    return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)


def _rare(x: Any, n: Any) -> Any:
    """Whether ``x`` successes of ``n`` are rare enough for the exact bound (arrays or floats).

    1-2 successes (3 above 50 trials), or up to 10 at a rate up to 0.1: the counts where
    Wilson's bound falls short (:func:`_rare_bound`).
    """
    return (x >= 1) & (((x <= 10) & (x <= 0.1 * n)) | (x <= 2) | ((x <= 3) & (n > 50)))


def _rare_bound(x: _F, n: _F, z: _F) -> _F:
    """Return Clopper-Pearson's lower bound where Wilson's falls short; 1 elsewhere.

    1 has no effect on a minimum. Brown, Cai & DasGupta (2001, 4.1.1) replace Wilson's bound at 1-2
    successes (3 above 50 trials); its one-sided coverage stays low a little further near 0 (4 of
    50 successes at a true 0.02: 1.8% of windows beyond a 1.25% bound), so rare counts, up to 10
    successes and a rate of 0.1, take the exact binomial bound when it is further out.
    """
    small = _rare(x, n)
    if not np.any(small):
        return np.ones(np.broadcast(x, n, z).shape)
    # the beta quantile and normal tail as scipy.stats' beta.ppf and norm.sf compute them
    # (the same Boost and Cephes functions, the same bits), without their ~0.15 ms a call
    from scipy.special import betaincinv, ndtr  # lazily: only small counts need it

    with np.errstate(invalid="ignore", divide="ignore"):
        bound = betaincinv(np.maximum(x, 1.0), np.maximum(n - x + 1.0, 1.0), ndtr(-z))
    return np.where(small, bound, 1.0)


def newcombe_difference(x1: ArrayLike, n1: ArrayLike, x2: ArrayLike, n2: ArrayLike, *,
                        z_lower: float | ArrayLike, z_upper: float | ArrayLike
                        ) -> tuple[_F, _F]:
    """Newcombe's hybrid score interval (1998, method 10) of ``p1 - p2``.

    The lower bound at quantile ``z_lower``, the upper at ``z_upper`` (equal for Newcombe's
    two-sided interval): ``d - hypot(p1 - l1, u2 - p2)`` and ``d + hypot(u1 - p1, p2 - l2)``
    from the two rates' Wilson bounds (compiled:
    :func:`fairmonitor._kernels.intervals.pair_score_bounds`).

    Examples
    --------
    >>> lo, hi = newcombe_difference(5, 7, 0, 5, z_lower=1.959964, z_upper=1.959964)
    >>> round(float(lo), 3), round(float(hi), 3)
    (0.153, 0.963)
    """
    return _two_rates(x1, n1, x2, n2, z_lower, z_upper, ratio=False)


def mover_ratio(x1: ArrayLike, n1: ArrayLike, x2: ArrayLike, n2: ArrayLike, *,
                z_lower: float | ArrayLike, z_upper: float | ArrayLike) -> tuple[_F, _F]:
    """MOVER-R interval (Donner & Zou 2012) of ``p1 / p2`` from Wilson intervals.

    ``rho`` is inside iff the MOVER interval of ``p1 - rho p2`` holds 0; the bounds are the
    roots of that quadratic, written so that they stay finite when ``p1`` is 0 (lower 0) and
    when a Wilson bound reaches twice its rate; with ``p2 = 0`` the upper bound is infinite.

    Examples
    --------
    >>> lo, hi = mover_ratio(0, 40, 12, 40, z_lower=1.959964, z_upper=1.959964)
    >>> float(lo), round(float(hi), 3)
    (0.0, 0.318)
    """
    return _two_rates(x1, n1, x2, n2, z_lower, z_upper, ratio=True)


def _two_rates(x1: ArrayLike, n1: ArrayLike, x2: ArrayLike, n2: ArrayLike,
               z_lower: float | ArrayLike, z_upper: float | ArrayLike, *, ratio: bool
               ) -> tuple[_F, _F]:
    """Newcombe's (MOVER-R's) bounds of rates broadcast together, in their shape.

    The first rates are groups ``0..m-1`` of one family and the second ``m..2m-1``, so the
    pair kernel reads them as pairs ``(k, m + k)``.
    """
    shape = np.broadcast_shapes(*(np.shape(a) for a in (x1, n1, x2, n2, z_lower, z_upper)))
    rates = [np.broadcast_to(np.asarray(a, dtype=float), shape).ravel()
             for a in (x1, n1, x2, n2, z_lower, z_upper)]
    x, n = np.concatenate(rates[0:3:2]), np.concatenate(rates[1:4:2])
    z_lo, z_up = np.concatenate([rates[4]] * 2), np.concatenate([rates[5]] * 2)
    lo_l, lo_u = wilson_interval(x, n, z_lo)
    up_l, up_u = wilson_interval(x, n, z_up)
    m = rates[0].size
    lower, upper = _kernels().pair_score_bounds(x / n, lo_l, lo_u, up_l, up_u,
                                                np.zeros(m, np.intp), np.arange(m),
                                                m + np.arange(m), ratio)
    return lower.reshape(shape), upper.reshape(shape)


def _ordered_pairs(defined: NDArray[np.bool_], rates: _F, ratio: bool
                   ) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """Return (family, i, j) of every ordered pair of defined groups.

    For a ratio ``p_i / p_j``, not both 0 (``p_i / 0`` is infinite, never the smallest ratio, but
    it is the mirror of ``0 / p_i``: at parity the two orders share the tail).
    """
    # the pairs depend on which groups are defined (and, for a ratio, which rates are > 0):
    # the same for a window's metrics and attributes of one shape, so formed once
    positive = np.asarray(rates > 0) if ratio else np.zeros(0, dtype=bool)
    return _pairs_of(defined.shape, defined.tobytes(), positive.tobytes(), ratio)


@functools.lru_cache(maxsize=256)
def _pairs_of(shape: tuple[int, ...], defined_bytes: bytes, positive_bytes: bytes, ratio: bool
              ) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """:func:`_ordered_pairs` from the masks' bytes (read-only arrays)."""
    defined = np.frombuffer(defined_bytes, dtype=bool).reshape(shape)
    positive = np.frombuffer(positive_bytes, dtype=bool).reshape(shape) if ratio else None
    fam, left, right = [], [], []
    for f, row in enumerate(defined):
        keep = np.flatnonzero(row)
        a, b = np.meshgrid(keep, keep, indexing="ij")
        off = a != b
        a, b = a[off], b[off]
        if positive is not None:
            some = positive[f, a] | positive[f, b]
            a, b = a[some], b[some]
        fam.append(np.full(a.size, f))
        left.append(a)
        right.append(b)
    found = np.concatenate(fam), np.concatenate(left), np.concatenate(right)
    for index in found:
        index.flags.writeable = False
    return found


@functools.lru_cache(maxsize=32)
def _fixed_normal(n_draws: int, size: int) -> _F:
    """Return the fixed seed's standard normal draws, made once (read-only)."""
    draws = _rng(None).standard_normal((n_draws, size))
    draws.flags.writeable = False
    return draws


def _normal(rng: Any, n_draws: int, size: int) -> _F:
    """Return (n_draws, size) standard normal draws.

    The fixed seed's are the same every call, so they are drawn once (the default, ``rng=None``,
    costs no draws after the first).
    """
    return _fixed_normal(n_draws, size) if rng is None else _rng(rng).standard_normal(
        (n_draws, size))


def _mirrored(fam: NDArray[np.intp], i: NDArray[np.intp], j: NDArray[np.intp]) -> bool:
    """Whether some pair's mirror (the same groups in the other order) is among the pairs."""
    size = int(max(i.max(), j.max())) + 1
    forward = ((fam * size + i) * size + j).tolist()
    return not set(forward).isdisjoint(((fam * size + j) * size + i).tolist())


def _critical(sd: _F, fam: NDArray[np.intp], i: NDArray[np.intp], j: NDArray[np.intp],
              shift: _F, settled: bool, tail: float, n_draws: int, rng: Any,
              apart: _F | None = None) -> tuple[float, float, float]:
    """(towards parity, away from it, towards it once settled): the pairs' joint critical values.

    With independent Gaussian group errors ``e ~ N(0, sd^2)`` and ``T = (e_i - e_j) / se``:
    towards parity the ``1 - tail`` quantile of ``max T`` (every pair may be the extreme);
    away from it ``-`` the ``tail`` quantile of ``max (T - shift)``, ``shift`` being each
    pair's distance below the extreme in SEs (plug-in): where several pairs tie for the
    extreme (one group apart from k - 1 alike), the estimate is biased away from parity by
    their maximum and a single pair's ``z_{1 - tail}`` would over-cover. Never above
    ``z_{1 - tail}`` (one pair's bound, valid whatever the ties), and kept at it unless the
    extreme is ``settled`` (its Bonferroni-level bound excludes parity): near parity the
    sign is in doubt and the bound must be the folded one's. The third, towards parity once
    the extreme is settled: the ``1 - tail`` quantile of ``max (T - apart)``, ``apart`` being
    each pair's shift less its one-sided ``1 - tail`` margin of error (a pair surely below the
    extreme no longer counts in full; pairs that may tie with it still do), never above the
    first (the first where ``apart`` is None).
    """
    normal = NormalDist()
    z = normal.inv_cdf(1.0 - tail)
    if fam.size == 1:
        return z, z, z
    if fam.size == 2 and _mirrored(fam, i, j):  # the two orders of one pair: |T|
        # (settled: one order)
        return normal.inv_cdf(1.0 - tail / 2.0), z, z
    if fam.size > MAX_SIMULATED_PAIRS:  # Bonferroni: conservative
        bonferroni = normal.inv_cdf(1.0 - tail / fam.size)
        return bonferroni, z, bonferroni
    cells, where = _cells(np.concatenate([fam * sd.shape[1] + i, fam * sd.shape[1] + j]),
                          sd.size)
    se = np.hypot(sd[fam, i], sd[fam, j])
    top, top_shifted, top_apart = _maxima(rng, n_draws, sd.ravel()[cells], where[:fam.size],
                                          where[fam.size:], se, shift,
                                          apart if settled else None)
    near = _quantile(top, 1.0 - tail)
    if not settled:
        return near, z, near
    far = -_quantile(top_shifted, tail)
    if apart is None:
        return near, min(max(far, 0.0), z), near
    return near, min(max(far, 0.0), z), min(_quantile(top_apart, 1.0 - tail), near)


def _cells(keys: NDArray[np.intp], size: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """``np.unique(keys, return_inverse=True)`` of indices below ``size`` (the same arrays).

    A mask over the few cells and its running count instead of a sort.
    """
    seen = np.zeros(size, dtype=bool)
    seen[keys] = True
    return np.flatnonzero(seen), (np.cumsum(seen) - 1)[keys]


@functools.lru_cache(maxsize=32)
def _fixed_normal_cols(n_draws: int, size: int) -> _F:
    """:func:`_fixed_normal`'s draws by cell, (size, n_draws), made once (read-only)."""
    cols = np.ascontiguousarray(_fixed_normal(n_draws, size).T)
    cols.flags.writeable = False
    return cols


def _maxima(rng: Any, n_draws: int, scale: _F, left: NDArray[np.intp], right: NDArray[np.intp],
            se: _F, shift: _F, apart: _F | None) -> tuple[_F, _F, _F | None]:
    """:func:`~fairmonitor._kernels.intervals.pair_maxima` at ``shift`` and, if given, ``apart``.

    With the fixed seed and finite inputs (every window's case) one pass for both shifts over
    the draws already by cell (the same ``T``, so the same maxima as two calls); otherwise two
    calls, each drawing as :func:`_normal` does (a Generator's second call draws afresh).
    """
    kernels = _kernels()  # pair_maxima*: draws x pairs, one pass
    with np.errstate(divide="ignore"):  # se 0: an infinite T, as pair_maxima's quotient
        inv_se = 1.0 / se
    finite = np.isfinite(scale).all() and np.isfinite(inv_se).all() and \
        np.isfinite(shift).all() and (apart is None or np.isfinite(apart).all())
    if rng is None and finite:  # the fixed draws are finite: pair_maxima's column pass
        found = kernels.pair_maxima_cols(_fixed_normal_cols(n_draws, scale.size), scale, left,
                                         right, inv_se, shift, apart)
        return found if apart is not None else (*found, None)
    top, top_shifted = kernels.pair_maxima(_normal(rng, n_draws, scale.size), scale, left, right,
                                           se, shift)
    if apart is None:
        return top, top_shifted, None
    return top, top_shifted, kernels.pair_maxima(_normal(rng, n_draws, scale.size), scale, left,
                                                 right, se, apart)[1]


def _gaussian(size: NDArray[np.int64], rate: float) -> bool:
    """Whether every group expects >= 30 of each outcome: its binomial rate is Gaussian enough."""
    return bool(min(rate, 1.0 - rate) * size.min() >= 30)


def _null_extremes(gen: np.random.Generator, size: NDArray[np.int64], rate: float,
                   n_draws: int) -> tuple[_F, _F]:
    """Return the (largest, smallest) of each draw's binomial(size, rate) rates of the groups.

    Gaussian (clipped) where every group expects >= 30 of each outcome (binomial draws cost ~10x
    more; same result there).
    """
    if _gaussian(size, rate):
        return _gaussian_extremes(gen.standard_normal((n_draws, size.size)).T, size, rate)
    rates = gen.binomial(size, rate, size=(n_draws, size.size)) / np.maximum(size, 1)
    columns = _by_column(rates)
    return columns.max(axis=0), columns.min(axis=0)


def _gaussian_extremes(normals: _F, size: NDArray[np.int64], rate: float) -> tuple[_F, _F]:
    """Return the extremes of each draw's ``rate + z sd``, clipped to [0, 1] (compiled).

    The binomial rate's Gaussian form; ``normals`` (groups, draws) are read, not written (the
    fixed ones are shared). Every input is finite, as the kernel needs: each group has at least
    30 trials (:func:`_gaussian`), so its ``sd`` is.
    """
    return _kernels().rate_extremes(normals, np.sqrt(rate * (1.0 - rate) / size), rate)


#: Up to this many groups a Gaussian family's fixed chance normals are kept (2,000 draws of
#: 64 groups: 1 MB an entry); a larger family draws its own from the seed's stream.
_FIXED_CHANCE_GROUPS = 64


@functools.lru_cache(maxsize=16)
def _fixed_chance_normal(n_draws: int, size: int, position: int) -> _F:
    """Return the fixed standard normals of a call's ``position``-th family, made once.

    Shape (size, n_draws): each group's draws contiguous, as the extremes' kernel reads them.

    Common random numbers: every window's chance level of a family of ``size`` groups reads
    the same normals, so it moves with the group sizes and pooled rate alone (no Monte Carlo
    jitter between windows), and costs a multiply instead of 2,000 x ``size`` fresh draws
    (~0.1-0.25 ms a family). Each position in a call (equalized odds: TPR, then FPR) has its
    own, independent of the others and of the critical values' (:func:`_fixed_normal`).
    """
    draws = np.random.default_rng([_SEED, position, size]).standard_normal((n_draws, size))
    cols = np.ascontiguousarray(draws.T)
    cols.flags.writeable = False
    return cols


#: The fixed seed's chance draws, per sequence of families (group sizes, pooled rate, draws):
#: a window's DP difference and ratio read the same counts, equal opportunity reads the TPR
#: family equalized odds drew first, so each is drawn once. Bounded (a window has a handful).
_CHANCE_DRAWS: collections.OrderedDict[Any, tuple[_F, _F, Any]] = collections.OrderedDict()
_CHANCE_CACHE_SIZE = 64
_CHANCE_LOCK = threading.Lock()


class _LazyGenerator:
    """The chance draws' generator, made (and moved to ``state``) only when a draw needs it.

    A window's later metrics find their draws in :data:`_CHANCE_DRAWS`: they only carry the
    state a hit leaves, so making the fixed seed's generator (~12 us) is left to a miss.
    """

    def __init__(self, rng: Any) -> None:
        self.rng, self.state, self._generator = rng, None, None

    def current_state(self) -> Any:
        """Return the seed's stream state where the draws so far left it (None: no draw yet)."""
        if self.state is not None or self._generator is None:
            return self.state
        return self._generator.bit_generator.state

    @property
    def generator(self) -> np.random.Generator:
        if self._generator is None:
            self._generator = _rng(self.rng)
        if self.state is not None:  # where the cached draws left the seed's stream
            self._generator.bit_generator.state = self.state
            self.state = None
        return self._generator


def _extremes(gen: _LazyGenerator, key: Any, size: NDArray[np.int64], rate: float,
              n_draws: int, fixed: bool, position: int) -> tuple[_F, _F]:
    """Return the (largest, smallest) group rate per chance draw.

    With the fixed seed (``fixed``), the
    draws of the families ``key`` names (this one and those drawn before it from ``gen``)
    are made once: a hit leaves ``gen`` where the draws would have left it. There a
    Gaussian family of at most :data:`_FIXED_CHANCE_GROUPS` groups reads the fixed normals of
    its ``position`` in the call (:func:`_fixed_chance_normal`) and draws nothing from ``gen``.
    """
    with _CHANCE_LOCK:
        found = _CHANCE_DRAWS.get(key) if fixed else None
    if found is not None:
        gen.state = found[2]
        return found[0], found[1]
    if fixed and size.size <= _FIXED_CHANCE_GROUPS and _gaussian(size, rate):
        hi, lo = _gaussian_extremes(_fixed_chance_normal(n_draws, size.size, position), size,
                                    rate)
    else:
        hi, lo = _null_extremes(gen.generator, size, rate, n_draws)
    if fixed:
        hi.flags.writeable = lo.flags.writeable = False
        with _CHANCE_LOCK:
            _CHANCE_DRAWS[key] = (hi, lo, gen.current_state())
            while len(_CHANCE_DRAWS) > _CHANCE_CACHE_SIZE:
                _CHANCE_DRAWS.popitem(last=False)
    return hi, lo


def _chance(x: _F, n: _F, defined: NDArray[np.bool_], ratio: bool, n_draws: int,
            rng: Any) -> float:
    """Return the mean of the metric when every group of a family shares its pooled rate.

    Binomial draws at these group sizes (the small-sample floor a fair model reads): their
    Gaussian form where every group expects >= 30 of each outcome, from fixed normals with
    the fixed seed (:func:`_extremes`).
    """
    gen, worst, key = _LazyGenerator(rng), np.full(n_draws, -np.inf), (n_draws,)
    for position, f in enumerate(np.flatnonzero(defined.any(axis=1)), start=1):
        size = np.rint(n[f, defined[f]]).astype(np.int64)
        pooled = x[f, defined[f]].sum() / n[f, defined[f]].sum()
        key += (size.tobytes(), float(pooled))
        hi, lo = _extremes(gen, key, size, pooled, n_draws, rng is None, position)
        if ratio:  # 0/0 (no group selected) reads as parity, as a fair model would
            return float(np.where(hi > 0, lo / np.where(hi > 0, hi, 1.0), 1.0).mean())
        worst = np.maximum(worst, hi - lo)
    return float(worst.mean())


def rate_gap_interval(
    successes: ArrayLike,
    trials: ArrayLike,
    *,
    ratio: bool = False,
    level: float = 0.95,
    effective_trials: ArrayLike | None = None,
    n_draws: int = N_DRAWS,
    rng: Any = None,
    chance: bool = True,
) -> Interval:
    """Score-type interval and chance level of the largest between-group gap in a rate.

    The gap is ``max_f (max_k p_fk - min_k p_fk)`` over families ``f`` of rates (one family
    for demographic parity, equal opportunity or predictive parity; TPR and FPR for equalized
    odds), or with ``ratio=True`` the smallest ``min_k p_k / max_k p_k``. Newcombe's hybrid
    score interval per ordered pair (MOVER-R for a ratio), combined as the module docstring
    says: always inside [0, 1], always containing the point value; for two groups with a
    settled gap Newcombe's interval (nearer parity, the folded test's upper bound).

    Parameters
    ----------
    successes, trials : array-like of shape (K,) or (F, K)
        Per group (and family): successes and the rows the rate conditions on. A group with
        0 trials has an undefined rate and is left out of its family, as the metric does.
    ratio : bool, default=False
        Interval of the min/max ratio instead of the max-min difference.
    level : float, default=0.95
        Two-sided confidence level; each bound is one-sided at ``1 - (1 - level) / 2``.
    effective_trials : array-like like ``trials``, optional
        Weighted data: Kish's effective trials ``(sum w)^2 / sum w^2`` per group, with
        ``successes`` and ``trials`` the weighted sums (see the module docstring).
    n_draws : int, default=2000
        Gaussian draws behind the joint critical value of several pairs in contention (and
        binomial draws behind the chance level).
    rng : numpy.random.Generator, int or None
        None uses a fixed seed (stable bounds from one evaluation to the next).
    chance : bool, default=True
        False skips the chance level (NaN): the bounds alone, e.g. for coverage studies.

    Returns
    -------
    interval : Interval

    Examples
    --------
    Equal opportunity from 5 of 7 positives found in one group and 0 of 5 in the other:

    >>> r = rate_gap_interval([5, 0], [7, 5])
    >>> round(r.lower, 3), round(r.upper, 3)
    (0.153, 0.963)

    A demographic parity ratio of 0 lies inside its interval:

    >>> r = rate_gap_interval([0, 12], [40, 40], ratio=True)
    >>> r.lower, round(r.upper, 3)
    (0.0, 0.318)
    """
    method = "mover-r-wilson" if ratio else "newcombe-wilson"
    x = np.atleast_2d(np.asarray(successes, dtype=float))
    n = np.atleast_2d(np.asarray(trials, dtype=float))
    _z(level)  # validates `level`
    tail = (1.0 - level) / 2.0
    defined = n > 0
    defined &= (defined.sum(axis=1) >= 2)[:, None]
    if not defined.any():
        return _undefined(method, "fewer than two groups with a defined rate")
    if defined.sum(axis=1).max() > MAX_RATE_GROUPS:
        return _undefined(method, f"{int(defined.sum(axis=1).max())} groups: intervals are "
                          f"computed for at most {MAX_RATE_GROUPS} (raise min_group_size)")
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(defined, x / np.where(defined, n, 1.0), np.nan)
    if ratio and not (np.nanmax(p, axis=1)[defined.any(axis=1)] > 0).all():
        return _undefined(method, "every group's rate is 0, so the ratio is 0/0")
    if effective_trials is not None:  # Kish: the weighted share over the effective trials
        n = np.atleast_2d(np.asarray(effective_trials, dtype=float))
        x = np.where(defined, p, 0.0) * n
    k = defined.sum(axis=1)
    few = ratio or int((k * (k - 1)).sum()) <= EVERY_PAIR_MAX
    found = None if few else _gap_in_contention(x, n, defined, tail, n_draws, rng)
    if found is None:  # every ordered pair
        fam, i, j = _ordered_pairs(defined, p, ratio)
        found = _bounds(x, n, fam, i, j, ratio, tail, n_draws, rng)
    value, lo, hi = found
    level_of_chance = _chance(x, n, defined, ratio, n_draws, rng) if chance else float("nan")
    return Interval(lo, hi, level_of_chance, method)


def _pair_bounds(x: _F, n: _F, fam: NDArray[np.intp], i: NDArray[np.intp],
                 j: NDArray[np.intp], ratio: bool, z_lower: float, z_upper: float
                 ) -> tuple[_F, _F]:
    """Return each ordered pair's Newcombe (MOVER-R) interval of ``p_i - p_j`` (``p_i / p_j``).

    The Wilson bounds once per group, then one kernel pass over the pairs.
    """
    lo_l, lo_u = wilson_interval(x, n, z_lower)
    up_l, up_u = wilson_interval(x, n, z_upper) if z_upper != z_lower else (lo_l, lo_u)
    return _kernels().pair_score_bounds(x / np.where(n > 0, n, 1.0), lo_l, lo_u, up_l, up_u, fam,
                                        i, j, ratio)


def _bounds(x: _F, n: _F, fam: NDArray[np.intp], i: NDArray[np.intp], j: NDArray[np.intp],
            ratio: bool, tail: float, n_draws: int, rng: Any) -> tuple[float, float, float]:
    """(value, lower, upper) of the metric over the ordered pairs ``(fam, i, j)``."""
    with np.errstate(divide="ignore"):
        est = x[fam, i] / n[fam, i] / (x[fam, j] / n[fam, j]) if ratio else \
            x[fam, i] / n[fam, i] - x[fam, j] / n[fam, j]
    best = int(np.argmin(est) if ratio else np.argmax(est))
    # the pairs in contention, those that may make the extreme: at Bonferroni's level over
    # every pair (no joint critical value is larger), a pair whose bound towards parity
    # reaches past every pair's bound away from it. At parity a pair's mirror (the same
    # groups in the other order) is then in contention wherever the pair could exclude
    # parity, so the two orders share the tail as they must
    z_all = NormalDist().inv_cdf(1.0 - tail / fam.size)
    lower, upper = _pair_bounds(x, n, fam, i, j, ratio, z_all, z_all)
    near = lower <= upper.min() if ratio else upper >= lower.max()
    near[best] = True
    extreme = float(upper.min() if ratio else lower.max())
    # two groups: away from parity, the folded statistic's test (both tails counted)
    far = _folded_pair(x, n, int(fam[0]), int(i[0]), int(j[0]), tail) \
        if fam.size == 2 and _mirrored(fam, i, j) else None
    return _contention(x, n, fam[near], i[near], j[near], ratio, extreme, float(est[best]),
                       tail, n_draws, rng, far)


def _contention(x: _F, n: _F, f: NDArray[np.intp], a: NDArray[np.intp], b: NDArray[np.intp],
                ratio: bool, extreme: float, value: float, tail: float, n_draws: int, rng: Any,
                far: float | None = None) -> tuple[float, float, float]:
    """(value, lower, upper) from the pairs in contention ``(f, a, b)``.

    ``extreme`` is the extreme over every pair of the bound towards parity at Bonferroni's
    level (the largest lower bound of a gap, the smallest upper bound of a ratio); ``far``,
    two groups' critical value away from parity (:func:`_folded_pair`).
    """
    # Agresti-Caffo standard errors weigh the pairs' joint critical values (never 0); a
    # group left out (0 trials, its successes possibly kept by the caller) is in no pair
    q = (np.where(n > 0, x, 0.0) + 1.0) / (n + 2.0)
    if ratio:
        sd, theta = np.sqrt((1.0 - q) / ((n + 2.0) * q)), np.log(q)
        gap = theta[f, b] - theta[f, a]  # -log(p_a / p_b): larger is further from parity
    else:
        sd, gap = np.sqrt(q * (1.0 - q) / (n + 2.0)), x[f, a] / n[f, a] - x[f, b] / n[f, b]
    shift = (gap.max() - gap) / np.hypot(sd[f, a], sd[f, b])
    settled = extreme < 1.0 if ratio else extreme > 0.0
    # only the simulated critical value reads `apart` (one pair, one pair's two orders and
    # Bonferroni's do not)
    draws = f.size > 2 or (f.size == 2 and not _mirrored(f, a, b))
    apart = _apart(sd, f, a, b, gap, shift, tail) \
        if settled and draws and f.size <= MAX_SIMULATED_PAIRS else None
    c_near, c_far, c_settled = _critical(sd, f, a, b, shift, settled, tail, n_draws, rng,
                                         apart)
    if far is not None:
        c_far = min(c_far, far)
    lower, upper = _combine(x, n, f, a, b, ratio, c_near, c_far, value)
    if c_settled < c_near and (upper < 1.0 if ratio else lower > 0.0):
        # parity is excluded at the joint critical value (so, at parity, in at most `tail` of
        # windows, as before); how far the bound is from parity is then the extreme's business
        lower, upper = _combine(x, n, f, a, b, ratio, c_settled, c_far, value)
    return value, lower, upper


def _apart(sd: _F, f: NDArray[np.intp], a: NDArray[np.intp], b: NDArray[np.intp], gap: _F,
           shift: _F, tail: float) -> _F:
    """Each pair's distance below the extreme in SEs, less its one-sided margin of error.

    The difference of the extreme pair's gap and a pair's, ``(e_a* - e_b*) - (e_a - e_b)``,
    has the variance of its group terms (a group in both pairs on the same side cancels, on
    opposite sides doubles); the margin is ``z_{1 - tail}`` of its SE, over the pair's own SE.
    """
    top = int(np.argmax(gap))
    keys = np.stack([f[top] * sd.shape[1] + np.full(f.size, a[top]),
                     f[top] * sd.shape[1] + np.full(f.size, b[top]),
                     f * sd.shape[1] + a, f * sd.shape[1] + b], axis=1)
    coef = np.array([1.0, -1.0, -1.0, 1.0])
    # per group, (the sum of its terms' coefficients)^2 sd^2: over the term pairs of a group
    same = keys[:, :, None] == keys[:, None, :]
    var = (same * np.outer(coef, coef) * (sd.ravel()[keys] ** 2)[:, :, None]).sum(axis=(1, 2))
    margin = NormalDist().inv_cdf(1.0 - tail) * np.sqrt(np.maximum(var, 0.0))
    return np.maximum(shift - margin / np.hypot(sd[f, a], sd[f, b]), 0.0)


def _combine(x: _F, n: _F, f: NDArray[np.intp], a: NDArray[np.intp], b: NDArray[np.intp],
             ratio: bool, c_near: float, c_far: float, value: float) -> tuple[float, float]:
    """Return (lower, upper), the extreme of the pairs' bounds, clipped.

    At the critical values towards parity (``c_near``) and away from it (``c_far``), within the
    metric's range and holding ``value``.
    """
    if ratio:
        lower, upper = _pair_bounds(x, n, f, a, b, True, c_far, c_near)
        return float(min(lower.min(), value)), float(min(max(upper.min(), value), 1.0))
    lower, upper = _pair_bounds(x, n, f, a, b, False, c_near, c_far)
    return float(min(max(lower.max(), 0.0), value)), float(min(max(upper.max(), value), 1.0))


# ---------------------------------------------------------------------------------------------
# Two groups: the bound away from parity from inverting the test of the folded statistic

#: Away from parity the folded test's critical value is at least this (in standard errors): the
#: exact inversion puts the upper bound on the estimate itself within 0.03 SE of parity (an
#: interval [0, 0] at equal counts); the floor costs coverage only below half an SE of gap.
FOLDED_FLOOR = 0.5
#: The largest distance from parity (in SEs) the folded test reads: beyond it ``z_far`` is
#: ``z_{1-tail}`` (the other tail below 1e-12 of ``tail`` for every ``tail`` above 1e-6).
_FOLD_TOP = 4.0


def folded_far(x: float, tail: float) -> float:
    """Return the folded test's critical value away from parity at ``x`` standard errors.

    For ``X ~ N(theta, 1)`` and the target ``|theta|``, the upper end of the interval from
    inverting the test on ``|X|`` at ``|X| = x`` is the ``t`` with ``P_t(|X| <= x) = tail``,
    both tails of ``X`` counted: ``t = x + z`` with ``Phi(-z) - Phi(-2x - z) = tail``. That
    bound misses ``|theta|`` in exactly ``tail`` of draws at every ``theta != 0``, where the
    folded signed bound ``x + z_{1-tail}`` cannot miss while ``|theta| < z_{1-tail}``. The
    value is at least :data:`FOLDED_FLOOR` (``z`` would be 0 within 0.03 SE of parity at 95%),
    and exactly ``z_{1-tail}`` where the other tail is below ``1e-12`` of ``tail``.

    Examples
    --------
    >>> round(folded_far(0.5, 0.025), 3), folded_far(3.0, 0.025) == folded_far(9.0, 0.025)
    (1.932, True)
    """
    z1 = NormalDist().inv_cdf(1.0 - tail)

    def phi(v: float) -> float:  # the normal cdf (math.erfc: NormalDist's, without its calls)
        return 0.5 * math.erfc(-v / math.sqrt(2.0))

    if phi(-2.0 * x - z1) < 1e-12 * tail:
        return z1
    lo, hi = 0.0, z1  # the left side decreases in z >= 0, and is at most tail at z1
    while hi - lo > 1e-13:
        mid = (lo + hi) / 2.0
        if phi(-mid) - phi(-2.0 * x - mid) > tail:
            lo = mid
        else:
            hi = mid
    return max(hi, FOLDED_FLOOR)


def _folded_pair(x: _F, n: _F, f: int, hi: int, lo: int, tail: float) -> float:
    """Two groups' critical value away from parity: groups ``hi`` and ``lo`` of family ``f``.

    The distance from parity in standard errors is the critical value at which the pair's
    Newcombe lower bound of ``|p1 - p2|`` reaches 0 (the score statistic), read at the gap plus
    half a step of the smaller group's rate, ``0.5 / n``: the continuity correction of
    ``P(|X| <= x)`` for counts (without it a tie, frequent at small counts, would read as
    exact parity and get the floor).
    """
    p = x / np.where(n > 0, n, 1.0)
    if p[f, hi] < p[f, lo]:
        hi, lo = lo, hi
    gap = p[f, hi] - p[f, lo] + 0.5 / min(n[f, hi], n[f, lo])
    counts, trials = x[f, [hi, lo]], n[f, [hi, lo]]
    p_hi, p_lo, gap_f = float(p[f, hi]), float(p[f, lo]), float(gap)
    scalar = all(_plain_wilson(float(c), float(t)) for c, t in zip(counts, trials, strict=True))

    def excess(z: float) -> float:
        # Newcombe's lower half-width at z (the higher rate's Wilson lower bound, the lower
        # rate's upper), less the gap; nondecreasing in z. Python floats where the kernel's
        # arithmetic applies (the same IEEE operations: the same bits, ~10x cheaper a call)
        if scalar:
            lower = _wilson_float(float(counts[0]), float(trials[0]), z)[0]
            upper = _wilson_float(float(counts[1]), float(trials[1]), z)[1]
            return math.hypot(p_hi - lower, upper - p_lo) - gap_f
        lower, upper = wilson_interval(counts, trials, z)
        return math.hypot(p[f, hi] - lower[0], upper[1] - p[f, lo]) - gap

    return folded_far(_root(excess, 0.0, _FOLD_TOP), tail)


def _plain_wilson(x: float, n: float) -> bool:
    """Whether :func:`_wilson_float` is Wilson's bound here: no rare-count fix, finite counts.

    The rare-count test is :func:`_rare` (the compiled kernel's ``_rare``), on the
    successes and on the failures.
    """
    return math.isfinite(x) and math.isfinite(n) and 0.0 <= x <= n and n > 0.0 and \
        not _rare(x, n) and not _rare(n - x, n)


def _wilson_float(x: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's bounds of one rate in Python floats, where :func:`_plain_wilson` holds.

    The compiled ``wilson_bounds``' operations in its order (IEEE: the same bits), without
    the arrays' set-up of :func:`wilson_interval` (two groups' folded test calls it ~10
    times).

    >>> lo, hi = wilson_interval(np.array([20.0]), np.array([40.0]), 1.959964)
    >>> _wilson_float(20.0, 40.0, 1.959964) == (float(lo[0]), float(hi[0]))
    True
    """
    z2 = z * z
    p = x / n
    centre = (x + z2 / 2.0) / (n + z2)
    half = z * math.sqrt(x * (n - x) / n + z2 / 4.0) / (n + z2)
    lo = 0.0 if x <= 0 else min(centre - half, p)
    hi = 1.0 if x >= n else max(centre + half, p)
    return min(max(lo, 0.0), 1.0), min(max(hi, 0.0), 1.0)


def _root(excess: Any, low: float, high: float) -> float:
    """Return where a nondecreasing ``excess`` crosses 0 in ``[low, high]`` (the end beyond).

    Regula falsi with the Illinois halving (superlinear, a handful of evaluations), kept
    inside the bracket.
    """
    f_low, f_high = excess(low), excess(high)
    if f_low >= 0.0:
        return low
    if f_high <= 0.0:
        return high
    side = 0
    for _ in range(100):
        mid = high - f_high * (high - low) / (f_high - f_low)
        f_mid = excess(mid)
        if f_mid == 0.0 or high - low < 1e-9:
            return mid
        if f_mid > 0.0:
            high, f_high = mid, f_mid
            if side == 1:
                f_low /= 2.0
            side = 1
        else:
            low, f_low = mid, f_mid
            if side == -1:
                f_high /= 2.0
            side = -1
    return mid


# ---------------------------------------------------------------------------------------------
# Many groups (issue 30): the pairs in contention of a gap without forming every pair

#: Round-off allowance of the separable bounds below (rates and Wilson bounds in [0, 1]).
_SLACK = 1e-9


def _prefix_pairs(conditions: list[tuple[_F, _F]], cap: int
                  ) -> tuple[NDArray[np.intp], NDArray[np.intp]] | None:
    """Every ``(i, j)``, ``i != j``, with ``values[j] <= limit[i]`` for each ``(limit, values)``.

    Enumerated along the condition that leaves the fewest pairs (None beyond ``cap`` of them),
    then filtered by the others.
    """
    orders = [np.argsort(values, kind="stable") for _, values in conditions]
    counts = [np.searchsorted(values[order], limit, side="right")
              for (limit, values), order in zip(conditions, orders, strict=True)]
    pick = int(np.argmin([c.sum() for c in counts]))
    count, order = counts[pick], orders[pick]
    total = int(count.sum())
    if total > cap:
        return None
    i = np.repeat(np.arange(count.size), count)
    j = order[np.arange(total) - np.repeat(np.cumsum(count) - count, count)]
    keep = i != j
    for limit, values in conditions:
        keep &= values[j] <= limit[i]
    return i[keep], j[keep]


def _family_pairs(defined: NDArray[np.bool_], conditions: list[tuple[_F, _F]], cap: int
                  ) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]] | None:
    """:func:`_prefix_pairs` within each family, as ``(family, i, j)`` (None beyond ``cap``)."""
    fam, left, right = [], [], []
    for f in np.flatnonzero(defined.any(axis=1)).tolist():
        g = np.flatnonzero(defined[f])
        found = _prefix_pairs([(limit[f, g], values[f, g]) for limit, values in conditions],
                              cap)
        if found is None:
            return None
        fam.append(np.full(found[0].size, f))
        left.append(g[found[0]])
        right.append(g[found[1]])
        cap -= found[0].size
    return np.concatenate(fam), np.concatenate(left), np.concatenate(right)


def _best_pair(p: _F, defined: NDArray[np.bool_], cap: int
               ) -> tuple[float, tuple[int, int, int]] | None:
    """Return the largest computed gap ``p_i - p_j`` and its first pair (all-pairs order).

    Float subtraction is monotone, so the largest computed gap is ``fl(max p - min p)`` and a
    pair reaching it has ``fl(p_i - min p) == fl(max p - p_j) ==`` it.
    """
    top = {f: float(np.max(p[f, defined[f]]) - np.min(p[f, defined[f]]))
           for f in np.flatnonzero(defined.any(axis=1)).tolist()}
    value = max(top.values())
    ties = []
    for f, gap in top.items():
        g = np.flatnonzero(defined[f])
        if gap != value:
            continue
        lows = g[(np.max(p[f, g]) - p[f, g]) == value]
        highs = g[(p[f, g] - np.min(p[f, g])) == value]
        if lows.size * highs.size > cap:
            return None
        ties += [(f, i, j) for i in highs.tolist() for j in lows.tolist()
                 if i != j and p[f, i] - p[f, j] == value]
    return value, min(ties)


def _gap_in_contention(x: _F, n: _F, defined: NDArray[np.bool_], tail: float, n_draws: int,
                       rng: Any) -> tuple[float, float, float] | None:
    """:func:`_bounds` of a gap, ``(value, lower, upper)``, from few pairs (None: every pair).

    What :func:`_bounds` reads of the ordered pairs is the largest gap and its first pair, the
    largest Newcombe lower bound ``L`` at Bonferroni's level and the pairs whose upper bound
    reaches ``L`` (in contention). Newcombe's bounds are ``d - hypot(p_i - l_i, u_j - p_j)``
    and ``d + hypot(u_i - p_i, p_j - l_j)``, and ``max(s, t) <= hypot(s, t) <= s + t``, so a
    pair's lower bound is at most ``min(l_i - p_j, p_i - u_j)`` and its upper bound at most
    ``u_i - l_j`` (at least ``u_i - p_j``): only the pairs these separable bounds leave in
    (within :data:`_SLACK`) are computed, with :func:`_pair_bounds`' arithmetic, so the result
    is the same. None where too many pairs remain (e.g. many tied rates).
    """
    k = defined.sum(axis=1)
    cap = max(1 << 16, 256 * int(k.sum()))  # candidates enumerated (numpy: cheap per pair)
    z_all = NormalDist().inv_cdf(1.0 - tail / float((k * (k - 1)).sum()))
    lo, up = wilson_interval(x, n, z_all)
    p = x / np.where(n > 0, n, 1.0)
    best = _best_pair(p, defined, cap)
    if best is None:
        return None
    value, (f0, i0, j0) = best
    first = float(_pair_bounds(x, n, np.array([f0]), np.array([i0]), np.array([j0]), False,
                               z_all, z_all)[0][0])
    # L is at least one pair's lower bound, and at least max(l_i - u_j) (hypot <= s + t)
    floor = max(first, _top_gap(lo, up, defined)) - _SLACK
    # lower bound at most min(l_i - p_j, p_i - u_j): reaching the floor needs both
    pairs = _family_pairs(defined, [(np.minimum(lo, p) - floor + _SLACK, p),
                                    (p - floor + _SLACK, up)], cap)
    if pairs is None:
        return None
    lower = _pair_bounds(x, n, *pairs, False, z_all, z_all)[0]
    extreme = max(float(lower.max(initial=-np.inf)), first)
    if _sure_in_contention(p, up, defined, extreme) > MAX_SIMULATED_PAIRS:
        return _many_in_contention(x, n, defined, tail, (extreme, z_all), value, (f0, i0, j0),
                                   cap)
    pairs = _family_pairs(defined, [(up - extreme + _SLACK, lo)], cap)
    if pairs is None:
        return None
    f, a, b = pairs
    upper = _pair_bounds(x, n, f, a, b, False, z_all, z_all)[1]
    near = upper >= extreme
    size = x.shape[1]
    keys = np.unique(np.concatenate([(f[near] * size + a[near]) * size + b[near],
                                     [(f0 * size + i0) * size + j0]]))
    f, rest = np.divmod(keys, size * size)
    a, b = np.divmod(rest, size)
    far = None
    if int((k * (k - 1)).sum()) == 2:  # two groups: as :func:`_bounds`
        far = _folded_pair(x, n, int(f0), int(i0), int(j0), tail)
    return _contention(x, n, f, a, b, False, extreme, value, tail, n_draws, rng, far)


def _sure_in_contention(p: _F, up: _F, defined: NDArray[np.bool_], extreme: float) -> int:
    """Count the pairs surely in contention: ``u_i - p_j >= L`` (their upper bound reaches L)."""
    total = 0
    for f in np.flatnonzero(defined.any(axis=1)).tolist():
        g = np.flatnonzero(defined[f])
        limit = up[f, g] - extreme - _SLACK
        total += int(np.searchsorted(np.sort(p[f, g]), limit, side="right").sum())
        total -= int((p[f, g] <= limit).sum())  # not a group with itself
    return total


def _many_in_contention(x: _F, n: _F, defined: NDArray[np.bool_], tail: float,
                        extreme: tuple[float, float], value: float, best: tuple[int, int, int],
                        cap: int) -> tuple[float, float, float] | None:
    """``(value, lower, upper)`` with more than ``MAX_SIMULATED_PAIRS`` pairs in contention.

    :func:`_critical` is then Bonferroni's: ``z`` away from parity, ``z_{1 - tail/N}``
    towards it (``N`` pairs in contention), both at most the ``z_all`` of every pair
    (``extreme`` is ``(L, z_all)``). Wilson's intervals are nested in ``z``, so at either
    critical value every pair's lower bound is at least, and its upper bound at most, its bound
    at ``z_all``; a pair reaching the largest bound over *every* pair is then the largest over
    the pairs in contention as soon as one such pair is in contention. The lower end needs
    ``N`` (:func:`_contention_size`) unless no pair's lower bound at ``z`` reaches 0 (then it
    is 0 whatever ``N``). None (every pair) when something is in doubt.
    """
    z = NormalDist().inv_cdf(1.0 - tail)
    top = _largest_bound(x, n, defined, z, 1, cap)
    if top is None or not _any_in_contention(x, n, top[1], extreme, best):
        return None
    upper = float(min(max(top[0], value), 1.0))
    near = _largest_bound(x, n, defined, z, 0, cap)
    if near is not None and near[0] <= -_SLACK:  # lower bounds at the critical value <= these
        return value, 0.0, upper
    size = _contention_size(x, n, defined, extreme, best, cap)
    if size is None:
        return None
    c_near = NormalDist().inv_cdf(1.0 - tail / size)  # _critical's, from the count alone
    low = _largest_bound(x, n, defined, c_near, 0, cap)
    if low is None or not _any_in_contention(x, n, low[1], extreme, best):
        return None
    return value, float(min(max(low[0], 0.0), value)), upper


def _largest_bound(x: _F, n: _F, defined: NDArray[np.bool_], z: float, side: int, cap: int
                   ) -> tuple[float, tuple[NDArray[np.intp], ...]] | None:
    """Return the largest Newcombe lower (``side`` 0) or upper (1) bound at ``z``, every pair.

    With the pairs reaching it. A lower bound is at least ``l_i - u_j`` and at most
    ``min(l_i - p_j, p_i - u_j)``; an upper bound at least ``u_i - p_j`` and at most
    ``u_i - l_j``. None beyond ``cap`` candidates.
    """
    lo, up = wilson_interval(x, n, z)
    p = x / np.where(n > 0, n, 1.0)
    if side == 0:
        floor = _top_gap(lo, up, defined) - 2 * _SLACK
        conditions = [(np.minimum(lo, p) - floor, p), (p - floor, up)]
    else:
        floor = _top_gap(up, p, defined) - 2 * _SLACK
        conditions = [(up - floor, lo)]
    pairs = _family_pairs(defined, conditions, cap)
    if pairs is None:
        return None
    bound = _pair_bounds(x, n, *pairs, False, z, z)[side]
    top = bound == bound.max()
    return float(bound.max()), tuple(index[top] for index in pairs)


def _any_in_contention(x: _F, n: _F, pairs: tuple[NDArray[np.intp], ...],
                       extreme: tuple[float, float], best: tuple[int, int, int]) -> bool:
    """Whether one of ``pairs`` is in contention (upper bound at ``z_all`` reaching ``L``)."""
    f, a, b = pairs
    if any((int(f[k]), int(a[k]), int(b[k])) == best for k in range(f.size)):
        return True
    return bool((_pair_bounds(x, n, f, a, b, False, extreme[1], extreme[1])[1]
                 >= extreme[0]).any())


def _contention_size(x: _F, n: _F, defined: NDArray[np.bool_], extreme: tuple[float, float],
                     best: tuple[int, int, int], cap: int) -> int | None:
    """Count the pairs in contention, as :func:`_bounds` forms them (None beyond ``cap``).

    A pair is surely in when ``u_i - p_j`` or ``p_i - l_j`` reaches ``L`` (its upper bound is at
    least either), surely out when ``u_i - l_j`` does not; the others are computed.
    """
    lo, up = wilson_interval(x, n, extreme[1])
    p = x / np.where(n > 0, n, 1.0)
    sure = extreme[0] + _SLACK
    total = 0
    for f in np.flatnonzero(defined.any(axis=1)).tolist():
        g = np.flatnonzero(defined[f])
        total += _either_count(up[f, g] - sure, p[f, g], p[f, g] - sure, lo[f, g])
    undecided = _window_pairs(defined, (p - sure, up - extreme[0] + _SLACK), lo, p, up - sure,
                              cap)
    if undecided is None:
        return None
    upper = _pair_bounds(x, n, *undecided, False, extreme[1], extreme[1])[1]
    total += int((upper >= extreme[0]).sum())
    f0, i0, j0 = best
    best_upper = _pair_bounds(x, n, np.array([f0]), np.array([i0]), np.array([j0]), False,
                              extreme[1], extreme[1])[1][0]
    return total + int(best_upper < extreme[0])  # the largest gap is always in contention


def _either_count(first: _F, first_values: _F, second: _F, second_values: _F) -> int:
    """Count ``(i, j)``, ``i != j``, with ``first_values[j] <= first[i]`` or the second."""
    def count(limit: _F, values: _F) -> int:
        return int(np.searchsorted(np.sort(values), limit, side="right").sum()
                   - (values <= limit).sum())

    both = _dominance_count(first, first_values, second, second_values)
    return count(first, first_values) + count(second, second_values) - both


def _dominance_count(first: _F, first_values: _F, second: _F, second_values: _F) -> int:
    """Count ``(i, j)``, ``i != j``, with both ``first_values[j] <= first[i]`` and the second.

    Offline, O(K log K): the queries by ``first``, the points added in order of
    ``first_values`` to a Fenwick tree over the ranks of ``second_values``.
    """
    k = first.size
    by_value = np.argsort(second_values, kind="stable")
    position = np.empty(k, dtype=np.intp)
    position[by_value] = np.arange(k)
    below = np.searchsorted(second_values[by_value], second, side="right")
    points = np.argsort(first_values, kind="stable")
    tree = [0] * (k + 1)
    total, added = 0, 0
    for q in np.argsort(first, kind="stable").tolist():
        while added < k and first_values[points[added]] <= first[q]:
            slot = int(position[points[added]]) + 1
            while slot <= k:
                tree[slot] += 1
                slot += slot & -slot
            added += 1
        slot = int(below[q])
        while slot > 0:
            total += tree[slot]
            slot -= slot & -slot
    itself = (first_values <= first) & (second_values <= second)
    return total - int(itself.sum())


def _window_pairs(defined: NDArray[np.bool_], window: tuple[_F, _F], values: _F,
                  others: _F, above: _F, cap: int
                  ) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]] | None:
    """Pairs with ``window[0][i] < values[j] <= window[1][i]`` and ``others[j] > above[i]``.

    Enumerated along the condition that leaves fewer pairs, filtered by the other.
    """
    fam, left, right = [], [], []
    for f in np.flatnonzero(defined.any(axis=1)).tolist():
        g = np.flatnonzero(defined[f])
        lo, hi, val, oth, ab = (a[f, g] for a in (*window, values, others, above))
        by_value, by_other = np.argsort(val, kind="stable"), np.argsort(oth, kind="stable")
        start = np.searchsorted(val[by_value], lo, side="right")
        count = np.maximum(np.searchsorted(val[by_value], hi, side="right") - start, 0)
        first = np.searchsorted(oth[by_other], ab, side="right")
        if (g.size - first).sum() < count.sum():  # along `others`, a suffix of its order
            start, count, order = first, g.size - first, by_other
        else:
            order = by_value
        total = int(count.sum())
        if total > cap:
            return None
        i = np.repeat(np.arange(g.size), count)
        j = order[np.repeat(start, count) + np.arange(total)
                  - np.repeat(np.cumsum(count) - count, count)]
        keep = (i != j) & (lo[i] < val[j]) & (val[j] <= hi[i]) & (oth[j] > ab[i])
        fam.append(np.full(int(keep.sum()), f))
        left.append(g[i[keep]])
        right.append(g[j[keep]])
        cap -= total
    return np.concatenate(fam), np.concatenate(left), np.concatenate(right)


def _top_gap(high: _F, low: _F, defined: NDArray[np.bool_]) -> float:
    """Return ``max high_i - low_j`` over the pairs ``i != j`` of defined groups of a family."""
    best = -np.inf
    for f in np.flatnonzero(defined.any(axis=1)).tolist():
        g = np.flatnonzero(defined[f])
        hi, lo = high[f, g], low[f, g]
        top, bottom = np.argsort(-hi, kind="stable")[:2], np.argsort(lo, kind="stable")[:2]
        best = max(best, *(float(hi[i] - lo[j]) for i in top.tolist() for j in bottom.tolist()
                           if i != j))
    return best
