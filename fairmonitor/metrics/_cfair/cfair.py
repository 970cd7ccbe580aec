r"""Counterpart fairness (CFair, paper 004): compare predictions between look-alike individuals.

The classical demographic-parity gap compares whole groups. When the groups differ
systematically in their non-protected features (a confounder), a perfectly group-blind model
can show a large gap, and a model that treats look-alikes differently can hide behind a small
one. CFair pairs each individual of the smaller group with one *counterpart* of the other group,
a person with similar features whose group a propensity model cannot tell apart, and measures
the gap on those pairs only (paper §3).

Choices (spec ``cfair.md`` §8; each deviation from the paper or its code is in the Notes of
:func:`counterpart_fairness`):

- propensity model: logistic regression (``class_weight="balanced"``) on standardised features,
  any scikit-learn classifier accepted; the score is the logit;
- caliper: the ``caliper`` (default 0.10) quantile of ``|logit difference|`` over all cross-group
  pairs, the reference code's value (the paper says "90th percentile", see Notes);
- counterpart: the caliper candidate at the smallest Mahalanobis distance with the inverse pooled
  covariance (optionally a learned, PSD-projected, trace-normalised matrix);
- index: ``|mean paired difference|`` with its sign, a paired t-test and Wilcoxon on the signed
  differences, a 95% CI and the effect size; NaN plus a reason below ``min_pairs`` pairs.

The fitted matching (encoding, propensity models, calipers, matrices) is a frozen
:class:`CounterpartMatcher` that a monitor fits once and passes back as ``matcher=``.
scikit-learn is imported lazily, inside the functions that fit or apply a propensity model.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._validation import (
    check_1d,
    check_binary,
    check_finite,
    check_positive_int,
    check_same_length,
    check_scores,
    format_labels,
    renamed_keyword,
    warn_undefined,
    y_true_first,
)
from ...exceptions import GroupExclusionWarning, InvalidInputError
from ...utils.groups import (
    INTERSECTION_SEPARATOR,
    Groups,
    encode_groups,
    sensitive_columns,
)
from .matcher import (
    REST,
    CounterpartMatcher,
    PairMatcher,
    check_options,
    fit_comparisons,
    propensity_auc,
    sides,
)
from .matching import nearest_counterparts
from .stats import CounterpartComparison, max_smd, paired_tests, rate_gaps

__all__ = ["CounterpartResult", "counterpart_fairness"]

_METRIC = "cfair"
#: A comparison is "no overlap" when fewer than this share of the matched side lies inside the
#: other side's logit range, or finds a counterpart (spec §5).
_MIN_OVERLAP = 0.10


@dataclass(frozen=True, slots=True)
class CounterpartResult:
    """CFair on one sensitive attribute: the worst comparison's figures, and all comparisons.

    The scalar fields describe the comparison with the largest ``value`` (for a binary
    attribute, the only one). When no comparison is defined they are NaN and ``status`` says
    why.

    Attributes
    ----------
    value : float
        Counterpart DP gap ``|mean_i (f(protected_i) - f(counterpart_i))|``; lower is fairer.
    signed : float
        The signed mean (protected group minus reference): negative = the protected group gets
        lower predictions than its counterparts.
    n_pairs, n_unmatched : int
        Counterpart pairs, and units of the matched (smaller) side without a counterpart.
    p_value, wilcoxon_p_value : float
        Two-sided paired t-test and Wilcoxon signed-rank test of "mean difference 0".
    ci_low, ci_high : float
        95% confidence interval of ``value``.
    effect_size : float
        ``signed / sd(differences)`` (Cohen's d_z).
    tpr_gap, fpr_gap, ppv_gap : float
        Counterpart true/false positive rate and precision gaps (NaN without ``y_true``).
    dp_gap : float
        The classical DP gap on all rows of the same two sides, for contrast.
    attribute : str
        Sensitive attribute name.
    group, reference : object
        The worst comparison's group and reference.
    status : str
        ``"ok"``, ``"insufficient_pairs"``, ``"no_overlap"`` or ``"missing_group"``.
    comparisons : tuple of CounterpartComparison
        Every comparison in full (CIs, coverage, balance, caliper, pairs...).
    matcher : CounterpartMatcher
        The matching used; pass it back as ``matcher=`` to reuse it.
    """

    value: float
    signed: float
    n_pairs: int
    n_unmatched: int
    p_value: float
    wilcoxon_p_value: float
    ci_low: float
    ci_high: float
    effect_size: float
    tpr_gap: float
    fpr_gap: float
    ppv_gap: float
    dp_gap: float
    attribute: str
    group: Any
    reference: Any
    status: str
    comparisons: tuple[CounterpartComparison, ...] = field(repr=False, default=())
    matcher: CounterpartMatcher | None = field(repr=False, default=None)


# ----------------------------------------------------------------------------- evaluation


def _evaluate_pair(pair: PairMatcher, encoded: NDArray[np.float64], groups: Groups,
                   codes: tuple[int | None, int | None], f: NDArray[np.float64],
                   y: NDArray[np.float64] | None, logits: NDArray[np.float64] | None, *,
                   replace: bool, min_pairs: int, max_ps_auc: float | None
                   ) -> CounterpartComparison:
    where = f"group {pair.group!r} vs {pair.reference!r} of '{groups.name}'"
    g, r = codes
    if g is None or (r is None and pair.reference != REST):
        missing = pair.group if g is None else pair.reference
        return CounterpartComparison(pair.group, pair.reference, "missing_group",
                                     f"{where}: no rows of group {missing!r} in this window",
                                     caliper=pair.caliper)
    rows_g, rows_r = sides(groups, g, r)
    if rows_g.size == 0 or rows_r.size == 0:
        return CounterpartComparison(pair.group, pair.reference, "missing_group",
                                     f"{where}: a side has no rows", caliper=pair.caliper)
    z = pair.standardise(encoded[np.concatenate([rows_g, rows_r])])
    s = pair.logits(z) if logits is None else logits
    on_g = np.arange(z.shape[0]) < rows_g.size
    first = on_g if pair.match_side == "group" else ~on_g  # the side whose units get matched
    rows = np.concatenate([rows_g, rows_r])
    rows0, rows1, z0, z1 = rows[first], rows[~first], z[first], z[~first]
    s0, s1 = s[first], s[~first]
    match = nearest_counterparts(z0 @ pair.whitening, s0, z1 @ pair.whitening, s1, pair.caliper,
                                 replace=replace)
    hit = match >= 0
    n_pairs = int(hit.sum())
    mine, theirs = rows0[hit], rows1[match[hit]]
    prot, ref = (mine, theirs) if pair.match_side == "group" else (theirs, mine)
    used1 = np.zeros(rows1.size, dtype=bool)
    used1[match[hit]] = True
    left0, left1 = rows0[~hit], rows1[~used1]
    left_g, left_r = (left0, left1) if pair.match_side == "group" else (left1, left0)
    auc = propensity_auc(s[on_g], s[~on_g])
    inside = float(np.mean((s0 >= s1.min()) & (s0 <= s1.max())))
    common = dict(
        n_pairs=n_pairs, n_unmatched=int(rows0.size - n_pairs), n_group=int(rows_g.size),
        n_reference=int(rows_r.size), coverage=n_pairs / rows0.size, caliper=pair.caliper,
        ps_auc=auc, dp_gap=abs(float(f[rows_g].mean() - f[rows_r].mean())),
        dp_gap_unmatched=(abs(float(f[left_g].mean() - f[left_r].mean()))
                          if left_g.size and left_r.size else float("nan")),
        max_smd_before=max_smd(z[on_g], z[~on_g]),
        max_smd_after=max_smd(z0[hit], z1[match[hit]]),
        pairs=np.column_stack([prot, ref]).astype(np.intp),
    )
    side = "the smaller side"
    if inside < _MIN_OVERLAP or common["coverage"] < _MIN_OVERLAP:
        reason = (f"{where}: no overlap of the propensity scores ({inside:.0%} of {side} lies "
                  f"in the other side's logit range, {common['coverage']:.0%} found a "
                  "counterpart); the groups differ too much to find look-alikes")
        return CounterpartComparison(pair.group, pair.reference, "no_overlap", reason, **common)
    if max_ps_auc is not None and max(auc, 1 - auc) >= max_ps_auc:
        reason = (f"{where}: no overlap (propensity AUC {max(auc, 1 - auc):.3f} >= "
                  f"max_ps_auc={max_ps_auc})")
        return CounterpartComparison(pair.group, pair.reference, "no_overlap", reason, **common)
    if n_pairs < min_pairs:
        reason = (f"{where}: only {n_pairs} counterpart pairs (min_pairs={min_pairs}; "
                  f"{rows0.size - n_pairs} of {rows0.size} units of {side} found no counterpart "
                  "within the caliper)")
        return CounterpartComparison(pair.group, pair.reference, "insufficient_pairs", reason,
                                     **common)
    figures = paired_tests(f[prot] - f[ref], match[hit])
    if y is not None:
        figures.update(rate_gaps(f[prot], y[prot], f[ref], y[ref], where))
    return CounterpartComparison(pair.group, pair.reference, "ok", None, **common, **figures)


def _result(attribute: str, comparisons: list[CounterpartComparison],
            matcher: CounterpartMatcher | None, reason: str | None = None) -> CounterpartResult:
    ok = [c for c in comparisons if c.status == "ok"]
    bad = [c for c in comparisons if c.status != "ok"]
    if ok and bad:
        warnings.warn(f"{_METRIC} on '{attribute}': left out " + "; ".join(c.reason for c in bad),
                      GroupExclusionWarning, stacklevel=3)
    if not ok:
        warn_undefined(_METRIC, reason or "; ".join(c.reason for c in bad))
        if not bad:
            bad = [CounterpartComparison(None, None, "missing_group", reason)]
        top = max(bad, key=lambda c: c.n_pairs)
    else:
        top = max(ok, key=lambda c: c.value)
    return CounterpartResult(
        value=top.value, signed=top.signed, n_pairs=top.n_pairs, n_unmatched=top.n_unmatched,
        p_value=top.p_value, wilcoxon_p_value=top.wilcoxon_p_value, ci_low=top.ci_low,
        ci_high=top.ci_high, effect_size=top.effect_size, tpr_gap=top.tpr_gap,
        fpr_gap=top.fpr_gap, ppv_gap=top.ppv_gap, dp_gap=top.dp_gap, attribute=attribute,
        group=top.group, reference=top.reference, status=top.status,
        comparisons=tuple(comparisons), matcher=matcher,
    )


def _sensitive_names(sensitive_features: Any) -> Any:
    """Return the sensitive columns X must not hold (by name for groups encoded once)."""
    if isinstance(sensitive_features, Groups):  # the report's (regression path) encoding
        return dict.fromkeys(sensitive_features.name.split(INTERSECTION_SEPARATOR))
    return sensitive_columns(sensitive_features)


def _resolve_matcher(matcher: Any, attribute: str, options: dict[str, Any]) -> CounterpartMatcher:
    changed = [k for k, (v, default) in options.items() if v is not default and v != default]
    if changed:
        raise InvalidInputError(
            f"{', '.join(f'`{k}`' for k in changed)} cannot be combined with `matcher`: the "
            "matcher fixes them. Pass them to `fit_matcher` instead."
        )
    if isinstance(matcher, Mapping):
        if attribute not in matcher:
            raise InvalidInputError(
                f"`matcher` has no entry for sensitive attribute '{attribute}'; it covers "
                f"{list(matcher)}. Fit one with `fit_matcher` for this attribute."
            )
        matcher = matcher[attribute]
    if not isinstance(matcher, CounterpartMatcher):
        raise InvalidInputError(
            "`matcher` must be a CounterpartMatcher from `fit_matcher` (or a dict of them by "
            f"attribute); got {type(matcher).__name__}."
        )
    if matcher.attribute != attribute:
        raise InvalidInputError(
            f"`matcher` was fitted for sensitive attribute '{matcher.attribute}', not "
            f"'{attribute}'; pass the matching one, or a dict of matchers by attribute."
        )
    return matcher


@renamed_keyword("rng", "random_state")
@y_true_first(n_before=1)
def counterpart_fairness(
    X: Any,
    y_true: ArrayLike | None,
    y_pred: ArrayLike,
    *,
    sensitive_features: Any,
    caliper: float = 0.10,
    reference: Any = None,
    compare: Literal["reference", "rest"] = "reference",
    propensity_model: Any = None,
    replace: bool = True,
    learn_metric: bool = False,
    min_pairs: int = 30,
    max_ps_auc: float | None = None,
    min_group_size: int = 1,
    random_state: Any = None,
    matcher: CounterpartMatcher | Mapping[str, CounterpartMatcher] | None = None,
) -> CounterpartResult:
    r"""Counterpart DP gap (CFair): the prediction gap between look-alike individuals.

    Every unit of the smaller side is paired with one counterpart of the other side: among the
    units whose propensity logit lies within the caliper, the one at the smallest Mahalanobis
    distance. With ``d_i = f(x_i^{group}) - f(x_i^{reference})`` over the ``N`` pairs,

    .. math:: \mathrm{CDP} = \Big|\frac{1}{N}\sum_{i=1}^N d_i\Big|

    (paper 004, §3.1.2: the DP gap of the two counterpart sets, which have equal size).

    Parameters
    ----------
    X : 2-D array, dict of columns or DataFrame
        The model's non-protected input features. Numeric columns are standardised;
        non-numeric ones are one-hot encoded; columns named like a sensitive attribute are
        left out.
    y_true : array-like of 0/1, or None
        Labels; adds the counterpart TPR, FPR and PPV gaps (``y_pred`` must then lie in
        [0, 1]). None without labels. Positional, before ``y_pred``, as in :func:`hfm` and
        fairlearn (the old ``counterpart_fairness(X, y_pred, *, y_true=...)`` is accepted
        until fairmonitor 0.3 with a FutureWarning).
    y_pred : array-like of shape (n_samples,)
        Predictions: probabilities, hard labels or (without ``y_true``) any real output.
    sensitive_features : array-like, DataFrame or dict
        Group membership; several columns are intersected.
    caliper : float, default=0.10
        Quantile of ``|logit difference|`` over all cross-group pairs used as the caliper.
    reference : object, optional
        Reference group; default the largest group.
    compare : {'reference', 'rest'}, default='reference'
        With more than two groups: each group against ``reference``, or against all other
        groups together (the spec prefers the former: "the rest" is heterogeneous).
    propensity_model : scikit-learn classifier, optional
        Unfitted classifier of group membership (cloned); default
        ``LogisticRegression(class_weight="balanced", max_iter=1000)``.
    replace : bool, default=True
        A counterpart may serve several units (the reference code); False gives strict 1-1
        pairs by a global greedy.
    learn_metric : bool, default=False
        Refine the Mahalanobis matrix by eq. (7), PSD-projected and trace-normalised
        (experimental).
    min_pairs : int, default=30
        Fewer pairs give NaN with a warning.
    max_ps_auc : float, optional
        Also treat a comparison as without overlap when the propensity AUC reaches this.
    min_group_size : int, default=1
        Smaller groups are left out with a warning.
    random_state : numpy.random.Generator, int or None
        Seeds cross-fitting folds of non-linear propensity models and the metric-learning
        sample. The default path is deterministic. (``rng=``, its old name, is accepted until
        fairmonitor 0.3 with a FutureWarning.)
    matcher : CounterpartMatcher or dict of them by attribute, optional
        A matching from :func:`fit_matcher` to reuse; ``caliper``, ``reference``, ``compare``,
        ``propensity_model`` and ``learn_metric`` must then stay at their defaults.

    Returns
    -------
    result : CounterpartResult
        ``.value`` is the worst comparison's CDP; NaN with an
        :class:`~fairmonitor.exceptions.UndefinedMetricWarning` when no comparison has
        ``min_pairs`` pairs or the groups do not overlap.

    Notes
    -----
    Deliberate choices against paper 004 and its reference code (spec ``cfair.md`` §4):

    - **Caliper.** App. C sets the caliper at the "90th percentile" of cross-group logit
      differences; the code calls ``np.quantile(..., 0.1)``, the 10th. A 90th-percentile
      caliper keeps 90% of all pairs and barely filters, so the default follows the code
      (``caliper=0.10``). Candidates satisfy ``|ds| <= delta`` (Def. 3.1), not the code's
      ``<``, so tied logits stay matchable when ``delta`` is 0. The code's extra 1-SD
      per-feature filter is not applied.
    - **Matrix.** The inverse equal-weight pooled covariance of the caliper survivors (the
      paper's initialisation), with a ``1e-6`` relative ridge. The paper's eq. (7) loss is
      unbounded below without constraints, so ``learn_metric`` projects onto PSD matrices of
      fixed trace after every step.
    - **Test.** The code's p-value is a one-sample t-test on non-negative L1 norms, which rejects
      whenever predictions differ at all. Here: the paired t-test on the signed ``d_i`` (as the
      paper states), with a cluster-robust standard error when ``replace=True`` reuses a
      counterpart (the spec suggests a cluster bootstrap; this is its analytic, deterministic
      counterpart and equals ``ttest_rel`` when nothing is reused), plus Wilcoxon. All
      ``d_i = 0`` gives p = 1 for both.
    - **Propensity model.** The paper used random forests and AdaBoost; their in-sample
      probabilities are near 0/1, so with such a model and no ``matcher`` the fitted rows get
      5-fold cross-fitted logits (spec §2); a reused matcher scores rows with the model fitted
      on all reference rows, so for those models reuse on the fitting rows is not identical.
    - **Replacement.** ``replace=True`` (default) as the reference code: each unit takes its
      nearest candidate. ``replace=False`` is a greedy over (distance, unit, counterpart)
      triples by rounds of the 4 nearest free candidates, an approximation of the global
      greedy (the paper leaves ordering unspecified).
    - **Overlap.** ``no_overlap`` when under 10% of the matched side lies inside the other side's
      logit range or finds a counterpart. The spec's PS-AUC >= 0.95 rule is opt-in
      (``max_ps_auc``): the paper's own App. H example has AUC ~0.99 with half its
      minority overlapping.
    - **Alerting.** Thresholds apply to ``value``, an effect size in prediction units; with
      many pairs the p-value flags even the small bias left after matching (spec §1.5), so
      alert on ``value`` (e.g. > 0.02), not on ``p_value`` alone.

    Under a true null ``E[value] ~ sqrt(2/pi) sd(d) / sqrt(N)``, not 0 (App. B).

    Examples
    --------
    A group-blind model on confounded groups: a large DP gap, no counterpart gap.

    >>> rng = np.random.default_rng(0)
    >>> group = np.where(rng.random(4000) < 0.3, "a", "b")
    >>> X = rng.normal(size=(4000, 2)) + np.where(group == "a", -0.5, 0.5)[:, None]
    >>> score = 1 / (1 + np.exp(-(2 * X[:, 0] + X[:, 1])))
    >>> r = counterpart_fairness(X, None, score, sensitive_features=group)
    >>> round(r.dp_gap, 2), round(r.value, 3), r.n_pairs
    (0.4, 0.001, 1190)

    A 0.1 penalty on group ``"a"``, measured with the same matching:

    >>> r2 = counterpart_fairness(X, None, score - 0.1 * (group == "a"),
    ...                           sensitive_features=group, matcher=r.matcher)
    >>> round(r2.signed, 3), bool(r2.p_value < 1e-6)
    (-0.101, True)
    """
    f = check_1d(y_pred, "y_pred")
    if not np.issubdtype(f.dtype, np.number) and f.dtype != bool:
        raise InvalidInputError(f"`y_pred` must be numeric; got dtype {f.dtype}.")
    f = f.astype(np.float64)
    check_finite(f, "y_pred")
    n = f.size
    y = None
    if y_true is not None:
        y = check_binary(y_true, "y_true")
        check_same_length(y_pred=f, y_true=y)
        f = check_scores(f, "y_pred")
    min_pairs = check_positive_int(min_pairs, "min_pairs", minimum=2)
    if not isinstance(replace, bool | np.bool_):
        raise InvalidInputError(f"`replace` must be True or False; got {replace!r}.")
    if max_ps_auc is not None and not 0.5 < max_ps_auc <= 1:
        raise InvalidInputError(
            f"`max_ps_auc` must lie in (0.5, 1] or be None; got {max_ps_auc!r}.")
    check_options(caliper, compare, reference, propensity_model)
    groups = encode_groups(sensitive_features, n_samples=n, min_group_size=min_group_size)
    reason = groups.two_group_reason()
    if reason is not None:
        return _result(groups.name, [], None, reason)
    if matcher is None:
        matcher, fit_logits, encoded = fit_comparisons(
            X, groups, n, caliper=caliper, reference=reference, compare=compare,
            propensity_model=propensity_model, learn_metric=learn_metric,
            rng=np.random.default_rng(random_state),
            exclude=_sensitive_names(sensitive_features))
    else:
        matcher = _resolve_matcher(matcher, groups.name, {
            "caliper": (caliper, 0.10), "reference": (reference, None),
            "compare": (compare, "reference"), "propensity_model": (propensity_model, None),
            "learn_metric": (learn_metric, False)})
        encoded = matcher.encoding.transform(X, n)
        fit_logits = [None] * len(matcher.pairs)
    index = {lab: k for k, lab in enumerate(groups.labels)}
    comparisons = []
    for pair, logits in zip(matcher.pairs, fit_logits, strict=True):
        codes = (index.get(pair.group), None if pair.reference == REST and matcher.compare ==
                 "rest" else index.get(pair.reference))
        comparisons.append(_evaluate_pair(pair, encoded, groups, codes, f, y, logits,
                                          replace=bool(replace), min_pairs=min_pairs,
                                          max_ps_auc=max_ps_auc))
    covered = {p.group for p in matcher.pairs} | {matcher.reference}
    new = [lab for lab in groups.labels if lab not in covered]
    if new:
        warnings.warn(f"{_METRIC} on '{groups.name}': group(s) {format_labels(new)} were not "
                      "seen when the matcher was fitted and are left out; refit the matcher "
                      "to include them", GroupExclusionWarning, stacklevel=2)
    return _result(groups.name, comparisons, matcher)
