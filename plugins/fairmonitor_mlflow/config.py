"""Parse and validate the ``evaluator_config`` of the fairness evaluator.

The config is a plain dict (``evaluator_config={"fairness": {...}}``). Every key is checked:
an unknown key is named with the allowed ones, a bad value names the key, the rule and what was
received, and one :class:`~fairmonitor.exceptions.ConfigError` lists every problem at once (as
the monitor's config does). Metric names are checked against the registry, so a metric that has
not been registered is an error here, not a silent no-op later. The settings the monitor shares
are read by :mod:`fairmonitor.report.reading`: one set of defaults, one error style.
"""

from __future__ import annotations

import difflib
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fairmonitor.exceptions import ConfigError as ConfigError  # raised by parse_config
from fairmonitor.exceptions import InvalidInputError
from fairmonitor.report.defaults import MIN_CONDITION_SIZE, MIN_GROUP_SIZE
from fairmonitor.report.options import EvaluationOptions
from fairmonitor.report.reading import (
    ROBUSTNESS_KEYS,
    Reader,
    read_confidence_level,
    read_group_minimums,
    read_missing,
    read_options,
    read_robustness,
    read_thresholds,
)
from fairmonitor.report.registry import get_metric
from fairmonitor.report.thresholds import Threshold

__all__ = ["ALLOWED_KEYS", "DEFAULT_METRICS", "ROBUSTNESS_KEYS", "FairnessConfig",
           "parse_config"]

#: The default metric set: seconds on 10^5 rows (benchmarks/bench_evaluator.py). The others
#: are opt-in, by name in ``metrics`` or with ``metrics="all"``: HFM (exact is quadratic in the
#: rows), CFair (a matching per attribute) and robustness (the model is called
#: ``n_repeats x levels`` times; also on with ``robustness=True`` or a robustness dict).
DEFAULT_METRICS = ("demographic_parity_difference", "demographic_parity_ratio",
                   "equalized_odds_difference", "equal_opportunity_difference",
                   "predictive_parity_difference", "calibration_difference",
                   "abcc", "abpc", "madd")

#: Every key the evaluator accepts, with its default (documented in the README table).
ALLOWED_KEYS: dict[str, Any] = {
    "sensitive_features": None,   # required
    "metrics": None,              # default: DEFAULT_METRICS; "all": every registered one
    "score_column": None,
    "pos_label": 1,
    "threshold": 0.5,
    "min_group_size": MIN_GROUP_SIZE,          # the monitor's default too
    "min_condition_size": MIN_CONDITION_SIZE,  # rows a rate conditions on
    "intersection": True,
    "thresholds": {},
    "robustness": None,           # default: on when a model is given
    "features": None,
    "model_uses_sensitive": False,
    "options": {},
    "rng": 0,
    "missing": "group",           # missing sensitive values: group | drop | raise
    "decision_function": False,   # scores of a predict-only classifier (LinearSVC): opt-in
    "confidence_level": 0.95,     # each value's interval; None: no intervals
    "sample_weight": None,        # a column of per-row weights (weighted parity and ABCC)
}



@dataclass(frozen=True)
class FairnessConfig:
    """The validated evaluator config. Build it with :func:`parse_config`.

    Attributes
    ----------
    sensitive_features : tuple of str
        Column names of the sensitive attributes.
    metrics : tuple of str or None
        Requested registry names; None means the default set (:data:`DEFAULT_METRICS`, plus
        robustness when it is configured), or every metric the inputs allow with
        ``all_metrics``.
    all_metrics : bool
        ``metrics="all"``: every registered metric the inputs allow.
    score_column : str or None
        Column holding positive-class scores; None means ``predict_proba`` when available.
    pos_label : object
        The positive class of the labels and predictions.
    threshold : float
        Decision threshold turning scores into 0/1 predictions where only scores exist.
    min_group_size : int
        Smaller groups are left out of every metric (default 30: a selection rate of fewer
        rows has a standard error above 0.09, so a gap between such groups is mostly noise);
        the monitor's default too (``fairmonitor.report.defaults``).
    min_condition_size : int
        Per rate, groups with fewer rows of what it conditions on (actual positives for a TPR,
        negatives for an FPR, predicted positives for precision) are left out of its gap
        (default 10).
    intersection : bool
        With several attributes, also evaluate their intersection.
    thresholds : tuple of Threshold
        Alert bounds; drive the run tag and the MLflow ``MetricThreshold`` mapping. A
        threshold without ``attribute`` governs each sensitive feature, not the intersection.
    robustness : dict or None
        None: on when a model is given, with default settings; ``{}`` or a dict of settings:
        on; False is stored as ``robustness_enabled=False``.
    robustness_enabled : bool or None
        False when the config says ``robustness=False``; None means "if a model is given".
    features : tuple of str or None
        Columns for feature-space metrics; None means the model's non-sensitive inputs.
    model_uses_sensitive : bool
        Keep the sensitive columns in the model's input.
    options : dict
        Per-metric keyword options, ``{metric: {kw: value}}``.
    rng : int, numpy.random.Generator or None
        Seed of every randomised metric.
    missing : str or mapping of str to str
        Missing sensitive values: ``"group"`` (their own group ``"missing"``), ``"drop"``
        (rows left out of every metric, counted in ``fairness/missing_count/<attribute>``) or
        ``"raise"``; one policy, or ``{column: policy}`` (unnamed columns: ``"group"``).
    decision_function : bool
        Without ``predict_proba``, take scores as the logistic sigmoid of the estimator's
        ``decision_function`` (a monotone map of the margin into (0, 1), not a probability:
        compare such score metrics only with each other).
    sample_weight : str or None
        Column of per-row weights (never a model input): the parity gaps and ABCC become
        weighted, the metrics without a weighted definition are NaN with the reason.
    confidence_level : float or None
        Level of each value's confidence interval (logged as ``fairness/ci_lower/...`` and
        ``fairness/ci_upper/...``, with the chance level ``fairness/chance/...``); None: none.
    """

    sensitive_features: tuple[str, ...]
    metrics: tuple[str, ...] | None = None
    all_metrics: bool = False
    score_column: str | None = None
    pos_label: Any = 1
    threshold: float = 0.5
    min_group_size: int = MIN_GROUP_SIZE
    min_condition_size: int = MIN_CONDITION_SIZE
    intersection: bool = True
    thresholds: tuple[Threshold, ...] = ()
    robustness: Mapping[str, Any] = field(default_factory=dict)
    robustness_enabled: bool | None = None
    features: tuple[str, ...] | None = None
    model_uses_sensitive: bool = False
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    rng: Any = 0
    pos_label_given: bool = False
    missing: Any = "group"
    decision_function: bool = False
    confidence_level: float | None = 0.95
    sample_weight: str | None = None

    @functools.cached_property
    def evaluation(self) -> EvaluationOptions:
        """The report layer's settings of this evaluation, built once."""
        return EvaluationOptions(
            min_group_size=self.min_group_size, min_condition_size=self.min_condition_size,
            intersection=self.intersection, thresholds=self.thresholds, options=self.options,
            threshold=self.threshold, rng=self.rng, confidence_level=self.confidence_level)

    @property
    def attributes(self) -> tuple[str, ...]:
        """Attribute names the report will hold: each column, then their intersection."""
        cols = self.sensitive_features
        extra = (":".join(cols),) if self.intersection and len(cols) > 1 else ()
        return (*cols, *extra)


def _unknown(keys: Sequence[str], allowed: Sequence[str], where: str, hint: str = "") -> str:
    parts = []
    for key in keys:
        close = difflib.get_close_matches(str(key), list(allowed), n=1)
        parts.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return (f"{where}: unknown key(s) {', '.join(parts)}; allowed keys: "
            f"{', '.join(allowed)}.{hint}")


def _names(r: Reader, cfg: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    """Read a non-empty list of unique names (a single string is one); None if not given."""
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if (not isinstance(value, Sequence) or not value
            or not all(isinstance(v, str) and v for v in value)):
        r.error(key, f"must be a non-empty list of column/metric names; got {value!r}")
        return None
    if len(set(value)) != len(value):
        r.error(key, f"names must be unique; got {list(value)!r}")
    return tuple(dict.fromkeys(value))


def _metrics(r: Reader, cfg: Mapping[str, Any]) -> tuple[tuple[str, ...] | None, bool]:
    """Read the requested metrics (None: the default set) and whether ``metrics="all"``."""
    if cfg.get("metrics") == "all":
        return None, True
    names = _names(r, cfg, "metrics")
    if names is None:
        return None, False
    known = []
    for name in names:
        try:
            known.append(get_metric(name).name)
        except InvalidInputError as exc:
            r.error("metrics", str(exc))
    return tuple(known), False


def _column(r: Reader, cfg: Mapping[str, Any], key: str, what: str) -> str | None:
    value = cfg.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        r.error(key, f"must be {what}; got {value!r}")
        return None
    return value


def _number(r: Reader, cfg: Mapping[str, Any], key: str, default: float, lo: float,
            hi: float) -> float:
    value = cfg.get(key, default)
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or not lo <= value <= hi):
        r.error(key, f"must be a number in [{lo}, {hi}]; got {value!r}")
        return default
    return float(value)


def _bool(r: Reader, cfg: Mapping[str, Any], key: str, default: bool) -> bool:
    value = cfg.get(key, default)
    if not isinstance(value, bool):
        r.error(key, f"must be True or False; got {value!r}")
        return default
    return value


def _pos_label(r: Reader, cfg: Mapping[str, Any]) -> Any:
    value = cfg.get("pos_label", 1)
    if isinstance(value, list | dict | set | tuple) or value is None:
        r.error("pos_label", f"must be a single class label; got {value!r}")
        return 1
    return value


def _rng(r: Reader, cfg: Mapping[str, Any]) -> Any:
    value = cfg.get("rng", 0)
    if not (value is None or (isinstance(value, int) and not isinstance(value, bool))
            or isinstance(value, np.random.Generator)):
        r.error("rng", f"must be an integer seed, a numpy Generator or None; got {value!r}")
        return 0
    return value


def _sensitive(r: Reader, cfg: Mapping[str, Any]) -> tuple[str, ...]:
    if not cfg.get("sensitive_features"):
        r.error("evaluator_config", "'sensitive_features' is required: the list of columns "
                                    "holding the sensitive attributes, e.g. ['sex', "
                                    "'age_group']")
        return ()
    return _names(r, cfg, "sensitive_features") or ()


def parse_config(evaluator_config: Mapping[str, Any] | None) -> FairnessConfig:
    """Validate an ``evaluator_config`` dict and return a :class:`FairnessConfig`.

    The settings the monitor shares (thresholds, ``missing``, the group minimums,
    ``options``, ``robustness``, ``confidence_level``) are read by
    :mod:`fairmonitor.report.reading`, with the monitor's defaults and messages.

    Parameters
    ----------
    evaluator_config : mapping
        The fairness evaluator's config (the inner dict of a nested
        ``evaluator_config={"fairness": {...}}``).

    Returns
    -------
    config : FairnessConfig

    Raises
    ------
    ConfigError
        One error listing every problem (``errors`` holds them one by one): an unknown key
        (named, with the allowed keys), a missing ``sensitive_features``, or a bad value (the
        key, the rule and the value received).

    Examples
    --------
    >>> parse_config({"sensitive_features": ["sex", "age_group"]}).attributes
    ('sex', 'age_group', 'sex:age_group')
    >>> try:
    ...     parse_config({"sensitive_feature": ["sex"], "min_group_size": 0})
    ... except ConfigError as exc:
    ...     print(str(exc).splitlines()[0])
    ...     print(exc.errors[0].split(";")[0])
    ...     print(exc.errors[2])
    evaluator_config has 3 errors:
    evaluator_config: unknown key(s) 'sensitive_feature' (did you mean 'sensitive_features'?)
    min_group_size: must be a positive integer; got 0
    """
    cfg = dict(evaluator_config or {})
    r = Reader()
    bad = [k for k in cfg if k not in ALLOWED_KEYS]
    if bad:
        r.error("", _unknown(bad, list(ALLOWED_KEYS), "evaluator_config", hint=(
            " With several evaluators, nest each one's config: "
            "evaluator_config={'fairness': {...}}.")))
    sensitive = _sensitive(r, cfg)
    metrics, all_metrics = _metrics(r, cfg)
    intersection = _bool(r, cfg, "intersection", True)
    attributes = [*sensitive, *([":".join(sensitive)] if intersection and len(sensitive) > 1
                                else [])]
    robustness, enabled = read_robustness(r, "robustness", cfg.get("robustness"))
    min_group_size, min_condition_size = read_group_minimums(r, cfg)
    out = FairnessConfig(
        sensitive_features=sensitive, metrics=metrics, all_metrics=all_metrics,
        score_column=_column(r, cfg, "score_column", "a column name"),
        pos_label=_pos_label(r, cfg), threshold=_number(r, cfg, "threshold", 0.5, 0.0, 1.0),
        min_group_size=min_group_size, min_condition_size=min_condition_size,
        intersection=intersection,
        thresholds=read_thresholds(r, "thresholds", cfg.get("thresholds", {}), None,
                                   attributes),
        robustness=robustness, robustness_enabled=enabled,
        features=_names(r, cfg, "features"),
        model_uses_sensitive=_bool(r, cfg, "model_uses_sensitive", False),
        options=read_options(r, "options", cfg.get("options", {})),
        rng=_rng(r, cfg), pos_label_given="pos_label" in cfg,
        missing=read_missing(r, cfg.get("missing", "group"), "missing", sensitive),
        decision_function=_bool(r, cfg, "decision_function", False),
        confidence_level=read_confidence_level(r, cfg),
        sample_weight=_column(r, cfg, "sample_weight",
                              "the name of a column of per-row weights"))
    r.raise_if_errors("evaluator_config")
    return out
