"""Sending a prepared request: credentials, rate limits, redirects, bounded body, response checks.

The body is streamed: reading stops, and the connection is closed, as soon as
``max_response_bytes`` or ``total_timeout`` is passed. Redirects are followed
here, hop by hop, never by httpx: each hop passes the egress policy and the
address guard again, and secrets never cross to another origin.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Mapping
from typing import final

import httpx
from pydantic import ValidationError

from toolbox.descriptor import describe_validation_error
from toolbox.errors import ResponseTooLargeError, ToolExecutionError, ToolTimeoutError
from toolbox.redact import redact_url
from toolbox_http._clients import Clients
from toolbox_http._credentials import SENSITIVE_HEADERS, inject_credentials
from toolbox_http._egress import EgressDeniedError
from toolbox_http._errors import (
    ResponseSchemaError,
    TooManyRedirectsError,
    UnexpectedContentTypeError,
    httpx_errors,
)
from toolbox_http._limits import HostLimiter
from toolbox_http._options import HttpOptions
from toolbox_http._request import Prepared
from toolbox_http._response import HttpResponse

__all__ = ["Exchange"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_BODY_HEADERS = ("content-type", "content-length", "transfer-encoding", "content-encoding")


@final
class _Body:
    """Collects the body, enforcing the byte limit and the deadline."""

    __slots__ = ("_buffer", "_deadline", "_options", "label")

    def __init__(self, prepared: Prepared, options: HttpOptions) -> None:
        self._options = options
        self._deadline = time.monotonic() + options.total_timeout
        self.label = f"{prepared.request.method} {prepared.target}"
        self._buffer = bytearray()

    def check_deadline(self) -> None:
        if time.monotonic() > self._deadline:
            raise ToolTimeoutError(self.timeout_message())

    def timeout_message(self) -> str:
        return f"{self.label} exceeded total_timeout ({self._options.total_timeout} s)"

    def start(self, response: httpx.Response) -> None:
        """Reject a declared length over the limit before reading any of it."""
        self.check_deadline()
        limit = self._options.max_response_bytes
        declared = response.headers.get("content-length")
        # A HEAD response declares the length of the body it does not send.
        if declared is None or response.request.method == "HEAD":
            return
        try:
            length = int(declared)
        except ValueError:
            return
        if length > limit:
            raise ResponseTooLargeError(
                f"{self.label}: Content-Length {length} exceeds max_response_bytes ({limit})"
            )

    def add(self, chunk: bytes) -> None:
        limit = self._options.max_response_bytes
        if len(self._buffer) + len(chunk) > limit:
            raise ResponseTooLargeError(f"{self.label}: response body exceeds max_response_bytes ({limit})")
        self._buffer += chunk
        self.check_deadline()

    def response(self, response: httpx.Response, target: str, redirects: int) -> HttpResponse:
        return HttpResponse(
            response.status_code, response.headers, bytes(self._buffer), target, redirects=redirects
        )


def _media_matches(media: str, expected: str) -> bool:
    if expected.endswith("/*"):
        return media.startswith(expected[:-1])
    return media == expected


def check_response(response: HttpResponse, options: HttpOptions) -> HttpResponse:
    """Apply ``expect_content_types`` and ``json_model`` to a 2xx response.

    Raises:
        UnexpectedContentTypeError: the media type is not expected.
        ResponseSchemaError: the body is not JSON, or does not validate against ``json_model``.
    """
    if not response.is_success:
        return response
    where = f"HTTP {response.status_code} from {response.url}"
    if options.expect_content_types is not None:
        media = (response.headers.get("content-type") or "").partition(";")[0].strip().lower()
        if not any(_media_matches(media, e) for e in options.expect_content_types):
            raise UnexpectedContentTypeError(
                f"{where}: content type {media[:100] or 'none'!r} is not one of "
                f"{', '.join(options.expect_content_types)}",
                status_code=response.status_code,
            )
    model = options.json_model
    if model is None:
        return response
    try:
        payload = response.json()
    except ValueError:
        raise ResponseSchemaError(f"{where}: body is not JSON", status_code=response.status_code) from None
    try:
        data = model.model_validate(payload)
    except ValidationError as exc:
        raise ResponseSchemaError(
            f"{where}: body does not match {model.__name__}: {describe_validation_error(exc)}",
            status_code=response.status_code,
        ) from None
    return dataclasses.replace(response, data=data)


@final
class Exchange:
    """Sends the requests of one `HttpTool`."""

    __slots__ = ("_clients", "_env", "_limiter", "_options", "_redaction_keys", "_secret_headers")

    def __init__(
        self,
        clients: Clients,
        options: HttpOptions,
        env: Mapping[str, str],
        *,
        redaction_keys: frozenset[str] = frozenset(),
    ) -> None:
        self._clients = clients
        self._redaction_keys = redaction_keys
        self._options = options
        self._env = env
        self._limiter = HostLimiter(options.rate_limit) if options.rate_limit is not None else None
        self._secret_headers = SENSITIVE_HEADERS | options.secret_headers

    def _outgoing(self, request: httpx.Request) -> httpx.Request:
        if not self._options.credentials:
            return request
        return inject_credentials(request, self._options.credentials, self._env)

    def _hold(self, host: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext() if self._limiter is None else self._limiter.hold(host)

    def _ahold(self, host: str) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext() if self._limiter is None else self._limiter.ahold(host)

    def _location(self, response: httpx.Response) -> str | None:
        if not self._options.follow_redirects or response.status_code not in _REDIRECTS:
            return None
        location: str | None = response.headers.get("location")
        return location

    def _next_hop(
        self, request: httpx.Request, status: int, location: str, hops: int, target: str
    ) -> tuple[httpx.Request, str]:
        """The request for the next hop, checked like the first one was."""
        limit = self._options.max_redirects
        if hops > limit:
            raise TooManyRedirectsError(
                f"{request.method} {target}: more than max_redirects ({limit}) redirects", request_sent=True
            )
        try:
            url = request.url.join(location)
        except httpx.InvalidURL:
            raise ToolExecutionError(f"{request.method} {target}: redirect Location is not a URL") from None
        # Credentials in a Location are dropped, never used.
        url = url.copy_with(userinfo=b"", fragment=None)
        next_target = redact_url(str(url), self._redaction_keys)
        method = request.method
        if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
            method = "GET"
        violation = self._options.egress.violation(method, url)
        if url.scheme not in ("http", "https") or violation is not None:
            reason = violation[1] if violation is not None else f"scheme {url.scheme!r} is not allowed"
            raise EgressDeniedError(
                f"redirect from {target} to {next_target} denied: {reason}", rule="http:egress:redirect"
            )
        headers = request.headers.copy()
        for name in ("host", *_BODY_HEADERS):
            headers.pop(name, None)
        content = request.content if method == request.method else None
        if content is not None and "content-type" in request.headers:
            headers["Content-Type"] = request.headers["content-type"]
        old = request.url
        if (url.scheme, url.host, url.port) != (old.scheme, old.host, old.port):
            for name in self._secret_headers:
                headers.pop(name, None)
        return httpx.Request(method, url, headers=headers, content=content), next_target

    def send(self, prepared: Prepared) -> HttpResponse:
        """Send ``prepared`` on the shared sync client and read the bounded body."""
        body = _Body(prepared, self._options)
        request, target, hops = prepared.request, prepared.target, 0
        client = self._clients.sync_client()
        while True:
            outgoing = self._outgoing(request)
            location = None
            with self._hold(request.url.host), httpx_errors(request.method, target):
                response = client.send(outgoing, stream=True)
                try:
                    location = self._location(response)
                    if location is None:
                        body.start(response)
                        for chunk in response.iter_bytes():
                            body.add(chunk)
                finally:
                    # Closing an unfinished response drops its connection instead of draining it.
                    response.close()
            if location is None:
                return check_response(body.response(response, target, hops), self._options)
            hops += 1
            request, target = self._next_hop(request, response.status_code, location, hops, target)
            body.label = f"{request.method} {target}"

    async def _send_async(self, prepared: Prepared, body: _Body) -> HttpResponse:
        request, target, hops = prepared.request, prepared.target, 0
        client = await self._clients.async_client()
        while True:
            outgoing = self._outgoing(request)
            location = None
            async with self._ahold(request.url.host):
                with httpx_errors(request.method, target):
                    response = await client.send(outgoing, stream=True)
                    try:
                        location = self._location(response)
                        if location is None:
                            body.start(response)
                            async for chunk in response.aiter_bytes():
                                body.add(chunk)
                    finally:
                        await response.aclose()
            if location is None:
                return check_response(body.response(response, target, hops), self._options)
            hops += 1
            request, target = self._next_hop(request, response.status_code, location, hops, target)
            body.label = f"{request.method} {target}"

    async def send_async(self, prepared: Prepared) -> HttpResponse:
        """Send ``prepared`` on the event loop's pooled client; the exchange is cancelled at the deadline."""
        body = _Body(prepared, self._options)
        try:
            return await asyncio.wait_for(self._send_async(prepared, body), self._options.total_timeout)
        except ToolTimeoutError:
            raise
        except asyncio.TimeoutError:
            raise ToolTimeoutError(body.timeout_message()) from None
