"""SqliteSink's writer remembers the heads it wrote, and reads them again when anyone else committed.

The cache saves a read per transaction; it must never chain an event after a
head that is no longer the stored one. Every other connection's commit
(another sink, another process, the sink's own pooled connections, a hand
edit) changes the writer's ``PRAGMA data_version`` and drops it.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

import toolbox.audit.sinks._sql as sql_module
from audit_sql_support import append_worker, event, process_context
from toolbox.audit import AuditSinkError, SqliteSink, verify_chain


def sequences(sink: SqliteSink, trace_id: str) -> list[int]:
    return [r.sequence for r in sink.read_trace(trace_id)]


def test_two_sinks_on_one_file_alternating_on_one_trace_stay_gap_free(tmp_path: Path) -> None:
    first, second = SqliteSink(tmp_path / "a.db"), SqliteSink(tmp_path / "a.db")
    for index in range(20):
        (first if index % 3 else second).append([event("shared"), event("shared")])
    records = first.read_trace("shared")
    assert [r.sequence for r in records] == list(range(1, 41))
    assert verify_chain(records) == []
    first.close()
    second.close()


def test_a_write_of_the_sinks_own_pooled_connection_is_seen(tmp_path: Path) -> None:
    """`append_missing` (replay) writes through SQLAlchemy's pool, not the writer: the cache is dropped."""
    sink = SqliteSink(tmp_path / "a.db")
    sink.append([event()])
    assert sink.append_missing([event(), event()]) == 2
    sink.append([event()])
    records = sink.read_trace("trace-1")
    assert [r.sequence for r in records] == [1, 2, 3, 4]
    assert verify_chain(records) == []
    sink.close()


def test_a_head_edited_by_hand_between_appends_is_read_again(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "a.db")
    sink.append([event()])
    with sqlite3.connect(tmp_path / "a.db") as raw:
        raw.execute("UPDATE audit_trace_heads SET last_sequence = 41, last_hash = ?", ("e" * 64,))
    sink.append([event()])
    last = sink.read_trace("trace-1")[-1]
    assert (last.sequence, last.previous_hash) == (42, "e" * 64)
    sink.close()


def test_a_failed_write_forgets_the_heads(tmp_path: Path) -> None:
    """A transaction that failed moved no head: what the writer had remembered of it is dropped."""
    sink = SqliteSink(tmp_path / "a.db")
    sink.append([event()])
    taken = sink.read_trace("trace-1")[0].event_id
    clash = event()
    clash.event_id = taken  # the primary key refuses it: the whole transaction rolls back
    with pytest.raises(AuditSinkError, match="cannot store events: IntegrityError"):
        sink.append([event(), clash])
    sink.append([event()])
    assert sequences(sink, "trace-1") == [1, 2]
    assert verify_chain(sink.read_trace("trace-1")) == []
    sink.close()


def test_past_its_bound_the_cache_starts_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sql_module, "_HEADS_CACHED", 3)
    sink = SqliteSink(tmp_path / "a.db")
    for round_ in range(3):
        sink.append([event(f"t{n}") for n in range(5)])  # more traces than the bound at once
        for n in range(5):
            assert sequences(sink, f"t{n}") == list(range(1, round_ + 2))
    assert len(sink._heads) <= 5
    sink.close()


def test_processes_interleaving_with_a_cached_writer_stay_gap_free(tmp_path: Path) -> None:
    """This process keeps appending (its cache warm) while 3 others append to the same trace."""
    path = tmp_path / "a.db"
    sink = SqliteSink(path)
    sink.schema_version()
    context = process_context()
    start = context.Event()
    workers = [
        context.Process(target=append_worker, args=("sqlite", str(path), None, "shared", 300, start))
        for _ in range(3)
    ]
    for worker in workers:
        worker.start()
    start.set()
    deadline = time.monotonic() + 120
    while not sink.read_trace("shared") and time.monotonic() < deadline:  # the others are writing
        time.sleep(0.005)
    for _ in range(100):
        sink.append([event("shared")])
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    records = sink.read_trace("shared")
    assert [r.sequence for r in records] == list(range(1, 1001))
    assert verify_chain(records) == []
    sink.close()
