"""Calls queued as plain values for the ASYNC writer (`toolbox.audit._queued`).

An ASYNC trail on an SQL sink queues a call's `Opening` and `Closing` as
tuples the garbage collector stops tracking, and its writer makes the storage
rows straight from them. What is stored must be exactly what the batches
would have stored: the same fields, redaction and order, whatever the
arguments, and whether a closing is drained with its opening or later.
"""

from __future__ import annotations

import gc
import sqlite3
import uuid
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from audit_scale_support import in_threads
from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import (
    AuditEvent,
    AuditMode,
    AuditTrail,
    EventType,
    PayloadMode,
    Redaction,
    SqliteSink,
    verify_chain,
)
from toolbox.audit._batch import CallSubject, Closing, Opening
from toolbox.audit._queued import QueuedCalls, queued
from toolbox_test_support.heap import collector_sees_only_new_objects

HOSTILE_TEXTS = ["Sum", "héllo ✓", "nul\x00inside", "lone \ud800 surrogate", "", "x" * 5000]
SECRET = "sk-live-0123456789abcdef"  # a fake credential the store must never hold


def trail_for(tmp_path: Path, redaction: Redaction | None = None) -> tuple[AuditTrail, SqliteSink]:
    sink = SqliteSink(tmp_path / "audit.db")
    trail = AuditTrail(sink, mode=AuditMode.ASYNC, fallback_path=None, redaction=redaction)
    assert trail._append_rows is not None  # the writer stores rows made from queued calls
    return trail, sink


def call(
    trail: AuditTrail,
    arguments: dict[str, Any],
    *,
    text: str = "Sum",
    context: ExecutionContext | None = None,
    rules: tuple[str, ...] = (),
    payload_now: bool = False,
) -> tuple[Opening, Closing]:
    """An opening and closing of ``trail``'s subject (as the chain makes them), not yet stored."""
    subject = trail.subject_of(f"calc.{text}", "calc", "add", "MEMORY_ONLY", "READ_ONLY", "purpose")
    context = context or ExecutionContext(tenant="acme", principal="bob", parent_run_id="parent")
    opening = Opening(subject, context, text, arguments, 1_700_000_000.25)
    if payload_now:  # arguments of mutable values are redacted at once (AuditTrail.open_call)
        opening = Opening(subject, context, text, {}, 1_700_000_000.25)
        opening.payload = trail.redaction.payload_fields(arguments)
    opening.rules = rules
    return opening, Closing(opening, "ERROR", "RuntimeError", 2, 3, 1_700_000_001.5)


def without_ids(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k != "event_id"} for row in rows]


def reference_rows(opening: Opening, closing: Closing) -> list[dict[str, Any]]:
    """The rows the batches themselves make (what a sink stored before calls were queued)."""
    return [row for batch in (opening, closing) for row in batch.storage_rows()]


# -- the queued form ----------------------------------------------------------------------------


def test_a_queued_call_is_not_tracked_by_the_garbage_collector(tmp_path: Path) -> None:
    trail, sink = trail_for(tmp_path)
    with collector_sees_only_new_objects():
        opening, closing = call(trail, {"a": 1, "b": 2.5, "note": "x", "flag": True, "none": None})
        items = [queued(opening, trail.redaction), queued(closing, trail.redaction)]
        assert isinstance(items[0], tuple) and isinstance(items[1], tuple)
        assert items[1][1] is items[0]  # the closing names its opening's tuple: made once
        gc.collect()
        gc.collect()  # a collection that meets the closing before its opening untracks it next time
        assert not any(gc.is_tracked(item) for item in items)
    trail.close()
    sink.close()


@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=range(len(HOSTILE_TEXTS)))
@pytest.mark.parametrize("rules", [(), ("warn:a", "warn:b")])
def test_rows_of_queued_calls_equal_the_rows_of_their_batches(
    tmp_path: Path, text: str, rules: tuple[str, ...]
) -> None:
    trail, sink = trail_for(tmp_path)
    arguments = {"a": 1, "token": SECRET, "note": text, "url": f"https://u:{SECRET}@h/?api_key={SECRET}"}
    opening, closing = call(trail, arguments, text=text, rules=rules)
    items = [queued(opening, trail.redaction), queued(closing, trail.redaction)]
    made = QueuedCalls(trail.subject_of).rows(items)
    wanted = reference_rows(opening, closing)
    assert without_ids(made) == without_ids(wanted)
    assert [list(row) for row in made] == [list(row) for row in wanted]  # same keys, same order
    assert len({row["event_id"] for row in made}) == 4
    assert SECRET not in repr(made)
    trail.close()
    sink.close()


def test_every_immutable_argument_type_and_payload_mode_is_kept(tmp_path: Path) -> None:
    arguments = {
        "n": 10**30,
        "f": -0.0,
        "d": Decimal("1.10"),
        "when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
        "day": date(2026, 1, 2),
        "span": timedelta(seconds=90),
        "id": uuid.UUID(int=7),
        "raw": b"\x00\xff",
        "password": "hunter2",
    }
    for mode in PayloadMode:
        trail, sink = trail_for(tmp_path / mode.value, Redaction(payload=mode))
        (tmp_path / mode.value).mkdir()
        for payload_now in (False, True):
            opening, closing = call(trail, arguments, payload_now=payload_now)
            items = [queued(opening, trail.redaction), queued(closing, trail.redaction)]
            assert all(type(item) is tuple for item in items)
            made = QueuedCalls(trail.subject_of).rows(items)
            assert without_ids(made) == without_ids(reference_rows(opening, closing))
            assert "hunter2" not in repr(made)
        trail.close()
        sink.close()


def test_a_closing_drained_after_its_opening_makes_the_same_row(tmp_path: Path) -> None:
    trail, sink = trail_for(tmp_path)
    opening, closing = call(trail, {"a": 1})
    first, second = queued(opening, trail.redaction), queued(closing, trail.redaction)
    calls = QueuedCalls(trail.subject_of)
    made = calls.rows([first]) + calls.rows([second])  # two drains
    assert without_ids(made) == without_ids(reference_rows(opening, closing))
    trail.close()
    sink.close()


def test_a_batch_of_another_redaction_or_kind_is_queued_as_it_is(tmp_path: Path) -> None:
    trail, sink = trail_for(tmp_path)
    foreign = CallSubject("n", "t", "o", None, "READ_ONLY", "purpose", Redaction(keys=frozenset({"a"})))
    context = ExecutionContext(tenant="acme", principal="bob")
    opening = Opening(foreign, context, "Sum", {"a": 1}, 1.0)
    closing = Closing(opening, "SUCCESS", None, 0.5, 1, 2.0)
    assert queued(opening, trail.redaction) is opening
    assert queued(closing, trail.redaction) is closing
    events = [AuditEvent(EventType.GOVERNANCE_DECISION, trace_id="t", name="n")]
    assert queued(events, trail.redaction) is events
    closed = Opening(trail.subject_of("n", "t", "o", None, "READ_ONLY", "purpose"), context, "S", {}, 1.0)
    closed.close_in_place(0.5, 2.0)  # a memory sink's form: not queued as a tuple
    assert queued(closed, trail.redaction) is closed
    trail.close()
    sink.close()


def test_a_tuple_of_events_is_not_mistaken_for_a_queued_call(tmp_path: Path) -> None:
    trail, sink = trail_for(tmp_path)
    events = (AuditEvent(EventType.GOVERNANCE_DECISION, trace_id="t", name="n"),)
    rows = QueuedCalls(trail.subject_of).rows([events])
    assert [row["type"] for row in rows] == ["GOVERNANCE_DECISION"]
    trail.close()
    sink.close()


# -- through the ASYNC writer --------------------------------------------------------------------


def test_a_drain_mixing_queued_calls_batches_and_events_keeps_their_order(tmp_path: Path) -> None:
    trail, sink = trail_for(tmp_path)
    context = ExecutionContext(tenant="acme", principal="bob")
    first, first_closing = call(trail, {"a": 1}, context=context)
    foreign = CallSubject("n", "t", "o", None, "READ_ONLY", "purpose", Redaction(keys=frozenset({"a"})))
    second = Opening(foreign, context, "Sum", {"a": 2}, 3.0)  # queued as the object
    denial = [AuditEvent(EventType.GOVERNANCE_DECISION, trace_id=context.run_id, name="denied")]
    for batch in (first, denial, second, first_closing):
        assert trail._store(batch)
    trail.flush()
    records = sink.read_trace(context.run_id)
    assert [(r.type.value, r.name) for r in records] == [
        ("INTENT_DECLARED", "calc.Sum"),
        ("GOVERNANCE_DECISION", "calc.Sum"),
        ("INVOCATION_REQUEST", "calc.Sum"),
        ("GOVERNANCE_DECISION", "denied"),
        ("INTENT_DECLARED", "n"),
        ("GOVERNANCE_DECISION", "n"),
        ("INVOCATION_REQUEST", "n"),
        ("INVOCATION_RESPONSE", "calc.Sum"),
    ]
    assert records[4].payload_summary == '{"a":"[REDACTED]"}'  # the foreign subject's own redaction
    assert verify_chain(records) == []
    trail.close()


calls_run = 0


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def login(user: str, api_key: str, attempt: int) -> str:
    """Log in (the key is a secret)."""
    global calls_run  # noqa: PLW0603 - counts the tool's runs
    calls_run += 1
    return user


def test_governed_calls_from_many_threads_are_stored_redacted_in_order(tmp_path: Path) -> None:
    """8 threads x 100 by-name calls with a secret argument: gap-free verified traces, no secret on disk."""
    trail, sink = trail_for(tmp_path)
    gateway = Gateway.load(providers=[login], discover=False, env={}, governance=Governance(audit=trail))
    contexts = [ExecutionContext(tenant="acme", principal=f"p{n}") for n in range(8)]
    statuses: list[Status] = []

    def work(context: ExecutionContext) -> None:
        for attempt in range(100):
            arguments = {"user": "ann", "api_key": SECRET, "attempt": attempt, "purpose": "Log in"}
            statuses.append(gateway.invoke("login", arguments, context=context).status)

    in_threads(work, contexts)
    trail.flush()
    assert statuses == [Status.SUCCESS] * 800
    assert calls_run == 800
    for context in contexts:
        records = sink.read_trace(context.run_id)
        assert [r.sequence for r in records] == list(range(1, 401))
        assert verify_chain(records) == []
        summaries = [r.payload_summary for r in records if r.type is EventType.INTENT_DECLARED]
        assert summaries == [f'{{"api_key":"[REDACTED]","attempt":{n},"user":"ann"}}' for n in range(100)]
    trail.close()
    with sqlite3.connect(tmp_path / "audit.db") as raw:
        dumped = "\n".join(raw.iterdump())
    assert SECRET not in dumped
