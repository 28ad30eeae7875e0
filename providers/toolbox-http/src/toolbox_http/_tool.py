"""`HttpTool`: HTTP(S) requests for agents, used with a declared intent."""

from __future__ import annotations

import hashlib
from typing import Any, final

from toolbox.intent import ReadIntent, WriteIntent
from toolbox.runtime import ToolRuntime
from toolbox_http._clients import Clients
from toolbox_http._exchange import send, send_async
from toolbox_http._options import HttpOptions
from toolbox_http._request import Headers, Params, Prepared, prepare
from toolbox_http._response import HttpResponse

__all__ = ["HttpTool"]

Body = bytes | str


@final
class HttpTool:
    """HTTP and HTTPS requests. ``EXTERNAL_RESOURCE``: a policy must allow it explicitly.

    Each method checks its arguments and returns an intent::

        tools.get(HttpTool).get(url).purpose("Fetch rates").execute()
        tools.get(HttpTool).post(url, json=payload).audit_as("Sync inventory").execute()

    Every method raises `ValueError` at call time, before anything is sent, when
    the URL is not an absolute ``http``/``https`` URL with a host or contains
    whitespace or control characters; when params or headers are malformed;
    when both ``json`` and ``content`` are given; or when the body exceeds
    ``max_request_bytes``. ``params`` are added to the URL's query.

    Executing returns an `HttpResponse` for any status. It raises
    `toolbox.ToolTimeoutError`, `toolbox.ToolConnectionError`,
    `toolbox.ResponseTooLargeError` or `toolbox.ToolExecutionError`.
    """

    __slots__ = ("_clients", "_options", "_runtime")

    def __init__(self, runtime: ToolRuntime) -> None:
        """Build the tool from its runtime.

        Raises:
            ValueError: ``runtime.options`` are not valid `HttpOptions`.
        """
        self._runtime = runtime
        self._options = HttpOptions.from_runtime(runtime.options)
        self._clients = Clients(self._options)

    @property
    def options(self) -> HttpOptions:
        """The validated options."""
        return self._options

    def get(
        self, url: str, *, params: Params | None = None, headers: Headers | None = None
    ) -> ReadIntent[HttpResponse]:
        """Intent to GET ``url``; declare ``purpose(...)`` or ``audit_as(...)``, then execute."""
        return self._read("get", self._prepare("get", url, params=params, headers=headers))

    def head(
        self, url: str, *, params: Params | None = None, headers: Headers | None = None
    ) -> ReadIntent[HttpResponse]:
        """Intent to HEAD ``url``: the response has status and headers, no body."""
        return self._read("head", self._prepare("head", url, params=params, headers=headers))

    def put(
        self,
        url: str,
        *,
        json: Any = None,
        content: Body | None = None,
        params: Params | None = None,
        headers: Headers | None = None,
    ) -> WriteIntent[HttpResponse]:
        """Intent to PUT ``json`` or ``content`` to ``url``; declare ``audit_as(...)``, then execute."""
        prepared = self._prepare("put", url, params=params, headers=headers, json=json, content=content)
        return self._write("put", prepared)

    def delete(
        self,
        url: str,
        *,
        json: Any = None,
        content: Body | None = None,
        params: Params | None = None,
        headers: Headers | None = None,
    ) -> WriteIntent[HttpResponse]:
        """Intent to DELETE ``url``; declare ``audit_as(...)``, then execute."""
        prepared = self._prepare("delete", url, params=params, headers=headers, json=json, content=content)
        return self._write("delete", prepared)

    def post(
        self,
        url: str,
        *,
        json: Any = None,
        content: Body | None = None,
        params: Params | None = None,
        headers: Headers | None = None,
    ) -> WriteIntent[HttpResponse]:
        """Intent to POST ``json`` or ``content`` to ``url``; declare ``audit_as(...)``, then execute."""
        prepared = self._prepare("post", url, params=params, headers=headers, json=json, content=content)
        return self._write("post", prepared)

    def patch(
        self,
        url: str,
        *,
        json: Any = None,
        content: Body | None = None,
        params: Params | None = None,
        headers: Headers | None = None,
    ) -> WriteIntent[HttpResponse]:
        """Intent to PATCH ``url`` with ``json`` or ``content``; declare ``audit_as(...)``, then execute."""
        prepared = self._prepare("patch", url, params=params, headers=headers, json=json, content=content)
        return self._write("patch", prepared)

    def close(self) -> None:
        """Close the shared connection pool. `toolbox.Tools.close` calls this."""
        self._clients.close()

    def _prepare(
        self,
        operation: str,
        url: str,
        *,
        params: Params | None,
        headers: Headers | None,
        json: Any = None,
        content: Body | None = None,
    ) -> Prepared:
        return prepare(
            operation.upper(),
            url,
            params=params,
            headers=headers,
            json=json,
            content=content,
            max_request_bytes=self._options.max_request_bytes,
        )

    def _read(self, operation: str, prepared: Prepared) -> ReadIntent[HttpResponse]:
        return self._runtime.read_intent(
            operation,
            lambda: send(self._clients, prepared, self._options),
            target=prepared.target,
            acall=lambda: send_async(self._clients, prepared, self._options),
            arguments=_governed_arguments(prepared),
        )

    def _write(self, operation: str, prepared: Prepared) -> WriteIntent[HttpResponse]:
        return self._runtime.write_intent(
            operation,
            lambda: send(self._clients, prepared, self._options),
            target=prepared.target,
            acall=lambda: send_async(self._clients, prepared, self._options),
            arguments=_governed_arguments(prepared),
        )

    def __repr__(self) -> str:
        return f"HttpTool(context={self._runtime.context.run_id})"


def _governed_arguments(prepared: Prepared) -> dict[str, Any]:
    """What authorization, guardrails and approvals see: never headers, never the raw URL.

    The body is represented by its digest, so an approval binds the exact payload.
    """
    request = prepared.request
    body = request.content
    return {
        "method": request.method,
        "url": prepared.target,
        "host": request.url.host,
        "body_sha256": hashlib.sha256(body).hexdigest() if body else None,
    }
