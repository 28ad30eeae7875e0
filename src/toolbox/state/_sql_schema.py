"""The SQL store's tables, its PostgreSQL function, and the migration of an earlier schema.

Schema 2 (this one): ``<prefix>kill``, ``<prefix>counters``, ``<prefix>rate_log``,
``<prefix>approvals`` and ``<prefix>schema`` (the version). A rate limit's
admissions are rows of ``rate_log`` (key, time, how many at that time: one
index, no row id), and the rate limit's row of ``counters`` holds how many
there are, so no call counts its window: ``calls`` of a rate row is always the
sum of its log rows (SQLite keeps it so with a trigger on delete; the
PostgreSQL function in the same statements). On PostgreSQL the whole
admission is the function ``<prefix>admit`` (`toolbox.state._sql_admit`),
created here.

Schema 1 (toolbox 0.1 before it) kept the admissions in ``<prefix>rate_events``
and counted them on every call. `migrate` runs once per store under the
schema lock (SQLite's write lock; a PostgreSQL advisory lock, then the two
tables locked against writers): it copies those admissions into the log,
recounts every rate row, empties the old table and leaves it with a trigger
that refuses inserts, so a process of the earlier version still running fails
closed on its rate-limited calls (the store is unavailable to it) instead of
counting them where this version does not look. Its budget-only calls keep
working: the counters of budgets did not change.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    select,
    text,
)

from toolbox.pipeline._state_ports import StateUnavailableError
from toolbox.state._sql_admit import function_sql

__all__ = ["VERSION", "Schema", "drop", "migrate", "tables"]

#: The schema this code writes; a database of a later one is refused.
VERSION = 2


class Schema(NamedTuple):
    """The store's tables under one prefix."""

    prefix: str
    meta: MetaData
    kill: Table
    counters: Table
    log: Table
    approvals: Table
    version: Table

    @property
    def legacy(self) -> str:
        """Schema 1's table of rate admissions (kept empty, refusing inserts, after the migration)."""
        return f"{self.prefix}rate_events"

    @property
    def admit(self) -> str:
        """The PostgreSQL admission function."""
        return f"{self.prefix}admit"


def tables(prefix: str) -> Schema:
    meta = MetaData()
    kill = Table(
        f"{prefix}kill",
        meta,
        Column("switch", String(300), primary_key=True),  # "*" or "t:<tool>"
        Column("reason", Text, nullable=False),
        Column("who", Text, nullable=False),
        Column("at", Float, nullable=False),
    )
    counters = Table(
        f"{prefix}counters",
        meta,
        Column("key", String(900), primary_key=True),
        Column("calls", Integer, nullable=False),
        Column("expires_at", Float, nullable=False),
    )
    log = Table(
        f"{prefix}rate_log",
        meta,
        Column("key", String(900), primary_key=True),
        Column("expires_at", Float, primary_key=True),  # when the admissions leave the window
        Column("n", Integer, nullable=False),
        sqlite_with_rowid=False,
    )
    approvals = Table(
        f"{prefix}approvals",
        meta,
        Column("id", String(300), primary_key=True),
        Column("tenant", Text, nullable=False),
        Column("principal", Text, nullable=False),
        Column("state", String(16), nullable=False),
        Column("fingerprint", String(128), nullable=False),
        Column("created_at", Float, nullable=False),
        Column("expires_at", Float, nullable=False),
        Column("forget_at", Float, nullable=False),
        Column("data", Text, nullable=False),
        Index(f"{prefix}approvals_created", "created_at"),
        Index(f"{prefix}approvals_queue", "tenant", "principal", "state"),
    )
    version = Table(
        f"{prefix}schema",
        meta,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("version", Integer, nullable=False),
    )
    return Schema(prefix, meta, kill, counters, log, approvals, version)


def _q(name: str) -> str:
    """A quoted name: the validated prefix (lowercase letters, digits, _) and fixed suffixes."""
    return f'"{name}"'


def migrate(conn: Connection, schema: Schema, *, postgres: bool) -> None:
    """Create what is missing, bring an earlier schema up to `VERSION` (``conn`` holds the lock)."""
    legacy = inspect(conn).has_table(schema.legacy)
    schema.meta.create_all(conn, checkfirst=True)
    found = conn.execute(select(schema.version.c.version)).scalar_one_or_none()
    if found is not None and found > VERSION:
        raise StateUnavailableError(
            f"the state tables are schema {found}, newer than this toolbox's {VERSION}: upgrade it"
        )
    if found is None:
        if legacy:
            _from_schema_1(conn, schema, postgres=postgres)
        conn.execute(schema.version.insert().values(id=1, version=VERSION))
    if postgres:
        conn.exec_driver_sql(function_sql(schema.admit, schema.counters.name, schema.log.name))
    else:
        for trigger in _sqlite_triggers(schema):
            conn.exec_driver_sql(trigger)


def _sqlite_triggers(schema: Schema) -> list[str]:
    """SQLite keeps each rate row's count equal to its log (PostgreSQL's function does it in line).

    Forgetting admissions uncounts them, whoever deletes them; a rate row counted
    up (an admission: `toolbox.state._sql_limits`'s one statement) logs it, at
    the end of its window, which is the row's new expiry.
    """
    c, log, p = _q(schema.counters.name), _q(schema.log.name), schema.prefix
    logged = (
        f"INSERT INTO {log} (key, expires_at, n) VALUES (NEW.key, NEW.expires_at, 1) "  # noqa: S608
        "ON CONFLICT (key, expires_at) DO UPDATE SET n = n + 1; END"
    )
    return [
        f"CREATE TRIGGER IF NOT EXISTS {_q(p + 'rate_forget')} AFTER DELETE ON {log} "  # noqa: S608
        f"BEGIN UPDATE {c} SET calls = calls - OLD.n WHERE key = OLD.key; END",
        f"CREATE TRIGGER IF NOT EXISTS {_q(p + 'rate_new')} AFTER INSERT ON {c} "
        f"WHEN substr(NEW.key, 1, 2) = 'r:' AND NEW.calls > 0 BEGIN {logged}",
        f"CREATE TRIGGER IF NOT EXISTS {_q(p + 'rate_admitted')} AFTER UPDATE OF calls ON {c} "
        f"WHEN substr(NEW.key, 1, 2) = 'r:' AND NEW.calls > OLD.calls BEGIN {logged}",
    ]


def _from_schema_1(conn: Connection, schema: Schema, *, postgres: bool) -> None:
    """Move schema 1's admissions into the log, recount the rate rows, retire the old table."""
    c, log, old = _q(schema.counters.name), _q(schema.log.name), _q(schema.legacy)
    if postgres:
        # Earlier processes write both tables: wait for their transactions, then keep them out.
        conn.exec_driver_sql(f"LOCK TABLE {c}, {old} IN EXCLUSIVE MODE")
    # Schema 1 logged when each admission came; its rate row ends a window after the latest:
    # so each admission leaves the window at its time plus (the row's end less the latest).
    conn.exec_driver_sql(
        f"INSERT INTO {log} (key, expires_at, n) "  # noqa: S608 - validated names
        f"SELECT e.key, e.at + (c.expires_at - m.latest), count(*) FROM {old} AS e "
        f"JOIN {c} AS c ON c.key = e.key "
        f"JOIN (SELECT key, max(at) AS latest FROM {old} GROUP BY key) AS m ON m.key = e.key "
        "GROUP BY e.key, e.at, c.expires_at, m.latest"
    )
    conn.exec_driver_sql(
        f"UPDATE {c} SET calls = coalesce((SELECT sum(n) FROM {log} WHERE {log}.key = {c}.key), 0) "  # noqa: S608
        "WHERE substr(key, 1, 2) = 'r:'"
    )
    conn.exec_driver_sql(f"DELETE FROM {old}")  # noqa: S608 - validated names
    if not postgres:
        conn.exec_driver_sql(
            f"CREATE TRIGGER {_q(schema.prefix + 'rate_events_retired')} BEFORE INSERT ON {old} BEGIN "
            "SELECT RAISE(ABORT, 'toolbox: this table is retired, upgrade this process'); END"
        )
        return
    retired = _q(schema.prefix + "retired")
    conn.exec_driver_sql(
        f"CREATE OR REPLACE FUNCTION {retired}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "RAISE EXCEPTION 'toolbox: this table is retired, upgrade this process'; END $$"
    )
    conn.exec_driver_sql(
        f"CREATE TRIGGER {retired} BEFORE INSERT ON {old} FOR EACH ROW EXECUTE FUNCTION {retired}()"
    )


def drop(conn: Connection, schema: Schema, *, postgres: bool) -> None:
    """Drop every table, trigger and function of the store (tests and teardown)."""
    schema.meta.drop_all(conn, checkfirst=True)
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {_q(schema.legacy)}")
    if postgres:
        conn.execute(text(f"DROP FUNCTION IF EXISTS {_q(schema.admit)}"))
        conn.execute(text(f"DROP FUNCTION IF EXISTS {_q(schema.prefix + 'retired')}"))
