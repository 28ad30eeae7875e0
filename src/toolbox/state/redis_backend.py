"""The Redis backend: governance state shared by every process that reaches one Redis.

Keys live under ``toolbox:{<namespace>}:`` (the braces keep a deployment's
keys in one cluster slot, so every script stays atomic); caller-supplied
parts are encoded by `toolbox.pipeline.state_ports.key_part`. Each check is
one round trip: a Lua script (`toolbox.state.redis_scripts`) for a call's
budgets and rate limits, a consume, a decision; one ``HGETALL`` per refresh
for the kill switches. A Redis error of any kind is `StateUnavailableError`,
whose message never holds the URL; redis-py reconnects on the next command.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, final

from toolbox.pipeline.grants import ApprovalRequest, PendingApproval
from toolbox.pipeline.state_ports import (
    ApprovalDecisionError,
    KillEntry,
    Quota,
    Refusal,
    StateUnavailableError,
    key_part,
)
from toolbox.state.approval_rules import GRANT_TTL, RETAIN, check_decision, check_listing, effective

try:
    import redis
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError('Please install the Redis backend: pip install "toolbox-registry[redis]"') from exc

__all__ = ["RedisState", "connect"]

_T = TypeVar("_T")
_TIMEOUT = 2.0
_SCAN = 200


def connect(url: str, *, timeout: float = _TIMEOUT) -> redis.Redis:
    """A client for ``url`` with short timeouts: a Redis that does not answer fails the call fast."""
    try:
        return redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, decode_responses=True
        )
    except ValueError:
        raise ValueError("the [state] url is not a redis:// or rediss:// URL") from None


def _ms(seconds: float) -> int:
    return math.ceil(seconds * 1000)


@final
class RedisState:
    """Kill switches, shared limits and approvals in Redis: one object implements all three stores.

    Args:
        client: a `redis.Redis` built with ``decode_responses=True` (`connect` makes one).
        namespace: the deployment's name; deployments sharing a Redis never see each other's keys.
        grant_ttl: seconds an approved grant stays redeemable.
        retain: seconds a decided or used record outlives its expiry (a replay finds it ``used``).
    """

    __slots__ = ("_admit", "_client", "_consume", "_decide", "_grant_ttl", "_prefix", "_retain", "_submit")

    def __init__(
        self,
        client: redis.Redis,
        *,
        namespace: str = "default",
        grant_ttl: float = GRANT_TTL,
        retain: float = RETAIN,
    ) -> None:
        from toolbox.state import redis_scripts

        self._client = client
        self._prefix = f"toolbox:{{{key_part(namespace)}}}:"
        self._grant_ttl = grant_ttl
        self._retain = retain
        self._admit = client.register_script(redis_scripts.ADMIT)
        self._submit = client.register_script(redis_scripts.SUBMIT)
        self._decide = client.register_script(redis_scripts.DECIDE)
        self._consume = client.register_script(redis_scripts.CONSUME)

    @property
    def prefix(self) -> str:
        """Every key of this deployment starts with it."""
        return self._prefix

    @staticmethod
    def _call(action: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        try:
            return action(*args, **kwargs)
        except redis.RedisError as exc:
            # The exception text can name the host; only its type is passed on.
            raise StateUnavailableError(f"the Redis state store failed ({type(exc).__name__})") from None

    # -- kill switches ---------------------------------------------------------------

    def _kill_key(self) -> str:
        return self._prefix + "kill"

    @staticmethod
    def _field(tool: str | None) -> str:
        return "*" if tool is None else "t:" + tool

    def engaged(self) -> Mapping[str | None, KillEntry]:
        """Every engaged switch, one ``HGETALL``."""
        raw: dict[str, str] = self._call(lambda: self._client.hgetall(self._kill_key()))  # type: ignore[arg-type,return-value]
        entries: dict[str | None, KillEntry] = {}
        for field, value in raw.items():
            tool = None if field == "*" else field[2:]
            data = json.loads(value)
            entries[tool] = KillEntry(tool, str(data["reason"]), str(data["who"]), float(data["at"]))
        return entries

    def engage(self, tool: str | None, *, reason: str, who: str) -> KillEntry:
        """Engage a switch; every process sees it within its refresh delay."""
        entry = KillEntry(tool, reason, who, time.time())
        value = json.dumps(entry.as_dict())
        self._call(lambda: self._client.hset(self._kill_key(), self._field(tool), value))
        return entry

    def release(self, tool: str | None, *, reason: str, who: str) -> KillEntry | None:
        """Release a switch; the entry that was engaged, if any."""
        key, field = self._kill_key(), self._field(tool)

        def pop() -> Any:
            pipe = self._client.pipeline(transaction=True)
            pipe.hget(key, field)
            pipe.hdel(key, field)
            return pipe.execute()

        old, _ = self._call(pop)
        if old is None:
            return None
        data = json.loads(old)
        return KillEntry(tool, str(data["reason"]), str(data["who"]), float(data["at"]))

    # -- budgets and rate limits -----------------------------------------------------

    def admit(self, budgets: Sequence[Quota], rates: Sequence[Quota]) -> Refusal | None:
        """One script: refuse if any quota is spent, else count the call in every one."""
        quotas = [*budgets, *rates]
        keys = [self._prefix + ("b:" if i < len(budgets) else "r:") + q.key for i, q in enumerate(quotas)]
        args: list[Any] = [len(budgets), uuid.uuid4().hex]
        for quota in quotas:
            args += (quota.limit, max(1, _ms(quota.window)))
        answer = self._call(lambda: self._admit(keys=keys, args=args))
        if answer is None:
            return None
        index, rate, wait_ms = (int(v) for v in answer)
        return Refusal(quotas[index - 1], bool(rate), max(wait_ms, 0) / 1000)

    # -- approvals -------------------------------------------------------------------

    def _record_key(self, request_id: str) -> str:
        return self._prefix + "a:" + key_part(request_id)

    def _index_key(self) -> str:
        return self._prefix + "a:index"

    def submit(self, pending: PendingApproval) -> None:
        """Store a new request (one script); a second submit of the same id is ignored."""
        data = pending.as_dict()
        immutable = {k: data[k] for k in ("request", "intent_kind", "intent_text", "run_id", "created_at")}
        fields = {
            "data": json.dumps(immutable, separators=(",", ":"), default=repr),
            "state": pending.state,
            "expires_at_ms": _ms(pending.expires_at),
            "expires_at": repr(pending.expires_at),
            "principal": pending.request.principal,
            "tenant": pending.request.tenant,
            "fingerprint": pending.request.fingerprint,
            "decided_by": pending.decided_by or "",
            "reason": pending.reason,
        }
        args: list[Any] = [pending.id, _ms(pending.created_at), _ms(pending.expires_at), _ms(self._retain)]
        for name, value in fields.items():
            args += (name, value)
        keys = [self._record_key(pending.id), self._index_key()]
        self._call(lambda: self._submit(keys=keys, args=args))

    @staticmethod
    def _record(raw: Mapping[str, str]) -> PendingApproval | None:
        if "data" not in raw:
            return None
        data = json.loads(raw["data"])
        r = data["request"]
        request = ApprovalRequest(
            id=r["id"],
            tool=r["tool"],
            operation=r["operation"],
            arguments=r["arguments"],
            fingerprint=r["fingerprint"],
            rules=tuple(r["rules"]),
            tenant=r["tenant"],
            principal=r["principal"],
            created_at=float(data["created_at"]),
        )
        decided_at = raw.get("decided_at_ms")
        pending = PendingApproval(
            request=request,
            intent_kind=data["intent_kind"],
            intent_text=data["intent_text"],
            run_id=data["run_id"],
            created_at=float(data["created_at"]),
            expires_at=float(raw["expires_at"]),
            state=raw["state"],
            decided_by=raw.get("decided_by") or None,
            decided_at=int(decided_at) / 1000 if decided_at else None,
            reason=raw.get("reason", ""),
        )
        return effective(pending, time.time())

    def get(self, request_id: str) -> PendingApproval | None:
        """The request as of now, or None (never stored, or forgotten after ``retain``)."""
        raw = self._call(lambda: self._client.hgetall(self._record_key(request_id)))
        return self._record(raw)  # type: ignore[arg-type]

    def list(
        self, *, tenant: str | None, state: str | None, limit: int, cursor: str | None = None
    ) -> list[PendingApproval]:
        """Up to ``limit`` requests, newest first, after ``cursor``; forgotten ones leave the index."""
        check_listing(state, limit)
        client, index = self._client, self._index_key()
        start = 0
        if cursor is not None:
            rank = self._call(lambda: client.zrevrank(index, cursor))
            if rank is None:
                return []
            start = int(rank) + 1  # type: ignore[arg-type]
        found: list[PendingApproval] = []
        while len(found) < limit:
            ids: list[str] = self._call(client.zrevrange, index, start, start + _SCAN - 1)  # type: ignore[arg-type]
            if not ids:
                break
            pipe = client.pipeline(transaction=False)
            for request_id in ids:
                pipe.hgetall(self._record_key(request_id))
            raws = self._call(pipe.execute)
            gone = []
            for request_id, raw in zip(ids, raws, strict=True):
                record = self._record(raw)
                if record is None:
                    gone.append(request_id)
                elif (tenant is None or record.request.tenant == tenant) and state in (None, record.state):
                    found.append(record)
                    if len(found) == limit:
                        break
            if gone:
                self._call(client.zrem, index, *gone)
                start -= len(gone)
            start += len(ids)
        return found

    def decide(self, request_id: str, *, approve: bool, decided_by: str, reason: str) -> PendingApproval:
        """Approve or deny a pending request, atomically (one script)."""
        check_decision(decided_by, reason)
        key = self._record_key(request_id)
        args = [1 if approve else 0, decided_by, reason, _ms(self._grant_ttl), _ms(self._retain)]
        answer = str(self._call(lambda: self._decide(keys=[key], args=args)))
        if answer != "OK":
            code, _, current = answer.partition(":")
            messages = {
                "UNKNOWN_REQUEST": f"no approval request {request_id!r}",
                "EXPIRED": f"approval request {request_id!r} has expired",
                "SELF_APPROVAL": "the principal who made the request cannot decide it (four eyes)",
                "ALREADY_DECIDED": f"approval request {request_id!r} is already {current}",
            }
            raise ApprovalDecisionError(messages.get(code, answer), reason_code=code)
        record = self.get(request_id)
        if record is None:  # pragma: no cover - forgotten between the script and the read
            raise ApprovalDecisionError(f"no approval request {request_id!r}", reason_code="UNKNOWN_REQUEST")
        return record

    def consume(self, request_id: str, fingerprint: str) -> bool:
        """True exactly once for an approved, unexpired grant with this fingerprint (one script)."""
        key = self._record_key(request_id)
        return bool(self._call(lambda: self._consume(keys=[key], args=[fingerprint])))

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()
