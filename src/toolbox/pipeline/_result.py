"""Statuses and `ToolResult`: one vocabulary for both front doors."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, final

if TYPE_CHECKING:
    from toolbox.pipeline._grants import ApprovalRequest

__all__ = ["Status", "ToolResult", "succeeded"]


class Status(str, enum.Enum):
    """The outcome of one invocation."""

    SUCCESS = "SUCCESS"
    DENIED = "DENIED"
    """Refused before the tool ran (or before a retry); see ``reason_code``."""
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    """Arguments failed validation; see ``error_code`` and ``field_path``."""
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    """A pending, argument-bound approval: a signal, not an error."""
    BUSINESS_FAILED = "BUSINESS_FAILED"
    """The tool ran; a registered mapper says the business outcome failed."""
    ERROR = "ERROR"
    """The tool ran and failed, or could not be reached."""
    UNCERTAIN_EFFECT = "UNCERTAIN_EFFECT"
    """The tool may or may not have taken effect (e.g. a write that timed out)."""


_NOT_ERRORS = frozenset({Status.SUCCESS, Status.APPROVAL_REQUIRED})
_FIELDS = frozenset(
    {
        "name",
        "tool",
        "operation",
        "content",
        "reason_code",
        "rule",
        "error_code",
        "field_path",
        "message",
        "attempts",
        "trace_id",
        "correlation_id",
        "warnings",
        "approval",
        "audit_failed",
        "retry_after",
    }
)


@final
class ToolResult:
    """What an invocation produced. Safe to show a model: no stack traces, no secrets.

    Fields that do not apply keep their class-level default (None, empty).
    """

    #: The name as requested, e.g. ``search:v2`` or ``http.get``.
    name: str = ""
    tool: str = ""
    operation: str = ""
    content: Any = None
    reason_code: str | None = None
    rule: str | None = None
    error_code: str | None = None
    field_path: str | None = None
    message: str = ""
    #: How many times the operation was dispatched (0 when refused before dispatch).
    attempts: int = 0
    #: The context's run id: the trace this invocation belongs to.
    trace_id: str | None = None
    correlation_id: str | None = None
    warnings: tuple[str, ...] = ()
    approval: ApprovalRequest | None = None
    #: True when the audit trail could not record the outcome.
    audit_failed: bool = False
    #: For DENIED/RATE_LIMITED: seconds until the limit admits a call again.
    retry_after: float | None = None

    def __init__(self, status: Status, **fields: Any) -> None:
        """Args:
        status: the outcome.
        **fields: any of the attributes above.
        """
        self.status = status
        if not _FIELDS.issuperset(fields):
            raise TypeError(f"ToolResult has no field(s) {sorted(set(fields) - _FIELDS)}")
        self.__dict__.update(fields)

    @property
    def is_error(self) -> bool:
        """True for every status but SUCCESS and APPROVAL_REQUIRED."""
        return self.status not in _NOT_ERRORS

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping for a model or a log (``content`` is included as is)."""
        data: dict[str, Any] = {
            "status": self.status.value,
            "name": self.name,
            "tool": self.tool,
            "operation": self.operation,
            "attempts": self.attempts,
            "trace_id": self.trace_id,
            "correlation_id": self.correlation_id,
        }
        for key in ("reason_code", "rule", "error_code", "field_path"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.message:
            data["message"] = self.message
        if self.warnings:
            data["warnings"] = list(self.warnings)
        if self.approval is not None:
            data["approval"] = self.approval.as_dict()
        if self.retry_after is not None:
            data["retry_after"] = self.retry_after
        if self.status is Status.SUCCESS or self.status is Status.BUSINESS_FAILED:
            data["content"] = self.content
        return data

    def __repr__(self) -> str:
        extra = "".join(
            f" {key}={getattr(self, key)}"
            for key in ("reason_code", "error_code", "field_path")
            if getattr(self, key) is not None
        )
        return f"ToolResult({self.status.value} {self.name}{extra} attempts={self.attempts})"


_new_result = object.__new__
#: Read once: an enum member read from its class costs more than the rest of `succeeded`.
_SUCCESS = Status.SUCCESS


def succeeded(  # noqa: PLR0917 - positional on purpose: the by-name hot path builds one per call
    name: str, tool: str, operation: str, content: Any, trace_id: str, correlation_id: str
) -> ToolResult:
    """A SUCCESS result after one attempt, built without keyword checks (the hot path's form)."""
    result: ToolResult = _new_result(ToolResult)
    result.status = _SUCCESS
    result.name = name
    result.tool = tool
    result.operation = operation
    result.content = content
    result.attempts = 1
    result.trace_id = trace_id
    result.correlation_id = correlation_id
    return result
