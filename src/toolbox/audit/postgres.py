"""`PostgresSink`: the shared schema on PostgreSQL, through SQLAlchemy Core and psycopg 3."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, final

from sqlalchemy import create_engine, func, inspect, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.schema import CreateSchema

from toolbox.audit.events import FIELDS, GENESIS_HASH
from toolbox.audit.sql import SqlSink, events_table, heads_table

__all__ = ["PostgresSink"]

#: Rows per multi-row INSERT: 26 parameters each, well below PostgreSQL's 65,535 per statement.
_ROWS_PER_INSERT = 1000
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
            pool_pre_ping=True,
            pool_size=pool_size,
            max_overflow=max_overflow,
            hide_parameters=True,
            connect_args={"connect_timeout": max(int(connect_timeout), 1)},
        )
        if schema is not None:
            engine = engine.execution_options(schema_translate_map={None: schema})
        where = f"{parsed.host or 'localhost'}:{parsed.port or 5432}/{parsed.database or ''}"
        if schema is not None:
            where += f" schema {schema}"
        secrets = [parsed.password] if isinstance(parsed.password, str) else []
        super().__init__(engine, name=f"PostgreSQL audit store {where}", secrets=secrets)

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

    def _insert_rows(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """One multi-row ``INSERT`` per `_ROWS_PER_INSERT` rows: one round trip, one plan."""
        preparer = conn.dialect.identifier_preparer
        table = preparer.quote(events_table.name)
        if self._schema is not None:
            table = f"{preparer.quote_schema(self._schema)}.{table}"
        columns = ", ".join(preparer.quote(name) for name in FIELDS)
        one_row = "(" + ", ".join(["%s"] * len(FIELDS)) + ")"
        for start in range(0, len(rows), _ROWS_PER_INSERT):
            chunk = rows[start : start + _ROWS_PER_INSERT]
            values = ", ".join([one_row] * len(chunk))
            parameters = tuple(row[name] for row in chunk for name in FIELDS)
            conn.exec_driver_sql(f"INSERT INTO {table} ({columns}) VALUES {values}", parameters)  # noqa: S608 - names quoted, values bound

    def _lock_heads(self, conn: Connection, trace_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        conn.execute(
            pg_insert(heads_table)
            .values([{"trace_id": t, "last_sequence": 0, "last_hash": GENESIS_HASH} for t in trace_ids])
            .on_conflict_do_nothing(index_elements=[heads_table.c.trace_id])
        )
        rows = conn.execute(
            select(heads_table)
            .where(heads_table.c.trace_id.in_(trace_ids))
            .order_by(heads_table.c.trace_id)
            .with_for_update()
        )
        return {row.trace_id: (row.last_sequence, row.last_hash) for row in rows}
