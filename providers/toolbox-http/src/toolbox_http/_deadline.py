"""The ``total_timeout`` of one call, enforced on every socket operation, retries included.

A per-read timeout alone does not bound an exchange: a server that drips one
byte of its status line or headers every few hundred milliseconds never trips
it. So each call gets a `Deadline`, started by its first attempt and shared by
the chain's retries, and while a request is in flight the deadline is made
current (`Deadline.current`). The guarded network streams (`toolbox_http._guard`)
clamp the timeout of every connect, TLS handshake, read and write to the time
left, and fail at once when none is left, on the sync and the async door alike.
"""

from __future__ import annotations

import contextvars
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, final

import httpcore

__all__ = ["AsyncDeadlineStream", "Deadline", "DeadlineStream", "clamp", "time_left"]

#: The monotonic time the request in flight must finish by; None outside a request.
_EXPIRES: contextvars.ContextVar[float | None] = contextvars.ContextVar("toolbox_http_deadline", default=None)


@final
class Deadline:
    """``seconds`` from the first attempt of one call; retries use what is left."""

    __slots__ = ("_expires", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._expires: float | None = None

    def start(self) -> None:
        """Start the clock (only the first attempt does; later calls keep it running)."""
        if self._expires is None:
            self._expires = time.monotonic() + self.seconds

    def remaining(self) -> float:
        """Seconds left (negative once passed); the full budget before `start`."""
        if self._expires is None:
            return self.seconds
        return self._expires - time.monotonic()

    def expired(self) -> bool:
        return self.remaining() <= 0

    @contextmanager
    def current(self) -> Iterator[None]:
        """Make this the deadline the network streams of this thread or task enforce."""
        self.start()
        token = _EXPIRES.set(self._expires)
        try:
            yield
        finally:
            _EXPIRES.reset(token)


def clamp(timeout: float | None) -> float | None:
    """``timeout`` cut to the current deadline; 0.0 when it has passed (the caller fails at once)."""
    expires = _EXPIRES.get()
    if expires is None:
        return timeout
    left = max(expires - time.monotonic(), 0.0)
    return left if timeout is None else min(timeout, left)


def time_left(timeout: float | None, error: type[httpcore.TimeoutException]) -> float | None:
    """`clamp` ``timeout``, raising ``error`` when the current deadline has already passed."""
    bounded = clamp(timeout)
    if bounded is not None and bounded <= 0:
        raise error("total_timeout reached")
    return bounded


@final
class DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every operation ends by the current deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        bounded = time_left(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


@final
class AsyncDeadlineStream(httpcore.AsyncNetworkStream):
    """The async twin of `DeadlineStream`."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, time_left(timeout, httpcore.ReadTimeout))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, time_left(timeout, httpcore.WriteTimeout))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        bounded = time_left(timeout, httpcore.ConnectTimeout)
        return AsyncDeadlineStream(await self._inner.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)
