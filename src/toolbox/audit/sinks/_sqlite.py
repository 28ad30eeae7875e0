"""`SqliteSink`: the embedded default, one SQLite file in WAL mode."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, final

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection

from toolbox.audit._events import FIELDS, GENESIS_HASH
from toolbox.audit._sink import AuditSinkError, chain_dicts
from toolbox.audit.sinks._sql import SqlSink, events_table, heads_table, pending_table
from toolbox.audit.sinks._sql_rows import storage_values
from toolbox.foundations._sqlite_wal import WRITER_WAIT, enter_wal, is_locked, retry_locked

__all__ = ["SqliteSink"]

_BEGIN_OPTION = "toolbox_sqlite_begin"
_COLUMNS = ", ".join(FIELDS)
_ROW = ", ".join(["?"] * len(FIELDS))
_INSERT = f"INSERT INTO {events_table.name} ({_COLUMNS}) VALUES ({_ROW})"  # noqa: S608 - fixed names
_INSERT_PENDING = f"INSERT INTO {pending_table.name} ({_COLUMNS}) VALUES ({_ROW})"  # noqa: S608 - fixed names
_ANY_PENDING = f"SELECT 1 FROM {pending_table.name} LIMIT 1"  # noqa: S608 - fixed names
_FOLD = (
    f"INSERT INTO {events_table.name} ({_COLUMNS}) SELECT {_COLUMNS} FROM {pending_table.name}",  # noqa: S608 - fixed names
    f"DELETE FROM {pending_table.name}",  # noqa: S608 - fixed names
)
#: A group of at most this many events goes to ``audit_pending`` (a STRICT call's opening has 3;
#: the openings and closings of 32 concurrent callers, about 100), whose commit flushes a page or
#: two; a larger one (an ``ASYNC`` drain, a replay) goes to ``audit_events`` directly.
_PENDING_GROUP = 256
#: The event loop writes a group of at most this many events itself (about 20 µs each: well
#: within `toolbox.audit._group.LOOP_WRITE_LIMIT`), so the groups of a few dozen concurrent
#: callers skip two thread hand-offs; a larger one goes to a writer thread.
_LOOP_GROUP = 128
#: A sink folds the pending events into ``audit_events`` once this many wait (about 128 calls):
#: it counts them once, at its first write, then adds what it writes itself.
_FOLD_AT = 512
#: The WAL's size (pages) at which a commit checkpoints it: SQLite's default, the sink's setting.
_AUTOCHECKPOINT = 1000
_COUNT_PENDING = f"SELECT count(*) FROM {pending_table.name}"  # noqa: S608 - fixed names
_READ_HEADS = (
    f"SELECT trace_id, last_sequence, last_hash FROM {heads_table.name} "  # noqa: S608 - fixed names
    "WHERE trace_id IN ({})"
)
_WRITE_HEADS = (
    f"INSERT INTO {heads_table.name} (trace_id, last_sequence, last_hash) VALUES (?, ?, ?) "  # noqa: S608 - fixed names
    "ON CONFLICT (trace_id) DO UPDATE "
    "SET last_sequence = excluded.last_sequence, last_hash = excluded.last_hash"
)
_NEW_TRACE = (0, GENESIS_HASH)
# Writer connections a forked child inherited: kept open, never closed nor garbage collected.
# Closing one in the child could check the WAL in and delete it under the parent (a child
# does not inherit the parent's file locks, so it would think itself the last user).
_INHERITED: list[sqlite3.Connection] = []


@final
class SqliteSink(SqlSink):
    """Stores events in the SQLite file ``path``, created (with its schema) on first use.

    The file's directory must exist. The database runs in WAL mode (readers do
    not block the writer) with ``synchronous=FULL`` (a stored batch survives a
    power loss). Every write is one ``BEGIN IMMEDIATE`` transaction: writers are
    serialized across threads and processes, waiting up to ``busy_timeout``
    seconds for one another, so each trace's sequence stays gap-free.
    """

    __slots__ = (
        "_busy_ms",
        "_busy_timeout",
        "_heads_version",
        "_path",
        "_pending_added",
        "_writer",
        "_writer_pid",
        "_writer_waits",
    )

    _event_tables = (events_table, pending_table)

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        if str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise ValueError("SqliteSink needs a file path (use MemorySink for an in-memory trail)")
        self._path = Path(path)
        self._busy_timeout = busy_timeout
        self._writer: sqlite3.Connection | None = None  # the group commit's connection (see _write_group)
        self._writer_pid = 0
        self._writer_waits = True  # whether the writer is set to wait for others (not on the event loop)
        # The remembered heads (SqlSink._heads) are valid while this data_version holds.
        self._heads_version: object = None
        # Events waiting in audit_pending as this sink knows them: counted at its first write (a
        # process that writes a few events and exits still leaves them to be folded), then its own.
        self._pending_added: int | None = None
        engine = create_engine(
            URL.create("sqlite", database=str(self._path)),
            connect_args={"check_same_thread": False, "timeout": busy_timeout},
            hide_parameters=True,
        )
        busy_ms = self._busy_ms = max(int(busy_timeout * 1000), 0)

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
            # SQLAlchemy emits BEGIN itself (below), so pysqlite must not.
            dbapi_connection.isolation_level = None
            _configure_connection(dbapi_connection, busy_ms)

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            mode = conn.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
            conn.exec_driver_sql(f"BEGIN {mode}")

        super().__init__(
            engine,
            name=f"SQLite audit store {str(self._path)!r}",
            write_options={_BEGIN_OPTION: "IMMEDIATE"},
            serialize_writes=True,
            write_on_loop=self._write_group_on_loop,
        )

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    def close(self) -> None:
        """Close the writer's connection and every pooled one; the sink cannot be used afterwards."""
        with self._serialized():
            writer, self._writer = self._writer, None
            if writer is not None:
                if self._writer_pid == os.getpid():
                    writer.close()
                else:
                    _INHERITED.append(writer)
        super().close()

    # The write path in plain SQL: under the write lock, every millisecond of statement building
    # is a millisecond no other writer can commit.

    def _write_group(self, batches: Sequence[list[dict[str, Any]]]) -> None:
        """Every batch in one ``BEGIN IMMEDIATE`` transaction on the sink's own sqlite3 connection
        (`_write_batches`), waiting up to ``busy_timeout`` for other writers."""
        self._write_batches(batches, wait=True)

    def _write_group_on_loop(self, batches: Sequence[list[dict[str, Any]]]) -> bool:
        """`_write_group` on the event loop's thread (`GroupCommit`): never waits for another writer.

        False, with nothing written, when this sink's lock or another connection's
        write transaction holds the database, when the writer's connection is not
        open yet (opening it may wait), or when the group holds more than
        `_LOOP_GROUP` events or would fold the pending events (several
        milliseconds of writes to ``audit_events``' indexes): a writer thread
        writes the group then.
        """
        return self._write_batches(batches, wait=False)

    def _write_batches(self, batches: Sequence[list[dict[str, Any]]], *, wait: bool) -> bool:
        """Every batch in one ``BEGIN IMMEDIATE`` transaction on the sink's own sqlite3 connection.

        A small group (at most `_PENDING_GROUP` events: STRICT calls) goes to
        ``audit_pending``, one B-tree keyed by the time-ordered event id: its
        commit writes a page or two, where one into ``audit_events`` writes a
        page of each of that table's indexes, and every page of a commit is
        flushed. Once `_FOLD_AT` events wait there (as this sink counts them),
        the same transaction moves every pending event into ``audit_events``
        (`_FOLD`).
        A larger group (an ASYNC drain) goes into ``audit_events`` directly,
        after the pending events. The leader holds the write lock for the
        whole transaction, and other threads need the interpreter lock to reach
        the next step each time sqlite3 releases it; so the write is a few
        sqlite3 calls and no SQLAlchemy layer (pool checkout, events, result
        objects) between them.
        """
        rows = [row for batch in batches for row in batch]
        lock = self._write_lock
        assert lock is not None  # serialize_writes=True
        if not lock.acquire(blocking=wait):
            return False
        try:
            if not wait and not self._loop_may_write(len(rows)):
                return False
            try:
                writer = self._connection()
                try:
                    if not self._begin(writer, wait):
                        return False
                    locked = self._locked_heads(writer, {row["trace_id"] for row in rows})
                    chained, heads = chain_dicts(rows, lambda trace_id: locked.get(trace_id, _NEW_TRACE))
                    values = storage_values(chained)
                    added = self._pending_added
                    if len(values) > _PENDING_GROUP:
                        _fold(writer.execute)  # first: audit_events' constraints then see every event
                        writer.executemany(_INSERT, values)
                        added = 0
                    else:
                        if added is None:
                            added = writer.execute(_COUNT_PENDING).fetchone()[0]
                        writer.executemany(_INSERT_PENDING, values)
                        added += len(values)
                        if added >= _FOLD_AT:
                            _fold(writer.execute)
                            added = 0
                    moved = [(trace_id, *head) for trace_id, head in sorted(heads.items())]
                    writer.executemany(_WRITE_HEADS, moved)
                    writer.execute("COMMIT")
                except BaseException:
                    self._abandon(writer)
                    raise
                self._remember(heads)
                self._pending_added = added
            except (sqlite3.Error, OSError) as exc:
                raise AuditSinkError(f"{self._name}: cannot store events: {self._describe(exc)}") from None
        finally:
            lock.release()
        return True

    def _loop_may_write(self, events: int) -> bool:
        """(Under the write lock.) Whether a group of ``events`` is written on the event loop: at most
        `_LOOP_GROUP` events into ``audit_pending``, without a fold, on the writer's connection
        already open in this process."""
        added = self._pending_added
        return (
            self._writer is not None
            and self._writer_pid == os.getpid()
            and added is not None
            and events <= _LOOP_GROUP
            and added + events < _FOLD_AT
        )

    def _begin(self, writer: sqlite3.Connection, wait: bool) -> bool:
        """``BEGIN IMMEDIATE`` on the writer; without ``wait``, False at once where it would wait.

        Without ``wait`` (on the event loop) the writer also leaves the WAL's
        checkpoint (a few milliseconds of copying pages and a flush of the
        database file) to the next write with ``wait``: a writer thread's, at the
        latest the fold's (`_loop_may_write`).
        """
        if wait is not self._writer_waits:  # switched once per fold or so: a pragma is a statement
            writer.execute(f"PRAGMA wal_autocheckpoint = {_AUTOCHECKPOINT if wait else 0}")
            self._writer_waits = wait
        if wait:  # the writer's busy_timeout is 0: its waits are these short ones
            retry_locked(writer.execute, "BEGIN IMMEDIATE", self._busy_timeout, longest_wait=WRITER_WAIT)
            return True
        try:
            writer.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not is_locked(exc):
                raise
            return False
        return True

    def _locked_heads(self, writer: sqlite3.Connection, trace_ids: set[str]) -> dict[str, tuple[int, str]]:
        """The heads of ``trace_ids`` (under ``BEGIN IMMEDIATE``): from the writer's cache when still true.

        ``PRAGMA data_version`` changes when another connection (another
        process, another sink, this sink's pooled connections) has committed
        since: then the cache is dropped and the heads are read again.
        """
        cache = self._heads
        version = writer.execute("PRAGMA data_version").fetchone()[0]
        if version != self._heads_version:
            cache.clear()
            self._heads_version = version
        missing = sorted(trace_id for trace_id in trace_ids if trace_id not in cache)
        if missing:
            found = writer.execute(_READ_HEADS.format(", ".join(["?"] * len(missing))), missing)
            cache.update((trace_id, (sequence, digest)) for trace_id, sequence, digest in found)
        return cache

    def _connection(self) -> sqlite3.Connection:
        """The writer's connection (under the write lock), opened on first use and in a forked child."""
        writer = self._writer
        if writer is not None and self._writer_pid != os.getpid():  # a forked child: not its connection
            _INHERITED.append(writer)
            writer = None
        if writer is None:
            writer = sqlite3.connect(
                self._path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
            )
            try:
                _configure_connection(writer, self._busy_ms)
                writer.execute("PRAGMA busy_timeout = 0")  # `_begin` waits for other writers
            except BaseException:
                writer.close()
                raise
            self._writer, self._writer_pid = writer, os.getpid()
            self._writer_waits = True
            self._heads.clear()  # data_version counts per connection: a new one starts afresh
            self._heads_version = None
        return writer

    def _abandon(self, writer: sqlite3.Connection) -> None:
        """After a failed write: roll back, or drop a connection that cannot (the next write reopens)."""
        self._heads.clear()
        self._heads_version = None
        try:
            if writer.in_transaction:
                writer.execute("ROLLBACK")
            return
        except sqlite3.Error:
            pass
        self._writer = None
        with contextlib.suppress(sqlite3.Error):
            writer.close()

    def _insert_rows(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Into ``audit_events``, pending events first; sqlite3's own ``executemany`` (its loop runs in C)."""
        _fold(conn.exec_driver_sql)
        conn.exec_driver_sql(_INSERT, [tuple(row[name] for name in FIELDS) for row in rows])

    def _lock_heads(self, conn: Connection, trace_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """The heads of ``trace_ids`` (``BEGIN IMMEDIATE`` already holds the database's write lock)."""
        statement = _READ_HEADS.format(", ".join(["?"] * len(trace_ids)))
        rows = conn.exec_driver_sql(statement, tuple(trace_ids))
        return {row[0]: (row[1], row[2]) for row in rows}

    def _store_heads(
        self,
        conn: Connection,
        heads: Mapping[str, tuple[int, str]],
        *,
        existing: Mapping[str, tuple[int, str]],
    ) -> None:
        moved = [(trace_id, sequence, digest) for trace_id, (sequence, digest) in sorted(heads.items())]
        conn.exec_driver_sql(_WRITE_HEADS, moved)

    def _preflight(self) -> None:
        directory = self._path.parent
        if not directory.is_dir():
            raise AuditSinkError(
                f"{self._name}: directory {str(directory)!r} does not exist (create it first)"
            )
        if self._path.exists() and not self._path.is_file():
            raise AuditSinkError(f"{self._name}: {str(self._path)!r} exists and is not a file")


def _fold(execute: Callable[[str], Any]) -> None:
    """Inside a write transaction: move every pending event into ``audit_events``, if there is one."""
    if execute(_ANY_PENDING).fetchone() is not None:
        for statement in _FOLD:
            execute(statement)


def _configure_connection(connection: sqlite3.Connection, busy_ms: int) -> None:
    """Every connection of the sink: wait for other writers, WAL, and a flush at each commit."""
    cursor = connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
        enter_wal(cursor.execute, busy_ms / 1000)
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute(f"PRAGMA wal_autocheckpoint = {_AUTOCHECKPOINT}")
    finally:
        cursor.close()
