"""The monitor's work as plain functions: no scheduler, no sleeping, no sinks.

:func:`evaluate_model_window` turns one (model, window) into an immutable :class:`WindowResult`;
:func:`run_once` evaluates every due window of every model, oldest first, keeps the checkpoint
up to date and hands each result to the caller's hooks (the Prometheus exporter, the MLflow
sink). The scheduler (``service.py``) only calls :func:`run_once` on a timer, so everything the
monitor decides is tested here with in-memory sources and an explicit ``now``.

Label delay: with ``labels_after == 0`` a window is evaluated once, when it closes, on every
configured metric (phase ``full``). Otherwise it is evaluated twice: at close on the label-free
metrics (phase ``predictions``), and ``labels_after`` later on the label-needing metrics using
the rows whose label has arrived (phase ``labels``). Each metric of each window is computed once.

Faults never propagate: a source that is down leaves the window (and those after it) for the
next tick, and so does unreadable data (a configured column missing, a column that cannot be
converted: stage ``data``, logged once per cause with the fix), so a typo in the config holds
the watermark instead of losing windows; once fixed, the held windows are evaluated (at most
``catch_up`` of them). A failing metric completes the window with the error recorded in
``WindowResult.errors`` under the stage ``metric``; a hook that raises is logged and recorded
under its stage (``export``, ``mlflow``). An empty window is not a fault: it completes with
``n_rows == 0``, no report and no error ("no traffic", exported as its own signal). Nor is a
window whose labels are overdue (``labels_overdue``: fewer than ``min_label_coverage`` of its
rows labelled when its labels are due): its label metrics are computed on the labelled rows,
undefined without any, and the overdue state is exported on its own.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..exceptions import InvalidInputError, MissingColumnError
from ..report.evaluate import Window, WindowReport, evaluate_window
from ..report.thresholds import Severity
from ..summaries import summarize, summarize_regression, to_bytes
from . import clock as _clock
from . import multiclass as _multiclass
from . import rollups as _rollups
from . import streaks as _streaks
from . import summarized as _summarized
from .checkpoint import Checkpoint, ModelState
from .columns import feature_columns, frame_problem
from .config import ModelConfig, MonitorConfig
from .incidents import INCIDENTS
from .merge import merge_reports
from .rows import prepare as prepare_rows
from .snapshot import fold
from .sources import WindowSource
from .sources.base import NO_TIMESTAMP
from .summary_store import MemorySummaryStore, SummaryStore
from .versions import (
    NewVersion,
    VersionResult,
    detect_new_versions,
    evaluate_new_versions,
    evaluate_version,
)
from .windows import due_windows, initial_watermark, labels_pending, next_due, window_index
from .windows import span as window_span

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DURABLE_STAGES", "STAGES", "NewVersion", "VersionResult", "WindowResult", "describe",
    "detect_new_versions",
    "evaluate_model_window", "evaluate_new_versions", "evaluate_version", "labels_pending_count",
    "next_run", "run_once",
]

log = logging.getLogger(__name__)

Phase = Literal["full", "predictions", "labels"]
#: Where a window's evaluation can fail; the exporter pre-initialises one error series per stage.
STAGES = ("source", "data", "metric", "checkpoint", "rollup", "summary_store", "export",
          "mlflow")
#: Hook stages whose values must be durable before the checkpoint moves (see :func:`run_once`).
DURABLE_STAGES = ("mlflow",)
Hook = Callable[["WindowResult"], object]


@dataclass(frozen=True)
class WindowResult:
    """The outcome of evaluating one window of one model. Immutable.

    ``report`` is None when the source failed, the data could not be read or the window had no
    rows (then ``n_rows == 0`` and ``errors`` is empty: no traffic); ``errors`` maps a stage
    (:data:`STAGES`) to the reason.
    """

    model: str
    version: str
    index: int
    start: datetime
    end: datetime
    phase: Phase
    labels_included: bool
    n_rows: int
    report: WindowReport | None
    errors: Mapping[str, str] = field(default_factory=dict)
    evaluated_at: datetime | None = None
    duration_seconds: float = 0.0
    versions: Mapping[str, int] = field(default_factory=dict)
    metrics: tuple[str, ...] = ()
    #: rows dropped before any metric, per reason (:mod:`.rows`: invalid_score, ...)
    rejected: Mapping[str, int] = field(default_factory=dict)
    #: rows that exactly duplicate another row of the window (counted, kept)
    duplicates: int = 0
    #: rows with a label / rows in the window, when labels were read (None otherwise)
    labelled_rows: int = 0
    label_coverage: float | None = None
    #: older due windows skipped by the catch-up cap just before this one (their rows are
    #: never evaluated; exported as fairmonitor_windows_skipped_total)
    skipped_before: int = 0
    #: wall-clock time (Unix seconds) the evaluation finished: liveness gauges and the restored
    #: ``last_success`` read it, never ``evaluated_at``, which a replay or a test may simulate
    finished_at: float = field(default_factory=time.time)
    #: the rollup's name (``1d``) for a longer window merged from stored summaries
    #: (:mod:`.rollups`; ``index`` is then on the rollup's grid); "" for the model's windows
    rollup: str = ""
    #: rollups: how many of the model's windows had a stored summary to merge
    merged_windows: int = 0
    #: its labels are due (phase labels or full) but fewer than min_label_coverage of its rows
    #: have one: exported as fairmonitor_labels_overdue_windows, never as "no traffic"
    labels_overdue: bool = False
    #: the window's serialized summary per part (``predictions``, ``labels``), stored by
    #: :func:`run_once` before the checkpoint moves (models with rollups only)
    summaries: Mapping[str, bytes] = field(default_factory=dict, repr=False, compare=False)
    #: the model's alert streaks after this window (:mod:`.streaks`), set by :func:`run_once`
    #: for the exporter once the window is complete; None when they did not move
    streaks: _streaks.Streaks | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True when no stage failed."""
        return not self.errors

    @property
    def status(self) -> Severity:
        """The worst threshold verdict, or ``undefined`` without a report."""
        return "undefined" if self.report is None else self.report.status


def _phases(cfg: ModelConfig) -> list[tuple[Phase, str]]:
    """(phase, watermark attribute) pairs evaluated for a model, in order."""
    if not cfg.labels_after or not cfg.label_metrics:
        return [("full", "predictions_end")]
    phases: list[tuple[Phase, str]] = [("labels", "labels_end")]
    if cfg.label_free_metrics:
        phases.insert(0, ("predictions", "predictions_end"))
    return phases


def _phase_metrics(cfg: ModelConfig, phase: Phase) -> tuple[str, ...]:
    return {"full": cfg.metrics, "predictions": cfg.label_free_metrics,
            "labels": cfg.label_metrics}[phase]


def _feature_columns(cfg: ModelConfig, frame: pd.DataFrame) -> list[str]:
    return feature_columns(cfg, frame.columns)


def _report(cfg: ModelConfig, frame: pd.DataFrame, metrics: Sequence[str], *, labels: bool,
            version: str, start: datetime, end: datetime, rng: Any,
            parts: dict[str, Any] | None = None,
            faults: dict[str, str] | None = None) -> WindowReport:
    """Return the window's report; with rollups, its summary (bytes) into ``parts[phase]``.

    A summary that cannot be made is said in ``faults["rollup"]``: it costs the rollups this
    window, never the window's own values.
    """
    # the group columns are encoded once (Window.groups), for the report and the summary
    features = _feature_columns(cfg, frame)
    identity = dict(model=cfg.name, version=version, start=start, end=end)
    if cfg.task == "multiclass":  # class labels and per-class scores: one-vs-rest per class
        window = _multiclass.window(cfg, frame, labels=labels, features=features, **identity)
    else:
        window = Window.from_frame(
            frame, sensitive_features=list(cfg.sensitive_features),
            label=cfg.label if labels else None, score=cfg.score, prediction=cfg.prediction,
            features=features, threshold=cfg.decision_threshold, missing=cfg.missing,
            **identity)
    if parts is not None and cfg.rollups:
        # the rows' summary for the rollups, made from the same checked columns; a failure
        # costs the rollups this window (stage "rollup"), never the window's own values
        try:
            parts["labels" if labels else "predictions"] = to_bytes(_summary_of(
                cfg, window, identity))
        except Exception as exc:
            if faults is not None:
                faults["rollup"] = f"cannot summarize the window: {type(exc).__name__}: {exc}"
    return evaluate_window(window, metrics=metrics, evaluation=cfg.evaluation.replace(rng=rng))


def _summary_of(cfg: ModelConfig, window: Window, identity: dict[str, Any]) -> Any:
    """Return the summary a window of ``cfg``'s model stores for the rollups.

    A regression model's (:func:`~fairmonitor.summaries.summarize_regression`: error sums,
    predictions, and the predictions mapped by ``prediction_madd``'s ``value_range`` when
    one is configured), a multiclass model's (one binary summary per class), else the
    classification summary, from the window's checked columns. ``identity``: model, version,
    start, end.
    """
    spec = _rollups.store_spec(cfg)
    if cfg.task == "multiclass":
        return _multiclass.summarize_window(window, intersection=cfg.intersection, spec=spec,
                                            **identity)
    common = dict(intersection=cfg.intersection, groups=window.groups(cfg.intersection),
                  spec=spec, **identity)
    if cfg.task == "regression":
        value_range = cfg.options.get("prediction_madd", {}).get("value_range")
        return summarize_regression(window.sensitive_features, y_pred=window.y_pred,
                                    y_true=window.y_true, value_range=value_range, **common)
    return summarize(window.sensitive_features, y_pred=window.y_pred, y_score=window.y_score,
                     y_true=window.y_true, X=window.X, threshold=window.threshold, **common)


def _evaluate_frame(cfg: ModelConfig, frame: pd.DataFrame, phase: Phase, metrics: Sequence[str],
                    **kw: Any) -> tuple[WindowReport, bool]:
    """Return the report of one phase, and whether labels went into it."""
    if phase == "predictions" or cfg.label is None:
        return _report(cfg, frame, metrics, labels=False, **kw), False
    labelled = frame[cfg.label].notna().to_numpy()
    if phase == "labels" or labelled.all():
        # every row labelled (phase full): the labelled summary serves the rollups' label-free
        # metrics too
        return _report(cfg, frame[labelled], metrics, labels=True, **kw), True
    # phase full with labels still missing on some rows: label-free metrics see every row,
    # label metrics only the labelled ones (none labelled: NaN, "labels not available")
    free = [m for m in metrics if m in cfg.label_free_metrics]
    needing = [m for m in metrics if m in cfg.label_metrics]
    report = _report(cfg, frame, free, labels=False, **kw)
    if not labelled.any() and kw.get("parts") is not None:
        kw["parts"] = None  # no labelled rows: nothing for the rollups' label metrics
    if needing:
        other = _report(cfg, frame[labelled] if labelled.any() else frame, needing,
                        labels=bool(labelled.any()), **kw)
        report = merge_reports(report, other)
    return report, bool(labelled.any())


def evaluate_model_window(
    model_cfg: ModelConfig,
    source: WindowSource,
    start: datetime,
    end: datetime,
    *,
    now: datetime,
    phase: Phase = "full",
    index: int | None = None,
    rng: Any = None,
    batch: _summarized.Batch | None = None,
) -> WindowResult:
    """Fetch one window and evaluate the phase's metrics on it. Never raises for faults.

    A source that summarizes where the rows are (``window_summaries``: Spark) gives the
    window's summaries instead of its rows (:mod:`.summarized`); ``batch`` holds them when
    they were summarized with other due windows in one call.

    Parameters
    ----------
    model_cfg : ModelConfig
    source : WindowSource
    start, end : datetime
        The window ``[start, end)``, timezone-aware.
    now : datetime
        The evaluation time, recorded in the result.
    phase : {'full', 'predictions', 'labels'}
        Which metrics to compute (module docstring).
    index : int, optional
        The window index; default: derived from ``end`` and ``model_cfg.every``.
    rng : numpy Generator or seed, optional
        Default: ``numpy.random.default_rng([model_cfg.seed, index])``, so a re-evaluated
        window gives the same numbers.

    Returns
    -------
    WindowResult
    """
    started = time.perf_counter()
    index = window_index(model_cfg.every, end) if index is None else index
    metrics = _phase_metrics(model_cfg, phase)
    base = dict(model=model_cfg.name, index=index, start=start, end=end, phase=phase,
                evaluated_at=now, metrics=metrics)

    def done(**kw: Any) -> WindowResult:
        kw.setdefault("version", model_cfg.model_version or model_cfg.model_alias or "")
        kw["errors"] = MappingProxyType(kw.get("errors", {}))
        kw["versions"] = MappingProxyType(kw.get("versions", {}))
        return WindowResult(**base, **kw, duration_seconds=time.perf_counter() - started)

    if rng is None:
        rng = np.random.default_rng([model_cfg.seed, max(index, 0)])
    if _summarized.summarizes(source):
        return done(**_summarized_window(model_cfg, source, (start, end), phase, metrics,
                                         base, rng, batch))
    try:
        frame, seen = _rows(model_cfg, source, start, end, phase, base)
    except _Held as held:
        return done(**held.result)
    if len(frame) == 0:  # no traffic (or no label yet: labels_overdue), not a fault
        return done(**seen, labels_included=phase == "labels", n_rows=0, report=None)
    parts: dict[str, Any] = {}  # the window's summaries for the rollups, by phase
    faults: dict[str, str] = {}  # stage -> what went wrong making them
    try:
        report, with_labels = _evaluate_frame(model_cfg, frame, phase, metrics,
                                              version=seen["version"], start=start, end=end,
                                              rng=rng, parts=parts, faults=faults)
    except Exception as exc:  # missing columns, unparseable values: the data is at fault
        return done(**seen, labels_included=False, n_rows=len(frame), report=None,
                    errors={"data": f"{type(exc).__name__}: {exc}"})
    failed = [f"{m}/{a}: {r}" for (m, a), r in report.reasons.items() if r.startswith("error:")]
    errors = {"metric": "; ".join(failed)} if failed else {}
    errors.update(faults)
    _warn_many_groups(model_cfg.name, report)
    return done(**seen, labels_included=with_labels, n_rows=len(frame), report=report,
                errors=errors, summaries=MappingProxyType(parts))


def _summarized_window(cfg: ModelConfig, source: Any, span: tuple[datetime, datetime],
                       phase: Phase, metrics: Sequence[str], base: dict[str, Any], rng: Any,
                       batch: _summarized.Batch | None) -> dict[str, Any]:
    """Return the fields of a window's result from its summaries (:mod:`.summarized`).

    The row path's rules: versions, rejected rows and label coverage recorded, an empty window
    (or, phase ``labels``, one without a labelled row) no traffic, a data or source fault
    held. Duplicate rows are not counted (that would need the rows).
    """
    if batch is None or span not in batch.spans:
        batch = _summarized.fetch_batch(cfg, source, [span], phase)
    default = cfg.model_version or cfg.model_alias or ""
    if batch.error is not None:
        return dict(version=default, labels_included=False, n_rows=0, report=None,
                    errors={batch.stage: batch.error})
    parts = batch.windows.get(span)
    if parts is None:  # no row at all: no traffic
        return dict(version=default, labels_included=phase == "labels", n_rows=0, report=None)
    versions = dict(parts.versions)
    version = max(versions, key=versions.__getitem__) if versions else default
    base.update(rejected=MappingProxyType(dict(parts.rejected)), duplicates=0)
    seen = dict(version=version, versions=versions)
    labels = phase != "predictions" and cfg.label is not None
    if labels and parts.n_rows:
        base.update(labelled_rows=parts.labelled_rows,
                    label_coverage=parts.labelled_rows / parts.n_rows,
                    labels_overdue=bool(cfg.label_metrics)
                    and parts.labelled_rows < cfg.min_label_coverage * parts.n_rows)
    n_rows = parts.labelled_rows if phase == "labels" else parts.n_rows
    if n_rows == 0:
        return dict(**seen, labels_included=phase == "labels", n_rows=0, report=None)
    stored: dict[str, bytes] = {}
    try:
        report, with_labels = _summarized.report_of_parts(cfg, parts, phase, metrics,
                                                          version=version, rng=rng,
                                                          stored=stored)
    except Exception as exc:  # as a window whose rows cannot be evaluated
        return dict(**seen, labels_included=False, n_rows=n_rows, report=None,
                    errors={"data": f"{type(exc).__name__}: {exc}"})
    failed = [f"{m}/{a}: {r}" for (m, a), r in report.reasons.items() if r.startswith("error:")]
    _warn_many_groups(cfg.name, report)
    return dict(**seen, labels_included=with_labels, n_rows=n_rows, report=report,
                errors={"metric": "; ".join(failed)} if failed else {},
                summaries=MappingProxyType(stored))


class _Held(Exception):
    """A window that cannot be evaluated: ``result`` holds the fields of its WindowResult."""

    def __init__(self, **result: Any) -> None:
        super().__init__(result.get("errors"))
        self.result = result


def _fetched(cfg: ModelConfig, source: WindowSource, start: datetime,
             end: datetime) -> pd.DataFrame:
    """Return the window's rows from the source; a failure raises :class:`_Held` with its stage."""
    try:
        return source.fetch(cfg.name, start, end)
    except MissingColumnError as exc:  # the config names a column the source lacks
        raise _Held(labels_included=False, n_rows=0, report=None,
                    errors={"data": f"models.{cfg.name}.{exc.key}: {exc}. Fix it in the "
                                    "config (or add the column to the source); the windows "
                                    "wait for the fix"}) from None
    except Exception as exc:  # WindowUnavailableError, or any bug in a third-party source
        raise _Held(labels_included=False, n_rows=0, report=None,
                    errors={"source": f"{type(exc).__name__}: {exc}"}) from None


def _versions(cfg: ModelConfig, frame: pd.DataFrame) -> dict[str, Any]:
    """Return the versions serving in the window (rows each) and the one serving most rows."""
    versions: dict[str, int] = {}
    vcol = cfg.source.version_column
    if vcol and vcol in frame.columns:
        counts = frame[vcol].dropna().astype(str).value_counts()
        versions = {str(k): int(v) for k, v in counts.items()}
    version = (max(versions, key=versions.__getitem__) if versions
               else cfg.model_version or cfg.model_alias or "")
    return {"version": version, "versions": versions}


def _rows(cfg: ModelConfig, source: WindowSource, start: datetime, end: datetime,
          phase: Phase, base: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Return the window's rows, checked and prepared, and its versions.

    Records the rejected and duplicate rows and the label coverage in ``base``; a window
    that cannot be read raises :class:`_Held` (stage ``source`` or ``data``).
    """
    frame = _fetched(cfg, source, start, end)
    seen = _versions(cfg, frame)
    undated = int(frame.attrs.get(NO_TIMESTAMP, 0))
    problem = frame_problem(cfg, frame, labels=phase != "predictions")
    if problem is not None:  # a configured column is missing: the window waits for the fix
        raise _Held(**seen, labels_included=False, n_rows=len(frame), report=None,
                    errors={"data": problem})
    try:  # real column types in, invalid model outputs out: one rule for every metric
        frame, rejected, duplicates = (
            _multiclass.prepare(frame, cfg) if cfg.task == "multiclass" else prepare_rows(
                frame, score=cfg.score, prediction=cfg.prediction, label=cfg.label,
                task=cfg.task))
        if undated:
            rejected["no_timestamp"] = undated
    except InvalidInputError as exc:
        raise _Held(**seen, labels_included=False, n_rows=len(frame), report=None,
                    errors={"data": str(exc)}) from None
    base.update(rejected=MappingProxyType(rejected), duplicates=duplicates)
    if phase != "predictions" and cfg.label in frame.columns and len(frame):
        labelled = int(frame[cfg.label].notna().sum())
        base.update(labelled_rows=labelled, label_coverage=labelled / len(frame),
                    labels_overdue=bool(cfg.label_metrics)
                    and labelled < cfg.min_label_coverage * len(frame))
    if phase == "labels" and cfg.label in frame.columns:
        frame = frame[frame[cfg.label].notna()]
    return frame, seen


#: An attribute with more distinct values than this in one window is identifier-like: every
#: group's metric is noise, and only the largest groups are exported (fairmonitor_groups says
#: how many there are).
MANY_GROUPS = 1000
_warned_many_groups: set[tuple[str, str]] = set()  # (model, attribute): said once a process


def _warn_many_groups(model: str, report: WindowReport) -> None:
    for attr, counts in report.group_counts.items():
        if len(counts) > MANY_GROUPS and (model, attr) not in _warned_many_groups:
            _warned_many_groups.add((model, attr))
            log.warning(
                "%s: sensitive attribute %r has %d distinct values in one window (more than "
                "%d): an identifier-like column? Each group's metric is noise at that size and "
                "only the largest groups are exported; bucket it, or remove it from "
                "sensitive_features.", model, attr, len(counts), MANY_GROUPS)


def describe(result: WindowResult) -> str:
    """One log line: model, window, phase, rows, verdict and the breaching values."""
    kind = f"{result.rollup} rollup" if result.rollup else "window"
    head = (f"{result.model} v{result.version or '?'} {kind} #{result.index} "
            f"[{result.start:%Y-%m-%d %H:%M}, {result.end:%Y-%m-%d %H:%M}) {result.phase}: "
            f"{result.n_rows} rows")
    if result.report is None:
        why = "; ".join(f"{k}: {v}" for k, v in result.errors.items()) or (
            "labels overdue: no row labelled" if result.labels_overdue else "no traffic")
        return f"{head}, not evaluated ({why})"
    breaches = [f"{m}/{a}={result.report.values[(m, a)]:.4g} {s}"
                for (m, a), s in result.report.statuses.items() if s in ("warning", "critical")]
    tail = f" ({', '.join(breaches)})" if breaches else ""
    errors = f"; errors: {dict(result.errors)}" if result.errors else ""
    return f"{head}, status {result.status}{tail}{errors}"


def _hooks(on_result: Sequence[Hook] | Mapping[str, Hook] | Hook) -> list[tuple[str, Hook]]:
    if isinstance(on_result, Mapping):
        return list(on_result.items())
    if callable(on_result):
        on_result = [on_result]
    return [(str(getattr(h, "stage", "export")), h) for h in on_result]


def _deliver(result: WindowResult, hooks: list[tuple[str, Hook]]) -> WindowResult:
    errors = {}
    for stage, hook in hooks:
        try:
            hook(result)
        except Exception as exc:  # a sink must not stop the monitor
            log.warning("%s hook %r failed on %s window #%d: %s", stage, hook, result.model,
                        result.index, exc)
            errors[stage] = f"{type(exc).__name__}: {exc}"
    if not errors:
        return result
    return dataclasses.replace(result, errors=MappingProxyType({**result.errors, **errors}))


#: (model, phase) -> the data errors already logged (logged once per cause, not per window)
_data_causes: dict[tuple[str, str], set[str]] = {}


def _log(result: WindowResult) -> None:
    # faults only: the service logs the one verdict line per window (and threshold crossings)
    key = (result.model, result.phase)
    data = result.errors.get("data")
    if data is None:
        if result.report is not None:
            _data_causes.pop(key, None)  # fixed: a recurrence is logged again
    else:
        # once per cause: the column named before "; available columns" or the first clause
        cause = data.split("; available columns")[0].split(". ")[0]
        seen = _data_causes.setdefault(key, set())
        if cause not in seen:
            seen.add(cause)
            log.error("%s: data error, window(s) held from #%d until fixed: %s", result.model,
                      result.index, data)
        else:
            log.debug(describe(result))
        return
    if result.errors:
        log.warning(describe(result))
    else:
        log.debug(describe(result))


def run_once(
    config: MonitorConfig,
    sources: Mapping[str, WindowSource],
    checkpoint: Checkpoint,
    *,
    now: datetime,
    on_result: Sequence[Hook] | Mapping[str, Hook] | Hook = (),
    summaries: SummaryStore | None = None,
    keep_going: Callable[[], bool] | None = None,
) -> list[WindowResult]:
    """Evaluate every due window of every model, oldest first; return the results.

    A model without a checkpoint starts at its ``start`` (or with its latest closed window).
    Missed windows are caught up oldest first, at most ``config.catch_up`` per model and phase;
    older ones are skipped with a warning. The checkpoint is saved after every window, once the
    ``mlflow`` hooks (:data:`DURABLE_STAGES`) have made its values durable, so a restart or a
    crash at any point neither skips nor doubles a window; a checkpoint that cannot be saved
    is recorded under the stage ``checkpoint`` and stops the model for this tick. Hooks
    (``on_result``: callables, or a mapping of stage name to callable) receive every result,
    including failed ones (``report`` None); the returned results carry the hooks' errors too.

    Models with ``rollups`` store each window's summary in ``summaries`` (a
    :class:`~.summary_store.SummaryStore`; default: one in memory, lost at exit) before the
    checkpoint moves, then evaluate every due rollup window from the stored summaries
    (:mod:`.rollups`), after the model's own windows.

    ``keep_going()`` is asked before each window and each rollup window: False (SIGTERM, the
    lease lost) ends the tick there, after the window in flight, with the checkpoint at the
    last completed window.
    """
    go = keep_going or (lambda: True)
    if now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware (UTC); got naive {now.isoformat()}")
    missing = [name for name in config.models if name not in sources]
    if missing:
        raise ValueError(f"no source given for model(s) {missing}; sources has {list(sources)}")
    hooks = _hooks(on_result)
    if summaries is None and any(cfg.rollups for cfg in config.models.values()):
        summaries = MemorySummaryStore()
    # values must be durable (spooled or written) before the checkpoint moves past their window
    tick = _Tick(checkpoint, now, [(s, h) for s, h in hooks if s in DURABLE_STAGES],
                 [(s, h) for s, h in hooks if s not in DURABLE_STAGES], summaries,
                 config.catch_up, go)
    results: list[WindowResult] = []
    for name, cfg in config.models.items():
        if not go():
            break
        try:
            state, may_skip = _started(name, cfg, tick)
        except Exception as exc:  # without progress records, evaluating would repeat windows
            log.error("%s: checkpoint unavailable, model skipped this tick: %s", name, exc)
            results.append(_deliver(_checkpoint_fault(name, cfg, now, exc), tick.others))
            continue
        done, state, stopped = _model_windows(name, cfg, sources[name], state, may_skip, tick)
        results += done
        if not stopped and go():  # source and checkpoint work: look for late labels
            late, state = _late_labels(name, cfg, sources[name], state, checkpoint, now,
                                       tick.durable, tick.others, summaries)
            results += late
            if cfg.rollups and summaries is not None:
                relabelled = [r.index for r in late if r.ok]
                results += _rollup_windows(name, cfg, state, summaries, checkpoint, now,
                                           tick.durable, tick.others, relabelled,
                                           cap=config.catch_up, source=sources[name],
                                           keep_going=go)
    return results


@dataclass(frozen=True)
class _Tick:
    """What every model's windows of one :func:`run_once` call share."""

    checkpoint: Checkpoint
    now: datetime
    durable: list[tuple[str, Hook]]
    others: list[tuple[str, Hook]]
    summaries: SummaryStore | None
    catch_up: int
    keep_going: Callable[[], bool]


def _started(name: str, cfg: ModelConfig, tick: _Tick) -> tuple[ModelState, bool]:
    """Return the model's checkpoint state, started where needed and clock-checked.

    A model without a checkpoint starts at its ``start`` (or with its latest closed window);
    a new rollup starts on its grid at the model's progress. Returns the state and whether
    the catch-up cap may skip windows (:func:`_clock_checked`).
    """
    checkpoint, now = tick.checkpoint, tick.now
    state = checkpoint.load(name)
    if state.predictions_end is None and state.labels_end is None:
        first = initial_watermark(cfg.window, cfg.every, now=now, start=cfg.start)
        state = ModelState(first, first, state.versions)
        checkpoint.save(name, state)
    missing_rollups = {r.name for r in cfg.rollups} - set(state.rollups)
    if missing_rollups:
        done = _base_done(cfg, state) or state.predictions_end
        assert done is not None
        state = dataclasses.replace(state, rollups={**state.rollups, **{
            r.name: _rollups.floor_to(done, r.every) for r in cfg.rollups
            if r.name in missing_rollups}})
        checkpoint.save(name, state)
    return _clock_checked(name, cfg, state, checkpoint, now, tick.catch_up)


def _checkpoint_fault(name: str, cfg: ModelConfig, now: datetime,
                      exc: Exception) -> WindowResult:
    """Return a result without a window, so the exporter counts the fault (stage checkpoint)."""
    return WindowResult(
        model=name, version=cfg.model_version or cfg.model_alias or "",
        index=window_index(cfg.every, now), start=now, end=now, phase="full",
        labels_included=False, n_rows=0, report=None, evaluated_at=now,
        errors=MappingProxyType({"checkpoint": f"unavailable: {type(exc).__name__}: {exc}"}))


def _model_windows(name: str, cfg: ModelConfig, source: WindowSource, state: ModelState,
                   may_skip: bool, tick: _Tick
                   ) -> tuple[list[WindowResult], ModelState, bool]:
    """Evaluate the model's due windows, phase by phase, oldest first.

    Returns the results, the state after them and whether the model stopped (a window to
    redo, or ``keep_going()`` said stop): later windows wait, the watermark never jumps a gap.
    """
    results: list[WindowResult] = []
    stopped = False
    for phase, attr in _phases(cfg):
        after = getattr(state, attr) or state.predictions_end
        delay = cfg.labels_after if phase == "labels" else type(cfg.labels_after)(0)
        spans, skipped = due_windows(cfg.window, cfg.every, after=after, now=tick.now,
                                     delay=delay, cap=tick.catch_up, skip=may_skip)
        if skipped:
            log.warning("%s: %d missed %s window(s) beyond the catch-up cap (%d) were "
                        "skipped", name, skipped, phase, tick.catch_up)
        batch = _batch(cfg, source, [(sp.start, sp.end) for sp in spans], phase)
        for span in spans:
            if not tick.keep_going():  # stopping: later windows wait, and the other phases
                return results, state, True
            result = evaluate_model_window(cfg, source, span.start, span.end, now=tick.now,
                                           phase=phase, index=span.index, batch=batch)
            if skipped:
                result = dataclasses.replace(result, skipped_before=skipped)
                skipped = 0
            result, state, stop = _complete(name, result, state, attr, span.end,
                                            tick.checkpoint, tick.durable, tick.others,
                                            relabel=_relabel_rule(cfg, tick.now),
                                            summaries=tick.summaries,
                                            thresholds=cfg.thresholds,
                                            budget=_streaks.policy(cfg))
            _log(result)
            results.append(result)
            if stop:  # later windows of this phase wait for this one (the next phase runs)
                stopped = True
                break
    return results, state, stopped


def _batch(cfg: ModelConfig, source: WindowSource, spans: list[tuple[datetime, datetime]],
           phase: Phase) -> _summarized.Batch | None:
    """Summarize a phase's due windows in one call of the source (None: a row source).

    One Spark job for all the due windows of a phase, so windows without rows cost nothing
    of their own; more than one window only (a single one is summarized when evaluated).
    """
    if len(spans) < 2 or not _summarized.summarizes(source):
        return None
    return _summarized.fetch_batch(cfg, source, spans, phase)


def _clock_checked(name: str, cfg: ModelConfig, state: ModelState, checkpoint: Checkpoint,
                   now: datetime, cap: int) -> tuple[ModelState, bool]:
    """:mod:`.clock`'s rules: watermarks ahead of ``now`` go back (saved), jumps are counted.

    Returns the state and whether the catch-up cap may skip windows: not after a forward
    jump (``now`` ran ahead of the time elapsed since this process's previous tick by more
    than ``cap`` windows), whose windows stay due; as before after downtime or an outage.
    """
    jumped = _clock.WATCH.tick(checkpoint, name, now)
    phases = [(attr, cfg.labels_after if phase == "labels" else timedelta(0))
              for phase, attr in _phases(cfg)]
    rewound, ahead = _clock.rewind(cfg, state, now, phases)
    if ahead > timedelta(0):
        INCIDENTS.count("clock_jumps", name, "backward")
        log.warning("%s: clock jump backward: the watermark was %s ahead of now (%s); windows "
                    "ending after now are evaluated again when they close", name, ahead,
                    now.isoformat())
        checkpoint.save(name, rewound)
    forward = jumped is not None and jumped > cap * cfg.every
    if forward:
        INCIDENTS.count("clock_jumps", name, "forward")
        log.warning("%s: clock jump forward: now (%s) moved %s more than the time elapsed "
                    "since the previous tick; due windows are evaluated oldest first, at most "
                    "%d a tick, none skipped", name, now.isoformat(), jumped, cap)
    return rewound, not forward


def _base_done(cfg: ModelConfig, state: ModelState) -> datetime | None:
    """End of the last window done in every phase (labels included)."""
    ends = [getattr(state, attr) for _, attr in _phases(cfg)]
    return None if any(e is None for e in ends) else min(ends)  # type: ignore[type-var]


def _rollup_windows(name: str, cfg: ModelConfig, state: ModelState, store: SummaryStore,
                    checkpoint: Checkpoint, now: datetime, durable: list[tuple[str, Hook]],
                    others: list[tuple[str, Hook]], relabelled: Sequence[int], *,
                    cap: int, source: WindowSource | None = None,
                    keep_going: Callable[[], bool] = lambda: True) -> list[WindowResult]:
    """Evaluate the due rollup windows of one model, and those late labels changed.

    With the model's ``source``, a stored window summary that is corrupt or missing is re-made
    from the window's rows before the rollup merges it (:func:`.rollups.evaluate_rollup`).
    ``keep_going()`` is asked before each rollup window (SIGTERM, the lease lost).
    """
    out: list[WindowResult] = []
    remake = _remaker(cfg, source, now) if source is not None else None
    done = _base_done(cfg, state)
    for rollup in cfg.rollups:
        after = state.rollups.get(rollup.name)
        if after is None:
            continue
        # late labels changed a window of rollups already evaluated: their label metrics again
        again = sorted({t for i in relabelled
                        for t in _rollups.containing(cfg, rollup, i, after)})
        for end in again if cfg.label_metrics else ():
            if not keep_going():
                return out
            result = _rollup_result(cfg, rollup, end, store, now=now, labels_only=True,
                                    remake=remake)
            result, state, stop = _complete_rollup(name, result, state, rollup.name,
                                                   checkpoint, durable, others)
            _log(result)
            out.append(result)
            if stop:
                return out
        # the rollup's own grid, due once every window in it is done (labels included)
        spans, skipped = due_windows(rollup.window, rollup.every, after=after, now=done,
                                     cap=cap) if done is not None else ([], 0)
        if skipped:
            log.warning("%s: %d missed %s rollup window(s) beyond the catch-up cap (%d) were "
                        "skipped", name, skipped, rollup.name, cap)
        for end in (sp.end for sp in spans):
            if not keep_going():  # stopping (or no longer the leader): no pruning either
                return out
            result = _rollup_result(cfg, rollup, end, store, now=now, remake=remake)
            if "rollup" in result.errors:
                # the stored summaries could not be read: the rollup window waits for the next
                # tick (its watermark stays), the fault is counted and logged
                out.append(_deliver(result, durable + others))
                _log(result)
                break
            if skipped:
                result = dataclasses.replace(result, skipped_before=skipped)
                skipped = 0
            result, state, stop = _complete_rollup(name, result, state, rollup.name,
                                                   checkpoint, durable, others, end=end)
            _log(result)
            out.append(result)
            if stop:
                return out
    keep = _rollups.keep_from(cfg, state.rollups, _watched(cfg, state.relabel, now))
    if keep is not None:
        try:
            store.prune(name, keep)
        except Exception as exc:  # harmless: pruned at the next successful attempt
            log.warning("%s: cannot prune stored window summaries: %s", name, exc)
    return out


def _rollup_result(cfg: ModelConfig, rollup: Any, end: datetime, store: SummaryStore, *,
                   now: datetime, labels_only: bool = False,
                   remake: _rollups.Remake | None = None) -> WindowResult:
    """One rollup window (:func:`.rollups.evaluate_rollup`) as a ``WindowResult``."""
    started = time.perf_counter()
    e = _rollups.evaluate_rollup(cfg, rollup, end, store, labels_only=labels_only,
                                 remake=remake)
    return WindowResult(
        model=cfg.name, version=e.version, index=e.index, start=end - rollup.window, end=end,
        phase=e.phase, labels_included=e.labelled_rows > 0,  # type: ignore[arg-type]
        n_rows=e.n_rows, report=e.report,
        errors=MappingProxyType({"rollup": e.error} if e.error else {}), evaluated_at=now,
        duration_seconds=time.perf_counter() - started, metrics=e.metrics,
        labelled_rows=e.labelled_rows, rollup=rollup.name, merged_windows=e.merged_windows)


def _remaker(cfg: ModelConfig, source: WindowSource, now: datetime) -> _rollups.Remake:
    """Re-make a window's stored summary parts from the source's rows (self-repair).

    The window is evaluated again in each of the model's phases, as when it closed (same rows
    rule, same summary spec); only its summaries are kept. A window starting before the
    model's ``start`` is never made (its rows are not the model's to report). Raises when the
    rows cannot be read.
    """
    def remake(index: int) -> dict[str, bytes]:
        sp = window_span(cfg.window, cfg.every, index)
        parts: dict[str, bytes] = {}
        if cfg.start is not None and sp.start < cfg.start:
            return parts
        for phase, _ in _phases(cfg):
            result = evaluate_model_window(cfg, source, sp.start, sp.end, now=now, phase=phase,
                                           index=index)
            problem = {k: v for k, v in result.errors.items() if k in ("source", "data",
                                                                       "rollup")}
            if problem:
                raise RuntimeError(f"window #{index} cannot be re-made: {problem}")
            parts.update(result.summaries)
        return parts
    return remake


def _complete_rollup(name: str, result: WindowResult, state: ModelState, rollup: str,
                     checkpoint: Checkpoint, durable: list[tuple[str, Hook]],
                     others: list[tuple[str, Hook]], *, end: datetime | None = None
                     ) -> tuple[WindowResult, ModelState, bool]:
    """:func:`_complete` for a rollup window: its watermark is ``state.rollups[rollup]``."""
    result = _deliver(result, durable)
    failed = [stage for stage, _ in durable if stage in result.errors]
    moved = dataclasses.replace(state, last=fold(state.last, result))
    if end is not None:
        moved = dataclasses.replace(moved, rollups={**state.rollups, rollup: end})
    return _save_and_deliver(name, result, state, moved, checkpoint, others, failed,
                             "rollup window")


def next_run(config: MonitorConfig, now: datetime) -> datetime | None:
    """When :func:`run_once` next has a window to evaluate.

    The earliest window end (or, for the labelled phase, window end + ``labels_after``) of any
    model, strictly after ``now``; None without models. Windows already due (a source that
    was down) are retried by the service's fallback interval, not here.
    """
    times = []
    for cfg in config.models.values():
        for phase, _ in _phases(cfg):
            delay = cfg.labels_after if phase == "labels" else type(cfg.labels_after)(0)
            times.append(next_due(cfg.every, now, delay))
    return min(times, default=None)


def _relabel_rule(cfg: ModelConfig, now: datetime) -> Callable[[Mapping[str, int], WindowResult],
                                                                  dict[str, int]]:
    """How a completed window updates the set of windows waiting for late labels."""
    def update(pending: Mapping[str, int], result: WindowResult) -> dict[str, int]:
        out = _watched(cfg, pending, now)
        if result.phase == "predictions" or result.label_coverage is None:
            return out
        key = str(result.index)
        if result.label_coverage < 1 and cfg.relabel_within and \
                result.end + cfg.labels_after + cfg.relabel_within > now:
            out[key] = result.labelled_rows
        else:
            out.pop(key, None)
        return out
    return update


def _watched(cfg: ModelConfig, pending: Mapping[str, int], now: datetime) -> dict[str, int]:
    """Return the windows still within ``relabel_within`` of their labelled evaluation."""
    return {k: v for k, v in pending.items()
            if window_span(cfg.window, cfg.every, int(k)).end + cfg.labels_after
            + cfg.relabel_within > now}


def _late_labels(name: str, cfg: ModelConfig, source: WindowSource, state: ModelState,
                 checkpoint: Checkpoint, now: datetime, durable: list[tuple[str, Hook]],
                 others: list[tuple[str, Hook]], summaries: SummaryStore | None = None
                 ) -> tuple[list[WindowResult], ModelState]:
    """Evaluate the label metrics of watched windows again where more labels have arrived.

    A window evaluated with some labels missing is watched for ``relabel_within`` after its
    labelled evaluation; each tick its rows are fetched again, and when more of them carry a
    label its label metrics are recomputed and delivered (same MLflow step: the newer value
    follows the older one in the metric's history; the gauges show the newer one). Returns the
    results and the model's state after them.
    """
    out: list[WindowResult] = []
    if not state.relabel or not cfg.label_metrics:
        return out, state
    rule = _relabel_rule(cfg, now)
    watched = _watched(cfg, state.relabel, now)
    if watched != dict(state.relabel):  # some windows are past the bound: stop watching them
        try:
            checkpoint.save(name, dataclasses.replace(state, relabel=watched))
            state = dataclasses.replace(state, relabel=watched)
        except Exception as exc:  # harmless: they are pruned with the next successful save
            log.warning("%s: cannot save checkpoint: %s", name, exc)
    for key in sorted(watched, key=int):
        sp = window_span(cfg.window, cfg.every, int(key))
        phase: Phase = "labels" if ("labels", "labels_end") in _phases(cfg) else "full"
        result = evaluate_model_window(cfg, source, sp.start, sp.end, now=now, phase=phase,
                                       index=sp.index)
        if result.errors or result.labelled_rows <= state.relabel[key]:
            continue  # no new labels (or the source is down): look again next tick
        result = dataclasses.replace(result, phase="labels")  # only label metrics changed
        attr = "labels_end" if phase == "labels" else "predictions_end"
        result, state, stop = _complete(name, result, state, attr,
                                        getattr(state, attr) or sp.end,  # never moves back
                                        checkpoint, durable, others, relabel=rule,
                                        summaries=summaries, thresholds=cfg.thresholds,
                                        budget=_streaks.policy(cfg))
        _log(result)
        out.append(result)
        if stop:
            break
    return out, state


def _complete(name: str, result: WindowResult, state: ModelState, attr: str, end: datetime,
              checkpoint: Checkpoint, durable: list[tuple[str, Hook]],
              others: list[tuple[str, Hook]], *, relabel: Any = None,
              summaries: SummaryStore | None = None, thresholds: Sequence[Any] = (),
              budget: _streaks.Budget | None = None) -> tuple[WindowResult, ModelState, bool]:
    """Deliver one result and move the checkpoint, in the crash-safe order.

    1. durable hooks (the MLflow sink, whose spool is on disk when ``submit`` returns), and
       the window's summary parts (rollups);
    2. the checkpoint, only if they all succeeded: a crash before this step redoes the window
       (the sink replaces the re-submitted values, MLflow ignores identical ones), a crash after
       it finds the values in the spool, so no window is lost and none is doubled;
    3. the other hooks (the Prometheus collector), which see a ``checkpoint`` error and keep
       ``last_success`` frozen when the checkpoint could not move.

    The alert streaks (:mod:`.streaks`, against ``thresholds`` and the ``budget`` policy of
    ``compare: budget`` thresholds) move in the same checkpoint write, and the result handed
    to the other hooks carries them.

    Returns the result (with the hooks' and the checkpoint's errors), the state and whether
    the model must stop for this tick (the window is redone next tick).
    """
    if "source" in result.errors or "data" in result.errors:
        # nothing usable was read: the watermark stays, the window is redone next tick (a data
        # error, e.g. a misnamed column, until the config or the source is fixed)
        return _deliver(result, durable + others), state, True
    result = _deliver(result, durable)
    failed = [stage for stage, _ in durable if stage in result.errors]
    if not failed and summaries is not None:
        try:
            for part, blob in result.summaries.items():
                summaries.put(name, result.index, part, blob)
        except Exception as exc:  # full disk, quota, database down
            # the window's own values stand and the checkpoint moves on: the rollup re-makes
            # the missing summary from the source's rows when it needs it (self-repair)
            why = (f"cannot store the window's summary: {type(exc).__name__}: {exc}; the "
                   "rollups re-make it from the source's rows (free space in the store)")
            result = dataclasses.replace(
                result, errors=MappingProxyType({**result.errors, "summary_store": why}))
            log.error("%s: window #%d: %s", name, result.index, why)
    # the watermark, what was reported and the alert streaks move together, in one write
    streaks = _streaks.advance(_streaks.Streaks.from_json(state.streaks), result, thresholds,
                               budget=budget)
    moved = dataclasses.replace(state, **{attr: end, "last": fold(state.last, result),
                                          "streaks": streaks.to_json()})
    result = dataclasses.replace(result, streaks=streaks)
    if relabel is not None:
        moved = dataclasses.replace(moved, relabel=relabel(state.relabel, result))
    return _save_and_deliver(name, result, state, moved, checkpoint, others, failed, "window")


def _save_and_deliver(name: str, result: WindowResult, state: ModelState, moved: ModelState,
                      checkpoint: Checkpoint, others: list[tuple[str, Hook]],
                      failed: list[str], what: str) -> tuple[WindowResult, ModelState, bool]:
    """Do steps 2 and 3 of :func:`_complete`: save ``moved`` unless ``failed``, then deliver."""
    problem = None
    if failed:
        problem = (f"not moved: the {'/'.join(failed)} values of this {what} are not durable "
                   f"yet; the {what} is evaluated again next tick")
    else:
        try:
            checkpoint.save(name, moved)
            state = moved
        except Exception as exc:  # full disk, read-only mount, database down
            problem = (f"cannot save: {type(exc).__name__}: {exc}; the {what} is evaluated "
                       "again next tick (free space or fix permissions of the checkpoint)")
            log.error("%s: checkpoint %s", name, problem)
    if problem is not None:  # the window is redone: its streaks did not move either
        result = dataclasses.replace(
            result, errors=MappingProxyType({**result.errors, "checkpoint": problem}),
            streaks=None)
    return _deliver(result, others), state, problem is not None


def labels_pending_count(config: MonitorConfig, checkpoint: Checkpoint, *,
                         now: datetime) -> dict[str, int]:
    """Per model, closed windows whose labelled evaluation is not done yet (a self-metric)."""
    out = {}
    for name, cfg in config.models.items():
        if ("labels", "labels_end") not in _phases(cfg):
            out[name] = 0
            continue
        out[name] = labels_pending(cfg.every, labels_end=checkpoint.load(name).labels_end,
                                   now=now)
    return out
