"""`AsyncRedisState`: the Redis backend on redis-py's asyncio client, for asyncio applications.

The same keys, scripts and guarantees as `toolbox.state._redis_backend.RedisState`
(they share `toolbox.state._redis_codec` and `toolbox.state._redis_scripts`), so a
service's console can decide approvals without blocking its event loop while
workers redeem them with the sync store. The chain's checks are synchronous
and use `RedisState`; this one serves the code around them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar, final

from toolbox.pipeline._grants import PendingApproval
from toolbox.pipeline._state_ports import (
    ApprovalDecisionError,
    Clock,
    KillEntry,
    Quota,
    Refusal,
    StateUnavailableError,
)
from toolbox.state._approval_rules import GRANT_TTL, RETAIN, check_decision, check_listing
from toolbox.state._redis_codec import Layout, decision_error, kill_entries, kill_entry

try:
    import redis
    import redis.asyncio as aioredis
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError('Please install the Redis backend: pip install "toolbox-registry[redis]"') from exc

__all__ = ["AsyncRedisState", "connect_async"]

_T = TypeVar("_T")
_SCAN = 200


def connect_async(url: str, *, timeout: float = 2.0) -> aioredis.Redis:
    """An asyncio client for ``url`` with short timeouts."""
    try:
        return aioredis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, decode_responses=True
        )
    except ValueError:
        raise ValueError("the [state] url is not a redis:// or rediss:// URL") from None


async def _call(awaitable: Awaitable[_T]) -> _T:
    try:
        return await awaitable
    except redis.RedisError as exc:
        raise StateUnavailableError(f"the Redis state store failed ({type(exc).__name__})") from None


@final
class AsyncRedisState:
    """The Redis stores' operations as coroutines (``await store.decide(...)``)."""

    __slots__ = ("_admit", "_client", "_consume", "_decide", "_grant_ttl", "_layout", "_retain", "_submit")

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        namespace: str = "default",
        grant_ttl: float = GRANT_TTL,
        retain: float = RETAIN,
        clock: Clock | None = None,
    ) -> None:
        from toolbox.state import _redis_scripts as redis_scripts

        self._client = client
        self._layout = Layout(namespace, clock)
        self._grant_ttl = grant_ttl
        self._retain = retain
        self._admit = client.register_script(redis_scripts.ADMIT)
        self._submit = client.register_script(redis_scripts.SUBMIT)
        self._decide = client.register_script(redis_scripts.DECIDE)
        self._consume = client.register_script(redis_scripts.CONSUME)

    @property
    def prefix(self) -> str:
        """Every key of this deployment starts with it."""
        return self._layout.prefix

    async def engaged(self) -> Mapping[str | None, KillEntry]:
        """Every engaged switch."""
        raw: Any = await _call(self._client.hgetall(self._layout.kill))
        return kill_entries(raw)

    async def engage(self, tool: str | None, *, reason: str, who: str) -> KillEntry:
        """Engage a switch."""
        entry = KillEntry(tool, reason, who, self._layout.now())
        pipe = self._client.pipeline(transaction=True)
        pipe.hset(self._layout.kill, self._layout.switch(tool), json.dumps(entry.as_dict()))
        pipe.publish(self._layout.kill_channel, "")
        await _call(pipe.execute())
        return entry

    async def release(self, tool: str | None, *, reason: str, who: str) -> KillEntry | None:
        """Release a switch; the entry that was engaged, if any."""
        pipe = self._client.pipeline(transaction=True)
        pipe.hget(self._layout.kill, self._layout.switch(tool))
        pipe.hdel(self._layout.kill, self._layout.switch(tool))
        pipe.publish(self._layout.kill_channel, "")
        old, _, _ = await _call(pipe.execute())
        return None if old is None else kill_entry(tool, old)

    async def admit(self, budgets: Sequence[Quota], rates: Sequence[Quota]) -> Refusal | None:
        """One script: refuse if any quota is spent, else count the call in every one."""
        keys, args = self._layout.admit(budgets, rates)
        answer = await _call(self._admit(keys=keys, args=args))
        return self._layout.refusal(answer, budgets, rates)

    async def submit(self, pending: PendingApproval, *, max_pending: int = 0) -> str:
        """Store a new request, or name the identical one still pending; bounded per principal."""
        keys, args = self._layout.submit(pending, self._retain, max_pending)
        return self._layout.submitted(await _call(self._submit(keys=keys, args=args)))

    async def get(self, request_id: str) -> PendingApproval | None:
        """The request as of now, or None."""
        raw: Any = await _call(self._client.hgetall(self._layout.record(request_id)))
        return self._layout.record_of(raw)

    async def list(
        self, *, tenant: str | None, state: str | None, limit: int, cursor: str | None = None
    ) -> list[PendingApproval]:
        """Up to ``limit`` requests, newest first, after ``cursor``."""
        check_listing(state, limit)
        client, index = self._client, self._layout.index
        start = 0
        if cursor is not None:
            rank: Any = await _call(client.zrevrank(index, cursor))
            if rank is None:
                return []
            start = int(rank) + 1
        found: list[PendingApproval] = []
        while len(found) < limit:
            ids: Any = await _call(client.zrevrange(index, start, start + _SCAN - 1))
            if not ids:
                break
            pipe = client.pipeline(transaction=False)
            for request_id in ids:
                pipe.hgetall(self._layout.record(request_id))
            raws = await _call(pipe.execute())
            gone = []
            for request_id, raw in zip(ids, raws, strict=True):
                record = self._layout.record_of(raw)
                if record is None:
                    gone.append(request_id)
                elif (tenant is None or record.request.tenant == tenant) and state in (None, record.state):
                    found.append(record)
                    if len(found) == limit:
                        break
            if gone:
                await _call(client.zrem(index, *gone))
                start -= len(gone)
            start += len(ids)
        return found

    async def decide(
        self, request_id: str, *, approve: bool, decided_by: str, reason: str
    ) -> PendingApproval:
        """Approve or deny a pending request, atomically."""
        check_decision(decided_by, reason)
        args = self._layout.decide(approve, decided_by, reason, self._grant_ttl, self._retain)
        answer = str(await _call(self._decide(keys=[self._layout.record(request_id)], args=args)))
        if answer != "OK":
            raise decision_error(answer, request_id)
        record = await self.get(request_id)
        if record is None:  # pragma: no cover - forgotten between the script and the read
            raise ApprovalDecisionError(f"no approval request {request_id!r}", reason_code="UNKNOWN_REQUEST")
        return record

    async def consume(self, request_id: str, fingerprint: str) -> bool:
        """True exactly once for an approved, unexpired grant with this fingerprint."""
        key = self._layout.record(request_id)
        done = await _call(self._consume(keys=[key], args=self._layout.consume(fingerprint)))
        return bool(done)

    async def close(self) -> None:
        """Close the client's connections."""
        await self._client.aclose()
