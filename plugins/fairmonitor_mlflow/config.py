"""Parse and validate the ``evaluator_config`` of the fairness evaluator.

The config is a plain dict (``evaluator_config={"fairness": {...}}``). Every key is checked:
an unknown key raises :class:`~fairmonitor.exceptions.ConfigError` naming it and listing the
allowed ones, a bad value names the key, the rule and what was received. Metric names are checked
against the registry, so a metric that has not been registered is an error here, not a silent
no-op later.
"""

from __future__ import annotations

import difflib
import inspect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fairmonitor.exceptions import ConfigError, InvalidInputError
from fairmonitor.metrics._groups import MISSING_POLICIES
from fairmonitor.report.defaults import MIN_CONDITION_SIZE, MIN_GROUP_SIZE
from fairmonitor.report.registry import METRICS, get_metric
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

#: The documented robustness sub-keys; keywords of the registered robustness function are
#: accepted too (forwarded unchanged).
ROBUSTNESS_KEYS = ("levels", "n_repeats", "max_rows")

# the arguments the report layer fills in itself; never configurable per metric
_RESERVED_KWARGS = frozenset({"sensitive_features", "min_group_size", "min_condition_size",
                              "rng"})


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


def _names(value: Any, key: str, *, allow_none: bool) -> tuple[str, ...] | None:
    if value is None and allow_none:
        return None
    if isinstance(value, str):
        value = [value]
    if (not isinstance(value, Sequence) or not value
            or not all(isinstance(v, str) and v for v in value)):
        raise ConfigError(
            f"{key}: must be a non-empty list of column/metric names; got {value!r}.")
    if len(set(value)) != len(value):
        raise ConfigError(f"{key}: names must be unique; got {list(value)!r}.")
    return tuple(value)


def _metric_name(name: Any, key: str) -> str:
    try:
        return get_metric(name).name
    except InvalidInputError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def _number(value: Any, key: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{key}: must be a number in [{lo}, {hi}]; got {value!r}.")
    if not lo <= value <= hi:
        raise ConfigError(f"{key}: must be a number in [{lo}, {hi}]; got {value!r}.")
    return float(value)


def _positive_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{key}: must be an integer >= 1; got {value!r}.")
    return value


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: must be True or False; got {value!r}.")
    return value


_THRESHOLD_KEYS = ("warning", "critical", "bound", "attribute", "compare")


def _thresholds(value: Any, attributes: Sequence[str]) -> tuple[Threshold, ...]:
    """Return the monitor's threshold model: ``{metric: entry or [entries]}``.

    An entry naming ``attribute`` overrides the general one for that attribute (the
    intersection included).
    """
    if not isinstance(value, Mapping):
        raise ConfigError("thresholds: must be a dict {metric: {warning, critical, bound, "
                          f"attribute}} (or a list of such dicts); got {value!r}.")
    out = []
    for metric, entries in value.items():
        name = _metric_name(metric, "thresholds")
        items = entries if isinstance(entries, list) else [entries]
        for i, spec in enumerate(items):
            where = f"thresholds.{name}" + (f"[{i}]" if isinstance(entries, list) else "")
            if not isinstance(spec, Mapping):
                raise ConfigError(f"{where}: must be a dict with keys "
                                  f"{', '.join(_THRESHOLD_KEYS)}; got {spec!r}.")
            bad = [k for k in spec if k not in _THRESHOLD_KEYS]
            if bad:
                raise ConfigError(_unknown(bad, _THRESHOLD_KEYS, where))
            attribute = spec.get("attribute")
            if attribute is not None and attribute not in attributes:
                raise ConfigError(f"{where}.attribute: {attribute!r} is not an evaluated "
                                  f"attribute; choose one of {list(attributes)}.")
            bound = spec.get("bound", METRICS[name].default_bound)
            out.append(Threshold(name, spec.get("warning"), spec.get("critical"), bound,
                                 attribute, compare=spec.get("compare", "value")))
    return tuple(out)


def _missing(value: Any, sensitive: Sequence[str]) -> Any:
    allowed = ", ".join(MISSING_POLICIES)
    if isinstance(value, str):
        if value not in MISSING_POLICIES:
            raise ConfigError(f"missing: must be one of {allowed} (or a dict {{column: policy}}"
                              f"); got {value!r}.")
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"missing: must be one of {allowed} or a dict {{column: policy}}; "
                          f"got {value!r}.")
    out = dict.fromkeys(sensitive, "group")
    for column, how in value.items():
        if column not in sensitive:
            raise ConfigError(f"missing.{column}: not one of the sensitive_features "
                              f"{list(sensitive)}.")
        if how not in MISSING_POLICIES:
            raise ConfigError(f"missing.{column}: must be one of {allowed}; got {how!r}.")
        out[column] = how
    return out


def _robustness_keywords() -> set[str]:
    """Keyword options of the registered metrics that call the model (the robustness ones)."""
    accepted: set[str] = set()
    for spec in METRICS.values():
        if "predict" in spec.inputs:
            params = inspect.signature(spec.func).parameters
            accepted |= {p for p, v in params.items() if v.kind == v.KEYWORD_ONLY}
    return accepted - _RESERVED_KWARGS


def _robustness(value: Any) -> tuple[dict[str, Any], bool | None]:
    if value is None:
        return {}, None
    if isinstance(value, bool):
        return {}, value
    if not isinstance(value, Mapping):
        raise ConfigError("robustness: must be a dict (levels, n_repeats, max_rows), True or "
                          f"False; got {value!r}.")
    allowed = sorted(set(ROBUSTNESS_KEYS) | _robustness_keywords())
    bad = [k for k in value if k not in allowed]
    if bad:
        raise ConfigError(_unknown(bad, allowed, "robustness"))
    out = dict(value)
    if "levels" in out:
        levels = out["levels"]
        if (isinstance(levels, str | bytes) or not isinstance(levels, Sequence) or not levels
                or any(isinstance(v, bool) or not isinstance(v, int | float) or not v > 0
                       for v in levels)):
            raise ConfigError("robustness.levels: must be a non-empty list of positive noise "
                              f"levels; got {levels!r}.")
        out["levels"] = tuple(float(v) for v in levels)
    for key in ("n_repeats", "max_rows"):
        if key in out:
            out[key] = _positive_int(out[key], f"robustness.{key}")
    return out, True


def _options(value: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"options: must be a dict {{metric: {{keyword: value}}}}; got {value!r}.")
    out = {}
    for metric, kwargs in value.items():
        name = _metric_name(metric, "options")
        if not isinstance(kwargs, Mapping):
            raise ConfigError(f"options.{name}: must be a dict of keyword arguments; "
                              f"got {kwargs!r}.")
        params = inspect.signature(METRICS[name].func).parameters
        allowed = sorted(p for p, v in params.items()
                         if v.kind == v.KEYWORD_ONLY and p not in _RESERVED_KWARGS)
        bad = [k for k in kwargs if k not in allowed]
        if bad:
            raise ConfigError(_unknown(bad, allowed, f"options.{name}"))
        out[name] = dict(kwargs)
    return out


def parse_config(evaluator_config: Mapping[str, Any] | None) -> FairnessConfig:
    """Validate an ``evaluator_config`` dict and return a :class:`FairnessConfig`.

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
        An unknown key (named, with the allowed keys), a missing ``sensitive_features``, or a
        bad value (the key, the rule and the value received).

    Examples
    --------
    >>> parse_config({"sensitive_features": ["sex", "age_group"]}).attributes
    ('sex', 'age_group', 'sex:age_group')
    >>> try:
    ...     parse_config({"sensitive_feature": ["sex"]})
    ... except ConfigError as exc:
    ...     print(str(exc).split(";")[0])
    evaluator_config: unknown key(s) 'sensitive_feature' (did you mean 'sensitive_features'?)
    """
    cfg = dict(evaluator_config or {})
    bad = [k for k in cfg if k not in ALLOWED_KEYS]
    if bad:
        raise ConfigError(_unknown(bad, list(ALLOWED_KEYS), "evaluator_config", hint=(
            " With several evaluators, nest each one's config: "
            "evaluator_config={'fairness': {...}}.")))
    if not cfg.get("sensitive_features"):
        raise ConfigError("evaluator_config: 'sensitive_features' is required: the list of "
                          "columns holding the sensitive attributes, e.g. ['sex', 'age_group'].")
    sensitive = _names(cfg["sensitive_features"], "sensitive_features", allow_none=False)
    all_metrics = cfg.get("metrics") == "all"
    metrics = None if all_metrics else _names(cfg.get("metrics"), "metrics", allow_none=True)
    if metrics is not None:
        metrics = tuple(_metric_name(m, "metrics") for m in metrics)
    score_column = cfg.get("score_column")
    if score_column is not None and (not isinstance(score_column, str) or not score_column):
        raise ConfigError(f"score_column: must be a column name; got {score_column!r}.")
    weight_column = cfg.get("sample_weight")
    if weight_column is not None and (not isinstance(weight_column, str) or not weight_column):
        raise ConfigError(f"sample_weight: must be the name of a column of per-row weights; "
                          f"got {weight_column!r}.")
    pos_label = cfg.get("pos_label", 1)
    if isinstance(pos_label, list | dict | set | tuple) or pos_label is None:
        raise ConfigError(f"pos_label: must be a single class label; got {pos_label!r}.")
    rng = cfg.get("rng", 0)
    if not (rng is None or (isinstance(rng, int) and not isinstance(rng, bool))
            or isinstance(rng, np.random.Generator)):
        raise ConfigError(f"rng: must be an integer seed, a numpy Generator or None; got {rng!r}.")
    robustness, enabled = _robustness(cfg.get("robustness"))
    intersection = _bool(cfg.get("intersection", True), "intersection")
    attributes = [*sensitive, *([":".join(sensitive)]  # type: ignore[arg-type]
                                if intersection and len(sensitive) > 1 else [])]
    return FairnessConfig(
        sensitive_features=sensitive,  # type: ignore[arg-type]
        metrics=metrics,
        all_metrics=all_metrics,
        score_column=score_column,
        pos_label=pos_label,
        threshold=_number(cfg.get("threshold", 0.5), "threshold", 0.0, 1.0),
        min_group_size=_positive_int(cfg.get("min_group_size", MIN_GROUP_SIZE),
                                     "min_group_size"),
        min_condition_size=_positive_int(cfg.get("min_condition_size", MIN_CONDITION_SIZE),
                                         "min_condition_size"),
        intersection=intersection,
        thresholds=_thresholds(cfg.get("thresholds", {}), attributes),
        robustness=robustness,
        robustness_enabled=enabled,
        features=_names(cfg.get("features"), "features", allow_none=True),
        model_uses_sensitive=_bool(cfg.get("model_uses_sensitive", False),
                                   "model_uses_sensitive"),
        options=_options(cfg.get("options", {})),
        rng=rng,
        pos_label_given="pos_label" in cfg,
        missing=_missing(cfg.get("missing", "group"), sensitive),  # type: ignore[arg-type]
        decision_function=_bool(cfg.get("decision_function", False), "decision_function"),
        confidence_level=_level(cfg.get("confidence_level", 0.95)),
        sample_weight=weight_column,
    )


def _level(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ConfigError(f"confidence_level: must be a number in (0, 1), e.g. 0.95, or None "
                          f"(no intervals); got {value!r}.")
    return float(value)
