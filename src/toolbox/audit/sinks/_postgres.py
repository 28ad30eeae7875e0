"""`PostgresSink`: the shared schema on PostgreSQL, through SQLAlchemy Core and psycopg 3."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any, final

from sqlalchemy import Double, Integer, create_engine, event, func, inspect, select
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError
from sqlalchemy.schema import CreateSchema

from toolbox.audit._events import FIELDS, GENESIS_HASH
from toolbox.audit._sink import AuditSinkError, chain_dicts
from toolbox.audit.sinks._sql import SqlSink, events_table, heads_table
from toolbox.audit.sinks._sql_rows import storage_values

__all__ = ["PostgresSink"]

#: Batches of more events go in with ``COPY``; smaller ones in the multi-row INSERT (fewer round trips).
_COPY_ABOVE = 64
#: A pooled connection idle this long (seconds) is pinged before use: a restarted server is not an error.
_PING_AFTER_IDLE = 1.0
_IDLE_SINCE = "toolbox_idle_since"
# Rows as JSON text; non-ASCII as is (the connection speaks UTF-8), floats as their shortest repr.
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_INSTALL = 'PostgresSink needs psycopg 3. Please install it: pip install "toolbox-registry[postgres]"'


@final
class PostgresSink(SqlSink):
    """Stores events in PostgreSQL; any number of processes may write the same traces.

    ``url`` is a SQLAlchemy URL (``postgresql://`` or ``postgresql+psycopg://``).
    With ``schema``, the tables live in that schema, created if absent. The
    tables are created on first use, under an advisory lock so concurrent first
    uses do not collide. ``append`` locks each written trace's head row
    (``INSERT .. ON CONFLICT DO UPDATE .. RETURNING``, in trace order), so
    concurrent writers of a trace queue up and its sequence stays gap-free.
    Connecting gives up after ``connect_timeout`` seconds; a pooled connection
    idle for a second or more is pinged before use.

    Concurrent appends of one sink share transactions (group commit); up to
    ``concurrent_writes`` transactions (default 1) run at once. One writer
    makes the largest groups, the fewest transactions per event and the least
    client CPU (8 STRICT callers here: about 1.5x the events per second of 10
    writers); more help when the server is remote and the process has CPU to spare.
    """

    __slots__ = ("_guess_refused", "_pipelines", "_schema", "_sql")

    def __init__(
        self,
        url: str | URL,
        *,
        schema: str | None = None,
        connect_timeout: int = 5,
        pool_size: int = 5,
        max_overflow: int = 10,
        concurrent_writes: int = 1,
    ) -> None:
        try:
            import psycopg
        except ImportError:
            raise ImportError(_INSTALL) from None
        # Pipeline mode needs libpq 14 or later; without it a write takes four round trips, not two.
        self._pipelines = psycopg.Pipeline.is_supported()
        # How the server refuses a wrong guess of a head (see _write_guessed): a not-null or unique
        # violation; or a deadlock it broke (not expected: guessed heads are locked in trace order).
        self._guess_refused = (psycopg.errors.IntegrityError, psycopg.errors.DeadlockDetected)
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
        self._sql: _Statements | None = None
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
        writers = concurrent_writes
        if not isinstance(writers, int) or isinstance(writers, bool) or writers < 1:
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

    def _write_group(self, batches: Sequence[list[dict[str, Any]]]) -> None:
        """At most `_COPY_ABOVE` events in one or two round trips; larger groups as `_write_rows` does.

        The group goes in one statement when the sink guesses its traces' heads
        right (`_write_guessed`). Otherwise the statements go in psycopg's
        pipeline mode on a connection in autocommit (`_write_pipelined`). A
        failure stores nothing of the group.
        """
        rows = [row for batch in batches for row in batch]
        trace_ids = sorted({row["trace_id"] for row in rows})
        if len(rows) <= _COPY_ABOVE:
            with self._guard("store events"), self._engine.connect() as plain:
                conn = plain.execution_options(isolation_level="AUTOCOMMIT")
                driver = conn.connection.driver_connection
                assert driver is not None
                if self._write_guessed(plain, conn, driver, trace_ids, rows):
                    return
                if self._pipelines:
                    self._write_pipelined(plain, conn, driver, trace_ids, rows)
                    return
        for trace_id in trace_ids:  # moved below: no longer a guess worth a round trip
            self._heads.pop(trace_id, None)
        super()._write_group(batches)

    def _write_guessed(
        self,
        plain: Connection,
        conn: Connection,
        driver: Any,
        trace_ids: list[str],
        rows: list[dict[str, Any]],
    ) -> bool:
        """The events chained after the heads the sink expects, in one statement; False if a guess was wrong.

        A trace's guess is the head this sink committed last for it, or none (a
        new trace); a group guesses all its heads known or all new. The
        statement moves each head only from exactly its guess (locking them in
        trace order, as the locking path does), creates a head only where none
        exists, and stores the events only if every head did so; otherwise it
        fails as a whole (a not-null or unique violation, or a deadlock the
        server broke), stores nothing, and the caller locks the heads and writes
        again. One round trip, the commit included (autocommit).
        """
        cache = self._heads
        guesses = {trace_id: cache.get(trace_id) for trace_id in trace_ids}
        if len({guess is None for guess in guesses.values()}) > 1:
            # New and known heads at once could deadlock with a writer creating one of the new
            # ones while it waits for a known one: such a group (a run starting) takes the locks.
            return False
        rule_ids = [row["rule_ids"] for row in rows]  # storage_values makes them text: a retry needs them
        chained, heads = chain_dicts(rows, lambda trace_id: guesses[trace_id] or (0, GENESIS_HASH))
        known, fresh = [], []
        for trace_id in trace_ids:  # in trace order: the heads are locked in that order
            guess = guesses[trace_id]
            if guess is None:
                fresh.append((trace_id, *heads[trace_id]))
            else:
                known.append((trace_id, *heads[trace_id], *guess))
        parameters = (_JSON(known), _JSON(fresh), len(known), self._payload(chained))
        try:
            with driver.cursor() as cursor:
                cursor.execute(self._statements(conn).insert_guessed, parameters)
        except self._guess_refused:  # a head moved (another writer), exists, or a lock order clashed
            for trace_id in trace_ids:
                cache.pop(trace_id, None)
            for row, kept in zip(rows, rule_ids, strict=True):
                row["rule_ids"] = kept
            return False
        except BaseException:
            _roll_back(plain, driver)
            raise
        self._remember(heads)
        return True

    def _write_pipelined(
        self,
        plain: Connection,
        conn: Connection,
        driver: Any,
        trace_ids: list[str],
        rows: list[dict[str, Any]],
    ) -> None:
        """``BEGIN`` and the heads' lock (their values chain the events), then the insert and ``COMMIT``."""
        try:
            with driver.pipeline(), driver.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute(*self._lock_statement(conn, trace_ids))
                locked = {row[0]: (row[1], row[2]) for row in cursor.fetchall()}
                chained, heads = chain_dicts(rows, locked.__getitem__)
                cursor.execute(*self._insert_statement(conn, chained, heads))
                cursor.execute("COMMIT")
        except BaseException:
            _roll_back(plain, driver)
            raise
        self._remember(heads)

    def _write_rows(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Inside a transaction: lock and read the heads, then insert the events and move the heads.

        The heads: one ``INSERT .. ON CONFLICT DO UPDATE .. RETURNING`` creates the
        missing ones, locks every one in trace order and returns them. The events:
        one multi-row ``INSERT`` whose ``WITH`` clause also moves the heads; more
        than `_COPY_ABOVE` events (an ASYNC drain) go in with ``COPY``.
        """
        locked = self._lock_heads(conn, sorted({row["trace_id"] for row in rows}))
        chained, heads = chain_dicts(rows, locked.__getitem__)
        if len(chained) <= _COPY_ABOVE:
            conn.exec_driver_sql(*self._insert_statement(conn, chained, heads))
            return
        events = self._qualified(conn, events_table.name)
        driver = conn.connection.driver_connection
        assert driver is not None
        with driver.cursor() as cursor, cursor.copy(f"COPY {events} ({_columns(conn)}) FROM STDIN") as copy:
            for values in storage_values(chained):
                copy.write_row(values)
        conn.exec_driver_sql(*self._move_statement(conn, heads))

    def _lock_heads(self, conn: Connection, trace_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """Create the missing heads, lock them all (in trace order) and return them: one statement."""
        rows = conn.exec_driver_sql(*self._lock_statement(conn, trace_ids))
        return {row[0]: (row[1], row[2]) for row in rows}

    def _lock_statement(self, conn: Connection, trace_ids: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
        return self._statements(conn).lock, (GENESIS_HASH, _JSON(list(trace_ids)))

    def _move_statement(
        self, conn: Connection, heads: dict[str, tuple[int, str]]
    ) -> tuple[str, tuple[Any, ...]]:
        return self._statements(conn).move, (_heads_json(heads),)

    def _insert_statement(
        self, conn: Connection, chained: list[dict[str, Any]], heads: dict[str, tuple[int, str]]
    ) -> tuple[str, tuple[Any, ...]]:
        """One statement: the events' insert, in a WITH clause of the heads' UPDATE."""
        return self._statements(conn).insert_and_move, (self._payload(chained), _heads_json(heads))

    def _payload(self, chained: list[dict[str, Any]]) -> str:
        """The rows as one JSON text: an array of rows, each its values in column order."""
        try:
            return _JSON(storage_values(chained))
        except (TypeError, ValueError):  # not JSON: a value no driver could bind either
            raise AuditSinkError(
                f"{self._name}: cannot store events: a field holds an unstorable value"
            ) from None

    def _statements(self, conn: Connection) -> _Statements:
        statements = self._sql
        if statements is None:
            statements = self._sql = _Statements(
                self._qualified(conn, events_table.name), self._qualified(conn, heads_table.name), conn
            )
        return statements

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


def _columns(conn: Connection) -> str:
    return ", ".join(conn.dialect.identifier_preparer.quote(name) for name in FIELDS)


def _roll_back(plain: Connection, driver: Any) -> None:
    """End a failed pipelined transaction; a connection that cannot is dropped from the pool."""
    try:
        if not driver.closed:
            driver.execute("ROLLBACK")
            return
    except Exception:  # noqa: BLE001, S110 - the connection is broken: invalidated below
        pass
    plain.invalidate()


@final
class _Statements:
    """The write statements of one sink, their text fixed whatever the number of rows.

    Rows travel as one JSON text (an array of rows, each an array of values in
    column order), decoded by the server: one parameter that psycopg sends as
    it is, and one statement text, which psycopg parses once and prepares on the
    server after a few uses (a multi-row ``VALUES`` list was a new statement for
    every batch size, and an array per column cost more to send than the rows).
    """

    __slots__ = ("insert_and_move", "insert_guessed", "lock", "move")

    def __init__(self, events: str, heads: str, conn: Connection) -> None:
        insert = _insert_rows(events, conn)
        # Heads are created, then locked, in the order given (sorted): writers never deadlock.
        self.lock = (
            f"INSERT INTO {heads} (trace_id, last_sequence, last_hash) "  # noqa: S608 - quoted names, bound values
            "SELECT u.trace_id, 0, %s "
            "FROM json_array_elements_text(%s::json) WITH ORDINALITY AS u(trace_id, n) ORDER BY u.n "
            "ON CONFLICT (trace_id) DO UPDATE SET trace_id = EXCLUDED.trace_id "
            "RETURNING trace_id, last_sequence, last_hash"
        )
        self.move = (
            f"UPDATE {heads} AS h SET last_sequence = (v.value->>1)::integer, last_hash = v.value->>2 "  # noqa: S608 - quoted names, bound values
            "FROM json_array_elements(%s::json) AS v WHERE h.trace_id = v.value->>0"
        )
        self.insert_and_move = f"WITH stored AS ({insert}) {self.move}"
        # The heads guessed: the known ones are locked in trace order (as the locking path does:
        # writers do not deadlock) where they still hold the guess, then moved; the new ones are
        # created (UNIQUE refuses a head that exists). The events' sequence is NULL (refused: NOT
        # NULL) unless every known head was locked.
        settled = _insert_rows(events, conn, sequence_if="(SELECT count(*) FROM moved) = %s")
        self.insert_guessed = (
            "WITH guess AS (SELECT v.value->>0 AS trace_id, (v.value->>1)::integer AS last_sequence, "  # noqa: S608 - quoted names, bound values
            "v.value->>2 AS last_hash, (v.value->>3)::integer AS was_sequence, v.value->>4 AS was_hash "
            "FROM json_array_elements(%s::json) AS v), "
            f"locked AS MATERIALIZED (SELECT h.trace_id FROM {heads} AS h "
            "JOIN guess AS g ON h.trace_id = g.trace_id "
            "WHERE h.last_sequence = g.was_sequence AND h.last_hash = g.was_hash "
            "ORDER BY h.trace_id FOR UPDATE OF h), "
            f"moved AS (UPDATE {heads} AS h "
            "SET last_sequence = g.last_sequence, last_hash = g.last_hash "
            "FROM guess AS g, locked AS l WHERE h.trace_id = g.trace_id AND h.trace_id = l.trace_id "
            "RETURNING 1), "
            f"created AS (INSERT INTO {heads} (trace_id, last_sequence, last_hash) "
            "SELECT v.value->>0, (v.value->>1)::integer, v.value->>2 "
            "FROM json_array_elements(%s::json) AS v RETURNING 1) "
            f"{settled}"
        )


def _insert_rows(events: str, conn: Connection, *, sequence_if: str | None = None) -> str:
    """``INSERT`` of one JSON parameter's rows; with ``sequence_if``, sequence is NULL unless it holds."""
    values = []
    for index, column in enumerate(events_table.columns):
        value = f"(r.value->>{index}){_cast(column.type)}"
        if sequence_if is not None and column.name == "sequence":
            value = f"CASE WHEN {sequence_if} THEN {value} END"
        values.append(value)
    return (
        f"INSERT INTO {events} ({_columns(conn)}) "  # noqa: S608 - quoted names, bound values
        f"SELECT {', '.join(values)} FROM json_array_elements(%s::json) AS r"
    )


def _cast(column_type: Any) -> str:
    if isinstance(column_type, Integer):
        return "::integer"
    if isinstance(column_type, Double):
        return "::double precision"
    return ""  # text, assigned to the VARCHAR and TEXT columns, whose checks still apply


def _heads_json(heads: dict[str, tuple[int, str]]) -> str:
    return _JSON([(trace_id, sequence, digest) for trace_id, (sequence, digest) in sorted(heads.items())])
