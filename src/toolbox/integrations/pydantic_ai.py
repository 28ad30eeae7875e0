"""`GovernedToolset`: a gateway's tools inside a pydantic-ai `Agent`, every call governed.

The toolset lists the operations the policy allows (under their wire names, which
every model API accepts) and runs each call the model makes through
`Gateway.ainvoke`, with the trusted `ExecutionContext` taken from the run context
(``ctx.deps`` unless you say otherwise), never from the model's arguments. The
gateway's answer becomes pydantic-ai's own idiom:

- SUCCESS: the tool's content;
- INVALID_ARGUMENTS: `ModelRetry` naming the field, counted against the tool's
  retries (the agent's ``retries`` unless given);
- APPROVAL_REQUIRED: `ApprovalRequired`, so the run ends with
  `DeferredToolRequests`; resume it with `deferred_results`, which carries the
  human's argument-bound `Approval` in the call's metadata (a denial never
  reaches the toolset: `GovernedToolset.record_denial` audits it);
- any other status (a denial, an error): `ToolFailed` with a refusal the model
  can read; the run goes on.

A ``def`` tool that is ``MEMORY_ONLY`` runs inline on the event loop, where
pydantic-ai would push a native ``def`` tool to a worker thread.

See docs/integrations/pydantic-ai.md.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any, Generic, cast, final

try:
    from pydantic_ai import RunContext
    from pydantic_ai.exceptions import ApprovalRequired, ModelRetry, ToolFailed
    from pydantic_ai.tools import (
        AgentDepsT,
        DeferredToolRequests,
        DeferredToolResults,
        ToolApproved,
        ToolDefinition,
        ToolDenied,
    )
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
except ImportError as _import_error:  # pragma: no cover - exercised by a test that hides the package
    raise ImportError(
        "Please install pydantic-ai to use toolbox.integrations.pydantic_ai: "
        'pip install "toolbox-registry[pydantic-ai]"'
    ) from _import_error

from toolbox import ExecutionContext, Gateway, Status, ToolResult
from toolbox.doors.tool_calls import parse_arguments, result_text
from toolbox.governance import Approval, ApprovalRequest, ArgumentLimits, ArgumentValidation
from toolbox.integrations._offered import Remembered

__all__ = ["GRANT_KEY", "REQUEST_KEY", "GovernedToolset", "approval_requests", "deferred_results"]

REQUEST_KEY = "toolbox_approval_request"
"""The key of the `ApprovalRequest` (as a JSON-ready mapping) in `DeferredToolRequests.metadata`."""
GRANT_KEY = "toolbox_approval"
"""The key of the `Approval` (as a JSON-ready mapping) in `DeferredToolResults.metadata`."""

ContextFunc = Callable[[RunContext[AgentDepsT]], ExecutionContext | str]
"""Takes the trusted context (or a reference the gateway's resolver resolves) from the run context."""

# A context function that raised: not None (a non-strict gateway would use its fallback), not a
# string (a resolver would be asked): the gateway refuses it as no trusted context.
_UNTRUSTED = cast(ExecutionContext, object())
# A grant in the metadata that is not a well-formed Approval: verification refuses it, audited.
_MALFORMED_GRANT = Approval(request_id="", fingerprint="", approved_by="", expires_at=0.0, signature="")


def _deps(ctx: RunContext[Any]) -> Any:
    return ctx.deps


@final
class _Unparsed(dict[str, Any]):
    """Argument text the model sent that is not a JSON object within the limits: no call runs."""

    __slots__ = ("code", "message")

    def __init__(self, code: str, message: str) -> None:
        super().__init__()
        self.code = code
        self.message = message


@final
class _ArgumentsValidator:
    """pydantic-ai's argument validator, left to the gateway: JSON text parsed under its guards.

    The gateway validates every call against the operation's schema (and names the
    field); here JSON text only becomes an object, size-checked before parsing,
    duplicate keys refused. Anything else reaches the gateway as it is.
    """

    __slots__ = ("_limits",)

    def __init__(self, limits: ArgumentLimits) -> None:
        self._limits = limits

    def validate_json(self, input: str | bytes | bytearray, **_: Any) -> Any:
        text = input if isinstance(input, str) else bytes(input).decode("utf-8", "replace")
        try:
            return parse_arguments(text, self._limits)
        except Exception as refused:  # noqa: BLE001 - toolbox.doors.tool_calls refuses with its own type
            return _Unparsed(
                getattr(refused, "code", "malformed_json"), getattr(refused, "message", "bad JSON")
            )

    def validate_python(self, input: Any, **_: Any) -> Any:
        if isinstance(input, dict):
            return input
        return _Unparsed("not_an_object", "the arguments must be a JSON object")


@final
class GovernedToolset(AbstractToolset[AgentDepsT], Generic[AgentDepsT]):
    """The operations a `Gateway` allows, as a pydantic-ai toolset; every call is governed.

    Args:
        gateway: the gateway whose allowed operations the agent may call.
        context: takes the trusted `ExecutionContext` from the run context (default:
            ``ctx.deps``, which must then be one). A context function that raises, or
            returns anything but a context (or a reference the gateway's resolver
            accepts), gets every call refused as NO_TRUSTED_CONTEXT.
        max_retries: how often the model may retry a call with bad arguments (default:
            the agent's ``retries``).
        id: the toolset's id among the agent's toolsets (needed for durable execution).
        remember: how many approval requests it issued are held for `approval_requests`
            (the oldest go first).

    See [the pydantic-ai integration](../integrations/pydantic-ai.md).
    """

    def __init__(
        self,
        gateway: Gateway,
        *,
        context: ContextFunc[AgentDepsT] = _deps,
        max_retries: int | None = None,
        id: str | None = None,
        remember: int = 10_000,
    ) -> None:
        if not isinstance(gateway, Gateway):
            raise TypeError(f"gateway must be a toolbox.Gateway, got {type(gateway).__name__}")
        if not callable(context) or inspect.iscoroutinefunction(context):
            raise TypeError("context must be a plain (not async) function taking the RunContext")
        self.gateway = gateway
        self.context = context
        self.max_retries = max_retries
        self._id = id
        self._validator = _ArgumentsValidator(_limits(gateway))
        # Definitions are context-free and fixed once the catalog is loaded: built once per retry limit.
        self._tools: dict[int, dict[str, ToolsetTool[AgentDepsT]]] = {}
        # The requests this toolset issued, by id: what a person is shown, never the run's output.
        self._issued: Remembered[str, ApprovalRequest] = Remembered(remember)

    @property
    def id(self) -> str | None:
        """The id given at construction, if any."""
        return self._id

    @property
    def label(self) -> str:
        """The toolset's name in pydantic-ai's error messages."""
        return f"GovernedToolset {self._id!r}" if self._id else "GovernedToolset"

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        """One tool per allowed operation, named by its wire name (``calculator__evaluate``)."""
        retries = self.max_retries if self.max_retries is not None else ctx.max_retries
        tools = self._tools.get(retries)
        if tools is None:
            tools = self._tools[retries] = {
                definition["name"]: ToolsetTool(
                    toolset=self,
                    tool_def=ToolDefinition(
                        name=definition["name"],
                        description=definition["description"],
                        parameters_json_schema=definition["parameters"],
                    ),
                    max_retries=retries,
                    args_validator=self._validator,
                )
                for definition in self.gateway.definitions()
            }
        return dict(tools)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        """Run the call through the gateway; its result in pydantic-ai's terms (see the module)."""
        try:
            context = self.context(ctx)
        except Exception:  # noqa: BLE001 - a context that cannot be had is no trusted context
            context = _UNTRUSTED
        if type(tool_args) is _Unparsed:
            # Still a governed, audited call, refused before dispatch: by validation, or sooner.
            recorded = await self.gateway.ainvoke(name, None, context=context)
            if recorded.status is not Status.INVALID_ARGUMENTS:
                raise ToolFailed(result_text(recorded))
            raise ModelRetry(f"{tool_args.message} ({tool_args.code}); send the arguments as a JSON object")
        approval = _grant(ctx.tool_call_metadata) if ctx.tool_call_approved else None
        result = await self.gateway.ainvoke(
            name, tool_args, context=context, approval=approval, call_id=ctx.tool_call_id
        )
        status = result.status
        if status is Status.SUCCESS:
            return result.content
        if status is Status.INVALID_ARGUMENTS:
            raise ModelRetry(_retry_text(result))
        if status is Status.APPROVAL_REQUIRED and result.approval is not None:
            self._issued.put(result.approval.id, result.approval)
            raise ApprovalRequired(metadata={REQUEST_KEY: result.approval.as_dict()})
        raise ToolFailed(result_text(result))

    def approval_requests(self, requests: DeferredToolRequests) -> dict[str, ApprovalRequest]:
        """The requests this toolset issued behind a run's pending approvals, by ``tool_call_id``.

        Show a person these, not the run's output: each is the toolset's own copy, so
        an output stored and edited before a person looks cannot show one call while
        the grant binds another. An approval whose metadata names no request this
        toolset issued (another toolset's, or one no longer held) is left out.

        Raises:
            ValueError: the metadata names a request this toolset issued but differs from it.
        """
        found: dict[str, ApprovalRequest] = {}
        for call_id, shown in _shown(requests).items():
            held = self._issued.get(str(shown.get("id")))
            if held is None:
                continue
            if _json(held.as_dict()) != _json(shown):  # a stored output may have been through JSON
                raise ValueError(
                    f"the approval request of tool call {call_id[:100]!r} differs from the one issued"
                )
            found[call_id] = held
        return found

    def record_denial(self, request: ApprovalRequest, *, context: ExecutionContext) -> None:
        """Put a person's "no" to ``request`` in the audit trail (DENIED/APPROVAL_DENIED).

        pydantic-ai answers a denied approval (`ToolDenied`) itself, without calling
        the toolset, so toolbox learns of the decision only from this call. The event
        is a governance decision in ``context``'s trace, rule ``approval:denied``.

        Raises:
            ValueError: ``request`` was made for another tenant or principal.
        """
        if (request.tenant, request.principal) != (context.tenant, context.principal):
            raise ValueError("the approval request belongs to another tenant or principal")
        pipeline = self.gateway.catalog.pipeline
        pipeline.report_denial(context, request.tool, "APPROVAL_DENIED", "approval:denied")


def _limits(gateway: Gateway) -> ArgumentLimits:
    for step in gateway.catalog.pipeline.interceptors:
        if isinstance(step, ArgumentValidation):
            return step.limits
    return ArgumentLimits()


def _retry_text(result: ToolResult) -> str:
    where = f" at {result.field_path!r}" if result.field_path else ""
    return f"invalid arguments{where} ({result.error_code}): {result.message}"


def _grant(metadata: object) -> Approval | None:
    """The `Approval` a resumed call carries, None when there is none (the gateway asks again)."""
    raw = metadata.get(GRANT_KEY) if isinstance(metadata, Mapping) else None
    if raw is None:
        return None
    if isinstance(raw, Approval):
        return raw
    if isinstance(raw, Mapping):
        fields = (raw.get(key) for key in ("request_id", "fingerprint", "approved_by", "signature"))
        request_id, fingerprint, approved_by, signature = fields
        expires_at = raw.get("expires_at")
        texts = (request_id, fingerprint, approved_by, signature)
        if all(type(text) is str for text in texts) and type(expires_at) in (int, float):
            return Approval(
                request_id=cast(str, request_id),
                fingerprint=cast(str, fingerprint),
                approved_by=cast(str, approved_by),
                expires_at=float(cast(float, expires_at)),
                signature=cast(str, signature),
            )
    return _MALFORMED_GRANT


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _shown(requests: DeferredToolRequests) -> dict[str, Mapping[str, Any]]:
    """The request mapping in each pending approval's metadata, by ``tool_call_id``."""
    found: dict[str, Mapping[str, Any]] = {}
    for call in requests.approvals:
        entry = requests.metadata.get(call.tool_call_id)
        shown = entry.get(REQUEST_KEY) if isinstance(entry, Mapping) else None
        if isinstance(shown, Mapping):
            found[call.tool_call_id] = shown
        elif shown is not None:
            raise ValueError(
                f"the metadata of tool call {call.tool_call_id[:100]!r} is not a toolbox approval request"
            )
    return found


def approval_requests(requests: DeferredToolRequests) -> dict[str, ApprovalRequest]:
    """The `ApprovalRequest` each pending approval's metadata carries, by ``tool_call_id``.

    This reads the run's output, which the application may have stored: to show a
    person what to approve, use `GovernedToolset.approval_requests`, which returns
    the toolset's own copy. Approvals that no `GovernedToolset` asked for are left out.
    """
    found: dict[str, ApprovalRequest] = {}
    for call_id, shown in _shown(requests).items():
        try:
            found[call_id] = ApprovalRequest(
                id=str(shown["id"]),
                tool=str(shown["tool"]),
                operation=str(shown["operation"]),
                arguments=dict(shown["arguments"]),
                fingerprint=str(shown["fingerprint"]),
                rules=tuple(str(rule) for rule in shown["rules"]),
                tenant=str(shown["tenant"]),
                principal=str(shown["principal"]),
            )
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"the metadata of tool call {call_id[:100]!r} is not a toolbox approval request"
            ) from None
    return found


def deferred_results(
    *, approved: Mapping[str, Approval] | None = None, denied: Mapping[str, str] | None = None
) -> DeferredToolResults:
    """The human's decisions, to resume the run with ``deferred_tool_results=``.

    Args:
        approved: ``tool_call_id`` -> the `Approval` your approver issued for that call's
            request (`HmacApprover.grant`). The call then runs once, with exactly the
            arguments it was approved for.
        denied: ``tool_call_id`` -> the reason the model reads; the call never runs.
    """
    approved, denied = approved or {}, denied or {}
    both = set(approved) & set(denied)
    if both:
        raise ValueError(f"a call cannot be both approved and denied: {sorted(both)}")
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {call: ToolApproved() for call in approved}
    approvals.update({call: ToolDenied(message) for call, message in denied.items()})
    metadata = {
        call: {
            GRANT_KEY: {
                "request_id": grant.request_id,
                "fingerprint": grant.fingerprint,
                "approved_by": grant.approved_by,
                "expires_at": grant.expires_at,
                "signature": grant.signature,
            }
        }
        for call, grant in approved.items()
    }
    return DeferredToolResults(approvals=approvals, metadata=metadata)
