"""`AsyncRedisState`: the asyncio client on the same keys as the sync store, racing coroutines included."""

from __future__ import annotations

import asyncio

import pytest

from state_support import REDIS_URL, pending, redis_state, unique, wipe_redis
from toolbox.pipeline._state_ports import ApprovalDecisionError, Quota, StateUnavailableError
from toolbox.state._redis_async import AsyncRedisState, connect_async


def test_async_and_sync_stores_share_one_namespace() -> None:
    namespace = unique()
    sync = redis_state(namespace)

    async def scenario() -> None:
        store = AsyncRedisState(connect_async(REDIS_URL), namespace=namespace)
        try:
            assert store.prefix == sync.prefix
            p = pending(principal="alice")
            sync.submit(p)
            got = await store.get(p.id)
            assert got is not None and got.state == "pending"
            with pytest.raises(ApprovalDecisionError) as info:
                await store.decide(p.id, approve=True, decided_by="alice", reason="")
            assert info.value.reason_code == "SELF_APPROVAL"
            decided = await store.decide(p.id, approve=True, decided_by="bob", reason="ok")
            assert decided.state == "approved"
            listed = await store.list(tenant="acme", state="approved", limit=10)
            assert [x.id for x in listed] == [p.id]
            results = await asyncio.gather(*(store.consume(p.id, p.request.fingerprint) for _ in range(8)))
            assert sorted(results) == [False] * 7 + [True]
            assert sync.consume(p.id, p.request.fingerprint) is False
            quota = Quota("b0:async", 3, 60.0, "r")
            refusals = await asyncio.gather(*(store.admit([quota], []) for _ in range(10)))
            assert sum(r is None for r in refusals) == 3
            await store.engage("add", reason="r", who="w")
            assert set(sync.engaged()) == {"add"}
            released = await store.release("add", reason="done", who="w")
            assert released is not None and released.reason == "r"
            assert await store.engaged() == {}
        finally:
            await store.close()

    try:
        asyncio.run(scenario())
    finally:
        wipe_redis(sync)


def test_async_store_unavailable_is_a_state_error() -> None:
    async def scenario() -> None:
        store = AsyncRedisState(connect_async("redis://127.0.0.1:1/0", timeout=0.2), namespace=unique())
        try:
            with pytest.raises(StateUnavailableError) as info:
                await store.get("x")
            assert "127.0.0.1" not in str(info.value)
        finally:
            await store.close()

    asyncio.run(scenario())
