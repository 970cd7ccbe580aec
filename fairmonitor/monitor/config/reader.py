"""Config-reading helpers that collect every error instead of stopping at the first.

Each message has the form ``<dotted.key.path>: <rule>; got <value>`` and, where the value must
be one of a few, lists them, so a user can fix a whole file in one pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any, NoReturn

from ...exceptions import ConfigError
from .durations import DURATION_HELP, parse_duration

_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def fmt_allowed(values: Iterable[Any]) -> str:
    """Return ``a, b, c``: the allowed values of a key, for messages."""
    return ", ".join(str(v) for v in values)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Reader:
    """Reads typed values out of parsed YAML, recording errors with their key paths."""

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
        """Return a positive integer, else ``default``."""
        value = self.get(mapping, key, int, default, path=path)
        if value < 1:
            self.error(_join(path, key), f"must be a positive integer; got {value!r}")
            return default
        return int(value)

    def duration(self, mapping: Mapping[str, Any], key: str, default: timedelta | None, *,
                 path: str = "", required: bool = False,
                 allow_zero: bool = False) -> timedelta | None:
        """Return a duration such as ``"5m"``, else ``default``."""
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
        """Return a list of strings (column or metric names); one string is a one-item list."""
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

    def url(self, mapping: Mapping[str, Any], key: str, path: str) -> str:
        """Return a SQLAlchemy URL (``dialect[+driver]://...``)."""
        value = self.get(mapping, key, str, None, path=path, required=True)
        if value is None:
            return "sqlite://"
        if "://" not in value:
            self.error(_join(path, key), "must be a SQLAlchemy URL like "
                                         f"'sqlite:///predictions.db'; got {value!r}")
        return str(value)


def fail(what: str, errors: list[str]) -> NoReturn:
    """Raise a :class:`ConfigError` with a header line and one indented line per error."""
    n = len(errors)
    err = ConfigError(f"{what} has {n} error{'s' if n > 1 else ''}:\n"
                      + "\n".join(f"  {e}" for e in errors))
    err.errors = tuple(errors)  # type: ignore[attr-defined]
    raise err
