"""The async door on a slow store: ``ainvoke`` never blocks its event loop on Redis or SQL.

Each test makes the store stop answering on purpose, deterministically: its own
redis-server with writes paused (``CLIENT PAUSE ... WRITE``: every script waits
until ``CLIENT UNPAUSE``), a SQLite state file whose write lock another
connection holds, or (for a read, which WAL never makes wait) every one of the
store's connections busy. Many ``ainvoke`` calls start on one loop while an unrelated
coroutine ticks: it must keep ticking while no call has finished (a bounded
poll, no speed assertion), and once the store answers again every call ends
with the exact result the sync door would give.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis

from state_support import (
    CALL,
    Counter,
    audit_events,
    context,
    free_port,
    governed_gateway,
    start_redis,
    unique,
)
from toolbox import Status, ToolResult
from toolbox.governance import Approval, Guardrail, GuardrailAction
from toolbox.pipeline.checks._shared_limits import LimitRule
from toolbox.state import GovernanceState, MemoryApprovalStore, MemoryKillSwitchStore, MemoryLimitStore
from toolbox.state._redis_backend import RedisState, connect
from toolbox.state._sql_backend import SqlState

BOUND = 60.0
APPROVE_ADD = Guardrail(id="APPROVE_ADD", tool="add", action=GuardrailAction.REQUIRE_APPROVAL)


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of this module's own on a free loopback port (others share 6379)."""
    port = free_port()
    server = start_redis(port, tmp_path_factory.mktemp("redis"))
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _shared(store: Any, **fields: Any) -> GovernanceState:
    return GovernanceState(backend="shared", kill=store, limits=store, approvals=store, **fields)


async def _while_stalled(
    calls: Sequence[Awaitable[ToolResult]], release: Any, *, ticks_needed: int = 20
) -> list[ToolResult]:
    """Start ``calls``; an unrelated coroutine must tick ``ticks_needed`` times before any call ends.

    Then ``release()`` lets the store answer, and every call's result is returned.
    """
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    tasks = [asyncio.ensure_future(call) for call in calls]
    beat = asyncio.ensure_future(ticker())
    try:
        deadline = time.monotonic() + BOUND
        while ticks < ticks_needed and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert ticks >= ticks_needed, "the event loop stalled while the store did not answer"
        assert not any(task.done() for task in tasks), "a call finished while the store did not answer"
        release()
        return list(await asyncio.wait_for(asyncio.gather(*tasks), BOUND))
    finally:
        beat.cancel()


def _paused(url: str) -> tuple[redis.Redis, Any]:
    """Pause every write (each script) on ``url``'s server; the function that resumes them."""
    control = redis.Redis.from_url(url, socket_timeout=BOUND)
    control.execute_command("CLIENT", "PAUSE", str(int(BOUND * 1000)), "WRITE")  # type: ignore[no-untyped-call]
    return control, lambda: control.execute_command("CLIENT", "UNPAUSE")  # type: ignore[no-untyped-call]


def test_budget_and_rate_limit_on_a_paused_redis_never_block_the_loop(own_redis: str) -> None:
    store = RedisState(connect(own_redis, timeout=BOUND), namespace=unique())
    counter = Counter()
    state = _shared(
        store,
        kill_switch_refresh=3600.0,
        budgets=(LimitRule("tenant", 25, 3600.0),),
        rate_limits=(LimitRule("tenant", 1000, 60.0),),
    )
    gateway = governed_gateway(state, counter)

    async def scenario() -> list[ToolResult]:
        # A first call reads the kill switch (cached for an hour) and loads the scripts.
        first = await gateway.ainvoke("add", CALL, context=context(principal="warm"))
        assert first.status is Status.SUCCESS
        control, release = _paused(own_redis)
        try:
            calls = [gateway.ainvoke("add", CALL, context=context(principal=f"p{i}")) for i in range(40)]
            return await _while_stalled(calls, release)
        finally:
            release()  # again, should the test have failed while paused: the next test needs writes
            control.close()

    try:
        results = asyncio.run(scenario())
        statuses = [r.reason_code or r.status.value for r in results]
        # The exact budget still holds on the async door: 25 in all, the warm-up call included.
        assert (statuses.count("SUCCESS"), statuses.count("BUDGET_EXHAUSTED")) == (24, 16)
        assert counter.runs == 25
        assert len({e.trace_id for e in audit_events(gateway, "BUDGET_EXHAUSTED")}) == 16
    finally:
        gateway.close()
        store.close()


def test_approvals_on_a_paused_redis_never_block_the_loop_and_one_request_waits(own_redis: str) -> None:
    store = RedisState(connect(own_redis, timeout=BOUND), namespace=unique())
    counter = Counter()
    gateway = governed_gateway(_shared(store, kill_switch_refresh=3600.0), counter, guardrails=[APPROVE_ADD])

    async def scenario() -> list[ToolResult]:
        await gateway.ainvoke("add", {**CALL, "a": 7}, context=context(principal="warm"))
        control, release = _paused(own_redis)
        try:
            # A model retrying the same call 30 times at once.
            calls = [gateway.ainvoke("add", CALL, context=context()) for _ in range(30)]
            return await _while_stalled(calls, release)
        finally:
            release()  # again, should the test have failed while paused: the next test needs writes
            control.close()

    try:
        results = asyncio.run(scenario())
        assert {r.status for r in results} == {Status.APPROVAL_REQUIRED}
        ids = {r.approval.id for r in results if r.approval is not None}
        assert len(ids) == 1  # deduplicated: one request waits for the operator
        [request_id] = ids
        store.decide(request_id, approve=True, decided_by="bob", reason="ok")
        fingerprint = results[0].approval.fingerprint  # type: ignore[union-attr]
        grant = Approval.of_request(request_id, fingerprint)

        async def redeem() -> list[ToolResult]:
            control, release = _paused(own_redis)
            try:
                calls = [gateway.ainvoke("add", CALL, context=context(), approval=grant) for _ in range(8)]
                return await _while_stalled(calls, release)
            finally:
                release()
                control.close()

        redeemed = asyncio.run(redeem())
        assert sorted(r.status.value for r in redeemed) == ["DENIED"] * 7 + ["SUCCESS"]
        assert counter.runs == 1
    finally:
        gateway.close()
        store.close()


def test_a_locked_sqlite_store_never_blocks_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SqlState(f"sqlite:///{path}", prefix=unique() + "_", timeout=BOUND)
    store.create()
    counter = Counter()
    # Refresh 0: every call reads the kill switch too, and that read waits for the lock as well.
    state = _shared(store, kill_switch_refresh=0.0, budgets=(LimitRule("principal", 3, 3600.0),))
    gateway = governed_gateway(state, counter)
    holder = sqlite3.connect(path, isolation_level=None, timeout=BOUND)

    async def scenario() -> list[ToolResult]:
        holder.execute("BEGIN IMMEDIATE")  # another process holding the write lock
        calls = [gateway.ainvoke("add", CALL, context=context()) for _ in range(6)]
        return await _while_stalled(calls, lambda: holder.execute("COMMIT"))

    try:
        results = asyncio.run(scenario())
        statuses = sorted(r.reason_code or r.status.value for r in results)
        assert statuses == ["BUDGET_EXHAUSTED"] * 3 + ["SUCCESS"] * 3
        assert counter.runs == 3
    finally:
        holder.close()
        gateway.close()
        store.drop()
        store.close()


def test_the_async_route_sees_the_kill_switch_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SqlState(f"sqlite:///{path}", prefix=unique() + "_", timeout=BOUND)
    store.create()
    counter = Counter()
    gateway = governed_gateway(GovernanceState(backend="sql", kill=store, kill_switch_refresh=0.05), counter)

    async def scenario() -> None:
        # Two calls: the second one's name is routed (the by-name fast path).
        for _ in range(2):
            assert (await gateway.ainvoke("add", CALL, context=context())).status is Status.SUCCESS
        assert "add" in gateway._routes
        store.engage("add", reason="incident 9", who="oncall")
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            result = await gateway.ainvoke("add", CALL, context=context())
            if result.reason_code == "KILL_SWITCH":
                break
        assert (result.status, result.rule) == (Status.DENIED, "kill_switch:tool")
        runs = counter.runs
        await asyncio.sleep(0.06)  # not an assertion: let the cache go stale
        # A kill-switch read never waits for SQLite's write lock (WAL: readers go on): the
        # store stops answering when every one of its connections is busy instead.
        pool = store._connections
        busy = [pool.take() for _ in range(pool._size)]

        def release() -> None:
            for conn in busy:
                pool.give(conn)

        [stopped] = await _while_stalled([gateway.ainvoke("add", CALL, context=context())], release)
        assert (stopped.reason_code, stopped.rule) == ("KILL_SWITCH", "kill_switch:tool")
        assert counter.runs == runs

    try:
        asyncio.run(scenario())
        assert audit_events(gateway, "KILL_SWITCH")
    finally:
        gateway.close()
        store.drop()
        store.close()


def test_memory_stores_stay_on_the_loop() -> None:
    """The memory backend's async door is today's: no check is awaited off the loop."""
    state = GovernanceState(
        backend="memory",
        kill=MemoryKillSwitchStore(),
        limits=MemoryLimitStore(),
        approvals=MemoryApprovalStore(),
        budgets=(LimitRule("tenant", 5, 60.0),),
    )
    counter = Counter()
    gateway = governed_gateway(state, counter, guardrails=[APPROVE_ADD])
    pipeline: Any = gateway._catalog.pipeline
    assert pipeline._awaited == {}
    result = asyncio.run(gateway.ainvoke("add", CALL, context=context()))
    assert result.status is Status.APPROVAL_REQUIRED and counter.runs == 0


def test_the_typed_door_awaits_a_locked_sqlite_store_off_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SqlState(f"sqlite:///{path}", prefix=unique() + "_", timeout=BOUND)
    store.create()
    counter = Counter()
    state = _shared(store, kill_switch_refresh=3600.0, budgets=(LimitRule("principal", 2, 3600.0),))
    gateway = governed_gateway(state, counter)
    holder = sqlite3.connect(path, isolation_level=None, timeout=BOUND)
    tools = gateway.tools_for(context())
    add: Any = tools.get("add")

    async def typed(a: int) -> Any:
        try:
            return await add.call(a, 1).purpose("Sum the order").aexecute()
        except Exception as exc:
            return getattr(exc, "reason_code", type(exc).__name__)

    async def scenario() -> list[Any]:
        assert await typed(1) == 2  # reads the kill switch once, spends one call
        holder.execute("BEGIN IMMEDIATE")
        return await _while_stalled([typed(i) for i in range(3)], lambda: holder.execute("COMMIT"))

    try:
        outcomes = asyncio.run(scenario())
        assert sorted(map(str, outcomes)).count("BUDGET_EXHAUSTED") == 2
        assert counter.runs == 2
    finally:
        holder.close()
        gateway.close()
        store.drop()
        store.close()
