"""`MethodRoute`: the by-name route of a class-based ``MEMORY_ONLY`` tool's operation.

A class-based tool builds its intent in its own operation method, which may
check its arguments, record a denial or add warnings: the route cannot try it
and hand the call back to the full chain, as a ``@tool`` function's route does
(`toolbox.route.Route`). So the route builds the call's `Invocation` itself,
settles on its gates the checks whose outcome they decide (kill switch,
delegation scope, access of a tool already built for this context, deadline,
budget), and runs the rest of the chain from the remaining checks on
(`Pipeline.run_from`): argument validation, the audit opening, dispatch with
retries, the response. A context or a call the gates cannot settle takes the
whole chain, before anything is recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

from toolbox.context import ExecutionContext, OperationRecord
from toolbox.descriptor import ToolDescriptor
from toolbox.intent_text import declared_intent
from toolbox.pipeline.chain import Pipeline, Plan
from toolbox.pipeline.checks import KillSwitch
from toolbox.pipeline.invocation import BY_NAME, Invocation
from toolbox.pipeline.paths import ROUTE_GATES
from toolbox.pipeline.result import ToolResult

if TYPE_CHECKING:
    from toolbox.tools import Tools

__all__ = ["MethodRoute"]


@final
class MethodRoute:
    """One compiled name of a class-based tool: ``run`` and ``arun`` return a result, or None.

    None means the call takes the full chain; nothing was recorded then.
    """

    __slots__ = (
        "_descriptor",
        "_effect",
        "_engaged",
        "_intent_field",
        "_pipeline",
        "_plan",
        "_rest",
        "name",
        "operation",
        "tool",
        "version",
    )

    def __init__(
        self, invocation: Invocation, *, plan: Plan, pipeline: Pipeline, kill_switch: KillSwitch
    ) -> None:
        descriptor = invocation.descriptor
        assert descriptor is not None
        self.name = invocation.name
        self.tool = invocation.tool
        self.operation = invocation.operation
        self.version = invocation.version
        self._descriptor: ToolDescriptor = descriptor
        self._effect = invocation.effect
        self._intent_field = invocation.record.intent_kind
        self._plan = plan
        self._pipeline = pipeline
        self._engaged = kill_switch.engaged
        #: The plan's checks the gates do not settle (argument validation), in order.
        self._rest = tuple(check for check in plan.checks if type(check) not in ROUTE_GATES)

    def _begin(self, context: ExecutionContext, arguments: object, tools: Tools) -> Invocation | None:
        """The call's invocation, its trace record appended, past the gates; None: take the full chain."""
        if (
            context.deadline is not None
            or context.budget is not None
            or context.scope is not None
            or self._engaged(self.tool)
        ):
            return None
        runtime = tools.built_runtime(self.tool)
        if runtime is None:
            return None
        field = self._intent_field
        record = OperationRecord(self.tool, self.operation, field, declared_intent(arguments, field), None)
        record.name = self.name
        runtime.record(record)
        invocation = Invocation(
            door=BY_NAME,
            name=self.name,
            tool=self.tool,
            operation=self.operation,
            context=context,
            # Anything but an object is refused by argument validation, which names it.
            arguments=arguments,  # type: ignore[arg-type]
            record=record,
        )
        # What the access check sets for a tool built for this context.
        invocation.version = self.version
        invocation.descriptor = self._descriptor
        invocation.effect = self._effect
        invocation.tools = tools
        invocation.runtime = runtime
        invocation.instance = tools.acquire(self.tool)
        return invocation

    def run(self, context: ExecutionContext, arguments: object, tools: Tools) -> ToolResult | None:
        """The call's result, or None when it must take the full chain (nothing was recorded then)."""
        invocation = self._begin(context, arguments, tools)
        if invocation is None:
            return None
        return self._pipeline.run_from(invocation, self._plan, self._rest)

    async def arun(self, context: ExecutionContext, arguments: object, tools: Tools) -> ToolResult | None:
        """Async twin of `run`."""
        invocation = self._begin(context, arguments, tools)
        if invocation is None:
            return None
        return await self._pipeline.arun_from(invocation, self._plan, self._rest)
