"""Why MADD reports no interval: bootstrap intervals of MADD at fixed bins, by simulation.

Two groups of scores, Beta(2, 5) and Beta(2.55, 5) ("gap") or both Beta(2, 5) ("parity"), n
rows each, MADD at k equal bins on [0, 1] (fairmonitor's ``madd(..., bandwidth=1 / k)``, the
L1 distance of the groups' histograms; checked against it on the first window). True MADD:
the same distance between the populations' bin probabilities. Per cell, ``--reps`` windows,
each with ``--boot`` stratified bootstrap resamples (every group resampled at its size), and
two 95% intervals:

- ``basic``: the basic bootstrap interval, ``2 v - q97.5(v*)`` to ``2 v - q2.5(v*)``;
- ``bias-corrected``: ``(2 v - mean v*) +- 1.96 sd(v*)``, the bootstrap's bias estimate
  removed from the plug-in value.

Printed per cell (a Markdown table): the plug-in's mean bias (mean value minus the truth) and
at parity, the first-order bias of the folded bin differences, ``sqrt(2/pi) sum_b
sqrt(p_b (1 - p_b) (1/n_i + 1/n_j))`` (the bins' noise alone); each interval's coverage, mean width
and share of windows whose lower bound is above 0 (at parity: a bound alert paging on a fair
model; with a gap: the gap told from 0).

Usage: ``nice -n 10 python benchmarks/bench_madd_interval.py [--quick] [--reps N] [--boot N]``
(quick: 60 windows, 100 resamples).
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
from scipy import stats

from fairmonitor.metrics import madd

CELLS = ((500, 20), (500, 35), (500, 50), (100, 30))  # (rows per group, bins)
SHAPES = {"gap": ((2.0, 5.0), (2.55, 5.0)), "parity": ((2.0, 5.0), (2.0, 5.0))}


def bin_probabilities(a: float, b: float, k: int) -> np.ndarray:
    """A Beta(a, b) population's probability of each of k equal bins of [0, 1]."""
    return np.diff(stats.beta.cdf(np.linspace(0.0, 1.0, k + 1), a, b))


def l1(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """MADD of histograms given as shares: the L1 distance over the last axis."""
    return np.abs(p - q).sum(axis=-1)


def folded_bias(p: np.ndarray, n: int) -> float:
    """First-order bias of the L1 distance of two n-row histograms of the same population."""
    return float(math.sqrt(2 / math.pi) * np.sqrt(p * (1 - p) * (2 / n)).sum())


def check_against_madd(rng: np.random.Generator, k: int) -> None:
    """The L1 of the histograms is fairmonitor's MADD at k bins (the script measures that)."""
    x, y = rng.beta(2, 5, 300), rng.beta(2.55, 5, 300)
    ours = l1(np.histogram(x, k, (0, 1))[0] / 300, np.histogram(y, k, (0, 1))[0] / 300)
    theirs = madd(np.r_[x, y], sensitive_features=np.repeat(["a", "b"], 300),
                  bandwidth=1 / k).value
    assert abs(ours - theirs) < 1e-9, (ours, theirs)


def cell(n: int, k: int, shape: str, reps: int, boot: int, rng: np.random.Generator) -> dict:
    """Coverage, width and lower-bound-above-0 share of both intervals in one cell."""
    p, q = (bin_probabilities(a, b, k) for a, b in SHAPES[shape])
    truth = float(l1(p, q))
    hits = {"basic": [], "bias-corrected": []}
    values = []
    for _ in range(reps):
        hp, hq = rng.multinomial(n, p) / n, rng.multinomial(n, q) / n
        value = float(l1(hp, hq))
        star = l1(rng.multinomial(n, hp, size=boot) / n, rng.multinomial(n, hq, size=boot) / n)
        lo_q, hi_q = np.quantile(star, [0.025, 0.975])
        centre = 2 * value - star.mean()
        spread = 1.96 * star.std(ddof=1)
        hits["basic"].append((2 * value - hi_q, 2 * value - lo_q))
        hits["bias-corrected"].append((centre - spread, centre + spread))
        values.append(value)
    out = {"truth": truth, "bias": float(np.mean(values)) - truth,
           "folded": folded_bias((p + q) / 2, n)}
    for method, bounds in hits.items():
        lo, hi = np.array(bounds).T
        out[method] = (float(np.mean((lo <= truth) & (truth <= hi))), float(np.mean(hi - lo)),
                       float(np.mean(lo > 0)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--boot", type=int, default=200)
    args = parser.parse_args()
    reps, boot = (60, 100) if args.quick else (args.reps, args.boot)
    rng = np.random.default_rng(20261127)
    check_against_madd(rng, 35)
    started = time.perf_counter()
    print(f"{reps} windows per cell, {boot} bootstrap resamples each; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("\n## MADD bootstrap intervals\n")
    print("| rows per group, bins | truth | mean bias | folded bias | method | coverage | "
          "mean width | lower > 0 |")
    print("|---|---|---|---|---|---|---|---|")
    for shape in ("gap", "parity"):
        for n, k in CELLS:
            r = cell(n, k, shape, reps, boot, rng)
            for method in ("basic", "bias-corrected"):
                cover, width, above = r[method]
                folded = f"{r['folded']:.3f}" if shape == "parity" else "-"
                print(f"| {n}, {k} ({shape}) | {r['truth']:.3f} | {r['bias']:.3f} | "
                      f"{folded} | {method} | {cover:.2f} | {width:.2f} | "
                      f"{above:.2f} |", flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s; load average at the end "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
