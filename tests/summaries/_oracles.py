"""numpy references of the summaries' compiled ABCC (:mod:`fairmonitor._kernels.cells`).

The package computes ABCC from cells in one place, the compiled table of
``summaries.compute._AbccTable``; these are the numpy formulas it was derived from, kept
here as the tests' oracles (values compared within a stated tolerance).
"""

from __future__ import annotations

import numpy as np


def union(ia, ib, size):
    """Sorted union of two sets of cell indices, and where each set's cells sit in it.

    A mark per cell (O(cells), no sort of the indices): much faster than np.union1d here.
    """
    mark = np.zeros(size, dtype=bool)
    mark[ia] = True
    mark[ib] = True
    cells = np.flatnonzero(mark)
    position = np.cumsum(mark) - 1
    return cells, position[ia], position[ib]


def abcc_cells(a, b, edges):
    """ABCC of two groups from their non-empty cells, and its certified error."""
    ia, ca, sa, la, ha = a.sparse_cells(edges)
    ib, cb, sb, lb, hb = b.sparse_cells(edges)
    # cells where either group has scores; between them both CDFs are flat
    cells, pa, pb = union(ia, ib, edges.size - 1)
    count_a, count_b = np.zeros(cells.size), np.zeros(cells.size)
    sum_a, sum_b = np.zeros(cells.size), np.zeros(cells.size)
    count_a[pa], sum_a[pa] = ca, sa
    count_b[pb], sum_b[pb] = cb, sb
    left, right = edges[cells], edges[cells + 1]
    # each group's scores in a cell lie in [its min, its max] (the cell's edges if empty)
    low_a, high_a, low_b, high_b = left.copy(), right.copy(), left.copy(), right.copy()
    low_a[pa], high_a[pa], low_b[pb], high_b[pb] = la, ha, lb, hb
    d0 = (np.cumsum(count_a) - count_a) / a.n - (np.cumsum(count_b) - count_b) / b.n
    # the flat stretch before each non-empty cell (from the previous one's right edge)
    gaps = left - np.r_[0.0, right[:-1]]
    flat = float(np.abs(d0 * gaps).sum())
    ma, mb = count_a / a.n, count_b / b.n
    signed = (d0 * (right - left) + (count_a * right - sum_a) / a.n
              - (count_b * right - sum_b) / b.n)
    lower, upper = d0 - mb, d0 + ma  # F_a - F_b stays within [d0 - mb, d0 + ma] in the cell
    fixed = (lower >= 0) | (upper <= 0)  # no sign change: the integral is exact
    exact = float(np.abs(signed[fixed]).sum())
    # Where the CDFs may cross, two estimates with certified errors; each cell takes the
    # tighter. (1) |∫g| <= ∫|g| <= width * max|g|: the midpoint, error half the gap.
    amb = ~fixed
    lo = np.abs(signed[amb])
    hi = (right - left)[amb] * np.maximum(np.abs(lower[amb]), np.abs(upper[amb]))
    mid, mid_err = (lo + hi) / 2, (hi - lo) / 2
    # (2) each group's mass in the cell moved to its mean (a step of g there): off by at most
    # the mean absolute deviation of the cell's scores / n, which is <= 2 c (mu - lo)(hi - mu)
    # / ((hi - lo) n) for scores in [lo, hi] (the group's min and max in the cell) with mean
    # mu: 0 where a group's scores in the cell are all equal (rounded scores).
    lo_edge, r, d = left[amb], right[amb], d0[amb]
    ja, jb = ma[amb], mb[amb]
    with np.errstate(invalid="ignore", divide="ignore"):
        mu_a = np.clip(np.where(count_a[amb] > 0, sum_a[amb] / count_a[amb], lo_edge), lo_edge, r)
        mu_b = np.clip(np.where(count_b[amb] > 0, sum_b[amb] / count_b[amb], lo_edge), lo_edge, r)
    first, second = np.minimum(mu_a, mu_b), np.maximum(mu_a, mu_b)
    between = np.where(mu_a <= mu_b, d + ja, d - jb)
    step = (np.abs(d) * (first - lo_edge) + np.abs(between) * (second - first)
            + np.abs(d + ja - jb) * (r - second))
    step_err = spread(ja, mu_a, low_a[amb], high_a[amb]) + spread(jb, mu_b, low_b[amb],
                                                                    high_b[amb])
    use_step = step_err < mid_err
    estimate = np.where(use_step, step, mid)
    error = np.where(use_step, step_err, mid_err)
    return flat + exact + float(estimate.sum()), float(error.sum())


def spread(mass, mu, lo, hi):
    """Largest mean absolute deviation x mass of scores in [lo, hi] with mean mu."""
    mu = np.clip(mu, lo, hi)
    width = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(width > 0, 2 * mass * (mu - lo) * (hi - mu) / width, 0.0)


def cells_of(sorted_scores, edges):
    """Non-empty cells of sorted scores (index, count, sum, min, max) by numpy's searches.

    Many scores: the edges among the scores; few: the scores among the edges; a cell's sum
    by ``np.add.reduceat``.
    """
    n = sorted_scores.size
    if not n:
        return (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64), np.zeros(0),
                np.zeros(0), np.zeros(0))
    if n * 16 >= edges.size:
        below = np.searchsorted(sorted_scores, edges)  # scores < each edge
        below[-1] = n  # 1.0 belongs to the last (closed) cell
        counts = np.diff(below)
        index = np.flatnonzero(counts)
        counts = counts[index].astype(np.int64)
        starts = below[index]
    else:
        cell = np.searchsorted(edges, sorted_scores, side="right") - 1
        np.minimum(cell, edges.size - 2, out=cell)  # 1.0 belongs to the last (closed) cell
        starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
        counts = np.diff(np.r_[starts, n]).astype(np.int64)
        index = cell[starts]
    sums = np.add.reduceat(sorted_scores, starts)
    return (index.astype(np.int32), counts, sums, sorted_scores[starts],
            sorted_scores[starts + counts - 1])
