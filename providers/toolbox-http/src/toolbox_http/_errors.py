"""The one place where httpx exceptions become toolbox errors.

httpx messages may carry the raw URL (with credentials) or header values
(h11 quotes an invalid header value), so they are never copied: a mapped
error names the method, the redacted URL, the httpx class and, for network
failures, the operating system's error code.
"""

from __future__ import annotations

import errno
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from toolbox.errors import ToolConnectionError, ToolExecutionError, ToolTimeoutError

__all__ = [
    "HTTPX_ERRORS",
    "HttpStatusError",
    "ResponseCheckError",
    "ResponseEncodingError",
    "ResponseSchemaError",
    "TooManyRedirectsError",
    "UnexpectedContentTypeError",
    "httpx_errors",
    "map_httpx_error",
]

#: Every exception httpx raises: `HTTPError` and the three families outside it.
HTTPX_ERRORS: tuple[type[Exception], ...] = (
    httpx.HTTPError,
    httpx.InvalidURL,
    httpx.CookieConflict,
    httpx.StreamError,
)

_MAX_CAUSES = 8


class HttpStatusError(ToolExecutionError):
    """``HttpResponse.raise_for_status()`` found a non-2xx status.

    Attributes:
        status_code: the HTTP status.
        url: the redacted URL.
    """

    def __init__(self, message: str, *, status_code: int, url: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.url = url


class TooManyRedirectsError(ToolExecutionError):
    """More redirect hops than ``max_redirects``."""


class ResponseEncodingError(ToolExecutionError):
    """The response's ``Content-Encoding`` is unsupported, stacked too deep, corrupt or truncated.

    The body is dropped; nothing undecoded is returned.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, request_sent=True)


class ResponseCheckError(ToolExecutionError):
    """A 2xx response failed a configured check; ``code`` says which.

    Attributes:
        code: ``RESPONSE_CONTENT_TYPE`` or ``RESPONSE_SCHEMA``.
        status_code: the HTTP status.
    """

    code = "RESPONSE_CHECK"

    def __init__(self, message: str, *, status_code: int) -> None:
        super().__init__(message, request_sent=True)
        self.status_code = status_code


class UnexpectedContentTypeError(ResponseCheckError):
    """The response's media type is not in ``expect_content_types`` (code ``RESPONSE_CONTENT_TYPE``)."""

    code = "RESPONSE_CONTENT_TYPE"


class ResponseSchemaError(ResponseCheckError):
    """The response body is not JSON matching ``json_model`` (code ``RESPONSE_SCHEMA``)."""

    code = "RESPONSE_SCHEMA"


def _cause_detail(exc: BaseException) -> str | None:
    """A safe description of the OS or TLS error under ``exc``, if there is one."""
    cause = exc.__cause__ or exc.__context__
    for _ in range(_MAX_CAUSES):
        if cause is None:
            return None
        # OpenSSL sets reason and verify_message; an SSLError built elsewhere may lack them.
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"TLS certificate verification failed: {getattr(cause, 'verify_message', None)}"
        if isinstance(cause, ssl.SSLError):
            reason = getattr(cause, "reason", None)
            return f"TLS error {reason}" if reason else "TLS error"
        if isinstance(cause, socket.gaierror):
            return "host name could not be resolved"
        if isinstance(cause, OSError) and cause.errno is not None and cause.errno in errno.errorcode:
            return errno.errorcode[cause.errno]
        cause = cause.__cause__ or cause.__context__
    return None


_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.LocalProtocolError)


def map_httpx_error(exc: Exception, *, method: str, target: str) -> ToolExecutionError:
    """The toolbox error for httpx exception ``exc`` raised by ``method target``.

    Timeouts become `ToolTimeoutError`, other transport failures
    `ToolConnectionError`, anything else `ToolExecutionError`.
    """
    detail = _cause_detail(exc)
    message = f"{method} {target} failed: {type(exc).__name__}" + (f" ({detail})" if detail else "")
    # These fail before a byte of the request is sent: not even an UNSAFE call took effect.
    sent = False if isinstance(exc, _NOT_SENT) else None
    if isinstance(exc, httpx.TimeoutException):
        return ToolTimeoutError(message, request_sent=sent)
    if isinstance(exc, httpx.TransportError):
        return ToolConnectionError(message, request_sent=sent)
    return ToolExecutionError(message)


@contextmanager
def httpx_errors(method: str, target: str) -> Iterator[None]:
    """Re-raise any httpx exception in the block as its toolbox error, without its message."""
    try:
        yield
    except HTTPX_ERRORS as exc:
        raise map_httpx_error(exc, method=method, target=target) from None
