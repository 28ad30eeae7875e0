"""The SQL schema shared by the SQLite and PostgreSQL sinks (SQLAlchemy Core, one `MetaData`).

``audit_events``
    One row per event, one column per field of `toolbox.audit._events.FIELDS`.
    ``event_id`` is the primary key and ``(trace_id, sequence)`` is unique (its
    index also serves lookups by trace). ``rule_ids`` is stored as JSON text.
    ``timestamp`` is stored exactly as the chain hash saw it: the fixed-width
    ISO 8601 UTC string of `AuditEvent.as_dict` (``2024-05-01T10:00:00.123456+00:00``),
    which sorts chronologically as text (byte order: collation "C" on PostgreSQL).
    Indexes: tenant + timestamp, timestamp, tool, principal; status and
    parent_run_id only where set (most events have neither: a commit writes
    no page of those indexes for them, and a filter on a value still uses them).
``audit_trace_heads``
    One row per trace: its last sequence number and last hash (on SQLite a
    ``WITHOUT ROWID`` table: one B-tree, not a table and its key's index). Writers lock
    the heads of the traces they write, so sequences stay gap-free and the
    chain unbroken across threads and processes; ``toolbox audit verify``
    compares them with the stored events, so a removed last event or a
    removed trace is found.
``audit_pending`` (SQLite only)
    Events stored but not yet moved into ``audit_events``: the same columns,
    one B-tree keyed by ``event_id`` (``WITHOUT ROWID``), no other index. A
    small commit (a STRICT call's events) goes here, so it writes a page or
    two instead of one per index of ``audit_events``; every few hundred events
    a writer moves them all into ``audit_events`` in one transaction (the
    fold). A trigger refuses a row whose event id or trace sequence
    ``audit_events`` holds already, as that table's own constraints would.
    The sinks read both tables as one; ``audit_event_log`` is a view of both
    for your own SQL.
``audit_log``
    The Merkle log (`toolbox.audit._log`): one row per sequenced event, its dense
    ``log_index`` (0, 1, 2, ...), its ``event_id`` (unique) and its ``event_hash`` as it
    was when sequenced (the leaf's input). Written only by the sequencer (at checkpoint
    time, never on the write path).
``audit_log_tiles``
    A cache: the hash of each full run of 256 entries (a perfect subtree), so a checkpoint
    or a proof reads a few thousand rows, not every entry. Never trusted by verification.
``audit_checkpoints``
    The store's own copy of the signed checkpoints, one per tree size. A convenience
    for ``prove`` and the console: verification trusts the witnesses' copies, not these.
``audit_schema_version``
    One row per schema version applied; the highest is the store's version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from sqlalchemy import (
        BigInteger,
        Column,
        Double,
        Index,
        Integer,
        MetaData,
        String,
        Table,
        Text,
        UniqueConstraint,
        inspect,
    )
    from sqlalchemy import text as sql_text
    from sqlalchemy.engine import Connection
    from sqlalchemy.schema import CreateTable
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        'The SQL audit sinks need SQLAlchemy. Please install it: pip install "toolbox-registry[sql]"'
    ) from exc

from toolbox.audit._events import FIELDS

__all__ = [
    "EVENT_LOG_VIEW",
    "MIGRATIONS",
    "POSTGRES_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "add_missing_columns",
    "checkpoints_table",
    "create_log_tables",
    "create_tables",
    "events_table",
    "heads_table",
    "log_table",
    "metadata",
    "pending_table",
    "tiles_table",
    "version_table",
]

#: The schema version this code writes (2: ``parent_run_id``, the delegating run; 3: partial
#: indexes on status and parent_run_id, SQLite's heads table without rowid; 4: SQLite's
#: ``audit_pending`` table and ``audit_event_log`` view; 5: ``credential``, the label of the
#: caller's credential; 6: the Merkle log's ``audit_log``, ``audit_log_tiles`` and
#: ``audit_checkpoints``).
SCHEMA_VERSION = 6
#: The version this code keeps a PostgreSQL store at. Versions 4 and 5 are not recorded there,
#: so the previous release (which refuses a newer version) goes on writing a shared store while
#: a fleet upgrades one process at a time: version 4 changed SQLite only, and version 5's
#: nullable ``credential`` column is added where missing (`add_missing_columns`), which the
#: previous release's writes and reads, naming their columns, never see. Version 6's log tables
#: are created by the first checkpoint (`create_log_tables`): the previous release never sees them.
POSTGRES_SCHEMA_VERSION = 3


def _add_text_column(conn: Connection, table: Table, column: str) -> None:
    """Append the nullable text ``column`` to ``table`` (in the PostgreSQL sink's schema, if any),
    unless it has it already."""
    schema = conn.schema_for_object(events_table)  # the PostgreSQL sink's schema, if it has one
    if column in {found["name"] for found in inspect(conn).get_columns(table.name, schema=schema)}:
        return  # looked up first: ALTER TABLE locks the table even for nothing
    preparer = conn.dialect.identifier_preparer
    name = preparer.quote(table.name)
    if schema:
        name = f"{preparer.quote_schema(schema)}.{name}"
    conn.execute(sql_text(f"ALTER TABLE {name} ADD COLUMN {preparer.quote(column)} TEXT"))


def _add_parent_run_id(conn: Connection) -> None:
    """Version 1 -> 2: the nullable ``parent_run_id`` column (appended last) and its index."""
    _add_text_column(conn, events_table, "parent_run_id")
    _parent_index.create(conn)


def _partial_indexes_and_compact_heads(conn: Connection) -> None:
    """Version 2 -> 3: status and parent_run_id indexed only where set; SQLite heads without rowid.

    Both change what each commit writes, not what is stored: the events and
    heads are kept as they are (the heads copied row for row on SQLite).
    """
    for index in (_status_index, _parent_index):
        index.drop(conn, checkfirst=True)
        index.create(conn)
    if conn.dialect.name != "sqlite":
        return
    # SQLite cannot change a table's kind in place: build the new one, copy, swap (inside the
    # schema transaction, so a failure leaves the version 2 table).
    columns = ", ".join(column.name for column in heads_table.columns)
    created = str(CreateTable(heads_table).compile(dialect=conn.dialect)).strip()
    conn.execute(sql_text(created.replace(f"TABLE {heads_table.name} ", f"TABLE {_HEADS_V3} ", 1)))
    conn.execute(sql_text(f"INSERT INTO {_HEADS_V3} ({columns}) SELECT {columns} FROM {heads_table.name}"))  # noqa: S608 - fixed names
    conn.execute(sql_text(f"DROP TABLE {heads_table.name}"))
    conn.execute(sql_text(f"ALTER TABLE {_HEADS_V3} RENAME TO {heads_table.name}"))


_HEADS_V3 = "audit_trace_heads_v3"


def _pending_events(conn: Connection) -> None:
    """Version 3 -> 4: SQLite's ``audit_pending`` table and ``audit_event_log`` view (a no-op elsewhere).

    The pending table is made with today's columns, so the events table gets the columns of
    later versions first (``credential``, version 5): the view over both needs them in both.
    """
    if conn.dialect.name == "sqlite":
        _add_text_column(conn, events_table, "credential")
        _create_pending(conn)


def _add_credential(conn: Connection) -> None:
    """Version 4 -> 5 (SQLite): the nullable ``credential`` column, appended last to the events and
    the pending events, and the view of both made again with it."""
    _add_text_column(conn, events_table, "credential")
    _add_text_column(conn, pending_table, "credential")
    conn.execute(sql_text(f"DROP VIEW IF EXISTS {EVENT_LOG_VIEW}"))
    _create_pending(conn)


def _create_log_tables(conn: Connection) -> None:
    """Version 5 -> 6: the Merkle log's tables (empty: the sequencer fills them at the next checkpoint)."""
    log_table.create(conn, checkfirst=True)
    tiles_table.create(conn, checkfirst=True)
    checkpoints_table.create(conn, checkfirst=True)


def create_log_tables(conn: Connection) -> None:
    """The Merkle log's tables where missing: a PostgreSQL store gets them from its first
    checkpoint, not from a writer (whose role may lack CREATE and never needs them)."""
    _create_log_tables(conn)


def add_missing_columns(conn: Connection) -> None:
    """PostgreSQL: add the columns newer than the recorded version 3 (``credential``) where missing."""
    if conn.dialect.name == "postgresql":
        _add_text_column(conn, events_table, "credential")


def create_tables(conn: Connection) -> None:
    """Every table (and view) of the current version, inside the schema transaction."""
    metadata.create_all(conn)
    if conn.dialect.name == "sqlite":
        _create_pending(conn)


def _create_pending(conn: Connection) -> None:
    pending_table.create(conn, checkfirst=True)
    # audit_events' own constraints for rows not moved there yet (a duplicate of a moved event
    # would make every later fold fail): index lookups only, so a commit writes no page for them.
    conn.execute(
        sql_text(
            f"CREATE TRIGGER IF NOT EXISTS {_PENDING_UNIQUE} BEFORE INSERT ON {pending_table.name} "  # noqa: S608 - fixed names
            f"WHEN EXISTS (SELECT 1 FROM {events_table.name} WHERE event_id = NEW.event_id) "
            f"OR EXISTS (SELECT 1 FROM {events_table.name} "
            "WHERE trace_id = NEW.trace_id AND sequence = NEW.sequence) "
            "BEGIN SELECT RAISE(ABORT, 'UNIQUE constraint failed: the event id or the trace sequence "
            "is stored already'); END"
        )
    )
    columns = ", ".join(FIELDS)
    conn.execute(
        sql_text(
            f"CREATE VIEW IF NOT EXISTS {EVENT_LOG_VIEW} AS "  # noqa: S608 - fixed names
            f"SELECT {columns} FROM {events_table.name} UNION ALL SELECT {columns} FROM {pending_table.name}"
        )
    )


#: ``MIGRATIONS[n]`` upgrades a store from version ``n`` to ``n + 1`` inside the
#: schema transaction.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _add_parent_run_id,
    2: _partial_indexes_and_compact_heads,
    3: _pending_events,
    4: _add_credential,
    5: _create_log_tables,
}

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# Byte order on PostgreSQL, whatever the database's collation: ISO 8601 text then
# sorts and compares chronologically (SQLite's default collation is already bytewise).
_Timestamp = String(40).with_variant(String(40, collation="C"), "postgresql")


def _partial_index(column: Column[Any]) -> Index:
    """An index of ``column`` over the rows where it is set."""
    return Index(None, column, sqlite_where=column.isnot(None), postgresql_where=column.isnot(None))


events_table = Table(
    "audit_events",
    metadata,
    Column("event_id", String(64), primary_key=True),
    Column("trace_id", Text, nullable=False),
    Column("correlation_id", Text),
    Column("sequence", Integer, nullable=False),
    Column("timestamp", _Timestamp, nullable=False),
    Column("type", String(32), nullable=False),
    Column("name", Text, nullable=False),
    Column("tool", Text, nullable=False),
    Column("operation", Text, nullable=False),
    Column("risk", Text),
    Column("effect", Text),
    Column("decision", Text),
    Column("reason_code", Text),
    Column("rule_ids", Text, nullable=False),
    Column("intent_kind", Text),
    Column("intent_text", Text),
    Column("tenant", Text),
    Column("principal", Text),
    Column("payload_summary", Text),
    Column("payload_hash", Text),
    Column("status", Text),
    Column("duration", Double),
    Column("attempt", Integer),
    Column("previous_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    Column("parent_run_id", Text),
    Column("credential", Text),
    UniqueConstraint("trace_id", "sequence"),
    Index(None, "tenant", "timestamp"),
    Index(None, "timestamp"),
    Index(None, "tool"),
    Index(None, "principal"),
)
# Most events have no status (three of a call's four) and no parent run: indexed where set only.
# ``status = ?`` and ``parent_run_id = ?`` imply ``IS NOT NULL``, so both engines still use them.
_status_index = _partial_index(events_table.c.status)
_parent_index = _partial_index(events_table.c.parent_run_id)

heads_table = Table(
    "audit_trace_heads",
    metadata,
    Column("trace_id", Text, primary_key=True),
    Column("last_sequence", Integer, nullable=False),
    Column("last_hash", String(64), nullable=False),
    sqlite_with_rowid=False,
)

# Not in `metadata`: PostgreSQL has no such table (its writers need no DELETE on audit rows).
pending_table = Table(
    "audit_pending",
    MetaData(naming_convention=metadata.naming_convention),
    *(Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable) for c in events_table.columns),
    sqlite_with_rowid=False,  # one B-tree, keyed by the (time-ordered) event id
)
#: A view of every stored event of a SQLite store, moved or pending, for your own SQL.
EVENT_LOG_VIEW = "audit_event_log"
_PENDING_UNIQUE = "audit_pending_unique"

log_table = Table(
    "audit_log",
    metadata,
    Column("log_index", BigInteger, primary_key=True, autoincrement=False),
    Column("event_id", String(64), nullable=False, unique=True),
    Column("event_hash", String(64), nullable=False),
)

tiles_table = Table(
    "audit_log_tiles",
    metadata,
    Column("tile_index", BigInteger, primary_key=True, autoincrement=False),
    Column("tile_hash", String(64), nullable=False),
)

checkpoints_table = Table(
    "audit_checkpoints",
    metadata,
    Column("tree_size", BigInteger, primary_key=True, autoincrement=False),
    Column("root_hash", String(64), nullable=False),
    Column("note", Text, nullable=False),
)

version_table = Table(
    "audit_schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", String(40), nullable=False),
)

assert tuple(c.name for c in events_table.columns) == FIELDS, "audit_events must hold every event field"
