"""The one reader of the settings the MLflow evaluator and the monitor share.

Thresholds, the missing-value policy, the group minimums, per-metric options, robustness
settings and the interval level are read here, for the monitor's YAML
(:mod:`fairmonitor.monitor.config`) and the evaluator's ``evaluator_config``
(``plugins/fairmonitor_mlflow/config.py``) alike: one set of defaults
(:mod:`~fairmonitor.report.defaults`), one error style. A :class:`Reader` records every
problem as ``<dotted.key.path>: <rule>; got <value>`` and returns a best-effort value, so one
pass reports every error of a config; :meth:`Reader.raise_if_errors` raises one
:class:`~fairmonitor.exceptions.ConfigError` listing them all (its ``errors`` attribute holds
them one by one).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NoReturn

from ..exceptions import ConfigError
from ..utils.groups import MISSING_POLICIES
from .defaults import MIN_CONDITION_SIZE, MIN_GROUP_SIZE
from .registry import METRICS, metric_task
from .thresholds import COMPARES, Threshold

__all__ = ["MODEL_TASKS", "ROBUSTNESS_KEYS", "THRESHOLD_KEYS", "Reader",
           "check_task_metrics", "fail", "fmt_allowed", "read_classes",
           "read_confidence_level", "read_group_minimums", "read_missing", "read_options",
           "read_robustness", "read_task", "read_thresholds"]

_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
#: The keys of one threshold entry.
THRESHOLD_KEYS = ("warning", "critical", "bound", "attribute", "against_direction", "compare")
#: The documented robustness settings; keywords of the registered robustness function are
#: accepted too (forwarded unchanged).
ROBUSTNESS_KEYS = ("levels", "n_repeats", "max_rows")
#: What a model predicts (its ``task:``): 0/1 predictions and scores, a class among several
#: (measured one-vs-rest per class) or a number.
MODEL_TASKS = ("binary", "multiclass", "regression")
# filled in by the report layer from the window: never a per-metric option
_RESERVED = frozenset({"sensitive_features"})


def fmt_allowed(values: Iterable[Any]) -> str:
    """Return ``a, b, c``: the allowed values of a key, for messages."""
    return ", ".join(str(v) for v in values)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Reader:
    """Reads typed values out of a parsed config, recording errors with their key paths."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def error(self, path: str, message: str) -> None:
        """Record ``path: message``."""
        self.errors.append(f"{path}: {message}" if path else message)

    def raise_if_errors(self, what: str) -> None:
        """Raise one :class:`ConfigError` listing every recorded error, if there are any."""
        if self.errors:
            fail(what, self.errors)

    def keys(self, path: str, mapping: Mapping[str, Any], allowed: Iterable[str]) -> None:
        """Report keys of ``mapping`` that are not in ``allowed`` (typos, misplaced keys)."""
        allowed = tuple(allowed)
        for key in mapping:
            if key not in allowed:
                self.error(_join(path, str(key)),
                           f"unknown key {key!r}; allowed keys: {fmt_allowed(allowed)}")

    def get(self, mapping: Mapping[str, Any], key: str, kind: type, default: Any, *,
            path: str = "", required: bool = False, nullable: bool = False) -> Any:
        """``mapping[key]`` checked to be of ``kind`` (ints count as floats), else ``default``."""
        value = mapping.get(key)
        if value is None:
            if required:
                self.error(_join(path, key), f"required; give {_TYPE_NAMES[kind]}")
            return None if nullable and key in mapping else default
        ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            ok, value = True, float(value)
        if not ok:
            self.error(_join(path, key), f"must be {_TYPE_NAMES[kind]}; got {value!r}")
            return default
        return value

    def positive_int(self, mapping: Mapping[str, Any], key: str, default: int, *,
                     path: str = "") -> int:
        """Read a positive integer, else ``default``."""
        value = self.get(mapping, key, int, default, path=path)
        if value < 1:
            self.error(_join(path, key), f"must be a positive integer; got {value!r}")
            return default
        return int(value)

    def choice(self, mapping: Mapping[str, Any], key: str, allowed: tuple[Any, ...],
               default: Any, *, path: str = "", required: bool = False) -> Any:
        """One of ``allowed``, else ``default``."""
        value = mapping.get(key)
        if value is None:
            if required:
                self.error(_join(path, key), f"required; give one of {list(allowed)}")
            return default
        if value not in allowed:
            self.error(_join(path, key), f"must be one of {list(allowed)}; got {value!r}")
            return default
        return value

    def names(self, mapping: Mapping[str, Any], key: str, path: str, *,
              required: bool = False) -> tuple[str, ...]:
        """Read a list of strings (column or metric names); a single string is a one-item list."""
        value = mapping.get(key)
        where = _join(path, key)
        if value is None or value == []:
            if required:
                kind = "metric names" if key == "metrics" else "column names"
                self.error(where, f"required; give a list of {kind}")
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(where, f"must be a list of strings; got {value!r}")
            return ()
        duplicates = sorted({v for v in value if value.count(v) > 1})
        if duplicates:
            self.error(where, f"lists {duplicates} more than once")
        return tuple(dict.fromkeys(value))


def fail(what: str, errors: list[str]) -> NoReturn:
    """Raise a :class:`ConfigError` with a header line and one indented line per error.

    >>> try:
    ...     fail("evaluator_config", ["threshold: must be a number in [0, 1]; got 2"])
    ... except ConfigError as exc:
    ...     print(exc)
    evaluator_config has 1 error:
      threshold: must be a number in [0, 1]; got 2
    """
    n = len(errors)
    err = ConfigError(f"{what} has {n} error{'s' if n > 1 else ''}:\n"
                      + "\n".join(f"  {e}" for e in errors))
    err.errors = tuple(errors)  # type: ignore[attr-defined]
    raise err


def read_group_minimums(r: Reader, raw: Mapping[str, Any], at: str = "") -> tuple[int, int]:
    """``min_group_size`` and ``min_condition_size``: positive integers, shared defaults."""
    return (r.positive_int(raw, "min_group_size", MIN_GROUP_SIZE, path=at),
            r.positive_int(raw, "min_condition_size", MIN_CONDITION_SIZE, path=at))


def read_task(r: Reader, raw: Mapping[str, Any], at: str = "",
              metrics: Sequence[str] = ()) -> str:
    """``task``: the kind of model (:data:`MODEL_TASKS`, ``binary`` by default).

    ``metrics``: the model's metric names, each checked to apply to the task (a metric of
    another task would be NaN in every window); a multiclass model takes the binary metrics,
    one class at a time.
    """
    task = str(r.choice(raw, "task", MODEL_TASKS, "binary", path=at))
    check_task_metrics(r, task, metrics, _join(at, "metrics"))
    return task


def check_task_metrics(r: Reader, task: str, metrics: Sequence[str], at: str) -> None:
    """Record an error for each metric of ``metrics`` (at ``at[i]``) that ``task`` cannot use.

    Unknown names are left to the caller's own check (it lists the allowed ones).
    """
    kind = metric_task(task)
    fitting = [m for m, s in METRICS.items() if s.task == kind]
    for i, metric in enumerate(metrics):
        spec = METRICS.get(metric)
        if spec is not None and spec.task != kind:
            r.error(f"{at}[{i}]", f"{metric!r} applies to {spec.task} models and this model's "
                                  f"task is {task}; allowed: {fmt_allowed(fitting)}")


def read_confidence_level(r: Reader, raw: Mapping[str, Any], at: str = "") -> float | None:
    """``confidence_level``: a level in (0, 1) for every value's interval, or null for none."""
    value = raw.get("confidence_level", 0.95)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        r.error(_join(at, "confidence_level"), f"must be a number in (0, 1), e.g. 0.95, or "
                f"null (no intervals); got {value!r}")
        return 0.95
    return float(value)


def read_missing(r: Reader, raw: Any, at: str, sensitive: Sequence[str]) -> Any:
    """``missing``: one policy for every attribute, or ``{attribute: policy}`` (others: group)."""
    if raw is None:
        return "group"
    if isinstance(raw, str) and raw in MISSING_POLICIES:
        return raw
    if not isinstance(raw, Mapping):
        r.error(at, f"must be one of {list(MISSING_POLICIES)} or a mapping "
                    f"{{attribute: policy}}; got {raw!r}")
        return "group"
    out = dict.fromkeys(sensitive, "group")
    for attr, how in raw.items():
        if attr not in sensitive:
            r.error(f"{at}.{attr}", f"not a sensitive feature; allowed: {fmt_allowed(sensitive)}")
        elif how not in MISSING_POLICIES:
            r.error(f"{at}.{attr}", f"must be one of {list(MISSING_POLICIES)}; got {how!r}")
        else:
            out[attr] = how
    return MappingProxyType(out)


def read_thresholds(r: Reader, at: str, raw: Any, metrics: Iterable[str] | None,
                    attributes: Sequence[str]) -> tuple[Threshold, ...]:
    """Read ``thresholds: {metric: entry or [entries]}``.

    An entry naming ``attribute`` overrides the general one for that attribute (the
    intersection included).

    ``metrics``: the evaluated ones (a threshold on another is an error); None: any.
    """
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        r.error(at, f"must map metric names to {{warning, critical, bound}}; got {raw!r}")
        return ()
    monitored = None if metrics is None else set(metrics)
    out = []
    for metric, entries in raw.items():
        where = f"{at}.{metric}"
        if metric not in METRICS:
            r.error(where, f"unknown metric {metric!r}; allowed: {fmt_allowed(METRICS)}")
            continue
        if monitored is not None and metric not in monitored:
            r.error(where, f"metric {metric!r} is not monitored; add it to 'metrics' "
                           "(or 'reference.metrics') or remove this threshold")
        items = entries if isinstance(entries, list) else [entries]
        for i, entry in enumerate(items):
            path = f"{where}[{i}]" if isinstance(entries, list) else where
            t = _threshold(r, path, metric, entry, attributes)
            if t is not None:
                out.append(t)
    return tuple(out)


def _threshold(r: Reader, at: str, metric: str, raw: Any,
               attributes: Sequence[str]) -> Threshold | None:
    if not isinstance(raw, Mapping):
        r.error(at, f"must be a mapping with keys {fmt_allowed(THRESHOLD_KEYS)}; got {raw!r}")
        return None
    r.keys(at, raw, THRESHOLD_KEYS)
    bound = r.choice(raw, "bound", ("upper", "lower"), METRICS[metric].default_bound, path=at)
    attribute = r.choice(raw, "attribute", tuple(attributes), None, path=at)
    levels = {}
    for key in ("warning", "critical"):
        v = raw.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)
                              or not math.isfinite(v)):
            r.error(f"{at}.{key}", f"must be a finite number; got {v!r}")
            v = None
        levels[key] = None if v is None else float(v)
    if "warning" not in raw and "critical" not in raw:
        r.error(at, "give at least one of 'warning' or 'critical'")
        return None
    if None in levels.values() and all(k in raw for k in ("warning", "critical")):
        return None  # a bad number, already reported
    try:
        against = r.get(raw, "against_direction", bool, False, path=at)
        compare = r.choice(raw, "compare", COMPARES, "value", path=at)
        return Threshold(metric, levels["warning"], levels["critical"], bound, attribute,
                         against_direction=against, compare=compare)
    except ConfigError as exc:
        # the ordering and direction rules live in Threshold; re-anchor at this key path
        head, _, text = str(exc).partition(": ")
        r.error(at + head.removeprefix(f"thresholds.{metric}"), text.rstrip("."))
        return None


def _keywords(func: Any) -> list[str]:
    """Return the keyword-only parameters of a metric function: what an option may set."""
    params = inspect.signature(func).parameters
    return sorted(p for p, v in params.items() if v.kind == v.KEYWORD_ONLY and p not in _RESERVED)


def read_options(r: Reader, at: str, raw: Any) -> Mapping[str, Mapping[str, Any]]:
    """``options: {metric: {keyword: value}}``, each keyword one the metric function takes."""
    if not raw:
        return MappingProxyType({})
    if not isinstance(raw, Mapping) or any(not isinstance(v, Mapping) for v in raw.values()):
        r.error(at, f"must map metric names to keyword mappings; got {raw!r}")
        return MappingProxyType({})
    out = {}
    for metric, kwargs in raw.items():
        if metric not in METRICS:
            r.error(f"{at}.{metric}", f"unknown metric {metric!r}; allowed: "
                                      f"{fmt_allowed(METRICS)}")
            continue
        r.keys(f"{at}.{metric}", kwargs, _keywords(METRICS[metric].func))
        out[metric] = MappingProxyType(dict(kwargs))
    return MappingProxyType(out)


def read_robustness(r: Reader, at: str, raw: Any) -> tuple[dict[str, Any], bool | None]:
    """Read ``robustness``: None (on when a model is given), true/false, or settings.

    Settings: a mapping of ``levels``, ``n_repeats``, ``max_rows`` or a keyword of the
    robustness function.

    Returns the settings and whether it is on (None: if a model is given).
    """
    if raw is None:
        return {}, None
    if isinstance(raw, bool):
        return {}, raw
    if not isinstance(raw, Mapping):
        r.error(at, f"must be a mapping ({fmt_allowed(ROBUSTNESS_KEYS)}), true or false; "
                    f"got {raw!r}")
        return {}, None
    accepted = set(ROBUSTNESS_KEYS)
    for spec in METRICS.values():
        if spec.needs_model:
            accepted |= set(_keywords(spec.func)) - {"min_group_size", "min_condition_size",
                                                    "rng", "random_state"}
    r.keys(at, raw, sorted(accepted))
    out = dict(raw)
    if "levels" in out:
        levels = out["levels"]
        if (isinstance(levels, str | bytes) or not isinstance(levels, Sequence) or not levels
                or any(isinstance(v, bool) or not isinstance(v, int | float) or not v > 0
                       for v in levels)):
            r.error(f"{at}.levels", f"must be a non-empty list of positive noise levels; got "
                                    f"{levels!r}")
        else:
            out["levels"] = tuple(float(v) for v in levels)
    for key in ("n_repeats", "max_rows"):
        if key in out:
            out[key] = r.positive_int(out, key, 1, path=at)
    return out, True


#: What a model predicts (the ``task:`` key of the monitor's model config): one positive class
#: against the rest (``binary``, the default), or one of several classes, each evaluated
#: one-vs-rest (``multiclass``; :mod:`fairmonitor.report.multiclass`).
def read_classes(r: Reader, raw: Mapping[str, Any], at: str, task: str
                 ) -> tuple[tuple[Any, ...] | None, Mapping[Any, str]]:
    """``classes`` and ``scores`` of a multiclass model: its class labels, each one's column.

    ``scores`` maps each class to the column of its probability (optional: without it only
    the metrics of hard predictions run); ``classes`` lists the labels (default: the keys of
    ``scores``). The number of classes is the model's: it bounds the per-class series.
    Both keys are errors on a binary model.

    >>> r = Reader()
    >>> read_classes(r, {"scores": {"low": "p_low", "high": "p_high"}}, "m", "multiclass")
    (('low', 'high'), mappingproxy({'low': 'p_low', 'high': 'p_high'}))
    """
    if task != "multiclass":
        for key in ("classes", "scores"):
            if raw.get(key) is not None:
                r.error(_join(at, key), "is for task: multiclass (a binary model has one "
                                        "'score' column)")
        return None, MappingProxyType({})
    scores = _class_scores(r, raw.get("scores"), _join(at, "scores"))
    classes = raw.get("classes", list(scores))
    if not _valid_classes(classes):
        r.error(_join(at, "classes"), "give the class labels, at least two, unique (or "
                                      f"'scores' mapping each class to a column); got {classes!r}")
        return None, MappingProxyType({})
    by_text = {str(c): column for c, column in scores.items()}
    unknown = sorted(set(by_text) - {str(c) for c in classes})
    absent = [c for c in classes if scores and str(c) not in by_text]
    if unknown or absent:
        r.error(_join(at, "scores"), f"must name one column per class of {classes}; unknown "
                                     f"{unknown}, missing {absent}")
    return tuple(classes), MappingProxyType(
        {c: by_text[str(c)] for c in classes if str(c) in by_text})


def _class_scores(r: Reader, raw: Any, at: str) -> dict[Any, str]:
    """``scores``: ``{class: column}`` (empty when not given or invalid, with the error)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(isinstance(v, str) and v for v in raw.values()):
        r.error(at, f"must map each class to its probability column; got {raw!r}")
        return {}
    return dict(raw)


def _valid_classes(classes: Any) -> bool:
    """At least two unique labels (as text), each a string or an integer."""
    return (isinstance(classes, list) and len(classes) >= 2
            and all(isinstance(c, str | int) and not isinstance(c, bool) for c in classes)
            and len({str(c) for c in classes}) == len(classes))
