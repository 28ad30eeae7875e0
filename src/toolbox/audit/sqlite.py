"""`SqliteSink`: the embedded default, one SQLite file in WAL mode."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, final

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection

from toolbox.audit.events import FIELDS
from toolbox.audit.sink import AuditSinkError
from toolbox.audit.sql import SqlSink, events_table, heads_table

__all__ = ["SqliteSink"]

_BEGIN_OPTION = "toolbox_sqlite_begin"
_INSERT = (
    f"INSERT INTO {events_table.name} ({', '.join(FIELDS)}) "  # noqa: S608 - fixed names, bound values
    f"VALUES ({', '.join(['?'] * len(FIELDS))})"
)
_READ_HEADS = (
    f"SELECT trace_id, last_sequence, last_hash FROM {heads_table.name} "  # noqa: S608 - fixed names
    "WHERE trace_id IN ({})"
)
_WRITE_HEADS = (
    f"INSERT OR REPLACE INTO {heads_table.name} (trace_id, last_sequence, last_hash) "  # noqa: S608 - fixed names
    "VALUES (?, ?, ?)"
)


@final
class SqliteSink(SqlSink):
    """Stores events in the SQLite file ``path``, created (with its schema) on first use.

    The file's directory must exist. The database runs in WAL mode (readers do
    not block the writer) with ``synchronous=FULL`` (a stored batch survives a
    power loss). Every write is one ``BEGIN IMMEDIATE`` transaction: writers are
    serialized across threads and processes, waiting up to ``busy_timeout``
    seconds for one another, so each trace's sequence stays gap-free.
    """

    __slots__ = ("_path",)

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        if str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise ValueError("SqliteSink needs a file path (use MemorySink for an in-memory trail)")
        self._path = Path(path)
        engine = create_engine(
            URL.create("sqlite", database=str(self._path)),
            connect_args={"check_same_thread": False, "timeout": busy_timeout},
            hide_parameters=True,
        )
        busy_ms = max(int(busy_timeout * 1000), 0)

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
            # SQLAlchemy emits BEGIN itself (below), so pysqlite must not.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute("PRAGMA synchronous = FULL")
            finally:
                cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            mode = conn.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
            conn.exec_driver_sql(f"BEGIN {mode}")

        super().__init__(
            engine,
            name=f"SQLite audit store {str(self._path)!r}",
            write_options={_BEGIN_OPTION: "IMMEDIATE"},
            serialize_writes=True,
        )

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    # The write path in plain SQL: under the write lock, every millisecond of statement building
    # is a millisecond no other writer can commit.

    def _insert_rows(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """sqlite3's own ``executemany`` (its loop runs in C): the rows are already in storage form."""
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
