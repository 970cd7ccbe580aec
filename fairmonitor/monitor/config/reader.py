"""Config-reading helpers that collect every error instead of stopping at the first.

Each message has the form ``<dotted.key.path>: <rule>; got <value>`` and, where the value must
be one of a few, lists them, so a user can fix a whole file in one pass. The reader and the
settings the evaluator shares are :mod:`fairmonitor.report.reading`'s; the monitor adds
durations and URLs.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from ...report import reading as _shared
from ...report.reading import fail, fmt_allowed
from .durations import DURATION_HELP, parse_duration

__all__ = ["Reader", "fail", "fmt_allowed"]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Reader(_shared.Reader):
    """:class:`fairmonitor.report.reading.Reader` plus the monitor's durations and URLs."""

    def duration(self, mapping: Mapping[str, Any], key: str, default: timedelta | None, *,
                 path: str = "", required: bool = False,
                 allow_zero: bool = False) -> timedelta | None:
        """Read a duration such as ``"5m"``, else ``default``."""
        value = mapping.get(key)
        if value is None:
            if required:
                self.error(_join(path, key), f"required; give {DURATION_HELP}")
            return default
        try:
            delta = parse_duration(value)
        except ValueError as exc:
            self.error(_join(path, key), str(exc))
            return default
        if not delta and not allow_zero:
            self.error(_join(path, key), f"must be longer than 0; got {value!r}")
            return default
        return delta

    def url(self, mapping: Mapping[str, Any], key: str, path: str) -> str:
        """Read a SQLAlchemy URL (``dialect[+driver]://...``)."""
        value = self.get(mapping, key, str, None, path=path, required=True)
        if value is None:
            return "sqlite://"
        if "://" not in value:
            self.error(_join(path, key), "must be a SQLAlchemy URL like "
                                         f"'sqlite:///predictions.db'; got {value!r}")
        return str(value)
