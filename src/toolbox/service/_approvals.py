"""`ApprovalDesk`: pending approvals raised by calls, decided by people, redeemed once.

1. A call that needs approval answers 202: the chain submits its
   `ApprovalRequest` (arguments redacted as in the audit trail, a keyed
   fingerprint over every value) to the `ApprovalStore` as a `PendingApproval`.
2. An approver of the same tenant, never the requester, approves or denies it.
3. The requester repeats the call with ``approval_id``. The service checks
   tenant, requester and state for a clear answer, then hands the chain
   `Approval.of_request`: every check runs again, authorization included, and
   the approval check consumes the grant in the store for the fingerprint of
   *these* arguments, true exactly once. Edited arguments consume nothing and
   run nothing.

Every refusal and every decision is an audit event in the call's trace.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar, final

from starlette.concurrency import run_in_threadpool

from toolbox.auth import Identity
from toolbox.pipeline._grants import Approval, PendingApproval
from toolbox.pipeline._result import ToolResult
from toolbox.pipeline._state_ports import ApprovalDecisionError, ApprovalStore, StateUnavailableError
from toolbox.service._audit_log import ServiceAudit
from toolbox.service._problems import Problem
from toolbox.state._approval_rules import decided as decided_record

__all__ = ["ApprovalDesk", "approval_document", "store_call"]

T = TypeVar("T")

_DECISION_HTTP = {"UNKNOWN_REQUEST": 404, "ALREADY_DECIDED": 409, "EXPIRED": 409, "SELF_APPROVAL": 403}
_REDEEM_REFUSALS = {
    "pending": ("APPROVAL_PENDING", "the approval has not been decided yet"),
    "denied": ("APPROVAL_DENIED", "the approval was denied"),
    "expired": ("APPROVAL_EXPIRED", "the approval has expired"),
    "used": ("APPROVAL_USED", "the approval was already used"),
}


async def store_call(trace_id: str, call: Callable[[], T]) -> T:
    """Run a store call off the event loop; a store that does not answer is a 503 problem."""
    try:
        return await run_in_threadpool(call)
    except StateUnavailableError:
        raise Problem(
            503,
            "STATE_UNAVAILABLE",
            "the approval store is unavailable",
            rule="state:approvals",
            trace_id=trace_id,
        ) from None


def approval_document(pending: PendingApproval) -> dict[str, Any]:
    """What the API and the console show of an approval (arguments already redacted)."""
    request = pending.request
    return {
        "id": request.id,
        "url": f"/v1/approvals/{request.id}",
        "tool": request.tool,
        "operation": request.operation,
        "arguments": dict(request.arguments),
        "rules": list(request.rules),
        "intent_kind": pending.intent_kind,
        "intent_text": pending.intent_text,
        "requester": request.principal,
        "run_id": pending.run_id,
        "created_at": pending.created_at,
        "expires_at": pending.expires_at,
        "state": pending.state,
        "decided_by": pending.decided_by,
        "decided_at": pending.decided_at,
        "reason": pending.reason,
    }


@final
class ApprovalDesk:
    """The service's side of approvals, over an `ApprovalStore`."""

    __slots__ = ("_audit", "store")

    def __init__(self, store: ApprovalStore, audit: ServiceAudit) -> None:
        self.store = store
        self._audit = audit

    async def raised(
        self, result: ToolResult, intent_kind: str, intent_text: str, run_id: str
    ) -> PendingApproval:
        """The stored request of an APPROVAL_REQUIRED ``result`` (submitted by the chain)."""
        request = result.approval
        assert request is not None
        pending = await store_call(run_id, lambda: self.store.get(request.id))
        if pending is None:  # a store that dropped it at once (full): keep it visible anyway
            now = time.time()
            pending = PendingApproval(request, intent_kind, intent_text, run_id, now, now + 3600.0)
            await store_call(run_id, lambda: self.store.submit(pending))
        return pending

    async def visible(self, request_id: str, identity: Identity, trace_id: str) -> PendingApproval:
        """The approval ``request_id`` of the caller's tenant, else an audited 404."""
        pending = (
            await store_call(trace_id, lambda: self.store.get(request_id)) if _plausible(request_id) else None
        )
        if pending is None or pending.request.tenant != identity.tenant:
            # Another tenant's approval is indistinguishable from none at all.
            await self._audit.refused(
                "approval",
                "UNKNOWN_REQUEST",
                "service:approvals:tenant",
                trace_id=trace_id,
                identity=identity,
            )
            raise Problem(
                404, "UNKNOWN_REQUEST", "no such approval", rule="service:approvals", trace_id=trace_id
            )
        return pending

    async def decide(
        self, request_id: str, *, approve: bool, reason: str, identity: Identity, trace_id: str
    ) -> PendingApproval:
        """Record an approver's decision, or an audited problem (404, 403 four eyes, 409, 503).

        The decision is written to the audit trail before the store takes it: under a
        STRICT (or ASYNC) trail a decision that cannot be recorded is refused with 503
        AUDIT_UNAVAILABLE and the request stays pending.
        """
        pending = await self.visible(request_id, identity, trace_id)
        by = identity.principal
        # The store's own rules, checked first so that only a decision it can take is recorded.
        check = lambda: decided_record(  # noqa: E731
            pending, request_id, approve=approve, decided_by=by, reason=reason, now=time.time()
        )
        await self._decision(check, pending, trace_id, identity)
        request = pending.request
        recorded = await self._audit.decided(
            "approval",
            "APPROVED" if approve else "REJECTED",
            "APPROVAL_DECIDED",
            identity=identity,
            trace_id=pending.run_id,
            text=reason,
            tool=request.tool,
            operation=request.operation,
        )
        if not recorded and self._audit.fails_closed:
            raise Problem(
                503,
                "AUDIT_UNAVAILABLE",
                "the audit trail cannot record this decision, so it was not taken",
                rule="audit",
                trace_id=pending.run_id,
            )
        # The store decides again, atomically: a racing decision is refused there (and audited).
        take = lambda: self.store.decide(request_id, approve=approve, decided_by=by, reason=reason)  # noqa: E731
        return await self._decision(take, pending, trace_id, identity)

    async def _decision(
        self,
        take: Callable[[], PendingApproval],
        pending: PendingApproval,
        trace_id: str,
        identity: Identity,
    ) -> PendingApproval:
        """``take()`` off the loop; a refusal is an audited problem."""
        try:
            return await store_call(trace_id, take)
        except ApprovalDecisionError as exc:
            await self._audit.refused(
                f"approval:{exc.reason_code.lower()}",
                exc.reason_code,
                "service:approvals",
                trace_id=pending.run_id,
                identity=identity,
            )
            raise Problem(
                _DECISION_HTTP.get(exc.reason_code, 409),
                exc.reason_code,
                str(exc),
                rule="service:approvals",
                trace_id=pending.run_id,
            ) from None
        except ValueError as exc:
            raise Problem(
                422, "INVALID_REQUEST", str(exc)[:300], rule="service:approvals", trace_id=trace_id
            ) from None

    async def redeem(self, request_id: object, identity: Identity, trace_id: str) -> tuple[Approval, str]:
        """Spend an approved grant of the caller's: the signed `Approval` and the run id to continue.

        Raises:
            Problem: 404 unknown (or another tenant's), 403 not the requester, 409 pending, denied,
                expired or used.
        """
        if not isinstance(request_id, str):
            raise Problem(
                422,
                "INVALID_REQUEST",
                "approval_id must be a string",
                rule="service:approvals",
                trace_id=trace_id,
                field_path="approval_id",
            )
        pending = await self.visible(request_id, identity, trace_id)
        request = pending.request
        if request.principal != identity.principal:
            await self._audit.refused(
                "approval:redeem",
                "NOT_REQUESTER",
                "service:approvals",
                trace_id=pending.run_id,
                identity=identity,
            )
            raise Problem(
                403,
                "NOT_REQUESTER",
                "only the requester can redeem an approval",
                rule="service:approvals",
                trace_id=pending.run_id,
            )
        refusal = _REDEEM_REFUSALS.get(pending.state)
        if refusal is not None:
            await self._audit.refused(
                "approval:redeem", refusal[0], "service:approvals", trace_id=pending.run_id, identity=identity
            )
            raise Problem(409, refusal[0], refusal[1], rule="service:approvals", trace_id=pending.run_id)
        # The chain consumes the grant for the fingerprint of the call it is given: exactly once.
        return Approval.of_request(request.id, request.fingerprint), pending.run_id


def _plausible(request_id: str) -> bool:
    return 0 < len(request_id) <= 64 and request_id.isascii() and request_id.isalnum()
