"""`Invocation`: one call travelling through the chain, from either front door."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, final

from toolbox.foundations._context import ExecutionContext, OperationRecord
from toolbox.foundations._descriptor import Effect, ToolDescriptor
from toolbox.foundations._intent_text import declared_intent
from toolbox.pipeline._ports import CallRuntime, CallTools
from toolbox.pipeline._result import Status, ToolResult

if TYPE_CHECKING:
    from toolbox.pipeline._grants import Approval

__all__ = ["Commit", "Invocation", "declared_record"]

TYPED = "typed"
BY_NAME = "by_name"


class Commit(Protocol):
    """What a check leaves to be done once the call's outcome is recorded (`Invocation.commit`).

    An approval request is submitted to the approval store only after the
    audit trail recorded it: ``settle`` gets the recorded result and returns it,
    or the result that replaces it (AUDIT_UNAVAILABLE when it was not recorded,
    a refusal of the store).
    """

    def settle(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        """Do what waited for the record; the result to return."""

    async def asettle(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        """`settle` for the async door (a store's I/O off the event loop)."""


def declared_record(
    tool: str, operation: str, intent_field: str, arguments: object, name: str
) -> OperationRecord:
    """The trace record a by-name call starts with: its intent as declared, validated later by the chain."""
    text = declared_intent(arguments, intent_field)
    return OperationRecord(tool, operation, intent_field, text, None, name)


@final
class Invocation:
    """Mutable, per-call state shared by the interceptors.

    ``arguments`` are what governance decides on: the provider's view of the
    call's arguments when it gives one (``arguments=``: HTTP's request as
    sent), else the call's bound arguments. ``bound`` are the call's
    arguments by declared parameter (`toolbox.foundations._binding`), the same on both
    doors once validated: what approval fingerprints, approval requests and
    audit payloads describe. Neither is recorded as it is.

    Rarely set attributes keep their class-level defaults, so a call pays only
    for what it uses.
    """

    version: str | None = None
    descriptor: ToolDescriptor | None = None
    effect: Effect = Effect.UNSAFE
    runtime: CallRuntime | None = None
    instance: object | None = None
    tools: CallTools | None = None
    target: str | None = None
    call: Callable[[], Any] | None = None
    acall: Callable[[], Awaitable[Any]] | None = None
    approval: Approval | None = None
    #: The call's bound arguments, when they are not ``arguments`` itself (see `bound_arguments`).
    bound: Mapping[str, Any] | None = None
    #: Ids of guardrails that require an approval for this call.
    approval_rules: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    #: ``<authorizer>:<policy>`` ids of the policies that decided this attempt's authorization.
    authorization_rules: tuple[str, ...] = ()
    #: The opening events the audit trail stored for this call, once stored (a
    #: `toolbox.audit._batch.Opening`; the chain only carries it, so it is not typed here).
    opening: Any = None
    #: The exception behind an ERROR or UNCERTAIN_EFFECT result, for the typed door.
    error: BaseException | None = None
    #: What waits for this call's outcome to be recorded (an approval request's submission).
    commit: Commit | None = None
    #: The model's id of this tool call (OpenAI ``tool_call_id``, Anthropic ``tool_use`` id), when
    #: the door knows it: model output, for traces (``gen_ai.tool.call.id``), never a decision.
    call_id: str | None = None

    def __init__(
        self,
        *,
        door: str,
        name: str,
        tool: str,
        operation: str,
        context: ExecutionContext,
        arguments: Mapping[str, Any],
        record: OperationRecord,
    ) -> None:
        self.door = door
        self.name = name
        self.tool = tool
        self.operation = operation
        self.context = context
        self.arguments = arguments
        self.record = record

    @classmethod
    def by_name(  # noqa: PLR0917 - what the by-name door knows of a call before any check
        cls,
        name: str,
        tool: str,
        operation: str,
        context: ExecutionContext,
        arguments: object,
        record: OperationRecord,
        *,
        version: str | None,
        tools: CallTools,
    ) -> Invocation:
        """A by-name call of ``name`` (``tool.operation``): the one place every by-name path starts one.

        The gateway's door, and a route handing its call to the chain, or
        running a class-based tool's checks through it (`toolbox.doors._route`,
        `toolbox.doors._route_method`); the access check, or the route for a tool
        already built for the context, then attaches the tool (`granted`).
        """
        invocation = cls(
            door=BY_NAME,
            name=name,
            tool=tool,
            operation=operation,
            context=context,
            # Anything but an object is refused by argument validation, which names it.
            arguments=arguments,  # type: ignore[arg-type]
            record=record,
        )
        invocation.version = version
        invocation.tools = tools
        return invocation

    def granted(self, runtime: CallRuntime, instance: object) -> None:
        """Attach the built tool of a by-name call: what the access check sets once it allowed it."""
        self.runtime = runtime
        self.descriptor = runtime.descriptor
        self.effect = runtime.effect_of(self.operation)
        self.instance = instance

    def bound_arguments(self) -> Mapping[str, Any]:
        """The call's arguments by declared parameter: what an approval binds and the audit records."""
        bound = self.bound
        if bound is not None:
            return bound
        arguments = self.arguments
        return arguments if isinstance(arguments, Mapping) else {}

    @property
    def intent_kind(self) -> str:
        """``purpose`` or ``audit_as``."""
        return self.record.intent_kind

    @property
    def intent_text(self) -> str:
        """The declared intent."""
        return self.record.intent_text

    @property
    def executions(self) -> int:
        """How many times this invocation dispatched the operation."""
        return self.record.attempts

    def result(self, status: Status, **fields: Any) -> ToolResult:
        """A `ToolResult` for this invocation, with its ids and warnings filled in."""
        context = self.context
        fields["name"] = self.name
        fields["tool"] = self.tool
        fields["operation"] = self.operation
        fields["attempts"] = self.record.attempts
        fields["trace_id"] = context.run_id
        fields["correlation_id"] = context.correlation_id
        if self.warnings:
            fields["warnings"] = self.warnings
        return ToolResult(status, **fields)

    def denied(self, reason_code: str, rule: str, message: str) -> ToolResult:
        """A DENIED result."""
        return self.result(Status.DENIED, reason_code=reason_code, rule=rule, message=message)

    def invalid(self, error_code: str, field_path: str, message: str) -> ToolResult:
        """An INVALID_ARGUMENTS result naming the error code and the field."""
        return self.result(
            Status.INVALID_ARGUMENTS,
            reason_code="INVALID_ARGUMENTS",
            error_code=error_code,
            field_path=field_path,
            message=message,
        )
