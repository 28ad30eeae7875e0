"""Stores for the SQL audit sink tests: a SQLite file or a throwaway PostgreSQL schema.

PostgreSQL is required, not optional: set TOOLBOX_TEST_POSTGRES_URL to point
the tests at a server (default: trust auth on 127.0.0.1:5432, database test).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from toolbox.audit import AuditEvent, EventType, PostgresSink, SqliteSink, verify_chain, verify_heads
from toolbox.audit.sinks._sql import SqlSink

POSTGRES_URL = os.environ.get(
    "TOOLBOX_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def event(trace_id: str = "trace-1", **fields: Any) -> AuditEvent:
    """An invocation event with sensible defaults."""
    fields.setdefault("name", "calc.add")
    fields.setdefault("tool", "calc")
    fields.setdefault("operation", "add")
    return AuditEvent(EventType.INVOCATION_REQUEST, trace_id=trace_id, **fields)


def assert_intact(sink: SqlSink, trace_id: str, count: int) -> None:
    """``trace_id`` holds sequences 1..count, its chain verifies and agrees with its head."""
    records = sink.read_trace(trace_id)
    assert [r.sequence for r in records] == list(range(1, count + 1))
    assert verify_chain(records) == []
    assert verify_heads(records, sink.trace_heads(trace_id), trace_id=trace_id) == []


def open_sink(kind: str, location: str, schema: str | None) -> SqlSink:
    """A new sink on an existing store (also used by worker processes)."""
    if kind == "sqlite":
        return SqliteSink(location)
    return PostgresSink(location, schema=schema)


class Store:
    """One test's store: opens sinks on it, runs raw SQL on its tables, cleans up."""

    def __init__(self, kind: str, location: str, schema: str | None = None) -> None:
        self.kind = kind
        self.location = location
        self.schema = schema
        self._sinks: list[SqlSink] = []
        if kind == "sqlite":
            self._raw: Engine = create_engine(f"sqlite:///{location}")
        else:
            self._raw = create_engine(location, connect_args={"options": f"-c search_path={schema}"})

    def sink(self) -> SqlSink:
        """A new sink on this store, closed at teardown."""
        sink = open_sink(self.kind, self.location, self.schema)
        self._sinks.append(sink)
        return sink

    def execute(self, *statements: str, **params: Any) -> list[Any]:
        """Run raw SQL in one transaction (tampering, inspection); the last statement's rows."""
        rows: list[Any] = []
        with self._raw.begin() as conn:
            for statement in statements:
                result = conn.execute(text(statement), params)
                rows = list(result) if result.returns_rows else []
        return rows

    def tamper(self, *statements: str, **params: Any) -> None:
        """Raw SQL on the stored events wherever they are, in one transaction.

        On SQLite each statement runs on ``audit_events`` and again on
        ``audit_pending`` (the events not moved yet), as an attacker with the
        file would; on PostgreSQL every event is in ``audit_events``.
        """
        if self.kind == "sqlite":
            statements = tuple(
                variant
                for statement in statements
                for variant in (statement, statement.replace("audit_events", "audit_pending"))
            )
        self.execute(*statements, **params)

    def close(self) -> None:
        for sink in self._sinks:
            sink.close()
        self._raw.dispose()


def postgres_admin() -> Engine:
    """An engine on the test server; fails loudly when the server is not there."""
    engine = create_engine(POSTGRES_URL, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        engine.dispose()
        raise RuntimeError(
            f"the PostgreSQL test server is not reachable ({type(exc).__name__}); start it or set "
            "TOOLBOX_TEST_POSTGRES_URL (these tests are required, not skipped)"
        ) from exc
    return engine


def make_store(kind: str, tmp_path: Path) -> Iterator[Store]:
    """Fixture body: a fresh store of ``kind``, removed afterwards."""
    if kind == "sqlite":
        store = Store("sqlite", str(tmp_path / "audit.db"))
        try:
            yield store
        finally:
            store.close()
        return
    admin = postgres_admin()
    schema = f"toolbox_test_{uuid.uuid4().hex}"
    store = Store("postgres", POSTGRES_URL, schema)
    try:
        yield store
    finally:
        store.close()
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


#: What the multi-process tests' processes import: once, by the fork server they are forked from.
_PROCESS_PRELOAD = [
    "audit_sql_support",
    "audit_scale_support",
    "psycopg",
    "sqlalchemy.dialects.postgresql.psycopg",
    "sqlalchemy.dialects.sqlite.pysqlite",
]


def process_context() -> multiprocessing.context.ForkServerContext:
    """How the multi-process tests start their processes (each one a separate process with a
    sink of its own, as before).

    Forked by multiprocessing's fork server, which imports toolbox, SQLAlchemy and the drivers
    once per pytest process: started with ``spawn``, each process imported them again (~0.4 s of
    CPU). Not plain ``fork``: the pytest process runs threads (servers, the audit's writers).
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PROCESS_PRELOAD)  # read when the server starts, the first time
    return context


def append_worker(
    kind: str, location: str, schema: str | None, trace_id: str, count: int, start: Any
) -> None:
    """Process body: open a sink of its own, wait for the others, append ``count`` single events."""
    sink = open_sink(kind, location, schema)
    try:
        sink.schema_version()
        start.wait(30)
        for index in range(count):
            sink.append([event(trace_id, attempt=index)])
    finally:
        sink.close()


def open_then_append_worker(kind: str, location: str, schema: str | None, trace_id: str, start: Any) -> None:
    """Process body: wait for the others, then open the store (creating or migrating it) and append once."""
    sink = open_sink(kind, location, schema)
    try:
        start.wait(60)
        sink.schema_version()
        sink.append([event(trace_id)])
    finally:
        sink.close()
