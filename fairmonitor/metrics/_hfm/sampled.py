"""Average HFM from a uniform sample of query rows, each scanned exactly against every row.

The average distance of one attribute is a population mean, ``D_avg = mean_k delta_k`` over
the ``N`` kept rows (spec ``hfm.md`` Eq. 5, average version). Drawing ``q`` query rows
uniformly without replacement and computing each one's ``delta_k`` **exactly** (its nearest row
of another group among all ``N`` rows, with :meth:`FeatureSpace.sqdist`, the same function the
exact path uses, so a sampled row's distance is bit-for-bit the exact one) gives a sample mean
that is unbiased for ``D_avg``, at ``O(q N)`` instead of ``O(N^2)``. Its standard error is the
sample standard deviation over ``sqrt(q)`` with the finite-population correction
``sqrt(1 - q/N)``; with ``q >= N`` every row is a query and the result is exact.

``D`` and ``D_f`` use the *same* query rows (common random numbers), so their errors are
positively correlated and the log-ratio's delta-method interval is narrower than either mean's.
``log10(mean_f / mean)`` is consistent, not unbiased (a ratio of means); its bias is
``O(1/q)``, well inside the interval for the default ``q``.

The maximal version (a max over every row) cannot be estimated from a sample: it is not
computed here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .exact import FeatureSpace

__all__ = ["SampledAverage", "average_of_distances", "log_ratio_interval", "nearest_sqdist",
           "sampled_average_distances"]

#: Float64 elements of one distance block (32 MiB).
_BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True, slots=True)
class SampledAverage:
    """Sampled average distances of one attribute, with their sampling (co)variances.

    Attributes
    ----------
    mean_true, mean_pred : float
        Mean nearest cross-group distance of the query rows, labels and predictions.
    var_true, var_pred, cov : float
        Variances of the two means and their covariance (finite-population corrected).
    n_queries, n_rows : int
        Query rows drawn, and the rows they were drawn from.
    """

    mean_true: float
    mean_pred: float
    var_true: float
    var_pred: float
    cov: float
    n_queries: int
    n_rows: int


def sampled_average_distances(
    space: FeatureSpace,
    label_true: NDArray[np.float64],
    label_pred: NDArray[np.float64],
    attributes: NDArray[np.intp],
    *,
    n_queries: int,
    rng: np.random.Generator,
) -> list[SampledAverage]:
    """Return the sampled average cross-group nearest distances, one per attribute (column).

    Parameters
    ----------
    space : FeatureSpace
        The non-sensitive features.
    label_true, label_pred : ndarray of shape (n,)
        Class codes of the labels and the predictions, as floats.
    attributes : ndarray of shape (n, n_attributes)
        Group code of each row per attribute; ``-1`` leaves the row out of that attribute.
    n_queries : int
        Query rows per attribute (all kept rows when there are fewer).
    rng : numpy.random.Generator
        Draws the query rows.

    Returns
    -------
    averages : list of SampledAverage
    """
    out = []
    for s in range(attributes.shape[1]):
        codes = attributes[:, s]
        kept = np.flatnonzero(codes >= 0)
        n = kept.size
        q = min(n_queries, n)
        queries = kept if q == n else np.sort(rng.choice(kept, size=q, replace=False))
        delta = np.sqrt(nearest_sqdist(space, label_true, label_pred, codes, queries, kept))
        out.append(average_of_distances(delta, n))
    return out


def nearest_sqdist(
    space: FeatureSpace,
    label_true: NDArray[np.float64],
    label_pred: NDArray[np.float64],
    codes: NDArray[np.intp],
    queries: NDArray[np.intp],
    candidates: NDArray[np.intp],
) -> NDArray[np.float64]:
    """Squared distance of each query row to its nearest candidate row of another group.

    Parameters
    ----------
    space : FeatureSpace
        The features of every row (queries and candidates index into it).
    label_true, label_pred : ndarray of shape (n,)
        Class codes of the labels and the predictions, as floats.
    codes : ndarray of shape (n,)
        Group code of each row for one attribute; a candidate of the query's own group is
        never its neighbour.
    queries, candidates : ndarray of int
        Rows measured, and the rows they are measured against.

    Returns
    -------
    sqdist : ndarray of shape (2, n_queries)
        With the labels (row 0) and the predictions (row 1); ``inf`` where no candidate is of
        another group. The minimum over candidates is taken before any square root, so the
        minimum of the minima over parts of the candidates (a Spark partition's rows) is the
        minimum over all of them, bit for bit.
    """
    q = queries.size
    out = np.full((2, q), np.inf)
    if not candidates.size or not q:
        return out
    zero = np.zeros(space.n_samples)
    block = max(1, _BLOCK_ELEMENTS // candidates.size)
    for start in range(0, q, block):
        rows = queries[start : start + block]
        # feature part once; the two label versions differ only in the label term
        base = space.sqdist(rows[:, None], candidates[None, :], zero)
        base[codes[candidates][None, :] == codes[rows][:, None]] = np.inf  # same group: no
        for v, label in enumerate((label_true, label_pred)):
            term = label[candidates][None, :] - label[rows][:, None]
            out[v, start : start + rows.size] = (base + term * term).min(axis=1)
    return out


def average_of_distances(delta: NDArray[np.float64], n: int) -> SampledAverage:
    """Means and (co)variances of the query rows' distances ``delta`` (shape ``(2, q)``).

    ``n`` is the number of rows the ``q`` queries were drawn from, uniformly without
    replacement: the variances carry the finite-population correction ``1 - q/n`` (0 when
    every row is a query).
    """
    q = delta.shape[1]
    fpc = (1.0 - q / n) / q  # finite-population correction over q
    if q > 1:
        cov = np.cov(delta, ddof=1)
        var_t, var_p, c = cov[0, 0] * fpc, cov[1, 1] * fpc, cov[0, 1] * fpc
    else:
        var_t = var_p = c = float("nan") if q < n else 0.0
    return SampledAverage(float(delta[0].mean()), float(delta[1].mean()), float(var_t),
                          float(var_p), float(c), q, n)


def log_ratio_interval(mean_true: float, mean_pred: float, var_true: float, var_pred: float,
                       cov: float) -> tuple[float, float]:
    """95% delta-method interval of ``log10(mean_pred / mean_true)``.

    ``Var(ln(P/T)) ~ Var(P)/P^2 + Var(T)/T^2 - 2 Cov(P, T)/(P T)``.

    >>> lo, hi = log_ratio_interval(1.0, 2.0, 0.0, 0.0, 0.0)
    >>> round(lo, 6), round(hi, 6)
    (0.30103, 0.30103)
    """
    value = float(np.log10(mean_pred / mean_true))
    var = (var_pred / mean_pred**2 + var_true / mean_true**2
           - 2.0 * cov / (mean_pred * mean_true))
    half = 1.96 * float(np.sqrt(max(var, 0.0))) / float(np.log(10.0))
    return float(value - half), float(value + half)
