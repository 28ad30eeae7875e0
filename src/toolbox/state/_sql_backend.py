"""The SQL backend: governance state in SQLite (several processes on one host) or PostgreSQL.

SQLAlchemy Core, the tables of `toolbox.state._sql_schema` (default prefix
``toolbox_state_``), created, or migrated from an earlier schema, on first
use. Every check-and-count is one transaction that first locks what it reads:
SQLite's ``BEGIN IMMEDIATE`` (one writer at a time), on PostgreSQL one call of
the store's admission function, whose upsert locks each quota's row in key
order (no deadlock between racing processes); `toolbox.state._sql_limits`
sends them on the store's own autocommit connections
(`toolbox.state._sql_pool`), as do the kill-switch reads. A single-use grant
is one conditional ``UPDATE``.
Times are this host's clock (keep the fleet's clocks in sync, as for any TTL);
any database error is `StateUnavailableError`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, final

from sqlalchemy import (
    Connection,
    Table,
    and_,
    create_engine,
    delete,
    event,
    func,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from toolbox.foundations._sqlite_wal import enter_wal
from toolbox.pipeline._grants import PendingApproval
from toolbox.pipeline._state_ports import (
    ApprovalQueueFullError,
    Clock,
    KillEntry,
    Quota,
    Refusal,
    StateUnavailableError,
)
from toolbox.state._approval_rules import GRANT_TTL, RETAIN, check_listing, decided, effective
from toolbox.state._sql_limits import SqlLimits
from toolbox.state._sql_pool import Connections, postgres_connections, sqlite_connections
from toolbox.state._sql_schema import drop, migrate, tables

__all__ = ["SqlState"]

_PREFIX = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def _storable(*texts: str | None) -> bool:
    """Whether the texts can be in the store: PostgreSQL text never holds NUL, so an id or a
    tenant with one names nothing stored (a bad request, not an outage of the store)."""
    return not any(text is not None and "\x00" in text for text in texts)


@final
class SqlState:
    """Kill switches, shared limits and approvals in one SQL database.

    Args:
        url: ``sqlite:///path/state.db`` or ``postgresql://user@host/db`` (psycopg 3).
        prefix: the tables' name prefix: lowercase letters, digits, ``_``.
        grant_ttl: seconds an approved grant stays redeemable.
        retain: seconds a decided or used record outlives its expiry.
        timeout: seconds to wait for a connection, or for SQLite's write lock.
        clock: wall-clock seconds (``time.time`` by default); tests pass a
            `toolbox.testing.ManualClock` to expire requests, grants and windows
            without waiting.
    """

    __slots__ = (
        "_approvals",
        "_clock",
        "_connections",
        "_counters",
        "_engine",
        "_grant_ttl",
        "_kill",
        "_kill_sql",
        "_limits",
        "_log",
        "_postgres",
        "_ready",
        "_retain",
        "_schema",
    )

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "toolbox_state_",
        grant_ttl: float = GRANT_TTL,
        retain: float = RETAIN,
        timeout: float = 5.0,
        clock: Clock = time.time,
    ) -> None:
        if not _PREFIX.fullmatch(prefix):
            raise ValueError("the table prefix must be lowercase letters, digits and _, at most 40")
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise ValueError("the [state] url is not a database URL") from None
        backend = parsed.get_backend_name()
        if backend == "postgresql":
            if parsed.drivername == "postgresql":
                parsed = parsed.set(drivername="postgresql+psycopg")
            self._engine: Engine = create_engine(
                parsed,
                pool_pre_ping=True,
                hide_parameters=True,
                connect_args={"connect_timeout": max(1, int(timeout))},
            )
            self._postgres = True
            libpq = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
            self._connections: Connections[Any] = postgres_connections(libpq, timeout=timeout)
        elif backend == "sqlite":
            if parsed.database in (None, "", ":memory:"):
                raise ValueError("the sql state backend needs a SQLite file (memory is the memory backend)")
            self._engine = create_engine(
                parsed,
                hide_parameters=True,
                connect_args={"check_same_thread": False, "timeout": timeout},
            )
            self._postgres = False
            self._connections = sqlite_connections(str(parsed.database), timeout=timeout)
            busy_ms = int(timeout * 1000)

            @event.listens_for(self._engine, "connect")
            def _configure(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
                dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself
                cursor = dbapi_connection.cursor()
                try:
                    cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
                    enter_wal(cursor.execute, timeout)
                    cursor.execute("PRAGMA synchronous = NORMAL")
                finally:
                    cursor.close()

            @event.listens_for(self._engine, "begin")
            def _begin(conn: Connection) -> None:
                # Every transaction here writes: take the write lock first, so racing
                # processes queue instead of failing to upgrade a read lock.
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        else:
            raise ValueError("the sql state backend supports sqlite:// and postgresql:// URLs")
        self._schema = schema = tables(prefix)
        self._kill, self._counters, self._log, self._approvals = (
            schema.kill,
            schema.counters,
            schema.log,
            schema.approvals,
        )
        self._kill_sql = f'SELECT switch, reason, who, at FROM "{schema.kill.name}"'  # noqa: S608 - validated
        self._grant_ttl = grant_ttl
        self._retain = retain
        self._ready = False
        self._clock = clock
        self._limits = SqlLimits(schema, self._connections, postgres=self._postgres, clock=clock)

    # -- plumbing --------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        try:
            if not self._ready:
                self._create()
            with self._engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            # The exception text can hold the URL or parameters: only its type is passed on.
            raise StateUnavailableError(f"the SQL state store failed ({type(exc).__name__})") from None

    def _create(self) -> None:
        with self._engine.begin() as conn:
            if self._postgres:
                # Workers starting together must not race to create (or migrate) the same tables.
                conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:name))"), {"name": self._kill.name})
            migrate(conn, self._schema, postgres=self._postgres)
        self._ready = True

    def _ensure(self) -> None:
        """The tables exist and are this schema (once per store)."""
        if not self._ready:
            try:
                self._create()
            except SQLAlchemyError as exc:
                raise StateUnavailableError(f"the SQL state store failed ({type(exc).__name__})") from None

    def _insert(self, table: Table) -> Any:
        return (postgresql if self._postgres else sqlite).insert(table)

    def create(self) -> None:
        """Create the tables now (they are created on first use otherwise)."""
        with self._transaction():
            pass

    def drop(self) -> None:
        """Drop the tables (tests and teardown)."""
        self._connections.clear()
        with self._engine.begin() as conn:
            drop(conn, self._schema, postgres=self._postgres)
        self._ready = False

    def close(self) -> None:
        """Close the engine's connections and the store's own."""
        self._connections.close()
        self._engine.dispose()

    # -- kill switches ---------------------------------------------------------------

    @staticmethod
    def _switch(tool: str | None) -> str:
        return "*" if tool is None else "t:" + tool

    def engaged(self) -> Mapping[str | None, KillEntry]:
        """Every engaged switch: one query (one round trip) on the store's own connections."""
        self._ensure()
        with self._connections.lease() as conn:  # any failure of the driver: the store is unavailable
            rows = conn.execute(self._kill_sql).fetchall()
        entries: dict[str | None, KillEntry] = {}
        for switch, reason, who, at in rows:
            tool = None if switch == "*" else switch[2:]
            entries[tool] = KillEntry(tool, reason, who, at)
        return entries

    def engage(self, tool: str | None, *, reason: str, who: str) -> KillEntry:
        """Engage a switch (an engaged one gets the new reason, who and when)."""
        entry = KillEntry(tool, reason, who, self._clock())
        row = {"switch": self._switch(tool), "reason": reason, "who": who, "at": entry.at}
        insert = self._insert(self._kill).values(**row)
        upsert = insert.on_conflict_do_update(
            index_elements=["switch"], set_={"reason": reason, "who": who, "at": entry.at}
        )
        with self._transaction() as conn:
            conn.execute(upsert)
        return entry

    def release(self, tool: str | None, *, reason: str, who: str) -> KillEntry | None:
        """Release a switch; the entry that was engaged, if any."""
        switch = self._switch(tool)
        with self._transaction() as conn:
            row = conn.execute(select(self._kill).where(self._kill.c.switch == switch)).first()
            if row is None:
                return None
            conn.execute(delete(self._kill).where(self._kill.c.switch == switch))
        return KillEntry(tool, row.reason, row.who, row.at)

    # -- budgets and rate limits -----------------------------------------------------

    def admit(self, budgets: Sequence[Quota], rates: Sequence[Quota]) -> Refusal | None:
        """One transaction: hold every quota's row, refuse if one is spent, else count in all."""
        self._ensure()
        return self._limits.admit(budgets, rates)

    # -- approvals -------------------------------------------------------------------

    def _row(self, pending: PendingApproval) -> dict[str, Any]:
        return {
            "id": pending.id,
            "tenant": pending.request.tenant,
            "principal": pending.request.principal,
            "state": pending.state,
            "fingerprint": pending.request.fingerprint,
            "created_at": pending.created_at,
            "expires_at": pending.expires_at,
            "forget_at": pending.expires_at + self._retain,
            "data": json.dumps(pending.as_dict(), separators=(",", ":"), default=repr),
        }

    @staticmethod
    def _pending(row: Any) -> PendingApproval:
        record = PendingApproval.from_dict(json.loads(row.data))
        # The state and expiry columns are the truth (consume changes only them).
        if record.state != row.state or record.expires_at != row.expires_at:
            record = dataclasses.replace(record, state=row.state, expires_at=row.expires_at)
        return record

    def submit(self, pending: PendingApproval, *, max_pending: int = 0) -> str:
        """Store a new request, or name the identical one still pending; bounded per principal.

        One transaction holding the principal's queue: SQLite's write lock, or a
        PostgreSQL advisory lock on the tenant and principal, so racing
        processes never store a duplicate or one request past the bound.
        """
        approvals = self._approvals
        request = pending.request
        mine = and_(
            approvals.c.tenant == request.tenant,
            approvals.c.principal == request.principal,
            approvals.c.state == "pending",
        )
        with self._transaction() as conn:
            if self._postgres:
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(hashtext(:queue))"),
                    {"queue": json.dumps([approvals.name, request.tenant, request.principal])},
                )
            if conn.execute(select(approvals.c.id).where(approvals.c.id == pending.id)).first() is not None:
                return pending.id
            now = self._clock()
            waiting = and_(mine, approvals.c.expires_at > now)
            same = conn.execute(
                select(approvals.c.id)
                .where(and_(waiting, approvals.c.fingerprint == request.fingerprint))
                .limit(1)
            ).scalar_one_or_none()
            if same is not None:
                return str(same)
            if max_pending:
                count = conn.execute(select(func.count()).select_from(approvals).where(waiting)).scalar_one()
                if count >= max_pending:
                    raise ApprovalQueueFullError(
                        f"{count} approval requests of this principal are already waiting"
                    )
            conn.execute(
                self._insert(approvals)
                .values(**self._row(pending))
                .on_conflict_do_nothing(index_elements=["id"])
            )
            conn.execute(delete(approvals).where(approvals.c.forget_at < now))
        return pending.id

    def get(self, request_id: str) -> PendingApproval | None:
        """The request as of now, or None."""
        if not _storable(request_id):
            return None
        approvals = self._approvals
        with self._transaction() as conn:
            row = conn.execute(
                select(approvals).where(
                    and_(approvals.c.id == request_id, approvals.c.forget_at >= self._clock())
                )
            ).first()
        return None if row is None else effective(self._pending(row), self._clock())

    def list(
        self, *, tenant: str | None, state: str | None, limit: int, cursor: str | None = None
    ) -> list[PendingApproval]:
        """Up to ``limit`` requests, newest first, after ``cursor``."""
        check_listing(state, limit)
        if not _storable(tenant, cursor):
            return []
        approvals = self._approvals
        now = self._clock()
        query = select(approvals).where(approvals.c.forget_at >= now)
        if tenant is not None:
            query = query.where(approvals.c.tenant == tenant)
        if state in ("pending", "approved"):
            query = query.where(and_(approvals.c.state == state, approvals.c.expires_at > now))
        elif state == "expired":
            query = query.where(
                (approvals.c.state == "expired")
                | (approvals.c.state.in_(("pending", "approved")) & (approvals.c.expires_at <= now))
            )
        elif state is not None:
            query = query.where(approvals.c.state == state)
        with self._transaction() as conn:
            if cursor is not None:
                anchor = conn.execute(
                    select(approvals.c.created_at).where(approvals.c.id == cursor)
                ).scalar_one_or_none()
                if anchor is None:
                    return []
                query = query.where(
                    (approvals.c.created_at < anchor)
                    | ((approvals.c.created_at == anchor) & (approvals.c.id < cursor))
                )
            rows = conn.execute(
                query.order_by(approvals.c.created_at.desc(), approvals.c.id.desc()).limit(limit)
            ).all()
        return [effective(self._pending(row), now) for row in rows]

    def decide(self, request_id: str, *, approve: bool, decided_by: str, reason: str) -> PendingApproval:
        """Approve or deny a pending request, holding its row."""
        if not _storable(request_id):  # UNKNOWN_REQUEST, as for any id the store does not hold
            return decided(None, request_id, approve=approve, decided_by=decided_by, reason=reason, now=0.0)
        approvals = self._approvals
        query = select(approvals).where(approvals.c.id == request_id)
        if self._postgres:
            query = query.with_for_update()
        with self._transaction() as conn:
            row = conn.execute(query).first()
            record = decided(
                None if row is None else self._pending(row),
                request_id,
                approve=approve,
                decided_by=decided_by,
                reason=reason,
                now=self._clock(),
                grant_ttl=self._grant_ttl,
            )
            conn.execute(update(approvals).where(approvals.c.id == request_id).values(**self._row(record)))
        return record

    def consume(self, request_id: str, fingerprint: str) -> bool:
        """One conditional ``UPDATE``: True exactly once for an approved, unexpired, matching grant."""
        if not _storable(request_id, fingerprint):
            return False
        approvals = self._approvals
        with self._transaction() as conn:
            done = conn.execute(
                update(approvals)
                .where(
                    and_(
                        approvals.c.id == request_id,
                        approvals.c.state == "approved",
                        approvals.c.expires_at > self._clock(),
                        approvals.c.fingerprint == fingerprint,
                    )
                )
                .values(state="used")
            )
        return done.rowcount == 1
