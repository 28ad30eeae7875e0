"""``/v1/audit``: traces, filtered events and chain verification of the caller's tenant (auditor role)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from toolbox.audit._sink import AuditSink
from toolbox.service._access import AsAuditor, Caller
from toolbox.service._audit_reads import EventFilter, TenantAudit, decode_cursor, encode_cursor, tool_filter
from toolbox.service._problems import Problem
from toolbox.service._service import Service, service_of

__all__ = ["router", "tenant_audit"]

router = APIRouter(prefix="/v1/audit", tags=["audit"])


def _sink(service: Service, trace_id: str) -> AuditSink:
    trail = service.served.audit
    if trail is None:
        raise Problem(
            404,
            "AUDIT_NOT_CONFIGURED",
            "this service has no audit trail",
            rule="service:audit",
            trace_id=trace_id,
        )
    return trail.sink


def tenant_audit(service: Service, caller: Caller) -> TenantAudit:
    """The audit reads of the caller's tenant."""
    return TenantAudit(_sink(service, caller.trace_id), caller.identity.tenant)


async def _not_found(service: Service, caller: Caller, run_id: str) -> Problem:
    await service.audit.refused(
        "audit:trace",
        "UNKNOWN_TRACE",
        "service:audit:tenant",
        trace_id=caller.trace_id,
        identity=caller.identity,
    )
    return Problem(
        404, "UNKNOWN_TRACE", "no such trace in your tenant", rule="service:audit", trace_id=caller.trace_id
    )


@router.get("/traces/{run_id}")
async def read_trace(request: Request, run_id: str, caller: AsAuditor) -> dict[str, Any]:
    """Every event of the trace ``run_id`` in the caller's tenant, in order."""
    service = service_of(request)
    records = await run_in_threadpool(tenant_audit(service, caller).trace, run_id)
    if not records:
        raise await _not_found(service, caller, run_id)
    return {"trace_id": run_id, "events": [r.model_dump(mode="json") for r in records]}


@router.get("/traces/{run_id}/verify")
async def verify_trace(request: Request, run_id: str, caller: AsAuditor) -> dict[str, Any]:
    """Verify the hash chain of a trace of the caller's tenant."""
    service = service_of(request)
    report = await run_in_threadpool(tenant_audit(service, caller).verify, run_id)
    if report is None:
        raise await _not_found(service, caller, run_id)
    return report


@router.get("/events")
async def query_events(
    request: Request,
    caller: AsAuditor,
    *,
    principal: str | None = Query(None, max_length=256),
    tool: str | None = Query(None, max_length=200),
    status: str | None = Query(None, max_length=64),
    since: datetime | None = None,
    until: datetime | None = None,
    cursor: str | None = Query(None, max_length=512),
    limit: int = Query(100, ge=1, le=1000),
) -> dict[str, Any]:
    """Events of the caller's tenant, oldest first, filtered; page on with ``next_cursor``.

    ``tool`` is a tool name or ``tool.operation``, as the events' names show it.
    """
    service = service_of(request)
    after = decode_cursor(cursor) if cursor is not None else None
    if cursor is not None and after is None:
        raise Problem(
            422,
            "INVALID_REQUEST",
            "cursor is not a cursor this service issued",
            rule="request",
            trace_id=caller.trace_id,
            field_path="cursor",
        )
    named, operation = tool_filter(service.served.catalog, tool)
    wanted = EventFilter(principal, named, status, since, until, operation)
    reads = tenant_audit(service, caller)
    records, more = await run_in_threadpool(
        lambda: reads.events(wanted, limit=min(limit, service.settings.max_page), after=after)
    )
    return {
        "events": [r.model_dump(mode="json") for r in records],
        "next_cursor": encode_cursor(records[-1]) if more and records else None,
    }
