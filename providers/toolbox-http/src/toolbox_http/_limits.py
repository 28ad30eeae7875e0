"""Per-host rate limits (a token bucket) and concurrency caps."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Literal, final

from pydantic import BaseModel, ConfigDict, Field

from toolbox_http._address import canonical_host
from toolbox_http._egress import RateLimitedError

__all__ = ["HostLimiter", "RateLimit"]

_POLL = 0.01


@final
class RateLimit(BaseModel):
    """Per-host limits of one `HttpTool`. Given as ``HttpOptions(rate_limit={...})``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests_per_second: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    """Sustained requests per second to one host; None: no rate limit."""
    burst: Annotated[int, Field(ge=1)] = 1
    """Requests a host may receive at once before the rate applies (the bucket's size)."""
    max_concurrent: Annotated[int, Field(ge=1)] | None = None
    """Requests in flight to one host at a time; None: no cap."""
    on_limit: Literal["deny", "wait"] = "deny"
    """``deny``: DENIED/RATE_LIMITED at once; ``wait``: wait up to ``max_wait``, then deny."""
    max_wait: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.0
    """Longest wait, in seconds, for ``on_limit="wait"``."""


@final
class _Host:
    __slots__ = ("active", "tokens", "updated")

    def __init__(self, tokens: float, now: float) -> None:
        self.tokens = tokens
        self.updated = now
        self.active = 0


@final
class HostLimiter:
    """Hands out permission to send one request to a host, per `RateLimit`.

    Hosts are keyed by `canonical_host`, so respelling an address (``127.1``,
    ``2130706433``, ``[::ffff:7f00:1]``) does not earn a fresh bucket.
    """

    __slots__ = ("_clock", "_hosts", "_limit", "_lock")

    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._hosts: dict[str, _Host] = {}

    def _try(self, host: str) -> float:
        """0 when a slot was taken, else how long to wait before trying again."""
        limit = self._limit
        now = self._clock()
        with self._lock:
            state = self._hosts.get(host)
            if state is None:
                state = self._hosts[host] = _Host(float(limit.burst), now)
            rate = limit.requests_per_second
            if rate is not None:
                state.tokens = min(float(limit.burst), state.tokens + (now - state.updated) * rate)
                state.updated = now
            if limit.max_concurrent is not None and state.active >= limit.max_concurrent:
                return _POLL
            if rate is not None:
                if state.tokens < 1:
                    return (1 - state.tokens) / rate
                state.tokens -= 1
            state.active += 1
            return 0.0

    def _release(self, host: str) -> None:
        with self._lock:
            self._hosts[host].active -= 1

    def _refuse(self, host: str, waited: float, wait: float) -> bool:
        limit = self._limit
        return limit.on_limit == "deny" or waited + wait > limit.max_wait

    def _error(self, host: str) -> RateLimitedError:
        return RateLimitedError(f"rate limit for host {host!r} reached ({self._describe()})")

    def _describe(self) -> str:
        limit = self._limit
        parts = []
        if limit.requests_per_second is not None:
            parts.append(f"{limit.requests_per_second}/s, burst {limit.burst}")
        if limit.max_concurrent is not None:
            parts.append(f"{limit.max_concurrent} concurrent")
        return "; ".join(parts)

    @contextmanager
    def hold(self, host: str) -> Iterator[None]:
        """A slot for one request to ``host``, waiting if configured.

        Raises:
            RateLimitedError: no slot within the limits.
        """
        host = canonical_host(host)
        waited = 0.0
        while (wait := self._try(host)) > 0:
            if self._refuse(host, waited, wait):
                raise self._error(host)
            time.sleep(wait)
            waited += wait
        try:
            yield
        finally:
            self._release(host)

    @asynccontextmanager
    async def ahold(self, host: str) -> AsyncIterator[None]:
        """The async twin of `hold`: waiting does not block the event loop."""
        host = canonical_host(host)
        waited = 0.0
        while (wait := self._try(host)) > 0:
            if self._refuse(host, waited, wait):
                raise self._error(host)
            await asyncio.sleep(wait)
            waited += wait
        try:
            yield
        finally:
            self._release(host)
