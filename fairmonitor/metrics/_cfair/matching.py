"""Matching kernels behind CFair (:mod:`fairmonitor.metrics._cfair.cfair`): numpy only.

One binary comparison matches every unit of the smaller side ("G0") to one unit of the other
side ("G1") in two steps (paper 004, §3.2 and App. C):

1. a **caliper** on propensity logits: a G1 unit is a candidate for a G0 unit when
   ``s0 - delta <= s1 <= s0 + delta``, i.e. ``|s0 - s1| <= delta`` up to float rounding
   (Def. 3.1 uses ``<=``; it also keeps tied logits matchable when ``delta`` is 0).
   ``delta`` is a quantile of ``|s0 - s1|`` over *all* ``N0 * N1`` cross pairs, computed
   exactly without materialising them (:func:`pair_quantile`);
2. among the candidates, the one at the smallest **Mahalanobis** distance
   ``(x - x')^T W (x - x')``. ``W`` is the inverse of the pooled covariance of the caliper
   survivors, each side weighted equally (:func:`pooled_whitening`, the paper's initialisation),
   or optionally refined by :func:`learn_metric`.

The search is exact and never allocates ``N0 x N1``: both sides are sorted by logit, G0 is
processed in blocks, each block is compared (one float64 GEMM) with the contiguous run of G1
units its logits can reach, and pairs outside the caliper are masked (spec §2 step 7, §7).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["learn_metric", "metric_loss", "nearest_counterparts", "pair_quantile",
           "pooled_whitening", "survivors"]

#: Cells (G0 block rows x G1 window columns) per distance block: 4M float64 = 32 MB.
_BLOCK_CELLS = 4_000_000
#: Largest G0 block; smaller blocks keep each block's logit window (hence wasted work) narrow.
_MAX_BLOCK = 512
#: Up to this many nearest candidates, repeated argmin is faster than argpartition.
_ARGMIN_K = 4


def _count_within(s0: NDArray[np.float64], s1_sorted: NDArray[np.float64], t: float) -> int:
    """Count the cross pairs with ``|s0 - s1| <= t`` (two binary searches per G0 unit)."""
    hi = np.searchsorted(s1_sorted, s0 + t, side="right")
    lo = np.searchsorted(s1_sorted, s0 - t, side="left")
    return int((hi - lo).sum())


def pair_quantile(s0: NDArray[np.float64], s1: NDArray[np.float64], q: float) -> float:
    """Return the ``q`` quantile of ``|s0_i - s1_j|`` over all cross pairs (``inverted_cdf``).

    Equals ``np.quantile(np.abs(s0[:, None] - s1[None, :]), q, method="inverted_cdf")``, the
    smallest pair difference whose empirical CDF reaches ``q``, in O((N0 + N1) log N1) memory
    and ~100 bisection steps of O(N0 log N1) each, instead of O(N0 N1).
    """
    s1s = np.sort(s1)
    total = s0.size * s1s.size
    k = min(max(math.ceil(total * q), 1), total)  # the k-th smallest difference (numpy's rule)
    if _count_within(s0, s1s, 0.0) >= k:
        return 0.0
    lo, hi = 0.0, float(max(s1s[-1] - s0.min(), s0.max() - s1s[0]))
    for _ in range(200):
        mid = lo + (hi - lo) / 2
        if mid <= lo or mid >= hi:
            break
        if _count_within(s0, s1s, mid) >= k:
            hi = mid
        else:
            lo = mid
    # snap to an actual pair difference: the k-th lies within float rounding of ``hi`` (the
    # counts compare s1 with s0 +- t, the difference is computed as |s1 - s0|), at one end of
    # some unit's window; take the window-end difference closest to ``hi``
    right = np.searchsorted(s1s, s0 + hi, side="right") - 1
    left = np.searchsorted(s1s, s0 - hi, side="left")
    ends = [np.abs(s1s[idx[ok]] - s0[ok])
            for idx in (right, left) if (ok := (idx >= 0) & (idx < s1s.size)).any()]
    diffs = np.concatenate(ends) if ends else np.array([hi])
    return float(diffs[np.argmin(np.abs(diffs - hi))])


def survivors(s0: NDArray[np.float64], s1: NDArray[np.float64], delta: float
              ) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Masks of the G0 units with at least one candidate, and of the G1 units that are one."""
    s0s, s1s = np.sort(s0), np.sort(s1)
    has0 = (np.searchsorted(s1s, s0 + delta, side="right")
            > np.searchsorted(s1s, s0 - delta, side="left"))
    has1 = (np.searchsorted(s0s, s1 + delta, side="right")
            > np.searchsorted(s0s, s1 - delta, side="left"))
    return has0, has1


def pooled_whitening(z0: NDArray[np.float64], z1: NDArray[np.float64]) -> NDArray[np.float64]:
    """``L`` with ``L L^T = W0 = inv(Cov_w + lambda I)``: the paper's Mahalanobis matrix.

    ``Cov_w`` is the covariance of the stacked rows with weight ``1/(2 N0)`` per G0 row and
    ``1/(2 N1)`` per G1 row (both sides count equally, as the reference code's ``aweights``),
    ``ddof=0``; the ridge ``lambda = 1e-6 tr(Cov_w)/p`` keeps it invertible (spec §2 step 6).
    Distances are then ``||(x - x') L||^2``.
    """
    p = z0.shape[1]
    if z0.shape[0] == 0 or z1.shape[0] == 0 or p == 0:
        return np.eye(p)
    rows = np.vstack([z0, z1])
    weights = np.concatenate([np.full(len(z0), 0.5 / len(z0)), np.full(len(z1), 0.5 / len(z1))])
    mean = weights @ rows
    centred = rows - mean
    cov = (centred * weights[:, None]).T @ centred
    trace = float(np.trace(cov))
    if trace <= 0:
        return np.eye(p)
    eigval, eigvec = np.linalg.eigh(cov)
    ridge = 1e-6 * trace / p
    return eigvec / np.sqrt(np.maximum(eigval, 0.0) + ridge)


def _blocks(s0_sorted: NDArray[np.float64], delta: float, lo: NDArray[np.intp],
            hi: NDArray[np.intp]):
    """Consecutive G0 blocks (in logit order) for the blocked search.

    A block spans at most ``delta`` in logit, so its shared window (the union of its units'
    windows) is at most ~1.5 times a unit's own: little wasted distance work. It holds at most
    ``_MAX_BLOCK`` units and ``_BLOCK_CELLS`` distance cells (memory).
    """
    n, a = lo.size, 0
    while a < n:
        b = min(n, a + _MAX_BLOCK,
                int(np.searchsorted(s0_sorted, s0_sorted[a] + delta, side="right")))
        b = max(b, a + 1)
        while b - a > 1 and (b - a) * (hi[b - 1] - lo[a]) > _BLOCK_CELLS:
            b = a + (b - a) // 2
        yield a, b
        a = b


def _topk(y0: NDArray[np.float64], s0: NDArray[np.float64], y1: NDArray[np.float64],
          s1: NDArray[np.float64], delta: float, k: int,
          available: NDArray[np.bool_] | None = None
          ) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.float64]]:
    """Find the ``k`` nearest caliper candidates of every G0 unit, as (i, j, squared distance).

    Exact: a candidate is any (``available``) G1 unit with ``s0 - delta <= s1 <= s0 + delta``;
    the distance is ``||y0 - y1||^2`` on whitened rows. Ties go to the lower logit rank, then
    the lower row index (stable sorts), so results are deterministic. Each unit's candidates
    come out as one contiguous run, nearest first.
    """
    order0 = np.argsort(s0, kind="stable")
    order1 = np.argsort(s1, kind="stable")
    if available is not None:
        order1 = order1[available[order1]]
    s0s, s1s = s0[order0], s1[order1]
    # rank candidates by ||y1||^2 - 2 y0.y1 (||y0||^2 is constant along a row): one GEMM of
    # [-2 y0, 1] with [y1, ||y1||^2]
    y1s = y1[order1]
    y1aug = np.hstack([y1s, np.einsum("ij,ij->i", y1s, y1s)[:, None]])
    y0aug = np.hstack([-2.0 * y0, np.ones((y0.shape[0], 1))])
    lo = np.searchsorted(s1s, s0s - delta, side="left")
    hi = np.searchsorted(s1s, s0s + delta, side="right")
    out_i, out_j, out_d = [], [], []
    for a, b in _blocks(s0s, delta, lo, hi):
        wlo, whi = int(lo[a]), int(hi[b - 1])
        if whi <= wlo:
            continue
        rows = order0[a:b]
        score = y0aug[rows] @ y1aug[wlo:whi].T
        # the window is the union of the block's windows: blank each row's out-of-caliper ends
        for r, (first, last) in enumerate(zip((lo[a:b] - wlo).tolist(),
                                              (hi[a:b] - wlo).tolist(), strict=True)):
            score[r, :first] = np.inf
            score[r, last:] = np.inf
        kk = min(k, whi - wlo)
        if kk <= _ARGMIN_K:
            # kk argmin passes beat one argpartition pass (~6x slower per cell) for small kk;
            # each pass takes the nearest remaining candidate (ties: first window position)
            idx = np.empty((b - a, kk), dtype=np.intp)
            best = np.empty((b - a, kk))
            all_rows = np.arange(b - a)
            for t in range(kk):
                idx[:, t] = np.argmin(score, axis=1)
                best[:, t] = score[all_rows, idx[:, t]]
                score[all_rows, idx[:, t]] = np.inf
        else:
            part = np.argpartition(score, kk - 1, axis=1)[:, :kk]
            # stable order among the k: by distance, then window position
            sub = np.lexsort((part, np.take_along_axis(score, part, axis=1)), axis=1)
            idx = np.take_along_axis(part, sub, axis=1)
            best = np.take_along_axis(score, idx, axis=1)
        r, c = np.nonzero(np.isfinite(best))
        out_i.append(rows[r])
        out_j.append(order1[wlo + idx[r, c]])
        # add ||y0||^2 back; round-off can leave an exact duplicate slightly below 0
        yb = y0[rows[r]]
        out_d.append(np.maximum(best[r, c] + np.einsum("ij,ij->i", yb, yb), 0.0))
    if not out_i:
        empty = np.empty(0, dtype=np.intp)
        return empty, empty.copy(), np.empty(0)
    return np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_d)


def nearest_counterparts(y0: NDArray[np.float64], s0: NDArray[np.float64],
                         y1: NDArray[np.float64], s1: NDArray[np.float64], delta: float,
                         *, replace: bool = True, k: int = 4) -> NDArray[np.intp]:
    """One counterpart per G0 unit: the G1 index, or -1 when it has none.

    ``replace=True`` (the reference code): every G0 unit takes its own nearest candidate, so a
    G1 unit may serve several G0 units. ``replace=False`` (the strict 1-1 reading of Def. 3.4):
    a global greedy over ``(distance, i, j)``-sorted candidate triples accepts a pair when both
    units are free; units whose ``k`` candidates were all taken search again among the free G1
    units, until no unit can be matched.
    """
    match = np.full(s0.size, -1, dtype=np.intp)
    if replace:
        i, j, _ = _topk(y0, s0, y1, s1, delta, 1)
        match[i] = j
        return match
    free = np.ones(s1.size, dtype=bool)
    active = np.arange(s0.size)
    while active.size:
        i, j, d = _topk(y0[active], s0[active], y1, s1, delta, k, available=free)
        if i.size == 0:
            break
        i = active[i]
        per_unit = np.bincount(i, minlength=s0.size)
        order = np.lexsort((j, i, d))
        for a, b in zip(i[order].tolist(), j[order].tolist(), strict=True):
            if match[a] < 0 and free[b]:
                match[a] = b
                free[b] = False
        # an unmatched unit with k candidates may have more beyond them; fewer means none left
        active = np.flatnonzero((match < 0) & (per_unit >= k))
    return match


def metric_loss(w: NDArray[np.float64], diffs: NDArray[np.float64], mask: NDArray[np.bool_]
                ) -> tuple[float, NDArray[np.float64]]:
    """Eq. (7) of paper 004 and its gradient in ``W``.

    ``diffs[n, k]`` is ``x_n - x'_k`` for the ``k``-th candidate of G0 unit ``n`` (``mask``
    marks real candidates). ``s = d^T W d``, ``alpha = softmax(-s)`` over each unit's
    candidates, loss ``= sum_n sum_k alpha_nk s_nk`` and
    ``dLoss/dW = sum_nk g_nk d d^T`` with ``g = alpha (1 - s + sum_k alpha s)``.
    The paper's ``epsilon_0`` in the softmax denominator only guards a division that the
    max-shifted softmax never risks, so it is left out (the gradient is then exact).
    """
    s = ((diffs @ w) * diffs).sum(axis=-1)
    shifted = np.where(mask, -s, -np.inf)
    shifted -= shifted.max(axis=1, keepdims=True)
    e = np.where(mask, np.exp(shifted), 0.0)
    alpha = e / e.sum(axis=1, keepdims=True)
    s = np.where(mask, s, 0.0)
    sbar = (alpha * s).sum(axis=1, keepdims=True)
    g = alpha * (1.0 - s + sbar)
    flat = diffs.reshape(-1, diffs.shape[-1])
    return float((alpha * s).sum()), (flat * g.reshape(-1, 1)).T @ flat


def learn_metric(z0: NDArray[np.float64], s0: NDArray[np.float64], z1: NDArray[np.float64],
                 s1: NDArray[np.float64], delta: float, whitening: NDArray[np.float64],
                 rng: np.random.Generator, *, max_units: int = 5000, top: int = 50,
                 lr: float = 1e-4, iterations: int = 100) -> NDArray[np.float64]:
    """Refine ``W0 = L L^T`` by projected gradient descent on eq. (7); return the new ``L``.

    The paper's values (learning rate 1e-4, 100 iterations, from ``W0``). Its loss is unbounded
    below once ``W`` is indefinite and goes to 0 as ``W -> 0`` (spec §1.3), so after each step
    ``W`` is symmetrised, its eigenvalues clipped to ``>= 1e-6 tr(W0)/p`` and rescaled to
    ``tr(W) = tr(W0)``. Trained on at most ``max_units`` sampled G0 units with their ``top``
    nearest candidates under ``W0``. Experimental: it did not improve balance in the spec's
    measurements.
    """
    p = z0.shape[1]
    if p == 0:
        return whitening
    w0 = whitening @ whitening.T
    y0, y1 = z0 @ whitening, z1 @ whitening
    cap = max(1, min(max_units, 5_000_000 // max(1, top * p)))
    units = np.arange(s0.size)
    if units.size > cap:
        units = np.sort(rng.choice(units, cap, replace=False))
    i, j, _ = _topk(y0[units], s0[units], y1, s1, delta, top)
    if i.size == 0:
        return whitening
    # _topk returns each unit's candidates as one contiguous run: slot = run, rank = position
    starts = np.r_[True, i[1:] != i[:-1]]
    slot = np.cumsum(starts) - 1
    rank = np.arange(i.size) - np.flatnonzero(starts)[slot]
    diffs = np.zeros((int(slot[-1]) + 1, top, p))
    mask = np.zeros((int(slot[-1]) + 1, top), dtype=bool)
    diffs[slot, rank] = z0[units][i] - z1[j]
    mask[slot, rank] = True
    trace0 = float(np.trace(w0))
    floor = 1e-6 * trace0 / p
    w = w0.copy()
    for _ in range(iterations):
        _, grad = metric_loss(w, diffs, mask)
        w = w - lr * grad
        w = (w + w.T) / 2
        eigval, eigvec = np.linalg.eigh(w)
        eigval = np.maximum(eigval, floor)
        eigval *= trace0 / eigval.sum()
        w = (eigvec * eigval) @ eigvec.T
    eigval, eigvec = np.linalg.eigh((w + w.T) / 2)
    return eigvec * np.sqrt(np.maximum(eigval, 0.0))
