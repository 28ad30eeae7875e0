"""The audit trail's place in the chain, as Protocols: the pipeline never imports the audit package."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from toolbox.foundations._context import ExecutionContext
from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline._result import ToolResult

__all__ = ["AuditHook", "AwaitedAuditHook", "CallRecorder", "audit_unavailable", "opened"]


class AuditHook(Protocol):
    """Hook points around dispatch; the audit trail implements them."""

    def on_request(self, invocation: Invocation) -> ToolResult | None:
        """Called after every check passed, before the first attempt; a result refuses the call."""

    def on_response(self, invocation: Invocation, result: ToolResult) -> None:
        """Called with every final result, denials included."""


class AwaitedAuditHook(AuditHook, Protocol):
    """An audit hook whose writes the async door awaits: ``awaits_writes`` is True then.

    The chain's async door (`Pipeline.arun`) awaits ``aon_request`` and
    ``aon_response`` instead of the sync hook points, so a call on an event
    loop waits for a durable write without blocking the loop. The trail
    implements them for a sink with an awaitable append (`toolbox.audit.AuditTrail`).
    """

    awaits_writes: bool

    async def aon_request(self, invocation: Invocation) -> ToolResult | None:
        """`on_request`, the write awaited."""

    async def aon_response(self, invocation: Invocation, result: ToolResult) -> None:
        """`on_response`, the write awaited."""


class CallRecorder(AuditHook, Protocol):
    """An audit hook that records a fast-path call itself (`toolbox.audit.AuditTrail`).

    The trail implements this, and `toolbox.Governance` hands it to the
    `Pipeline` when it is the only hook.
    """

    def subject_of(  # noqa: PLR0917 - the trail's signature
        self, name: str, tool: str, operation: str, risk: str | None, effect: str, intent_kind: str
    ) -> Any:
        """What every event of such calls repeats."""

    def open_call(
        self, subject: Any, context: ExecutionContext, intent_text: str, arguments: Mapping[str, Any]
    ) -> Any | None:
        """Store the opening events of a call about to run; None means refuse the call."""

    def close_call(  # noqa: PLR0917 - the trail's signature
        self,
        opening: Any,
        status: str,
        duration: float,
        attempts: int,
        ended: float,
        summary: tuple[str, str] | None = None,
    ) -> bool:
        """Store the response event of an opened call (with the result's own summary); False: missing."""


def audit_unavailable(invocation: Invocation) -> ToolResult:
    """DENIED/AUDIT_UNAVAILABLE: the opening events of ``invocation`` could not be stored."""
    return invocation.denied(
        "AUDIT_UNAVAILABLE", "audit", "the audit trail cannot record this call, so it was refused"
    )


def opened(invocation: Invocation, opening: object | None) -> ToolResult | None:
    """After the opening's write (``opening`` None: it was not stored): AUDIT_UNAVAILABLE, else
    None, the stored opening kept on ``invocation`` for its response to name."""
    if opening is None:
        return audit_unavailable(invocation)
    invocation.opening = opening
    return None
