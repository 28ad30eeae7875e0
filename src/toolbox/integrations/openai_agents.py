"""`GovernedAgentTools`: a gateway's tools as OpenAI Agents SDK `FunctionTool`s, every call governed.

Each operation the policy allows becomes a `FunctionTool` under its wire name,
with the strict-mode schema of `Gateway.definitions(format="openai")`. Its
``on_invoke_tool`` runs the model's argument text through `Gateway.ainvoke`
(parsed under the gateway's guards, duplicate keys refused), with the trusted
`ExecutionContext` taken from ``RunContextWrapper.context`` by a function you
give, never from the model's arguments. What the model reads back:

- SUCCESS: the tool's content;
- any refusal (a denial, invalid arguments, an error): a JSON refusal naming the
  status, reason and field, so the model can correct itself; the run goes on.

Human approval uses the SDK's own interruptions. An operation that can need
approval gets a ``needs_approval`` function that asks the gateway: when it
answers APPROVAL_REQUIRED, the `ApprovalRequest` (arguments redacted, bound to
every value by its fingerprint) is kept and the run stops with a
`ToolApprovalItem`. `GovernedAgentTools.pending` lists the requests;
`approve` takes the grant your `Approver` issued for one, keeps it and calls
`RunState.approve`; the resumed run calls the tool once with that grant. A grant
is redeemed only for the exact arguments it was issued for (an edited state is
refused as APPROVAL_INVALID) and only once; an SDK approval without a toolbox
grant (``state.approve`` alone, or an approval forged into a serialized state)
runs nothing. `reject` calls `RunState.reject`: the tool never runs.

A ``def`` tool that is ``MEMORY_ONLY`` runs inline on the event loop.

See docs/integrations/openai-agents.md.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, final

try:
    from agents import FunctionTool, RunConfig, RunContextWrapper, RunState, Tool, ToolErrorFormatterArgs
    from agents.items import ToolApprovalItem
    from agents.tool_context import ToolContext
except ImportError as _import_error:  # pragma: no cover - exercised by a test that hides the package
    raise ImportError(
        "Please install the OpenAI Agents SDK to use toolbox.integrations.openai_agents: "
        'pip install "toolbox-registry[openai-agents]"'
    ) from _import_error

from toolbox import ExecutionContext, Gateway, Status, ToolResult
from toolbox.doors.tool_calls import ainvoke_arguments, result_text, without_optional_nulls
from toolbox.governance import Approval, ApprovalRequest
from toolbox.integrations._offered import (
    Offered,
    Remembered,
    context_key,
    offered_operations,
    trusted_context,
)

__all__ = ["ContextFunc", "GovernedAgentTools", "PendingApproval"]

ContextFunc = Callable[[RunContextWrapper[Any]], ExecutionContext | str | None]
"""Takes the trusted context (or a reference the gateway's resolver resolves) from the run context."""


def _wrapped_context(wrapper: RunContextWrapper[Any]) -> Any:
    return wrapper.context


class _Interrupted(Protocol):
    """What `GovernedAgentTools.pending` reads: a `RunResult` (or a streamed one)."""

    @property
    def interruptions(self) -> Sequence[ToolApprovalItem]: ...

    @property
    def context_wrapper(self) -> RunContextWrapper[Any]: ...


@final
@dataclass(frozen=True)
class PendingApproval:
    """A call the run stopped for: the SDK's interruption and what toolbox asks a human."""

    item: ToolApprovalItem
    """The SDK's interruption; `approve` / `reject` pass it to `RunState`."""
    request: ApprovalRequest
    """What to show (arguments redacted) and to grant (``approver.grant(request, ...)``)."""
    key: tuple[str, str]
    """The run and the model's call id the request is held under."""


@final
class GovernedAgentTools:
    """The operations a `Gateway` allows, as `FunctionTool`s for an `agents.Agent`.

    Args:
        gateway: the gateway whose allowed operations the agent may call.
        context: takes the trusted `ExecutionContext` from the run context (default:
            ``wrapper.context``, which must then be one). A function that raises, or
            returns anything but a context, a reference the gateway's resolver accepts
            or None, gets every call refused as DENIED/NO_TRUSTED_CONTEXT (so does None,
            unless the gateway was built with ``strict=False`` and a fallback).
        remember: how many pending requests, grants and early results are held for runs
            that have not resumed yet (the oldest go first).

    See [the OpenAI Agents integration](../integrations/openai-agents.md).
    """

    __slots__ = ("_asked", "_context", "_early", "_gateway", "_grants", "_requests", "tools")

    def __init__(
        self, gateway: Gateway, *, context: ContextFunc = _wrapped_context, remember: int = 10_000
    ) -> None:
        if not callable(context):
            raise TypeError("context must be a callable taking the RunContextWrapper")
        offered = offered_operations(gateway)
        self._gateway = gateway
        self._context = context
        # Keyed by (run, call id): the call id alone is model output and may repeat across runs.
        self._requests: Remembered[tuple[str, str], ApprovalRequest] = Remembered(remember)
        self._grants: Remembered[tuple[str, str], Approval] = Remembered(remember)
        self._early: Remembered[tuple[str, str], ToolResult] = Remembered(remember)
        # The arguments each held call was asked about: a call id the model reuses in a later run
        # of the same context with other arguments is a new call, never an earlier one's answer.
        self._asked: Remembered[tuple[str, str], str] = Remembered(remember)
        #: One `FunctionTool` per allowed operation; pass them as ``Agent(tools=...)``.
        self.tools: list[Tool] = [self._function_tool(entry) for entry in offered]

    def _function_tool(self, entry: Offered) -> FunctionTool:
        gateway, name, context_of, getter = self._gateway, entry.name, self._trusted, self._context

        if not entry.may_need_approval:

            async def invoke(ctx: ToolContext[Any], text: str) -> str:
                # trusted_context called here, not through _trusted: one frame less on every call.
                context = trusted_context(getter, ctx)
                result = await ainvoke_arguments(
                    gateway, name, text, context=context, call_id=ctx.tool_call_id
                )
                return result_text(result)

            return FunctionTool(
                name=name,
                description=entry.description,
                params_json_schema=entry.parameters,
                on_invoke_tool=invoke,
                strict_json_schema=True,
            )

        async def needs_approval(
            wrapper: RunContextWrapper[Any], params: dict[str, Any], call_id: str
        ) -> bool:
            return await self._ask(name, wrapper, params, call_id)

        async def invoke_approved(ctx: ToolContext[Any], text: str) -> str:
            context = context_of(ctx)
            key = (context_key(context), ctx.tool_call_id)
            early = self._early.pop(key)
            if early is not None:
                return result_text(early)  # the gateway answered while the SDK asked about approval
            self._requests.pop(key)
            grant = self._grants.pop(key)
            result = await ainvoke_arguments(
                gateway, name, text, context=context, approval=grant, call_id=ctx.tool_call_id
            )
            return result_text(result)

        return FunctionTool(
            name=name,
            description=entry.description,
            params_json_schema=entry.parameters,
            on_invoke_tool=invoke_approved,
            strict_json_schema=True,
            needs_approval=needs_approval,
        )

    def _trusted(self, wrapper: RunContextWrapper[Any]) -> ExecutionContext | str | None:
        return trusted_context(self._context, wrapper)

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """A `RunConfig` under which a model naming a tool it was not offered gets an answer.

        The SDK's default (``tool_not_found_behavior="raise_error"``) ends the run with
        ``ModelBehaviorError`` when the model calls a name that is not among ``tools``: a tool
        the policy denies (never offered), or a name it made up. Pass this to ``Runner.run(...,
        run_config=governed.run_config())``: such a call is governed like any other (refused by
        the gateway, recorded and audited, nothing runs) and the model reads the refusal, as it
        does for every denial. ``base`` keeps your other settings (its own formatter still
        answers the other kinds of tool error).
        """
        chosen = base if base is not None else RunConfig()
        formatter = chosen.tool_error_formatter

        async def answer(args: ToolErrorFormatterArgs[Any]) -> str | None:
            if args.kind != "tool_not_found":
                found = formatter(args) if formatter is not None else None
                return await found if inspect.isawaitable(found) else found
            return await self._not_offered(args.tool_name, args.run_context)

        return dataclasses.replace(
            chosen, tool_not_found_behavior="return_error_to_model", tool_error_formatter=answer
        )

    async def _not_offered(self, name: str, wrapper: RunContextWrapper[Any]) -> str:
        """The governed answer to a call of ``name``, which no offered tool has."""
        result = await self._gateway.ainvoke(name[:200], None, context=self._trusted(wrapper))
        if result.status is Status.DENIED:
            return result_text(result)
        # The name resolves to an offered operation spelled otherwise (``shop.refund``): say how.
        return result_text(
            ToolResult(
                Status.DENIED,
                name=result.name,
                reason_code="TOOL_NOT_OFFERED",
                message=f"no tool is offered as {name[:200]!r}; call the tools by their listed names",
            )
        )

    async def _ask(
        self, name: str, wrapper: RunContextWrapper[Any], params: dict[str, Any], call_id: str
    ) -> bool:
        """The SDK's ``needs_approval``: the gateway decides, by running the call without a grant.

        APPROVAL_REQUIRED stops there, before dispatch: the request is kept and the SDK
        interrupts. Any other answer is final (a refusal, or the call itself when a
        guardrail's predicate did not hold for these arguments): it is kept for
        ``on_invoke_tool`` to return, so the tool runs at most once.
        """
        context = self._trusted(wrapper)
        key = (context_key(context), call_id)
        canonical = json.dumps(params, sort_keys=True, default=repr)
        if self._asked.get(key) == canonical and (key in self._early or key in self._requests):
            return key in self._requests  # the same call asked again: it must not run twice
        self._asked.put(key, canonical)
        arguments = without_optional_nulls(self._gateway, name, params)
        result = await self._gateway.ainvoke(name, arguments, context=context, call_id=call_id)
        if result.status is Status.APPROVAL_REQUIRED and result.approval is not None:
            self._early.pop(key)
            self._requests.put(key, result.approval)
            return True
        self._requests.pop(key)
        self._early.put(key, result)
        return False

    def pending(self, result: _Interrupted) -> list[PendingApproval]:
        """The interruptions of ``result`` that wait for a toolbox approval, with their requests."""
        context = self._trusted(result.context_wrapper)
        found = []
        for item in result.interruptions:
            call_id = getattr(item, "call_id", None)
            if not isinstance(call_id, str):
                continue
            key = (context_key(context), call_id)
            request = self._requests.get(key)
            if request is not None:
                found.append(PendingApproval(item=item, request=request, key=key))
        return found

    def approve(self, state: RunState[Any, Any], pending: PendingApproval, grant: Approval) -> None:
        """Hold ``grant`` for ``pending``'s call and approve it in ``state``; then resume the run.

        Raises:
            ValueError: ``grant`` is not an `Approval` for ``pending.request`` (another
                request, or no longer pending). The gateway still verifies it when the
                call runs: the approver's signature, the arguments, expiry, single use.
        """
        request = self._requests.get(pending.key)
        if (
            not isinstance(grant, Approval)
            or request is None
            or request.id != pending.request.id
            or grant.request_id != request.id
            or grant.fingerprint != request.fingerprint
        ):
            raise ValueError("the grant is not an Approval issued for this pending request")
        self._grants.put(pending.key, grant)
        state.approve(pending.item)

    def reject(
        self, state: RunState[Any, Any], pending: PendingApproval, *, message: str | None = None
    ) -> None:
        """Reject ``pending``'s call in ``state``: the resumed run tells the model, the tool never runs."""
        self._requests.pop(pending.key)
        self._grants.pop(pending.key)
        state.reject(pending.item, rejection_message=message)
