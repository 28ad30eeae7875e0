"""`LazyBatch.storage_rows`: a call's rows made without event objects are the rows its events make.

The SQL sinks read a batch's rows directly; a fan-out's other sinks, the
fallback file and the memory sink read its events. Whichever is read first,
both must describe the same events: same ids, same fields, same storage form.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from toolbox import ExecutionContext
from toolbox.audit import (
    AuditEvent,
    AuditMode,
    AuditTrail,
    FanOutSink,
    JsonlSink,
    MemorySink,
    Redaction,
    SqliteSink,
    verify_chain,
)
from toolbox.audit._batch import CallSubject, Closing, LazyBatch, Opening

HOSTILE = ["plain", "héllo ✓", "nul\x00inside", "lone \ud800 surrogate", "", "x" * 5000]


def batches(
    text: str = "Sum", *, rules: tuple[str, ...] = (), context: ExecutionContext | None = None
) -> tuple[Opening, Closing]:
    subject = CallSubject(
        f"calc.{text}", f"calc{text}", f"op{text}", "MEMORY_ONLY", "READ_ONLY", "purpose", Redaction()
    )
    if context is None:
        context = ExecutionContext(
            tenant="acme", principal="bob", correlation_id="corr", parent_run_id="parent"
        )
    opening = Opening(subject, context, text, {"a": 1, "token": "s3cr3t", "note": text}, 1_700_000_000.123456)
    opening.rules = rules
    return opening, Closing(opening, "ERROR", "RuntimeError", 2, 3, 1_700_000_001.5)


def fresh_context() -> ExecutionContext:
    return ExecutionContext(tenant="acme", principal="bob", correlation_id="corr", parent_run_id="parent")


def without_ids(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k != "event_id"} for row in rows]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("rules", [(), ("warn:a", "warn:b")])
def test_rows_made_directly_equal_the_rows_of_the_events(text: str, rules: tuple[str, ...]) -> None:
    context = ExecutionContext(tenant="acme", principal="bob", correlation_id="corr", parent_run_id="parent")
    direct, via_events = (
        batches(text, rules=rules, context=context),
        batches(text, rules=rules, context=context),
    )
    for made, wanted in zip(direct, via_events, strict=True):
        rows = made.storage_rows()
        expected = [event.as_dict() for event in wanted.events]
        assert without_ids(rows) == without_ids(expected)
        assert [list(row) for row in rows] == [list(row) for row in expected]  # same keys, same order
        assert len({row["event_id"] for row in rows}) == len(rows)


@pytest.mark.parametrize("first", ["rows", "events"])
def test_rows_and_events_of_one_batch_describe_the_same_events(first: str) -> None:
    """Read in either order, a batch's rows and events carry the same ids and fields."""
    for batch in batches("Sum", rules=("warn:a",)):
        if first == "rows":
            rows = batch.storage_rows()
            events = batch.events
        else:
            events = batch.events
            rows = batch.storage_rows()
        assert [event.as_dict() for event in events] == rows
        assert all(type(event) is AuditEvent for event in events)
        assert [event.timestamp for event in events] == [batch.timestamp] * len(events)


def test_storage_rows_are_new_dicts_each_time() -> None:
    """A sink fills in sequence and hashes: another sink's rows of the same batch are untouched."""
    opening, _ = batches()
    mine = opening.storage_rows()
    mine[0]["sequence"], mine[0]["hash"], mine[0]["rule_ids"] = 7, "f" * 64, "[]"
    theirs = opening.storage_rows()
    assert (theirs[0]["sequence"], theirs[0]["hash"], theirs[0]["rule_ids"]) == (0, "", ())
    assert [e.as_dict() for e in opening.events] == theirs


def test_len_and_truth_make_no_events() -> None:
    opening, closing = batches()
    assert (len(opening), len(closing), bool(opening), bool(closing)) == (3, 1, True, True)
    assert opening._events is None and opening._rows is None
    assert len(opening.events) == 3 and len(closing.events) == 1


def test_redaction_applies_to_rows_made_directly() -> None:
    opening, _ = batches()
    rows = opening.storage_rows()
    assert "s3cr3t" not in repr(rows)
    assert rows[0]["payload_summary"] == batches()[0].events[0].payload_summary


def test_racing_readers_of_one_batch_see_one_set_of_ids() -> None:
    """8 threads read rows and events of the same batches at once: the ids are made once."""
    pairs = [batches() for _ in range(200)]
    seen: list[set[str]] = [set() for _ in range(8)]
    barrier = threading.Barrier(8)

    def read(index: int) -> None:
        barrier.wait()
        for opening, closing in pairs:
            for batch in (opening, closing):
                got = batch.storage_rows() if index % 2 else [e.as_dict() for e in batch.events]
                seen[index].update(row["event_id"] for row in got)

    threads = [threading.Thread(target=read, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(ids == seen[0] for ids in seen) and len(seen[0]) == 800


def test_a_fan_out_of_sql_and_jsonl_stores_the_same_events(tmp_path: Path) -> None:
    """SQLite reads the rows, JSONL and memory the events: all three hold the same ids and hashes."""
    sqlite, jsonl, memory = SqliteSink(tmp_path / "a.db"), JsonlSink(tmp_path / "a.jsonl"), MemorySink()
    fan = FanOutSink([sqlite, jsonl, memory])
    opening, closing = batches("héllo ✓")
    fan.append(opening)
    fan.append(closing)
    trace = opening.context.run_id
    stored = [sink.read_trace(trace) for sink in (sqlite, jsonl, memory)]
    assert stored[0] == stored[1] == stored[2]
    assert [r.type.value for r in stored[0]] == [
        "INTENT_DECLARED",
        "GOVERNANCE_DECISION",
        "INVOCATION_REQUEST",
        "INVOCATION_RESPONSE",
    ]
    assert verify_chain(stored[0]) == []
    fan.close()


def test_the_async_writer_stores_many_batches_in_one_transaction(tmp_path: Path) -> None:
    """`SqlSink.append_batches`: the drain's batches in order, chained, one transaction."""
    sink = SqliteSink(tmp_path / "a.db")
    written: list[int] = []
    write = sink._group._write

    def counted(groups: Sequence[list[dict[str, Any]]]) -> None:
        written.append(sum(len(group) for group in groups))
        write(groups)

    sink._group._write = counted
    pairs = [batches() for _ in range(50)]
    plain = [AuditEvent(type=pairs[0][0].events[0].type, trace_id="plain", name="n")]  # a list, not a batch
    sink.append_batches([batch for pair in pairs for batch in pair] + [plain])
    assert written == [50 * 4 + 1]
    for opening, _ in pairs:
        records = sink.read_trace(opening.context.run_id)
        assert [r.sequence for r in records] == [1, 2, 3, 4]
        assert verify_chain(records) == []
    assert [r.sequence for r in sink.read_trace("plain")] == [1]
    sink.append_batches([])  # nothing to store: no transaction
    assert written == [201]
    sink.close()


@pytest.mark.parametrize("path", ["rows", "batches"])
def test_an_async_trail_on_sqlite_keeps_a_failed_drain_in_the_fallback_file(
    tmp_path: Path, path: str
) -> None:
    """When the writer's append fails, every event of the drain goes to the fallback file.

    ``rows``: the calls were queued as plain values (`toolbox.audit._queued`), so
    the file's events are made again from them, field for field the call's.
    """
    sink = SqliteSink(tmp_path / "a.db")
    fallback = tmp_path / "fallback.jsonl"
    trail = AuditTrail(sink, mode=AuditMode.ASYNC, fallback_path=fallback)
    assert trail._append_rows is not None  # the default for an SqlSink

    def broken(_written: object) -> None:
        raise OSError("disk gone")

    if path == "rows":
        trail._append_rows = broken
    else:
        trail._append_rows, trail._append_batches = None, broken
    opening, closing = batches()
    assert trail.store_opening(opening) and trail.store_closing(closing)
    trail.flush()
    kept = [json.loads(line) for line in fallback.read_text(encoding="ascii").splitlines()]
    wanted = [event.as_dict() for batch in (opening, closing) for event in batch.events]
    assert [row["type"] for row in kept] == [row["type"] for row in wanted]
    fields = ("trace_id", "name", "tool", "payload_summary", "payload_hash", "status", "duration", "attempt")
    assert [[row[f] for f in fields] for row in kept] == [[row[f] for f in fields] for row in wanted]
    assert not trail.healthy
    assert sink.read_trace(opening.context.run_id) == []
    trail.close()


def test_lazy_batches_are_the_only_types_read_as_rows() -> None:
    assert issubclass(Opening, LazyBatch) and issubclass(Closing, LazyBatch)


def test_a_subclass_that_overrides_append_still_sees_every_async_write(tmp_path: Path) -> None:
    """`append_batches` goes through an overridden `append`: a subclass's hook is not bypassed."""
    seen: list[int] = []

    class Counting(SqliteSink):  # type: ignore[misc] # final for users; tests subclass it (as GatedSink does)
        def append(self, events: Sequence[AuditEvent]) -> None:
            seen.append(len(events))
            super().append(events)

    sink = Counting(tmp_path / "a.db")
    trail = AuditTrail(sink, mode=AuditMode.ASYNC, fallback_path=None)
    opening, closing = batches()
    assert trail.store_opening(opening) and trail.store_closing(closing)
    trail.flush()
    assert sum(seen) == 4
    assert [r.sequence for r in sink.read_trace(opening.context.run_id)] == [1, 2, 3, 4]
    trail.close()


@pytest.mark.parametrize("opening_read_as", ["rows", "events", "unread"])
def test_a_closing_makes_the_same_row_whether_or_not_its_opening_made_rows(opening_read_as: str) -> None:
    """A closing copies its opening's request row when there is one; else it builds the row itself."""
    context = fresh_context()
    opening, closing = batches("héllo ✓", rules=("warn:a",), context=context)
    if opening_read_as == "rows":
        opening.storage_rows()
    elif opening_read_as == "events":
        _ = opening.events
    _, reference = batches("héllo ✓", rules=("warn:a",), context=context)
    (row,) = closing.storage_rows()
    (expected,) = [event.as_dict() for event in reference.events]
    assert without_ids([row]) == without_ids([expected])
    assert list(row) == list(expected)
    assert row["rule_ids"] == () and row["timestamp"] == "2023-11-14T22:13:21.500000+00:00"
    # Rows hold immutable values only: a copy may share them with the opening's cached row.
    assert all(type(value) in (str, int, float, tuple, type(None)) for value in row.values())
