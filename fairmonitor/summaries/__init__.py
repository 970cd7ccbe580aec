"""Mergeable window summaries: summarize rows, merge summaries, serialize them.

:func:`summarize` turns a window's rows into a :class:`WindowSummary`;
:meth:`WindowSummary.merge` adds two; :func:`to_bytes` / :func:`from_bytes` store them;
:func:`fairmonitor.report.evaluate_summary` evaluates one into a ``WindowReport``. A
regression model's windows: :func:`summarize_regression` (:mod:`.regression`); a multiclass
model's: one binary summary per class (:class:`MulticlassSummary`, :mod:`.multiclass`).
``merge_all``, ``to_bytes`` and ``from_bytes`` here take every kind.
"""

from .compute import AbccFromCells
from .core import (
    DYADIC_BITS,
    SUMMARY_VERSION,
    AttributeSummary,
    CompactCells,
    DerivedGroups,
    GroupSummary,
    SummarySpec,
    WindowSummary,
    cell_edges,
    summarize,
)
from .multiclass import MulticlassSummary, from_bytes, merge_all, to_bytes
from .regression import RegressionSummary, summarize_regression

__all__ = ["DYADIC_BITS", "SUMMARY_VERSION", "AbccFromCells", "AttributeSummary",
           "CompactCells", "DerivedGroups", "GroupSummary", "MulticlassSummary",
           "RegressionSummary", "SummarySpec", "WindowSummary", "cell_edges", "from_bytes",
           "merge_all", "summarize", "summarize_regression", "to_bytes"]
