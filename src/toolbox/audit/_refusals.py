"""The events of calls refused before an opening was stored, and of denials outside the chain.

`AuditTrail` stores them; this module only builds them, so the rules they
name, the decision word and the fields of each event are decided in one place.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolbox.audit._batch import CallSubject, call_event
from toolbox.audit._events import AuditEvent, EventType
from toolbox.foundations._context import ExecutionContext
from toolbox.pipeline._result import Status, ToolResult

if TYPE_CHECKING:
    from toolbox.pipeline._invocation import Invocation

__all__ = [
    "UNATTRIBUTED",
    "call_arguments",
    "decided_by",
    "decision_of",
    "denial_event",
    "refusal_events",
    "untrusted_event",
]

#: The trace of a by-name call refused for lack of a trusted context: it has no run of its own.
UNATTRIBUTED = "unattributed"


def call_arguments(invocation: Invocation) -> Mapping[str, Any]:
    """What the payload describes: the call's bound arguments (`toolbox.foundations._binding`)."""
    return invocation.bound_arguments()


def decided_by(invocation: Invocation) -> tuple[str, ...]:
    """The rules behind a call's governance decision: warning guardrails, then determining policies."""
    rules = tuple(w.split(":", 1)[0] for w in invocation.warnings)
    return (*rules, *invocation.authorization_rules) if invocation.authorization_rules else rules


def refusal_events(
    subject: CallSubject,
    invocation: Invocation,
    result: ToolResult,
    payload_summary: str | None,
    payload_hash: str | None,
) -> list[AuditEvent]:
    """Intent, decision and response of a call refused before its opening was stored."""
    rules = decided_by(invocation)
    if result.rule and result.rule not in rules:
        rules = (*rules, result.rule)
    record = invocation.record
    at = (subject, invocation.context, record.intent_text, time.time())
    return [
        call_event(
            EventType.INTENT_DECLARED, *at, payload_summary=payload_summary, payload_hash=payload_hash
        ),
        call_event(
            EventType.GOVERNANCE_DECISION,
            *at,
            decision=decision_of(result),
            reason_code=result.reason_code,
            rule_ids=rules,
            status=result.status.value,
        ),
        call_event(
            EventType.INVOCATION_RESPONSE,
            *at,
            status=result.status.value,
            reason_code=result.reason_code or result.error_code,
            duration=record.duration,
            attempt=record.attempts,
        ),
    ]


def denial_event(
    context: ExecutionContext, tool: str, reason_code: str, rule: str, operation: str
) -> AuditEvent:
    """A denial outside the chain: ``Tools.get`` (no operation yet), or a name outside a toolset."""
    return AuditEvent(
        EventType.GOVERNANCE_DECISION,
        trace_id=context.run_id,
        correlation_id=context.correlation_id,
        name=f"{tool}.{operation}" if operation else tool,
        tool=tool,
        operation=operation,
        decision="DENY",
        reason_code=reason_code,
        rule_ids=(rule,),
        tenant=context.tenant,
        principal=context.principal,
        status=Status.DENIED.value,
        parent_run_id=context.parent_run_id,
        credential=context.credential,
    )


def untrusted_event(name: str) -> AuditEvent:
    """A by-name call refused for lack of a trusted context."""
    return AuditEvent(
        EventType.SYSTEM_ERROR,
        trace_id=UNATTRIBUTED,
        name=name,
        decision="DENY",
        reason_code="NO_TRUSTED_CONTEXT",
        rule_ids=("context",),
        status=Status.DENIED.value,
    )


def decision_of(result: ToolResult) -> str:
    """The governance decision the audit trail records for ``result``."""
    if result.status is Status.INVALID_ARGUMENTS:
        return "INVALID"
    if result.status is Status.APPROVAL_REQUIRED:
        return "APPROVAL_REQUIRED"
    return "DENY" if result.status is Status.DENIED else "ALLOW"
