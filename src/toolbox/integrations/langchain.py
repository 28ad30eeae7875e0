"""`GovernedLangChainTools`: a gateway's tools as LangChain `StructuredTool`s, every call governed.

Each operation the policy allows becomes a `StructuredTool` under its wire name
with the strict-mode JSON Schema of `Gateway.definitions(format="openai")`, for
``model.bind_tools(...)``, ``create_agent(tools=...)`` or your own tool loop. A
call runs through `Gateway.invoke` (``tool.invoke``) or `Gateway.ainvoke`
(``tool.ainvoke``), with the trusted `ExecutionContext` taken from the
`RunnableConfig` (``config["configurable"]["toolbox_context"]`` unless you say
otherwise), never from the tool input. The model's arguments reach the gateway
as one object: LangChain's own keywords (``config``, ``callbacks``,
``run_manager``) cannot be set by the model, and any key the schema lacks is an
INVALID_ARGUMENTS refusal.

Invoked with a model's tool call, a tool answers with a `ToolMessage`:

- SUCCESS: the tool's content, ``status="success"``;
- any refusal (a denial, invalid arguments, an error, an approval still
  needed): a JSON refusal the model can read, ``status="error"``, and the
  `ToolResult` as a JSON-ready mapping in ``artifact`` (never sent to the model).

Human approval: a call that needs one answers APPROVAL_REQUIRED without running.
`GovernedLangChainTools.pending` returns the held `ApprovalRequest` for such a
message; your `Approver` grants it; `invoke_approved` (or `ainvoke_approved`)
runs that call once with the grant and returns its new `ToolMessage`. Under the
hood the grant travels in ``config["configurable"]["toolbox_approvals"]`` (tool
call id to `Approval`), so a tool call you re-invoke yourself works the same; a
grant covers exactly the arguments it was issued for (edited ones are refused as
APPROVAL_INVALID) and is redeemed once. To reject, do not run it: nothing ran.

With ``approval="interrupt"``, a call inside a LangGraph graph (``create_agent``
with a checkpointer) pauses the graph instead, with LangGraph's ``interrupt``
carrying the request; resume with ``Command(resume=resume_value(grant))`` (or
``resume_value(None)`` to reject) and the call runs once with the grant, or
answers that a human declined. Outside a graph it answers as above.

A ``def`` tool that is ``MEMORY_ONLY`` runs inline: ``tool.ainvoke`` never
sends it to a worker thread.

See docs/integrations/langchain.md.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast, final

try:
    from langchain_core.messages import ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import StructuredTool
except ImportError as _import_error:  # pragma: no cover - exercised by a test that hides the package
    raise ImportError(
        "Please install langchain-core to use toolbox.integrations.langchain: "
        'pip install "toolbox-registry[langchain]"'
    ) from _import_error

from toolbox import ExecutionContext, Gateway, Status, ToolResult
from toolbox.doors.tool_calls import result_text, without_optional_nulls
from toolbox.governance import Approval, ApprovalRequest
from toolbox.integrations._offered import Offered, Remembered, offered_operations, trusted_context

__all__ = [
    "APPROVALS_KEY",
    "CONTEXT_KEY",
    "INTERRUPT_KEY",
    "ContextFunc",
    "GovernedLangChainTools",
    "resume_value",
]

CONTEXT_KEY = "toolbox_context"
"""The ``configurable`` key the default context function reads."""
APPROVALS_KEY = "toolbox_approvals"
"""The ``configurable`` key of the grants: a mapping of tool call id to `Approval`."""

INTERRUPT_KEY = "toolbox_approval_request"
"""The key of the `ApprovalRequest` (as a JSON-ready mapping) in an ``interrupt`` value."""
# LangGraph puts its per-task scratchpad here inside a graph node; only there can a node interrupt.
_IN_A_GRAPH = "__pregel_scratchpad"
_REJECTED = {"rejected": True}
_GRANT_FIELDS = {
    "request_id": str,
    "fingerprint": str,
    "approved_by": str,
    "expires_at": float,
    "signature": str,
}

ContextFunc = Callable[[RunnableConfig], ExecutionContext | str | None]
"""Takes the trusted context (or a reference the gateway's resolver resolves) from the config."""

# A grant under the approvals key that is not an Approval: the gateway refuses it, audited.
_MALFORMED_GRANT = Approval(request_id="", fingerprint="", approved_by="", expires_at=0.0, signature="")


def resume_value(grant: Approval | None) -> dict[str, Any]:
    """What to resume an ``approval="interrupt"`` pause with: the grant as a JSON-ready mapping.

    ``None`` rejects the call (``{"rejected": True}``: LangGraph does not resume with
    ``None``). A mapping survives any checkpointer; the gateway still verifies the
    grant it stands for.
    """
    if grant is None:
        return dict(_REJECTED)
    if not isinstance(grant, Approval):
        raise TypeError(f"grant must be a toolbox Approval or None, got {type(grant).__name__}")
    return {name: getattr(grant, name) for name in _GRANT_FIELDS}


def _resumed_grant(decision: object) -> Approval | None:
    """The grant a resume value carries; None rejects; anything malformed is refused, audited."""
    if decision is None or decision is False or decision == _REJECTED:
        return None
    if isinstance(decision, Approval):
        return decision
    if not isinstance(decision, Mapping) or set(decision) != set(_GRANT_FIELDS):
        return _MALFORMED_GRANT
    values = dict(decision)
    if isinstance(values["expires_at"], int) and not isinstance(values["expires_at"], bool):
        values["expires_at"] = float(values["expires_at"])
    if not all(type(values[name]) is kind for name, kind in _GRANT_FIELDS.items()):
        return _MALFORMED_GRANT
    return Approval(**values)


def _configured(config: RunnableConfig) -> Any:
    return (config.get("configurable") or {}).get(CONTEXT_KEY)


def _grant(config: RunnableConfig, tool_call_id: str | None) -> Approval | None:
    grants = (config.get("configurable") or {}).get(APPROVALS_KEY)
    if tool_call_id is None or not isinstance(grants, Mapping) or tool_call_id not in grants:
        return None
    grant = grants[tool_call_id]
    return grant if isinstance(grant, Approval) else _MALFORMED_GRANT


def _declined(name: str, tool_call_id: str | None) -> ToolMessage:
    """What the model reads when a human resumed a paused call with a rejection."""
    text = '{"status": "DENIED", "reason_code": "APPROVAL_DECLINED", "message": "a human declined this call"}'
    return ToolMessage(content=text, tool_call_id=tool_call_id or "", name=name, status="error")


@final
@dataclass(frozen=True)
class _Held:
    """A call held for approval: what the gateway asked, and the call exactly as it was made."""

    request: ApprovalRequest
    name: str
    arguments: object
    tool_call_id: str


@final
class _GovernedTool(StructuredTool):
    """A `StructuredTool` whose function receives the model's arguments as one object.

    LangChain would spread the input into keyword arguments next to its own
    (``config``, ``run_manager``, ``callbacks``); here the input and the tool call id
    are positional, so the model cannot set those, and the gateway validates the input.
    """

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        return cast("tuple[str, ...]", (tool_input, tool_call_id)), {}


@final
class GovernedLangChainTools:
    """The operations a `Gateway` allows, as LangChain tools.

    Args:
        gateway: the gateway whose allowed operations the model may call.
        context: takes the trusted `ExecutionContext` from the `RunnableConfig` (default:
            ``config["configurable"]["toolbox_context"]``). A function that raises, or
            returns anything but a context, a reference the gateway's resolver accepts
            or None, gets every call refused as DENIED/NO_TRUSTED_CONTEXT (so does None,
            unless the gateway was built with ``strict=False`` and a fallback).
        approval: ``"message"`` (default): a held call answers with an error `ToolMessage`
            carrying the request; ``"interrupt"``: inside a LangGraph graph it pauses the
            graph with ``interrupt`` (resume with `resume_value`).
        remember: how many approval requests are held for `pending` (the oldest go first).

    See [the LangChain integration](../integrations/langchain.md).
    """

    __slots__ = ("_by_name", "_context", "_gateway", "_held", "_interrupts", "tools")

    def __init__(
        self,
        gateway: Gateway,
        *,
        context: ContextFunc = _configured,
        approval: str = "message",
        remember: int = 10_000,
    ) -> None:
        if not callable(context):
            raise TypeError("context must be a callable taking the RunnableConfig")
        if approval not in ("message", "interrupt"):
            raise ValueError(f"approval must be 'message' or 'interrupt', got {approval!r}")
        self._interrupts = approval == "interrupt"
        offered = offered_operations(gateway)
        self._gateway = gateway
        self._context = context
        self._held: Remembered[str, _Held] = Remembered(remember)
        #: One `StructuredTool` per allowed operation; bind them or give them to an agent.
        self.tools: list[StructuredTool] = [self._tool(entry) for entry in offered]
        self._by_name = {tool.name: tool for tool in self.tools}

    def _tool(self, entry: Offered) -> StructuredTool:
        gateway, name = self._gateway, entry.name

        def run(arguments: object, tool_call_id: str | None, config: RunnableConfig) -> Any:
            context = trusted_context(self._context, config)
            prepared = self._arguments(name, arguments)
            result = gateway.invoke(
                name, prepared, context=context, approval=_grant(config, tool_call_id), call_id=tool_call_id
            )
            if self._pauses(result, tool_call_id, config):
                grant = self._interrupt(name, arguments, result, tool_call_id)
                if grant is None:
                    return _declined(name, tool_call_id)
                result = gateway.invoke(name, prepared, context=context, approval=grant, call_id=tool_call_id)
            return self._answer(name, arguments, result, tool_call_id)

        async def arun(arguments: object, tool_call_id: str | None, config: RunnableConfig) -> Any:
            context = trusted_context(self._context, config)
            prepared = self._arguments(name, arguments)
            result = await gateway.ainvoke(
                name, prepared, context=context, approval=_grant(config, tool_call_id), call_id=tool_call_id
            )
            if self._pauses(result, tool_call_id, config):
                grant = self._interrupt(name, arguments, result, tool_call_id)
                if grant is None:
                    return _declined(name, tool_call_id)
                result = await gateway.ainvoke(
                    name, prepared, context=context, approval=grant, call_id=tool_call_id
                )
            return self._answer(name, arguments, result, tool_call_id)

        return _GovernedTool(
            name=name,
            description=entry.description,
            args_schema=entry.parameters,
            func=run,
            coroutine=arun,
        )

    def _arguments(self, name: str, arguments: object) -> object:
        if isinstance(arguments, dict):
            return without_optional_nulls(self._gateway, name, arguments)
        return arguments  # anything but an object is refused, audited, by the gateway

    def _pauses(self, result: ToolResult, tool_call_id: str | None, config: RunnableConfig) -> bool:
        return (
            self._interrupts
            and result.status is Status.APPROVAL_REQUIRED
            and result.approval is not None
            and tool_call_id is not None
            and _IN_A_GRAPH in (config.get("configurable") or {})
        )

    def _interrupt(
        self, name: str, arguments: object, result: ToolResult, tool_call_id: str | None
    ) -> Approval | None:
        """Pause the graph with the request; on resume, the grant (None: a human declined).

        LangGraph runs the tool again on resume: the gateway asks again (a second
        APPROVAL_REQUIRED in the audit trail), then ``interrupt`` returns the resume value.
        """
        try:
            from langgraph.types import interrupt
        except ImportError as missing:  # pragma: no cover - langgraph comes with langchain
            raise ImportError(
                'approval="interrupt" needs LangGraph: pip install "toolbox-registry[langchain]" langgraph'
            ) from missing
        request = result.approval
        assert request is not None and tool_call_id is not None  # checked by _pauses
        self._held.put(request.id, _Held(request, name, copy.deepcopy(arguments), tool_call_id))
        decision = interrupt({INTERRUPT_KEY: request.as_dict(), "tool_call_id": tool_call_id, "tool": name})
        return _resumed_grant(decision)

    def _answer(self, name: str, arguments: object, result: ToolResult, tool_call_id: str | None) -> Any:
        text = result_text(result)
        if result.status is Status.SUCCESS or tool_call_id is None:
            return text
        if result.status is Status.APPROVAL_REQUIRED and result.approval is not None:
            held = _Held(result.approval, name, copy.deepcopy(arguments), tool_call_id)
            self._held.put(result.approval.id, held)
        return ToolMessage(
            content=text, tool_call_id=tool_call_id, name=name, status="error", artifact=result.as_dict()
        )

    def pending(self, message: object) -> ApprovalRequest | None:
        """The `ApprovalRequest` a tool's ``message`` (or a LangGraph ``Interrupt``) waits for, or None.

        The request is the one this object holds (what the gateway asked), found by the
        id in the message's artifact or the interrupt's value; nothing else of either is
        trusted.
        """
        held = self._held_for(message)
        return held.request if held is not None else None

    def _held_for(self, message: object) -> _Held | None:
        # A LangGraph Interrupt (or its value) carries the request; a ToolMessage, its artifact.
        value = getattr(message, "value", message)
        if isinstance(value, Mapping) and isinstance(value.get(INTERRUPT_KEY), Mapping):
            request_id = value[INTERRUPT_KEY].get("id")
            return self._held.get(request_id) if isinstance(request_id, str) else None
        artifact = getattr(message, "artifact", None)
        if not isinstance(message, ToolMessage) or not isinstance(artifact, Mapping):
            return None
        approval = artifact.get("approval")
        request_id = approval.get("id") if isinstance(approval, Mapping) else None
        return self._held.get(request_id) if isinstance(request_id, str) else None

    def _approved(self, message: object, grant: Approval, config: RunnableConfig) -> tuple[Any, Any, Any]:
        held = self._held_for(message)
        if held is None or not isinstance(grant, Approval) or grant.request_id != held.request.id:
            raise ValueError("the message holds no pending approval this grant was issued for")
        self._held.pop(held.request.id)
        configurable = {**(config.get("configurable") or {}), APPROVALS_KEY: {held.tool_call_id: grant}}
        call = {"name": held.name, "args": held.arguments, "id": held.tool_call_id, "type": "tool_call"}
        return self._by_name[held.name], call, {**config, "configurable": configurable}

    def invoke_approved(self, message: object, grant: Approval, *, config: RunnableConfig) -> ToolMessage:
        """Run the call ``message`` held for approval, once, with ``grant``; its new `ToolMessage`.

        The call runs with the arguments it was made with (kept here, not read from the
        message), in the context ``config`` gives; the gateway verifies the grant
        (the approver's signature, those arguments, expiry, single use).

        Raises:
            ValueError: ``message`` holds no pending request, or ``grant`` is for another one.
        """
        tool, call, granted = self._approved(message, grant, config)
        return cast(ToolMessage, tool.invoke(call, config=granted))

    async def ainvoke_approved(
        self, message: object, grant: Approval, *, config: RunnableConfig
    ) -> ToolMessage:
        """Async twin of `invoke_approved`."""
        tool, call, granted = self._approved(message, grant, config)
        return cast(ToolMessage, await tool.ainvoke(call, config=granted))
