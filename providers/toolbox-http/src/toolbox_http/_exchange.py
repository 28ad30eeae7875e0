"""Sending a prepared request: credentials, rate limits, redirects, bounded body, response checks.

The body is streamed and decoded in bounded pieces (`toolbox_http._decoding`):
reading stops, and the connection is closed, as soon as ``max_response_bytes``
(on the wire or decoded) or the call's ``total_timeout`` (`toolbox_http._deadline`)
is passed. Redirects are followed
here, hop by hop, never by httpx: each hop passes the egress policy and the
address guard again, and secrets never cross to another origin.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping
from typing import final

import httpx
from pydantic import ValidationError

from toolbox.errors import ResponseTooLargeError, ToolExecutionError, ToolTimeoutError
from toolbox.provider import describe_validation_error, redact_url
from toolbox_http._clients import Clients
from toolbox_http._credentials import SENSITIVE_HEADERS, inject_credentials
from toolbox_http._deadline import Deadline
from toolbox_http._decoding import BodyDecoder
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
    """Collects one response body: decoded in bounded pieces, never past ``max_response_bytes``.

    The limit applies to the bytes on the wire and, separately, to the decoded bytes,
    so neither a compression bomb nor endless undecodable padding gets through.
    """

    __slots__ = ("_buffer", "_decoder", "_encoding", "_limit", "_wire", "label")

    def __init__(self, label: str, limit: int) -> None:
        self.label = label
        self._limit = limit
        self._buffer = bytearray()
        self._wire = 0
        self._encoding: str | None = None
        self._decoder: BodyDecoder | None = None

    def start(self, response: httpx.Response) -> None:
        """Reject a declared length over the limit before reading any of it."""
        self._encoding = response.headers.get("content-encoding")
        declared = response.headers.get("content-length")
        # A HEAD response declares the length of the body it does not send.
        if declared is None or response.request.method == "HEAD":
            return
        try:
            length = int(declared)
        except ValueError:
            return
        if length > self._limit:
            raise ResponseTooLargeError(
                f"{self.label}: Content-Length {length} exceeds max_response_bytes ({self._limit})"
            )

    def _too_large(self) -> ResponseTooLargeError:
        return ResponseTooLargeError(
            f"{self.label}: response body exceeds max_response_bytes ({self._limit})"
        )

    def add(self, raw: bytes) -> None:
        """Decode ``raw`` (bytes as received) and keep the result."""
        self._wire += len(raw)
        if self._wire > self._limit:
            raise self._too_large()
        if not raw:
            return
        if self._decoder is None:
            # Built on the first byte: an empty body (HEAD, 204, 304) never needs decoding.
            self._decoder = BodyDecoder(self._encoding)
        for piece in self._decoder.decode(raw):
            if len(self._buffer) + len(piece) > self._limit:
                raise self._too_large()
            self._buffer += piece

    def add_read(self, response: httpx.Response) -> None:
        """Keep the body of a response a caller's transport built already read (and decoded)."""
        if len(response.content) > self._limit:
            raise self._too_large()
        self._buffer += response.content

    def response(self, response: httpx.Response, target: str, redirects: int) -> HttpResponse:
        if self._decoder is not None:
            self._decoder.finish()
        return HttpResponse(
            response.status_code, response.headers, bytes(self._buffer), target, redirects=redirects
        )


def _host_of(request: httpx.Request) -> str:
    """The host in its ASCII (IDNA) form: ``bücher.example`` and ``xn--bcher-kva.example`` are one host."""
    return request.url.raw_host.decode("ascii")


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

    def _timeouts(self, deadline: Deadline) -> dict[str, float]:
        """httpx's per-request timeouts, none longer than the time the call has left."""
        left = max(deadline.remaining(), 0.0)
        connect, read = self._options.connect_timeout, self._options.read_timeout
        return {
            "connect": min(connect, left),
            "read": min(read, left),
            "write": min(read, left),
            "pool": min(connect, left),
        }

    def _begin(self, prepared: Prepared, deadline: Deadline | None) -> Deadline:
        """The call's deadline, refusing a retry that has no time left (nothing is sent)."""
        deadline = deadline if deadline is not None else Deadline(self._options.total_timeout)
        if deadline.expired():
            raise ToolTimeoutError(
                f"{prepared.request.method} {prepared.target} exceeded total_timeout ({deadline.seconds} s) "
                "in earlier attempts; this one was not sent",
                request_sent=False,
            )
        deadline.start()
        return deadline

    @staticmethod
    def _timed_out(label: str, deadline: Deadline, error: ToolTimeoutError) -> ToolTimeoutError:
        """A timeout at the deadline, named as such; another timeout (a silent read) unchanged."""
        if not deadline.expired():
            return error
        return _deadline_error(label, deadline, error.request_sent)

    def send(self, prepared: Prepared, deadline: Deadline | None = None) -> HttpResponse:
        """Send ``prepared`` on the shared sync client and read the bounded body.

        ``deadline`` is the call's, shared by the chain's retries of one intent.
        """
        deadline = self._begin(prepared, deadline)
        body = _Body(f"{prepared.request.method} {prepared.target}", self._options.max_response_bytes)
        try:
            with deadline.current():
                return self._send(prepared, body, deadline)
        except ToolTimeoutError as exc:
            raise self._timed_out(body.label, deadline, exc) from None

    def _send(self, prepared: Prepared, body: _Body, deadline: Deadline) -> HttpResponse:
        request, target, hops = prepared.request, prepared.target, 0
        client = self._clients.sync_client()
        while True:
            outgoing = self._outgoing(request)
            outgoing.extensions = {**outgoing.extensions, "timeout": self._timeouts(deadline)}
            location = None
            with self._hold(_host_of(request)), httpx_errors(request.method, target):
                response = client.send(outgoing, stream=True)
                try:
                    location = self._location(response)
                    if location is None:
                        body.start(response)
                        if response.is_stream_consumed:
                            body.add_read(response)
                        else:
                            for chunk in response.iter_raw():
                                body.add(chunk)
                                _check(deadline)
                finally:
                    # Closing an unfinished response drops its connection instead of draining it.
                    response.close()
            if location is None:
                return check_response(body.response(response, target, hops), self._options)
            _check(deadline)
            hops += 1
            request, target = self._next_hop(request, response.status_code, location, hops, target)
            body.label = f"{request.method} {target}"

    async def _send_async(self, prepared: Prepared, body: _Body, deadline: Deadline) -> HttpResponse:
        request, target, hops = prepared.request, prepared.target, 0
        with deadline.current():
            client = await self._clients.async_client()
            while True:
                outgoing = self._outgoing(request)
                outgoing.extensions = {**outgoing.extensions, "timeout": self._timeouts(deadline)}
                location = None
                async with self._ahold(_host_of(request)):
                    with httpx_errors(request.method, target):
                        response = await client.send(outgoing, stream=True)
                        try:
                            location = self._location(response)
                            if location is None:
                                body.start(response)
                                if response.is_stream_consumed:
                                    body.add_read(response)
                                else:
                                    async for chunk in response.aiter_raw():
                                        body.add(chunk)
                                        _check(deadline)
                        finally:
                            await response.aclose()
                if location is None:
                    return check_response(body.response(response, target, hops), self._options)
                _check(deadline)
                hops += 1
                request, target = self._next_hop(request, response.status_code, location, hops, target)
                body.label = f"{request.method} {target}"

    async def send_async(self, prepared: Prepared, deadline: Deadline | None = None) -> HttpResponse:
        """Send ``prepared`` on the event loop's pooled client; the exchange is cancelled at the deadline."""
        deadline = self._begin(prepared, deadline)
        body = _Body(f"{prepared.request.method} {prepared.target}", self._options.max_response_bytes)
        try:
            return await asyncio.wait_for(self._send_async(prepared, body, deadline), deadline.remaining())
        except ToolTimeoutError as exc:
            raise self._timed_out(body.label, deadline, exc) from None
        except asyncio.TimeoutError:
            raise _deadline_error(body.label, deadline, None) from None


def _deadline_error(label: str, deadline: Deadline, request_sent: bool | None) -> ToolTimeoutError:
    return ToolTimeoutError(
        f"{label} exceeded total_timeout ({deadline.seconds} s)", request_sent=request_sent
    )


def _check(deadline: Deadline) -> None:
    """Stop between reads once the deadline has passed (the streams stop within a read)."""
    if deadline.expired():
        raise ToolTimeoutError("total_timeout reached")
