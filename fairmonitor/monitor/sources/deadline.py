"""Bounded fetches: a hung database becomes a counted source error, never a stuck tick.

Two layers, because neither is enough alone:

- the driver's own timeouts (:func:`engine_options`): PostgreSQL ``connect_timeout`` and
  ``statement_timeout``, MySQL connect/read timeouts, SQLite's busy timeout. They end the
  blocked call itself, so no thread stays stuck, but a driver may ignore them (a server that
  accepts the TCP connection and never answers sits in a read without one);
- :class:`DeadlineSource`, around any source: the fetch runs in a worker thread and the tick
  waits at most ``timeout`` seconds for it, then raises
  :class:`~fairmonitor.exceptions.WindowUnavailableError` (the job counts it under ``source``
  and retries the window next tick). A Python thread cannot be killed, so while an abandoned
  fetch is still blocked the next fetch of that source fails at once instead of piling up
  threads.

>>> from datetime import datetime, UTC
>>> import time
>>> class Hung:
...     def fetch(self, model, start, end):
...         time.sleep(1)
>>> source = DeadlineSource(Hung(), timeout=0.05)
>>> t = datetime(2026, 1, 1, tzinfo=UTC)
>>> source.fetch("credit", t, t)
Traceback (most recent call last):
...
fairmonitor.exceptions.WindowUnavailableError: the source gave no answer within 0.05 s ...
"""

from __future__ import annotations

import functools
import math
import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...exceptions import WindowUnavailableError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DeadlineSource", "engine_options", "existing_sqlite"]


def engine_options(url: str, timeout: float) -> dict[str, Any]:
    """``create_engine`` keyword arguments bounding connects and statements of ``url``.

    >>> engine_options("postgresql+psycopg2://u@127.0.0.1/db", 30)
    {'pool_pre_ping': True, 'connect_args': {'connect_timeout': 30, 'options': '-c statement_timeout=30000'}}
    >>> engine_options("sqlite:///predictions.db", 30)
    {'pool_pre_ping': True, 'connect_args': {'timeout': 30}}
    """  # noqa: E501 (doctest output)
    seconds = max(1, math.ceil(timeout))
    dialect = url.split(":", 1)[0].split("+", 1)[0].lower()
    args: dict[str, Any] = {}
    if dialect == "postgresql":
        # libpq: connect_timeout bounds connecting (including a server that never answers the
        # handshake); statement_timeout makes the server cancel a query running too long
        args = {"connect_timeout": seconds, "options": f"-c statement_timeout={seconds * 1000}"}
    elif dialect in ("mysql", "mariadb"):
        args = {"connect_timeout": seconds, "read_timeout": seconds}
    elif dialect == "sqlite":
        args = {"timeout": seconds}  # how long to wait on a locked database
    return {"pool_pre_ping": True, "connect_args": args} if args else {"pool_pre_ping": True}


def existing_sqlite(url: str) -> dict[str, Any]:
    """``create_engine`` arguments that open a SQLite file only if it exists.

    SQLite creates a missing file on connect; a monitor pointed at a wrong path would then
    read an empty database and report "no such table" forever. Opened read-write without
    create (``mode=rw``), a missing file is a clear source error instead.
    """
    from ..config.load import sqlite_file

    path = sqlite_file(url)
    if path is None:
        return {}
    import sqlite3

    def connect() -> Any:
        if not path.is_file():
            raise sqlite3.OperationalError(
                f"SQLite file not found: {path} (the monitor never creates it; relative "
                "paths resolve against the config file's directory)")
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True,
                               check_same_thread=False)

    return {"creator": connect}


#: calls of a summarizing source (:mod:`..summarized`) bounded as ``fetch`` is, when it has them
_BOUNDED = ("table_columns", "window_summaries")


class DeadlineSource:
    """Any :class:`~.base.WindowSource` whose ``fetch`` may take at most ``timeout`` seconds.

    Attributes of the wrapped source stay reachable (``.inner``); ``close`` is passed on.
    """

    def __init__(self, inner: Any, timeout: float) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds; got {timeout!r}")
        self.inner = inner
        self.timeout = float(timeout)
        self._running: threading.Thread | None = None
        self._started_for = ""

    def fetch(self, model: str, start: datetime, end: datetime) -> pd.DataFrame:
        """Return the inner source's rows, or WindowUnavailableError after ``timeout`` seconds."""
        return self._bounded(f"{model} [{start:%Y-%m-%d %H:%M}, ...)", model,
                             f"{model} window [{start.isoformat()}, {end.isoformat()})",
                             self.inner.fetch, model, start, end)

    def _bounded(self, started_for: str, model: str, what: str, call: Any, *args: Any,
                 **kwargs: Any) -> Any:
        """Run ``call`` in a worker thread; give up after ``timeout`` seconds."""
        if self._running is not None and self._running.is_alive():
            raise WindowUnavailableError(
                f"the source is still blocked in a fetch started for {self._started_for} "
                f"(more than {self.timeout:g} s ago); check the database, its network path "
                "and the source's 'timeout'")
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["result"] = call(*args, **kwargs)
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc

        thread = threading.Thread(target=work, name=f"fairmonitor-fetch-{model}", daemon=True)
        self._running, self._started_for = thread, started_for
        thread.start()
        thread.join(self.timeout)
        if thread.is_alive():
            raise WindowUnavailableError(
                f"the source gave no answer within {self.timeout:g} s for {what}; is the "
                "database hung or unreachable? (raise the source's 'timeout' if windows are "
                "just slow)")
        self._running = None
        if "error" in box:
            raise box["error"]
        return box["result"]

    def close(self) -> None:
        """Close the wrapped source."""
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        found = getattr(self.inner, name)
        if name in _BOUNDED and callable(found):
            # a summarizing source's calls (Spark jobs) are bounded as fetches are
            return functools.partial(self._bounded, f"{name} of {self.inner!r}", name,
                                     f"{name} of the source", found)
        return found
