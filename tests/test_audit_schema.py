"""The SQL audit schema: versions, migrations from every older version, and what the indexes serve."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from audit_sql_support import Store, event, make_store, open_then_append_worker, process_context
from tiers import sized
from toolbox.audit import AuditEvent, AuditQuery, AuditSinkError, verify_chain
from toolbox.audit._events import FIELDS
from toolbox.audit.sinks import _sql as sql

BACKENDS = ["sqlite", "postgres"]
_HEADS_V2_SQLITE = (
    "CREATE TABLE audit_trace_heads_v2 (trace_id TEXT NOT NULL, last_sequence INTEGER NOT NULL, "
    "last_hash VARCHAR(64) NOT NULL, CONSTRAINT pk_audit_trace_heads PRIMARY KEY (trace_id))"
)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from make_store(request.param, tmp_path)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    yield from make_store("sqlite", tmp_path)


@pytest.fixture
def postgres_store(tmp_path: Path) -> Iterator[Store]:
    yield from make_store("postgres", tmp_path)


def _index_definition(store: Store, name: str) -> str:
    if store.kind == "sqlite":
        rows = store.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = :n", n=name)
    else:
        rows = store.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = :n", n=name
        )
    assert rows, f"index {name} is missing"
    return str(rows[0][0])


def _heads_table_definition(store: Store) -> str:
    rows = store.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'audit_trace_heads'")
    return str(rows[0][0])


def _current(store: Store) -> int:
    """The version this toolbox keeps a store of this kind at (4 changed SQLite only)."""
    return sql.SCHEMA_VERSION if store.kind == "sqlite" else sql.POSTGRES_SCHEMA_VERSION


def _versions(store: Store) -> list[int]:
    return [r[0] for r in store.execute("SELECT version FROM audit_schema_version ORDER BY version")]


_BEFORE_CREDENTIAL = tuple(name for name in FIELDS if name != "credential")


def _downgrade_to_version_5(store: Store) -> None:
    """Turn a fresh store into what toolbox wrote at version 5: no Merkle log tables.

    A PostgreSQL store is recorded at version 3 (the tables are created where missing).
    """
    store.execute("DROP TABLE audit_log", "DROP TABLE audit_log_tiles", "DROP TABLE audit_checkpoints")
    if store.kind == "sqlite":
        store.execute(
            "DELETE FROM audit_schema_version WHERE version = 6",
            "INSERT INTO audit_schema_version (version, applied_at) VALUES (5, 'before')",
        )


def _downgrade_to_version_4(store: Store) -> None:
    """Turn a fresh store into what toolbox wrote at version 4: no credential column.

    A PostgreSQL store is recorded at version 3 (the column is added where missing).
    """
    _downgrade_to_version_5(store)
    if store.kind != "sqlite":
        store.execute("ALTER TABLE audit_events DROP COLUMN credential")
        return
    columns = ", ".join(_BEFORE_CREDENTIAL)
    store.execute(
        "DROP VIEW audit_event_log",
        "ALTER TABLE audit_events DROP COLUMN credential",
        "ALTER TABLE audit_pending DROP COLUMN credential",
        f"CREATE VIEW audit_event_log AS SELECT {columns} FROM audit_events "
        f"UNION ALL SELECT {columns} FROM audit_pending",
        "DELETE FROM audit_schema_version WHERE version = 5",
        "INSERT INTO audit_schema_version (version, applied_at) VALUES (4, 'before')",
    )


def _downgrade_to_version_3(store: Store) -> None:
    """Turn a fresh store into what toolbox wrote at version 3: on SQLite, no pending events.

    A PostgreSQL store is kept at version 3 already.
    """
    _downgrade_to_version_4(store)
    if store.kind != "sqlite":
        return
    columns = ", ".join(_BEFORE_CREDENTIAL)
    store.execute(
        "DELETE FROM audit_schema_version WHERE version = 4",
        "INSERT INTO audit_schema_version (version, applied_at) VALUES (3, 'before')",
        f"INSERT INTO audit_events ({columns}) SELECT {columns} FROM audit_pending",
        "DROP VIEW audit_event_log",
        "DROP TRIGGER audit_pending_unique",
        "DROP TABLE audit_pending",
    )


def _downgrade_to_version_2(store: Store) -> None:
    """Turn a fresh store into what toolbox wrote at version 2: full indexes, a rowid heads table."""
    _downgrade_to_version_3(store)
    statements = [
        "DROP INDEX ix_audit_events_status",
        "DROP INDEX ix_audit_events_parent_run_id",
        "CREATE INDEX ix_audit_events_status ON audit_events (status)",
        "CREATE INDEX ix_audit_events_parent_run_id ON audit_events (parent_run_id)",
        "DELETE FROM audit_schema_version WHERE version = 3",
        "INSERT INTO audit_schema_version (version, applied_at) VALUES (2, 'before')",
    ]
    if store.kind == "sqlite":
        statements += [
            _HEADS_V2_SQLITE,
            "INSERT INTO audit_trace_heads_v2 "
            "SELECT trace_id, last_sequence, last_hash FROM audit_trace_heads",
            "DROP TABLE audit_trace_heads",
            "ALTER TABLE audit_trace_heads_v2 RENAME TO audit_trace_heads",
        ]
    store.execute(*statements)


def _version_2_store_holding(store: Store, events: list[AuditEvent]) -> dict[str, tuple[int, str]]:
    """Store ``events``, then turn the store into a version 2 one; the heads it held."""
    first = store.sink()
    first.append(events)
    heads = first.trace_heads()
    first.close()
    _downgrade_to_version_2(store)
    return heads


def _downgrade_to_version_1(store: Store) -> None:
    """Turn a fresh store into what toolbox wrote before version 2: no parent_run_id column."""
    _downgrade_to_version_2(store)
    store.execute(
        "DROP INDEX IF EXISTS ix_audit_events_parent_run_id",
        "ALTER TABLE audit_events DROP COLUMN parent_run_id",
        "DELETE FROM audit_schema_version WHERE version = 2",
        "INSERT INTO audit_schema_version (version, applied_at) VALUES (1, 'before')",
    )


def test_schema_version_is_recorded(store: Store) -> None:
    """First use creates the tables and records schema version 6 (SQLite) or 3 (PostgreSQL)."""
    sink = store.sink()
    assert (sql.SCHEMA_VERSION, sql.POSTGRES_SCHEMA_VERSION) == (6, 3)
    assert sink.schema_version() == _current(store)
    assert _versions(store) == [_current(store)]
    store.sink().append([event()])  # a second sink finds the schema and leaves it alone
    assert _versions(store) == [_current(store)]


def test_a_fresh_store_has_the_current_layout(store: Store) -> None:
    """Status and parent run indexed where set only; on SQLite the heads are one B-tree, and the
    pending events one more (with its trigger and the view of both tables); PostgreSQL has none."""
    store.sink().schema_version()
    assert "status IS NOT NULL" in _index_definition(store, "ix_audit_events_status")
    assert "parent_run_id IS NOT NULL" in _index_definition(store, "ix_audit_events_parent_run_id")
    assert "IS NOT NULL" not in _index_definition(store, "ix_audit_events_tenant_timestamp")
    if store.kind == "sqlite":
        assert "WITHOUT ROWID" in _heads_table_definition(store)
        assert _sqlite_objects(store) == {
            ("table", "audit_pending"),
            ("trigger", "audit_pending_unique"),
            ("view", "audit_event_log"),
        }
        pending = store.execute("SELECT sql FROM sqlite_master WHERE name = 'audit_pending'")[0][0]
        assert "WITHOUT ROWID" in pending
    else:
        rows = store.execute("SELECT to_regclass('audit_pending') IS NULL")
        assert rows[0][0] is True


def _sqlite_objects(store: Store) -> set[tuple[str, str]]:
    """The pending table's schema objects (its own index is its key: none other)."""
    rows = store.execute(
        "SELECT type, name FROM sqlite_master WHERE name IN ('audit_pending', 'audit_pending_unique', "
        "'audit_event_log') OR (tbl_name = 'audit_pending' AND type = 'index')"
    )
    return {(str(kind), str(name)) for kind, name in rows}


def test_newer_schema_is_refused(store: Store) -> None:
    """A store written by a newer toolbox raises, telling to upgrade."""
    store.sink().schema_version()
    store.execute("INSERT INTO audit_schema_version (version, applied_at) VALUES (99, 'later')")
    with pytest.raises(AuditSinkError, match="upgrade toolbox"):
        store.sink().append([event()])


def test_older_schema_is_migrated(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """An older store gets every missing migration, each recorded as a version."""
    store.sink().append([event()])
    applied: list[object] = []
    current = _current(store)
    monkeypatch.setattr(
        sql, "SCHEMA_VERSION" if store.kind == "sqlite" else "POSTGRES_SCHEMA_VERSION", current + 1
    )
    monkeypatch.setattr(sql, "MIGRATIONS", {current: applied.append})
    sink = store.sink()
    assert sink.schema_version() == current + 1
    assert len(applied) == 1
    assert _versions(store) == [current, current + 1]
    sink.append([event()])
    assert [r.sequence for r in sink.read_trace("trace-1")] == [1, 2]


def test_version_2_store_is_migrated_keeping_events_and_heads(store: Store) -> None:
    """A version 2 store gets the partial indexes (and SQLite its new heads table); nothing is lost."""
    heads = _version_2_store_holding(
        store, [event("a", status="SUCCESS"), event("a"), event("b", parent_run_id="a")]
    )
    assert "IS NOT NULL" not in _index_definition(store, "ix_audit_events_status")
    sink = store.sink()
    assert sink.schema_version() == _current(store)
    assert _versions(store) == list(range(2, _current(store) + 1))
    assert sink.trace_heads() == heads
    assert "status IS NOT NULL" in _index_definition(store, "ix_audit_events_status")
    assert "parent_run_id IS NOT NULL" in _index_definition(store, "ix_audit_events_parent_run_id")
    if store.kind == "sqlite":
        assert "WITHOUT ROWID" in _heads_table_definition(store)
    sink.append([event("a")])
    records = sink.read_trace("a")
    assert [r.sequence for r in records] == [1, 2, 3]
    assert verify_chain(records) == []
    assert sink.trace_heads("a") == {"a": (3, records[-1].hash)}
    assert [r.trace_id for r in sink.query(AuditQuery(status="SUCCESS"))] == ["a"]
    assert [r.trace_id for r in sink.query(AuditQuery(parent_run_id="a"))] == ["b"]


def test_a_failed_migration_leaves_the_version_2_store_as_it_was(sqlite_store: Store) -> None:
    """The migration runs in the schema transaction: when it fails, the store stays at version 2."""
    heads = _version_2_store_holding(sqlite_store, [event("a"), event("a")])
    sqlite_store.execute("CREATE TABLE audit_trace_heads_v3 (blocker TEXT)")  # the name the migration needs
    with pytest.raises(AuditSinkError, match="prepare the schema"):
        sqlite_store.sink().schema_version()
    assert _versions(sqlite_store) == [2]
    assert "WITHOUT ROWID" not in _heads_table_definition(sqlite_store)
    assert "IS NOT NULL" not in _index_definition(sqlite_store, "ix_audit_events_status")
    sqlite_store.execute("DROP TABLE audit_trace_heads_v3")
    sink = sqlite_store.sink()
    assert sink.schema_version() == sql.SCHEMA_VERSION  # no restart of anything: the next sink migrates
    assert sink.trace_heads() == heads


def test_version_1_store_is_migrated_to_the_current_version(store: Store) -> None:
    """A version 1 store gets parent_run_id, then the partial indexes; old events still verify."""
    store.sink().append([event("child"), event("parent")])
    _downgrade_to_version_1(store)
    sink = store.sink()
    assert sink.schema_version() == _current(store)
    assert _versions(store) == list(range(1, _current(store) + 1))
    old = sink.read_trace("child")
    assert [r.parent_run_id for r in old] == [None]
    sink.append([event("child", parent_run_id="parent"), event("grandchild", parent_run_id="child")])
    records = sink.read_trace("child")
    assert [r.parent_run_id for r in records] == [None, "parent"]
    assert verify_chain(records) == []
    assert [r.trace_id for r in sink.query(AuditQuery(parent_run_id="parent"))] == ["child"]
    assert [r.trace_id for r in sink.query(AuditQuery(parent_run_id="child"))] == ["grandchild"]
    assert "parent_run_id IS NOT NULL" in _index_definition(store, "ix_audit_events_parent_run_id")
    # The parent is covered by the chain hash: editing it breaks the chain.
    store.tamper("UPDATE audit_events SET parent_run_id = 'other' WHERE trace_id = 'child' AND sequence = 2")
    assert verify_chain(sink.read_trace("child")) != []


@pytest.mark.parametrize("column", ["status", "parent_run_id"])
def test_a_filter_on_a_value_uses_the_partial_index(store: Store, column: str) -> None:
    """``column = ?`` implies ``IS NOT NULL``: both engines may read the partial index for it."""
    sink = store.sink()
    sink.append([event(f"t{n}", status="SUCCESS" if n % 7 == 0 else None) for n in range(300)])
    index = f"ix_audit_events_{column}"
    query = f"SELECT event_id FROM audit_events WHERE {column} = :wanted"
    if store.kind == "sqlite":
        plan = " ".join(str(row[-1]) for row in store.execute(f"EXPLAIN QUERY PLAN {query}", wanted="x"))
    else:
        rows = store.execute("SET LOCAL enable_seqscan = off", f"EXPLAIN {query}", wanted="x")
        plan = " ".join(str(row[0]) for row in rows)
    assert index in plan, plan


def test_processes_opening_a_version_2_store_at_once_migrate_it_once(store: Store) -> None:
    """Processes open an old store at the same moment: one migrates, the others find it done (4 in
    the full tier, 2 in the default tier)."""
    heads = _version_2_store_holding(store, [event("old"), event("old")])
    count = sized(2, 4)
    context = process_context()
    start = context.Barrier(count)
    processes = [
        context.Process(
            target=open_then_append_worker, args=(store.kind, store.location, store.schema, f"p{n}", start)
        )
        for n in range(count)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    assert [p.exitcode for p in processes] == [0] * count
    assert _versions(store) == list(range(2, _current(store) + 1))
    sink = store.sink()
    assert {t: h for t, h in sink.trace_heads().items() if t == "old"} == heads
    for n in range(count):
        records = sink.read_trace(f"p{n}")
        assert [r.sequence for r in records] == [1]
        assert verify_chain(records) == []
    if store.kind == "sqlite":
        assert "WITHOUT ROWID" in _heads_table_definition(store)


def test_version_3_store_is_migrated_keeping_events_and_heads(store: Store) -> None:
    """SQLite gains audit_pending, its trigger and the view; PostgreSQL stays at 3. Nothing is lost."""
    first = store.sink()
    first.append([event("a"), event("a"), event("b")])
    heads = first.trace_heads()
    first.close()
    _downgrade_to_version_3(store)
    sink = store.sink()
    assert sink.schema_version() == _current(store)
    assert _versions(store) == ([3, 4, 5, 6] if store.kind == "sqlite" else [3])
    assert sink.trace_heads() == heads
    if store.kind == "sqlite":
        assert len(_sqlite_objects(store)) == 3
    sink.append([event("a")])
    records = sink.read_trace("a")
    assert [r.sequence for r in records] == [1, 2, 3]
    assert verify_chain(records) == []
    assert sink.trace_heads("a") == {"a": (3, records[-1].hash)}


def test_a_postgres_store_is_left_at_version_3_for_the_previous_release(postgres_store: Store) -> None:
    """A rolling upgrade: the previous release (version 3) still opens a store this one wrote."""
    postgres_store.sink().append([event("t")])
    assert _versions(postgres_store) == [3]
    assert postgres_store.execute("SELECT to_regclass('audit_pending') IS NULL")[0][0] is True


def test_a_version_4_store_gets_the_credential_column_and_old_events_still_verify(store: Store) -> None:
    """SQLite migrates 4 -> 5; PostgreSQL, kept at version 3 for the previous release, gets the
    column where it is missing. Events stored before verify; the credential is covered by the hash."""
    first = store.sink()
    first.append([event("a"), event("a")])
    first.close()
    _downgrade_to_version_4(store)
    sink = store.sink()
    assert sink.schema_version() == _current(store)
    assert _versions(store) == ([4, 5, 6] if store.kind == "sqlite" else [3])
    sink.append([event("a", credential="api-key:ci-bot")])
    records = sink.read_trace("a")
    assert [r.credential for r in records] == [None, None, "api-key:ci-bot"]
    assert verify_chain(records) == []
    assert [r.credential for r in sink.query(AuditQuery(tool="calc"))][-1] == "api-key:ci-bot"
    store.tamper("UPDATE audit_events SET credential = 'api-key:other' WHERE trace_id = 'a' AND sequence = 3")
    assert verify_chain(sink.read_trace("a")) != []


def test_a_version_5_store_gets_the_merkle_log_tables_and_keeps_its_events(store: Store) -> None:
    """SQLite migrates 5 -> 6; PostgreSQL, kept at version 3, gets the log tables from its first
    checkpoint (never from a writer, whose role may lack CREATE and never needs them)."""
    from toolbox.audit._log import MerkleLog

    first = store.sink()
    first.append([event("a"), event("a")])
    first.close()
    _downgrade_to_version_5(store)
    sink = store.sink()
    assert sink.schema_version() == _current(store)
    assert _versions(store) == ([5, 6] if store.kind == "sqlite" else [3])
    sink.append([event("a")])
    if store.kind == "postgres":
        assert store.execute("SELECT to_regclass('audit_log') IS NULL")[0][0] is True
    assert MerkleLog(sink).sequence() == 3
    assert store.execute("SELECT COUNT(*) FROM audit_log") == [(3,)]
    assert store.execute("SELECT COUNT(*) FROM audit_checkpoints") == [(0,)]
    assert verify_chain(sink.read_trace("a")) == []
