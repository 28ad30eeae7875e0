"""RFC 9457 problem details: every error the service returns.

A `Problem` is raised anywhere in a request and rendered once, by the handler
`install_problem_handlers` adds, as ``application/problem+json`` with
``type``, ``title``, ``status``, ``detail``, ``reason_code``, ``rule`` and
``trace_id`` (and ``field_path`` for bad arguments). Details never carry a
credential, a header value or a stack trace.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response

__all__ = ["PROBLEM_JSON", "PROBLEM_TYPE", "Problem", "install_problem_handlers", "problem_response"]

LOGGER = logging.getLogger("toolbox.service")
PROBLEM_JSON = "application/problem+json"
#: ``type`` is this prefix and the reason code in lower case, e.g. ``urn:toolbox:problem:policy_denied``.
PROBLEM_TYPE = "urn:toolbox:problem:"


@final
class Problem(Exception):
    """An error response: raise it from a route, the app renders it."""

    def __init__(
        self,
        status: int,
        reason_code: str,
        detail: str,
        *,
        rule: str | None = None,
        trace_id: str | None = None,
        field_path: str | None = None,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.reason_code = reason_code
        self.detail = detail
        self.rule = rule
        self.trace_id = trace_id
        self.field_path = field_path
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})

    def document(self) -> dict[str, Any]:
        """The JSON body."""
        body: dict[str, Any] = {
            "type": PROBLEM_TYPE + self.reason_code.lower(),
            "title": _title(self.status),
            "status": self.status,
            "detail": self.detail,
            "reason_code": self.reason_code,
            "rule": self.rule,
            "trace_id": self.trace_id,
        }
        if self.field_path is not None:
            body["field_path"] = self.field_path
        body.update(self.extra)
        return body


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def problem_response(problem: Problem) -> Response:
    """``problem`` as an ``application/problem+json`` response."""
    return JSONResponse(
        problem.document(), status_code=problem.status, headers=problem.headers, media_type=PROBLEM_JSON
    )


_HTTP_REASONS = {
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "BODY_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
}


def install_problem_handlers(app: FastAPI) -> None:
    """Render `Problem`, routing errors, validation errors and any crash as problem documents."""

    async def on_problem(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Problem)
        return problem_response(exc)

    async def on_http(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        reason = _HTTP_REASONS.get(exc.status_code, "HTTP_ERROR")
        # Starlette's own detail is its status phrase: never an echo of the request.
        headers = {"Allow": exc.headers["Allow"]} if exc.headers and "Allow" in exc.headers else None
        return problem_response(
            Problem(exc.status_code, reason, _title(exc.status_code), rule="http", headers=headers)
        )

    async def on_validation(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        first = errors[0] if errors else {}
        where = ".".join(str(part) for part in first.get("loc", ()))
        # Only the location and pydantic's message: never the rejected input itself.
        detail = f"{where}: {first.get('msg', 'invalid')}" if where else "the request is not valid"
        return problem_response(
            Problem(422, "INVALID_REQUEST", detail[:300], rule="request", field_path=where)
        )

    async def on_crash(_request: Request, exc: Exception) -> Response:
        # A fresh trace id, in the answer and the log line, so the two can be matched.
        trace_id = uuid.uuid4().hex
        LOGGER.error("request failed (%s), trace %s", type(exc).__name__, trace_id)
        return problem_response(
            Problem(
                500, "INTERNAL_ERROR", "the service failed; see its log", rule="service", trace_id=trace_id
            )
        )

    app.add_exception_handler(Problem, on_problem)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(Exception, on_crash)
