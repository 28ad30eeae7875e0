"""SQL audit sinks: SQLite and PostgreSQL schema, chaining, concurrency, tampering and faults."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from audit_sql_support import POSTGRES_URL, Store, append_worker, event, make_store, process_context
from tiers import sized
from toolbox.audit import AuditQuery, AuditSink, AuditSinkError, PostgresSink, SqliteSink, verify_chain
from toolbox.audit._events import GENESIS_HASH

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from make_store(request.param, tmp_path)


@pytest.fixture
def postgres_store(tmp_path: Path) -> Iterator[Store]:
    yield from make_store("postgres", tmp_path)


def test_sinks_satisfy_the_protocol(store: Store) -> None:
    """Both sinks are AuditSinks."""
    assert isinstance(store.sink(), AuditSink)


def test_append_then_read_trace_in_order_with_intact_chain(store: Store) -> None:
    """Events come back in sequence order, every field kept, the chain intact."""
    sink = store.sink()
    sink.append([event(rule_ids=("allow:tool:calc", "r2"), duration=0.25, attempt=1, tenant="acme")])
    sink.append([event(status="ok"), event("other"), event(intent_text="héllo ✓")])
    records = sink.read_trace("trace-1")
    assert [r.sequence for r in records] == [1, 2, 3]
    assert records[0].previous_hash == GENESIS_HASH
    assert [r.previous_hash for r in records[1:]] == [r.hash for r in records[:-1]]
    assert records[0].rule_ids == ["allow:tool:calc", "r2"]
    assert (records[0].duration, records[0].attempt, records[0].tenant) == (0.25, 1, "acme")
    assert records[2].intent_text == "héllo ✓"
    assert verify_chain(records) == []
    assert [r.sequence for r in sink.read_trace("other")] == [1]
    assert sink.read_trace("missing") == []


def test_one_batch_may_interleave_traces(store: Store) -> None:
    """Each trace of a mixed batch gets its own gap-free sequence."""
    sink = store.sink()
    sink.append([event("a"), event("b"), event("a"), event("b"), event("a")])
    sink.append([event("b"), event("a")])
    assert [r.sequence for r in sink.read_trace("a")] == [1, 2, 3, 4]
    assert [r.sequence for r in sink.read_trace("b")] == [1, 2, 3]
    assert verify_chain(sink.read_trace("a") + sink.read_trace("b")) == []


def test_query_filters_oldest_first(store: Store) -> None:
    """Tenant, tool, principal, status, since/until and limit all narrow the result."""
    sink = store.sink()
    base = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    events = []
    for index, (tenant, tool, principal, status) in enumerate(
        [
            ("acme", "calc", "alice", "ok"),
            ("acme", "http", "bob", "error"),
            ("globex", "calc", "alice", "ok"),
            ("acme", "calc", "bob", "ok"),
        ]
    ):
        item = event(f"t{index}", tenant=tenant, tool=tool, principal=principal, status=status)
        item.timestamp = (base + timedelta(minutes=index)).timestamp()
        events.append(item)
    sink.append(list(reversed(events)))

    def traces(query: AuditQuery) -> list[str]:
        return [r.trace_id for r in sink.query(query)]

    assert traces(AuditQuery()) == ["t0", "t1", "t2", "t3"]
    assert traces(AuditQuery(tenant="acme")) == ["t0", "t1", "t3"]
    assert traces(AuditQuery(tool="calc", principal="bob")) == ["t3"]
    assert traces(AuditQuery(status="error")) == ["t1"]
    assert traces(AuditQuery(since=base + timedelta(minutes=1))) == ["t1", "t2", "t3"]
    assert traces(AuditQuery(until=base + timedelta(minutes=2))) == ["t0", "t1"]
    naive = (base + timedelta(minutes=1)).replace(tzinfo=None)
    assert traces(AuditQuery(since=naive, until=naive + timedelta(minutes=2))) == ["t1", "t2"]
    other_zone = (base + timedelta(minutes=3)).astimezone(timezone(timedelta(hours=-5)))
    assert traces(AuditQuery(since=other_zone)) == ["t3"]
    assert traces(AuditQuery(tenant="acme", limit=2)) == ["t0", "t1"]
    assert traces(AuditQuery(limit=0)) == []
    assert traces(AuditQuery(tenant="nobody")) == []
    assert traces(AuditQuery(tool="calc", operation="add")) == ["t0", "t2", "t3"]
    assert traces(AuditQuery(tool="calc", operation="nope")) == []


def test_reopening_continues_the_chain(store: Store) -> None:
    """A new sink on an existing store continues each trace's sequence and hash chain."""
    first = store.sink()
    first.append([event(), event()])
    first.close()
    second = store.sink()
    second.append([event()])
    records = second.read_trace("trace-1")
    assert [r.sequence for r in records] == [1, 2, 3]
    assert records[2].previous_hash == records[1].hash
    assert verify_chain(records) == []


def test_concurrent_threads_on_one_trace_stay_gap_free(store: Store) -> None:
    """8 threads x 50 appends on one trace: sequences exactly 1..400, chain intact."""
    sink = store.sink()
    sink.schema_version()
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            barrier.wait(10)
            for _ in range(50):
                sink.append([event("busy")])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    records = sink.read_trace("busy")
    assert [r.sequence for r in records] == list(range(1, 401))
    assert len({r.event_id for r in records}) == 400
    assert verify_chain(records) == []


def test_concurrent_processes_on_one_trace_stay_gap_free(store: Store) -> None:
    """Processes, each with its own sink, x 50 appends on one trace: 1..n, chain intact (4 processes
    in the full tier, 2 in the default tier)."""
    store.sink().schema_version()
    count = sized(2, 4)
    context = process_context()
    start = context.Barrier(count)
    processes = [
        context.Process(
            target=append_worker, args=(store.kind, store.location, store.schema, "shared", 50, start)
        )
        for _ in range(count)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [p.exitcode for p in processes] == [0] * count
    records = store.sink().read_trace("shared")
    assert [r.sequence for r in records] == list(range(1, 50 * count + 1))
    assert verify_chain(records) == []


@pytest.mark.parametrize("tampering", ["edit", "delete", "swap"])
def test_tampering_in_the_database_is_detected(store: Store, tampering: str) -> None:
    """Editing, deleting or reordering stored rows breaks the chain at the named event."""
    sink = store.sink()
    sink.append([event(status="ok") for _ in range(5)])
    victim = sink.read_trace("trace-1")[2]
    if tampering == "edit":
        store.tamper("UPDATE audit_events SET status = 'forged' WHERE event_id = :id", id=victim.event_id)
    elif tampering == "delete":
        store.tamper("DELETE FROM audit_events WHERE event_id = :id", id=victim.event_id)
    else:
        store.tamper(
            "UPDATE audit_events SET sequence = -1 WHERE trace_id = 'trace-1' AND sequence = 3",
            "UPDATE audit_events SET sequence = 3 WHERE trace_id = 'trace-1' AND sequence = 4",
            "UPDATE audit_events SET sequence = 4 WHERE trace_id = 'trace-1' AND sequence = -1",
        )
    problems = verify_chain(sink.read_trace("trace-1"))
    assert problems
    named = {p.event_id for p in problems}
    if tampering == "edit":
        assert named == {victim.event_id}
        assert "edited" in str(problems[0])
    elif tampering == "delete":
        assert problems[0].sequence == 4
        assert "sequence 3 is missing" in str(problems[0])
    else:
        assert victim.event_id in named
        assert {3, 4} <= {p.sequence for p in problems}


def test_a_failed_batch_stores_nothing_and_leaks_nothing(store: Store) -> None:
    """A batch the database rejects is rolled back whole; the error names no event content."""
    sink = store.sink()
    sink.append([event()])
    bad = event(intent_text="secret-intent")
    bad.duration = object()  # type: ignore[assignment]  # no driver can bind this
    with pytest.raises(AuditSinkError) as caught:
        sink.append([event(intent_text="secret-intent"), bad])
    message = str(caught.value)
    assert "secret-intent" not in message
    assert "audit store" in message
    assert caught.value.__cause__ is None
    sink.append([event()])
    records = sink.read_trace("trace-1")
    assert [r.sequence for r in records] == [1, 2]
    assert verify_chain(records) == []


def test_a_closed_sink_refuses_work(store: Store) -> None:
    """After close, every call raises AuditSinkError."""
    sink = store.sink()
    sink.append([event()])
    sink.close()
    with pytest.raises(AuditSinkError, match="closed"):
        sink.append([event()])
    with pytest.raises(AuditSinkError, match="closed"):
        sink.read_trace("trace-1")


def test_malformed_stored_rows_raise_without_content(store: Store) -> None:
    """A row that no longer validates raises AuditSinkError, not a pydantic dump of the row."""
    sink = store.sink()
    sink.append([event(intent_text="secret-intent")])
    store.tamper("UPDATE audit_events SET type = 'secret-intent'")
    with pytest.raises(AuditSinkError, match="malformed") as caught:
        sink.read_trace("trace-1")
    assert "secret-intent" not in str(caught.value)


# -- SQLite specifics -------------------------------------------------------------


def test_sqlite_file_is_created_on_first_use_in_wal_mode(tmp_path: Path) -> None:
    """The constructor touches nothing; the first append creates a WAL database."""
    path = tmp_path / "trail.db"
    sink = SqliteSink(path)
    assert not path.exists()
    sink.append([event()])
    assert path.is_file()
    assert sink.path == path
    with sink.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    sink.close()


def test_sqlite_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    """A database in a directory that does not exist raises, saying so."""
    sink = SqliteSink(tmp_path / "nope" / "audit.db")
    with pytest.raises(AuditSinkError, match="does not exist"):
        sink.append([event()])
    sink.close()


@pytest.mark.parametrize("where", ["under-a-file", "is-a-directory", "not-a-database", "in-proc"])
def test_sqlite_unwritable_path_raises_audit_sink_error(tmp_path: Path, where: str) -> None:
    """Paths nobody (root included) can use as a database raise AuditSinkError on append."""
    if where == "under-a-file":
        (tmp_path / "file").write_text("x")
        path = tmp_path / "file" / "audit.db"
    elif where == "is-a-directory":
        path = tmp_path / "audit.db"
        path.mkdir()
    elif where == "not-a-database":
        path = tmp_path / "audit.db"
        path.write_bytes(b"this is not a database file, " * 200)
    else:
        path = Path("/proc/toolbox-audit-test.db")
    sink = SqliteSink(path)
    with pytest.raises(AuditSinkError, match="SQLite audit store") as caught:
        sink.append([event(intent_text="secret-intent")])
    assert "secret-intent" not in str(caught.value)
    with pytest.raises(AuditSinkError):
        sink.read_trace("trace-1")
    sink.close()


def test_sqlite_rejects_memory_databases() -> None:
    """SqliteSink is for files; memory belongs to MemorySink."""
    with pytest.raises(ValueError, match="MemorySink"):
        SqliteSink(":memory:")


# -- PostgreSQL specifics ---------------------------------------------------------


def test_postgres_unreachable_server_fails_fast_without_password() -> None:
    """A closed port raises AuditSinkError (bounded by connect_timeout); the message hides the password."""
    sink = PostgresSink("postgresql+psycopg://auditor:hunter2-secret@127.0.0.1:1/audit", connect_timeout=2)
    with pytest.raises(AuditSinkError) as caught:
        sink.append([event(intent_text="secret-intent")])
    message = str(caught.value)
    assert "hunter2-secret" not in message
    assert "secret-intent" not in message
    assert "PostgreSQL audit store 127.0.0.1:1/audit" in message
    assert caught.value.__cause__ is None
    sink.close()


def test_postgres_plain_url_uses_psycopg(postgres_store: Store) -> None:
    """postgresql:// URLs are served by psycopg 3; other drivers are refused."""
    plain = make_url(POSTGRES_URL).set(drivername="postgresql")
    sink = PostgresSink(plain, schema=postgres_store.schema)
    sink.append([event()])
    assert sink.engine.dialect.driver == "psycopg"
    assert sink.schema == postgres_store.schema
    sink.close()
    with pytest.raises(ValueError, match="postgresql"):
        PostgresSink("mysql://u:p@localhost/db")
    with pytest.raises(ValueError, match="cannot be parsed") as caught:
        PostgresSink("not a url :: hunter2-secret")
    assert "hunter2-secret" not in str(caught.value)


def test_postgres_schema_is_created_if_absent(postgres_store: Store) -> None:
    """The tables land in the sink's own schema, created on first use."""
    postgres_store.sink().append([event()])
    rows = postgres_store.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = :schema ORDER BY table_name",
        schema=postgres_store.schema,
    )
    assert [r[0] for r in rows] == [
        "audit_checkpoints",
        "audit_events",
        "audit_log",
        "audit_log_tiles",
        "audit_schema_version",
        "audit_trace_heads",
    ]


def test_postgres_without_psycopg_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing driver raises ImportError naming the extra to install."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError, match=r"toolbox-registry\[postgres\]"):
        PostgresSink(POSTGRES_URL)


HOSTILE_TEXT = [
    'it\'s "quoted" \\ back\\slash \\u0041 not an escape',
    "'); DROP TABLE audit_events; --",
    '{"json": [1, 2, {"nested": null}]}',
    "tab\tnewline\ncarriage\rbell\x07escape\x1b",
    "émoji \U0001f9f0 and \U0001d518\U0001d52b (outside the BMP), RTL \u202e, zero-width \u200b",
    "x" * 20_000,
    "",
]


@pytest.mark.parametrize("text", HOSTILE_TEXT, ids=range(len(HOSTILE_TEXT)))
def test_hostile_text_and_odd_numbers_round_trip_exactly(store: Store, text: str) -> None:
    """Whatever a field holds comes back byte for byte (the rows travel as JSON to PostgreSQL)."""
    sink = store.sink()
    durations = [0.1 + 0.2, 1e-300, 123456789.123456789, 0.0]
    events = [
        event(intent_text=text, payload_summary=text, principal=text, rule_ids=(text, "r2"), duration=d)
        for d in durations
    ]
    sink.append(events)
    records = sink.read_trace("trace-1")
    assert [r.intent_text for r in records] == [text] * 4
    assert [r.payload_summary for r in records] == [text] * 4
    assert [r.rule_ids for r in records] == [[text, "r2"]] * 4
    assert [r.duration for r in records] == durations
    assert verify_chain(records) == []


def test_postgres_writes_one_group_at_a_time_unless_told(postgres_store: Store) -> None:
    """The default makes the largest groups (the fewest transactions); a bad count is refused."""
    assert postgres_store.schema is not None
    sink = PostgresSink(postgres_store.location, schema=postgres_store.schema)
    assert sink._group._max_writers == 1
    wider = PostgresSink(postgres_store.location, schema=postgres_store.schema, concurrent_writes=3)
    assert wider._group._max_writers == 3
    for bad in (0, -1, True, 2.5, "2"):
        with pytest.raises(ValueError, match="concurrent_writes must be a positive integer"):
            PostgresSink(postgres_store.location, schema=postgres_store.schema, concurrent_writes=bad)  # type: ignore[arg-type]
