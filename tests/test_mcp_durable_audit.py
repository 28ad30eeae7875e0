"""The MCP server with a durable audit sink: the loop never waits on a commit, so sessions commit together.

A STRICT trail on `SqliteSink` awaits its commits: calls run on the event loop
and a writer thread of the sink commits their groups (`toolbox.doors._placement`).
A sink subclass with its own ``append`` writes on the calling thread: run on
the event loop, one session's commit would stop every other session (and no
two calls could ever share a commit), so such calls run whole on a worker
thread. The proof needs no clock: the sink holds the first two calls' first
writes at a barrier that only two calls in flight at once can pass.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
from toolbox.audit import AuditEvent, AuditTrail, MemorySink, SqliteSink, verify_chain
from toolbox.mcp import server

ARGS = {"a": 1, "b": 2, "purpose": "Sum the order"}
EVENTS = ["INTENT_DECLARED", "GOVERNANCE_DECISION", "INVOCATION_REQUEST", "INVOCATION_RESPONSE"]


class MeetingSink(SqliteSink):
    """A SQLite sink whose first ``parties`` appends wait for one another (at most 30 s, then fail)."""

    def __init__(self, path: Path, parties: int) -> None:
        super().__init__(path)
        self.meeting = threading.Barrier(parties, timeout=30)
        self.waiting = parties
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def append(self, events: Sequence[AuditEvent]) -> None:
        self.threads.add(threading.get_ident())
        with self._lock:
            meets = self.waiting > 0
            self.waiting -= 1
        if meets:
            self.meeting.wait()  # BrokenBarrierError (the write fails, STRICT refuses) if alone
        super().append(events)


def gateway_with(sink: Any, runs: list[int]) -> Gateway:
    @tool(name="add", risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        runs.append(threading.get_ident())
        return a + b

    trail = AuditTrail(sink, fallback_path=None)
    return Gateway.load(providers=[add], discover=False, env={}, governance=Governance(audit=trail))


def concurrent_calls(gateway: Gateway, sessions: int) -> tuple[list[Any], int]:
    """``sessions`` MCP sessions calling ``add`` at once; their results and the event loop's thread."""
    mcp_server = server(gateway, context=ExecutionContext(tenant="acme", principal="ops"))
    results: list[Any] = [None] * sessions
    loop_thread = [0]

    async def session(index: int) -> None:
        async with Client(mcp_server) as connected:
            results[index] = await connected.call_tool("add", ARGS)

    async def main() -> None:
        loop_thread[0] = threading.get_ident()
        async with anyio.create_task_group() as group:
            for index in range(sessions):
                group.start_soon(session, index)

    anyio.run(main)
    return results, loop_thread[0]


def test_two_sessions_write_to_a_sqlite_trail_at_the_same_time(tmp_path: Path) -> None:
    sink = MeetingSink(tmp_path / "audit.db", parties=2)
    runs: list[int] = []
    results, loop_thread = concurrent_calls(gateway_with(sink, runs), sessions=2)
    for result in results:  # both passed the barrier: their writes were in flight together
        assert not result.is_error and result.structured_content == {"result": 3}, result
    assert len(runs) == 2
    assert loop_thread not in sink.threads  # the commits never ran on the event loop
    for result in results:
        records = sink.read_trace(result.meta["io.toolbox/trace_id"])
        assert [r.type.value for r in records] == EVENTS
        assert verify_chain(records) == []
    sink.close()


def test_sixteen_sessions_all_recorded(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "audit.db")
    runs: list[int] = []
    results, loop_thread = concurrent_calls(gateway_with(sink, runs), sessions=16)
    assert all(not r.is_error and r.structured_content == {"result": 3} for r in results)
    assert runs == [loop_thread] * 16  # on the loop: each call awaited its commits
    traces = {r.meta["io.toolbox/trace_id"] for r in results}
    assert len(traces) == 16
    for trace in traces:
        assert [r.type.value for r in sink.read_trace(trace)] == EVENTS
    sink.close()


def test_a_memory_trail_keeps_calls_on_the_event_loop(tmp_path: Path) -> None:
    runs: list[int] = []
    sink = MemorySink()
    results, loop_thread = concurrent_calls(gateway_with(sink, runs), sessions=2)
    assert all(not r.is_error for r in results)
    assert runs == [loop_thread, loop_thread]  # nothing to wait for: no thread hand-off


def test_a_failed_durable_write_refuses_the_call_and_the_tool_never_runs(tmp_path: Path) -> None:
    sink = MeetingSink(tmp_path / "audit.db", parties=2)
    sink.meeting.abort()  # every first write fails, as a store that cannot write would
    runs: list[int] = []
    results, _ = concurrent_calls(gateway_with(sink, runs), sessions=1)
    refused = results[0]
    assert refused.is_error
    error = refused.meta["io.toolbox/error"]
    assert (error["status"], error["reason_code"], error["attempts"]) == ("DENIED", "AUDIT_UNAVAILABLE", 0)
    assert runs == []  # STRICT: no stored request, no call
    assert sink.read_trace(error["trace_id"]) == []  # nothing half-recorded
    sink.close()
