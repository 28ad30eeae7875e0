"""`LoopSession`: one MCP `ClientSession` held on one event loop, started lazily, restartable.

The transport and the session are entered and left by one holder task (anyio
requires it); calls run as other tasks of the same loop. A session that broke
(the child exited, the stream failed) is dropped, which lets the SDK's own
shutdown reap a stdio child; the next call starts a new one.

At session start, and again after every ``tools/list_changed`` notification,
the server's tools are listed and handed to ``on_listing``, which compares
them with the lock; the notification itself adds nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, final

import anyio
import mcp_types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from toolbox.errors import ToolConnectionError, ToolDeniedError, ToolExecutionError, ToolTimeoutError
from toolbox_mcp._transports import Opener

__all__ = ["Check", "Listing", "LoopSession", "McpProtocolError", "SessionLost"]

_MAX_PAGES = 50
CLOSE_WAIT = 8.0  # the SDK's stdio shutdown waits up to 2 s, then kills the tree and waits again

Listing = Callable[[list[mcp_types.Tool]], None]
Check = Callable[[], None]


class SessionLost(ToolConnectionError):
    """The session to the server broke during the call (the server exited or the stream failed)."""


class McpProtocolError(ToolExecutionError):
    """The server answered the call, but with a JSON-RPC error or an answer the SDK refused."""


@final
class LoopSession:
    """The session of one server on one event loop (only ever used from that loop)."""

    __slots__ = (
        "_connect_timeout",
        "_holder",
        "_label",
        "_on_listing",
        "_opener",
        "_session",
        "_stale",
        "_start_lock",
        "_stop",
        "loop",
        "sessions_started",
    )

    def __init__(
        self,
        opener: Opener,
        *,
        label: str,
        connect_timeout: float,
        on_listing: Listing,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._opener = opener
        self._label = label
        self._connect_timeout = connect_timeout
        self._on_listing = on_listing
        #: The loop this session lives on.
        self.loop = loop
        self._session: ClientSession | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._start_lock: asyncio.Lock | None = None
        self._stale = False
        #: How many sessions were started (1 unless the server crashed and was restarted).
        self.sessions_started = 0

    @property
    def alive(self) -> bool:
        """Whether a session is open (its holder task still runs)."""
        return self._live() is not None

    async def call(
        self, remote: str, arguments: dict[str, Any], timeout: float, check: Check
    ) -> mcp_types.CallToolResult:
        """Call ``remote`` on this loop's session (started within the connect timeout if needed).

        A stale listing (after ``tools/list_changed``) is refreshed first; then ``check()``
        may refuse the call; the listing and the call together get ``timeout`` seconds.
        """
        session = await self._session_now()
        try:
            # A cancel scope, not asyncio.wait_for: no extra task on the hot path.
            with anyio.fail_after(timeout):
                if self._stale:
                    await self._list(session)
                check()
                result = await session.call_tool(remote, arguments)
        except TimeoutError:
            raise ToolTimeoutError(f"{self._label}: {remote} did not finish within {timeout:g} s") from None
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                await self.drop()
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

    async def list_now(self, timeout: float) -> list[mcp_types.Tool]:
        """The server's tools, listed now."""
        session = await self._session_now()
        with anyio.fail_after(timeout):
            return await self._list(session)

    def _live(self) -> ClientSession | None:
        holder = self._holder
        return self._session if holder is not None and not holder.done() else None

    async def _session_now(self) -> ClientSession:
        live = self._live()
        if live is not None:
            return live
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            live = self._live()
            return live if live is not None else await self._start()

    async def _start(self) -> ClientSession:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[ClientSession] = loop.create_future()
        self._stop = asyncio.Event()
        self.sessions_started += 1
        holder = loop.create_task(self._hold(ready, self._stop))
        self._holder = holder
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self._connect_timeout)
        except asyncio.TimeoutError:
            await self.drop()
            raise ToolConnectionError(
                f"{self._label} did not start within {self._connect_timeout:g} s", request_sent=False
            ) from None
        except Exception as exc:
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

    async def drop(self) -> None:
        """End the session (the SDK reaps a stdio child); a later call starts a new one."""
        stop, holder = self._stop, self._holder
        self._session = None
        if stop is not None:
            stop.set()
        if holder is not None and not holder.done():
            try:
                await asyncio.wait_for(asyncio.shield(holder), CLOSE_WAIT)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - shutting down regardless
                holder.cancel()

    def __repr__(self) -> str:
        return f"LoopSession({self._label}, sessions_started={self.sessions_started})"


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
