"""`Invocation`: one call travelling through the chain, from either front door."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, final

from toolbox.context import ExecutionContext, OperationRecord
from toolbox.descriptor import Effect, ToolDescriptor
from toolbox.pipeline.ports import CallRuntime, CallTools
from toolbox.pipeline.result import Status, ToolResult

if TYPE_CHECKING:
    from toolbox.pipeline.grants import Approval

__all__ = ["Invocation"]

TYPED = "typed"
BY_NAME = "by_name"


@final
class Invocation:
    """Mutable, per-call state shared by the interceptors.

    ``arguments`` are what governance sees: the provider's view of the call's
    arguments (the same on both doors once validated). They are never
    recorded as they are.

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
    #: Ids of guardrails that require an approval for this call.
    approval_rules: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    #: ``<authorizer>:<policy>`` ids of the policies that decided this attempt's authorization.
    authorization_rules: tuple[str, ...] = ()
    #: The opening events the audit trail stored for this call, once stored (a
    #: `toolbox.audit.batch.Opening`; the chain only carries it, so it is not typed here).
    opening: Any = None
    #: The exception behind an ERROR or UNCERTAIN_EFFECT result, for the typed door.
    error: BaseException | None = None
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
