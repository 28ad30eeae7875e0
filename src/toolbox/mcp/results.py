"""A `ToolResult` as an MCP `CallToolResult`.

SUCCESS is the content as text, plus structured content where the output
shape gives it. Every other status is ``isError=True`` with a text a model
can act on and structured content holding the status, reason code, error
code and field path. Both come from the `ToolResult`, which never holds a
stack trace or a secret; nothing else is added. ``_meta`` names the trace
(the session's run id), which ``toolbox audit show`` reads.
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types

from toolbox.mcp.output import NO_SCHEMA, OutputShape, jsonable
from toolbox.pipeline.result import Status, ToolResult

__all__ = ["TRACE_META_KEY", "call_result"]

TRACE_META_KEY = "io.toolbox/trace_id"
"""The ``_meta`` key of every result: the run id the call is recorded under."""

_NEXT_STEP = {
    Status.DENIED: "Nothing ran. Do not retry this call unchanged; tell the user it is not permitted.",
    Status.INVALID_ARGUMENTS: "Nothing ran. Fix the argument named in field_path and call again.",
    Status.BUSINESS_FAILED: "The tool ran and reported a business failure; see error_code.",
    Status.ERROR: "The tool failed or could not be reached.",
    Status.UNCERTAIN_EFFECT: (
        "The change may or may not have taken effect. Do not repeat it blindly; check its state first."
    ),
}


def call_result(result: ToolResult, shape: OutputShape = NO_SCHEMA) -> types.CallToolResult:
    """The MCP result of ``result``."""
    meta = {TRACE_META_KEY: result.trace_id} if result.trace_id else None
    if result.status is Status.SUCCESS:
        content = result.content
        text = content if isinstance(content, str) else _json(jsonable(content))
        blocks: list[types.ContentBlock] = [types.TextContent(text=text)]
        if result.warnings:
            blocks.append(types.TextContent(text="Warnings: " + "; ".join(result.warnings)))
        return types.CallToolResult(content=blocks, structured_content=shape.structured(content), _meta=meta)
    structured = _refusal(result)
    return types.CallToolResult(
        content=[types.TextContent(text=_explain(result))],
        structured_content=structured,
        is_error=True,
        _meta=meta,
    )


def _refusal(result: ToolResult) -> dict[str, Any]:
    data: dict[str, Any] = {
        "status": result.status.value,
        "reason_code": result.reason_code,
        "error_code": result.error_code,
        "field_path": result.field_path,
        "message": result.message,
        "attempts": result.attempts,
        "trace_id": result.trace_id,
    }
    if result.approval is not None:
        request = result.approval
        data["approval"] = {
            "request_id": request.id,
            "tool": request.tool,
            "operation": request.operation,
            "rules": list(request.rules),
        }
    if result.status is Status.BUSINESS_FAILED:
        data["content"] = jsonable(result.content)
    return data


def _explain(result: ToolResult) -> str:
    """One paragraph for the model: what happened, why, and what to do next."""
    codes = ", ".join(
        f"{key} {value}"
        for key, value in (
            ("reason", result.reason_code),
            ("error", result.error_code),
            ("field", result.field_path),
        )
        if value
    )
    head = f"{result.status.value} ({codes})" if codes else result.status.value
    message = result.message.strip()
    if message and message[-1] not in ".!?":
        message += "."
    parts = [f"{head}: {message}" if message else f"{head}."]
    if result.status is Status.APPROVAL_REQUIRED and result.approval is not None:
        request = result.approval
        parts.append(
            f"Nothing ran. This call needs a human approval bound to these exact arguments: approval "
            f"request {request.id} (rules: {', '.join(request.rules) or 'descriptor'}). Ask the user to "
            "have an operator approve it in the application's approval flow; the approved call is then "
            "resubmitted with the grant. Calling again without a grant only asks again."
        )
    elif result.status in _NEXT_STEP:
        parts.append(_NEXT_STEP[result.status])
    return " ".join(parts)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
