"""`PostgresSink`: the shared schema on PostgreSQL, through SQLAlchemy Core and psycopg 3."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any, final

from sqlalchemy import create_engine, event, func, inspect, select
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError
from sqlalchemy.schema import CreateSchema

from toolbox.audit.events import FIELDS, GENESIS_HASH
from toolbox.audit.sink import chain_dicts
from toolbox.audit.sql import SqlSink, _to_db, events_table, heads_table

__all__ = ["PostgresSink"]

#: Batches of more events go in with ``COPY``; smaller ones in the multi-row INSERT (fewer round trips).
_COPY_ABOVE = 64
#: A pooled connection idle this long (seconds) is pinged before use: a restarted server is not an error.
_PING_AFTER_IDLE = 1.0
_IDLE_SINCE = "toolbox_idle_since"
_INSTALL = 'PostgresSink needs psycopg 3. Please install it: pip install "toolbox-registry[postgres]"'


@final
class PostgresSink(SqlSink):
    """Stores events in PostgreSQL; any number of processes may write the same traces.

    ``url`` is a SQLAlchemy URL (``postgresql://`` or ``postgresql+psycopg://``).
    With ``schema``, the tables live in that schema, created if absent. The
    tables are created on first use, under an advisory lock so concurrent first
    uses do not collide. ``append`` locks each written trace's head row
    (``INSERT .. ON CONFLICT DO NOTHING`` then ``SELECT .. FOR UPDATE``, in
    trace order), so concurrent writers of a trace queue up and its sequence
    stays gap-free. Connecting gives up after ``connect_timeout`` seconds.

    Concurrent appends of one sink share transactions (group commit); up to
    ``concurrent_writes`` transactions (default: ``pool_size``) run at once.
    """

    __slots__ = ("_schema",)

    def __init__(
        self,
        url: str | URL,
        *,
        schema: str | None = None,
        connect_timeout: int = 5,
        pool_size: int = 5,
        max_overflow: int = 10,
        concurrent_writes: int | None = None,
    ) -> None:
        try:
            import psycopg  # noqa: F401 - only checking that the driver is installed
        except ImportError:
            raise ImportError(_INSTALL) from None
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise ValueError("PostgresSink: the database URL cannot be parsed") from None
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
        if parsed.drivername != "postgresql+psycopg":
            raise ValueError(
                f"PostgresSink needs a postgresql:// or postgresql+psycopg:// URL, not {parsed.drivername}://"
            )
        if schema is not None and not schema:
            raise ValueError("PostgresSink: schema must be a non-empty name or None")
        self._schema = schema
        engine = create_engine(
            parsed,
            pool_size=pool_size,
            max_overflow=max_overflow,
            hide_parameters=True,
            connect_args={"connect_timeout": max(int(connect_timeout), 1)},
        )
        _ping_when_idle(engine)
        if schema is not None:
            engine = engine.execution_options(schema_translate_map={None: schema})
        where = f"{parsed.host or 'localhost'}:{parsed.port or 5432}/{parsed.database or ''}"
        if schema is not None:
            where += f" schema {schema}"
        secrets = [parsed.password] if isinstance(parsed.password, str) else []
        writers = pool_size if concurrent_writes is None else concurrent_writes
        if not isinstance(writers, int) or writers < 1:
            raise ValueError("PostgresSink: concurrent_writes must be a positive integer")
        super().__init__(
            engine, name=f"PostgreSQL audit store {where}", secrets=secrets, concurrent_writes=writers
        )

    @property
    def schema(self) -> str | None:
        """The schema holding the tables (None: the connection's default)."""
        return self._schema

    def _prepare(self, conn: Connection) -> None:
        key = f"toolbox.audit.schema:{self._schema or ''}"
        lock_id = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big", signed=True)
        conn.execute(select(func.pg_advisory_xact_lock(lock_id)))
        # Only when absent: CREATE SCHEMA needs the CREATE privilege even with IF NOT EXISTS.
        if self._schema is not None and not inspect(conn).has_schema(self._schema):
            conn.execute(CreateSchema(self._schema, if_not_exists=True))

    def _write_rows(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Two statements for a small batch: lock and read the heads, then insert and move them.

        Each round trip waits for the server, so the write is one ``INSERT .. ON
        CONFLICT DO UPDATE .. RETURNING`` (creates missing heads, locks every head in
        trace order, returns them), then one multi-row ``INSERT`` of the events whose
        ``WITH`` clause also moves the heads. A batch of more than `_COPY_ABOVE`
        events (an ASYNC drain) is sent with ``COPY`` instead, then the heads move.
        """
        trace_ids = sorted({row["trace_id"] for row in rows})
        locked = self._lock_heads(conn, trace_ids)
        chained, heads = chain_dicts(rows, locked.__getitem__)
        stored = [tuple(row[name] for name in FIELDS) for row in map(_to_db, chained)]
        events, head_table = self._qualified(conn, events_table.name), self._qualified(conn, heads_table.name)
        columns = ", ".join(conn.dialect.identifier_preparer.quote(name) for name in FIELDS)
        moved = sorted(heads.items())
        move_heads = (
            f"UPDATE {head_table} AS h SET last_sequence = v.last_sequence, last_hash = v.last_hash "  # noqa: S608 - quoted names, bound values
            f"FROM (VALUES {', '.join(['(%s, %s::integer, %s)'] * len(moved))}) "
            "AS v(trace_id, last_sequence, last_hash) WHERE h.trace_id = v.trace_id"
        )
        head_values = tuple(
            value for trace_id, (sequence, digest) in moved for value in (trace_id, sequence, digest)
        )
        if len(stored) > _COPY_ABOVE:
            driver = conn.connection.driver_connection
            assert driver is not None
            with driver.cursor() as cursor, cursor.copy(f"COPY {events} ({columns}) FROM STDIN") as copy:
                for values in stored:
                    copy.write_row(values)
            conn.exec_driver_sql(move_heads, head_values)
            return
        one_row = "(" + ", ".join(["%s"] * len(FIELDS)) + ")"
        insert_events = f"INSERT INTO {events} ({columns}) VALUES {', '.join([one_row] * len(stored))}"  # noqa: S608 - quoted names, bound values
        parameters = (*(value for values in stored for value in values), *head_values)
        conn.exec_driver_sql(f"WITH stored AS ({insert_events}) {move_heads}", parameters)

    def _lock_heads(self, conn: Connection, trace_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """Create the missing heads, lock them all (in trace order) and return them: one statement."""
        table = self._qualified(conn, heads_table.name)
        values = ", ".join(["(%s, 0, %s)"] * len(trace_ids))
        statement = (
            f"INSERT INTO {table} (trace_id, last_sequence, last_hash) VALUES {values} "  # noqa: S608 - quoted names, bound values
            "ON CONFLICT (trace_id) DO UPDATE SET trace_id = EXCLUDED.trace_id "
            "RETURNING trace_id, last_sequence, last_hash"
        )
        parameters = tuple(value for trace_id in trace_ids for value in (trace_id, GENESIS_HASH))
        rows = conn.exec_driver_sql(statement, parameters)
        return {row[0]: (row[1], row[2]) for row in rows}

    def _qualified(self, conn: Connection, name: str) -> str:
        preparer = conn.dialect.identifier_preparer
        table = preparer.quote(name)
        return table if self._schema is None else f"{preparer.quote_schema(self._schema)}.{table}"


def _ping_when_idle(engine: Engine) -> None:
    """``pool_pre_ping``, but only for connections idle `_PING_AFTER_IDLE` seconds or more.

    A ping is a round trip; a busy writer reuses its connections within
    milliseconds, so pinging each checkout would cost every commit one. A
    connection that fails its ping is replaced (SQLAlchemy retries the checkout).
    """

    @event.listens_for(engine, "checkin")
    def _checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is None or time.monotonic() - since < _PING_AFTER_IDLE:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:  # noqa: BLE001 - any failure: replace the connection
            raise DisconnectionError(type(exc).__name__) from None
