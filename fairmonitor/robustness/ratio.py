"""Robustness ratio: how a model's fairness gap moves when its inputs carry noise.

Small et al., "How Robust is your Fair Model?" (paper 003; spec ``robustness.md``). The model
is scored on copies of a reference set whose features carry noise of growing strength k; the
fairness gap under noise is compared with the clean gap:

    R_k = mean_j M(f, X~_j^(k)) / M(f, X)        Delta_k = mean_j M(f, X~_j^(k)) - M(f, X)

(a ratio of means over K noisy copies, spec §1.6). R_k -> 1: stable; < 1: noise makes the model
fairer (the expected behaviour, paper Thm 4.1); > 1: less fair under noise.

Noise (see :mod:`fairmonitor.robustness.noise`): Laplace on continuous columns, categorical cells
resampled from their own column; sensitive attributes and labels are never perturbed.

Cost: the noise is drawn once (common random numbers) and every level is ONE batched predict
call over all repeats stacked row-wise (chunked at ``max_batch_rows``), plus one clean call:
``1 + L`` calls instead of the reference protocol's ``1 + L*K``. All metrics come from the same
predictions. This module sits outside the pure :mod:`fairmonitor.metrics` because it calls a
model and builds DataFrames; pandas is imported lazily, only when X is a DataFrame.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._validation import (
    check_binary,
    check_option,
    check_positive_int,
    check_same_length,
    renamed_keyword,
)
from ..exceptions import InvalidInputError
from ..utils.groups import encode_groups
from . import stats as st
from .inputs import (
    Scorer,
    as_predict,
    check_levels,
    check_X,
    resolve_sensitive,
    subsample,
)
from .noise import build_noise_model, infer_column_kinds, tile_rows
from .result import RobustnessResult

__all__ = ["DEFAULT_LEVELS", "PAPER_LEVELS", "robustness_ratio"]

log = logging.getLogger(__name__)

DEFAULT_LEVELS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
#: The stored paper runs: k = 0.2, 0.4, ..., 10 on the ``range`` basis with K = 100 (spec §1.4).
PAPER_LEVELS = tuple(round(0.2 * i, 10) for i in range(1, 51))
#: Early stop (spec §5.5): after K_MIN repeats, stop a level once SE <= max(abs, rel * gap).
K_MIN, SE_ABS_TOL, SE_REL_TOL = 3, 0.005, 0.05
_RATE_NAMES = {"selection": "selection_rate", "tpr": "true_positive_rate",
               "fpr": "false_positive_rate"}


@renamed_keyword("rng", "random_state")
def robustness_ratio(
    predict: Any,
    X: Any,
    *,
    sensitive_features: Any,
    y_true: Any = None,
    metrics: Any = (st.DP,),
    levels: Any = DEFAULT_LEVELS,
    n_repeats: int = 10,
    noise: str = "laplace",
    scale: str = "std",
    random_state: np.random.Generator | int | None = None,
    max_rows: int | None = 20_000,
    column_kinds: Mapping[Any, str] | None = None,
    preset: str | None = None,
    threshold: float = 0.5,
    progress: Callable[[int, int], Any] | None = None,
    min_group_size: int = 1,
    categorical_rate: float | Callable[[float], float] | None = None,
    categorical_scheme: str = "bernoulli",
    crn: bool = True,
    stochastic: bool = False,
    round_integers: bool = False,
    max_batch_rows: int = 250_000,
    early_stop: bool = True,
    tol_abs: float = 0.02,
    tol_ratio: float | None = None,
    strict: bool = False,
) -> RobustnessResult:
    r"""Robustness ratio of a model's fairness gaps under input noise, per noise level.

    .. math:: R_k = \frac{\frac1K \sum_j M(f, \tilde X_j^{(k)})}{M(f, X)}, \qquad
              \Delta_k = \frac1K \sum_j M(f, \tilde X_j^{(k)}) - M(f, X)

    Parameters
    ----------
    predict : callable or model
        ``predict(X) -> 0/1`` labels, or scores in [0, 1] (thresholded at ``threshold``; a
        two-column ``predict_proba`` output is read from its last column). An object with a
        ``.predict`` method (scikit-learn estimator, MLflow pyfunc model) is called through it.
    X : DataFrame or 2-D array
        Reference rows, as the model takes them. The model receives frames with the same
        columns and dtypes (noisy integer columns become float unless ``round_integers``).
    sensitive_features : str, list of str, array-like, Series, DataFrame or dict
        Column name(s) of X: the model uses them, they are passed unperturbed and define the
        groups. Or arrays aligned with X: groups only, not passed to the model. Several
        columns: their intersection (call once per attribute for separate curves).
    y_true : array-like of 0/1, optional
        Labels (never perturbed); needed for EO / equal opportunity / FPR, and accuracy.
    metrics : str or sequence of str, default=('demographic_parity_difference',)
        Any of ``demographic_parity_difference``, ``equalized_odds_difference``,
        ``equal_opportunity_difference``, ``false_positive_rate_difference`` (or ``dp``,
        ``eo``, ``tp``, ``fp``). All come from the same predictions: extra ones are free.
    levels : sequence of float, default=(0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
        Noise strengths k > 0 in units of the ``scale`` basis (sorted ascending).
    n_repeats : int, default=10
        Noisy copies K per level (the maximum when ``early_stop`` cuts a chunked level short).
    noise : {'laplace', 'gaussian'}, default='laplace'
        Distribution of continuous noise (the paper's Laplace; Gaussian as in its Thm 4.1).
    scale : {'std', 'range', 'absolute'}, default='std'
        Noise of standard deviation ``k * column std``; the reference code's Laplace scale
        ``k * (max - min)``; or the paper's literal scale ``k`` in raw units.
    random_state : numpy.random.Generator, int or None
        Seed of the subsample and the noise. None means seed 0: results are reproducible.
        (``rng=``, its old name, is accepted until fairmonitor 0.3 with a FutureWarning.)
    max_rows : int or None, default=20000
        Cap on evaluated rows: a stratified sample over (group, label), recorded in the result.
    column_kinds : dict, optional
        Per-column override: ``continuous``, ``categorical`` or ``frozen`` (e.g. IDs, times).
        Default rule: numeric with more than 20 distinct values is continuous; bool, category,
        string or at most 20 distinct values is categorical; datetimes are frozen.
    preset : {None, 'paper'}
        ``'paper'``: the paper's protocol for parameters left at their defaults: ``range``
        basis, levels 0.2, 0.4, ..., 10, K = 100, no early stop.
    threshold : float, default=0.5
        Decision threshold when ``predict`` returns scores (fixed across levels).
    progress : callable, optional
        ``progress(done, total)`` after the clean call and after each level
        (``total = len(levels) + 1``); progress is also logged at INFO.
    min_group_size : int, default=1
        Groups with fewer sampled rows are left out with a warning.
    categorical_rate : float or callable, optional
        Resampling probability of a categorical cell: default ``min(1, 0.1 k)`` for ``std``,
        ``min(1, k/100)`` for ``range``/``absolute`` (paper Def 12); a factor c gives
        ``min(1, c k)``; a callable maps level -> rate.
    categorical_scheme : {'bernoulli', 'fixed_count'}, default='bernoulli'
        Each cell independently (paper), or exactly ``ceil(rate n)`` cells (reference code).
    crn : bool, default=True
        Common random numbers: one set of draws for every level. False draws anew per level.
    stochastic : bool, default=False
        The model is randomised: the clean rows are scored K times too (in one call).
    round_integers : bool, default=False
        Round noisy integer columns back to their dtype (e.g. for a strict MLflow signature).
    max_batch_rows : int, default=250000
        Memory cap of one predict call; a level's K copies are split in chunks of whole repeats.
    early_stop : bool, default=True
        Between chunks of a level, stop once K_MIN=3 repeats are done and every metric's SE is
        at most ``max(0.005, 0.05 gap)``. A level that fits one call always uses all K.
    tol_abs, tol_ratio, strict
        Robust rule: a level is worse if ``Delta_k > max(tol_abs, 1.96 SE(Delta_k))`` (and
        ``R_k > 1 + tol_ratio`` if given); ``strict=True`` uses the paper's ``R_k > 1``.

    Returns
    -------
    result : RobustnessResult
        ``result.value`` is the largest ratio of the first metric.

    Raises
    ------
    InvalidInputError
        Bad predict, X, sensitive features, labels or options; predict output of the wrong
        length or not 0/1 / scores.

    Warns
    -----
    ConstantColumnWarning
        Columns chosen for noise that hold a single value (they are left unperturbed).
    UndefinedMetricWarning, GroupExclusionWarning
        As the metric functions: fewer than two groups, groups without a class, 0/0 ratios.

    Notes
    -----
    The clean gap below the sampling floor ``sqrt(2/pi) sqrt(p(1-p)(1/n_a+1/n_b))`` (spec
    §5.5) cannot be told apart from 0, so, as for a clean gap of 0 (spec §1.6), R_k is +inf
    where the noisy gap is > 0 and NaN where it is 0; ``reason`` says so. Alert on Delta_k.

    Deliberate deviations from the reference code (spec §4.7): common random numbers (FairR
    draws independently; ``crn=False``); noise scaled by the column's std by default (FairR:
    range, ``scale='range'``; paper: raw units, ``scale='absolute'``); column kinds by the
    distinct-value rule, not dtype; a deterministic model's clean gap is computed once (K0=1);
    seed 0 when ``random_state`` is None. Early stopping never skips levels, so the level grid (and
    the monitor's label set) is fixed.

    Examples
    --------
    >>> import numpy as np
    >>> g = np.repeat([0, 1], 2000)
    >>> x = np.random.default_rng(0).normal(g - 0.5, 1.0)
    >>> res = robustness_ratio(lambda X: X[:, 0] > 0, x[:, None], sensitive_features=g,
    ...                        levels=[0.5, 1.0, 2.0], n_repeats=5)
    >>> res.levels, res.n_predict_calls
    ((0.5, 1.0, 2.0), 4)
    >>> [round(float(r), 3) for r in res.ratios["demographic_parity_difference"]]
    [0.912, 0.775, 0.575]
    >>> res.robust["demographic_parity_difference"]
    True
    """
    check_option(preset, "preset", (None, "paper"), func="robustness_ratio")
    if preset == "paper":  # fills the parameters left at their defaults
        scale, levels, n_repeats, early_stop = _paper_preset(scale, levels, n_repeats)
    call = as_predict(predict)
    levels_t = check_levels(levels)
    K = check_positive_int(n_repeats, "n_repeats")
    max_batch_rows = check_positive_int(max_batch_rows, "max_batch_rows")
    if max_rows is not None:
        max_rows = check_positive_int(max_rows, "max_rows", minimum=2)
    if progress is not None and not callable(progress):
        raise InvalidInputError(f"`progress` must be a callable (done, total); got {progress!r}.")
    X = check_X(X)
    sf, frozen = resolve_sensitive(X, sensitive_features)
    y = None
    if y_true is not None:
        y = check_binary(y_true, "y_true")
        check_same_length(X=X, y_true=y)
    metric_names = st.resolve_metrics(metrics, y is not None)
    kinds = infer_column_kinds(X, overrides=column_kinds, frozen=frozen)
    model = build_noise_model(X, kinds, distribution=noise, scale=scale,
                              scheme=categorical_scheme, categorical_rate=categorical_rate,
                              round_integers=round_integers)
    root = np.random.default_rng(0 if random_state is None else random_state)
    sample_rng, noise_rng, level_rng = root.spawn(3)

    n_total = len(X)
    X, sf, y, index = subsample(X, sf, y, max_rows, sample_rng)
    n = len(index)
    groups = encode_groups(sf, n_samples=n, min_group_size=min_group_size)
    table = st.GroupTable.build(groups, y)
    undefined = st.check_defined(metric_names, table)

    scorer = Scorer(call, threshold, max_batch_rows)
    started = time.perf_counter()
    clean = _clean_pass(scorer, X, K, stochastic, table, metric_names, undefined)
    total = len(levels_t) + 1
    log.info("robustness_ratio: %d rows x %d repeats x %d levels; clean call done",
             n, K, len(levels_t))
    if progress is not None:
        progress(1, total)

    runs = _Levels.empty(len(levels_t), groups.n_groups, metric_names, clean.rates)
    per_chunk = max(1, max_batch_rows // n)
    draws = model.draw(noise_rng, K, n) if crn else None
    level_rngs = level_rng.spawn(len(levels_t))
    for i, level in enumerate(levels_t):
        level_draws = draws if draws is not None else model.draw(level_rngs[i], K, n)
        run = _run_level(scorer, model, X, level_draws, level, K, per_chunk, clean.labels,
                         table, metric_names, y, undefined, early_stop)
        runs.record(i, run, undefined, has_labels=y is not None)
        log.info("robustness_ratio: level %d/%d (k=%g) done, %d repeats, %d predict calls, "
                 "%.2f s", i + 1, len(levels_t), level, runs.used[i], scorer.calls,
                 time.perf_counter() - started)
        if progress is not None:
            progress(i + 2, total)

    levels_arr = np.asarray(levels_t)
    curves = {m: st.summarise(m, levels_arr, runs.gap[m], runs.gap_se[m], clean.gap[m],
                              clean.se[m], clean.floor[m], undefined[m], tol_abs=tol_abs,
                              tol_ratio=tol_ratio, strict=strict)
              for m in metric_names}
    return RobustnessResult(
        value=curves[metric_names[0]].max_ratio,
        metrics=metric_names, attribute=groups.name, levels=levels_t,
        **_metric_fields(metric_names, runs, clean, curves),
        flip_rate=st.readonly(runs.flip), flip_rate_gap=st.readonly(runs.flip_gap),
        flip_rate_by_group=st.readonly(runs.flip_group),
        group_rates=MappingProxyType({_RATE_NAMES[r]: st.readonly(v)
                                      for r, v in runs.group_rates.items()}),
        group_labels=groups.labels,
        accuracy=st.readonly(runs.acc) if y is not None else None,
        clean_accuracy=float(np.mean(clean.labels == y)) if y is not None else None,
        repeats_used=st.readonly(runs.used), n_rows_used=n, n_rows_total=n_total,
        subsampled=n < n_total, sample_index=st.readonly(index),
        n_predict_calls=scorer.calls, n_rows_scored=scorer.rows,
        column_kinds=MappingProxyType(dict(kinds)), noise=noise, scale=scale,
        categorical_scheme=categorical_scheme,
        categorical_rates=st.readonly(np.array([model.rate(k) for k in levels_t])),
        crn=crn, stochastic=stochastic,
    )


def _paper_preset(scale: str, levels: Any, n_repeats: int) -> tuple[str, Any, int, bool]:
    """Return ``scale, levels, n_repeats, early_stop`` of ``preset='paper'``.

    Only the parameters left at their defaults take the paper's values; early stop is off.
    """
    return ("range" if scale == "std" else scale,
            PAPER_LEVELS if tuple(levels) == DEFAULT_LEVELS else levels,
            100 if n_repeats == 10 else n_repeats, False)


@dataclass(frozen=True, slots=True)
class _Clean:
    """The clean pass: its labels, per-group rates, and per metric gap, SE and sampling floor.

    ``labels`` has K0 rows: 1, or K for a stochastic model.
    """

    labels: NDArray[np.float64]
    rates: dict[str, NDArray[np.float64]]
    gap: dict[str, float]
    se: dict[str, float]
    floor: dict[str, float]


def _clean_pass(scorer: Scorer, X: Any, K: int, stochastic: bool, table: st.GroupTable,
                metric_names: tuple[str, ...], undefined: Mapping[str, str]) -> _Clean:
    """Score the clean rows (``K`` times, in one call, for a stochastic model)."""
    n = len(X)
    K0 = K if stochastic else 1
    labels = scorer(tile_rows(X, K0) if stochastic else X).reshape(K0, n)
    rates = table.rates(labels)
    per = {m: st.gaps(m, table, rates) for m in metric_names}
    return _Clean(
        labels=labels, rates=rates,
        gap={m: math.nan if undefined[m] else float(np.mean(v)) for m, v in per.items()},
        se={m: float(np.std(v, ddof=1) / math.sqrt(K0)) if K0 > 1 else 0.0
            for m, v in per.items()},
        floor={m: st.sampling_floor(m, table, rates) for m in metric_names})


@dataclass(frozen=True, slots=True)
class _Levels:
    """Per-level means of the level runs (arrays filled in place, one row per level).

    ``group_rates`` has the clean rates in row 0, level i in row i + 1.
    """

    gap: dict[str, NDArray[np.float64]]
    gap_se: dict[str, NDArray[np.float64]]
    flip: NDArray[np.float64]
    flip_gap: NDArray[np.float64]
    acc: NDArray[np.float64]
    flip_group: NDArray[np.float64]
    group_rates: dict[str, NDArray[np.float64]]
    used: NDArray[np.intp]

    @classmethod
    def empty(cls, L: int, G: int, metric_names: tuple[str, ...],
              clean_rates: Mapping[str, NDArray[np.float64]]) -> _Levels:
        """Return NaN gaps and zero shares for ``L`` levels, ``G`` groups."""
        group_rates = {r: np.zeros((L + 1, G)) for r in clean_rates}
        for r, part in clean_rates.items():
            group_rates[r][0] = part.mean(axis=0)
        return cls(gap={m: np.full(L, math.nan) for m in metric_names},
                   gap_se={m: np.full(L, math.nan) for m in metric_names},
                   flip=np.zeros(L), flip_gap=np.zeros(L), acc=np.zeros(L),
                   flip_group=np.zeros((L, G)), group_rates=group_rates,
                   used=np.zeros(L, dtype=np.intp))

    def record(self, i: int, run: _LevelRun, undefined: Mapping[str, str], *,
               has_labels: bool) -> None:
        """Store level ``i``'s means over its repeats."""
        self.used[i] = len(run.flips)
        for m, v in run.gaps.items():
            if not undefined[m]:
                self.gap[m][i] = v.mean()
                self.gap_se[m][i] = v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else math.nan
        self.flip[i] = run.flips.mean()
        self.acc[i] = run.accuracy.mean() if has_labels else math.nan
        self.flip_group[i] = run.flip_rates.mean(axis=0)
        for r, part in run.rates.items():
            self.group_rates[r][i + 1] = part.mean(axis=0)
        self.flip_gap[i] = np.ptp(self.flip_group[i]) if self.flip_group.shape[1] >= 2 \
            else math.nan


def _metric_fields(metric_names: tuple[str, ...], runs: _Levels, clean: _Clean,
                   curves: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Return the result's per-metric fields (read-only mappings of read-only values)."""

    def per_metric(get: Callable[[str], Any]) -> Mapping[str, Any]:
        return MappingProxyType({m: st.readonly(get(m)) for m in metric_names})

    fields = {"gaps": per_metric(runs.gap.get), "gap_se": per_metric(runs.gap_se.get),
              "clean_gaps": per_metric(clean.gap.get), "clean_gap_se": per_metric(clean.se.get),
              "noise_floor": per_metric(clean.floor.get)}
    for name in ("ratios", "ratio_se", "ratios_floored", "deltas", "delta_se",
                 "ratio_at_max_level", "max_ratio", "argmax_level", "auc_ratio", "max_delta",
                 "frac_levels_worse", "robust", "reason"):
        fields[name] = per_metric(lambda m, name=name: getattr(curves[m], name))
    return fields


@dataclass(frozen=True, slots=True)
class _LevelRun:
    """Per-repeat values of one level.

    Gaps per metric, flip and accuracy shares: shape (k,); per-group rates and flip rates:
    shape (k, G).
    """

    gaps: dict[str, NDArray[np.float64]]
    flips: NDArray[np.float64]
    accuracy: NDArray[np.float64]
    rates: dict[str, NDArray[np.float64]]
    flip_rates: NDArray[np.float64]


def _run_level(scorer: Scorer, model: Any, X: Any, draws: Any, level: float, K: int,
               per_chunk: int, clean: NDArray[np.float64], table: st.GroupTable,
               metric_names: tuple[str, ...], y: NDArray[np.float64] | None,
               undefined: Mapping[str, str], early_stop: bool) -> _LevelRun:
    """Score the K noisy copies of one level, stopping early between chunks.

    One predict call per chunk of whole repeats: a single call when K * n <= max_batch_rows.
    """
    n = clean.shape[1]
    parts: dict[str, list[NDArray[np.float64]]] = {}
    r0 = 0
    while r0 < K:
        r1 = min(K, r0 + per_chunk)
        k = r1 - r0
        yhat = scorer(model.stack(X, draws, level, r0, r1)).reshape(k, n)
        # a stochastic model's copy j is compared with its own clean copy j
        changed = (yhat != (clean[r0:r1] if len(clean) > 1 else clean)).astype(np.float64)
        rates = table.rates(np.vstack([yhat, changed]))  # one matrix product for both
        chunk = {f"rate:{r}": v[:k] for r, v in rates.items()}
        chunk.update({f"gap:{m}": st.gaps(m, table, {r: v[:k] for r, v in rates.items()})
                      for m in metric_names})
        chunk["flip_rates"] = rates["selection"][k:]
        chunk["flips"] = changed.mean(axis=1)
        chunk["accuracy"] = (yhat == y).mean(axis=1) if y is not None else np.zeros(k)
        for key, value in chunk.items():
            parts.setdefault(key, []).append(value)
        r0 = r1
        if early_stop and K_MIN <= r0 < K and _converged(
                {m: np.concatenate(parts[f"gap:{m}"]) for m in metric_names}, undefined):
            break
    out = {key: np.concatenate(value) for key, value in parts.items()}
    return _LevelRun(
        gaps={m: out[f"gap:{m}"] for m in metric_names}, flips=out["flips"],
        accuracy=out["accuracy"],
        rates={key[5:]: v for key, v in out.items() if key.startswith("rate:")},
        flip_rates=out["flip_rates"])


def _converged(gaps: Mapping[str, NDArray[np.float64]], undefined: Mapping[str, str]) -> bool:
    """Every defined metric's SE <= max(SE_ABS_TOL, SE_REL_TOL * mean gap) (spec §5.5)."""
    for m, v in gaps.items():
        if undefined[m]:
            continue
        if v.std(ddof=1) / math.sqrt(len(v)) > max(SE_ABS_TOL, SE_REL_TOL * v.mean()):
            return False
    return True
