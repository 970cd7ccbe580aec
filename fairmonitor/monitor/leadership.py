"""One active monitor per checkpoint: a lease, renewed in the background, fencing every write.

Two monitors on one checkpoint corrupt it: both evaluate every window, and the one ahead prunes
stored summaries the other still merges. So a monitor evaluates only while it holds the
checkpoint's lease; any other replica is a hot standby (it serves ``/metrics`` with its role and
no fairness values) and takes the lease over when the leader dies or hangs.

Three leases, one per checkpoint kind (:func:`open_lease`):

- :class:`SQLLease`, for a SQL checkpoint: one row in the table ``<checkpoint table>_lease`` of
  the checkpoint's database, ``(name, token, holder, beat, renewed_at)``. The leader bumps
  ``beat`` every ``lease / 3`` seconds and with every write. A standby watches the row; when
  ``(token, beat)`` has not changed for ``lease`` seconds on its own monotonic clock, it takes
  the row over with a compare-and-set that also increments ``token``, the **fencing token**.
  No clock is compared between hosts. Every write of the checkpoint and of the summary store
  runs ``UPDATE ... SET beat = beat + 1 WHERE token = <mine>`` in its own transaction
  (:meth:`SQLLease.fence`): a former leader, paused past its lease and resumed, finds 0 rows,
  and its write is rolled back (:class:`LeaseLost`).
- :class:`FileLease`, for a file checkpoint: ``flock`` on ``<checkpoint>.lock``, held by the
  process until it exits (the kernel releases it when it dies; a hung process keeps it: take
  the SQL checkpoint for a standby that must take over from a hung leader). The holder writes
  its identity and token into the file, for whoever wonders who holds it.
- :class:`NoLease`: the memory checkpoint (one process by definition).

:class:`LeaseKeeper` is the background thread that renews the lease (leader) or tries to take it
(standby), and tells the service when the role changes. A leader whose renewals fail (database
unreachable) steps down once ``lease`` seconds have passed since its last renewal: by then a
standby may hold the lease.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from .redact import mask_urls_in

__all__ = ["DEFAULT_LEASE_SECONDS", "FileLease", "Lease", "LeaseKeeper", "LeaseLost", "NoLease",
           "SQLLease", "guard_engine", "identity", "open_lease"]

log = logging.getLogger(__name__)

#: the default lease: a standby takes over at most this long (plus a third) after the leader
#: stopped renewing
DEFAULT_LEASE_SECONDS = 30.0


class LeaseLost(RuntimeError):
    """Raised when this process no longer holds the checkpoint's lease: the write is refused."""


def identity() -> str:
    """Who this process is, for the lease row and the lock file: ``host:pid:random``.

    >>> identity().count(":") >= 2
    True
    """
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease(Protocol):
    """What :class:`LeaseKeeper` and the stores need of a lease."""

    seconds: float
    token: int | None  # the fencing token while held, else None

    def acquire(self) -> bool:
        """Take the lease if it is free or expired; True when held afterwards."""
        ...

    def renew(self) -> None:
        """Extend the lease; LeaseLost if another process took it, OSError-like if unreachable."""
        ...

    def fence(self, conn: Any = None) -> None:
        """Check (in the write's own transaction, for SQL) that the lease is still ours."""
        ...

    def release(self) -> None:
        """Give the lease up (clean shutdown): a standby takes over at its next attempt."""
        ...

    def describe(self) -> str:
        """Who holds the lease, for logs."""
        ...


class _Fenced:
    """Shared bookkeeping: the refusals counted, each term's first one logged."""

    def __init__(self) -> None:
        self.refused = 0  # writes refused by the fence (fairmonitor_lease_fenced_writes_total)
        self._said = False
        self.on_lost: Callable[[], None] | None = None

    def _refuse(self, why: str) -> LeaseLost:
        self.refused += 1
        if not self._said:  # logged once per term: a stale leader may try many writes
            self._said = True
            log.error("write refused: %s; this monitor is no longer the leader and steps down "
                      "to standby", why)
        if self.on_lost is not None:
            self.on_lost()
        return LeaseLost(why)

    def _new_term(self) -> None:
        self._said = False


class NoLease(_Fenced):
    """The memory checkpoint's lease: always held, token 0.

    >>> lease = NoLease()
    >>> lease.acquire(), lease.token
    (True, 0)
    """

    seconds = DEFAULT_LEASE_SECONDS

    def __init__(self) -> None:
        super().__init__()
        self.token: int | None = 0

    def acquire(self) -> bool:  # noqa: D102
        return True

    def renew(self) -> None:  # noqa: D102
        return None

    def fence(self, conn: Any = None) -> None:  # noqa: D102
        return None

    def release(self) -> None:  # noqa: D102
        return None

    def describe(self) -> str:  # noqa: D102
        return "memory checkpoint (no lease)"


class FileLease(_Fenced):
    """``flock`` on a lock file beside a file checkpoint (module docstring).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "ck.json.lock"
    >>> a, b = FileLease(path, holder="a"), FileLease(path, holder="b")
    >>> a.acquire(), b.acquire(), a.token
    (True, False, 1)
    >>> a.release(); b.acquire(), b.token
    (True, 2)
    >>> b.release()
    """

    def __init__(self, path: str | os.PathLike[str], *, holder: str | None = None,
                 seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        super().__init__()
        self.path = Path(path)
        self.holder = holder or identity()
        self.seconds = float(seconds)
        self.token: int | None = None
        self._fd: int | None = None
        self._inode: tuple[int, int] | None = None

    def acquire(self) -> bool:  # noqa: D102
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)  # as the checkpoint's own write
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        before = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
        token = int(before[0]) + 1 if before and before[0].isdigit() else 1
        text = f"{token} {self.holder} {datetime.now(UTC).isoformat()}\n".encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
        os.fsync(fd)
        st = os.fstat(fd)
        self._fd, self._inode, self.token = fd, (st.st_dev, st.st_ino), token
        self._new_term()
        return True

    def renew(self) -> None:  # noqa: D102
        self.fence()

    def fence(self, conn: Any = None) -> None:  # noqa: D102
        if self._fd is None:
            raise self._refuse(f"the lock {self.path} is not held by this process")
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self._inode
        except FileNotFoundError:
            same = False
        if not same:  # someone removed or replaced the lock file: another process may lock it
            self._drop()
            raise self._refuse(f"the lock file {self.path} was removed or replaced")

    def _drop(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing the last descriptor releases the flock
        self._fd, self._inode, self.token = None, None, None

    def release(self) -> None:  # noqa: D102
        self._drop()

    def describe(self) -> str:  # noqa: D102
        try:
            return f"lock {self.path}: {self.path.read_text(encoding='utf-8').strip()}"
        except OSError:
            return f"lock {self.path}: unreadable"


class SQLLease(_Fenced):
    """A lease row with a heartbeat and a fencing token in the checkpoint's database.

    Parameters
    ----------
    url : str
        SQLAlchemy URL of the checkpoint's database.
    table : str
        The lease table (``<checkpoint table>_lease``).
    seconds : float
        How long the row may stay unchanged before a standby takes it over.
    holder : str, optional
        This process's identity (default :func:`identity`).
    name : str
        The row's key: one lease per checkpoint table.

    Examples
    --------
    >>> import tempfile, os
    >>> url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "ck.db")
    >>> a = SQLLease(url, "ck_lease", seconds=0.05, holder="a")
    >>> b = SQLLease(url, "ck_lease", seconds=0.05, holder="b")
    >>> a.acquire(), b.acquire()
    (True, False)
    >>> import time; time.sleep(0.1)
    >>> b.acquire(), b.token   # a stopped renewing: b takes over with the next token
    (True, 2)
    >>> try:
    ...     a.renew()
    ... except LeaseLost as exc:
    ...     print("refused")
    refused
    >>> a.close(); b.close()
    """

    def __init__(self, url: str, table: str = "fairmonitor_checkpoint_lease", *,
                 seconds: float = DEFAULT_LEASE_SECONDS, holder: str | None = None,
                 name: str = "leader") -> None:
        super().__init__()
        import sqlalchemy as sa

        self.seconds = float(seconds)
        self.holder = holder or identity()
        self.name = name
        self.token: int | None = None
        # a database that stopped answering must not hang the lease thread (or the release at
        # SIGTERM) in a TCP connect: PostgreSQL drivers take a connect timeout
        connect = ({"connect_timeout": max(1, int(self.seconds / 3))}
                   if sa.engine.make_url(url).get_backend_name() == "postgresql" else {})
        self.engine = sa.create_engine(url, pool_pre_ping=True, connect_args=connect)
        self.table = sa.Table(
            table, sa.MetaData(),
            sa.Column("name", sa.String(64), primary_key=True),
            sa.Column("token", sa.BigInteger, nullable=False),
            sa.Column("holder", sa.String(200), nullable=False),
            sa.Column("beat", sa.BigInteger, nullable=False),
            sa.Column("renewed_at", sa.String(40), nullable=False),
        )
        # a leader paused inside a transaction must not hold the lease row for ever, and this
        # thread must never wait long for it
        guard_engine(self.engine, self.seconds / 2, lock_seconds=max(0.1, self.seconds / 3))
        self._seen: tuple[int, int, str] | None = None
        self._seen_at = 0.0
        self._created = False

    def _create(self) -> None:
        import sqlalchemy as sa

        if self._created:
            return
        try:
            self.table.metadata.create_all(self.engine)
        except sa.exc.DBAPIError:  # two replicas creating it at once: the other one won
            self.table.metadata.create_all(self.engine)
        self._created = True

    def _row(self) -> Any:
        import sqlalchemy as sa

        t = self.table
        with self.engine.connect() as conn:
            return conn.execute(sa.select(t.c.token, t.c.holder, t.c.beat)
                                .where(t.c.name == self.name)).first()

    def acquire(self) -> bool:
        """Take the lease if free, released, or unchanged for ``seconds``; True when held."""
        import sqlalchemy as sa

        self._create()
        if self.token is not None:
            self.renew()
            return True
        row = self._row()
        if row is None:
            try:
                with self.engine.begin() as conn:
                    conn.execute(sa.insert(self.table).values(
                        name=self.name, token=1, holder=self.holder, beat=0,
                        renewed_at=_now()))
            except sa.exc.IntegrityError:  # another replica inserted it first
                return False
            return self._won(1)
        token, holder, beat = int(row.token), str(row.holder), int(row.beat)
        now = time.monotonic()
        if (token, beat, holder) != self._seen:
            self._seen, self._seen_at = (token, beat, holder), now
            if holder:  # alive as far as we know: wait for it to stay unchanged
                return False
        elif holder and now - self._seen_at < self.seconds:
            return False
        return self._take(token, beat)

    def _take(self, token: int, beat: int) -> bool:
        """Compare-and-set: the row as last seen becomes ours with the next token."""
        import sqlalchemy as sa

        t = self.table
        with self.engine.begin() as conn:
            taken = conn.execute(sa.update(t).where(
                t.c.name == self.name, t.c.token == token, t.c.beat == beat).values(
                token=token + 1, holder=self.holder, beat=0, renewed_at=_now())).rowcount
        return self._won(token + 1) if taken == 1 else False

    def _won(self, token: int) -> bool:
        self.token = token
        self._seen = None
        self._new_term()
        return True

    def _bump(self, conn: Any, token: int) -> int:
        import sqlalchemy as sa

        t = self.table
        return int(conn.execute(sa.update(t).where(
            t.c.name == self.name, t.c.token == token).values(
            beat=t.c.beat + 1, renewed_at=_now())).rowcount)

    def renew(self) -> None:  # noqa: D102
        with self.engine.begin() as conn:
            self.fence(conn)

    def fence(self, conn: Any = None) -> None:
        """Bump the heartbeat in ``conn``'s transaction, or raise :class:`LeaseLost`.

        Run first in every write transaction of the checkpoint and the summary store: the row
        lock it takes serialises the write with a standby's takeover, so a write either sees
        its token still current or is rolled back.
        """
        token = self.token  # read once: the lease thread may drop it meanwhile
        if token is None:
            raise self._refuse("this monitor does not hold the checkpoint's lease")
        if conn is None:
            with self.engine.begin() as own:
                n = self._bump(own, token)
        else:
            n = self._bump(conn, token)
        if n != 1:
            self.token = None
            raise self._refuse(f"lease token {token} is no longer current (another monitor "
                               "took the lease over)")

    def release(self) -> None:  # noqa: D102
        import sqlalchemy as sa

        if self.token is None:
            return
        t = self.table
        with contextlib.suppress(sa.exc.SQLAlchemyError), self.engine.begin() as conn:
            conn.execute(sa.update(t).where(t.c.name == self.name, t.c.token == self.token)
                         .values(holder="", renewed_at=_now()))
        self.token = None

    def describe(self) -> str:  # noqa: D102
        try:
            row = self._row()
        except Exception as exc:  # unreachable database: say so
            return f"lease row unreadable ({type(exc).__name__})"
        if row is None:
            return "no lease row yet"
        return f"held by {row.holder or 'nobody'} (token {row.token})"

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()


def _now() -> str:
    return datetime.now(UTC).isoformat()


def guard_engine(engine: Any, idle_seconds: float, *, lock_seconds: float | None = None) -> None:
    """PostgreSQL: the server ends a transaction its client left open for ``idle_seconds``.

    A leader paused (SIGSTOP, a frozen VM) inside a write transaction holds its row locks,
    the lease row's included: no standby could take over until it resumed. With
    ``idle_in_transaction_session_timeout`` the server ends that session and frees the locks;
    the resumed process finds its connection gone and its write failed. ``lock_seconds`` bounds
    how long a statement waits for a lock (the lease thread: it must never hang). The monitor's
    own transactions are a few statements sent back to back, never idle. Other databases: no-op.
    """
    if engine.dialect.name != "postgresql":
        return
    import sqlalchemy as sa

    settings = [f"SET idle_in_transaction_session_timeout = {max(1000, int(idle_seconds * 1000))}"]
    if lock_seconds is not None:
        settings.append(f"SET lock_timeout = {max(100, int(lock_seconds * 1000))}")

    def configure(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        for statement in settings:
            cursor.execute(statement)
        cursor.close()
        dbapi_conn.commit()

    sa.event.listen(engine, "connect", configure)
    engine.dispose()  # connections opened before (creating the tables) lack the settings


def open_lease(cfg: Any, *, holder: str | None = None) -> Lease:
    """Return the lease that goes with a checkpoint config (``CheckpointConfig``).

    >>> from fairmonitor.monitor.config import CheckpointConfig
    >>> from pathlib import Path
    >>> open_lease(CheckpointConfig("file", path=Path("/tmp/ck.json"))).path.name
    'ck.json.lock'
    """
    seconds = getattr(cfg, "lease", None)
    seconds = DEFAULT_LEASE_SECONDS if seconds is None else seconds.total_seconds()
    if cfg.kind == "sql":
        return SQLLease(cfg.url, f"{cfg.table}_lease", seconds=seconds, holder=holder)
    return FileLease(Path(cfg.path).with_name(Path(cfg.path).name + ".lock"), holder=holder,
                     seconds=seconds)


class LeaseKeeper:
    """The thread that keeps (leader) or seeks (standby) the lease every ``seconds / 3``.

    ``on_change(leader)`` is called from this thread when the role changes. A leader whose
    renewals fail for ``seconds`` (database unreachable) steps down: a standby may hold the
    lease by then, and its writes would be refused anyway.
    """

    def __init__(self, lease: Lease, on_change: Callable[[bool], None] | None = None, *,
                 period: float | None = None) -> None:
        self.lease = lease
        self.period = float(period if period is not None else max(0.05, lease.seconds / 3))
        self._on_change = on_change
        self._leader = False
        self._last_ok = 0.0
        self._said = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        if isinstance(lease, _Fenced):
            lease.on_lost = self._lost

    @property
    def is_leader(self) -> bool:
        """True while this process holds the lease (as far as it knows)."""
        return self._leader

    def step(self) -> bool:
        """One attempt: renew or seek the lease; returns the role afterwards."""
        with self._lock:
            try:
                if self._leader:
                    self.lease.renew()
                    self._last_ok = time.monotonic()
                elif self.lease.acquire():
                    self._last_ok = time.monotonic()
                    self._set(True)
                self._said = ""  # reachable again: the next outage is logged again
            except LeaseLost:
                self._set(False)
            except Exception as exc:  # unreachable store: keep the role until the lease ends
                if self._leader and time.monotonic() - self._last_ok >= self.lease.seconds:
                    log.error("cannot renew the checkpoint's lease for %.0f s (%s): stepping "
                              "down to standby", self.lease.seconds, type(exc).__name__)
                    self._drop_token()
                    self._set(False)
                elif not self._leader:
                    said = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                    if said != self._said:  # once per distinct fault, not every attempt
                        self._said = said
                        log.error("cannot take the checkpoint's lease (%s); retrying every "
                                  "%.1f s", mask_urls_in(said), self.period)
            return self._leader

    def _drop_token(self) -> None:
        # the row may still carry our token; forgetting it means we re-take it the normal way
        # (after the row stayed unchanged for a lease), never write with it again
        if isinstance(self.lease, SQLLease):
            self.lease.token = None

    def _lost(self) -> None:
        self._set(False)

    def _set(self, leader: bool) -> None:
        if leader == self._leader:
            return
        self._leader = leader
        if isinstance(self.lease, NoLease):
            pass  # one process by definition: nothing to say
        elif leader:
            log.warning("this monitor is now the leader (lease token %s)", self.lease.token)
        else:
            log.warning("this monitor is now a standby: %s", self._describe())
        if self._on_change is not None:
            self._on_change(leader)

    def _describe(self) -> str:
        try:
            return self.lease.describe()
        except Exception:  # diagnostics only
            return "lease holder unknown"

    def start(self) -> None:
        """Start the background thread (after a first synchronous :meth:`step`)."""
        self.step()
        self._thread = threading.Thread(target=self._run, name="fairmonitor-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.step()

    def stop(self, *, release: bool = True) -> None:
        """Stop the thread and, by default, give the lease up for a standby."""
        self._stop.set()
        if self._thread is not None:  # a daemon: never wait long for it (the SIGTERM bound)
            self._thread.join(timeout=2)
        if release and self._leader:
            with contextlib.suppress(Exception):
                self.lease.release()
            self._leader = False
        close = getattr(self.lease, "close", None)
        if close is not None:
            close()
