"""A STRICT trail on a SQL sink, from the async door: the call runs on the event loop and awaits
its durable writes (`AuditTrail.awaits_writes`), on SQLite and PostgreSQL.

The promises do not move: the opening is durable before the tool runs (the
tool reads it back), a failed write refuses the call with zero executions,
and no result is given before its response is durable. Attacked with calls
on one trace and on many, a write that fails mid-group, and a caller
cancelled while its group is being written, on a writer thread and (SQLite)
on the loop itself. Gates and bounded polling only.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import toolbox.audit._group as group_commit
from audit_sql_support import Store, make_store
from polling import wait_until
from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import AuditMode, AuditSinkError, AuditTrail, MemorySink, SqliteSink, verify_chain
from toolbox.audit._group import GroupCommit
from toolbox.audit.sinks._sql import SqlSink
from toolbox.doors._placement import ON_LOOP, ON_THREAD, TO_END, UNKNOWN, CallPlacement
from toolbox.pipeline._result import ToolResult

ARGS = {"a": 1, "b": 2, "purpose": "Sum the order"}
EVENTS = ["INTENT_DECLARED", "GOVERNANCE_DECISION", "INVOCATION_REQUEST", "INVOCATION_RESPONSE"]
AUDITOR = ExecutionContext(tenant="ops", principal="auditor", roles={"auditor"})


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from make_store(request.param, tmp_path)


class Ledger:
    """The tool ``add``, recording each run: its thread and what the store held of its trace then."""

    def __init__(self, sink: SqlSink) -> None:
        self.runs: list[tuple[int, list[str]]] = []
        ledger = self

        @tool(name="add", risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
        def add(a: int, b: int, trace: str = "") -> int:
            """Add two integers."""
            stored = [r.type.value for r in sink.read_trace(trace)] if trace else []
            ledger.runs.append((threading.get_ident(), stored))
            return a + b

        self.tool = add


def gateway_over(sink: SqlSink, ledger: Ledger, tmp_path: Path) -> tuple[AuditTrail, Gateway]:
    trail = AuditTrail(sink, fallback_path=tmp_path / "fallback.jsonl")
    gateway = Gateway.load(
        providers=[ledger.tool], discover=False, env={}, governance=Governance(audit=trail)
    )
    return trail, gateway


class GatedGroups:
    """Holds the sink's first group write until `release`; fails the groups `failing` names.

    A gate holds its thread, so every group goes to the writer thread (SQLite's loop writes are
    off: `LoopGroups` attacks those).
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, sink: SqlSink, failing: Sequence[int] = ()) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.sizes: list[int] = []
        self.threads: set[int] = set()
        original = sink._group._write  # the sink's group write (test-only peek)
        monkeypatch.setattr(sink._group, "_max_writers", 1)  # PostgreSQL allows several: callers queue
        monkeypatch.setattr(sink._group, "_write_on_loop", None)

        def write(batches: Sequence[list[dict[str, Any]]]) -> None:
            number = len(self.sizes)
            self.sizes.append(len(batches))
            self.threads.add(threading.get_ident())
            if number == 0:
                self.entered.set()
                assert self.gate.wait(60)
            if number in failing:
                raise AuditSinkError("store down")
            original(batches)

        monkeypatch.setattr(sink._group, "_write", write)

    def release(self) -> None:
        self.gate.set()


class LoopGroups:
    """Records the SQLite sink's group writes on the event loop (sizes, threads); fails the loop
    writes `failing` names."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, sink: SqlSink, failing: Sequence[int] = ()) -> None:
        self.sizes: list[int] = []
        self.threads: set[int] = set()
        original = sink._group._write_on_loop
        assert original is not None  # SQLite's
        # However slow a loaded machine's flush, the loop keeps writing (the pause has its own tests).
        monkeypatch.setattr(group_commit, "LOOP_WRITE_LIMIT", 3600.0)

        def write_on_loop(batches: Sequence[list[dict[str, Any]]]) -> bool:
            number = len(self.sizes)
            self.sizes.append(len(batches))
            self.threads.add(threading.get_ident())
            if number in failing:
                raise AuditSinkError("store down")
            return original(batches)

        monkeypatch.setattr(sink._group, "_write_on_loop", write_on_loop)


def forming(sink: SqlSink) -> int:
    group = sink._group._forming
    return 0 if group is None else len(group.batches)


def kept(tmp_path: Path) -> list[dict[str, Any]]:
    """The events in the fallback file."""
    path = tmp_path / "fallback.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def compiled(store: Store, tmp_path: Path) -> tuple[SqlSink, Ledger, AuditTrail, Gateway]:
    """The store's sink, the ledger tool, and a STRICT gateway over them whose route is compiled."""
    sink = store.sink()
    ledger = Ledger(sink)
    trail, gateway = gateway_over(sink, ledger, tmp_path)
    gateway.invoke("add", ARGS, context=ExecutionContext(tenant="acme", principal="ops"))
    return sink, ledger, trail, gateway


def assert_refused_and_kept(
    refused: Sequence[ToolResult], doomed: Sequence[ExecutionContext], trail: AuditTrail, tmp_path: Path
) -> None:
    """Each call DENIED/AUDIT_UNAVAILABLE, nothing of it stored, its refusal in the fallback file."""
    for result in refused:
        assert (result.status, result.reason_code) == (Status.DENIED, "AUDIT_UNAVAILABLE")
    for context in doomed:
        assert trail.read_trace(context.run_id, context=AUDITOR) == []
    kept_reasons = {(e["trace_id"], e["reason_code"]) for e in kept(tmp_path) if e["reason_code"]}
    assert kept_reasons == {(c.run_id, "AUDIT_UNAVAILABLE") for c in doomed}


def assert_response_kept(
    result: ToolResult, sink: SqlSink, context: ExecutionContext, tmp_path: Path
) -> None:
    """The call ran, its result says the audit is incomplete, its response waits in the fallback file."""
    assert result.status is Status.SUCCESS and result.audit_failed
    assert [r.type.value for r in sink.read_trace(context.run_id)] == EVENTS[:3]
    assert [e["type"] for e in kept(tmp_path)] == ["INVOCATION_RESPONSE"]


def test_the_call_runs_on_the_loop_after_its_opening_is_durable(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first call (the full chain) and the next (the compiled route): the tool runs on the loop
    thread, sees its three opening events stored, and the result comes once all four are."""
    sink = store.sink()
    ledger = Ledger(sink)
    trail, gateway = gateway_over(sink, ledger, tmp_path)
    assert trail.awaits_writes and not trail.blocks_callers
    gated = GatedGroups(monkeypatch, sink)
    gated.release()

    async def main() -> tuple[int, list[tuple[ToolResult, list[str]]]]:
        answers = []
        for _ in range(2):
            context = ExecutionContext(tenant="acme", principal="ops")
            result = await gateway.ainvoke("add", {**ARGS, "trace": context.run_id}, context=context)
            answers.append((result, [r.type.value for r in sink.read_trace(context.run_id)]))
        return threading.get_ident(), answers

    loop_thread, answers = asyncio.run(main())
    assert [thread for thread, _ in ledger.runs] == [loop_thread, loop_thread]
    assert [stored for _, stored in ledger.runs] == [EVENTS[:3], EVENTS[:3]]  # durable before the run
    for result, stored in answers:
        assert result.status is Status.SUCCESS and result.content == 3 and not result.audit_failed
        assert stored == EVENTS  # durable before the result
    assert loop_thread not in gated.threads  # every commit on a writer thread
    sink.close()


def test_concurrent_calls_on_one_trace_and_on_many_share_commits_and_chain(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16 calls on one trace and 16 on traces of their own: while the first call's opening is
    written, the 31 others queue; one group takes their openings and the first call's response
    (the writer let the loop run the call it woke first); every trace is gap-free and chained."""
    monkeypatch.setattr(group_commit, "RESUME_WAIT", 60.0)  # the loop runs it, however loaded
    sink = store.sink()
    ledger = Ledger(sink)
    _, gateway = gateway_over(sink, ledger, tmp_path)
    shared = ExecutionContext(tenant="acme", principal="ops")
    gateway.invoke("add", ARGS, context=ExecutionContext(tenant="acme", principal="ops"))  # compiles
    gated = GatedGroups(monkeypatch, sink)
    own = [ExecutionContext(tenant="acme", principal="ops") for _ in range(16)]

    async def main() -> list[ToolResult]:
        first = asyncio.ensure_future(gateway.ainvoke("add", ARGS, context=shared))
        await asyncio.to_thread(gated.entered.wait, 30)  # its group is being written: closed
        calls = [gateway.ainvoke("add", ARGS, context=shared) for _ in range(15)]
        calls += [gateway.ainvoke("add", ARGS, context=context) for context in own]
        running = asyncio.gather(*calls)
        await asyncio.to_thread(wait_until, lambda: forming(sink) == 31)
        gated.release()
        return [await first, *await running]

    results = asyncio.run(main())
    assert all(r.status is Status.SUCCESS and r.content == 3 and not r.audit_failed for r in results)
    assert len(ledger.runs) == 33
    assert gated.sizes[:2] == [1, 32]
    records = sink.read_trace(shared.run_id)
    assert [r.sequence for r in records] == list(range(1, 65)) and verify_chain(records) == []
    for context in own:
        records = sink.read_trace(context.run_id)
        assert [r.type.value for r in records] == EVENTS and verify_chain(records) == []
    sink.close()


def test_a_write_failing_mid_group_refuses_every_call_of_it(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group of 7 openings fails: each call is DENIED/AUDIT_UNAVAILABLE, none ran, nothing of
    them is stored, their refusals are in the fallback file; the call of the first group succeeds."""
    sink, ledger, trail, gateway = compiled(store, tmp_path)
    ran_before = len(ledger.runs)
    gated = GatedGroups(monkeypatch, sink, failing=[1])
    first = ExecutionContext(tenant="acme", principal="ops")
    doomed = [ExecutionContext(tenant="acme", principal="ops") for _ in range(7)]

    async def main() -> tuple[ToolResult, list[ToolResult]]:
        leading = asyncio.ensure_future(gateway.ainvoke("add", ARGS, context=first))
        await asyncio.to_thread(gated.entered.wait, 30)
        refused = asyncio.gather(*(gateway.ainvoke("add", ARGS, context=c) for c in doomed))
        await asyncio.to_thread(wait_until, lambda: forming(sink) == 7)
        gated.release()
        return await leading, await refused

    lead, refused = asyncio.run(main())
    assert lead.status is Status.SUCCESS
    assert len(ledger.runs) == ran_before + 1  # only the first group's call ran
    assert_refused_and_kept(refused, doomed, trail, tmp_path)
    sink.close()


def test_a_response_that_cannot_be_stored_flags_the_result(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The opening is stored, the response's group fails: the call ran, its result says the audit is
    incomplete, and the response event waits in the fallback file."""
    sink, _ledger, _, gateway = compiled(store, tmp_path)
    gated = GatedGroups(monkeypatch, sink, failing=[1])
    gated.release()
    context = ExecutionContext(tenant="acme", principal="ops")
    result = asyncio.run(gateway.ainvoke("add", ARGS, context=context))
    assert_response_kept(result, sink, context, tmp_path)
    sink.close()


def test_a_caller_cancelled_while_its_group_is_written_leaves_a_whole_call(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run where the placement runs it (to its end): the caller is cancelled while its opening is
    being written; the call still runs once and stores all four events before the caller's
    cancellation goes on (a service releases the call's context only then)."""
    sink, ledger, _, gateway = compiled(store, tmp_path)
    ran_before = len(ledger.runs)
    gated = GatedGroups(monkeypatch, sink)
    context = ExecutionContext(tenant="acme", principal="ops")
    placement = CallPlacement()
    assert placement.of(gateway, "add") == (TO_END, "add")

    async def offload(call: Callable[[], ToolResult]) -> ToolResult:
        raise AssertionError("a call with an awaited trail never goes to a thread")

    async def main() -> bool:
        caller = asyncio.ensure_future(
            placement.invoke(gateway, "add", ARGS, context=context, offload=offload)
        )
        await asyncio.to_thread(gated.entered.wait, 30)
        caller.cancel()
        gated.release()
        with pytest.raises(asyncio.CancelledError):
            await caller
        # The cancelled caller waited for the call, as for a worker thread: it is whole already.
        assert len(sink.read_trace(context.run_id)) == 4
        return caller.cancelled()

    assert asyncio.run(main())
    assert len(ledger.runs) == ran_before + 1
    records = sink.read_trace(context.run_id)
    assert [r.type.value for r in records] == EVENTS and verify_chain(records) == []
    sink.close()


def test_a_plain_ainvoke_cancelled_during_its_opening_never_runs_the_tool(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the placement's protection: the opening is still written with its group (never half
    of it), and the cancelled call is refused: the tool never runs."""
    sink, ledger, _, gateway = compiled(store, tmp_path)
    ran_before = len(ledger.runs)
    gated = GatedGroups(monkeypatch, sink)
    context = ExecutionContext(tenant="acme", principal="ops")

    async def main() -> None:
        caller = asyncio.ensure_future(gateway.ainvoke("add", ARGS, context=context))
        await asyncio.to_thread(gated.entered.wait, 30)
        caller.cancel()
        gated.release()
        with pytest.raises(asyncio.CancelledError):
            await caller

    asyncio.run(main())
    wait_until(lambda: len(sink.read_trace(context.run_id)) == 3)  # its group, written after the cancel
    assert len(ledger.runs) == ran_before
    assert [r.type.value for r in sink.read_trace(context.run_id)] == EVENTS[:3]
    sink.close()


def test_where_calls_run_by_trail(tmp_path: Path) -> None:
    """Awaited writes: on the loop, to the end; a sink that writes on the calling thread only: a
    worker thread; memory and ASYNC trails: the loop; a name the gateway refuses: where its
    refusal's write cannot block the loop."""

    class OwnAppend(SqliteSink):
        def append(self, events: Any) -> None:
            super().append(events)

    ledger = Ledger(SqliteSink(tmp_path / "unused.db"))
    cases = [
        (AuditTrail(SqliteSink(tmp_path / "a.db")), TO_END, ON_THREAD),
        (AuditTrail(OwnAppend(tmp_path / "b.db")), ON_THREAD, ON_THREAD),
        (AuditTrail(SqliteSink(tmp_path / "c.db"), mode=AuditMode.ASYNC), ON_LOOP, ON_LOOP),
        (AuditTrail(MemorySink()), ON_LOOP, ON_LOOP),
        (None, ON_LOOP, ON_LOOP),
    ]
    for trail, known, unknown in cases:
        gateway = Gateway.load(
            providers=[ledger.tool], discover=False, env={}, governance=Governance(audit=trail)
        )
        placement = CallPlacement()
        assert placement.of(gateway, "add") == (known, "add")
        assert placement.of(gateway, "nope.nothing") == (unknown, UNKNOWN)
        if trail is not None:
            trail.close()


# -- SQLite: the loop writes the groups itself ---------------------------------------------------


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    yield from make_store("sqlite", tmp_path)


def test_on_sqlite_the_loop_writes_the_groups_of_concurrent_calls_and_the_promises_hold(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16 calls on one trace and 16 on traces of their own, written by the loop: each tool run saw
    its opening stored, every result came with its response stored, the traces gap-free."""
    sink, ledger, _, gateway = compiled(sqlite_store, tmp_path)
    loop_groups = LoopGroups(monkeypatch, sink)
    shared = ExecutionContext(tenant="acme", principal="ops")
    own = [ExecutionContext(tenant="acme", principal="ops") for _ in range(16)]

    async def call(context: ExecutionContext) -> tuple[ToolResult, list[str]]:
        result = await gateway.ainvoke("add", {**ARGS, "trace": context.run_id}, context=context)
        return result, [r.type.value for r in sink.read_trace(context.run_id)]

    async def main() -> tuple[int, list[tuple[ToolResult, list[str]]]]:
        answers = await asyncio.gather(*(call(shared) for _ in range(16)), *(call(c) for c in own))
        return threading.get_ident(), answers

    loop_thread, answers = asyncio.run(main())
    assert loop_groups.threads == {loop_thread} and max(loop_groups.sizes) > 1  # shared commits
    for result, stored in answers[16:]:
        assert result.status is Status.SUCCESS and result.content == 3 and not result.audit_failed
        assert stored == EVENTS  # durable before the result
    for _, stored in ledger.runs[1:]:
        assert stored[-3:] == EVENTS[:3]  # its own opening durable before it ran
    records = sink.read_trace(shared.run_id)
    assert [r.sequence for r in records] == list(range(1, 65)) and verify_chain(records) == []
    for context in own:
        assert [r.type.value for r in sink.read_trace(context.run_id)] == EVENTS
    sink.close()


def test_a_group_failing_on_the_loop_refuses_every_call_of_it(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """7 calls of one step share the loop's write of their openings, which fails: each is
    DENIED/AUDIT_UNAVAILABLE, none ran, nothing of them is stored, their refusals are kept."""
    sink, ledger, trail, gateway = compiled(sqlite_store, tmp_path)
    ran_before = len(ledger.runs)
    loop_groups = LoopGroups(monkeypatch, sink, failing=[0])
    doomed = [ExecutionContext(tenant="acme", principal="ops") for _ in range(7)]

    async def main() -> list[ToolResult]:
        return await asyncio.gather(*(gateway.ainvoke("add", ARGS, context=c) for c in doomed))

    refused = asyncio.run(main())
    assert loop_groups.sizes[0] == 7
    assert len(ledger.runs) == ran_before
    assert_refused_and_kept(refused, doomed, trail, tmp_path)
    sink.close()


def test_a_response_failing_on_the_loop_flags_the_result(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink, _ledger, _, gateway = compiled(sqlite_store, tmp_path)
    loop_groups = LoopGroups(monkeypatch, sink, failing=[1])
    context = ExecutionContext(tenant="acme", principal="ops")
    result = asyncio.run(gateway.ainvoke("add", ARGS, context=context))
    assert loop_groups.sizes == [1, 1]
    assert_response_kept(result, sink, context, tmp_path)
    sink.close()


def test_a_caller_cancelled_before_the_loop_writes_its_opening_leaves_a_whole_call(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the placement runs it (to its end): the caller is cancelled with its opening offered to
    the loop, not written yet; the call still runs once and stores all four events before the
    caller's cancellation goes on. Without the placement: the opening is written with its group,
    and the cancelled call never runs the tool."""
    sink, ledger, _, gateway = compiled(sqlite_store, tmp_path)
    ran_before = len(ledger.runs)
    loop_groups = LoopGroups(monkeypatch, sink)
    whole = ExecutionContext(tenant="acme", principal="ops")
    plain = ExecutionContext(tenant="acme", principal="ops")
    placement = CallPlacement()

    async def offload(call: Callable[[], ToolResult]) -> ToolResult:
        raise AssertionError("a call with an awaited trail never goes to a thread")

    to_cancel: list[asyncio.Future[Any]] = []
    submit = GroupCommit.submit_async

    def submit_then_cancel(group: GroupCommit[Any], batch: Any) -> asyncio.Future[None]:
        future = submit(group, batch)
        if to_cancel:  # the caller is cancelled in the step that offered its opening, not written yet
            assert group._forming is not None and group._forming.offered
            to_cancel.pop().cancel()
        return future

    monkeypatch.setattr(GroupCommit, "submit_async", submit_then_cancel)

    async def cancelled(call: Awaitable[Any]) -> None:
        caller = asyncio.ensure_future(call)
        to_cancel.append(caller)
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert not to_cancel

    async def main() -> None:
        await cancelled(placement.invoke(gateway, "add", ARGS, context=whole, offload=offload))
        assert len(sink.read_trace(whole.run_id)) == 4  # whole before the cancellation went on
        await cancelled(gateway.ainvoke("add", ARGS, context=plain))

    asyncio.run(main())
    assert len(ledger.runs) == ran_before + 1  # the placed call ran; the plain one never did
    records = sink.read_trace(whole.run_id)
    assert [r.type.value for r in records] == EVENTS and verify_chain(records) == []
    wait_until(lambda: len(sink.read_trace(plain.run_id)) == 3)
    assert [r.type.value for r in sink.read_trace(plain.run_id)] == EVENTS[:3]
    assert len(loop_groups.sizes) >= 3  # the openings and the placed call's response, on the loop
    sink.close()
