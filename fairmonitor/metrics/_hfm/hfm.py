"""HFM, the Harmonic Fairness measure via Manifolds (Bian, Luo & Xu, paper 000).

HFM asks whether a model pushes the groups of a sensitive attribute further apart than the true
labels already do. Each row is a point ``z = (label, x)`` of its class code and its
non-sensitive features. For one attribute, every row's distance to the nearest row of *another*
group is measured twice, with the true labels (the data distance ``D``) and with the
predictions (the model distance ``D_f``); the features are the same both times. The maximal
version takes the largest of these distances, the average version their mean, and
``HFM = log10(D_f / D)``.

Choices (spec ``hfm.md`` §9 and the errata it lists):

* Several attributes are taken **one at a time, never intersected** (Eqs. 6-7): the maximal
  distance is the max over attributes, the average distance the mean over attributes.
* Features: numeric columns and one-hot categorical columns, every column min-max scaled to
  [0, 1] (the paper's preprocessing); the label coordinate is the class code ``0..K-1``,
  unscaled, so a wrong class weighs as much as a full-range feature difference.
* ``method="exact"`` (default) computes Eqs. 4-5 exactly with blocked GEMM
  (:mod:`.exact`); ``method="approx"`` runs the paper's ApproxDist/ExtendDist
  (:mod:`.approx`), an upper bound of each distance; ``method="sampled"`` estimates the
  average version from exactly scanned sample rows, unbiased for the average distances, with a
  95% interval (:mod:`.sampled`).
* Undefined cases are NaN plus :class:`~fairmonitor.exceptions.UndefinedMetricWarning`, never
  the reference code's 0, ±13 or 3.4e38 sentinels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._validation import (
    check_1d,
    check_finite,
    check_option,
    check_positive_int,
    check_same_length,
    first_rows,
    renamed_keyword,
    warn_undefined,
)
from ...exceptions import InvalidInputError
from ...utils.groups import encode_groups, sensitive_columns
from .approx import approx_distances, default_m2
from .exact import exact_cross_group_distances, feature_space, missing_values
from .sampled import SampledAverage, log_ratio_interval, sampled_average_distances

__all__ = ["HFMAttribute", "HFMResult", "hfm"]

Version = Literal["max", "average"]
Method = Literal["exact", "approx", "sampled"]


@dataclass(frozen=True, slots=True)
class HFMAttribute:
    """HFM of one sensitive attribute.

    Attributes
    ----------
    attribute : str
        The attribute's name.
    value : float
        HFM of the chosen version.
    value_max, value_average : float
        ``log10(distance_model / distance)`` and the same for the average distances.
    distance, distance_model : float
        Largest cross-group nearest-neighbour distance with the true labels (Eq. 4) and with
        the predictions.
    distance_average, distance_model_average : float
        Mean cross-group nearest-neighbour distance over the rows (Eq. 5), labels and
        predictions.
    labels : tuple
        The attribute's kept groups.
    counts : ndarray of shape (K,)
        Rows per kept group.
    excluded : mapping
        Group -> rows, for groups left out by ``min_group_size``.
    """

    attribute: str
    value: float
    value_max: float
    value_average: float
    distance: float
    distance_model: float
    distance_average: float
    distance_model_average: float
    labels: tuple[Any, ...]
    counts: NDArray[np.intp]
    excluded: Mapping[Any, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HFMResult:
    """HFM over all given attributes (Eqs. 6-8), with the distances behind it.

    Attributes
    ----------
    value : float
        HFM of the chosen ``version``: ``value_max`` or ``value_average``.
    value_max, value_average : float
        Maximal and average HFM.
    distance, distance_model : float
        Max over attributes of the maximal distances, labels and predictions (Eq. 6).
    distance_average, distance_model_average : float
        Mean over attributes of the average distances (Eq. 7).
    per_attribute : mapping of str to HFMAttribute
        The same quantities for each attribute alone.
    version : {'max', 'average'}
        Which version ``value`` holds.
    method : {'exact', 'approx'}
        How the distances were computed; approximate distances are upper bounds.
    m1, m2 : int or None
        ApproxDist's repetitions and compared neighbours per side (None when exact).
    n_samples : int
        Rows evaluated.
    average_ci : tuple of float or None
        ``method="sampled"``: 95% interval of ``value_average`` (delta method); else None.
    n_queries : int or None
        ``method="sampled"``: query rows drawn per attribute; else None.
    """

    value: float
    value_max: float
    value_average: float
    distance: float
    distance_model: float
    distance_average: float
    distance_model_average: float
    per_attribute: Mapping[str, HFMAttribute]
    version: Version
    method: Method
    m1: int | None
    m2: int | None
    n_samples: int
    average_ci: tuple[float, float] | None = None
    n_queries: int | None = None


def _label_codes(y_true: ArrayLike, y_pred: ArrayLike
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Class codes ``0..K-1`` over the classes seen in either array, as floats."""
    true, pred = check_1d(y_true, "y_true"), check_1d(y_pred, "y_pred")
    check_same_length(y_true=true, y_pred=pred)
    kinds = []
    for arr, name in ((true, "y_true"), (pred, "y_pred")):
        numeric = arr.dtype.kind in "biuf"
        if numeric:
            values = arr.astype(np.float64)
            check_finite(values, name)
            fractional = values != np.round(values)
            if fractional.any():
                raise InvalidInputError(
                    f"`{name}` must hold class labels; {int(fractional.sum())} values are not "
                    f"whole numbers (e.g. {values[fractional][0]!r}). These look like scores: "
                    "threshold them first (e.g. `y_score >= 0.5`).")
        elif missing_values(arr).any():
            raise InvalidInputError(f"`{name}` has missing labels (None/NaN) at rows "
                                    f"{first_rows(missing_values(arr))}; drop those rows.")
        kinds.append(numeric)
    if kinds[0] != kinds[1]:
        raise InvalidInputError(
            f"`y_true` and `y_pred` must use the same class labels; got {true.dtype} and "
            f"{pred.dtype}. Encode both the same way (e.g. both as 0/1).")
    both = (np.concatenate([true, pred]).astype(np.float64) if kinds[0]
            else np.concatenate([true.astype(str), pred.astype(str)]))
    codes = np.unique(both, return_inverse=True)[1].reshape(-1).astype(np.float64)
    return codes[: true.size], codes[true.size :]


def _log_ratios(d: NDArray[np.float64], where: str) -> tuple[float, float]:
    """``(log10(Df/D), log10(Df_avg/D_avg))`` from ``d = [D, D_f, D_avg, D_f,avg]``."""
    data, model, data_avg, model_avg = (float(v) for v in d)
    if data == 0:
        reason = (f"{where}: the data distance is 0 (every row has an exact duplicate, same "
                  "features and label, in another group), so the ratio has no denominator")
        return warn_undefined("hfm", reason), float("nan")
    if model == 0:
        reason = (f"{where}: the model distance is 0 (with the predictions every row coincides "
                  "with a row of another group), so log10(0) is -inf")
        return warn_undefined("hfm", reason), float("nan")
    return float(np.log10(model / data)), float(np.log10(model_avg / data_avg))


@renamed_keyword("rng", "random_state")
def hfm(
    X: Any,
    y_true: ArrayLike,
    y_pred: ArrayLike,
    *,
    sensitive_features: Any,
    version: Version = "max",
    method: Method = "exact",
    m1: int = 25,
    m2: int | None = None,
    n_queries: int = 2000,
    scale: bool = True,
    min_group_size: int = 1,
    random_state: Any = None,
) -> HFMResult:
    r"""Harmonic Fairness measure via Manifolds: bias the model adds between groups.

    For an attribute, :math:`\delta_k` is row k's distance to the nearest row of another group
    in the space :math:`z = (\ddot y, \breve x)`. With the true labels
    (:math:`\ddot y = y`), :math:`D = \max_k \delta_k` and :math:`D^{avg} = \frac1n \sum_k
    \delta_k`; with the predictions (:math:`\ddot y = \hat y`), :math:`D_f` and
    :math:`D_f^{avg}`. Then

    .. math:: \mathrm{HFM} = \log_{10} \frac{D_f}{D}, \qquad
              \mathrm{HFM}^{avg} = \log_{10} \frac{D_f^{avg}}{D^{avg}}.

    Parameters
    ----------
    X : DataFrame, dict of columns, or array-like of shape (n_samples, n_features)
        Non-sensitive features (leave the sensitive columns out). Numeric columns are used as
        numbers; string/object columns are categories and are one-hot encoded. A 1-D array is
        one feature.
    y_true : array-like of shape (n_samples,)
        True class labels (binary or multi-class).
    y_pred : array-like of shape (n_samples,)
        Predicted class labels, coded like ``y_true``.
    sensitive_features : array-like, DataFrame or dict
        One column per attribute. Several attributes are **not** intersected: each is measured
        alone, then combined (max of the maximal distances, mean of the average distances).
    version : {'max', 'average'}, default='max'
        Which version ``.value`` holds; both are always computed.
    method : {'exact', 'approx'}, default='exact'
        ``"exact"``: Eqs. 4-5 exactly (blocked GEMM, O(n^2 d) flops, no O(n^2) memory).
        ``"approx"``: ApproxDist/ExtendDist (Algorithms 1-3), O(m1 n (log n + m2) d); every
        distance is an upper bound of the exact one.
        ``"sampled"``: the **average** version only, from ``n_queries`` uniformly drawn rows,
        each scanned exactly against every row, O(n_queries n d): the average distances are
        unbiased, ``average_ci`` holds a 95% interval of ``value_average``, and the maximal
        version is NaN (a max over every row cannot be sampled).
    m1 : int, default=25
        ApproxDist repetitions (``method="approx"`` only).
    m2 : int, optional
        ApproxDist neighbours of another group compared on each side; default
        ``ceil(2 log10 n)`` (``method="approx"`` only).
    n_queries : int, default=2000
        Query rows per attribute (``method="sampled"`` only); with ``n_queries >= n`` the
        result equals the exact average.
    scale : bool, default=True
        Min-max scale every feature column to [0, 1], as the paper does. Turn off if the
        features are already on the scale you want distances in.
    min_group_size : int, default=1
        Groups with fewer rows are left out of their attribute (neither measured nor
        compared against) with a warning.
    random_state : numpy.random.Generator, int or None
        Seed of ApproxDist's random directions and of the sampled query rows. (``rng=``, its
        old name, is accepted until fairmonitor 0.3 with a FutureWarning.)

    Returns
    -------
    result : HFMResult
        ``.value`` is the HFM of ``version``; also both versions, the four distances and the
        same per attribute.

    Notes
    -----
    Reading the value: 0 means the predictions separate the groups exactly as much as the
    labels do (a perfect classifier gives 0 however biased the data are); > 0 means the model
    pushes the groups' manifolds further apart (it adds bias: bigger is more unfair); < 0 means
    the predictions bring the groups closer than the labels do. It is a log10 ratio: 0.1 is a
    26% larger distance. The paper's values are small, ``|HFM| <= 0.08``.

    Cost. ``"exact"`` does O(n^2 d) flops at BLAS speed in blocks of 64 MiB: the whole of Adult
    (32,561 rows, 101 one-hot dimensions, race and sex) takes about 9 s of CPU. ``"approx"``
    sorts the rows along ``2 m1`` random directions per label version and compares each row
    with ``2 m2`` rows per attribute, in a scan compiled at install (Cython, ahead of time):
    O(n log n), so its lead grows with n (Adult-like data,
    2 cores: 3x faster than exact at 2·10^4 rows, 11x at 10^5). It is an
    upper bound that can be loose: on Adult-like data its distances came out 35-150% too
    large, enough to change the sign of HFM. Prefer ``"exact"``; with ``"approx"``, compare
    values computed the same way (same ``m1``, ``m2``) and read trends.

    Deliberate choices and deviations from the reference code (spec ``hfm.md``):

    * log base 10, as the reference code and the paper's tables (the paper writes "log").
    * Undefined values are NaN with an
      :class:`~fairmonitor.exceptions.UndefinedMetricWarning`: an attribute with one group
      (the code returns 0 or 3.4e38), a data distance of 0 (every row has a duplicate in
      another group; the code returns 0 or ``13 + log10 D_f``) and a model distance of 0 (the
      code returns -13). An undefined attribute is left out of the combined value.
    * A group of a single row is measured like any other (spec §5 item 3, case T5); drop
      such groups with ``min_group_size`` if they make the maximal version too noisy.
    * Rows of groups below ``min_group_size`` leave that attribute only; the average is over
      the attribute's remaining rows.
    * Class codes are ``0..K-1`` over the classes of ``y_true`` and ``y_pred`` together.
    * Approximation: see :mod:`fairmonitor.metrics._hfm.approx` (normal QR directions,
      shared by both distances and all attributes, so perfect predictions give exactly 0).
    * ``m2`` defaults to ``ceil(2 log10 n)`` with ``n`` the rows given (the code uses the size
      of the whole data set even when it evaluates a fold).

    Examples
    --------
    A model that labels by group (spec case T4): the groups were 0.05 apart, the predictions
    put them a full class apart.

    >>> r = hfm([0, 0.1, 0.05, 0.15], [0, 0, 0, 0], [0, 0, 1, 1],
    ...         sensitive_features=[0, 0, 1, 1], scale=False)
    >>> round(r.value, 10), round(r.distance, 10), round(r.distance_model, 10)
    (1.3015721863, 0.05, 1.0012492197)

    Perfect predictions add nothing:

    >>> hfm([[0.0], [0.2], [0.5], [0.5]], [0, 0, 0, 1], [0, 0, 0, 1],
    ...     sensitive_features=[1, 1, 0, 0]).value
    0.0
    """
    check_option(version, "version", ("max", "average"), func="hfm")
    check_option(method, "method", ("exact", "approx", "sampled"), func="hfm")
    if not isinstance(scale, bool | np.bool_):
        raise InvalidInputError(f"`scale` must be True or False; got {scale!r}.")
    label_true, label_pred = _label_codes(y_true, y_pred)
    space = feature_space(X, scale=bool(scale))
    n = check_same_length(X=np.empty(space.n_samples), y_true=label_true)
    groups = [encode_groups({name: col}, n_samples=n, min_group_size=min_group_size)
              for name, col in sensitive_columns(sensitive_features).items()]
    defined = [g for g in groups if g.two_group_reason() is None]
    used_m1 = used_m2 = None
    dists = np.full((len(defined), 4), np.nan)  # per attribute: D, D_f, D_avg, D_f,avg
    if defined:
        codes = np.column_stack([g.codes for g in defined])
        if method == "exact":
            delta_true, delta_pred = exact_cross_group_distances(space, label_true, label_pred,
                                                                 codes)
            for s in range(len(defined)):
                kept = codes[:, s] >= 0
                dt, dp = delta_true[s, kept], delta_pred[s, kept]
                dists[s] = dt.max(), dp.max(), dt.mean(), dp.mean()
        elif method == "sampled":
            return _sampled(space, label_true, label_pred, codes, groups, defined, version,
                            check_positive_int(n_queries, "n_queries"),
                            np.random.default_rng(random_state), n)
        else:
            used_m1 = check_positive_int(m1, "m1")
            used_m2 = default_m2(n) if m2 is None else check_positive_int(m2, "m2")
            gen = np.random.default_rng(random_state)
            maximal, average = approx_distances(space, label_true, label_pred, codes, m1=used_m1,
                                                m2=used_m2, rng=gen)
            dists[:] = np.column_stack([maximal[0], maximal[1], average[0], average[1]])
    per_attribute = {}
    row = {g.name: s for s, g in enumerate(defined)}
    for g in groups:
        if g.name in row:
            d = dists[row[g.name]]
            v_max, v_avg = _log_ratios(d, f"attribute '{g.name}'")
        else:
            warn_undefined("hfm", g.two_group_reason() or "")
            d = np.full(4, np.nan)
            v_max = v_avg = float("nan")
        per_attribute[g.name] = HFMAttribute(
            g.name, v_max if version == "max" else v_avg, v_max, v_avg, *(float(x) for x in d),
            labels=g.labels, counts=g.counts, excluded=g.excluded)
    if len(defined) == 1:  # the combined value is that attribute's; do not warn twice
        only = per_attribute[defined[0].name]
        total = np.array([only.distance, only.distance_model, only.distance_average,
                          only.distance_model_average])
        v_max, v_avg = only.value_max, only.value_average
    elif defined:
        total = np.concatenate([dists[:, :2].max(axis=0), dists[:, 2:].mean(axis=0)])
        v_max, v_avg = _log_ratios(total, "all attributes")
    else:
        total = np.full(4, np.nan)
        v_max = v_avg = float("nan")
    return HFMResult(
        value=v_max if version == "max" else v_avg, value_max=v_max, value_average=v_avg,
        distance=float(total[0]), distance_model=float(total[1]),
        distance_average=float(total[2]), distance_model_average=float(total[3]),
        per_attribute=MappingProxyType(per_attribute), version=version, method=method,
        m1=used_m1, m2=used_m2, n_samples=n,
    )


def _sampled(space: Any, label_true: NDArray[np.float64], label_pred: NDArray[np.float64],
             codes: NDArray[np.intp], groups: list[Any], defined: list[Any], version: Version,
             n_queries: int, rng: np.random.Generator, n: int) -> HFMResult:
    """``method="sampled"``: the average version with its interval; the maximal one is NaN."""
    averages = sampled_average_distances(space, label_true, label_pred, codes,
                                         n_queries=n_queries, rng=rng)
    return sampled_result(averages, groups, defined, version, n_queries, n)


def sampled_result(averages: list[SampledAverage], groups: list[Any], defined: list[Any],
                   version: Version, n_queries: int, n: int) -> HFMResult:
    """Return the ``method="sampled"`` result from each defined attribute's sampled averages.

    ``groups`` are every attribute's :class:`~fairmonitor.metrics._groups.Groups` (only their
    name, labels, counts and excluded groups are read), ``defined`` those with two kept
    groups, in order, one ``averages`` entry each; ``n`` is the number of rows. Shared by
    :func:`hfm` and the Spark scan (:mod:`fairmonitor.spark.hfm`).
    """
    if version == "max":
        warn_undefined("hfm", "method='sampled' estimates the average version only (a max over "
                              "every row cannot be sampled); use version='average', or "
                              "method='exact' for the maximal one")

    def ratio(t: float, p: float, vt: float, vp: float, c: float, where: str
              ) -> tuple[float, tuple[float, float] | None]:
        if t == 0 or p == 0:
            what = "data" if t == 0 else "model"
            warn_undefined("hfm", f"{where}: the sampled average {what} distance is 0, so the "
                                  "log ratio is undefined")
            return float("nan"), None
        return float(np.log10(p / t)), log_ratio_interval(t, p, vt, vp, c)

    nan = float("nan")
    per_attribute = {}
    row = {g.name: a for g, a in zip(defined, averages, strict=True)}
    for g in groups:
        if g.name in row:
            a = row[g.name]
            v_avg, _ = ratio(a.mean_true, a.mean_pred, a.var_true, a.var_pred, a.cov,
                             f"attribute '{g.name}'")
            d = (nan, nan, a.mean_true, a.mean_pred)
        else:
            warn_undefined("hfm", g.two_group_reason() or "")
            v_avg, d = nan, (nan,) * 4
        per_attribute[g.name] = HFMAttribute(
            g.name, nan if version == "max" else v_avg, nan, v_avg, *d,
            labels=g.labels, counts=g.counts, excluded=g.excluded)
    ci = None
    if averages:
        k = len(averages)
        # the mean over attributes of independent samples: variances add, divided by k^2
        t = sum(a.mean_true for a in averages) / k
        p = sum(a.mean_pred for a in averages) / k
        vt, vp, c = (sum(getattr(a, f) for a in averages) / k**2
                     for f in ("var_true", "var_pred", "cov"))
        if k == 1:
            v_avg = per_attribute[defined[0].name].value_average
            ci = None if np.isnan(v_avg) else log_ratio_interval(t, p, vt, vp, c)
        else:
            v_avg, ci = ratio(t, p, vt, vp, c, "all attributes")
    else:
        t = p = v_avg = nan
    return HFMResult(
        value=nan if version == "max" else v_avg, value_max=nan, value_average=v_avg,
        distance=nan, distance_model=nan, distance_average=float(t),
        distance_model_average=float(p), per_attribute=MappingProxyType(per_attribute),
        version=version, method="sampled", m1=None, m2=None, n_samples=n, average_ci=ci,
        n_queries=min(n_queries, n),
    )
