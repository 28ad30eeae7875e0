"""Reading a JSON request body: content type, size before parsing, well-formed JSON objects."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import ClientDisconnect, Request

from toolbox.service._problems import Problem

__all__ = ["read_json_object"]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def read_json_object(request: Request, limit: int, *, trace_id: str | None = None) -> dict[str, Any]:
    """The body of ``request`` as a JSON object.

    Raises:
        Problem: 415 (not ``application/json``), 413 (over ``limit`` bytes, checked on the
            declared length and again while reading), 400 (malformed, not an object, too deep,
            NaN/Infinity, an integer beyond Python's digit limit).
    """
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise Problem(
            415,
            "UNSUPPORTED_MEDIA_TYPE",
            "send the body as application/json",
            rule="request",
            trace_id=trace_id,
        )
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise _too_large(limit, trace_id)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit, trace_id)
            chunks.append(chunk)
    except ClientDisconnect:
        # Nobody is left to read an answer; nothing was parsed or run.
        raise Problem(
            400, "CLIENT_DISCONNECTED", "the client went away mid-body", rule="request", trace_id=trace_id
        ) from None
    try:
        value = json.loads(b"".join(chunks), parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        reason = "the body is not valid JSON"
        if isinstance(exc, json.JSONDecodeError):
            reason += f" (line {exc.lineno}, column {exc.colno})"
        raise Problem(400, "MALFORMED_JSON", reason, rule="request", trace_id=trace_id) from None
    if not isinstance(value, dict):
        raise Problem(
            400, "MALFORMED_JSON", "the body must be a JSON object", rule="request", trace_id=trace_id
        )
    return value


def _too_large(limit: int, trace_id: str | None) -> Problem:
    return Problem(
        413, "BODY_TOO_LARGE", f"the body is over {limit} bytes", rule="request", trace_id=trace_id
    )
