"""ABCC's and ABPC's compiled kernels (numba): the W1 pass over two sorted groups, the binning.

Both were block-wise numpy passes: ABCC's sum over one pair of groups ~15 passes over block
temporaries (a division and a floor per step, two gathers, two products, two sums), ABPC's
binning of one group ~10 (floor, fraction, two clips, two weighted ``np.bincount`` calls, the
additions into the grid), and its bandwidth rule's ``std`` four passes and an n-long temporary.
Compiled, each is one pass over the rows (``std`` two) with nothing n-long allocated: at 10^6
rows with an intersection of 10 groups, ABCC's 56 pairs and ABPC's binning take a few sorts'
time instead of ~16.

**Bit for bit the numpy results.** No fast-math (LLVM neither reassociates nor fuses a
multiply-add then), and every float operation is the one numpy performed, in the same order:

* Sums are numpy's pairwise summation (:func:`_pairwise_terms`, each leaf summed by MADD's
  :func:`.madd._block_sum`: halves rounded down to multiples of
  8 down to leaves of at most 128 terms, 8 accumulators per leaf, started from the identity
  0.0); each leaf's terms are computed into a 128-long buffer just
  before it is summed (:func:`_leaf_terms`), so no longer term array exists. :func:`w1_units`
  sums each block of ``block`` x-steps so, the block's first-part terms then its second-part
  terms added to the running total, block after block, as the numpy loop did;
  :func:`mean_abs_gap` is ``np.abs(a - b).mean()`` and :func:`std` is ``values.std(ddof=ddof)``
  (numpy's ``_var``: mean, then the squared deviations from it).
* W1's step arithmetic is integer (uint64): the former float64 branch (below 2^52 units)
  computed the same integers exactly, and y's step index advances by at most one per x-step
  (``uy >= ux``), so a comparison per step replaces the division.
* :func:`linear_binning` adds, per block of ``block`` rows, the left weights ``1 - frac`` and
  the right weights ``frac`` of the block's rows, each in row order from 0.0 (as
  ``np.bincount`` accumulates them), then each cell's two block totals into the grid, left first
  (as ``w += left; w += right`` did). Only the cells the block touched are added: the others
  would add +0.0 to a non-negative weight, which changes no bit.

``tests/metrics/test_abpc_abcc.py`` keeps the numpy versions as oracles.

numba is already a dependency (HFM's ApproxDist, MADD); this module is imported only when an
ABCC pair, an ABPC bandwidth or density is computed, so ``import fairmonitor`` does not load
numba.
"""

from __future__ import annotations

import numpy as np

from . import compiled
from .madd import _block_sum

__all__ = ["is_sorted", "linear_binning", "mean_abs_gap", "std", "w1_units"]

#: numpy's pairwise summation: leaves of at most this many terms, 8 accumulators each.
_LEAF = 128
#: The terms a pairwise sum adds (see :func:`_leaf_terms`).
_VALUE, _SQUARED, _GAP, _STEPS = 0, 1, 2, 3


@compiled
def _leaf_terms(kind, x, y, k0, count, ux, uy, center, first, second):  # pragma: no cover
    """Write the terms of steps ``k0 .. k0 + count - 1`` into ``first`` (and ``second``).

    ``kind`` picks them: ``_VALUE`` ``x[k]``, ``_SQUARED`` ``(x[k] - center)**2``, ``_GAP``
    ``|x[k] - y[k]|``, ``_STEPS`` the W1 step terms: x-step k spans the units
    ``[k ux, (k + 1) ux)``; y's step there is ``q = k ux // uy`` up to y's next breakpoint
    ``(q + 1) uy`` (``first``), and ``q + 1`` after it (``second``; zero length where the
    x-step ends first, or where y has no next value).
    """
    one = np.uint64(1)
    k = np.uint64(k0)  # unsigned indices: numba adds no negative-index wraparound to the loads
    if kind == _VALUE:
        for i in range(count):
            first[i] = x[k]
            k += one
    elif kind == _SQUARED:
        for i in range(count):
            d = x[k] - center
            first[i] = d * d
            k += one
    elif kind == _GAP:
        for i in range(count):
            first[i] = abs(x[k] - y[k])
            k += one
    else:
        last = np.uint64(y.size - 1)
        step_x, step_y = np.uint64(ux), np.uint64(uy)
        whole = np.float64(np.int64(ux))  # from int64: one instruction, unlike from uint64
        start = k * step_x
        q = start // step_y  # one division per leaf; then at most one step per x-step
        nxt = (q + one) * step_y
        for i in range(count):
            if start >= nxt:  # ux <= uy: y advances by at most one step
                q += one
                nxt += step_y
            length = np.float64(np.int64(min(nxt - start, step_x)))
            xv = x[k]
            first[i] = abs(xv - y[q]) * length
            second[i] = abs(xv - y[min(q + one, last)]) * (whole - length)  # exact: integers
            start += step_x
            k += one


@compiled
def _pairwise_terms(kind, x, y, k0, count, ux, uy, center, first, second):  # pragma: no cover
    """``np.sum`` of the terms (see :func:`_leaf_terms`) of steps ``k0 .. k0 + count - 1``.

    Returns the sums of ``first`` and of ``second`` (0.0 unless ``kind == _STEPS``). numpy's
    pairwise tree (halves rounded down to multiples of 8 until at most 128 terms) over both
    term arrays at once, which have the same length, so the same tree; the leaves are computed
    on the fly into the 128-long ``first`` and ``second``. An explicit stack, not recursion:
    numba's on-disk cache of a recursive function crashes when a call site types an argument
    differently (numba issue 6061).
    """
    # node stack (start, count, halves summed?) and value stack: depth <= 64, 2 nodes a level
    node_lo = np.empty(130, np.int64)
    node_n = np.empty(130, np.int64)
    node_done = np.empty(130, np.bool_)
    sums1 = np.empty(66)
    sums2 = np.empty(66)
    node_lo[0], node_n[0], node_done[0] = k0, count, False
    nodes = 1
    values = 0
    while nodes > 0:
        nodes -= 1
        lo, n, done = node_lo[nodes], node_n[nodes], node_done[nodes]
        if n <= _LEAF:
            _leaf_terms(kind, x, y, lo, n, ux, uy, center, first, second)
            sums1[values] = _block_sum(first, 0, n)
            sums2[values] = _block_sum(second, 0, n) if kind == _STEPS else 0.0
            values += 1
        elif done:  # both halves summed: the left's value lies below the right's
            values -= 1
            sums1[values - 1] = sums1[values - 1] + sums1[values]
            sums2[values - 1] = sums2[values - 1] + sums2[values]
        else:
            half = n // 2
            half -= half % 8
            node_lo[nodes], node_n[nodes], node_done[nodes] = lo, n, True
            node_lo[nodes + 1], node_n[nodes + 1] = lo + half, n - half
            node_lo[nodes + 2], node_n[nodes + 2] = lo, half
            node_done[nodes + 1] = node_done[nodes + 2] = False
            nodes += 3  # the left half is popped (summed) first
    return sums1[0], sums2[0]


@compiled
def w1_units(x, y, ux, uy, block):  # pragma: no cover - compiled
    """``∫|Q_x − Q_y|`` in units of ``1 / lcm``: x has the more points, ``ux = lcm / x.size``.

    The former numpy loop's total, block of ``block`` x-steps after block, to the last bit.
    """
    n = x.size
    first = np.empty(_LEAF)
    second = np.empty(_LEAF)
    total = 0.0
    for lo in range(0, n, block):
        s1, s2 = _pairwise_terms(_STEPS, x, y, lo, min(block, n - lo), ux, uy, 0.0, first,
                                 second)
        total += 0.0 + s1  # np.sum starts from the identity
        total += 0.0 + s2
    return total


@compiled
def mean_abs_gap(a, b):  # pragma: no cover - compiled
    """``np.abs(a - b).mean()`` of two equally long arrays, to the last bit."""
    terms = np.empty(_LEAF)
    total, _ = _pairwise_terms(_GAP, a, b, 0, a.size, 0, 0, 0.0, terms, terms)
    return (0.0 + total) / np.float64(a.size)


@compiled
def std(values, ddof):  # pragma: no cover - compiled
    """``values.std(ddof=ddof)`` (``values.size > ddof``), to the last bit, with no temporary.

    numpy's ``_var``: the pairwise sum divided by n is the mean, then the pairwise sum of the
    squared deviations divided by ``n - ddof``, then the square root.
    """
    n = values.size
    terms = np.empty(_LEAF)
    total, _ = _pairwise_terms(_VALUE, values, values, 0, n, 0, 0, 0.0, terms, terms)
    mean = (0.0 + total) / np.float64(n)
    squares, _ = _pairwise_terms(_SQUARED, values, values, 0, n, 0, 0, mean, terms, terms)
    return np.sqrt((0.0 + squares) / np.float64(n - ddof))


@compiled
def is_sorted(values):  # pragma: no cover - compiled
    """Tell whether ascending; blocks of 1024 without an early exit, so the loop vectorizes."""
    n = values.size
    for lo in range(1, n, 1024):
        ascending = True
        for i in range(lo, min(lo + 1024, n)):
            ascending &= values[np.uintp(i)] >= values[np.uintp(i - 1)]
        if not ascending:
            return False
    return True


@compiled
def linear_binning(scores, cells, block):  # pragma: no cover - compiled
    """:func:`~fairmonitor.metrics._abpc_abcc.kde.linear_binning`'s weights, bit for bit.

    Per row, numpy's arithmetic: ``u = x * cells - 0.5``, ``left = floor(u)``, ``frac = u -
    left``; weight ``1 - frac`` to cell ``clip(left)``, ``frac`` to ``clip(left + 1)``.
    Scores must lie in [0, 1] (weights non-negative).
    """
    w = np.zeros(cells)
    left_w = np.zeros(cells)  # the block's two bincounts, zeroed again after each block
    right_w = np.zeros(cells)
    g = np.float64(cells)
    top = cells - 1
    n = scores.size
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        low_cell = top
        high_cell = 0
        for i in range(lo, hi):
            u = scores[np.uintp(i)] * g - 0.5
            left = np.floor(u)
            frac = u - left
            j = np.intp(left)
            a = min(max(j, 0), top)
            b = min(max(j + 1, 0), top)
            left_w[np.uintp(a)] += 1.0 - frac  # unsigned: no negative-index wraparound
            right_w[np.uintp(b)] += frac
            low_cell = min(low_cell, a)
            high_cell = max(high_cell, b)
        for c in range(low_cell, high_cell + 1):  # b >= a: every touched cell
            w[c] = (w[c] + left_w[c]) + right_w[c]
            left_w[c] = 0.0
            right_w[c] = 0.0
    return w
