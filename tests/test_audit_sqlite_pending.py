"""SqliteSink's pending events: small commits go to ``audit_pending``, folds move them to ``audit_events``.

A STRICT call's commit writes one B-tree instead of seven; readers, replay,
verification and the constraints of ``audit_events`` must not see a
difference. These tests hunt for one: order across the two tables,
duplicates on either side, a fold that cannot run, several processes folding.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolbox.audit.sinks._sqlite as sqlite_module
from audit_sql_support import Store, append_worker, assert_intact, event, make_store, process_context
from tiers import sized
from toolbox.audit import AuditQuery, AuditSinkError, SqliteSink

EVERYTHING = AuditQuery(limit=10**6)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    yield from make_store("sqlite", tmp_path)


def counts(store: Store) -> tuple[int, int]:
    """(events moved to audit_events, events pending)."""
    moved = store.execute("SELECT count(*) FROM audit_events")[0][0]
    pending = store.execute("SELECT count(*) FROM audit_pending")[0][0]
    return int(moved), int(pending)


def test_small_groups_wait_in_pending_and_a_large_one_moves_them_first(store: Store) -> None:
    sink = store.sink()
    assert isinstance(sink, SqliteSink)
    sink.append([event("t"), event("t"), event("t")])
    sink.append([event("t")])
    assert counts(store) == (0, 4)
    sink.append([event("t") for _ in range(sqlite_module._PENDING_GROUP + 1)])  # an ASYNC-sized drain
    assert counts(store) == (4 + sqlite_module._PENDING_GROUP + 1, 0)
    assert_intact(sink, "t", 4 + sqlite_module._PENDING_GROUP + 1)


def test_a_sink_folds_once_it_has_added_enough(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_module, "_FOLD_AT", 10)
    sink = store.sink()
    for _ in range(4):
        sink.append([event("t"), event("t")])
    assert counts(store) == (0, 8)
    sink.append([event("t"), event("t")])  # the 10th event: this commit moves all ten
    assert counts(store) == (10, 0)
    sink.append([event("t")])
    assert counts(store) == (10, 1)
    assert_intact(sink, "t", 11)
    assert len(sink.query(EVERYTHING)) == 11


def test_reads_merge_both_tables_in_order(store: Store) -> None:
    """Oldest first across the tables, filters and the limit applied to both."""
    sink = store.sink()
    sink.append([event("t", tool="a") for _ in range(3)])
    sink.append([event("u", tool="b") for _ in range(sqlite_module._PENDING_GROUP + 1)])  # moves t's
    sink.append([event("t", tool="a") for _ in range(3)])  # pending
    every = sink.query(EVERYTHING)
    assert [(r.trace_id, r.sequence) for r in every[:3]] == [("t", 1), ("t", 2), ("t", 3)]
    assert [r.timestamp for r in every] == sorted(r.timestamp for r in every)
    assert [r.sequence for r in sink.query(AuditQuery(tool="a", limit=4))] == [1, 2, 3, 4]
    assert [r.sequence for r in sink.read_trace("t")] == [1, 2, 3, 4, 5, 6]
    view = store.execute("SELECT count(*) FROM audit_event_log")[0][0]
    assert view == len(every) == 6 + sqlite_module._PENDING_GROUP + 1


def test_an_event_id_stored_on_either_side_is_refused(store: Store) -> None:
    """As audit_events' primary key would: the whole group fails, nothing is stored, heads stay."""
    sink = store.sink()
    sink.append([event("moved") for _ in range(sqlite_module._PENDING_GROUP + 1)])
    sink.append([event("pending")])
    for taken in (sink.read_trace("moved")[0].event_id, sink.read_trace("pending")[0].event_id):
        clash = event("other")
        clash.event_id = taken
        heads = sink.trace_heads()
        with pytest.raises(AuditSinkError, match="cannot store events: IntegrityError"):
            sink.append([event("other"), clash])
        assert sink.trace_heads() == heads and sink.read_trace("other") == []
    sink.append([event("other")])
    assert_intact(sink, "other", 1)


def test_a_trace_sequence_moved_already_is_refused(store: Store) -> None:
    """A head moved back by hand would chain a sequence audit_events holds: refused, not folded later."""
    sink = store.sink()
    sink.append([event("t") for _ in range(sqlite_module._PENDING_GROUP + 1)])
    store.execute("UPDATE audit_trace_heads SET last_sequence = 1 WHERE trace_id = 't'")
    with pytest.raises(AuditSinkError, match="stored already"):
        sink.append([event("t")])
    assert counts(store) == (sqlite_module._PENDING_GROUP + 1, 0)


def test_a_fold_that_cannot_run_fails_its_write_and_loses_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row added to audit_events by hand with a pending event's id: the write fails closed; once
    the row is gone, the next write folds, with no restart."""
    monkeypatch.setattr(sqlite_module, "_FOLD_AT", 4)
    sink = store.sink()
    sink.append([event("t"), event("t")])
    pending = sink.read_trace("t")
    store.execute(
        "INSERT INTO audit_events SELECT event_id, 'intruder', correlation_id, 1, timestamp, type, name, "
        "tool, operation, risk, effect, decision, reason_code, rule_ids, intent_kind, intent_text, tenant, "
        "principal, payload_summary, payload_hash, status, duration, attempt, previous_hash, hash, "
        "parent_run_id, credential FROM audit_pending LIMIT 1"
    )
    with pytest.raises(AuditSinkError, match="IntegrityError"):
        sink.append([event("t"), event("t")])
    assert sink.read_trace("t") == pending and counts(store) == (1, 2)
    store.execute("DELETE FROM audit_events WHERE trace_id = 'intruder'")
    sink.append([event("t"), event("t")])
    assert counts(store) == (4, 0)
    assert_intact(sink, "t", 4)


def test_replay_sees_pending_events(store: Store) -> None:
    """append_missing stores nothing twice, whichever table holds the event; its own rows go after."""
    sink = store.sink()
    events = [event("t") for _ in range(3)]
    sink.append(events[:2])
    assert sink.append_missing(events) == 1
    assert sink.append_missing(events) == 0
    assert counts(store) == (3, 0)  # replay writes to audit_events, the pending events first
    assert_intact(sink, "t", 3)


def test_a_write_with_the_sinks_connection_closed_under_it_reopens(store: Store) -> None:
    sink = store.sink()
    assert isinstance(sink, SqliteSink)
    sink.append([event("t")])
    writer = sink._writer
    assert writer is not None
    writer.close()
    with pytest.raises(AuditSinkError):
        sink.append([event("t")])
    sink.append([event("t")])
    assert_intact(sink, "t", 2)


def test_processes_folding_one_file_lose_and_double_nothing(store: Store) -> None:
    """Processes x (1.5 x _FOLD_AT) single events on one trace: each folds at least once, under
    one another, and pending stays bounded (4 processes in the full tier, 2 in the default tier)."""
    store.sink().schema_version()
    count = sized(2, 4)
    each = sqlite_module._FOLD_AT * 3 // 2
    context = process_context()
    start = context.Barrier(count)
    processes = [
        context.Process(target=append_worker, args=("sqlite", store.location, None, "shared", each, start))
        for _ in range(count)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(300)
    assert [p.exitcode for p in processes] == [0] * count
    moved, pending = counts(store)
    # Each process folds once its count (what waited at its first write, then its own) reaches
    # _FOLD_AT, so what waits at the end is fewer than _FOLD_AT per process.
    assert moved + pending == each * count and moved > 0 and pending < count * sqlite_module._FOLD_AT
    sink = store.sink()
    assert isinstance(sink, SqliteSink)
    assert_intact(sink, "shared", each * count)
    raw = sqlite3.connect(store.location)
    try:
        duplicated = raw.execute(
            "SELECT count(*) FROM audit_events e JOIN audit_pending p ON p.event_id = e.event_id"
        ).fetchone()[0]
    finally:
        raw.close()
    assert duplicated == 0


def test_short_lived_sinks_still_fold(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes that each write a few events and exit: a new sink counts what waits, so pending
    stays bounded however few events each writes."""
    monkeypatch.setattr(sqlite_module, "_FOLD_AT", 10)
    for _ in range(30):
        sink = SqliteSink(store.location)
        sink.append([event("t"), event("t"), event("t")])
        sink.close()
        assert counts(store)[1] < 10
    moved, pending = counts(store)
    assert moved + pending == 90 and moved >= 81
    reader = store.sink()
    assert isinstance(reader, SqliteSink)
    assert_intact(reader, "t", 90)
