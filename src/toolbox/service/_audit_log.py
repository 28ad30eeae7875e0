"""The service's own audit events: refused requests, approval decisions, kill-switch changes.

Calls are audited by the chain; what happens around them (a request refused
before any call, a human's decision, an operator's switch) is written here,
into the same trail, so one read-back shows the whole story. Events hold
reason codes, rules and names, never a credential or a header value.
"""

from __future__ import annotations

import logging
from typing import final

from starlette.concurrency import run_in_threadpool

from toolbox.audit._events import AuditEvent, EventType
from toolbox.audit._trail import AuditMode, AuditTrail
from toolbox.auth import Identity

__all__ = ["UNAUTHENTICATED_TRACE", "ServiceAudit"]

LOGGER = logging.getLogger("toolbox.service")
#: The trace of requests refused before anyone was authenticated.
UNAUTHENTICATED_TRACE = "unauthenticated"
_MAX_TEXT = 500


@final
class ServiceAudit:
    """Writes service events to the trail's sink (nothing when there is no trail)."""

    __slots__ = ("_trail",)

    def __init__(self, trail: AuditTrail | None) -> None:
        self._trail = trail

    @property
    def fails_closed(self) -> bool:
        """Whether what cannot be recorded must not take effect: a STRICT or ASYNC trail."""
        return self._trail is not None and self._trail.mode is not AuditMode.BEST_EFFORT

    async def write(self, event: AuditEvent) -> bool:
        """Store ``event`` off the event loop; False (and a warning) when it could not be stored."""
        trail = self._trail
        if trail is None:
            return True
        try:
            await run_in_threadpool(trail.sink.append, [event])
        except Exception as exc:  # noqa: BLE001 - a failed write is reported, never raised to the caller
            LOGGER.warning("service audit write failed (%s)", type(exc).__name__)
            return False
        return True

    async def refused(
        self,
        route: str,
        reason_code: str,
        rule: str,
        *,
        trace_id: str,
        identity: Identity | None = None,
    ) -> bool:
        """A request refused by the service itself (authentication, role, tenant scope)."""
        return await self.write(
            AuditEvent(
                EventType.GOVERNANCE_DECISION if identity is not None else EventType.SYSTEM_ERROR,
                trace_id=trace_id if identity is not None else UNAUTHENTICATED_TRACE,
                correlation_id=trace_id,
                name=f"service:{route}"[:200],
                decision="DENY",
                reason_code=reason_code,
                rule_ids=(rule,),
                tenant=identity.tenant if identity is not None else None,
                principal=identity.principal if identity is not None else None,
                status="DENIED",
                credential=identity.credential if identity is not None else None,
            )
        )

    async def decided(
        self,
        name: str,
        decision: str,
        reason_code: str,
        *,
        identity: Identity,
        trace_id: str,
        text: str,
        tool: str = "",
        operation: str = "",
    ) -> bool:
        """An operator's decision (approve, deny, kill switch on or off), with their reason."""
        return await self.write(
            AuditEvent(
                EventType.GOVERNANCE_DECISION,
                trace_id=trace_id,
                name=name[:200],
                tool=tool,
                operation=operation,
                decision=decision,
                reason_code=reason_code,
                rule_ids=(f"service:{name}",),
                intent_kind="reason",
                intent_text=text[:_MAX_TEXT],
                tenant=identity.tenant,
                principal=identity.principal,
                status=decision,
                credential=identity.credential,
            )
        )
