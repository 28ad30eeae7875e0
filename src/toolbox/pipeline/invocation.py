"""`Invocation`: one call travelling through the chain, from either front door."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, final

from toolbox.context import ExecutionContext, OperationRecord
from toolbox.descriptor import Effect, ToolDescriptor
from toolbox.pipeline.result import Status, ToolResult

if TYPE_CHECKING:
    from toolbox.pipeline.approval import Approval
    from toolbox.runtime import ToolRuntime
    from toolbox.tools import Tools

__all__ = ["Invocation"]

TYPED = "typed"
BY_NAME = "by_name"


@final
class Invocation:
    """Mutable, per-call state shared by the interceptors. A cheap slotted object.

    ``arguments`` are the call's arguments as a mapping (validated ones once the
    validation step ran); they are for governance decisions and are never
    recorded as they are.
    """

    __slots__ = (
        "acall",
        "approval",
        "approval_rules",
        "arguments",
        "audited",
        "call",
        "context",
        "descriptor",
        "door",
        "effect",
        "error",
        "instance",
        "intent_kind",
        "intent_text",
        "name",
        "operation",
        "record",
        "runtime",
        "target",
        "tool",
        "tools",
        "version",
        "warnings",
    )

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
        self.version: str | None = None
        self.descriptor: ToolDescriptor | None = None
        self.effect = Effect.UNSAFE
        self.runtime: ToolRuntime | None = None
        self.instance: object | None = None
        self.tools: Tools | None = None
        self.intent_kind = record.intent_kind
        self.intent_text = record.intent_text
        self.target: str | None = record.target
        self.call: Callable[[], Any] | None = None
        self.acall: Callable[[], Awaitable[Any]] | None = None
        self.approval: Approval | None = None
        #: Ids of guardrails (or ``descriptor``) that require an approval for this call.
        self.approval_rules: list[str] = []
        self.warnings: list[str] = []
        #: True once the audit trail stored this call's opening events.
        self.audited = False
        #: The exception behind an ERROR or UNCERTAIN_EFFECT result, for the typed door.
        self.error: BaseException | None = None

    @property
    def executions(self) -> int:
        """How many times this invocation dispatched the operation."""
        return self.record.attempts

    def result(self, status: Status, **fields: Any) -> ToolResult:
        """A `ToolResult` for this invocation, with its ids and warnings filled in."""
        return ToolResult(
            status,
            name=self.name,
            tool=self.tool,
            operation=self.operation,
            attempts=self.record.attempts,
            trace_id=self.context.run_id,
            correlation_id=self.context.correlation_id,
            warnings=tuple(self.warnings),
            **fields,
        )

    def denied(self, reason_code: str, rule: str, message: str) -> ToolResult:
        """A DENIED result."""
        return self.result(Status.DENIED, reason_code=reason_code, rule=rule, message=message)
