"""`CallPlacement`: where a governed call from a server runs, and running it there.

The chain offloads a sync I/O tool to a thread by itself; what decides the
rest is the audit trail. A trail that holds events in memory, or only
enqueues them (ASYNC), never waits: its calls run on the event loop
(`Gateway.ainvoke`). A STRICT trail on a SQL sink awaits each durable write
(`toolbox.audit.AuditTrail.awaits_writes`): its calls run on the loop too,
and each waits for its group commit's future while the loop serves the others
(`toolbox.audit._group`), so concurrent requests still share commits. Such a
call runs to its end even if its caller is cancelled (`run_to_end`), as a call
on a worker thread did: its audit stays whole. A trail whose sink writes only
on the calling thread (a sink with its own ``append``) runs its calls whole on
a worker thread (`Gateway.invoke`), so the loop never waits on a commit; so
does a name the gateway does not know there, whose refusal such a trail (or
a durable one) writes on the calling thread. An ``async def`` tool always runs on
the loop. The service and the MCP server both run their calls through here,
each offloading with its own runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from typing import final

from toolbox.doors._gateway import Gateway
from toolbox.errors import InvalidArgumentsError
from toolbox.foundations._context import ExecutionContext
from toolbox.pipeline._grants import Approval
from toolbox.pipeline._result import ToolResult

__all__ = ["ON_LOOP", "ON_THREAD", "TO_END", "UNKNOWN", "CallPlacement", "Offload", "run_to_end"]

#: The tool name reported for a name the gateway does not know.
UNKNOWN = "unknown"
#: Where a call runs: on the event loop; on the loop, to its end; whole on a worker thread.
ON_LOOP, TO_END, ON_THREAD = 0, 1, 2
_CACHED = 4096

#: How a server runs a sync call on a worker thread, awaited (its own runtime's way).
Offload = Callable[[Callable[[], ToolResult]], Awaitable[ToolResult]]


@final
class CallPlacement:
    """Decides, once per name, where a call of it runs (thread-safe: a lost race decides twice)."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        # name -> (where a call of it runs, the tool's registered name)
        self._known: dict[str, tuple[int, str]] = {}

    def of(self, gateway: Gateway, name: str) -> tuple[int, str]:
        """(where a call of ``name`` runs: `ON_LOOP`, `TO_END` or `ON_THREAD`, the tool's registered name)."""
        known = self._known.get(name)
        if known is not None:
            return known
        catalog = gateway.catalog
        trail = catalog.audit
        awaited = trail is not None and trail.awaits_writes
        blocking = trail is not None and trail.blocks_callers
        try:
            _, tool, operation, _ = catalog.resolve_name(name)
        except InvalidArgumentsError:
            # Refused by the gateway, which writes the refusal on the calling thread. Not cached
            # (names are caller text).
            return (ON_THREAD if blocking or awaited else ON_LOOP, UNKNOWN)
        entry = catalog.entry(tool)
        assert entry is not None
        tool_type = entry.registered.provider.tool_type
        is_async = bool(getattr(tool_type, "is_async", False)) or inspect.iscoroutinefunction(
            getattr(tool_type, operation, None)
        )
        where = ON_LOOP if is_async else TO_END if awaited else ON_THREAD if blocking else ON_LOOP
        placement = (where, tool)
        if len(self._known) < _CACHED:
            self._known[name] = placement
        return placement

    async def invoke(
        self,
        gateway: Gateway,
        name: str,
        arguments: object,
        *,
        context: ExecutionContext,
        offload: Offload,
        approval: Approval | None = None,
    ) -> tuple[ToolResult, str]:
        """Invoke ``name`` governed where it runs; (its result, the tool's registered name)."""
        where, tool = self.of(gateway, name)
        if where == ON_LOOP:
            result = await gateway.ainvoke(name, arguments, context=context, approval=approval)
        elif where == TO_END:
            result = await run_to_end(gateway.ainvoke(name, arguments, context=context, approval=approval))
        else:
            result = await offload(
                lambda: gateway.invoke(name, arguments, context=context, approval=approval)
            )
        return result, tool

    def forget(self) -> None:
        """Drop the decisions (after the gateway was rebuilt)."""
        self._known.clear()


async def run_to_end(call: Awaitable[ToolResult]) -> ToolResult:
    """Await ``call``; if the caller is cancelled, ``call`` still runs to its end (its audit stays
    whole) and the caller waits for it, as for a worker thread, before its cancellation goes on
    (what it does afterwards, such as releasing the call's context, comes after the call)."""
    task = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait((task,))
        if not task.cancelled():
            task.exception()  # retrieved: the caller is cancelled (a denial is a result, not an exception)
        raise
