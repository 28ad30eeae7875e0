"""``/v1/tools``: the operations a caller may use, and one governed call."""

from __future__ import annotations

import fnmatch
import logging
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import JSONResponse, Response

from toolbox.doors._definition_formats import FORMATS
from toolbox.doors._gateway import Gateway
from toolbox.foundations._context import ExecutionContext, OperationRecord
from toolbox.foundations._wire_names import dotted_name
from toolbox.pipeline._grants import Approval
from toolbox.pipeline._result import Status
from toolbox.pipeline._shown import json_content
from toolbox.service._access import AsCaller, as_caller, route_of
from toolbox.service._approvals import approval_document
from toolbox.service._body import read_json_object
from toolbox.service._direct_route import DirectRoute
from toolbox.service._problems import Problem
from toolbox.service._service import Service, service_of
from toolbox.service._statuses import result_problem

__all__ = ["router"]

router = APIRouter(prefix="/v1/tools", tags=["tools"])
LOGGER = logging.getLogger("toolbox.service")
_INTENT_FIELDS = ("purpose", "audit_as")


def _may_use(gateway: Gateway, context: ExecutionContext, wire_name: str) -> bool:
    """Whether the policy's roles and the credential's toolset (the context's scope) allow this call."""
    _, tool, operation, _ = gateway.catalog.resolve_name(wire_name)
    scope = context.scope
    if scope is not None and not scope.allows(tool, operation):
        return False
    roles: dict[str, list[str]] | None = gateway.catalog.policy.governance.get("roles")
    if roles is None:
        return True
    qualified = f"{tool}.{operation}"
    return any(
        fnmatch.fnmatchcase(tool, pattern) or fnmatch.fnmatchcase(qualified, pattern)
        for role in context.roles
        for pattern in roles.get(role, ())
    )


@router.get("")
async def list_tools(
    request: Request,
    caller: AsCaller,
    format: str = Query("neutral", description="neutral, openai, anthropic or mcp"),
) -> dict[str, Any]:
    """The operations this caller may use, as LLM function definitions in ``format``."""
    if format not in FORMATS:
        raise Problem(
            422,
            "INVALID_REQUEST",
            f"format must be one of {', '.join(FORMATS)}",
            rule="request",
            trace_id=caller.trace_id,
            field_path="format",
        )
    service = service_of(request)
    gateway = service.served.gateway
    context = await service.toolsets.context(
        caller.identity, route_of(request), caller.trace_id, run_id=caller.trace_id
    )
    neutral = gateway.definitions()
    usable = {d["name"] for d in neutral if _may_use(gateway, context, d["name"])}
    shaped = gateway.definitions(format) if format != "neutral" else neutral
    tools = [d for d, n in zip(shaped, neutral, strict=True) if n["name"] in usable]
    return {
        "format": format,
        "tools": tools,
        "names": [dotted_name(d["name"]) for d in neutral if d["name"] in usable],
    }


def _arguments(body: dict[str, Any], trace_id: str) -> dict[str, Any]:
    arguments = body.get("arguments", {})
    if not isinstance(arguments, dict):
        raise Problem(
            422,
            "INVALID_ARGUMENTS",
            "arguments must be a JSON object",
            rule="request",
            trace_id=trace_id,
            field_path="arguments",
        )
    merged = dict(arguments)
    for field in _INTENT_FIELDS:
        if field in body:
            if field in merged and merged[field] != body[field]:
                raise Problem(
                    422,
                    "INVALID_ARGUMENTS",
                    f"{field} is given twice, with different values",
                    rule="request",
                    trace_id=trace_id,
                    field_path=field,
                )
            merged[field] = body[field]
    return merged


async def invoke(name: str, request: Request) -> Response:
    """One governed call of ``name`` (``tool.operation`` or its wire name).

    The body is ``{"arguments": {...}, "purpose" | "audit_as": "...", "approval_id": "..."}``;
    anything else in it (a tenant, a principal) is ignored: the credential decides who calls.
    """
    caller = await as_caller(request)
    service = service_of(request)
    body = await read_json_object(request, service.settings.max_body_bytes, trace_id=caller.trace_id)
    arguments = _arguments(body, caller.trace_id)
    run_id, approval = caller.trace_id, None
    if "approval_id" in body:
        approval, run_id = await service.approvals.redeem(
            body["approval_id"], caller.identity, caller.trace_id
        )
    context = await service.toolsets.context(
        caller.identity, route_of(request), caller.trace_id, run_id=run_id, correlation_id=caller.trace_id
    )
    await service.toolsets.check(caller.identity, name, context)
    return await _call(service, name, arguments, context, approval)


# Called directly (`DirectRoute`): FastAPI has nothing to solve here; `as_caller` authenticates.
router.add_api_route(
    "/{name}/invoke", invoke, methods=["POST"], status_code=200, route_class_override=DirectRoute
)


async def _call(
    service: Service,
    name: str,
    arguments: dict[str, Any],
    context: ExecutionContext,
    approval: Approval | None,
) -> Response:
    """The call's answer. Anything failing once the call may have run is an uncertain effect.

    The tool may have acted by then, so the caller gets the trace id to check it by and
    is told not to repeat the call blindly, never a bare 500 that invites a retry.
    """
    try:
        return await _answer(service, name, arguments, context, approval)
    except Problem:
        raise
    except Exception as exc:  # noqa: BLE001 - reported as an uncertain effect, with the trace id
        LOGGER.error(
            "answering a call of %r failed (%s), trace %s", name[:200], type(exc).__name__, context.run_id
        )
        raise Problem(
            502,
            "UNCERTAIN_EFFECT",
            "the call may have run, but its answer could not be given; check its trace before repeating it",
            rule="service",
            trace_id=context.run_id,
            extra={
                "tool_status": Status.UNCERTAIN_EFFECT.value,
                "name": name[:200],
                "uncertain_effect": True,
            },
        ) from None
    finally:
        # The request's context makes no more calls: its tools go now, not 256 requests later.
        service.served.gateway.release(context)


async def _answer(
    service: Service,
    name: str,
    arguments: dict[str, Any],
    context: ExecutionContext,
    approval: Approval | None,
) -> Response:
    result = await service.runner.run(service.served.gateway, name, arguments, context, approval)
    if result.status is Status.SUCCESS:
        document = result.as_dict()
        document["content"] = json_content(result.content)
        return JSONResponse(document)
    if result.status is Status.APPROVAL_REQUIRED and result.approval is not None:
        records = [r for r in context.trace.records() if isinstance(r, OperationRecord)]
        last = records[-1] if records else None
        pending = await service.approvals.raised(
            result, last.intent_kind if last else "", last.intent_text if last else "", context.run_id
        )
        document = result.as_dict()
        document["approval"] = approval_document(pending)
        url = document["approval"]["url"]
        return JSONResponse(document, status_code=202, headers={"Location": url})
    raise result_problem(result)
