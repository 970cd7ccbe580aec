"""Mergeable window summaries: summarize rows, merge summaries, serialize them.

:func:`summarize` turns a window's rows into a :class:`WindowSummary`;
:meth:`WindowSummary.merge` adds two; :func:`to_bytes` / :func:`from_bytes` store them;
:func:`fairmonitor.report.evaluate_summary` evaluates one into a ``WindowReport``.
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
    merge_all,
    summarize,
)
from .serialize import from_bytes, to_bytes

__all__ = ["DYADIC_BITS", "SUMMARY_VERSION", "AbccFromCells", "AttributeSummary",
           "CompactCells", "DerivedGroups", "GroupSummary", "SummarySpec", "WindowSummary",
           "cell_edges", "from_bytes", "merge_all", "summarize", "to_bytes"]
