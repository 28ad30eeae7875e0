"""``/v1/kill-switch``: stop every call, or one tool's, at run time (admin role); each change is audited."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from toolbox.pipeline._state_ports import StateUnavailableError
from toolbox.service._access import AsAdmin, Caller
from toolbox.service._body import read_json_object
from toolbox.service._problems import Problem
from toolbox.service._routes_approvals import text_field
from toolbox.service._service import Service, service_of

__all__ = ["change_switch", "router", "switch_document"]

router = APIRouter(prefix="/v1/kill-switch", tags=["kill switch"])


def _unavailable(trace_id: str) -> Problem:
    return Problem(
        503,
        "STATE_UNAVAILABLE",
        "the governance state store is unavailable",
        rule="state:kill_switch",
        trace_id=trace_id,
    )


def _document(service: Service) -> dict[str, Any]:
    control = service.served.kill_switch
    return {
        "global": control.global_state().as_dict(),
        "environment": control.from_environment(),
        "tools": {name: state.as_dict() for name, state in sorted(control.tool_states().items())},
    }


async def switch_document(service: Service, trace_id: str) -> dict[str, Any]:
    """The switches as JSON (read off the event loop: the store may be remote)."""
    try:
        return await run_in_threadpool(_document, service)
    except StateUnavailableError:
        raise _unavailable(trace_id) from None


@router.get("")
async def read_switch(request: Request, caller: AsAdmin) -> dict[str, Any]:
    """The global switch, the environment's and every stopped tool."""
    return await switch_document(service_of(request), caller.trace_id)


async def change_switch(
    service: Service, caller: Caller, tool: str | None, engaged: bool, reason: str
) -> None:
    """Flip one switch and write its audit event (shared by the API and the console)."""
    if tool is not None and tool not in service.served.catalog.names():
        raise Problem(
            404,
            "TOOL_UNAVAILABLE",
            "no tool is registered under that name",
            rule="registry",
            trace_id=caller.trace_id,
            field_path="tool",
        )
    control = service.served.kill_switch
    try:
        await run_in_threadpool(
            lambda: control.set(tool, engaged=engaged, reason=reason, changed_by=caller.identity.principal)
        )
    except StateUnavailableError:
        raise _unavailable(caller.trace_id) from None
    await service.audit.decided(
        "kill_switch",
        "ENGAGED" if engaged else "RELEASED",
        "KILL_SWITCH_CHANGED",
        identity=caller.identity,
        trace_id=caller.trace_id,
        text=reason,
        tool=tool or "",
    )


@router.put("")
async def set_switch(request: Request, caller: AsAdmin) -> dict[str, Any]:
    """``{"engaged": true|false, "tool": "name" | null, "reason": "..."}``."""
    service = service_of(request)
    body = await read_json_object(request, service.settings.max_body_bytes, trace_id=caller.trace_id)
    engaged, tool = body.get("engaged"), body.get("tool")
    if not isinstance(engaged, bool):
        raise Problem(
            422,
            "INVALID_REQUEST",
            "engaged must be true or false",
            rule="request",
            trace_id=caller.trace_id,
            field_path="engaged",
        )
    if tool is not None and (not isinstance(tool, str) or not tool):
        raise Problem(
            422,
            "INVALID_REQUEST",
            "tool must be a tool name or null",
            rule="request",
            trace_id=caller.trace_id,
            field_path="tool",
        )
    reason = text_field(body, "reason", caller.trace_id, required=True)
    await change_switch(service, caller, tool, engaged, reason)
    return await switch_document(service, caller.trace_id)
