"""The fitted, reusable matching of CFair: propensity models, calipers and Mahalanobis matrices.

:func:`fit_matcher` fits, for every comparison of one sensitive attribute, the encoding of the
features, a propensity model on the standardised features, the caliper and the Mahalanobis
matrix, into a frozen :class:`CounterpartMatcher`. :func:`counterpart_fairness` fits one on the
fly, or reuses one passed as ``matcher=`` (a monitor fits once and reuses it on every window).
scikit-learn is imported lazily, inside the functions that need it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ..._validation import check_option, format_labels, renamed_keyword
from ...exceptions import InvalidInputError
from ...utils.groups import Groups, encode_groups, sensitive_columns
from .features import FeatureEncoding, fit_encoding
from .matching import learn_metric, pair_quantile, pooled_whitening, survivors

__all__ = ["REST", "CounterpartMatcher", "PairMatcher", "check_options", "fit_comparisons",
           "fit_matcher", "propensity_auc", "sides"]

#: logit(1 - 1e-6): probabilities are clipped to [1e-6, 1 - 1e-6] before the logit (spec §2).
_LOGIT_CLIP = math.log((1 - 1e-6) / 1e-6)
#: Label of the comparison side that holds every other group (``compare="rest"``).
REST = "rest"


@dataclass(frozen=True, slots=True)
class PairMatcher:
    """The fitted matching of one comparison (``group`` against ``reference``).

    Attributes
    ----------
    group, reference : object
        The compared group, and the reference group's label (``"rest"``: every other group).
    match_side : {'group', 'reference'}
        The side whose units each get one counterpart: the smaller one when fitted.
    columns : ndarray of int
        Encoded columns used (those that vary on the fitted rows).
    mean, scale : ndarray
        Standardisation of those columns.
    propensity : object or None
        Fitted classifier of ``P(reference | x)``; None if no column varies.
    caliper : float
        Caliper in logit units (the ``caliper_quantile`` quantile at fit time).
    caliper_quantile : float
        The quantile it was computed at.
    whitening : ndarray of shape (n_columns, r)
        ``L`` with ``W = L L^T``: the Mahalanobis matrix.
    ps_auc : float
        AUC of the propensity logits at fit time (1.0 = the groups are fully separated).
    """

    group: Any
    reference: Any
    match_side: Literal["group", "reference"]
    columns: NDArray[np.intp]
    mean: NDArray[np.float64]
    scale: NDArray[np.float64]
    propensity: Any
    caliper: float
    caliper_quantile: float
    whitening: NDArray[np.float64]
    ps_auc: float

    def standardise(self, encoded: NDArray[np.float64]) -> NDArray[np.float64]:
        """Standardised, used columns of encoded rows."""
        return (encoded[:, self.columns] - self.mean) / self.scale

    def logits(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """Propensity logits of standardised rows."""
        return _logits(self.propensity, z)


@dataclass(frozen=True, slots=True)
class CounterpartMatcher:
    """A fitted, reusable CFair matching for one sensitive attribute.

    Built by :func:`fit_matcher`; pass it back as ``counterpart_fairness(..., matcher=m)`` to
    evaluate later windows with the same propensity models, calipers and matrices, which keeps
    windows comparable and skips the fitting. Picklable.

    Attributes
    ----------
    attribute : str
        The sensitive attribute it was fitted for.
    compare : {'reference', 'rest'}
        Each group against ``reference``, or against all other groups.
    reference : object or None
        The reference group (None with ``compare="rest"``).
    encoding : FeatureEncoding
        How ``X`` is turned into numbers.
    pairs : tuple of PairMatcher
        One fitted matching per comparison.
    """

    attribute: str
    compare: Literal["reference", "rest"]
    reference: Any
    encoding: FeatureEncoding
    pairs: tuple[PairMatcher, ...]

    @property
    def comparisons(self) -> tuple[tuple[Any, Any], ...]:
        """``(group, reference)`` of every comparison."""
        return tuple((p.group, p.reference) for p in self.pairs)


# ----------------------------------------------------------------------------- propensity


def _default_model() -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(class_weight="balanced", max_iter=1000)


def _is_logistic(model: Any) -> bool:
    from sklearn.linear_model import LogisticRegression

    return isinstance(model, LogisticRegression)


def _logits(model: Any, z: NDArray[np.float64]) -> NDArray[np.float64]:
    if model is None or z.shape[0] == 0:
        return np.zeros(z.shape[0])
    if _is_logistic(model):  # its decision function is the logit; no round trip through p
        return np.clip(model.decision_function(z), -_LOGIT_CLIP, _LOGIT_CLIP)
    proba = model.predict_proba(z)[:, list(model.classes_).index(1)]
    p = np.clip(proba, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def _fit_propensity(template: Any, z: NDArray[np.float64], target: NDArray[np.int8],
                    rng: np.random.Generator) -> tuple[Any, NDArray[np.float64]]:
    """Fit ``P(reference | x)``; return the model and the logits of the fitted rows.

    A flexible model (anything but logistic regression) scores its own training rows near 0/1,
    so those rows get 5-fold cross-fitted logits (spec §2 step 3); new rows use the full model.
    """
    from sklearn.base import clone

    if z.shape[1] == 0:
        return None, np.zeros(z.shape[0])
    model = clone(template).fit(z, target)
    if _is_logistic(model) or np.bincount(target).min() < 5:
        return model, _logits(model, z)
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    folds = StratifiedKFold(5, shuffle=True, random_state=int(rng.integers(2**31 - 1)))
    proba = cross_val_predict(clone(template), z, target, cv=folds, method="predict_proba")[:, 1]
    p = np.clip(proba, 1e-6, 1 - 1e-6)
    return model, np.log(p / (1 - p))


def propensity_auc(s0: NDArray[np.float64], s1: NDArray[np.float64]) -> float:
    """P(s1 > s0) + P(tie)/2: the propensity model's power to tell the sides apart."""
    from scipy.stats import rankdata

    if s0.size == 0 or s1.size == 0:
        return float("nan")
    ranks = rankdata(np.concatenate([s0, s1]))
    return float((ranks[s0.size:].sum() - s1.size * (s1.size + 1) / 2) / (s0.size * s1.size))


# ----------------------------------------------------------------------------- fitting


def _comparisons(groups: Groups, compare: str, reference: Any) -> list[tuple[int, int | None]]:
    """(group code, reference code or None for the rest) of every comparison."""
    if compare == "rest" and groups.n_groups > 2:
        return [(k, None) for k in range(groups.n_groups)]
    if reference is None:
        ref = int(np.argmax(groups.counts))  # the largest group; ties: the first label
    else:
        if reference not in groups.labels:
            raise InvalidInputError(
                f"`reference` {reference!r} is not a group of '{groups.name}'; its groups are "
                f"{format_labels(groups.labels)}."
            )
        ref = groups.labels.index(reference)
    return [(k, ref) for k in range(groups.n_groups) if k != ref]


def sides(groups: Groups, g: int, r: int | None) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Rows of group ``g`` and of the reference ``r`` (None: every other kept group)."""
    rows_g = np.flatnonzero(groups.codes == g)
    rest = (groups.codes >= 0) & (groups.codes != g) if r is None else groups.codes == r
    return rows_g, np.flatnonzero(rest)


def _fit_pair(encoded: NDArray[np.float64], rows_g: NDArray[np.intp], rows_r: NDArray[np.intp],
              labels: tuple[Any, Any], quantile: float, template: Any, learn: bool,
              rng: np.random.Generator) -> tuple[PairMatcher, NDArray[np.float64]]:
    """Fit one comparison; also return the logits of its rows (group rows, then reference)."""
    raw = encoded[np.concatenate([rows_g, rows_r])]
    mean, sd = raw.mean(axis=0), raw.std(axis=0)
    used = np.flatnonzero(sd > 1e-12 * np.maximum(1.0, np.abs(mean)))  # drop constant columns
    z = (raw[:, used] - mean[used]) / sd[used]
    target = np.r_[np.zeros(rows_g.size, np.int8), np.ones(rows_r.size, np.int8)]
    model, s = _fit_propensity(template, z, target, rng)
    side = "group" if rows_g.size <= rows_r.size else "reference"
    first = target == (0 if side == "group" else 1)
    s0, s1, z0, z1 = s[first], s[~first], z[first], z[~first]
    delta = pair_quantile(s0, s1, quantile)
    has0, has1 = survivors(s0, s1, delta)
    whitening = pooled_whitening(z0[has0], z1[has1])
    if learn:
        whitening = learn_metric(z0[has0], s0[has0], z1, s1, delta, whitening, rng)
    pair = PairMatcher(labels[0], labels[1], side, used, mean[used], sd[used], model, delta,
                       quantile, whitening, propensity_auc(s[target == 0], s[target == 1]))
    return pair, s


def fit_comparisons(X: Any, groups: Groups, n: int, *, caliper: float, reference: Any,
                    compare: str, propensity_model: Any, learn_metric: bool,
                    rng: np.random.Generator, exclude: Any
                    ) -> tuple[CounterpartMatcher, list[NDArray[np.float64]], NDArray[np.float64]]:
    """Fit every comparison; also return each one's row logits and the encoded ``X``."""
    encoding = fit_encoding(X, n, exclude=exclude)
    encoded = encoding.transform(X, n)
    template = _default_model() if propensity_model is None else propensity_model
    pairs, logits = [], []
    for g, r in _comparisons(groups, compare, reference):
        rows_g, rows_r = sides(groups, g, r)
        labels = (groups.labels[g], REST if r is None else groups.labels[r])
        pair, s = _fit_pair(encoded, rows_g, rows_r, labels, caliper, template, learn_metric, rng)
        pairs.append(pair)
        logits.append(s)
    ref_label = None if compare == "rest" and groups.n_groups > 2 else pairs[0].reference
    mode = "rest" if ref_label is None else "reference"
    matcher = CounterpartMatcher(groups.name, mode, ref_label, encoding, tuple(pairs))
    return matcher, logits, encoded


def check_options(caliper: float, compare: str, reference: Any, propensity_model: Any) -> None:
    """Validate the options that define a matching."""
    if isinstance(caliper, bool) or not isinstance(caliper, int | float) or not 0 < caliper <= 1:
        raise InvalidInputError(
            f"`caliper` is the quantile of cross-group logit differences to use as the caliper "
            f"and must lie in (0, 1]; got {caliper!r}. The default 0.10 keeps pairs closer than "
            "90% of random cross-group pairs."
        )
    check_option(compare, "compare", ("reference", "rest"), func="cfair")
    if compare == "rest" and reference is not None:
        raise InvalidInputError("`reference` is only used with compare='reference'; got "
                                f"reference={reference!r} with compare='rest'.")
    if propensity_model is not None and not (hasattr(propensity_model, "fit")
                                             and hasattr(propensity_model, "predict_proba")):
        raise InvalidInputError(
            "`propensity_model` must be an unfitted scikit-learn classifier with `fit` and "
            f"`predict_proba`; got {type(propensity_model).__name__}."
        )


@renamed_keyword("rng", "random_state")
def fit_matcher(X: Any, *, sensitive_features: Any, caliper: float = 0.10, reference: Any = None,
                compare: Literal["reference", "rest"] = "reference", propensity_model: Any = None,
                learn_metric: bool = False, min_group_size: int = 1,
                random_state: Any = None
                ) -> CounterpartMatcher:
    """Fit the CFair matching of one sensitive attribute, for reuse across windows.

    Parameters are those of :func:`counterpart_fairness` that define the matching. A monitor
    fits the matcher once on a reference window (e.g. at MLflow evaluation time) and passes it
    as ``matcher=`` on every scheduled window, which keeps the windows comparable.

    Parameters
    ----------
    X : 2-D array, dict of columns or DataFrame
        Non-protected features (columns named like a sensitive attribute are left out).
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    caliper : float, default=0.10
        Quantile of cross-group logit differences used as the caliper.
    reference : object, optional
        Reference group; default the largest.
    compare : {'reference', 'rest'}, default='reference'
        Each group against ``reference``, or against all other groups together.
    propensity_model : scikit-learn classifier, optional
        Unfitted classifier of group membership; default logistic regression.
    learn_metric : bool, default=False
        Refine the Mahalanobis matrix by the paper's eq. (7), constrained (experimental).
    min_group_size : int, default=1
        Smaller groups are left out with a warning.
    random_state : numpy.random.Generator, int or None
        Seeds cross-fitting folds and the metric-learning sample. (``rng=``, its old name, is
        accepted until fairmonitor 0.3 with a FutureWarning.)

    Returns
    -------
    matcher : CounterpartMatcher

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 2))
    >>> group = np.where(X[:, 0] + rng.normal(size=600) > 0.5, "a", "b")
    >>> m = fit_matcher(X, sensitive_features=group)
    >>> m.comparisons, m.pairs[0].match_side
    ((('a', 'b'),), 'group')
    """
    check_options(caliper, compare, reference, propensity_model)
    groups = encode_groups(sensitive_features, min_group_size=min_group_size)
    n = groups.codes.size
    reason = groups.two_group_reason()
    if reason is not None:
        raise InvalidInputError(f"cannot fit a CFair matcher: {reason}.")
    return fit_comparisons(
        X, groups, n, caliper=caliper, reference=reference, compare=compare,
        propensity_model=propensity_model, learn_metric=learn_metric,
        rng=np.random.default_rng(random_state),
        exclude=sensitive_columns(sensitive_features))[0]


