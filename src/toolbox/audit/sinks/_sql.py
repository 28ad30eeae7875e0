"""`SqlSink`: the engine shared by the SQLite and PostgreSQL sinks (schema: `_sql_schema`).

Storage is created on first use. A store written by a newer toolbox (a higher
schema version) is refused; an older one is migrated with `MIGRATIONS`.
Concurrent appends share transactions (group commit, `toolbox.audit._group`).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

try:
    from sqlalchemy import (
        ColumnElement,
        CompoundSelect,
        Select,
        Table,
        bindparam,
        func,
        insert,
        inspect,
        select,
        union_all,
        update,
    )
    from sqlalchemy.engine import Connection, Engine
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        'The SQL audit sinks need SQLAlchemy. Please install it: pip install "toolbox-registry[sql]"'
    ) from exc

from pydantic import ValidationError

from toolbox.audit._batch import rows_of
from toolbox.audit._events import FIELDS, GENESIS_HASH, AuditEvent, AuditRecord
from toolbox.audit._group import GroupCommit
from toolbox.audit._sink import AuditQuery, AuditSinkError, chain_dicts
from toolbox.audit.sinks._sql_rows import iso, record_of, to_db
from toolbox.audit.sinks._sql_schema import (
    MIGRATIONS,
    POSTGRES_SCHEMA_VERSION,
    SCHEMA_VERSION,
    add_missing_columns,
    create_tables,
    events_table,
    heads_table,
    metadata,
    pending_table,
    version_table,
)
from toolbox.pipeline._offload import off_loop

__all__ = [
    "MIGRATIONS",
    "POSTGRES_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "SqlSink",
    "events_table",
    "heads_table",
    "metadata",
    "pending_table",
    "version_table",
]


# SQLSTATE classes whose server messages carry no statement data (connection,
# authentication, catalog, resources, operator intervention, privileges).
_SAFE_SQLSTATE_CLASSES = ("08", "28", "3D", "3F", "53", "57", "42501")
#: Event ids looked up per statement by `SqlSink.append_missing` (well below any bind limit).
_ID_CHUNK = 500
#: The most trace heads a sink remembers from its own commits (see `SqlSink._remember`).
_HEADS_CACHED = 4096


class SqlSink:
    """An `AuditSink` over a SQLAlchemy engine; `SqliteSink` and `PostgresSink` configure it.

    Thread-safe. The schema is created (or checked and migrated) on first use,
    not in the constructor, so building a sink never touches the database.
    Errors are raised as `AuditSinkError` naming the store and the error type,
    never the credentials, the SQL parameters or any event content.
    """

    __slots__ = (
        "_closed",
        "_engine",
        "_group",
        "_heads",
        "_name",
        "_ready",
        "_ready_lock",
        "_secrets",
        "_write_lock",
        "_write_options",
    )

    #: The tables that hold stored events, read as one (SQLite adds its ``audit_pending``).
    _event_tables: tuple[Table, ...] = (events_table,)

    def __init__(
        self,
        engine: Engine,
        *,
        name: str,
        write_options: Mapping[str, Any] | None = None,
        serialize_writes: bool = False,
        concurrent_writes: int = 1,
        write_on_loop: Callable[[Sequence[list[dict[str, Any]]]], bool] | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        self._engine = engine
        self._name = name
        self._write_options = dict(write_options or {})
        self._write_lock = threading.Lock() if serialize_writes else None
        self._secrets = tuple(s for s in secrets if s)
        self._ready = False
        self._ready_lock = threading.Lock()
        self._closed = False
        # The heads this sink last committed, per trace: what a backend may use instead of reading
        # them again (SQLite while nobody else committed; PostgreSQL as a guess the server checks).
        self._heads: dict[str, tuple[int, str]] = {}
        self._group: GroupCommit[list[dict[str, Any]]] = GroupCommit(
            self._write_group, max_writers=concurrent_writes, write_on_loop=write_on_loop
        )

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (its URL hides the password when printed)."""
        return self._engine

    # -- the AuditSink protocol -------------------------------------------------

    def append(self, events: Sequence[AuditEvent]) -> None:
        """Store ``events`` in one transaction, chained after each trace's locked head.

        Concurrent appends share a transaction (`toolbox.audit._group`): the call
        returns once the transaction holding its events is committed, and raises
        if that transaction failed (then none of its events is stored).
        """
        if not events:
            return
        rows = rows_of(events)  # in the caller: its own bad event fails only it
        self._ensure_ready()
        self._group.submit(rows)

    def append_batches(self, batches: Sequence[Sequence[AuditEvent]]) -> None:
        """`append` of every event of ``batches``, in order, in one transaction (the ASYNC writer's drain)."""
        if type(self).append is not SqlSink.append:  # a subclass's own append sees every write, as before
            self.append([event for events in batches for event in events])
            return
        rows = [row for events in batches for row in rows_of(events)]
        if rows:
            self._ensure_ready()
            self._group.submit(rows)

    @property
    def aappend(self) -> Callable[[Sequence[AuditEvent]], Awaitable[None]] | None:
        """`append` for a caller on an event loop, awaited: returns once the transaction holding
        ``events`` is committed, without blocking the loop (`GroupCommit.submit_async`).

        None for a subclass with its own ``append``: that sees every write, on a thread.
        """
        return self._aappend if type(self).append is SqlSink.append else None

    async def _aappend(self, events: Sequence[AuditEvent]) -> None:
        if not events:
            return
        rows = rows_of(events)
        if not self._ready:  # the first write makes or migrates the schema: off the loop
            await off_loop(self._ensure_ready)
        self._ensure_ready()
        await self._group.submit_async(rows)

    @property
    def append_rows(self) -> Callable[[list[dict[str, Any]]], None] | None:
        """Stores events already in storage form, as `append_batches` would (the ASYNC writer's drain).

        None for a subclass with its own ``append``: that sees every write, as events.
        """
        return self._append_rows if type(self).append is SqlSink.append else None

    def _append_rows(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self._ensure_ready()
            self._group.submit(rows)

    def append_missing(self, events: Sequence[AuditEvent]) -> int:
        """Store the events of ``events`` whose ``event_id`` is not stored yet; returns how many.

        One transaction, in order, chained like `append`: replaying the same events
        twice stores each once. Used by ``toolbox audit replay``.
        """
        if not events:
            return 0
        rows = [event.as_dict() for event in events]
        self._ensure_ready()
        with self._guard("store events"), self._serialized(), self._write_transaction() as conn:
            # Heads first: a concurrent replay of the same traces waits here, then sees what it stored.
            self._lock_heads(conn, sorted({row["trace_id"] for row in rows}))
            wanted = [row["event_id"] for row in rows]
            stored: set[str] = set()
            for start in range(0, len(wanted), _ID_CHUNK):
                chunk = wanted[start : start + _ID_CHUNK]
                for table in self._event_tables:
                    found = conn.execute(select(table.c.event_id).where(table.c.event_id.in_(chunk)))
                    stored.update(found.scalars())
            fresh, seen = [], set(stored)
            for row in rows:
                if row["event_id"] not in seen:  # a duplicate within the file counts once too
                    seen.add(row["event_id"])
                    fresh.append(row)
            if fresh:
                self._write_rows(conn, fresh)
        return len(fresh)

    def trace_heads(self, trace_id: str | None = None) -> dict[str, tuple[int, str]]:
        """The stored head (last sequence, last hash) of ``trace_id``, or of every trace."""
        self._ensure_ready()
        statement = select(heads_table)
        if trace_id is not None:
            statement = statement.where(heads_table.c.trace_id == trace_id)
        with self._guard("read trace heads"), self._engine.connect() as conn:
            rows = conn.execute(statement)
            return {row.trace_id: (row.last_sequence, row.last_hash) for row in rows}

    def _write_group(self, batches: Sequence[list[dict[str, Any]]]) -> None:
        """The group commit's write: every batch in one transaction, in the order they came."""
        rows = [row for batch in batches for row in batch]
        with self._guard("store events"), self._serialized(), self._write_transaction() as conn:
            self._write_rows(conn, rows)

    def _write_rows(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Chain ``rows`` after their traces' locked heads, insert them, move the heads."""
        trace_ids = sorted({row["trace_id"] for row in rows})
        locked = self._lock_heads(conn, trace_ids)
        chained, heads = chain_dicts(rows, lambda trace_id: locked.get(trace_id, (0, GENESIS_HASH)))
        self._insert_rows(conn, [to_db(row) for row in chained])
        self._store_heads(conn, heads, existing=locked)

    def read_trace(self, trace_id: str) -> list[AuditRecord]:
        """Every event of ``trace_id`` in sequence order (as stored: not re-verified)."""
        statement = self._select_events(lambda table: [table.c.trace_id == trace_id])
        return self._read(statement.order_by(statement.selected_columns.sequence))

    def query(self, query: AuditQuery) -> list[AuditRecord]:
        """Events matching ``query``, oldest first (by timestamp, then sequence), at most ``limit``.

        ``since`` is inclusive and ``until`` exclusive; naive datetimes are taken as UTC.
        """

        def matching(table: Table) -> list[ColumnElement[bool]]:
            conditions = []
            for field in ("tenant", "tool", "principal", "status", "parent_run_id", "operation"):
                wanted = getattr(query, field)
                if wanted is not None:
                    conditions.append(table.c[field] == wanted)
            if query.since is not None:
                conditions.append(table.c.timestamp >= iso(query.since))
            if query.until is not None:
                conditions.append(table.c.timestamp < iso(query.until))
            return conditions

        statement = self._select_events(matching)
        columns = statement.selected_columns
        statement = statement.order_by(columns.timestamp, columns.sequence, columns.event_id)
        return self._read(statement.limit(max(query.limit, 0)))

    def _select_events(
        self, conditions: Callable[[Table], list[ColumnElement[bool]]]
    ) -> Select[Any] | CompoundSelect[Any]:
        """Every field of the stored events meeting ``conditions``, from each table that holds events."""
        arms = [
            select(*(table.c[name] for name in FIELDS)).where(*conditions(table))
            for table in self._event_tables
        ]
        return arms[0] if len(arms) == 1 else union_all(*arms)

    def close(self) -> None:
        """Close every pooled connection; the sink cannot be used afterwards."""
        self._closed = True
        self._group.close()
        self._engine.dispose()

    @contextmanager
    def transaction(self, action: str) -> Iterator[Connection]:
        """A write transaction on the store (SQLite: ``BEGIN IMMEDIATE``, queued behind this sink's
        writers), committed on success; errors as `AuditSinkError` naming ``action``."""
        self._ensure_ready()
        with self._guard(action), self._serialized(), self._write_transaction() as conn:
            yield conn

    @contextmanager
    def reading(self, action: str) -> Iterator[Connection]:
        """A connection for reads; errors as `AuditSinkError` naming ``action``."""
        self._ensure_ready()
        with self._guard(action), self._engine.connect() as conn:
            yield conn

    # -- schema ---------------------------------------------------------------

    def schema_version(self) -> int:
        """The store's schema version, creating or migrating the schema first if needed."""
        self._ensure_ready()
        with self._guard("read the schema version"), self._engine.connect() as conn:
            return int(conn.execute(select(func.max(version_table.c.version))).scalar_one())

    def _ensure_ready(self) -> None:
        if self._closed:
            raise AuditSinkError(f"{self._name}: the sink is closed")
        if not self._ready:
            self._become_ready()

    def _become_ready(self) -> None:
        with self._ready_lock:
            if self._ready:
                return
            self._preflight()
            with self._guard("prepare the schema"), self._serialized(), self._write_transaction() as conn:
                self._prepare(conn)
                self._create_or_migrate(conn)
            self._ready = True

    def _create_or_migrate(self, conn: Connection) -> None:
        current = SCHEMA_VERSION if conn.dialect.name == "sqlite" else POSTGRES_SCHEMA_VERSION
        schema = conn.schema_for_object(version_table)
        if not inspect(conn).has_table(version_table.name, schema=schema):
            create_tables(conn)
            self._record_version(conn, current)
            return
        stored = conn.execute(select(func.max(version_table.c.version))).scalar()
        if stored is None:  # an empty version table: tables made by hand or an interrupted tool
            create_tables(conn)
            self._record_version(conn, current)
            return
        add_missing_columns(conn)
        if stored > current:
            raise AuditSinkError(
                f"{self._name}: the audit schema is version {stored}, newer than this toolbox "
                f"supports ({current}); upgrade toolbox to use this store"
            )
        while stored < current:
            migrate = MIGRATIONS.get(stored)
            if migrate is None:
                raise AuditSinkError(
                    f"{self._name}: no migration from audit schema version {stored}; upgrade toolbox"
                )
            migrate(conn)
            stored += 1
            self._record_version(conn, stored)

    @staticmethod
    def _record_version(conn: Connection, version: int) -> None:
        applied_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        conn.execute(insert(version_table).values(version=version, applied_at=applied_at))

    # -- hooks for the backends -------------------------------------------------

    def _preflight(self) -> None:
        """Checks before the first connection (SQLite: the file's directory)."""

    def _prepare(self, conn: Connection) -> None:
        """Inside the schema transaction, before tables are checked (PostgreSQL: lock, namespace)."""

    def _lock_heads(self, conn: Connection, trace_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """The current heads of ``trace_ids``, locked until the transaction ends.

        The default only reads them: it relies on the transaction holding the
        database's write lock already (SQLite's ``BEGIN IMMEDIATE``).
        """
        rows = conn.execute(
            select(heads_table).where(heads_table.c.trace_id.in_(trace_ids)).order_by(heads_table.c.trace_id)
        )
        return {row.trace_id: (row.last_sequence, row.last_hash) for row in rows}

    def _insert_rows(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Insert chained rows (PostgreSQL: multi-row statements)."""
        conn.execute(insert(events_table), rows)

    def _store_heads(
        self,
        conn: Connection,
        heads: Mapping[str, tuple[int, str]],
        *,
        existing: Mapping[str, tuple[int, str]],
    ) -> None:
        updates = [
            {"b_trace": trace_id, "b_sequence": sequence, "b_hash": digest}
            for trace_id, (sequence, digest) in sorted(heads.items())
            if trace_id in existing
        ]
        inserts = [
            {"trace_id": trace_id, "last_sequence": sequence, "last_hash": digest}
            for trace_id, (sequence, digest) in sorted(heads.items())
            if trace_id not in existing
        ]
        if updates:
            conn.execute(
                update(heads_table)
                .where(heads_table.c.trace_id == bindparam("b_trace"))
                .values(last_sequence=bindparam("b_sequence"), last_hash=bindparam("b_hash")),
                updates,
            )
        if inserts:
            conn.execute(insert(heads_table), inserts)

    def _remember(self, heads: Mapping[str, tuple[int, str]]) -> None:
        """After a commit: the heads it moved join what the sink remembers (bounded: past the
        limit it starts afresh)."""
        cache = self._heads
        if len(cache) + len(heads) > _HEADS_CACHED:
            cache.clear()
        cache.update(heads)

    # -- helpers ----------------------------------------------------------------

    def _read(self, statement: Any) -> list[AuditRecord]:
        self._ensure_ready()
        with self._guard("read events"), self._engine.connect() as conn:
            rows = conn.execute(statement).mappings().all()
        records = []
        for row in rows:
            try:
                records.append(record_of(row))
            except (ValueError, ValidationError):
                raise AuditSinkError(
                    f"{self._name}: a stored event (sequence {row['sequence']}) is malformed"
                ) from None
        return records

    @contextmanager
    def _write_transaction(self) -> Iterator[Connection]:
        """A connection in a write transaction (SQLite: ``BEGIN IMMEDIATE``), committed on success."""
        with self._engine.connect() as plain:
            conn = plain.execution_options(**self._write_options)
            with conn.begin():
                yield conn

    @contextmanager
    def _serialized(self) -> Iterator[None]:
        if self._write_lock is None:
            yield
            return
        with self._write_lock:
            yield

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn database and driver errors into `AuditSinkError` without leaking secrets or content."""
        driver_error: type[BaseException] = _driver_error(self._engine)
        try:
            yield
        except AuditSinkError:
            raise
        except (SQLAlchemyError, driver_error, OSError) as exc:
            raise AuditSinkError(f"{self._name}: cannot {action}: {self._describe(exc)}") from None

    def _describe(self, exc: BaseException) -> str:
        original = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        kind = type(original).__name__
        if isinstance(original, OSError):
            return f"{kind}: {original.strerror}"
        errorname = getattr(original, "sqlite_errorname", None)
        if errorname is not None:  # sqlite3: SQLite's messages never include bound values
            return self._scrub(f"{kind} ({errorname}): {original}")
        if hasattr(original, "sqlstate"):  # psycopg
            sqlstate = original.sqlstate
            if sqlstate is None or sqlstate.startswith(_SAFE_SQLSTATE_CLASSES):
                first_line = str(original).strip().splitlines()[0] if str(original).strip() else ""
                code = f" (SQLSTATE {sqlstate})" if sqlstate else ""
                return self._scrub(f"{kind}{code}: {first_line}")
            return f"{kind} (SQLSTATE {sqlstate})"
        return kind

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def _driver_error(engine: Engine) -> type[BaseException]:
    dbapi = engine.dialect.dbapi
    error = getattr(dbapi, "Error", None)
    return error if isinstance(error, type) and issubclass(error, BaseException) else SQLAlchemyError
