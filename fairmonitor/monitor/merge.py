"""Combine reports of one window evaluated in parts (different metrics, rows or inputs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ..report.evaluate import WindowReport

__all__ = ["merge_reports"]


def _union(x: Mapping[Any, Any], y: Mapping[Any, Any]) -> Mapping[Any, Any]:
    return MappingProxyType({**x, **y})


def merge_reports(a: WindowReport, b: WindowReport) -> WindowReport:
    """One report from two evaluations of disjoint metric sets on the same window.

    Identity, row count and group counts come from ``a`` (the one over every row); values,
    reasons, details, statuses, intervals, notes and skipped metrics are united, ``b`` winning on
    a clash.
    """
    return dataclasses.replace(
        a, values=_union(a.values, b.values), reasons=_union(a.reasons, b.reasons),
        details=_union(a.details, b.details), statuses=_union(a.statuses, b.statuses),
        intervals=_union(a.intervals, b.intervals),
        notes=tuple(dict.fromkeys(a.notes + b.notes)), skipped=_union(a.skipped, b.skipped),
        duration_seconds=a.duration_seconds + b.duration_seconds)
