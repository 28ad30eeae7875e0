"""``/v1/approvals``: pending approvals of the caller's tenant and their decisions (approver role)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from toolbox.pipeline._grants import APPROVAL_STATES
from toolbox.service._access import AnyCaller, AsApprover
from toolbox.service._approvals import approval_document, store_call
from toolbox.service._body import read_json_object
from toolbox.service._problems import Problem
from toolbox.service._service import service_of

__all__ = ["router", "text_field"]

router = APIRouter(prefix="/v1/approvals", tags=["approvals"])
_MAX_REASON = 1000


@router.get("")
async def list_approvals(
    request: Request,
    caller: AsApprover,
    *,
    state: str | None = Query("pending", max_length=16),
    limit: int = Query(50, ge=1, le=500),
    cursor: str | None = Query(None, max_length=64),
) -> dict[str, Any]:
    """Approvals of the caller's tenant, newest first (``state=`` one of the states, or ``any``)."""
    wanted = None if state == "any" else state
    if wanted is not None and wanted not in APPROVAL_STATES:
        raise Problem(
            422,
            "INVALID_REQUEST",
            f"state must be any or one of {', '.join(APPROVAL_STATES)}",
            rule="request",
            trace_id=caller.trace_id,
            field_path="state",
        )
    store = service_of(request).approvals.store
    tenant = caller.identity.tenant
    items = await store_call(
        caller.trace_id, lambda: store.list(tenant=tenant, state=wanted, limit=limit, cursor=cursor)
    )
    return {
        "approvals": [approval_document(p) for p in items],
        "next_cursor": items[-1].id if len(items) == limit else None,
    }


@router.get("/{approval_id}")
async def read_approval(request: Request, approval_id: str, caller: AnyCaller) -> dict[str, Any]:
    """One approval: for approvers of its tenant, and for the requester (to poll it)."""
    service = service_of(request)
    pending = await service.approvals.visible(approval_id, caller.identity, caller.trace_id)
    if "approver" not in caller.identity.roles and pending.request.principal != caller.identity.principal:
        await service.audit.refused(
            "approval:read",
            "ROLE_REQUIRED",
            "service:role:approver",
            trace_id=caller.trace_id,
            identity=caller.identity,
        )
        raise Problem(
            403,
            "ROLE_REQUIRED",
            "this needs the approver role",
            rule="service:role:approver",
            trace_id=caller.trace_id,
        )
    return approval_document(pending)


def text_field(body: dict[str, Any], field: str, trace_id: str, *, required: bool) -> str:
    """A short, printable text field of ``body`` (a reason), or a 422 problem."""
    value = body.get(field, "")
    if not isinstance(value, str) or len(value) > _MAX_REASON or not value.isprintable():
        raise Problem(
            422,
            "INVALID_REQUEST",
            f"{field} must be printable text of at most {_MAX_REASON} characters",
            rule="request",
            trace_id=trace_id,
            field_path=field,
        )
    if required and not value.strip():
        raise Problem(
            422,
            "INVALID_REQUEST",
            f"{field} is required",
            rule="request",
            trace_id=trace_id,
            field_path=field,
        )
    return value.strip()


@router.post("/{approval_id}/decision")
async def decide(request: Request, approval_id: str, caller: AsApprover) -> dict[str, Any]:
    """``{"decision": "approve" | "deny", "reason": "..."}``: never by the requester (four eyes)."""
    service = service_of(request)
    body = await read_json_object(request, service.settings.max_body_bytes, trace_id=caller.trace_id)
    decision = body.get("decision")
    if decision not in ("approve", "deny"):
        raise Problem(
            422,
            "INVALID_REQUEST",
            'decision must be "approve" or "deny"',
            rule="request",
            trace_id=caller.trace_id,
            field_path="decision",
        )
    reason = text_field(body, "reason", caller.trace_id, required=True)
    decided = await service.approvals.decide(
        approval_id,
        approve=decision == "approve",
        reason=reason,
        identity=caller.identity,
        trace_id=caller.trace_id,
    )
    return approval_document(decided)
