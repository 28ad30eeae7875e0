"""The memory backend: governance state in this process, today's behaviour and the default.

Every store here is thread-safe (one lock each) and costs no I/O, so the
checks keep their hot-path cost (``in_process``: the async door calls them
inline, never on a worker thread). Nothing is shared with another process: use
the SQL or Redis backend for a fleet (docs/fleet.md).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from typing import final

from toolbox.pipeline._grants import PendingApproval
from toolbox.pipeline._state_ports import ApprovalQueueFullError, KillEntry, Quota, Refusal
from toolbox.state._approval_rules import GRANT_TTL, check_listing, consumable, decided, effective

__all__ = ["MemoryApprovalStore", "MemoryKillSwitchStore", "MemoryLimitStore"]

_FORGET_EVERY = 4096


@final
class MemoryApprovalStore:
    """Approval requests in a dict, the oldest forgotten past ``remember`` (an unknown grant is refused)."""

    in_process = True
    __slots__ = ("_clock", "_grant_ttl", "_lock", "_queues", "_records", "_remember")

    def __init__(
        self,
        *,
        grant_ttl: float = GRANT_TTL,
        remember: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._records: OrderedDict[str, PendingApproval] = OrderedDict()
        # (tenant, principal) -> ids of its requests that may still be pending (pruned on submit).
        self._queues: dict[tuple[str, str], list[str]] = {}
        self._lock = threading.Lock()
        self._grant_ttl = grant_ttl
        self._remember = remember
        self._clock = clock

    def submit(self, pending: PendingApproval, *, max_pending: int = 0) -> str:
        """Store a new request, or name the identical one still pending; bounded per principal."""
        request = pending.request
        owner = (request.tenant, request.principal)
        with self._lock:
            if pending.id in self._records:
                return pending.id
            now = self._clock()
            queue = [
                i
                for i in self._queues.get(owner, ())
                if (p := self._records.get(i)) is not None and effective(p, now).state == "pending"
            ]
            for waiting in queue:
                if self._records[waiting].request.fingerprint == request.fingerprint:
                    self._queues[owner] = queue
                    return waiting
            if max_pending and len(queue) >= max_pending:
                self._queues[owner] = queue
                raise ApprovalQueueFullError(
                    f"{len(queue)} approval requests of this principal are already waiting"
                )
            queue.append(pending.id)
            self._queues[owner] = queue
            self._records[pending.id] = pending
            while len(self._records) > self._remember:
                self._records.popitem(last=False)
        return pending.id

    def get(self, request_id: str) -> PendingApproval | None:
        """The request, as of now."""
        with self._lock:
            pending = self._records.get(request_id)
        return None if pending is None else effective(pending, self._clock())

    def list(
        self, *, tenant: str | None, state: str | None, limit: int, cursor: str | None = None
    ) -> list[PendingApproval]:
        """Up to ``limit`` requests, newest first, after ``cursor``."""
        check_listing(state, limit)
        now = self._clock()
        with self._lock:
            records = [effective(p, now) for p in self._records.values()]
        records.sort(key=lambda p: (p.created_at, p.id), reverse=True)
        if cursor is not None:
            ids = [p.id for p in records]
            records = records[ids.index(cursor) + 1 :] if cursor in ids else []
        chosen = (
            p for p in records if (tenant is None or p.request.tenant == tenant) and state in (None, p.state)
        )
        return list(itertools.islice(chosen, limit))

    def decide(self, request_id: str, *, approve: bool, decided_by: str, reason: str) -> PendingApproval:
        """Approve or deny a pending request (`ApprovalDecisionError` when it cannot be)."""
        with self._lock:
            record = decided(
                self._records.get(request_id),
                request_id,
                approve=approve,
                decided_by=decided_by,
                reason=reason,
                now=self._clock(),
                grant_ttl=self._grant_ttl,
            )
            self._records[request_id] = record
        return record

    def consume(self, request_id: str, fingerprint: str) -> bool:
        """True exactly once for an approved, unexpired grant with this fingerprint."""
        with self._lock:
            pending = self._records.get(request_id)
            if pending is None or not consumable(pending, fingerprint, self._clock()):
                return False
            self._records[request_id] = dataclasses.replace(pending, state="used")
        return True


@final
class MemoryKillSwitchStore:
    """The kill switches of this process."""

    in_process = True
    __slots__ = ("_entries", "_lock")

    def __init__(self) -> None:
        self._entries: dict[str | None, KillEntry] = {}
        self._lock = threading.Lock()

    def engaged(self) -> Mapping[str | None, KillEntry]:
        """Every engaged switch (a copy)."""
        with self._lock:
            return dict(self._entries)

    def engage(self, tool: str | None, *, reason: str, who: str) -> KillEntry:
        """Engage the global switch or one tool's."""
        entry = KillEntry(tool, reason, who, time.time())
        with self._lock:
            self._entries[tool] = entry
        return entry

    def release(self, tool: str | None, *, reason: str, who: str) -> KillEntry | None:
        """Release it; the entry that was engaged, if any."""
        with self._lock:
            return self._entries.pop(tool, None)


@final
class MemoryLimitStore:
    """Budget counters and sliding-window rate limits of this process."""

    in_process = True
    __slots__ = ("_admits", "_clock", "_counters", "_lock", "_windows")

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        # key -> (count, expires at); key -> (window seconds, admitted times in the window).
        self._counters: dict[str, tuple[int, float]] = {}
        self._windows: dict[str, tuple[float, deque[float]]] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._admits = 0

    def _forget(self, now: float) -> None:
        """Drop expired counters and windows with nothing left in them (per-run keys never come back)."""
        self._counters = {k: v for k, v in self._counters.items() if v[1] > now}
        self._windows = {k: v for k, v in self._windows.items() if v[1] and v[1][-1] > now - v[0]}

    def admit(self, budgets: Sequence[Quota], rates: Sequence[Quota]) -> Refusal | None:
        """Refuse if any quota is spent; otherwise count the call in every one."""
        with self._lock:
            now = self._clock()
            for quota in budgets:
                count, expires = self._counters.get(quota.key, (0, 0.0))
                # A spent window counts from zero again: a budget of 0 refuses even then.
                if (count if expires > now else 0) >= quota.limit:
                    return Refusal(quota, False, expires - now if expires > now else quota.window)
            for quota in rates:
                kept = self._windows.get(quota.key)
                if kept is None:
                    continue
                window = kept[1]
                while window and window[0] <= now - quota.window:
                    window.popleft()
                if len(window) >= quota.limit:
                    return Refusal(quota, True, window[0] + quota.window - now)
            for quota in budgets:
                count, expires = self._counters.get(quota.key, (0, 0.0))
                if expires <= now:
                    count, expires = 0, now + quota.window
                self._counters[quota.key] = (count + 1, expires)
            for quota in rates:
                self._windows.setdefault(quota.key, (quota.window, deque()))[1].append(now)
            self._admits += 1
            if self._admits % _FORGET_EVERY == 0:
                self._forget(now)
        return None
