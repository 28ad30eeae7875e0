"""`Connection`: one pooled MCP session to one server, on an event loop of its own.

Every server (and every upstream credential of it) has one `Connection`: a
daemon thread running an event loop that holds the SDK's `ClientSession`.
Callers on any thread or event loop submit work to that loop, so

- sessions are pooled: one per server and credential, never one per call;
- servers are isolated: a hanging or dying server blocks only its own loop;
- a session that failed (the child exited, the stream broke) is dropped and
  its child reaped by the SDK's own shutdown; the next call starts a new one;
- the caller never waits longer than its timeout: the call is cancelled on
  the session's loop, and the caller's wait is bounded too.

At session start, and again after every ``tools/list_changed`` notification,
the server's tools are listed and handed to ``on_listing``, which compares
them with the lock (`toolbox_mcp._tool`); the notification itself adds nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, final

import mcp_types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from toolbox.errors import ToolConnectionError, ToolDeniedError, ToolExecutionError, ToolTimeoutError
from toolbox_mcp._transports import Opener

__all__ = ["Connection", "McpProtocolError", "SessionLost"]

T = TypeVar("T")
_MAX_PAGES = 50
_CLOSE_WAIT = 8.0  # the SDK's stdio shutdown waits up to 2 s, then kills the tree and waits again
_GRACE = 2.0


class SessionLost(ToolConnectionError):
    """The session to the server broke during the call (the server exited or the stream failed)."""


class McpProtocolError(ToolExecutionError):
    """The server answered the call, but with a JSON-RPC error or an answer the SDK refused."""


Listing = Callable[[list[mcp_types.Tool]], None]
Check = Callable[[], None]


@final
class Connection:
    """A lazily started, restartable session to one MCP server."""

    __slots__ = (
        "_closed",
        "_connect_timeout",
        "_holder",
        "_label",
        "_lock",
        "_loop",
        "_on_listing",
        "_opener",
        "_ready",
        "_session",
        "_stale",
        "_start_lock",
        "_stop",
        "_thread",
        "sessions_started",
    )

    def __init__(self, opener: Opener, *, label: str, connect_timeout: float, on_listing: Listing) -> None:
        self._opener = opener
        self._label = label
        self._connect_timeout = connect_timeout
        self._on_listing = on_listing
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session: ClientSession | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._ready: asyncio.Future[ClientSession] | None = None
        self._start_lock: asyncio.Lock | None = None
        self._stale = False
        self._closed = False
        #: How many sessions were started (1 unless the server crashed and was restarted).
        self.sessions_started = 0

    # -- calls from any thread or loop --------------------------------------------------------

    def call(
        self, remote: str, arguments: dict[str, Any], timeout: float, check: Check
    ) -> mcp_types.CallToolResult:
        """Call tool ``remote`` and wait at most ``timeout`` seconds (plus the connect time).

        ``check()`` runs once the session's listing is current, right before the call is sent
        (it raises to refuse: an operation that drifted from the lock).
        """
        future = self._submit(self._call(remote, arguments, timeout, check))
        return self._wait(future, timeout + self._connect_timeout + _GRACE)

    async def acall(
        self, remote: str, arguments: dict[str, Any], timeout: float, check: Check
    ) -> mcp_types.CallToolResult:
        """`call` for async callers: cancelling the caller cancels the upstream call."""
        future = self._submit(self._call(remote, arguments, timeout, check))
        try:
            return await asyncio.wait_for(
                asyncio.wrap_future(future), timeout + self._connect_timeout + _GRACE
            )
        except asyncio.TimeoutError:
            future.cancel()
            raise ToolTimeoutError(f"{self._label} did not answer within {timeout:g} s") from None

    def list_tools(self, timeout: float) -> list[mcp_types.Tool]:
        """The server's tools, listed now (for locking and drift checks)."""
        return self._wait(self._submit(self._list_now(timeout)), timeout + self._connect_timeout + _GRACE)

    def close(self) -> None:
        """End the session (the SDK reaps a stdio child) and stop the loop thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        # The SDK's shutdown kills the child; a loop that does not answer is abandoned below.
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(_CLOSE_WAIT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(_CLOSE_WAIT)
        if not thread.is_alive():
            loop.close()

    # -- the loop thread -----------------------------------------------------------------------

    def _submit(self, work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._closed:
                work.close()
                raise ToolConnectionError(f"{self._label}: the connection is closed", request_sent=False)
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"toolbox-mcp {self._label}", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return asyncio.run_coroutine_threadsafe(work, self._loop)

    def _wait(self, future: concurrent.futures.Future[T], limit: float) -> T:
        try:
            return future.result(limit)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolTimeoutError(f"{self._label} did not answer within {limit:g} s") from None

    async def _call(
        self, remote: str, arguments: dict[str, Any], timeout: float, check: Check
    ) -> mcp_types.CallToolResult:
        session = await self._session_now()
        if self._stale:
            await self._relist(session)
        check()
        try:
            result = await asyncio.wait_for(session.call_tool(remote, arguments), timeout)
        except asyncio.TimeoutError:
            raise ToolTimeoutError(f"{self._label}: {remote} did not finish within {timeout:g} s") from None
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                await self._drop()
                raise SessionLost(f"{self._label}: the server closed the session during the call") from None
            raise McpProtocolError(
                f"{self._label} answered the call with error {exc.code}", request_sent=True
            ) from None
        except (RuntimeError, ValueError) as exc:
            # The SDK's own checks of the answer (e.g. structured content against the output schema).
            raise McpProtocolError(
                f"{self._label} returned an invalid result ({type(exc).__name__})", request_sent=True
            ) from None
        if not isinstance(result, mcp_types.CallToolResult):  # pragma: no cover - the SDK raises first
            raise ToolConnectionError(f"{self._label}: the server answered with something else")
        return result

    async def _list_now(self, timeout: float) -> list[mcp_types.Tool]:
        session = await self._session_now()
        return await asyncio.wait_for(self._list(session), timeout)

    async def _session_now(self) -> ClientSession:
        if self._session is not None and self._holder is not None and not self._holder.done():
            return self._session
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._session is not None and self._holder is not None and not self._holder.done():
                return self._session
            return await self._start()

    async def _start(self) -> ClientSession:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[ClientSession] = loop.create_future()
        self._ready = ready
        self._stop = asyncio.Event()
        self.sessions_started += 1
        holder = loop.create_task(self._hold(ready, self._stop))
        self._holder = holder
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self._connect_timeout)
        except asyncio.TimeoutError:
            await self._drop()
            raise ToolConnectionError(
                f"{self._label} did not start within {self._connect_timeout:g} s", request_sent=False
            ) from None
        except Exception as exc:  # noqa: BLE001 - sorted below: a denial stays a denial
            denial = _denial_in(exc)
            if denial is not None:
                raise denial from None
            if isinstance(exc, ToolExecutionError):  # e.g. a missing command or credential
                raise exc from None
            if isinstance(exc, (OSError, ValueError)):
                raise ToolConnectionError(
                    f"{self._label} could not be started ({type(exc).__name__})", request_sent=False
                ) from None
            raise ToolConnectionError(
                f"{self._label} failed during startup ({type(exc).__name__})", request_sent=False
            ) from None

    async def _hold(self, ready: asyncio.Future[ClientSession], stop: asyncio.Event) -> None:
        # The transport and the session are entered and left in this one task (anyio's rule).
        try:
            async with (
                self._opener() as (read, write),
                ClientSession(read, write, message_handler=self._on_message) as session,
            ):
                await session.initialize()
                await self._list(session)
                self._session = session
                if not ready.done():
                    ready.set_result(session)
                await stop.wait()
        except BaseException as exc:  # reported to the waiting caller, then dropped
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError("cancelled"))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None
            if not ready.done():
                ready.set_exception(ConnectionError("the session ended"))

    async def _on_message(self, message: object) -> None:
        if isinstance(message, mcp_types.ServerNotification):
            message = message.root if hasattr(message, "root") else message
        if isinstance(message, mcp_types.ToolListChangedNotification):
            # Never trusted by itself: the next call lists again and compares with the lock.
            self._stale = True

    async def _list(self, session: ClientSession) -> list[mcp_types.Tool]:
        self._stale = False
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self._on_listing(tools)
        return tools

    async def _relist(self, session: ClientSession) -> None:
        await self._list(session)

    async def _drop(self) -> None:
        stop, holder = self._stop, self._holder
        self._session = None
        if stop is not None:
            stop.set()
        if holder is not None and not holder.done():
            try:
                await asyncio.wait_for(asyncio.shield(holder), _CLOSE_WAIT)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - shutting down regardless
                holder.cancel()

    async def _shutdown(self) -> None:
        await self._drop()

    def __repr__(self) -> str:
        return f"Connection({self._label}, sessions_started={self.sessions_started})"


def _denial_in(exc: BaseException) -> ToolDeniedError | None:
    """A denial (toolbox-http's SSRF guard refusing an address) inside ``exc``'s groups or causes."""
    pending: list[BaseException] = [exc]
    seen = 0
    while pending and seen < 100:
        seen += 1
        item = pending.pop()
        if isinstance(item, ToolDeniedError):
            return item
        pending.extend(getattr(item, "exceptions", ()))
        for linked in (item.__cause__, item.__context__):
            if linked is not None:
                pending.append(linked)
    return None
