"""Mergeable window summaries: summarize rows, merge summaries, serialize them.

:func:`summarize` turns a window's rows into a :class:`WindowSummary`;
:meth:`WindowSummary.merge` adds two; :func:`to_bytes` / :func:`from_bytes` store them;
:func:`fairmonitor.report.evaluate_summary` evaluates one into a ``WindowReport``. A
regression model's windows: :func:`summarize_regression` (:mod:`.regression`); ``merge_all``,
``to_bytes`` and ``from_bytes`` here take either kind.
"""

from .compute import AbccFromCells
from .core import (
    DYADIC_BITS,
    SUMMARY_VERSION,
    AttributeSummary,
    CompactCells,
    GroupSummary,
    SummarySpec,
    WindowSummary,
    cell_edges,
    summarize,
)
from .regression import (
    RegressionSummary,
    from_bytes,
    merge_all,
    summarize_regression,
    to_bytes,
)

__all__ = ["DYADIC_BITS", "SUMMARY_VERSION", "AbccFromCells", "AttributeSummary",
           "CompactCells", "GroupSummary", "RegressionSummary", "SummarySpec", "WindowSummary",
           "cell_edges", "from_bytes", "merge_all", "summarize", "summarize_regression",
           "to_bytes"]
