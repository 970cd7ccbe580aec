"""Coverage of the score-distribution intervals (issue 25, items 3 and 6): ABCC and ABPC.

Every interval-bearing score metric (ABCC; ABPC at a fixed bandwidth, the interval being
conditional on the window's bandwidths; MADD has no interval, see docs/intervals_scores.md)
x smallest group 20, 50, 200, 1,000, 10,000 rows x two score distributions ("low": a
Beta(0.8, 30), mean 0.026, the analogue of a 2% rate; "mid": 0.8 Beta(2, 5) with atoms of
10% at 0 and at 1, mean 0.33) x true gap 0 and > 0 (the smallest group's continuous part
Beta(1.3 a, b)) x balanced and 1:50 unbalanced (the other groups 50x the smallest) x 2 and 5
groups. Per cell, ``reps`` simulated windows:

- coverage: the share of 95% intervals holding the true value (target 93-97.5% with >= 50 rows
  per group, >= 90% below; at parity the upper end always holds 0, so coverage there is 1 minus
  the lower bound's exclusions and is judged by the next target);
- zero exclusion at parity: the share of lower bounds above 0 (target <= 2.5%);
- width: mean width over the mean width of the reference, a 2,000-resample stratified
  bootstrap percentile interval (each group's rows resampled at its size; resampled on a
  1,024-bin histogram of the window, the metric recomputed from the binned resample) on the
  first ``ref_reps`` windows of the cell, ``gap_ref_reps`` with a gap (target <= 1.2). The
  reference's own coverage (``refcov``) is printed too: at parity it is 0 by construction
  (the percentile interval of a positive statistic never holds 0), and with a gap the
  summary splits the cells failing the width target by whether the reference itself covers
  at least 0.93 there (a width target against an interval that misses is not one a valid
  interval can be held to; docs/intervals_scores.md);
- width against the reference made valid at parity (``vref``, ``vratio``, ``vcov``; printed,
  not judged): the same percentile interval with its lower end at 0 wherever a permutation
  test of the group labels (199 shuffles of the window's 1,024-bin histogram, the metric as
  the reference computes it) does not reject parity at one-sided 0.025. It is the least change
  that makes the reference meet the zero-exclusion target, and so the narrowest reference an
  interval meeting that target can be compared with. Its test draws from a stream of its own,
  so the windows are those of the records without it.

Each window is drawn as each group's counts in the GRID cells of [0, 1] (a multinomial at its
size: the law of binning its rows, O(GRID) at any size); its value is the metric of those
counts, its interval reads their 128-bin histogram (as the report does), the reference
resamples their 1,024-bin histogram. True values: the metric of the population's cell
probabilities (ABPC: smoothed at the cell's bandwidth), on the same 16,384-cell grid. Printed
per cell: coverage, each end's misses (``lo>t``, ``hi<t``), zero exclusion, mean widths, their
ratio and the reference's own coverage (``refcov``) on its windows.

Usage: ``nice -n 10 python benchmarks/bench_coverage_scores.py [--quick] [--reps N]
[--ref-reps N] [--gap-ref-reps N] [--kinds abcc,abpc] [--sizes ...] [--groups 2,5] [--balance 1,50]
[--dists low,mid] [--jobs N] [--cell KIND:DIST:N:BAL:K:GAP ...]`` (quick: 100 windows, 5
reference windows, sizes 50 and 1,000, 2 groups; the full grid at 1,000 windows: ~1.5 min a
cell per process at a load average of 15 on 2 cores, so hours there (an estimated ~40 min
idle); ``--jobs 2`` runs the cells in two processes, the filters split it; ``--cell`` runs
only the named cells, each on the windows it has in the full grid with the same reference
options).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import multiprocessing
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from fairmonitor.metrics._abpc_abcc.kde import density_from_binned
from fairmonitor.metrics._score_intervals import RESOLUTION, score_gap_interval

GRID = 1 << 14
REF_BINS = 1024
REF_RESAMPLES = 2000
#: Shuffles of the valid reference's permutation test: p = (1 + m) / 200 <= 0.025 rejects when
#: at most 4 of them reach the window's value.
REF_SHUFFLES = 199
#: The targets: the coverage floor (>= 50 rows) and the width over the reference's.
FLOOR, WIDTH_TARGET = 0.93, 1.2


@dataclass(frozen=True)
class Dist:
    name: str
    a: float
    b: float
    atoms: float  # mass at 0 and at 1 each

    def shifted(self) -> Dist:
        return Dist(self.name, 1.3 * self.a, self.b, self.atoms)

    def cdf(self, x: np.ndarray) -> np.ndarray:
        cont = stats.beta(self.a, self.b).cdf(x)
        return self.atoms * (x >= 0) + (1 - 2 * self.atoms) * cont + self.atoms * (x >= 1)

    def rvs(self, n: int, rng: np.random.Generator) -> np.ndarray:
        s = rng.beta(self.a, self.b, n)
        if self.atoms:
            u = rng.random(n)
            s[u < self.atoms] = 0.0
            s[u > 1 - self.atoms] = 1.0
        return s


DISTS = {"low": Dist("low", 0.8, 30.0, 0.0), "mid": Dist("mid", 2.0, 5.0, 0.1)}


def _cells(dist: Dist) -> np.ndarray:
    """The population's probability of each of the GRID cells of [0, 1] (the atom at 0 in
    the first cell, the one at 1 in the last, as :func:`fine_histogram` bins them)."""
    mass = np.diff(dist.cdf(np.linspace(0.0, 1.0, GRID + 1)))
    mass[0] += dist.atoms
    return np.clip(mass, 0.0, None) / max(mass.sum(), 1e-300)


def _grid_curves(kind: str, counts: np.ndarray, h: float) -> np.ndarray:
    """(K, GRID) curves of (K, GRID) cell counts (or probabilities): the CDF at each cell's
    midpoint (the mean of its edges: the exact integral for scores spread evenly in a cell),
    or the density smoothed at ``h``."""
    n = counts.sum(axis=-1, keepdims=True)
    if kind == "abcc":
        upper = np.cumsum(counts, axis=-1)
        return (upper - counts / 2.0) / n
    return np.stack([density_from_binned(c * (1e9 / t), h, 10 ** 9)
                     for c, t in zip(counts, n[:, 0], strict=True)])


def _grid_metric(kind: str, curves: np.ndarray) -> float:
    k = len(curves)
    return max(float(np.abs(curves[i] - curves[j]).sum()) / GRID
               for i in range(k) for j in range(i + 1, k))


def truth(kind: str, dists: list[Dist], h: float) -> float:
    """The population value: the metric of the population's cell probabilities (for ABPC the
    KDE's expectation, the population density smoothed at h)."""
    return _grid_metric(kind, _grid_curves(kind, np.stack([_cells(d) for d in dists]), h))


def _binned_metric(kind: str, counts: np.ndarray, h: float) -> np.ndarray:
    """The metric of (resamples, K, bins) histograms, per resample (max over pairs)."""
    n = counts.sum(axis=-1, keepdims=True)
    if kind == "abcc":
        curves = (np.cumsum(counts, axis=-1) - counts / 2.0) / n
    else:
        import scipy.fft

        cells = counts.shape[-1]
        half = np.arange(cells) * (np.pi / (2 * cells))
        damping = np.exp(-0.5 * (2 * cells * h * half) ** 2)
        curves = scipy.fft.dct(scipy.fft.dct(counts, type=2, axis=-1) * (damping / 2.0),
                               type=3, axis=-1) / n
    k = counts.shape[1]
    return np.max([np.abs(curves[:, i] - curves[:, j]).sum(axis=-1) / counts.shape[-1]
                   for i in range(k) for j in range(i + 1, k)], axis=0)


def reference(kind: str, grid_counts: np.ndarray, h: float,
              rng: np.random.Generator) -> tuple[float, float]:
    """The 2,000-resample stratified bootstrap percentile interval (each group resampled at
    its size from its 1,024-bin histogram)."""
    hist = grid_counts.reshape(grid_counts.shape[0], REF_BINS, -1).sum(axis=-1)
    boot = np.stack([rng.multinomial(int(c.sum()), c / c.sum(), size=REF_RESAMPLES)
                     for c in hist], axis=1).astype(float)
    lo, hi = np.quantile(_binned_metric(kind, boot, h), [0.025, 0.975])
    return float(lo), float(hi)


def rejects_parity(kind: str, grid_counts: np.ndarray, h: float,
                   rng: np.random.Generator) -> bool:
    """Whether the permutation test of the group labels rejects parity at one-sided 0.025.

    The statistic is the metric of the window's 1,024-bin histogram, the reference's; each
    shuffle is an exact random partition of the pooled counts into the groups' sizes (a
    multivariate hypergeometric draw per group from what the earlier groups left).
    """
    hist = grid_counts.reshape(grid_counts.shape[0], REF_BINS, -1).sum(axis=-1).astype(np.int64)
    observed = _binned_metric(kind, hist[None].astype(float), h)[0]
    sizes = hist.sum(axis=1)
    shuffles = np.empty((REF_SHUFFLES, *hist.shape))
    for s in range(REF_SHUFFLES):
        left = hist.sum(axis=0)
        for g, size in enumerate(sizes[:-1]):
            shuffles[s, g] = drawn = rng.multivariate_hypergeometric(left, int(size))
            left = left - drawn
        shuffles[s, -1] = left
    reached = int((_binned_metric(kind, shuffles, h) >= observed).sum())
    return (1 + reached) / (REF_SHUFFLES + 1) <= 0.025


def scott(dist: Dist, n: int) -> float:
    sample = dist.rvs(200_000, np.random.default_rng(1))
    return float(sample.std() * n ** -0.2)


def cell(kind: str, n: int, dist: Dist, gap: bool, ratio: int, k: int, reps: int,
         ref_reps: int, seed: int) -> dict[str, float]:
    """One cell's windows. A window is drawn as each group's counts in the GRID cells (a
    multinomial at its size: the same law as binning its rows, at any size in O(GRID)); the
    value is the metric of those counts (the scores at GRID resolution) and the interval reads
    their 128-bin histogram, as the report does."""
    sizes = [n] + [n * ratio] * (k - 1)
    dists = [dist.shifted() if gap else dist] + [dist] * (k - 1)
    h = scott(dist, n)
    true = truth(kind, dists, h)
    probs = [_cells(d) for d in dists]
    rng = np.random.default_rng(seed)
    cover = exclude = above = below = ref_cover = valid_cover = 0
    widths, ref, valid = [], [], []
    for rep in range(reps):
        counts = np.stack([rng.multinomial(m, p) for m, p in zip(sizes, probs, strict=True)]
                          ).astype(float)
        value = _grid_metric(kind, _grid_curves(kind, counts, h))
        hist = counts.reshape(k, RESOLUTION, -1).sum(axis=-1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if kind == "abcc":
                iv = score_gap_interval(hist, "abcc", value=value, rng=rep)
            else:
                iv = score_gap_interval(hist, "abpc", value=value, bandwidths=[h] * k, rng=rep)
        cover += iv.lower <= true <= iv.upper
        above += iv.lower > true
        below += iv.upper < true
        exclude += iv.lower > 0
        widths.append(iv.upper - iv.lower)
        if rep < ref_reps:
            lo, hi = reference(kind, counts, h, rng)
            ref.append(hi - lo)
            ref_cover += lo <= true <= hi
            # its own stream: the cell's windows stay those of the records before it
            if not rejects_parity(kind, counts, h, np.random.default_rng([seed, rep])):
                lo = 0.0
            valid.append(hi - lo)
            valid_cover += lo <= true <= hi
    return {"truth": true, "coverage": cover / reps, "exclusion": exclude / reps,
            "above": above / reps, "below": below / reps,
            "width": float(np.mean(widths)), "ref": float(np.mean(ref)),
            "ref_cover": ref_cover / max(min(ref_reps, reps), 1),
            "valid": float(np.mean(valid)),
            "valid_cover": valid_cover / max(min(ref_reps, reps), 1), "reps": reps}


def _cell_name(kind: str, n: int, dist: Dist, gap: bool, ratio: int, k: int) -> str:
    """A cell's ``--cell`` name: ``KIND:DIST:N:BAL:K:GAP``, e.g. ``abcc:low:50:1:2:yes``."""
    return f"{kind}:{dist.name}:{n}:{ratio}:{k}:{'yes' if gap else 'no'}"


def _cell(args: tuple[Any, ...]) -> dict[str, float]:
    """:func:`cell` of one tuple of its arguments (a process pool's task)."""
    return cell(*args)


def verdict(row: dict[str, float], n: int, gap: bool) -> tuple[bool, str]:
    notes = []
    ok = True
    # the 2.5% and 97.5% limits with the Monte Carlo allowance, as bench_coverage.py judges
    allowance = 1.96 * (0.025 * 0.975 / row["reps"]) ** 0.5
    if gap:
        low = FLOOR if n >= 50 else 0.90
        good = (low <= row["coverage"] <= 0.975 + allowance if n >= 50
                else row["coverage"] >= low)
        ok &= good
        notes.append("cov" if good else "COV")
    else:
        good = row["exclusion"] <= 0.025 + allowance
        ok &= good
        notes.append("zero" if good else "ZERO")
    wide = row["width"] / row["ref"] > WIDTH_TARGET
    ok &= not wide
    notes.append("WIDTH" if wide else "width")
    return ok, ",".join(notes)


def _print_wide(wide: dict[bool, list[tuple[float, float, str]]], ref_reps: int,
                gap_ref_reps: int) -> None:
    """Print the cells over the width target, split by whether the reference covers there."""
    print(f"width over {WIDTH_TARGET:g}x the reference at parity: {len(wide[False])} cells; "
          f"the reference's coverage of the true 0 there (over {ref_reps} windows): at most "
          f"{max((c for _, c, _ in wide[False]), default=float('nan')):.2f}")
    covering = sorted((r, c, name) for r, c, name in wide[True] if c >= FLOOR)
    print(f"width over {WIDTH_TARGET:g}x the reference with a gap: {len(wide[True])} cells; "
          f"the reference covers >= {FLOOR:g} (over {gap_ref_reps} windows) in "
          f"{len(covering)} of them:")
    for r, c, name in covering:
        print(f"  {name:24s} width {r:.2f}x, reference coverage {c:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--ref-reps", type=int, default=10,
                        help="windows of a cell the reference runs on (~0.1-1.5 s each)")
    parser.add_argument("--gap-ref-reps", type=int, default=60,
                        help="the same in the cells with a gap, where its coverage is read")
    parser.add_argument("--kinds", default="abcc,abpc")
    parser.add_argument("--sizes", default="20,50,200,1000,10000")
    parser.add_argument("--groups", default="2,5", help="numbers of groups")
    parser.add_argument("--balance", default="1,50", help="size ratios (1: balanced)")
    parser.add_argument("--dists", default=",".join(DISTS))
    parser.add_argument("--cell", action="append", default=[], metavar="KIND:DIST:N:BAL:K:GAP",
                        help="only this cell (repeatable), e.g. abcc:low:50:1:2:yes; it keeps "
                             "the seed it has in the grid the other options make, so with the "
                             "same reference options its windows are those of the full run "
                             "(the reference draws from the cell's stream)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="cells computed in this many processes (the same rows: each "
                             "cell has its own seed)")
    args = parser.parse_args()
    reps, ref_reps, gap_ref_reps = (100, 5, 5) if args.quick else (
        args.reps, args.ref_reps, args.gap_ref_reps)
    sizes = [50, 1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    groups = [2] if args.quick else [int(k) for k in args.groups.split(",")]
    balance = [int(r) for r in args.balance.split(",")]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; {os.cpu_count()} CPUs; "
          f"{reps} windows per cell, the reference on {ref_reps} of them at parity and "
          f"{gap_ref_reps} with a gap")
    print(f"{'metric':5s} {'dist':4s} {'n':>6s} {'bal':>4s} {'K':>2s} {'gap':>4s} {'reps':>5s} "
          f"{'truth':>7s} {'cover':>6s} {'lo>t':>6s} {'hi<t':>6s} {'excl0':>6s} {'width':>7s} "
          f"{'ref':>7s} {'ratio':>6s} {'refcov':>6s} {'vref':>7s} {'vratio':>6s} "
          f"{'vcov':>5s}  verdict")
    summary: dict[str, list[float]] = {"cov": [], "excl": [], "ratio": []}
    wide: dict[bool, list[tuple[float, float, str]]] = {False: [], True: []}
    wide_valid: list[tuple[float, float, str]] = []
    failures = 0
    started = time.perf_counter()
    cells = [(kind, n, dist, gap, ratio, k, reps, gap_ref_reps if gap else ref_reps, seed)
             for seed, (kind, dist, n, ratio, k, gap) in enumerate(itertools.product(
                 args.kinds.split(","), [DISTS[d] for d in args.dists.split(",")], sizes,
                 balance, groups, (False, True)), start=1)]
    if args.cell:
        chosen = set(args.cell)
        cells = [c for c in cells if _cell_name(*c[:6]) in chosen]
        missing = chosen - {_cell_name(*c[:6]) for c in cells}
        if missing:
            parser.error(f"no such cell in the grid: {', '.join(sorted(missing))}")
    with multiprocessing.Pool(args.jobs) if args.jobs > 1 else contextlib.nullcontext() as pool:
        rows = pool.imap(_cell, cells) if pool is not None else map(_cell, cells)
        for (kind, n, dist, gap, ratio, k, *_), row in zip(cells, rows, strict=True):
            ok, why = verdict(row, n, gap)
            failures += not ok
            if gap and n >= 50:
                summary["cov"].append(row["coverage"])
            if not gap:
                summary["excl"].append(row["exclusion"])
            width_ratio = row["width"] / row["ref"]
            summary["ratio"].append(width_ratio)
            if "WIDTH" in why:  # the verdict's own width check
                wide[gap].append((width_ratio, row["ref_cover"],
                                  _cell_name(kind, n, dist, gap, ratio, k)))
            if row["width"] / row["valid"] > WIDTH_TARGET:
                wide_valid.append((row["width"] / row["valid"], row["valid_cover"],
                                   _cell_name(kind, n, dist, gap, ratio, k)))
            print(f"{kind:5s} {dist.name:4s} {n:6d} {'1:' + str(ratio):>4s} "
                  f"{k:2d} {'yes' if gap else 'no':>4s} {reps:5d} "
                  f"{row['truth']:7.4f} {row['coverage']:6.3f} "
                  f"{row['above']:6.3f} {row['below']:6.3f} "
                  f"{row['exclusion']:6.3f} "
                  f"{row['width']:7.4f} {row['ref']:7.4f} "
                  f"{row['width'] / row['ref']:6.2f} {row['ref_cover']:6.2f} "
                  f"{row['valid']:7.4f} {row['width'] / row['valid']:6.2f} "
                  f"{row['valid_cover']:5.2f}  "
                  f"{'PASS' if ok else 'FAIL'} ({why})", flush=True)
    cov, excl, ratio = (np.array(summary[k]) for k in ("cov", "excl", "ratio"))
    if cov.size:
        print(f"coverage with a gap, >= 50 rows: min {cov.min():.3f} max {cov.max():.3f}")
    if excl.size:
        print(f"zero excluded at parity: min {excl.min():.3f} max {excl.max():.3f}")
    print(f"width / reference: min {ratio.min():.2f} max {ratio.max():.2f}")
    _print_wide(wide, ref_reps, gap_ref_reps)
    covering = [entry for entry in wide_valid if entry[1] >= FLOOR]
    print(f"width over {WIDTH_TARGET:g}x the reference made valid at parity: {len(wide_valid)} "
          f"cells; it covers >= {FLOOR:g} (over its windows) in {len(covering)} of them"
          f"{':' if wide_valid else ''}")
    for r, c, name in sorted(wide_valid):
        print(f"  {name:24s} width {r:.2f}x, valid reference coverage {c:.2f}")
    print(f"{failures} cell(s) FAIL; {time.perf_counter() - started:.0f} s; load average at "
          f"the end {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
