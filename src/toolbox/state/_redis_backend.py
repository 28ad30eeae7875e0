"""The Redis backend: governance state shared by every process that reaches one Redis.

Keys live under ``toolbox:{<namespace>}:`` (the braces keep a deployment's
keys in one cluster slot, so every script stays atomic); caller-supplied
parts are encoded by `toolbox.pipeline._state_ports.key_part`. Each check is
one round trip: a Lua script (`toolbox.state._redis_scripts`) for a call's
budgets and rate limits, a consume, a decision; one ``HGETALL`` per refresh
for the kill switches. A Redis error of any kind is `StateUnavailableError`,
whose message never holds the URL; redis-py reconnects on the next command.

Every kill-switch change is also published on ``...:kill:changed``; a
`toolbox.pipeline.checks._builtin.KillSwitch` on this store subscribes (`RedisState.watch`)
and re-reads the switches as soon as one changes anywhere, so a change usually
arrives in one round trip instead of within ``kill_switch_refresh``, which
stays the bound when a message is lost.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast, final

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
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError('Please install the Redis backend: pip install "toolbox-registry[redis]"') from exc

__all__ = ["RedisState", "connect"]

_T = TypeVar("_T")
LOGGER = logging.getLogger("toolbox.state")
_TIMEOUT = 2.0
_LISTEN = 1.0
# How long the kill-switch listener waits for a message before it looks at `close()`: a message
# wakes it at once, so this bounds only how long `close()` waits for the thread (redis-py's own
# worker does the same: a socket must not be disconnected while another thread reads it).
_POLL = 0.05
_SCAN = 200


def connect(url: str, *, timeout: float = _TIMEOUT) -> redis.Redis:
    """A client for ``url`` with short timeouts: a Redis that does not answer fails the call fast."""
    try:
        return redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, decode_responses=True
        )
    except ValueError:
        raise ValueError("the [state] url is not a redis:// or rediss:// URL") from None


@final
class RedisState:
    """Kill switches, shared limits and approvals in Redis: one object implements all three stores.

    Args:
        client: a `redis.Redis` built with ``decode_responses=True`` (`connect` makes one).
        namespace: the deployment's name; deployments sharing a Redis never see each other's keys.
        grant_ttl: seconds an approved grant stays redeemable.
        retain: seconds a decided or used record outlives its expiry (a replay finds it ``used``).
        clock: None: the Redis server's clock (hosts that drift agree); tests inject a
            `toolbox.testing.ManualClock` (keys still expire on the server's clock).
    """

    __slots__ = (
        "_admit",
        "_client",
        "_closed",
        "_consume",
        "_decide",
        "_grant_ttl",
        "_layout",
        "_listener",
        "_retain",
        "_submit",
        "_watch_lock",
        "_watchers",
    )

    def __init__(
        self,
        client: redis.Redis,
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
        self._watchers: list[Callable[[], Callable[[], None] | None]] = []
        self._watch_lock = threading.Lock()
        self._listener: threading.Thread | None = None
        self._closed = threading.Event()

    @property
    def prefix(self) -> str:
        """Every key of this deployment starts with it."""
        return self._layout.prefix

    @staticmethod
    def _call(action: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        try:
            return action(*args, **kwargs)
        except redis.RedisError as exc:
            # The exception text can name the host; only its type is passed on.
            raise StateUnavailableError(f"the Redis state store failed ({type(exc).__name__})") from None

    # -- kill switches ---------------------------------------------------------------

    def engaged(self) -> Mapping[str | None, KillEntry]:
        """Every engaged switch, one ``HGETALL``."""
        raw: Any = self._call(self._client.hgetall, self._layout.kill)
        return kill_entries(raw)

    def engage(self, tool: str | None, *, reason: str, who: str) -> KillEntry:
        """Engage a switch and announce it; every process sees it within its refresh delay."""
        entry = KillEntry(tool, reason, who, self._layout.now())
        value = json.dumps(entry.as_dict())

        def store() -> Any:
            pipe = self._client.pipeline(transaction=True)
            pipe.hset(self._layout.kill, self._layout.switch(tool), value)
            pipe.publish(self._layout.kill_channel, "")
            return pipe.execute()

        self._call(store)
        return entry

    def release(self, tool: str | None, *, reason: str, who: str) -> KillEntry | None:
        """Release a switch; the entry that was engaged, if any."""
        key, field = self._layout.kill, self._layout.switch(tool)

        def pop() -> Any:
            pipe = self._client.pipeline(transaction=True)
            pipe.hget(key, field)
            pipe.hdel(key, field)
            pipe.publish(self._layout.kill_channel, "")
            return pipe.execute()

        old, _, _ = self._call(pop)
        return None if old is None else kill_entry(tool, old)

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change`` (on this store's listener thread) when a kill switch changes anywhere.

        Also after each (re)subscription, since changes may have been missed
        meanwhile. A bound method is held weakly: a kill switch that is gone
        is forgotten. The listener reconnects on its own; `close` stops it.
        """
        held: Callable[[], Callable[[], None] | None] = (
            weakref.WeakMethod(on_change)
            if hasattr(on_change, "__self__")
            else (lambda: on_change)  # a plain function, held strongly
        )
        with self._watch_lock:
            self._watchers.append(held)
            if self._listener is None:
                self._closed.clear()
                self._listener = threading.Thread(target=self._listen, name="toolbox-kill-watch", daemon=True)
                self._listener.start()

    def _notify(self) -> None:
        with self._watch_lock:
            self._watchers = [held for held in self._watchers if held() is not None]
            callbacks = [held() for held in self._watchers]
        for callback in callbacks:
            if callback is not None:
                try:
                    callback()
                except Exception:  # one watcher's failure never stops the others
                    LOGGER.warning("a kill-switch watcher failed", exc_info=True)

    def _listen(self) -> None:
        closed = self._closed
        while not closed.is_set():
            pubsub = _open_pubsub(self._client)
            try:
                pubsub.subscribe(self._layout.kill_channel)
                self._notify()
                while not closed.is_set():
                    if pubsub.get_message(timeout=_POLL) is not None:
                        self._notify()
            except (redis.RedisError, OSError, ValueError):
                closed.wait(_LISTEN)  # the store is away: the refresh delay is the bound meanwhile
            finally:
                with contextlib.suppress(redis.RedisError, OSError):
                    pubsub.close()

    # -- budgets and rate limits -----------------------------------------------------

    def admit(self, budgets: Sequence[Quota], rates: Sequence[Quota]) -> Refusal | None:
        """One script: refuse if any quota is spent, else count the call in every one."""
        keys, args = self._layout.admit(budgets, rates)
        answer = self._call(self._admit, keys=keys, args=args)
        return self._layout.refusal(answer, budgets, rates)

    # -- approvals -------------------------------------------------------------------

    def submit(self, pending: PendingApproval, *, max_pending: int = 0) -> str:
        """Store a new request, or name the identical one still pending (one script, bounded)."""
        keys, args = self._layout.submit(pending, self._retain, max_pending)
        return self._layout.submitted(self._call(self._submit, keys=keys, args=args))

    def get(self, request_id: str) -> PendingApproval | None:
        """The request as of now, or None (never stored, or forgotten after ``retain``)."""
        raw: Any = self._call(self._client.hgetall, self._layout.record(request_id))
        return self._layout.record_of(raw)

    def list(
        self, *, tenant: str | None, state: str | None, limit: int, cursor: str | None = None
    ) -> list[PendingApproval]:
        """Up to ``limit`` requests, newest first, after ``cursor``; forgotten ones leave the index."""
        check_listing(state, limit)
        client, index = self._client, self._layout.index
        start = 0
        if cursor is not None:
            rank: Any = self._call(client.zrevrank, index, cursor)
            if rank is None:
                return []
            start = int(rank) + 1
        found: list[PendingApproval] = []
        while len(found) < limit:
            ids: Any = self._call(client.zrevrange, index, start, start + _SCAN - 1)
            if not ids:
                break
            pipe = client.pipeline(transaction=False)
            for request_id in ids:
                pipe.hgetall(self._layout.record(request_id))
            raws = self._call(pipe.execute)
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
                self._call(client.zrem, index, *gone)
                start -= len(gone)
            start += len(ids)
        return found

    def decide(self, request_id: str, *, approve: bool, decided_by: str, reason: str) -> PendingApproval:
        """Approve or deny a pending request, atomically (one script)."""
        check_decision(decided_by, reason)
        key = self._layout.record(request_id)
        args = self._layout.decide(approve, decided_by, reason, self._grant_ttl, self._retain)
        answer = str(self._call(self._decide, keys=[key], args=args))
        if answer != "OK":
            raise decision_error(answer, request_id)
        record = self.get(request_id)
        if record is None:  # pragma: no cover - forgotten between the script and the read
            raise ApprovalDecisionError(f"no approval request {request_id!r}", reason_code="UNKNOWN_REQUEST")
        return record

    def consume(self, request_id: str, fingerprint: str) -> bool:
        """True exactly once for an approved, unexpired grant with this fingerprint (one script)."""
        key = self._layout.record(request_id)
        return bool(self._call(self._consume, keys=[key], args=self._layout.consume(fingerprint)))

    def close(self) -> None:
        """Stop the kill-switch listener and close the client's connections."""
        self._closed.set()
        listener = self._listener
        if listener is not None and listener is not threading.current_thread():
            listener.join(timeout=_LISTEN * 3)  # a poll, or a reconnection's wait
        self._listener = None
        self._client.close()


class _PubSub(Protocol):
    """What the listener uses of redis-py's PubSub."""

    def subscribe(self, *channels: str) -> None: ...
    def get_message(self, *, timeout: float) -> object: ...
    def close(self) -> None: ...


def _open_pubsub(client: redis.Redis) -> _PubSub:
    # redis-py types pubsub() from 8.x on and leaves it untyped before: going through a
    # typed callable keeps mypy --strict clean on both sides of the supported range.
    opener = cast("Callable[..., _PubSub]", client.pubsub)
    return opener(ignore_subscribe_messages=True)
