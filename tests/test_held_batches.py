"""An `Opening` closed in place: the memory sink keeps one object per call and still stores 4 events.

The by-name route holds a call's opening in `MemorySink.hold` before the tool
runs and holds the same object again, closed in place, after it succeeded.
Whenever the sink is read (before, between or after the two), the events and
their chain must be those of an `Opening` followed by a `Closing`.
"""

from __future__ import annotations

import asyncio
import enum
import gc
import threading
from typing import Any, Literal

import pytest

import toolbox.audit.sinks._memory as memory
from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import AuditTrail, FanOutSink, MemorySink, Redaction
from toolbox.audit._batch import CallSubject, Closing, Opening
from toolbox.audit._held import held_call, held_context, held_response
from toolbox.doors._route import Route
from toolbox_test_support.heap import collector_sees_only_new_objects

AUDITOR = ExecutionContext(tenant="ops", principal="auditor", roles=frozenset({"auditor"}))
KINDS = ["INTENT_DECLARED", "GOVERNANCE_DECISION", "INVOCATION_REQUEST", "INVOCATION_RESPONSE"]


def subject() -> CallSubject:
    return CallSubject("add", "add", "call", "MEMORY_ONLY", "READ_ONLY", "purpose", Redaction())


def opening(context: ExecutionContext) -> Opening:
    return Opening(subject(), context, "Sum", {"a": 1, "b": 2}, 100.0)


def view(records: Any) -> list[tuple[str, int, str | None, int | None]]:
    return [(r.type.value, r.sequence, r.status, r.attempt) for r in records]


@pytest.mark.parametrize("read_between", [False, True])
def test_an_opening_held_twice_reads_as_an_opening_and_a_closing(read_between):
    context = ExecutionContext(tenant="t", principal="p")
    held, expected = MemorySink(), MemorySink()
    first, second = opening(context), opening(context)
    held.hold(first)
    expected.append(second)
    if read_between:
        assert view(held.records) == view(expected.records)
    first.close_in_place(0.5, 100.5)
    held.hold(first)
    expected.append(Closing(second, "SUCCESS", None, 0.5, 1, 100.5))
    stored, wanted = held.records, expected.records
    assert view(stored) == view(wanted)
    assert [r.type.value for r in stored] == KINDS
    assert stored[-1].duration == 0.5
    assert stored[-1].timestamp == wanted[-1].timestamp
    assert held.read_trace(context.run_id) == stored  # settled once: reading again changes nothing


def test_an_opening_appended_to_a_fan_out_is_never_read_as_a_response():
    """Sinks that receive an opening through ``append`` each store its opening events."""
    context = ExecutionContext(tenant="t", principal="p")
    left, right = MemorySink(), MemorySink()
    fan = FanOutSink([left, right])
    batch = opening(context)
    fan.append(batch)
    assert [r.type.value for r in left.records] == KINDS[:3]
    assert [r.type.value for r in right.records] == KINDS[:3]
    fan.append(Closing(batch, "SUCCESS", None, 0.1, 1, 100.1))
    assert [r.type.value for r in left.records] == [r.type.value for r in right.records] == KINDS


def test_an_opening_held_once_and_closed_by_the_chain_stays_an_opening():
    """A routed call that failed continues in the chain, which closes it with a `Closing`."""
    context = ExecutionContext(tenant="t", principal="p")
    sink = MemorySink()
    batch = opening(context)
    sink.hold(batch)
    sink.hold(Closing(batch, "ERROR", "ValueError", 0.1, 1, 100.1))
    assert view(sink.records) == [
        ("INTENT_DECLARED", 1, None, None),
        ("GOVERNANCE_DECISION", 2, None, None),
        ("INVOCATION_REQUEST", 3, None, 1),
        ("INVOCATION_RESPONSE", 4, "ERROR", 1),
    ]


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def audited() -> tuple[Gateway, MemorySink]:
    sink = MemorySink()
    gateway = Gateway.load(
        providers=[add], discover=False, env={}, governance=Governance(audit=AuditTrail(sink))
    )
    return gateway, sink


def test_a_routed_call_read_by_the_tool_itself_still_chains_in_order():
    """The sink is read while the routed call runs (between its two holds): nothing is out of order."""
    sink = MemorySink()
    seen: list[int] = []

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def peek(a: int) -> int:
        """Count the events stored so far."""
        seen.append(len(sink.records))
        return a

    gateway = Gateway.load(
        providers=[peek], discover=False, env={}, governance=Governance(audit=AuditTrail(sink))
    )
    context = ExecutionContext(tenant="t", principal="p")
    for _ in range(3):
        assert gateway.invoke("peek", {"a": 1, "purpose": "Peek"}, context=context).content == 1
    assert isinstance(gateway._routes["peek"], Route)
    assert seen == [3, 7, 11]  # each read sees the earlier calls and this call's opening
    assert [r.sequence for r in sink.read_trace(context.run_id)] == list(range(1, 13))
    assert [r.type.value for r in sink.records] == KINDS * 3
    assert gateway.audit.verify(context.run_id, context=AUDITOR) == []


def test_nested_routed_calls_in_one_trace_are_stored_in_the_order_they_happened():
    sink = MemorySink()
    holder: dict[str, Any] = {}

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def outer(depth: int) -> int:
        """Call itself once more, by name, in the same context."""
        if depth:
            inner = holder["gateway"].invoke(
                "outer", {"depth": depth - 1, "purpose": "Nest"}, context=holder["ctx"]
            )
            return 1 + inner.content
        return 0

    gateway = Gateway.load(
        providers=[outer], discover=False, env={}, governance=Governance(audit=AuditTrail(sink))
    )
    context = ExecutionContext(tenant="t", principal="p")
    holder.update(gateway=gateway, ctx=context)
    gateway.invoke("outer", {"depth": 0, "purpose": "Warm"}, context=context)
    assert isinstance(gateway._routes["outer"], Route)
    before = len(sink.records)  # settles the warm-up call
    assert gateway.invoke("outer", {"depth": 1, "purpose": "Nest"}, context=context).content == 1
    stored = sink.records[before:]
    # outer opens, inner opens and responds, then outer responds: a response closes the latest opening.
    assert [r.type.value for r in stored] == KINDS[:3] + KINDS + KINDS[3:]
    assert gateway.audit.verify(context.run_id, context=AUDITOR) == []


def test_concurrent_routed_calls_and_readers_keep_every_event_and_the_chain():
    gateway, sink = audited()
    contexts = [ExecutionContext(tenant="t", principal=f"p{i}") for i in range(4)]
    for context in contexts:
        gateway.invoke("add", {"a": 1, "b": 2, "purpose": "Warm"}, context=context)
    failures: list[BaseException] = []

    def work(context: ExecutionContext) -> None:
        try:
            for _ in range(200):
                result = gateway.invoke("add", {"a": 1, "b": 2, "purpose": "Sum"}, context=context)
                assert result.status is Status.SUCCESS
                assert len(sink.records) >= 4  # readers settle half-way through other threads' calls
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(c,)) for c in contexts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    for context in contexts:
        trace = sink.read_trace(context.run_id)
        assert [r.type.value for r in trace] == KINDS * 201
        assert gateway.audit.verify(context.run_id, context=AUDITOR) == []


def test_async_routed_calls_interleaved_in_one_trace_pair_each_response_with_its_call():
    sink = MemorySink()

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    async def slow(a: int) -> int:
        """Yield to the loop before answering."""
        await asyncio.sleep(0)
        return a

    gateway = Gateway.load(
        providers=[slow], discover=False, env={}, governance=Governance(audit=AuditTrail(sink))
    )
    context = ExecutionContext(tenant="t", principal="p")

    async def run() -> list[Any]:
        await gateway.ainvoke("slow", {"a": 0, "purpose": "Warm"}, context=context)
        calls = [gateway.ainvoke("slow", {"a": i, "purpose": f"Call {i}"}, context=context) for i in range(5)]
        return await asyncio.gather(*calls)

    results = asyncio.run(run())
    assert isinstance(gateway._routes["slow"], Route)
    assert [r.content for r in results] == list(range(5))
    trace = sink.read_trace(context.run_id)
    assert len(trace) == 24
    responses = [r for r in trace if r.type.value == "INVOCATION_RESPONSE"]
    assert sorted(r.intent_text for r in responses) == [
        "Call 0",
        "Call 1",
        "Call 2",
        "Call 3",
        "Call 4",
        "Warm",
    ]
    assert gateway.audit.verify(context.run_id, context=AUDITOR) == []


def test_typed_fast_path_calls_leave_one_batch_object_per_call_and_chain_alike():
    gateway, sink = audited()
    context = ExecutionContext(tenant="t", principal="p")
    tools = gateway.tools_for(context)
    assert tools.get(add).call(1, 2).purpose("Sum").execute() == 3  # the first call makes the plan
    first = len(sink._pending)
    for _ in range(3):
        assert tools.get(add).call(1, 2).purpose("Sum").execute() == 3
    held = list(sink._pending)[first:]  # the sink's unsettled batches: one opening, held twice per call
    assert len(held) == 6
    assert all(type(batch) is Opening for batch in held)
    assert [held[i] is held[i + 1] for i in (0, 2, 4)] == [True, True, True]
    assert [r.type.value for r in sink.read_trace(context.run_id)] == KINDS * 4
    assert gateway.audit.verify(context.run_id, context=AUDITOR) == []


class HoldingSink:
    """A sink with a ``hold`` of its own that does not say it reads an opening held twice."""

    def __init__(self) -> None:
        self.held: list[Any] = []
        self.hold = self.held.append

    def append(self, events: Any) -> None:
        self.held.append(events)

    def read_trace(self, trace_id: str) -> list[Any]:
        return []

    def query(self, query: Any) -> list[Any]:
        return []

    def close(self) -> None:
        pass


def test_a_sink_whose_hold_does_not_read_openings_twice_gets_a_closing():
    sink = HoldingSink()
    gateway = Gateway.load(
        providers=[add], discover=False, env={}, governance=Governance(audit=AuditTrail(sink))
    )
    context = ExecutionContext(tenant="t", principal="p")
    tools = gateway.tools_for(context)
    for _ in range(3):
        assert gateway.invoke("add", {"a": 1, "b": 2, "purpose": "Sum"}, context=context).content == 3
        assert tools.get(add).call(1, 2).purpose("Sum").execute() == 3
    assert isinstance(gateway._routes["add"], Route)
    assert [type(batch).__name__ for batch in sink.held] == ["Opening", "Closing"] * 6
    assert len({id(batch) for batch in sink.held}) == 12  # no batch is held twice


def test_a_routed_call_is_held_as_plain_values_the_collector_stops_tracking():
    with collector_sees_only_new_objects():
        gateway, sink = audited()
        context = ExecutionContext(tenant="t", principal="p")
        for _ in range(3):
            assert gateway.invoke("add", {"a": 1, "b": 2, "purpose": "Sum"}, context=context).content == 3
        assert isinstance(gateway._routes["add"], Route)
        held = list(sink._pending)[-4:]  # the last two calls: opening, response, opening, response
        assert [type(item) for item in held] == [tuple] * 4
        # A response names its opening's tuple: a collection that meets the response first (its
        # opening sat in an older generation, merged after the younger) untracks it at the next one.
        gc.collect()
        gc.collect()
        assert not any(gc.is_tracked(item) for item in held)  # nothing left for later collections
    assert [r.type.value for r in sink.read_trace(context.run_id)] == KINDS * 3
    request = sink.read_trace(context.run_id)[-4]
    assert request.payload_hash  # the arguments were redacted and hashed when read
    assert gateway.audit.verify(context.run_id, context=AUDITOR) == []


def test_a_held_call_that_cannot_be_made_is_recorded_in_its_trace(monkeypatch, caplog):
    gateway, sink = audited()
    context = ExecutionContext(tenant="t", principal="p")
    for _ in range(2):
        gateway.invoke("add", {"a": 1, "b": 2, "purpose": "Sum"}, context=context)

    def broken(*args: Any) -> Any:
        raise ValueError("cannot serialise")

    monkeypatch.setattr(memory, "held_events", broken)
    trace = sink.read_trace(context.run_id)
    # The first call took the full chain (Opening, Closing); the routed call's two held tuples failed.
    assert [r.type.value for r in trace] == [*KINDS, "SYSTEM_ERROR", "SYSTEM_ERROR"]
    assert all(r.reason_code == "AUDIT_EVENT_UNSTORABLE" for r in trace[4:])
    assert "could not be stored" in caplog.text


class Shade(enum.Enum):
    LIGHT = "light"
    DARK = "dark"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def describe(
    colour: str,
    shade: Shade = Shade.LIGHT,
    size: Literal["s", "m"] = "m",
    note: str | None = None,
    n: int = 1,
) -> str:
    """Describe a colour."""
    return f"{n} {size} {shade.value} {colour} {note}"


def test_held_arguments_are_redacted_under_their_own_names_like_the_full_chain():
    """Defaults, enums, literals and optionals: the routed call's payload is the full chain's."""
    sink = MemorySink()
    redaction = Redaction(keys=frozenset({"note"}))
    gateway = Gateway.load(
        providers=[describe],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink, redaction=redaction)),
    )
    context = ExecutionContext(tenant="t", principal="p")
    arguments = {"colour": "red", "n": 3, "note": "token=abc", "purpose": "Describe"}
    first = gateway.invoke("describe", arguments, context=context)  # the full chain
    second = gateway.invoke("describe", arguments, context=context)  # the route
    assert isinstance(gateway._routes["describe"], Route)
    assert first.content == second.content == "3 m light red token=abc"
    declared = [r for r in sink.read_trace(context.run_id) if r.type.value == "INTENT_DECLARED"]
    assert len(declared) == 2
    assert declared[0].payload_summary == declared[1].payload_summary
    assert declared[0].payload_hash == declared[1].payload_hash
    summary = declared[1].payload_summary or ""
    assert "red" in summary and "colour" in summary
    assert "abc" not in summary  # "note" is a redacted key: its value went in under its own name
    assert gateway.audit.verify(context.run_id, context=AUDITOR) == []


def test_held_call_helpers_make_the_events_an_opening_and_a_closing_make():
    context = ExecutionContext(tenant="t", principal="p", parent_run_id="parent-run")
    held, expected = MemorySink(), MemorySink()
    key = held.subject_key(subject(), ("a", "b"))
    assert held.subject_key(subject(), ("a", "b")) == key + 1  # a new subject object: its own key
    opening_tuple = held_call(key, held_context(context), "Sum", 100.0, (1, 2))
    held.hold_call(opening_tuple)
    held.hold_call(held_response(opening_tuple, 100.5, 0.5))
    batch = opening(context)
    expected.append(batch)
    expected.append(Closing(batch, "SUCCESS", None, 0.5, 1, 100.5))

    def comparable(records: Any) -> list[dict[str, Any]]:
        return [
            {k: v for k, v in r.model_dump().items() if k not in ("event_id", "hash", "previous_hash")}
            for r in records
        ]

    assert comparable(held.records) == comparable(expected.records)
    assert held.records[0].parent_run_id == "parent-run"
