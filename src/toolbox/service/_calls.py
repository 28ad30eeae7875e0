"""Running one governed call from a request where `toolbox.doors._placement` places it; the metrics.

A call whose trail awaits durable writes (STRICT on SQLite or PostgreSQL) runs
on the event loop and waits for its group commit without blocking it; a call
whose trail writes only on the calling thread runs whole on a worker thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, final

from starlette.concurrency import run_in_threadpool

from toolbox.doors._gateway import Gateway
from toolbox.doors._placement import CallPlacement
from toolbox.foundations._context import ExecutionContext
from toolbox.pipeline._grants import Approval
from toolbox.pipeline._result import ToolResult
from toolbox.service._metrics import ServiceMetrics

__all__ = ["CallRunner"]


async def _on_thread(call: Callable[[], ToolResult]) -> ToolResult:
    return await run_in_threadpool(call)


@final
class CallRunner:
    """Decides, once per name, where a call runs; counts every call in the metrics."""

    __slots__ = ("_metrics", "_placement")

    def __init__(self, metrics: ServiceMetrics) -> None:
        self._metrics = metrics
        self._placement = CallPlacement()

    async def run(
        self,
        gateway: Gateway,
        name: str,
        arguments: dict[str, Any],
        context: ExecutionContext,
        approval: Approval | None = None,
    ) -> ToolResult:
        """Invoke ``name`` governed, in ``context``."""
        started = time.perf_counter()
        result, tool = await self._placement.invoke(
            gateway, name, arguments, context=context, offload=_on_thread, approval=approval
        )
        self._metrics.observe(tool, result.status.value, time.perf_counter() - started)
        return result

    def forget(self) -> None:
        """Drop the placements (after the gateway was rebuilt)."""
        self._placement.forget()
