"""Sending a prepared request and reading its body within the size and time limits.

The body is streamed: reading stops, and the connection is closed, as soon as
``max_response_bytes`` or ``total_timeout`` is passed.
"""

from __future__ import annotations

import asyncio
import time
from typing import final

import httpx

from toolbox.errors import ResponseTooLargeError, ToolTimeoutError
from toolbox_http._clients import Clients
from toolbox_http._errors import httpx_errors
from toolbox_http._options import HttpOptions
from toolbox_http._request import Prepared
from toolbox_http._response import HttpResponse

__all__ = ["send", "send_async"]


@final
class _Body:
    """Collects the body, enforcing the byte limit and the deadline."""

    __slots__ = ("_buffer", "_deadline", "_label", "_options")

    def __init__(self, prepared: Prepared, options: HttpOptions) -> None:
        self._options = options
        self._deadline = time.monotonic() + options.total_timeout
        self._label = f"{prepared.request.method} {prepared.target}"
        self._buffer = bytearray()

    def check_deadline(self) -> None:
        if time.monotonic() > self._deadline:
            raise ToolTimeoutError(self.timeout_message())

    def timeout_message(self) -> str:
        return f"{self._label} exceeded total_timeout ({self._options.total_timeout} s)"

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
                f"{self._label}: Content-Length {length} exceeds max_response_bytes ({limit})"
            )

    def add(self, chunk: bytes) -> None:
        limit = self._options.max_response_bytes
        if len(self._buffer) + len(chunk) > limit:
            raise ResponseTooLargeError(f"{self._label}: response body exceeds max_response_bytes ({limit})")
        self._buffer += chunk
        self.check_deadline()

    def response(self, response: httpx.Response, target: str) -> HttpResponse:
        return HttpResponse(response.status_code, response.headers, bytes(self._buffer), target)


def send(clients: Clients, prepared: Prepared, options: HttpOptions) -> HttpResponse:
    """Send ``prepared`` on the shared sync client and read the bounded body."""
    body = _Body(prepared, options)
    with httpx_errors(prepared.request.method, prepared.target):
        response = clients.sync_client().send(prepared.request, stream=True)
        try:
            body.start(response)
            for chunk in response.iter_bytes():
                body.add(chunk)
        finally:
            # Closing an unfinished response drops its connection instead of draining it.
            response.close()
    return body.response(response, prepared.target)


async def _send_async(clients: Clients, prepared: Prepared, body: _Body) -> HttpResponse:
    with httpx_errors(prepared.request.method, prepared.target):
        async with clients.async_client() as client:
            response = await client.send(prepared.request, stream=True)
            try:
                body.start(response)
                async for chunk in response.aiter_bytes():
                    body.add(chunk)
            finally:
                await response.aclose()
    return body.response(response, prepared.target)


async def send_async(clients: Clients, prepared: Prepared, options: HttpOptions) -> HttpResponse:
    """Send ``prepared`` on a per-call async client; the whole exchange is cancelled at the deadline."""
    body = _Body(prepared, options)
    try:
        return await asyncio.wait_for(_send_async(clients, prepared, body), options.total_timeout)
    except ToolTimeoutError:
        raise
    except asyncio.TimeoutError:
        raise ToolTimeoutError(body.timeout_message()) from None
