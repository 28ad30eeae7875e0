"""A `ToolResult` as an MCP `CallToolResult`.

SUCCESS is the content as text, plus structured content where the output
shape gives it. Every other status is ``isError=True`` with a text a model
can act on; the outcome's codes (status, reason code, error code, field path,
...) are in ``_meta`` under ``io.toolbox/error``, never in ``structuredContent``:
MCP requires structured content to conform to the tool's output schema, which
describes successes (the TypeScript SDK refuses an error result whose
structured content does not conform). A success whose content breaks its own
declared schema is sent the same way, as an error result that says the tool
ran. Both come from the `ToolResult`, which never holds a stack trace or a
secret; nothing else is added. ``_meta`` also names the trace (the session's
run id), which ``toolbox audit show`` reads.
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types

from toolbox.mcp._output import NO_SCHEMA, OutputShape
from toolbox.pipeline._result import Status, ToolResult
from toolbox.pipeline._shown import json_content

__all__ = ["ERROR_META_KEY", "TRACE_META_KEY", "call_result"]

TRACE_META_KEY = "io.toolbox/trace_id"
"""The ``_meta`` key of every result: the run id the call is recorded under."""
ERROR_META_KEY = "io.toolbox/error"
"""The ``_meta`` key of an error result's outcome: status, reason, error code, field, ..."""
OUTPUT_SCHEMA_MISMATCH = "OUTPUT_SCHEMA_MISMATCH"

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
    meta: dict[str, Any] = {TRACE_META_KEY: result.trace_id} if result.trace_id else {}
    if result.status is Status.SUCCESS:
        content = result.content
        text = content if isinstance(content, str) else _json(json_content(content))
        structured, conforms = shape.structured(content)
        if not conforms:
            return _unconforming(result, text, meta)
        blocks: list[types.ContentBlock] = [types.TextContent(text=text)]
        if result.warnings:
            blocks.append(types.TextContent(text="Warnings: " + "; ".join(result.warnings)))
        return types.CallToolResult(content=blocks, structured_content=structured, _meta=meta or None)
    meta[ERROR_META_KEY] = _outcome(result)
    return types.CallToolResult(content=[types.TextContent(text=_explain(result))], is_error=True, _meta=meta)


def _unconforming(result: ToolResult, text: str, meta: dict[str, Any]) -> types.CallToolResult:
    """A success whose content breaks the declared output schema: the content, as an error result."""
    outcome = _outcome(result)
    outcome["error_code"] = OUTPUT_SCHEMA_MISMATCH
    outcome["message"] = "the tool's result does not match its declared output schema"
    meta[ERROR_META_KEY] = outcome
    said = (
        "SUCCESS (error OUTPUT_SCHEMA_MISMATCH): the tool ran, and its effect, if any, took place, "
        "but its result does not match the output schema it declares, so it is given as text only. "
        f"Result: {text}"
    )
    return types.CallToolResult(content=[types.TextContent(text=said)], is_error=True, _meta=meta)


def _outcome(result: ToolResult) -> dict[str, Any]:
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
        data["content"] = json_content(result.content)
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
