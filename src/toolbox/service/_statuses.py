"""The stable mapping of a call's `Status` (and some reason codes) to an HTTP status.

Documented in docs/service.md; a test keeps the two in step. SUCCESS and
APPROVAL_REQUIRED are answers (JSON); every other status is a problem
document carrying the call's status, reason code, rule and trace id.
"""

from __future__ import annotations

from typing import Any

from toolbox.pipeline._result import Status, ToolResult
from toolbox.pipeline._shown import json_content
from toolbox.service._problems import Problem

__all__ = ["REASON_HTTP", "RETRY_AFTER_SECONDS", "STATUS_HTTP", "http_status", "result_problem"]

#: The HTTP status of each call status.
STATUS_HTTP: dict[Status, int] = {
    Status.SUCCESS: 200,
    Status.APPROVAL_REQUIRED: 202,
    Status.DENIED: 403,
    Status.INVALID_ARGUMENTS: 422,
    Status.BUSINESS_FAILED: 409,
    Status.ERROR: 502,
    Status.UNCERTAIN_EFFECT: 502,
}

#: Reason codes whose HTTP status differs from their call status's.
REASON_HTTP: dict[str, int] = {
    "TOOL_UNAVAILABLE": 404,
    "AUDIT_UNAVAILABLE": 503,
    "STATE_UNAVAILABLE": 503,
    "RATE_LIMITED": 429,
    "BUDGET_EXHAUSTED": 429,
}

#: Sent with 429: the service does not know the limiter's window, so it asks for a short pause.
RETRY_AFTER_SECONDS = 1


def http_status(result: ToolResult) -> int:
    """The HTTP status ``result`` is answered with."""
    if result.reason_code is not None:
        special = REASON_HTTP.get(result.reason_code)
        if special is not None:
            return special
    return STATUS_HTTP[result.status]


def result_problem(result: ToolResult) -> Problem:
    """The problem document of a refused or failed call."""
    status = http_status(result)
    extra: dict[str, Any] = {
        "tool_status": result.status.value,
        "name": result.name,
        "attempts": result.attempts,
        "uncertain_effect": result.status is Status.UNCERTAIN_EFFECT,
        "audit_failed": result.audit_failed,
    }
    if result.error_code is not None:
        extra["error_code"] = result.error_code
    if result.status is Status.BUSINESS_FAILED:
        extra["content"] = json_content(result.content)
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 429 else None
    return Problem(
        status,
        result.reason_code or result.status.value,
        result.message or result.status.value.lower().replace("_", " "),
        rule=result.rule,
        trace_id=result.trace_id,
        field_path=result.field_path,
        headers=headers,
        extra=extra,
    )
