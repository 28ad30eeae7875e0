"""The SQL store's own connections for its per-call statements: autocommit, no ping.

SQLAlchemy's pool costs about 16 µs a checkout (SQLite's whole write
transaction is about 12) and, with ``pool_pre_ping``, one round trip more per
checkout on PostgreSQL. The admissions and the kill-switch reads therefore
take a driver connection from this small list instead: an idle one is reused
after a check that costs no round trip (on PostgreSQL: the socket has nothing
to read; a server that ended the connection has sent its farewell or closed
it), a broken one is dropped, and at most ``size`` are open at once (a caller
beyond that waits up to ``timeout`` seconds, then the store is unavailable).
A child process after ``fork`` opens its own.
"""

from __future__ import annotations

import os
import select
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar, final

from toolbox.foundations._sqlite_wal import enter_wal
from toolbox.pipeline._state_ports import StateUnavailableError

__all__ = ["Connections", "postgres_connections", "socket_idle", "sqlite_connections"]

C = TypeVar("C")


def socket_idle(fileno: int) -> bool:
    """Whether an idle connection's socket has nothing to read (no error, no close, no message)."""
    poller = select.poll()
    poller.register(fileno, select.POLLIN | select.POLLERR | select.POLLHUP)
    return not poller.poll(0)


@final
class Connections(Generic[C]):
    """At most ``size`` driver connections of one store, idle ones kept for the next call."""

    __slots__ = (
        "_alive",
        "_closed",
        "_free",
        "_idle",
        "_lock",
        "_open",
        "_pid",
        "_size",
        "_timeout",
        "_waiting",
        "connect",
    )

    def __init__(
        self,
        connect: Callable[[], C],
        *,
        alive: Callable[[C], bool],
        size: int = 15,
        timeout: float = 5.0,
    ) -> None:
        #: Opens a new connection (replaceable: the bench traces what it opens).
        self.connect = connect
        self._alive = alive
        self._size = size
        self._timeout = timeout
        self._idle: list[C] = []
        self._open = 0
        self._waiting = 0
        self._closed = False
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._free = threading.Condition(self._lock)

    @property
    def timeout(self) -> float:
        """How long a caller waits for a free connection, and (SQLite) for another writer, in seconds."""
        return self._timeout

    def take(self) -> C:
        """An open connection for this thread's use until `give` (or `drop`)."""
        if self._pid != os.getpid():
            self._forked()
        conn: C | None = None
        with self._lock:
            while True:
                if self._idle:
                    conn = self._idle.pop()
                    break
                if self._open < self._size:
                    self._open += 1
                    break
                self._waiting += 1
                try:
                    freed = self._free.wait(self._timeout)
                finally:
                    self._waiting -= 1
                if not freed:
                    raise StateUnavailableError("the SQL state store has no free connection")
        if conn is not None:
            if self._alive(conn):
                return conn
            self.drop(conn)
            return self.take()
        try:
            return self.connect()
        except Exception as exc:  # noqa: BLE001 - any failure to connect: the store is unavailable
            self._release()
            # The exception text can hold the URL: only its type is passed on.
            raise StateUnavailableError(f"the SQL state store failed ({type(exc).__name__})") from None
        except BaseException:
            self._release()
            raise

    @contextmanager
    def lease(
        self, failures: type[BaseException] | tuple[type[BaseException], ...] = Exception
    ) -> Iterator[C]:
        """A connection for one use: given back after it, dropped when the use fails.

        A failure of a ``failures`` type is `StateUnavailableError` naming only its type: the
        driver's text can hold the URL or the statement's parameters.
        """
        conn = self.take()
        try:
            yield conn
        except failures as exc:
            self.drop(conn)
            raise StateUnavailableError(f"the SQL state store failed ({type(exc).__name__})") from None
        except BaseException:
            self.drop(conn)
            raise
        self.give(conn)

    def give(self, conn: C) -> None:
        """Return a connection that is fine (its transaction ended) for the next call."""
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                if self._waiting:
                    self._free.notify()
                return
        self.drop(conn)

    def drop(self, conn: C) -> None:
        """Close a connection that failed or is no longer wanted, freeing its place."""
        try:
            closing: Any = conn
            closing.close()
        except Exception:  # noqa: BLE001, S110 - it is being thrown away
            pass
        self._release()

    def close(self) -> None:
        """Close the idle connections; those in use close when given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            self.drop(conn)

    def clear(self) -> None:
        """Close the idle connections and keep going (new ones open on demand)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            self.drop(conn)

    def _release(self) -> None:
        with self._lock:
            self._open -= 1
            if self._waiting:
                self._free.notify()

    def _forked(self) -> None:
        """In a child after ``fork``: forget the parent's connections (never use nor close them)."""
        # A lock another thread of the parent held is held forever here: make new ones.
        self._lock = threading.Lock()
        self._free = threading.Condition(self._lock)
        self._idle = []
        self._open = 0
        self._waiting = 0
        self._pid = os.getpid()


def sqlite_connections(path: str, *, timeout: float) -> Connections[sqlite3.Connection]:
    """Connections to the SQLite file ``path`` with the store's settings (WAL, ``synchronous=NORMAL``).

    Their ``busy_timeout`` is 0: a statement that takes the write lock waits for
    another writer through `retry_locked` (`toolbox.state._sql_limits`), within
    ``timeout``, trying every millisecond or two.
    """

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
        enter_wal(conn.execute, timeout)
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    return Connections(connect, alive=lambda _conn: True, timeout=timeout)


def postgres_connections(conninfo: str, *, timeout: float) -> Connections[Any]:
    """Autocommit psycopg connections to ``conninfo``: each statement is its own transaction."""
    import psycopg

    idle = psycopg.pq.TransactionStatus.IDLE

    def connect() -> psycopg.Connection[Any]:
        # Never prepared: each call is one round trip (Parse, Bind, Execute, Sync), the first too.
        return psycopg.connect(
            conninfo, autocommit=True, connect_timeout=max(1, int(timeout)), prepare_threshold=None
        )

    def alive(conn: psycopg.Connection[Any]) -> bool:
        return (
            not conn.closed
            and not conn.broken
            and conn.pgconn.transaction_status == idle
            and socket_idle(conn.pgconn.socket)
        )

    return Connections(connect, alive=alive, timeout=timeout)
