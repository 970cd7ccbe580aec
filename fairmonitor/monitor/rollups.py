"""Longer windows (a day, a week, a sliding day) merged from stored window summaries.

A model's tumbling windows each leave a summary in the :mod:`.summary_store`; a rollup
(``rollups: [1d]`` in the config) is evaluated by loading the summaries of the windows it
covers, merging them (:func:`fairmonitor.summaries.merge_all`) and evaluating the merged
summary (:func:`fairmonitor.report.evaluate_summary`): no raw row is read again. Counts, parity
metrics and MADD equal the values on the rollup's raw rows; ABCC is within the certified error
of the summaries' cells (at most 1e-6); ABPC within round-off; HFM and CFair are estimates on
the merged row samples.

A rollup window ``[end - window, end)`` (``end`` on the rollup's own grid, every ``every``) is
evaluated once every window in it is done, labels included (``labels_after``): its label-free
metrics merge the windows' ``predictions`` parts, its label metrics the ``labels`` parts. When
late labels re-evaluate a window (``relabel_within``), the rollups already evaluated over it
are evaluated again from the stored summaries (phase ``labels``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from ..report.evaluate import evaluate_summary
from ..summaries import SummarySpec, WindowSummary, from_bytes, merge_all  # every kind
from ..summaries.multiclass import MulticlassSpec
from .incidents import INCIDENTS
from .merge import merge_reports
from .summary_store import SummaryStore
from .windows import EPOCH, window_index
from .windows import span as window_span

if TYPE_CHECKING:
    from ..report.evaluate import WindowReport
    from ..report.options import EvaluationOptions
    from .config import ModelConfig, RollupConfig

__all__ = ["Remake", "RollupEvaluation", "SummaryIntegrityError", "base_indices", "containing",
           "evaluate_rollup", "floor_to", "keep_from", "store_spec", "verified"]

log = logging.getLogger(__name__)


def store_spec(cfg: ModelConfig) -> SummarySpec:
    """Return what a stored window summary of ``cfg``'s model keeps."""
    return SummarySpec(max_raw=cfg.summary_max_raw, sample_size=cfg.summary_sample_size)


def floor_to(t: datetime, every: timedelta) -> datetime:
    """Return the latest grid point ``EPOCH + k * every`` at or before ``t``."""
    return EPOCH + window_index(every, t) * every


def base_indices(cfg: ModelConfig, rollup: RollupConfig, end: datetime) -> range:
    """Return indices of the model's windows that tile the rollup window ending at ``end``."""
    last = (end - EPOCH) // cfg.every
    return range(last - rollup.window // cfg.every + 1, last + 1)


def containing(cfg: ModelConfig, rollup: RollupConfig, index: int,
               evaluated_until: datetime) -> list[datetime]:
    """Return the ends of the evaluated rollup windows containing the model's window ``index``."""
    end = EPOCH + index * cfg.every
    t = floor_to(end - cfg.every, rollup.every) + rollup.every  # first grid end >= window end
    out = []
    while t - rollup.window < end and t <= evaluated_until:
        out.append(t)
        t += rollup.every
    return out


def keep_from(cfg: ModelConfig, after: Mapping[str, datetime],
              watched: Iterable[int]) -> int | None:
    """Return the oldest window index whose summary may still be read (older ones can be pruned).

    The next window of every rollup needs its windows; a window still watched for late labels
    needs every rollup window that contains it.
    """
    if not cfg.rollups:
        return None
    needed = []
    for r in cfg.rollups:
        if r.name not in after:
            return None  # not started: keep everything
        needed.append(base_indices(cfg, r, after[r.name] + r.every).start)
    longest = max(r.window for r in cfg.rollups) // cfg.every
    needed += [int(i) - longest for i in watched]
    return min(needed)


class SummaryIntegrityError(ValueError):
    """A stored window summary that is corrupt, or not the window it is stored as."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # an INTEGRITY_KINDS value


def verified(cfg: ModelConfig, index: int, blob: bytes) -> WindowSummary:
    """Return the stored summary of the model's window ``index``, checked.

    Its checksum (:func:`~fairmonitor.summaries.from_bytes`) and its identity: the model, and
    the window's start and end, which must be those of ``index`` (a valid summary of another
    window stored under this index is an error, never merged).

    Raises
    ------
    SummaryIntegrityError
        ``kind`` ``summary_corrupt`` (unreadable, truncated, checksum mismatch) or
        ``summary_identity`` (another model's or window's summary).
    """
    try:
        summary = from_bytes(blob)
    except Exception as exc:
        raise SummaryIntegrityError("summary_corrupt", str(exc)) from None
    span = window_span(cfg.window, cfg.every, index)
    found = (summary.model, summary.start, summary.end)
    if found != (cfg.name, span.start, span.end):
        raise SummaryIntegrityError(
            "summary_identity",
            f"the summary stored as {cfg.name!r} window #{index} [{span.start.isoformat()}, "
            f"{span.end.isoformat()}) is model {summary.model!r} "
            f"[{_iso(summary.start)}, {_iso(summary.end)})")
    return summary


def _iso(t: datetime | None) -> str:
    return "?" if t is None else t.isoformat()


def _load(cfg: ModelConfig, blobs: Mapping[int, bytes], spec: SummarySpec | MulticlassSpec,
          notes: list[str], bad: dict[int, SummaryIntegrityError]) -> dict[int, WindowSummary]:
    """Return the checked summaries of ``blobs``; failing ones go to ``bad`` (counted, logged)."""
    out, other = {}, 0
    for index, blob in blobs.items():
        try:
            summary = verified(cfg, index, blob)
        except SummaryIntegrityError as exc:
            bad[index] = exc
            INCIDENTS.count("integrity_errors", cfg.name, exc.kind)
            log.error("%s: stored summary of window #%d fails its check (%s): %s", cfg.name,
                      index, exc.kind, exc)
            continue
        if summary.spec.fingerprint != spec.fingerprint:
            other += 1  # summarized before `summaries:` changed: cannot merge with the others
            continue
        out[index] = summary
    if other:
        notes.append(f"{other} window(s) summarized under another `summaries` setting were "
                     "left out (they cannot merge with the current ones)")
    return out


#: re-makes the summary parts of the model's window ``index`` from the source's rows
Remake = Callable[[int], Mapping[str, bytes]]


def _repair(cfg: ModelConfig, store: SummaryStore, remake: Remake, indices: Iterable[int],
            bad: Mapping[int, SummaryIntegrityError], parts: dict[str, dict[int, WindowSummary]],
            notes: list[str]) -> None:
    """Re-make the windows of ``indices`` that are corrupt or missing, store and use them.

    A missing window whose source has no rows stays missing (nothing to repair: no traffic).
    Raises when the source cannot give the rows (the rollup waits for the next tick).
    """
    for index in indices:
        have = {p for p, got in parts.items() if index in got}
        if index not in bad and have:
            continue  # stored and sound (one part is enough: see evaluate_rollup)
        blobs = {p: b for p, b in remake(index).items() if p in parts}
        if not blobs:  # no rows (or none this rollup reads): nothing to repair
            if index in bad:
                notes.append(f"window #{index}'s stored summary was corrupt and the source has "
                             "no rows for it any more: left out")
            continue
        kind = "summary_corrupt" if index in bad else "summary_missing"
        for part, blob in blobs.items():
            parts.setdefault(part, {})[index] = verified(cfg, index, blob)
            try:
                store.put(cfg.name, index, part, blob)  # type: ignore[arg-type]
            except Exception as exc:  # used for this rollup anyway; re-made again next time
                log.warning("%s: cannot store the re-made summary of window #%d: %s",
                            cfg.name, index, exc)
        INCIDENTS.count("repairs", cfg.name, kind)
        log.warning("%s: window #%d's summary re-made from the source's rows (%s%s)", cfg.name,
                    index, kind, f": {bad[index]}" if index in bad else "")


@dataclass(frozen=True)
class RollupEvaluation:
    """What :func:`evaluate_rollup` found; ``job`` turns it into a ``WindowResult``."""

    end: datetime
    index: int
    metrics: tuple[str, ...]
    phase: str
    report: WindowReport | None = None
    version: str = ""
    n_rows: int = 0
    labelled_rows: int = 0
    merged_windows: int = 0
    error: str | None = None


class _Unusable(Exception):
    """The stored summaries cannot be read or repaired: the rollup window waits."""


def _stored(cfg: ModelConfig, store: SummaryStore, indices: range, free: bool,
            remake: Remake | None, notes: list[str]) -> dict[str, dict[int, WindowSummary]]:
    """Return the checked summaries of the parts the evaluation reads (repaired with ``remake``).

    A re-evaluation after late labels (no label-free metrics) reads the labelled parts only.
    Raises :class:`_Unusable` when the store cannot be read, or a corrupt summary cannot be
    re-made: nothing corrupt is ever merged.
    """
    spec: SummarySpec | MulticlassSpec = store_spec(cfg)
    if cfg.task == "multiclass":  # its classes are part of what its summaries mean
        spec = MulticlassSpec(spec, cfg.classes or ())
    bad: dict[int, SummaryIntegrityError] = {}
    try:
        parts = {"labels": _load(cfg, store.get(cfg.name, indices, "labels"), spec, notes, bad)}
        if free:
            parts["predictions"] = _load(cfg, store.get(cfg.name, indices, "predictions"),
                                         spec, notes, bad)
    except Exception as exc:  # store down
        raise _Unusable(f"cannot read the stored summaries: {type(exc).__name__}: {exc}"
                        ) from exc
    try:
        if remake is not None:
            _repair(cfg, store, remake, indices, bad, parts, notes)
        elif bad:
            raise next(iter(bad.values()))
    except Exception as exc:  # a corrupt summary that cannot be re-made: never merged
        raise _Unusable(f"cannot repair the stored summaries: {type(exc).__name__}: {exc}"
                        ) from exc
    return parts


def _rollup_report(with_labels: Mapping[int, WindowSummary],
                   without: Mapping[int, WindowSummary], free_parts: Mapping[int, WindowSummary],
                   free: tuple[str, ...], label: tuple[str, ...],
                   settings: EvaluationOptions) -> WindowReport | None:
    """Return the merged summaries' report.

    Label-free metrics on every window, label ones on the labelled parts.

    Every row labelled (no predictions parts): one merge serves both metric sets, the
    label-free ones without the labels (the same summary as merging the parts without them);
    a day's merge reads every cell of every hour, so it is merged once, not twice.
    """
    report = labelled = None
    merged = merge_all([with_labels[i] for i in sorted(with_labels)]) \
        if with_labels and (label or not without) else None
    if free and free_parts:
        report = evaluate_summary(
            merged.without_labels() if merged is not None and not without
            else merge_all([free_parts[i] for i in sorted(free_parts)]),
            metrics=free, evaluation=settings)
    if label and merged is not None:
        labelled = evaluate_summary(merged, metrics=label, evaluation=settings)
    if report is None or labelled is None:
        return report or labelled
    return merge_reports(report, labelled)


def evaluate_rollup(cfg: ModelConfig, rollup: RollupConfig, end: datetime,
                    store: SummaryStore, *, labels_only: bool = False,
                    remake: Remake | None = None) -> RollupEvaluation:
    """Evaluate the rollup window ending at ``end`` from the stored summaries. Never raises.

    ``index`` is the window's index on the rollup's grid; ``phase`` is ``full``, or
    ``labels`` with ``labels_only`` (a re-evaluation after late labels: label metrics only).
    Every stored summary is checked (:func:`verified`); with ``remake`` (the job's: fetch the
    window's rows and summarize them), a corrupt or missing one is re-made, stored and merged
    (counted in ``repairs``). Without it, or when the rows cannot be read, an unreadable store
    or summary gives ``error`` and no report: nothing corrupt is ever merged.
    """
    index = (end - EPOCH) // rollup.every
    free = () if labels_only else cfg.label_free_metrics
    label = cfg.label_metrics
    base = dict(end=end, index=index, metrics=free + label,
                phase="labels" if labels_only else "full",
                version=cfg.model_version or cfg.model_alias or "")
    indices = base_indices(cfg, rollup, end)
    notes: list[str] = []
    try:
        parts = _stored(cfg, store, indices, bool(free), remake, notes)
    except _Unusable as exc:
        return RollupEvaluation(**base, error=str(exc))
    with_labels, without = parts["labels"], parts.get("predictions", {})
    # a window stored without a predictions part had every row labelled: its labelled
    # summary serves the label-free metrics too
    free_parts = {i: without.get(i) or with_labels[i].without_labels()
                  for i in indices if i in without or i in with_labels} if free else {}
    if not free_parts and not with_labels:
        return RollupEvaluation(**base)
    rng = np.random.default_rng([cfg.seed, max(index, 0), int(rollup.window.total_seconds())])
    try:
        report = _rollup_report(with_labels, without, free_parts, free, label,
                                cfg.evaluation.replace(rng=rng))
    except Exception as exc:
        return RollupEvaluation(**base, error=f"{type(exc).__name__}: {exc}")
    assert report is not None
    merged_windows = len(free_parts) if free else len(with_labels)
    if merged_windows < len(indices):
        notes.append(f"merged {merged_windows} of {len(indices)} windows (the others had no "
                     "rows, or were evaluated before rollups were configured)")
    latest = max([*free_parts, *with_labels])
    # the version serving at the rollup's end (the label of its gauges)
    base["version"] = (free_parts.get(latest) or with_labels[latest]).version or base["version"]
    report = dataclasses.replace(report, notes=tuple(dict.fromkeys(report.notes + tuple(notes))),
                                 start=end - rollup.window, end=end)
    labelled_rows = sum(s.n_rows for s in with_labels.values())
    return RollupEvaluation(
        **base, report=report, merged_windows=merged_windows,
        n_rows=sum(s.n_rows for s in free_parts.values()) if free else labelled_rows,
        labelled_rows=labelled_rows if label else 0)
