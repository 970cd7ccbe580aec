"""Intervals and chance levels of the score-distribution gaps: ABCC, ABPC, MADD's chance level.

The three metrics are ``max over pairs of integral |C_i - C_j|`` for a curve ``C`` linear in a
group's score histogram (ABCC the CDF, ABPC a reflected KDE, MADD the histogram at each pair's
bins), so a bootstrap of the histogram is a bootstrap of the curve. The noise is drawn from
per-group histograms only (:func:`fine_histogram`), never from rows: O(groups x bins x draws)
whatever the window's size, and the same for summaries merged from many batches.

- :class:`ScoreBootstrap`: each group's Poisson bootstrap (real Poisson counts) and the
  permutation null of the group labels, drawn once per attribute and read by its three metrics;
- ``_Curves``: the groups' curves of a histogram or of a stack of draws (compiled kernels);
- :func:`score_gap_interval`: the lower end by the directional derivative of the max (the
  approach of :mod:`._intervals`) and, at parity, the permutation test of the group labels;
  the upper end the percentile bootstrap's, less a share of its bias estimate; the chance
  level the null draws' mean. MADD gets its chance level only (:data:`MADD_NO_INTERVAL`).

Pure numpy (layer 1) around compiled kernels (:mod:`fairmonitor._kernels.intervals`, imported
when first needed). Draws use a fixed seed by default, so that a window's interval does not
jitter from one evaluation to the next.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._intervals import (
    KAPPA,
    MAX_PAIRS,
    Interval,
    _by_column,
    _kernels,
    _quantile,
    _rng,
    _undefined,
    _z,
)

__all__ = ["MADD_NO_INTERVAL", "RESOLUTION", "ScoreBootstrap", "fine_histogram",
           "fine_histogram_sorted", "score_gap_interval"]

#: Standard errors within which a bin's difference of curves counts as "possibly 0" (folded).
BIN_KAPPA = KAPPA
#: Beyond this many groups score intervals are NaN with the reason.
MAX_GROUPS = 256


def _smooth(counts: NDArray[np.floating], h: float | NDArray[np.float64], *,
            normalized: bool = True) -> NDArray[np.float64]:
    """Reflected Gaussian KDE (bandwidth ``h``) of binned counts (2-D), per row, as densities.

    The batch form of :func:`fairmonitor.metrics._abpc_abcc.kde.density_from_binned` (simple
    binning instead of linear binning: it only carries the noise, never the value). With
    ``normalized=False``, not yet divided by each row's total (the error kernel divides).
    Several groups at once: ``counts`` (G, rows, R) and ``h`` (G,), one transform of the
    stack instead of one per group (pocketfft transforms each row alike: the same numbers).
    """
    import scipy.fft  # lazily, as the KDE module does

    cells = counts.shape[-1]
    half_angle = np.arange(cells) * (np.pi / (2 * cells))
    per_group = np.ndim(h) > 0
    width = np.asarray(h, dtype=float)[:, None] if per_group else h
    damping = np.exp(-0.5 * (2 * cells * width * half_angle) ** 2)
    spectrum = scipy.fft.dct(counts, type=2, axis=-1)
    # in float64: a cast, then times the factor (each group's own with a stack)
    coef = _kernels().scaled(spectrum, damping / 2.0)
    dens = scipy.fft.dct(coef, type=3, axis=-1)
    if not normalized:
        return dens
    return _kernels().density_curves(dens.reshape(-1, cells), counts.reshape(-1, cells)
                                     ).reshape(dens.shape)


@functools.lru_cache(maxsize=1024)
def _segments(r: int, m: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """:meth:`_Curves.segments` (read-only arrays; a window's pairs share a handful of ``m``)."""
    index = np.minimum(((np.arange(r) + 0.5) * m / r).astype(np.intp), m - 1)
    starts = np.flatnonzero(np.concatenate(([True], np.diff(index) > 0)))
    slots = index[starts]
    starts.flags.writeable = slots.flags.writeable = False
    return starts, slots


def _alike(arrays: list[NDArray[np.floating]]) -> bool:
    """Whether the arrays share a shape and a dtype (stacking them casts nothing)."""
    return len({(a.shape, a.dtype) for a in arrays}) == 1


def _cdfs(stack: NDArray[np.floating]) -> NDArray[np.floating]:
    """Return ``cdf_curves`` of each group of ``stack`` (G, draws, R): (G, draws, R - 1).

    One kernel call over every group's rows.
    """
    rows = stack.reshape(-1, stack.shape[-1])
    return _kernels().cdf_curves(rows).reshape(*stack.shape[:2], -1)


class _Curves:
    """Each group's curve (CDF, histogram or density) whose pairwise L1 distance is the metric.

    The curves are linear in the group's fine histogram, so a bootstrap of the histogram is a
    bootstrap of the curve. ``pair_bins`` (MADD) and ``bandwidths`` (ABPC) are per pair and
    per group respectively. The draws' curves, errors and pair sums are compiled kernels
    (:mod:`fairmonitor._kernels.intervals`, numpy's arithmetic within rounding); a hat is one
    row, run through the same kernels.
    """

    def __init__(self, kind: str, resolution: int, pair_bins: Any, bandwidths: Any) -> None:
        self.kind, self.resolution = kind, resolution
        self.pair_bins, self.bandwidths = pair_bins, bandwidths
        self._cache: dict[tuple[Any, ...], Any] = {}

    @property
    def upper(self) -> float:
        """The metric's largest value."""
        return 1.0 if self.kind == "abcc" else 2.0

    def weight(self, pair: tuple[int, int]) -> float:
        return 1.0 if self.kind == "madd" else 1.0 / self.resolution

    def __call__(self, tag: str, k: int, pair: tuple[int, int],
                 counts: NDArray[np.floating]) -> NDArray[np.floating]:
        m = self.pair_bins[pair] if self.kind == "madd" else 0
        key = (tag, k, m)
        if key not in self._cache:
            self._cache[key] = self._curve(k, m, counts)
        return self._cache[key]

    def many(self, tag: str, groups: list[int], counts: list[NDArray[np.floating]]
             ) -> NDArray[np.floating]:
        """Return several groups' curves (ABCC, ABPC: one per group) stacked: (G, ...).

        Row ``k`` is ``self(tag, g, (g, g), counts[k])`` for ``g = groups[k]``. The groups not
        yet cached get theirs from one call when they stack (:meth:`_stacked`), the others one
        call each; when every group is new (and listed once) that call's array is returned as
        it is.
        """
        todo = [(g, c) for g, c in zip(groups, counts, strict=True)
                if (tag, g, 0) not in self._cache]
        curves = self._stacked(todo) if len(todo) > 1 else None
        if curves is None:
            return np.stack([self(tag, g, (g, g), c) for g, c in zip(groups, counts,
                                                                     strict=True)])
        curves.flags.writeable = False  # its rows are the cache's
        for k, (g, c) in enumerate(todo):
            self._cache[(tag, g, 0)] = curves[k] if c.ndim == 2 else curves[k, 0]
        if len(todo) == len(groups) == len(set(groups)):  # in order, each group once
            return curves if todo[0][1].ndim == 2 else curves[:, 0]
        return np.stack([self._cache[(tag, g, 0)] for g in groups])

    def _stacked(self, todo: list[tuple[int, NDArray[np.floating]]]
                 ) -> NDArray[np.floating] | None:
        """Return the curves of ``(group, counts)`` pairs in one call (None: they do not stack).

        ABPC: one smoothing transform of the stack (:func:`_smooth`), counts of one shape;
        ABCC: every group's CDFs in one kernel call over the stacked rows, row by row (the
        same numbers as a call per group). A 1-D ``counts`` is stacked as one row: (G, 1, R').
        """
        rows = [c if c.ndim == 2 else c[None, :] for _, c in todo]
        if self.kind == "abpc" and len({c.shape for _, c in todo}) == 1:
            return _smooth(np.stack(rows), np.array([float(self.bandwidths[g]) for g, _ in todo]))
        if self.kind == "abcc" and _alike([c for _, c in todo]):
            return _cdfs(np.stack(rows))
        return None

    def errors(self, groups: list[int], hats: list[NDArray[np.float64]],
               boots: list[NDArray[np.float32]]
               ) -> tuple[NDArray[np.float32], NDArray[np.float64]]:
        """:meth:`error` of several groups (ABCC, ABPC), stacked: (G, draws, R) and (G, R).

        ``hats`` are the groups' histograms (as :meth:`error`'s ``hat``). Draws of one shape
        go through one curve call (ABPC: one smoothing of the stack; ABCC: one CDF call) and
        one error call over the stack, each group's numbers those of a call of its own.
        """
        if self.kind in ("abpc", "abcc") and len(groups) > 1 and _alike(boots):
            errors = _kernels().errors
            counts = np.stack(boots)
            hat_stack = self.many("hat", groups, hats)
            if self.kind == "abpc":  # each draw divided by its total in the error pass
                dens = _smooth(counts, np.array([float(self.bandwidths[g]) for g in groups]),
                               normalized=False)
                return errors(dens, hat_stack, counts)  # type: ignore[no-any-return]
            return errors(_cdfs(counts), hat_stack)  # type: ignore[no-any-return]
        found = [self.error(g, (g, g), hat, boot)
                 for g, hat, boot in zip(groups, hats, boots, strict=True)]
        return np.stack([err for err, _ in found]), np.stack([var for _, var in found])

    def error(self, k: int, pair: tuple[int, int], hat: NDArray[np.float64],
              boot: NDArray[np.float32]) -> tuple[NDArray[np.float32], NDArray[np.float64]]:
        """Group ``k``'s bootstrap error curves (draws, G) and their variance per point."""
        m = self.pair_bins[pair] if self.kind == "madd" else 0
        key = ("error", k, m)
        if key not in self._cache:
            errors = _kernels().errors
            # a draw that emptied a group carries no information: no error (np.nan_to_num)
            if self.kind == "abpc":  # the division by each draw's total in the same pass
                dens = _smooth(boot, float(self.bandwidths[k]), normalized=False)
                self._cache[key] = errors(dens, self("hat", k, pair, hat), boot)
            else:
                self._cache[key] = errors(self._curve(k, m, boot), self("hat", k, pair, hat))
        return self._cache[key]  # type: ignore[no-any-return]

    def segments(self, m: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """MADD at ``m`` bins: the first fine bin of each coarse bin's run, and its coarse bin."""
        return _segments(self.resolution, int(m))

    def _curve(self, k: int, m: int, counts: NDArray[np.floating]) -> NDArray[np.floating]:
        kernels = _kernels()
        rows = counts[None, :] if counts.ndim == 1 else counts
        if self.kind == "abcc":  # the CDF at the interior edges
            curve = kernels.cdf_curves(rows)
        elif self.kind == "madd":  # the histogram at the pair's m bins, as probabilities
            curve = kernels.coarse_curves(rows, *self.segments(m), m)
        else:
            curve = _smooth(rows, float(self.bandwidths[k]))
        return curve[0] if counts.ndim == 1 else curve


#: Resolution of the fine histograms behind the score-distribution bootstrap: the noise of a
#: curve is carried at this resolution (its value never is: intervals centre on the exact value).
RESOLUTION = 128
#: Bins at which ABCC's and ABPC's bootstrap and null curves are carried: pairs of fine bins.
#: Half the draws, transforms and pair sums of ``RESOLUTION``, for the same intervals: over
#: the 160 cells of ``bench_coverage_scores.py`` coverage, zero exclusion and mean width stayed
#: within Monte Carlo error of 128 bins' (docs/intervals_scores.md). MADD's chance level keeps
#: the fine null: its pairs' bins (28-57 under "auto") need finer bins to be read from.
CURVE_RESOLUTION = 64
#: Bootstrap draws of the score distributions (the 95% bound's Monte Carlo error is ~2% of the
#: half-width) and null draws behind their chance level.
SCORE_DRAWS, NULL_DRAWS = 100, 60


class ScoreBootstrap:
    """Per-group bootstrap and null draws of fine score histograms, drawn once.

    The bootstrap is the Poisson bootstrap (TFMA's scheme: each row's count times Poisson(1)),
    drawn as it is: a bin of ``c`` rows gets a Poisson(``c``) count (``Generator.poisson``),
    never negative, so every draw is a histogram and every curve read from it lies in the
    metric's range. (A Gaussian form ``c + sqrt(c) N(0, 1)`` made negative counts in sparse
    bins; a draw whose total came near 0 then gave densities, and chance levels, far outside
    the metric's range.) A draw that empties a group carries no error (see ``_Curves.error``).

    The null draws (for the chance level) are the permutation null of the group labels: every
    group's rows drawn from the pooled histogram at its exact size, jointly (an exact random
    partition of the pooled rows) when the window has at most :data:`EXACT_NULL_ROWS` rows, and
    independently per group otherwise (the permutation without replacement then differs by a
    variance factor ``N / (N - 1)``): a multinomial draw at its exact size for a group of at
    most ``R`` rows, Poisson counts at its expected histogram for a larger one. It is the null of
    :func:`~fairmonitor.metrics.permutation_test` read on the fine histogram, with the
    bandwidths held at the window's.

    Shared by every score metric of one attribute (ABCC, MADD's chance level, ABPC read the
    same draws), so their intervals cost one bootstrap, not three. Draws are made on first
    use, from one generator (a fixed seed by default): the same window gives the same bounds.
    An attribute whose groups are unions of an intersection's cells can read the cells' draws
    instead of its own (:meth:`coarsened`): each interval's law is the same.

    Parameters
    ----------
    hist : array-like of shape (K, R)
        Per-group counts (:func:`fine_histogram`).
    n_draws : int, default=SCORE_DRAWS
    rng : numpy.random.Generator, int or None
    """

    def __init__(self, hist: ArrayLike, n_draws: int = SCORE_DRAWS, rng: Any = None) -> None:
        self.hist = np.asarray(hist, dtype=float)
        self.n_draws = n_draws
        self._rng_arg = rng  # the generator made on first draw (a coarsened one may need none)
        self._generator: np.random.Generator | None = None
        self._boot: dict[int, NDArray[np.float32]] = {}
        self._null: NDArray[np.float32] | None = None
        # coarsened: the bootstrap whose cells these groups unite, and each group's cells
        self._cells: ScoreBootstrap | None = None
        self._members: list[list[int]] = []
        # binned coarser (at_resolution): the fine bootstrap whose null draws are summed here
        self._fine: ScoreBootstrap | None = None
        self._coarser: dict[int, ScoreBootstrap] = {}

    @property
    def _gen(self) -> np.random.Generator:
        if self._generator is None:
            self._generator = _rng(self._rng_arg)
        return self._generator

    def coarsened(self, members: Sequence[Sequence[int]], hist: ArrayLike | None = None
                  ) -> ScoreBootstrap | None:
        """Return the bootstrap of coarser groups, group ``g`` the union of cells ``members[g]``.

        Its draws are sums of these cells' draws, made (and kept) here: a sum of independent
        Poisson(``c_k``) counts is Poisson(``sum c_k``), so each group's bootstrap has the law
        of its own, and the groups (disjoint cells) stay independent. Its null draws are the
        sums of the cells' when that is the same law too: the cells cover every row (the
        same pooled histogram) and both are drawn alike, an exact permutation of at most
        :data:`EXACT_NULL_ROWS` rows (summing the cells of a random partition gives a random
        partition at the groups' sizes) or Poisson counts (every cell of more than ``R``
        rows); otherwise its own (a multinomial cell summed with others is not the group's
        Poisson draw). An attribute and its intersection then cost one set of draws.

        Parameters
        ----------
        members : sequence of sequences of int
            Each coarse group's rows of this bootstrap's ``hist``, disjoint.
        hist : array-like of shape (G, R), optional
            The coarse groups' own histograms: None is returned unless they are the
            members' sums exactly (cells binned apart from their group's bins do not add up).

        Returns
        -------
        ScoreBootstrap or None

        Examples
        --------
        >>> cells = ScoreBootstrap([[3.0, 1.0], [0.0, 2.0], [5.0, 0.0]])
        >>> coarse = cells.coarsened([[0, 2], [1]])
        >>> coarse.hist.tolist()
        [[8.0, 1.0], [0.0, 2.0]]
        >>> bool((coarse.boot(0) == cells.boot(0) + cells.boot(2)).all())
        True
        >>> cells.coarsened([[0, 2], [1]], hist=[[8.0, 1.0], [1.0, 1.0]]) is None
        True
        """
        members = [[int(c) for c in m] for m in members]
        summed = np.stack([self.hist[m].sum(axis=0) for m in members])
        if hist is not None and not np.array_equal(np.asarray(hist, dtype=float), summed):
            return None
        out = ScoreBootstrap(summed, self.n_draws)
        out._cells, out._members = self, members
        return out

    def at_resolution(self, resolution: int) -> ScoreBootstrap:
        """Return this bootstrap on ``resolution`` bins, each a run of consecutive fine bins.

        Its bootstrap draws are Poisson draws of the summed counts, its own (the law of summing
        the fine bins' draws: a sum of independent Poisson counts is Poisson), or, coarsened
        from cells, the sums of the cells' at ``resolution``; its null draws are the fine
        null draws summed (the same permutation null, binned coarser, so the chance levels
        of every score metric read one null). Itself if ``resolution`` is not a proper
        divisor of its bins. Made once.

        Examples
        --------
        >>> fine = ScoreBootstrap([[3.0, 1.0, 0.0, 2.0], [1.0, 1.0, 4.0, 0.0]])
        >>> half = fine.at_resolution(2)
        >>> half.hist.tolist(), half is fine.at_resolution(2), fine.at_resolution(3) is fine
        ([[4.0, 2.0], [2.0, 4.0]], True, True)
        >>> bool((half.null(1) == fine.null(1).reshape(-1, 2, 2).sum(axis=2)).all())
        True
        """
        bins = self.hist.shape[1]
        if resolution >= bins or bins % resolution:
            return self
        if resolution not in self._coarser:
            if self._cells is not None:
                out = self._cells.at_resolution(resolution).coarsened(self._members)
                assert out is not None  # no histogram to check: the members' sums
            else:
                out = ScoreBootstrap(_binned_by(self.hist, bins // resolution), self.n_draws,
                                     rng=self._gen)
            out._fine = self
            self._coarser[resolution] = out
        return self._coarser[resolution]

    def boot(self, g: int) -> NDArray[np.float32]:
        """(draws, R) bootstrap counts of group ``g``: Poisson(count) per bin."""
        return self.boots([g])[0]

    def boots(self, groups: list[int]) -> list[NDArray[np.float32]]:
        """:meth:`boot` of each of ``groups``, those not drawn yet drawn in turn in one call.

        One array of uniforms for them all: the generator's uniforms fill it in C order, so it
        holds what a call per group, in this order, would have drawn.
        """
        new = [g for g in dict.fromkeys(groups) if g not in self._boot]
        if new and self._cells is not None:  # the sums of the cells' draws (exact: counts)
            self._cells.boots([c for g in new for c in self._members[g]])
            self._boot.update((g, self._cells._sum(self._cells._boot, self._members[g]))
                              for g in new)
        elif new:
            drawn = _poisson(self.hist[new], self.n_draws, self._gen)
            self._boot.update(zip(new, drawn, strict=True))
        return [self._boot[g] for g in groups]

    @staticmethod
    def _sum(drawn: Any, cells: list[int]) -> NDArray[np.float32]:
        """Return the sum of ``drawn[c]`` over ``cells`` (a single cell's own array)."""
        if len(cells) == 1:
            return drawn[cells[0]]  # type: ignore[no-any-return]
        total = drawn[cells[0]] + drawn[cells[1]]
        for c in cells[2:]:
            total += drawn[c]
        return total  # type: ignore[no-any-return]

    def _shares_null(self) -> bool:
        """Whether the sums of the cells' null draws have the law of this one's own."""
        cells = self._cells
        if cells is None or sorted(c for m in self._members for c in m) != list(
                range(cells.hist.shape[0])):
            return False  # not every cell: another pooled histogram
        sizes = np.rint(cells.hist).sum(axis=1)
        return bool(sizes.sum() <= EXACT_NULL_ROWS or sizes.min() > cells.hist.shape[1])

    def null(self, g: int) -> NDArray[np.float32]:
        """(draws, R) counts of group ``g``'s size drawn from the pooled histogram."""
        return self.nulls()[g]

    def nulls(self) -> NDArray[np.float32]:
        """(K, draws, R): :meth:`null` of every group (drawn together, on first use)."""
        if self._null is None and self._fine is not None:  # the fine null, binned coarser
            fine = self._fine.nulls()
            self._null = _binned_by(fine, fine.shape[-1] // self.hist.shape[1])
        if self._null is None and self._cells is not None and self._shares_null():
            cells = self._cells.nulls()
            self._null = np.stack([self._sum(cells, m) for m in self._members])
        if self._null is None:
            self._null = _permutation_null(self.hist, NULL_DRAWS, self._gen)
        return self._null


def _binned_by(counts: NDArray[Any], factor: int) -> NDArray[Any]:
    """Return ``counts`` (..., R) summed over runs of ``factor`` consecutive bins: (..., R / f).

    A sum of strided slices, not ``reshape(..., -1, factor).sum(-1)``: numpy's reduction along
    a short last axis pays a step per row (~1 ms for a window's null draws). Counts are whole
    numbers, so any order of the sum gives the same values.

    >>> _binned_by(np.array([[1.0, 2.0, 3.0, 4.0]]), 2).tolist()
    [[3.0, 7.0]]
    """
    if factor == 1:
        return counts
    total = counts[..., 0::factor] + counts[..., 1::factor]
    for k in range(2, factor):
        total += counts[..., k::factor]
    return total  # type: ignore[no-any-return]


def _poisson(lam: NDArray[np.float64], n_draws: int,
             gen: np.random.Generator) -> NDArray[np.float32]:
    """(draws, R) Poisson(``lam``) counts from ``gen``'s uniforms, by inversion (compiled).

    ``lam`` of shape (G, R): (G, draws, R), the counts of a call per row in turn (the
    uniforms fill the array in C order, as they would fill one array per row).
    """
    return _kernels().poisson_counts(lam, gen.random((*lam.shape[:-1], n_draws, lam.shape[-1])))


#: Windows of at most this many rows get their null draws by an exact permutation of the
#: pooled rows (O(rows x draws)); larger ones by a multinomial draw per group.
EXACT_NULL_ROWS = 2_000


def _permutation_null(hist: NDArray[np.float64], n_draws: int,
                      gen: np.random.Generator) -> NDArray[np.float32]:
    """(K, draws, R) group histograms under shuffled group labels, each group at its size.

    >>> h = np.array([[3.0, 0.0], [0.0, 2.0]])
    >>> null = _permutation_null(h, 4, np.random.default_rng(0))
    >>> null.sum(axis=2).tolist() == [[3.0] * 4, [2.0] * 4], null.sum(axis=0).tolist()[0]
    (True, [3.0, 2.0])
    """
    counts = np.rint(hist).astype(np.int64)
    sizes, pooled = counts.sum(axis=1), counts.sum(axis=0)
    k, r = hist.shape
    total = int(sizes.sum())
    if total <= EXACT_NULL_ROWS:
        # a random partition of the pooled rows: shuffle the rows' bins, cut at the sizes
        rows = np.repeat(np.arange(r), pooled)
        owner = np.repeat(np.arange(k), sizes) * r
        out = np.empty((n_draws, k * r))
        for d in range(n_draws):
            out[d] = np.bincount(owner + gen.permutation(rows), minlength=k * r)
        return np.ascontiguousarray(out.reshape(n_draws, k, r).transpose(1, 0, 2),
                                    dtype=np.float32)
    share = pooled / total
    # a group of more rows than bins: Poisson counts at its expected histogram (the Poisson
    # bootstrap's form of the null: its total varies by sqrt(n), which the curves divide out,
    # and it costs a third of a multinomial draw); a smaller group at its exact size (numpy's
    # multinomial stops once its rows are placed, so it is cheap there, and never empty).
    # Consecutive Poisson groups in one call: the same uniforms, in the same order
    out = np.empty((k, n_draws, r), dtype=np.float32)
    g = 0
    while g < k:
        run = g
        while run < k and sizes[run] > r:
            run += 1
        if run > g:
            out[g:run] = _poisson(share * sizes[g:run, None], n_draws, gen)
            g = run
        else:
            out[g] = gen.multinomial(int(sizes[g]), share, size=n_draws)
            g += 1
    return out


def fine_histogram(scores: ArrayLike, resolution: int = RESOLUTION) -> NDArray[np.float64]:
    """Return the counts of ``scores`` (in [0, 1]) in ``resolution`` equal bins (last one closed).

    >>> fine_histogram([0.0, 0.1, 0.99, 1.0], 4).tolist()
    [2.0, 0.0, 0.0, 2.0]
    """
    s = np.asarray(scores, dtype=float)
    return np.bincount(np.minimum((s * resolution).astype(np.intp), resolution - 1),
                       minlength=resolution).astype(float)


@functools.lru_cache(maxsize=8)
def _edges(resolution: int) -> NDArray[np.float64]:
    """Return the interior bin edges ``k / R`` of a resolution, made once (read-only)."""
    edges = np.arange(1, resolution) / resolution
    edges.flags.writeable = False
    return edges


def fine_histogram_sorted(sorted_scores: NDArray[np.float64], resolution: int = RESOLUTION
                          ) -> NDArray[np.float64]:
    """:func:`fine_histogram` of ascending scores, in O(resolution log n) instead of O(n).

    A row's bin ``min(floor(s * R), R - 1)`` is at least ``k`` (for ``k < R``) iff ``s * R >=
    k``; with ``R`` a power of two ``s * R`` is exact, so that is ``s >= k / R`` (also exact),
    and each bin's first row is one binary search. Other resolutions bin every row, as
    :func:`fine_histogram` does. The same counts either way (a summary's raw scores are sorted;
    at 10^7 rows binning them cost 0.14 s a window).

    >>> fine_histogram_sorted(np.array([0.0, 0.1, 0.99, 1.0]), 4).tolist()
    [2.0, 0.0, 0.0, 2.0]
    """
    s = np.asarray(sorted_scores, dtype=float)
    if resolution & (resolution - 1):  # not a power of two: s * R may round
        return fine_histogram(s, resolution)
    if resolution == 1:
        return np.full(1, float(s.size))
    first = np.searchsorted(s, _edges(resolution), side="left")
    counts = np.empty(resolution)  # np.diff(first, prepend=0, append=n), without its concatenate
    counts[0], counts[-1] = first[0], s.size - first[-1]
    np.subtract(first[1:], first[:-1], out=counts[1:-1])
    return counts


def score_gap_interval(
    hist: ArrayLike | ScoreBootstrap,
    kind: str,
    *,
    value: float,
    pairs: Any = None,
    pair_bins: Any = None,
    bandwidths: ArrayLike | None = None,
    level: float = 0.95,
    rng: Any = None,
) -> Interval:
    """Interval and chance level of the largest L1 gap between groups' score distributions.

    ABCC (``kind="abcc"``, the area between CDFs), MADD (``"madd"``, the L1 distance of
    histograms at each pair's bins) and ABPC (``"abpc"``, the area between reflected KDEs at
    each group's bandwidth) are all ``max over pairs of integral |C_i - C_j|`` for a curve
    ``C`` that is linear in the group's score histogram. The error of ``C_i - C_j`` is drawn
    by a Poisson bootstrap of the groups' histograms (counts times Poisson(1) weights,
    TFMA's scheme; O(groups x bins x draws), never O(rows); ABCC's and ABPC's at
    :data:`CURVE_RESOLUTION` bins, pairs of the fine ones); the derivative of
    ``integral |D|`` in direction ``h`` is ``integral sign(D) h`` where ``D`` is clearly
    non-zero and ``integral |h|`` where it is within ``KAPPA`` bootstrap standard errors of 0
    (see the module docstring). The interval is centred on the metric's exact ``value``; the
    bandwidths (MADD's bins, ABPC's kernel widths) are held at the window's: the interval is
    conditional on them.

    Parameters
    ----------
    hist : array-like of shape (K, R), or ScoreBootstrap
        Per-group counts of scores in ``R`` equal bins over [0, 1] (:func:`fine_histogram`),
        or their :class:`ScoreBootstrap` (to share the draws between metrics).
    kind : {'abcc', 'madd', 'abpc'}
        The metric.
    value : float
        The metric's value on the window (the centre of the interval).
    pairs : sequence of (i, j), optional
        The pairs the metric compares (default: every pair).
    pair_bins : mapping of (i, j) to int
        MADD: each pair's number of bins.
    bandwidths : array-like of shape (K,)
        ABPC: each group's kernel standard deviation.
    level : float, default=0.95
    rng : numpy.random.Generator, int or None
        For a histogram: the bootstrap's seed (None: a fixed one).

    Returns
    -------
    interval : Interval

    Examples
    --------
    Two groups of 400 scores, one uniform on [0, .5), one on [.5, 1): ABCC 0.5.

    >>> h = np.stack([fine_histogram(np.arange(400) / 800),
    ...               fine_histogram(0.5 + np.arange(400) / 800)])
    >>> r = score_gap_interval(h, "abcc", value=0.5)
    >>> bool(0.45 < r.lower < 0.5 < r.upper < 0.55), bool(r.chance < 0.1)
    (True, True)
    """
    method = "poisson-bootstrap"
    _z(level)
    sample = hist if isinstance(hist, ScoreBootstrap) else ScoreBootstrap(hist, rng=rng)
    if kind != "madd":  # the curves' noise at CURVE_RESOLUTION (MADD reads the fine null)
        sample = sample.at_resolution(CURVE_RESOLUTION)
    h = sample.hist
    if not np.isfinite(value):
        return _undefined(method, "the metric is undefined on this window")
    if pairs is None:
        pairs = list(zip(*np.triu_indices(h.shape[0], k=1), strict=True))
    pairs = [(int(i), int(j)) for i, j in pairs]
    if not pairs:
        return _undefined(method, "fewer than two groups with scores")
    used = sorted({g for p in pairs for g in p})
    if len(used) > MAX_GROUPS:
        return _undefined(method, f"{len(used)} groups: intervals are computed for at most "
                                  f"{MAX_GROUPS} (raise min_group_size)")
    curves = _Curves(kind, h.shape[1], pair_bins, bandwidths)
    null_gaps = _null_gaps(sample, curves, pairs)
    chance = float(null_gaps.mean())
    if kind == "madd":
        return Interval(float("nan"), float("nan"), chance, "none", MADD_NO_INTERVAL)
    lower, upper, binned = _bounds(sample, curves, pairs, value, level)
    if binned <= _null_quantile(null_gaps, 0.5 + level / 2.0):
        lower = 0.0  # not beyond chance: the permutation test at (1 - level) / 2 keeps 0
    return Interval(lower, upper, chance, method)


def _null_quantile(gaps: NDArray[np.float64], q: float) -> float:
    """Return the permutation test's critical value: the ``ceil(q (D + 1))``-th smallest of ``D``.

    A value above it has a permutation p-value of at most ``1 - q`` (the observed labelling
    counted as one of the ``D + 1``); with 60 draws and ``q = 0.975`` it is the largest.
    """
    rank = min(math.ceil(q * (gaps.size + 1)), gaps.size)
    return float(np.partition(gaps, rank - 1)[rank - 1])


#: Why MADD has no interval (docs/intervals_scores.md has the measurements).
MADD_NO_INTERVAL = (
    "MADD has no interval: its value is biased upwards by ~sqrt(2/pi) sqrt((m - 1)(1/n_i + "
    "1/n_j)) for m bins (0.24 at 500 rows per group and 32 bins), no bias-corrected interval "
    "covers (bootstrap bias correction: coverage 87%, a true 0 excluded in 53-95% of fair "
    "windows), and the folded interval that does is 3x the bootstrap's width; compare the "
    "value with its chance level, or use ABCC/ABPC for compare: bound")


def _bounds(sample: ScoreBootstrap, curves: _Curves, pairs: list[tuple[int, int]],
            value: float, level: float) -> tuple[float, float, float]:
    """(lower, upper, the metric on the fine histograms) from the bootstrap's derivatives.

    The lower end reads the directional derivative of the max (bins within ``KAPPA`` standard
    errors of 0 folded, ``|h|``), one-sided at ``(1 + level) / 2``. The upper end is the
    percentile bootstrap's, corrected by the bootstrap's estimate of the plug-in's bias: with
    ``M = metric* - metric^`` per draw, ``value + q(M) - s mean(M)`` at ``q = (1 + level) /
    2``, never below the value, ``s`` the share of the estimate removed
    (:func:`_bias_share`). The plug-in is biased upwards (``E integral |D^| >= integral |D|``,
    more so near parity and with more pairs), so the percentile end ``value + q(M)``
    over-covered (no upper miss in most cells, widths 1.2-2.1x a stratified bootstrap's). The
    basic bootstrap's ``value - q_low(M)`` missed in 13-18%, the linear error (every bin at its
    estimated sign) in 9% (docs/intervals_scores.md).
    """
    worst, moved, binned, contact = _pair_draws(sample, curves, pairs, value)
    # one-sided at (1 + level) / 2 each: at parity the derivative is >= 0 (|h| folded), and the
    # former symmetric |derivative| quantile made the lower bound a one-sided test at `level`
    below = max(_quantile(worst, 0.5 + level / 2.0), 0.0)
    above = max(float(_quantile(moved, 0.5 + level / 2.0) - _bias_share(contact) * moved.mean()),
                0.0)
    return max(value - below, 0.0), min(value + above, curves.upper), binned


def _bias_share(contact: int) -> float:
    """Return the share of the bias estimate the upper end removes, by pairs near the max.

    One pair (every 2-group window): half. Its bias is the fold of one ``|D|``, and the
    bootstrap's estimate of it is largest in the windows whose value fell lowest, where the
    end needs its margin most: the whole estimate missed a true gap of 2-3 standard errors
    from above in 4-6% of windows, half of it in 3.6-4.9%. Several pairs within ``KAPPA``
    errors of the max: the whole. Their bias is mostly the max's over pairs; with half of it
    the 5-group cells (50 rows or more, a gap) covered 0.943-0.997, the upper end missing in
    at most 2.9% of windows, at up to 1.67x the reference's width; the whole narrows them by
    up to an eighth, coverage 0.942-0.997 and the upper end missing in at most 3.8%
    (bench_coverage_scores.py, 2026-11-27).

    >>> _bias_share(1), _bias_share(4)
    (0.5, 1.0)
    """
    return 0.5 if contact == 1 else 1.0


def _pair_draws(sample: ScoreBootstrap, curves: _Curves, pairs: list[tuple[int, int]],
                value: float) -> tuple[NDArray[np.float64], NDArray[np.float64], float, int]:
    """Per draw, the max's derivative and change; the metric on the histograms; pairs near it.

    ``worst``: the directional derivative of the max over the pairs near it (bins within
    ``KAPPA`` standard errors of 0 folded); ``moved``: the draw's metric minus the hat's.
    ABCC and ABPC (MADD has no bounds) read one curve per group, not per pair, so the
    candidate pairs' terms are one kernel call over the groups' stacked errors (no Python
    loop over pairs).
    """
    kernels = _kernels()
    h = sample.hist
    found = _candidates(h, curves, pairs, value)
    # in the order the pairs first read them: a group's bootstrap is drawn on first use
    groups = list(dict.fromkeys(g for p in found for g in p))
    at = {g: k for k, g in enumerate(groups)}
    # the curves of ABCC and ABPC do not depend on the pair: all groups' at once
    counts = [h[g] for g in groups]
    hat_stack = curves.many("hat", groups, counts)
    err_stack, var_stack = curves.errors(groups, counts, sample.boots(groups))
    left = np.array([at[i] for i, _ in found], dtype=np.intp)
    right = np.array([at[j] for _, j in found], dtype=np.intp)
    deriv, _, total = kernels.pair_derivatives(hat_stack, var_stack, err_stack, left, right,
                                               BIN_KAPPA, changes=False)
    w = curves.weight(found[0])
    deriv, pv = deriv * w, total * w
    # a pair's error scale: RMS of its derivative (its SE when settled, its floor near 0)
    near_max = pv >= pv.max() - KAPPA * np.sqrt((deriv ** 2).mean(axis=0))
    worst = _by_column(deriv[:, near_max]).max(axis=0)
    # each draw's change only for the pairs near the max (the only ones it is read for)
    moved = kernels.pair_changes(hat_stack, err_stack, left[near_max], right[near_max])
    moved = _by_column((total[near_max] + moved) * w).max(axis=0) - pv.max()
    return worst, moved, float(pv.max()), int(near_max.sum())


def _null_gaps(sample: ScoreBootstrap, curves: _Curves,
               pairs: list[tuple[int, int]]) -> NDArray[np.float64]:
    """Return the largest pair gap of each null draw (shuffled group labels).

    Their mean is the chance level.

    The null gap is largest between the smallest groups: the MAX_PAIRS pairs of smallest size.
    Counts are never negative, so every draw's gap is within the metric's range (the clip
    only guards float round-off).
    """
    kernels = _kernels()
    # each group's n^-1/2 as Python floats (the same IEEE power and sum as numpy's scalars,
    # without a numpy scalar operation per pair)
    inv = [x ** -0.5 if x > 0 else math.inf for x in sample.hist.sum(axis=1).tolist()]
    smallest = sorted(pairs, key=lambda q: -(inv[q[0]] + inv[q[1]]))[:MAX_PAIRS]
    if curves.kind == "madd":  # a curve per pair (its bins): every pair's segments, one call
        segments = [curves.segments(curves.pair_bins[p])[0] for p in smallest]
        first = np.cumsum([0] + [len(starts) for starts in segments])
        gaps = kernels.coarse_gap_maxima(sample.nulls(), [i for i, _ in smallest],
                                         [j for _, j in smallest], first,
                                         np.concatenate(segments))
    else:  # a curve per group: every pair's gap and their max in one call
        groups = list(dict.fromkeys(g for p in smallest for g in p))
        at = {g: k for k, g in enumerate(groups)}
        stacked = curves.many("null", groups, [sample.null(g) for g in groups])
        gaps = kernels.pair_gap_maxima(stacked, [at[i] for i, _ in smallest],
                                       [at[j] for _, j in smallest]) * curves.weight(smallest[0])
    return np.clip(gaps, 0.0, curves.upper).astype(np.float64)


def _candidates(h: NDArray[np.float64], curves: _Curves, pairs: list[tuple[int, int]],
                value: float) -> list[tuple[int, int]]:
    """Return the pairs that may be the largest within their error: at most :data:`MAX_PAIRS`.

    Applied to any number of pairs: every pair's bootstrap costs as much as the bound it can
    change, so an unfair window with many groups skips the pairs far below its maximum.

    A pair's value is at most the L1 distance of its fine curves (exact for ABCC and ABPC; for
    MADD, coarser bins can only shrink it) and its error at most the groups' multinomial L1
    errors ``sum sqrt(q (1 - q) / n)`` (smoothing, cumulating and coarsening do not enlarge an
    L1 norm), so pairs whose upper end falls below the value cannot be near the maximum.
    """
    if len(pairs) == 1:
        return pairs
    n = h.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = h / n[:, None]
        err = np.sqrt(q * (1 - q) / n[:, None]).sum(axis=1)
    groups = list(dict.fromkeys(g for p in pairs for g in p))
    at = {g: k for k, g in enumerate(groups)}
    if curves.kind == "abpc":
        fine = curves.many("hat", groups, [h[g] for g in groups]) / h.shape[1]
    elif curves.kind == "abcc":
        fine = np.cumsum(q[groups], axis=1)[:, :-1] / h.shape[1]
    else:
        fine = q[groups]
    # every pair's L1 distance in one expression: each row summed as its own 1-D sum would be
    left = np.array([at[i] for i, _ in pairs])
    right = np.array([at[j] for _, j in pairs])
    reach = np.abs(fine[left] - fine[right]).sum(axis=1) + KAPPA * (
        err[[i for i, _ in pairs]] + err[[j for _, j in pairs]])
    order = np.argsort(-reach, kind="stable")[:MAX_PAIRS]
    keep = [pairs[k] for k in order if reach[k] >= value] or [pairs[int(order[0])]]
    return keep
