"""``POST /v1/turns``: one orchestrated turn (caller role); 404 unless a model is configured."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from toolbox.service._access import AsCaller, route_of
from toolbox.service._approvals import approval_document
from toolbox.service._body import read_json_object
from toolbox.service._problems import Problem
from toolbox.service._service import service_of

__all__ = ["router"]

LOGGER = logging.getLogger("toolbox.service")
router = APIRouter(prefix="/v1/turns", tags=["turns"])
_MAX_MESSAGE = 8000


@router.post("")
async def turn(request: Request, caller: AsCaller) -> Response:
    """``{"message": "..."}``: the model plans governed tool calls; the answer and the trace id.

    A turn whose model asks for a call that needs approval answers 202 with the
    approvals; once approved, the caller redeems them with ``/v1/tools/{name}/invoke``.
    """
    service = service_of(request)
    runner = request.app.state.turns
    if runner is None:
        raise Problem(
            404,
            "TURNS_NOT_CONFIGURED",
            "this service has no model for turns",
            rule="service:turns",
            trace_id=caller.trace_id,
        )
    body = await read_json_object(request, service.settings.max_body_bytes, trace_id=caller.trace_id)
    message = body.get("message")
    if not isinstance(message, str) or not message.strip() or len(message) > _MAX_MESSAGE:
        raise Problem(
            422,
            "INVALID_REQUEST",
            f"message must be text of 1 to {_MAX_MESSAGE} characters",
            rule="request",
            trace_id=caller.trace_id,
            field_path="message",
        )
    # Scoped to the credential's toolset: the model is shown only its tools, the chain refuses others.
    context = await service.toolsets.context(
        caller.identity, route_of(request), caller.trace_id, run_id=caller.trace_id
    )
    try:
        outcome = await runner.run(message, context)
    except Exception as exc:  # noqa: BLE001 - a model failure is a 502; its text may hold anything
        LOGGER.warning("turn failed (%s)", type(exc).__name__)
        raise Problem(
            502,
            "MODEL_ERROR",
            "the model failed to complete the turn",
            rule="service:turns",
            trace_id=caller.trace_id,
        ) from None
    finally:
        service.served.gateway.release(context)  # the turn's context makes no more calls
    document: dict[str, Any] = {"trace_id": context.run_id, "tool_calls": outcome.tool_calls}
    if outcome.approval_ids:
        store = service.approvals.store
        pending = [await run_in_threadpool(store.get, i) for i in outcome.approval_ids]
        document["status"] = "APPROVAL_REQUIRED"
        document["approvals"] = [approval_document(p) for p in pending if p is not None]
        return JSONResponse(document, status_code=202)
    document["status"] = "SUCCESS"
    document["answer"] = outcome.answer
    return JSONResponse(document)
