"""`TurnRunner`: ``POST /v1/turns``, one orchestrated turn: a message, a model, governed tool calls.

The model is any pydantic-ai model the operator configures (a `Model` or a
name such as ``"openai:gpt-4o"``; tests use `FunctionModel`); it plans tool
calls, and each runs through the gateway by `GovernedToolset` in the
caller's trusted context: the same checks, approvals and audit as an invoke.
Optional: pydantic-ai (``toolbox-registry[pydantic-ai]``) is imported only
when a model is configured.
"""

from __future__ import annotations

from typing import Any, cast, final

from toolbox.doors._gateway import Gateway
from toolbox.foundations._context import ExecutionContext

__all__ = ["TurnOutcome", "TurnRunner"]

#: Model requests one turn may make (each tool round trip is one): a bound on a looping model.
MAX_REQUESTS = 16


@final
class TurnOutcome:
    """What a turn produced: the answer, or the approval requests it stopped at."""

    __slots__ = ("answer", "approval_ids", "tool_calls")

    def __init__(self, answer: str | None, approval_ids: list[str], tool_calls: int) -> None:
        self.answer = answer
        self.approval_ids = approval_ids
        self.tool_calls = tool_calls


def _in_scope(gateway: Gateway) -> Any:
    """pydantic-ai's tool filter: the model is shown only what the run's scope (its toolset) allows."""

    def shown(ctx: Any, tool_def: Any) -> bool:
        scope = getattr(ctx.deps, "scope", None)
        if scope is None:
            return True
        _, tool, operation, _ = gateway.catalog.resolve_name(tool_def.name)
        return bool(scope.allows(tool, operation))

    return shown


@final
class TurnRunner:
    """Runs turns with one pydantic-ai `Agent` over the gateway's governed toolset."""

    __slots__ = ("_agent",)

    def __init__(self, gateway: Gateway, model: object, instructions: str | None = None) -> None:
        try:
            from pydantic_ai import Agent
            from pydantic_ai.tools import DeferredToolRequests

            from toolbox.integrations.pydantic_ai import GovernedToolset
        except ImportError:
            raise ImportError(
                'POST /v1/turns needs pydantic-ai: pip install "toolbox-registry[pydantic-ai]"'
            ) from None
        self._agent: Any = Agent(
            cast(Any, model),  # a Model or a model name; pydantic-ai checks which
            deps_type=ExecutionContext,
            toolsets=[GovernedToolset(gateway).filtered(_in_scope(gateway))],
            output_type=[str, DeferredToolRequests],
            instructions=instructions,
        )

    async def run(self, message: str, context: ExecutionContext) -> TurnOutcome:
        """One turn of ``message`` in ``context``.

        Raises:
            Exception: whatever the model raised (the route answers 502 without its text).
        """
        from pydantic_ai.messages import ToolCallPart
        from pydantic_ai.tools import DeferredToolRequests
        from pydantic_ai.usage import UsageLimits

        from toolbox.integrations.pydantic_ai import approval_requests

        result = await self._agent.run(
            message, deps=context, usage_limits=UsageLimits(request_limit=MAX_REQUESTS)
        )
        calls = sum(
            isinstance(part, ToolCallPart)
            for item in result.all_messages()
            for part in getattr(item, "parts", ())
        )
        output = result.output
        if isinstance(output, DeferredToolRequests):
            return TurnOutcome(None, [r.id for r in approval_requests(output).values()], calls)
        return TurnOutcome(str(output), [], calls)
