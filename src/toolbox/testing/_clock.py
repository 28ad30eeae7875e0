"""ManualClock: time that moves only when a test moves it."""

from __future__ import annotations

import threading
import time
from typing import final

__all__ = ["ManualClock"]


@final
class ManualClock:
    """Wall-clock seconds that stand still until `advance` (thread-safe).

    Pass it as ``clock=`` to a state store (`toolbox.state.SqlState`, `RedisState`,
    `MemoryApprovalStore`, `MemoryLimitStore`) to expire approval requests, grants, budget
    and rate windows by moving time forward instead of sleeping: the test is exact and
    costs nothing. It starts at the real time's whole second (or ``start``), so records'
    timestamps stay plausible and decimal steps stay exact at the millisecond stores keep.

    Example::

        clock = ManualClock()
        store = MemoryApprovalStore(clock=clock)
        ...
        clock.advance(601)  # the request's ten minutes are over
    """

    __slots__ = ("_lock", "_now")

    def __init__(self, start: float | None = None) -> None:
        self._now = float(int(time.time()) if start is None else start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (never back); the new time."""
        if not seconds >= 0:
            raise ValueError("a ManualClock only moves forward")
        with self._lock:
            self._now += seconds
            return self._now

    def __repr__(self) -> str:
        return f"ManualClock({self._now!r})"
