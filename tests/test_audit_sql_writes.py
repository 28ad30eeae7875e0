"""SQL sinks' write paths: trace heads, idempotent appends, large batches, PostgreSQL connections."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from audit_sql_support import Store, event, make_store
from toolbox import ExecutionContext
from toolbox.audit import AuditEvent, AuditQuery, AuditSinkError, AuditTrail, verify_chain, verify_heads
from toolbox.audit.sinks._sql import SqlSink

AUDITOR = ExecutionContext(tenant="ops", principal="auditor", roles={"auditor"})


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from make_store(request.param, tmp_path)


def support_query() -> AuditQuery:
    return AuditQuery(limit=10**9)


def run_threads(count: int, target: Callable[[int], None]) -> list[threading.Thread]:
    threads = [threading.Thread(target=target, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    return threads


# -- trace heads: a removed last event, a removed trace -------------------------------


def test_removed_last_event_and_removed_trace_are_found(store: Store) -> None:
    sink = store.sink()
    sink.append([event("kept") for _ in range(3)])
    sink.append([event("cut") for _ in range(4)])
    sink.append([event("gone") for _ in range(2)])
    store.tamper("DELETE FROM audit_events WHERE trace_id = 'cut' AND sequence >= 3")
    store.tamper("DELETE FROM audit_events WHERE trace_id = 'gone'")
    every = sink.query(support_query())
    assert verify_chain(every) == []  # what is left still chains
    problems = verify_heads(every, sink.trace_heads())
    assert [(p.trace_id, p.sequence, p.event_id) for p in problems] == [("cut", 4, "-"), ("gone", 2, "-")]
    assert "events 3 to 4 removed from the end" in str(problems[0])
    assert "trace removed" in str(problems[1])
    trail = AuditTrail(sink, fallback_path=None)
    assert [p.problem for p in trail.verify("gone", context=AUDITOR)] == [problems[1].problem]
    assert trail.verify("kept", context=AUDITOR) == []


def test_an_event_stored_behind_the_sinks_back_is_found(store: Store) -> None:
    """A chained row added by raw SQL (the head not moved) and a replaced last event are named."""
    sink = store.sink()
    sink.append([event("t") for _ in range(2)])
    store.execute("UPDATE audit_trace_heads SET last_sequence = 1 WHERE trace_id = 't'")
    problems = verify_heads(sink.read_trace("t"), sink.trace_heads("t"))
    assert len(problems) == 1 and "not recorded by the trace head" in problems[0].problem
    store.execute("UPDATE audit_trace_heads SET last_sequence = 2, last_hash = 'f00d' WHERE trace_id = 't'")
    problems = verify_heads(sink.read_trace("t"), sink.trace_heads("t"))
    assert len(problems) == 1 and "replaced" in problems[0].problem
    store.execute("DELETE FROM audit_trace_heads WHERE trace_id = 't'")
    problems = verify_heads(sink.read_trace("t"), sink.trace_heads())
    assert len(problems) == 1 and "no head" in problems[0].problem


def test_append_missing_stores_each_event_once(store: Store) -> None:
    sink = store.sink()
    events = [event("r") for _ in range(5)]
    assert sink.append_missing(events[:3]) == 3
    assert sink.append_missing(events) == 2
    assert sink.append_missing([*events, events[0]]) == 0
    assert sink.append_missing([]) == 0
    records = sink.read_trace("r")
    assert [r.event_id for r in records] == [e.event_id for e in events]
    assert verify_chain(records) == [] and verify_heads(records, sink.trace_heads()) == []


# -- PostgreSQL connections: pinged when idle, replaced when dead ---------------------


def _kill_pooled_connection(store: Store, sink: SqlSink) -> None:
    with sink.engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
    store.execute("SELECT pg_terminate_backend(:pid)", pid=pid)  # only this sink's own connection


def test_an_idle_connection_killed_by_the_server_is_replaced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from toolbox.audit.sinks import _postgres as postgres

    store = next(stores := make_store("postgres", tmp_path))
    try:
        monkeypatch.setattr(postgres, "_PING_AFTER_IDLE", 0.0)  # every checkout counts as idle
        sink = store.sink()
        sink.append([event("alive")])
        _kill_pooled_connection(store, sink)
        sink.append([event("alive")])  # the ping fails, the pool connects again: no error
        assert [r.sequence for r in sink.read_trace("alive")] == [1, 2]
        monkeypatch.setattr(postgres, "_PING_AFTER_IDLE", 3600.0)  # a busy connection is not pinged
        _kill_pooled_connection(store, sink)
        with pytest.raises(AuditSinkError):
            sink.append([event("alive")])  # fails closed once ...
        sink.append([event("alive")])  # ... and the next write reconnects
        assert [r.sequence for r in sink.read_trace("alive")] == [1, 2, 3]
    finally:
        next(stores, None)


def test_a_large_batch_over_several_traces_is_stored_in_order(store: Store) -> None:
    """500 events over 7 traces in one append (PostgreSQL: the COPY path), awkward text included."""
    sink = store.sink()
    sink.append([event("t-0")])
    texts = [
        "plain",
        "tab\there",
        "new\nline",
        "back\\slash",
        "quote'\"",
        "\u2028sep",
        "nul-free \x7f",
        "é中🙂",
    ]
    batch = [event(f"t-{n % 7}", intent_text=texts[n % len(texts)], attempt=n) for n in range(500)]
    sink.append(batch)
    for trace in range(7):
        records = sink.read_trace(f"t-{trace}")
        expected = [e.event_id for e in batch if e.trace_id == f"t-{trace}"]
        assert [r.event_id for r in records][-len(expected) :] == expected
        assert [r.sequence for r in records] == list(range(1, len(records) + 1))
        assert verify_chain(records) == []
    stored = {r.event_id: r for r in sink.query(support_query())}
    assert [stored[e.event_id].intent_text for e in batch] == [e.intent_text for e in batch]
    assert verify_heads(list(stored.values()), sink.trace_heads()) == []


def test_concurrent_replays_of_the_same_events_store_each_once(store: Store) -> None:
    """4 threads, each with its own sink, replay the same 60 events: stored once, chain intact."""
    events = [event(f"replayed-{n % 3}") for n in range(60)]
    sinks = [store.sink() for _ in range(4)]
    for sink in sinks:
        sink.schema_version()
    counts: list[int] = []
    errors: list[BaseException] = []

    def replay(n: int) -> None:
        try:
            counts.append(sinks[n].append_missing(events))
        except BaseException as exc:
            errors.append(exc)

    for thread in run_threads(4, replay):
        thread.join(60)
    assert errors == [] and sorted(counts) == [0, 0, 0, 60]
    every = sinks[0].query(support_query())
    assert sorted(r.event_id for r in every) == sorted(e.event_id for e in events)
    assert verify_chain(every) == [] and verify_heads(every, sinks[0].trace_heads()) == []


def test_postgres_without_pipeline_mode_writes_the_same(tmp_path: Path) -> None:
    """An older libpq (no pipeline mode): the same rows, gap-free, and a failed group stores nothing."""
    stores = make_store("postgres", tmp_path)
    store = next(stores)
    try:
        sink = store.sink()
        sink._pipelines = False  # type: ignore[attr-defined]  # as with libpq 13
        threads = run_threads(
            8, lambda n: [sink.append([event("old-libpq"), event(f"o-{n}")]) for _ in range(10)]
        )
        for thread in threads:
            thread.join(60)
        records = sink.read_trace("old-libpq")
        assert [r.sequence for r in records] == list(range(1, 81))
        assert verify_heads(records, sink.trace_heads("old-libpq")) == [] and verify_chain(records) == []
        with pytest.raises(AuditSinkError):
            sink.append([event("old-libpq"), dup(records[0])])
        assert len(sink.read_trace("old-libpq")) == 80
    finally:
        next(stores, None)


def dup(record: Any) -> AuditEvent:
    """An event with a stored event's id: the database refuses it."""
    copy = event(record.trace_id)
    copy.event_id = record.event_id
    return copy
