"""`Connection`: the pooled sessions to one server (per upstream credential), from any caller.

A session is bound to the event loop it runs on (`toolbox_mcp._session`), so:

- **async callers** use a session on their own loop, one per loop (kept in a
  weak map, like toolbox-http's async clients): no thread hop on the hot path;
- **sync callers** (the typed door's ``execute()``, a worker thread) use one
  session on a daemon thread running a loop of its own.

Either way sessions are pooled (never one per call), and servers are
isolated: a server that hangs only ever holds up its own calls, which time
out; a session that broke is dropped (the SDK reaps a stdio child) and the
next call starts a new one. The caller's wait is bounded by the call's
timeout plus the connect timeout, whatever the server does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, final

import mcp_types

from toolbox.errors import ToolConnectionError, ToolTimeoutError
from toolbox_mcp._session import CLOSE_WAIT, Check, Listing, LoopSession, McpProtocolError, SessionLost
from toolbox_mcp._transports import Opener

__all__ = ["Connection", "McpProtocolError", "SessionLost"]

T = TypeVar("T")
_GRACE = 2.0


@final
class Connection:
    """The sessions to one server: one per caller event loop, and one for sync callers."""

    __slots__ = (
        "_background",
        "_closed",
        "_connect_timeout",
        "_label",
        "_lock",
        "_loop",
        "_on_listing",
        "_opener",
        "_per_loop",
        "_thread",
    )

    def __init__(self, opener: Opener, *, label: str, connect_timeout: float, on_listing: Listing) -> None:
        self._opener = opener
        self._label = label
        self._connect_timeout = connect_timeout
        self._on_listing = on_listing
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._background: LoopSession | None = None
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopSession] = (
            weakref.WeakKeyDictionary()
        )
        self._closed = False

    @property
    def sessions_started(self) -> int:
        """Sessions started so far, on every loop (restarts after a crash included)."""
        with self._lock:
            held = [*self._per_loop.values(), *([self._background] if self._background else [])]
        return sum(s.sessions_started for s in held)

    def _session_for(self, loop: asyncio.AbstractEventLoop) -> LoopSession:
        return LoopSession(
            self._opener,
            label=self._label,
            connect_timeout=self._connect_timeout,
            on_listing=self._on_listing,
            loop=loop,
        )

    # -- async callers: a session on their own loop -------------------------------------------

    async def acall(
        self, remote: str, arguments: dict[str, Any], timeout: float, check: Check
    ) -> mcp_types.CallToolResult:
        """Call tool ``remote`` from async code; see `call`."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise ToolConnectionError(f"{self._label}: the connection is closed", request_sent=False)
            session = self._per_loop.get(loop)
            if session is None:
                session = self._per_loop[loop] = self._session_for(loop)
        # Bounded inside: the start by the connect timeout, the listing and call by ``timeout``.
        return await session.call(remote, arguments, timeout, check)

    # -- sync callers: the background loop -----------------------------------------------------

    def call(
        self, remote: str, arguments: dict[str, Any], timeout: float, check: Check
    ) -> mcp_types.CallToolResult:
        """Call tool ``remote`` and wait at most ``timeout`` seconds (plus the connect time).

        ``check()`` runs once the session's listing is current, right before the call is sent
        (it raises to refuse: an operation that drifted from the lock).
        """
        future = self._submit(lambda s: s.call(remote, arguments, timeout, check))
        result: mcp_types.CallToolResult = self._wait(future, timeout + self._connect_timeout + _GRACE)
        return result

    def list_tools(self, timeout: float) -> list[mcp_types.Tool]:
        """The server's tools, listed now (for locking and drift checks)."""
        future = self._submit(lambda s: s.list_now(timeout))
        tools: list[mcp_types.Tool] = self._wait(future, timeout + self._connect_timeout + _GRACE)
        return tools

    def _submit(self, work: Callable[[LoopSession], Coroutine[Any, Any, T]]) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._closed:
                raise ToolConnectionError(f"{self._label}: the connection is closed", request_sent=False)
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"toolbox-mcp {self._label}", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                self._background = self._session_for(loop)
            session = self._background
            assert session is not None
            return asyncio.run_coroutine_threadsafe(work(session), self._loop)

    def _wait(self, future: concurrent.futures.Future[T], limit: float) -> T:
        try:
            return future.result(limit)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolTimeoutError(f"{self._label} did not answer within {limit:g} s") from None

    # -- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """End every session (the SDK reaps a stdio child) and stop the background loop."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
            per_loop = list(self._per_loop.items())
            self._per_loop.clear()
        for owner, session in per_loop:
            _drop_on(owner, session)
        if loop is None or thread is None:
            return
        background = self._background
        if background is not None:
            # The SDK's shutdown kills the child; a loop that does not answer is abandoned below.
            with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
                asyncio.run_coroutine_threadsafe(background.drop(), loop).result(CLOSE_WAIT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(CLOSE_WAIT)
        if not thread.is_alive():
            loop.close()

    def __repr__(self) -> str:
        return f"Connection({self._label}, sessions_started={self.sessions_started})"


def _drop_on(loop: asyncio.AbstractEventLoop, session: LoopSession) -> None:
    """End ``session`` on its own loop, from whatever thread closes the connection."""
    if loop.is_closed() or not session.alive:
        return  # a finished loop cancelled the holder task: the SDK's shutdown already ran
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        # Closed from code running on that loop: it cannot block here, so the drop is scheduled.
        loop.create_task(session.drop())
    elif loop.is_running():
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(session.drop(), loop).result(CLOSE_WAIT)
    else:
        with contextlib.suppress(RuntimeError):
            loop.run_until_complete(session.drop())
