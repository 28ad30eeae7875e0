"""SQLite's own guards on every connection toolbox-sql opens: the second line behind the checks.

- Reads open the file read-only (``mode=ro``) with ``PRAGMA query_only``.
- An authorizer (`sqlite3.Connection.set_authorizer`) allows, at prepare time,
  only reads of the profile's tables and columns, calls of the functions the
  checked statement names, and (on the writer) the writes the profile
  allows; anything else (``ATTACH``, ``PRAGMA``, a table or column outside
  the profile, another function) fails to prepare. It sees what SQLite will
  run, not what the parser understood.
- A progress handler interrupts a statement past its deadline (SQLite has
  no statement timeout of its own).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any, Final, final
from urllib.parse import quote

from toolbox_sql._config import DatabaseConfig

__all__ = ["GUARD", "SqliteGuard", "guard_installer", "sqlite_creator"]

_OK: Final = sqlite3.SQLITE_OK
_DENY: Final = sqlite3.SQLITE_DENY
_PROGRESS_STEPS: Final = 1000
_SCHEMAS: Final = frozenset({"main", None})


@final
class SqliteGuard:
    """One connection's authorizer and deadline; armed with a statement's calls before it runs."""

    __slots__ = ("_ddl", "_reads", "_writes", "calls", "deadline", "schema_change")

    def __init__(self, profile: DatabaseConfig, *, writer: bool) -> None:
        self._reads: dict[str, frozenset[str]] = {
            name: frozenset((*t.columns, *((t.tenant_column,) if t.tenant_column else ()), ""))
            for name, t in profile.tables.items()
        }
        self._writes: dict[tuple[int, str], frozenset[str]] = {}
        self._ddl: frozenset[str] = frozenset()
        if writer:
            for name, table in profile.tables.items():
                written = frozenset(
                    (*table.written, *((table.tenant_column,) if table.tenant_column else ()))
                )
                for kind, action in (("insert", sqlite3.SQLITE_INSERT), ("update", sqlite3.SQLITE_UPDATE)):
                    if kind in table.write:
                        self._writes[(action, name)] = written
                if "delete" in table.write:
                    self._writes[(sqlite3.SQLITE_DELETE, name)] = frozenset({""})
            if profile.writes is not None and profile.writes.ddl:
                self._ddl = frozenset(name for name, t in profile.tables.items() if t.write)
        #: Function names the statement about to run may call.
        self.calls: frozenset[str] = frozenset()
        #: ``time.monotonic()`` past which the running statement is interrupted; None: no statement.
        self.deadline: float | None = None
        #: The statement about to run is DDL the profile allows (``ddl = true``, writer only).
        self.schema_change = False

    def authorize(
        self, action: int, first: str | None, second: str | None, schema: str | None, _: Any
    ) -> int:
        """The authorizer callback (see the module docstring)."""
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_TRANSACTION):
            return _OK
        if self.schema_change and self._ddl:
            # DDL the checks allowed: SQLite edits its schema table and calls its own helpers.
            return _OK if self._ddl_step(action, first, second, schema) else _DENY
        if schema not in _SCHEMAS:
            return _DENY
        if action == sqlite3.SQLITE_READ:
            columns = self._reads.get(first or "")
            return _OK if columns is not None and (second or "") in columns else _DENY
        if action == sqlite3.SQLITE_FUNCTION:
            return _OK if (second or "").lower() in self.calls else _DENY
        if action in (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE):
            written = self._writes.get((action, first or ""))
            if written is None:
                return _DENY
            return _OK if action != sqlite3.SQLITE_UPDATE or (second or "") in written else _DENY
        return _DENY

    def _ddl_step(self, action: int, first: str | None, second: str | None, schema: str | None) -> bool:
        if action in _DDL_ACTIONS:
            # ALTER TABLE names (schema, table); the others (table or index, table).
            return (
                second if action == sqlite3.SQLITE_ALTER_TABLE else first
            ) in self._ddl or second in self._ddl
        if action == sqlite3.SQLITE_FUNCTION:
            return True
        touched = first or ""
        return touched in _SCHEMA_TABLES or touched in self._ddl or action == sqlite3.SQLITE_REINDEX

    def progress(self) -> int:
        """The progress handler: non-zero interrupts the statement."""
        deadline = self.deadline
        return 1 if deadline is not None and time.monotonic() > deadline else 0


_DDL_ACTIONS: Final = frozenset(
    {sqlite3.SQLITE_CREATE_TABLE, sqlite3.SQLITE_CREATE_INDEX, sqlite3.SQLITE_DROP_TABLE}
    | {sqlite3.SQLITE_ALTER_TABLE}
)
_SCHEMA_TABLES: Final = frozenset({"sqlite_master", "sqlite_temp_master"})


#: Where a connection's guard is kept in its pool record's ``info``.
GUARD: Final = "toolbox_sql_guard"


def sqlite_creator(path: str, profile: DatabaseConfig, *, writer: bool) -> Callable[[], sqlite3.Connection]:
    """Opens sqlite3 connections to ``path`` for an engine's pool: read-only unless ``writer``."""

    def create() -> sqlite3.Connection:
        if writer:
            connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        else:
            uri = f"file:{quote(path)}?mode=ro"
            connection = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            connection.execute("PRAGMA query_only = ON")
        connection.execute(f"PRAGMA busy_timeout = {int(profile.statement_timeout * 1000)}")
        connection.execute("PRAGMA trusted_schema = OFF")
        return connection

    return create


def guard_installer(profile: DatabaseConfig, *, writer: bool) -> Callable[[Any, Any], None]:
    """The pool's ``connect`` listener: installs a `SqliteGuard` (after SQLAlchemy's own first queries)."""

    def install(connection: sqlite3.Connection, record: Any) -> None:
        guard = SqliteGuard(profile, writer=writer)
        connection.set_authorizer(guard.authorize)
        connection.set_progress_handler(guard.progress, _PROGRESS_STEPS)
        record.info[GUARD] = guard

    return install
