"""`UsedGrants`: the ids of spent grants, each remembered until its own grant expires.

Without a shared store, a chain remembers which signed grants it has spent,
so a replay is refused. An id is forgotten only once its grant has expired (a
replay is then refused as expired anyway), never to make room: when the
memory is full of grants still live, a new redemption is refused (fail
closed) rather than letting an older grant become replayable.
"""

from __future__ import annotations

import heapq
import threading
import time
from typing import final

from toolbox.errors import ConfigurationError

__all__ = ["FULL", "USED", "UsedGrants"]

USED = "the approval was already used"
FULL = (
    "too many approvals still valid were redeemed to remember another; retry once one has expired"
    " (or share the state: [state] on Redis or SQL)"
)


@final
class UsedGrants:
    """Spent grant ids with their expiry; thread-safe, at most ``capacity`` remembered."""

    __slots__ = ("_capacity", "_expiries", "_lock", "_until")

    def __init__(self, capacity: int) -> None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ConfigurationError(f"remember must be a positive integer, got {capacity!r}")
        self._capacity = capacity
        self._until: dict[str, float] = {}
        # Earliest expiry first: pruning looks only at what has expired.
        self._expiries: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def used(self, grant_id: str) -> bool:
        """Whether ``grant_id`` was spent (and its grant has not been forgotten as expired)."""
        with self._lock:
            return grant_id in self._until

    def spend(self, grant_id: str, *, expires_at: float, now: float | None = None) -> str | None:
        """Record ``grant_id`` as used until ``expires_at``: None, or why it cannot be (`USED`, `FULL`)."""
        now = time.time() if now is None else now
        with self._lock:
            self._forget_expired(now)
            if grant_id in self._until:
                return USED
            if len(self._until) >= self._capacity:
                return FULL
            self._until[grant_id] = expires_at
            heapq.heappush(self._expiries, (expires_at, grant_id))
        return None

    def _forget_expired(self, now: float) -> None:
        expiries = self._expiries
        while expiries and expiries[0][0] <= now:
            _, grant_id = heapq.heappop(expiries)
            self._until.pop(grant_id, None)
