"""Running one governed call from a request: on the event loop or on a worker thread.

The chain offloads a sync I/O tool to a thread by itself, but an audit trail
with a durable sink writes on the calling thread. Such calls therefore run
whole on a worker thread (`Gateway.invoke`), so concurrent requests commit
side by side instead of one after another on the loop; an async tool, or a
trail that only holds events in memory, runs on the loop (`Gateway.ainvoke`).
"""

from __future__ import annotations

import inspect
import time
from typing import Any, final

from starlette.concurrency import run_in_threadpool

from toolbox.doors._gateway import Gateway
from toolbox.errors import InvalidArgumentsError
from toolbox.foundations._context import ExecutionContext
from toolbox.pipeline._grants import Approval
from toolbox.pipeline._result import ToolResult
from toolbox.service._metrics import ServiceMetrics

__all__ = ["CallRunner"]

UNKNOWN = "unknown"


@final
class CallRunner:
    """Decides, once per name, where a call runs; counts every call in the metrics."""

    __slots__ = ("_inline", "_metrics")

    def __init__(self, metrics: ServiceMetrics) -> None:
        self._metrics = metrics
        # name -> (runs on the loop, the tool's registered name for the metrics)
        self._inline: dict[str, tuple[bool, str]] = {}

    def _placement(self, gateway: Gateway, name: str) -> tuple[bool, str]:
        known = self._inline.get(name)
        if known is not None:
            return known
        catalog = gateway.catalog
        trail = catalog.audit
        blocking = trail is not None and trail.direct_hold is None
        try:
            _, tool, operation, _ = catalog.resolve_name(name)
        except InvalidArgumentsError:
            return (not blocking, UNKNOWN)  # refused by the gateway; not cached (names are caller text)
        entry = catalog.entry(tool)
        assert entry is not None
        tool_type = entry.registered.provider.tool_type
        is_async = bool(getattr(tool_type, "is_async", False)) or inspect.iscoroutinefunction(
            getattr(tool_type, operation, None)
        )
        placement = (is_async or not blocking, tool)
        if len(self._inline) < 4096:
            self._inline[name] = placement
        return placement

    async def run(
        self,
        gateway: Gateway,
        name: str,
        arguments: dict[str, Any],
        context: ExecutionContext,
        approval: Approval | None = None,
    ) -> ToolResult:
        """Invoke ``name`` governed, in ``context``."""
        inline, tool = self._placement(gateway, name)
        started = time.perf_counter()
        if inline:
            result = await gateway.ainvoke(name, arguments, context=context, approval=approval)
        else:
            result = await run_in_threadpool(
                gateway.invoke, name, arguments, context=context, approval=approval
            )
        self._metrics.observe(tool, result.status.value, time.perf_counter() - started)
        return result

    def forget(self) -> None:
        """Drop the placements (after the gateway was rebuilt)."""
        self._inline.clear()
