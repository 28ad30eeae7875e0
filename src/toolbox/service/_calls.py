"""Running one governed call from a request: on the event loop or on a worker thread.

Where is `toolbox.doors._placement`'s decision (a call whose audit trail writes to a
durable sink runs whole on a worker thread, so concurrent requests share its
commits); this module runs it there and counts it in the metrics.
"""

from __future__ import annotations

import time
from typing import Any, final

from starlette.concurrency import run_in_threadpool

from toolbox.doors._gateway import Gateway
from toolbox.doors._placement import CallPlacement
from toolbox.foundations._context import ExecutionContext
from toolbox.pipeline._grants import Approval
from toolbox.pipeline._result import ToolResult
from toolbox.service._metrics import ServiceMetrics

__all__ = ["CallRunner"]


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
        inline, tool = self._placement.of(gateway, name)
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
        self._placement.forget()
