"""Every exception class httpx exports maps to a toolbox error at one boundary."""

from __future__ import annotations

import asyncio
import errno
import ssl

import httpx
import pytest

from toolbox import ToolboxError, ToolExecutionError
from toolbox.errors import ToolConnectionError, ToolTimeoutError
from toolbox_http import HttpTool
from toolbox_http._errors import HTTPX_ERRORS, map_httpx_error

SECRET = "hunter2"
RAW_URL = f"https://alice:{SECRET}@api.example.com/?token={SECRET}"
TARGET = "https://api.example.com/?token=[REDACTED]"


def _httpx_exception_classes() -> list[type[Exception]]:
    exported = (getattr(httpx, name) for name in httpx.__all__)
    return sorted(
        {obj for obj in exported if isinstance(obj, type) and issubclass(obj, BaseException)},
        key=lambda cls: cls.__name__,
    )


EXCEPTIONS = _httpx_exception_classes()


def _instance(cls: type[Exception]) -> Exception:
    """An instance of ``cls`` whose message carries the raw URL, as httpx's own often do."""
    request = httpx.Request("GET", RAW_URL)
    message = f"failed for {RAW_URL}"
    if issubclass(cls, httpx.HTTPStatusError):
        return cls(message, request=request, response=httpx.Response(500, request=request))
    if issubclass(cls, httpx.RequestError):
        return cls(message, request=request)
    try:
        return cls(message)
    except TypeError:
        return cls()


def _expected(cls: type[Exception]) -> type[ToolExecutionError]:
    if issubclass(cls, httpx.TimeoutException):
        return ToolTimeoutError
    if issubclass(cls, httpx.TransportError):
        return ToolConnectionError
    return ToolExecutionError


def test_the_walk_finds_httpx_exceptions():
    """The walk sees the whole hierarchy, so a new httpx class cannot slip by unnoticed."""
    names = {cls.__name__ for cls in EXCEPTIONS}
    assert len(EXCEPTIONS) >= 25
    assert {"ConnectTimeout", "ConnectError", "InvalidURL", "CookieConflict", "StreamClosed"} <= names


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda cls: cls.__name__)
def test_every_httpx_exception_is_mapped(cls):
    """The boundary catches each class and maps it to the right toolbox error, without its message."""
    exc = _instance(cls)
    assert isinstance(exc, HTTPX_ERRORS)
    mapped = map_httpx_error(exc, method="GET", target=TARGET)
    assert type(mapped) is _expected(cls)
    assert isinstance(mapped, ToolboxError)
    assert str(mapped) == f"GET {TARGET} failed: {cls.__name__}"


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda cls: cls.__name__)
def test_every_httpx_exception_is_mapped_end_to_end(http_tools, cls):
    """Raised by the transport, each class reaches the caller as its toolbox error (sync and async)."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise _instance(cls)

    transport = httpx.MockTransport(handler)
    tool = http_tools(transport=transport, async_transport=transport).get(HttpTool)
    with pytest.raises(_expected(cls)) as info:
        tool.get(RAW_URL).purpose("Fetch").execute()
    assert SECRET not in str(info.value)
    with pytest.raises(_expected(cls)) as info:
        asyncio.run(tool.get(RAW_URL).purpose("Fetch").aexecute())
    assert SECRET not in str(info.value)


def _chained(cause: BaseException) -> httpx.ConnectError:
    try:
        try:
            raise cause
        except BaseException as exc:
            raise httpx.ConnectError(f"wrapped {RAW_URL}") from exc
    except httpx.ConnectError as exc:
        return exc


@pytest.mark.parametrize(
    ("cause", "detail"),
    [
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "(ECONNREFUSED)"),
        (ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"), "(TLS error"),
        (OSError("no errno"), None),
    ],
)
def test_os_level_cause_is_named(cause, detail):
    """The OS or TLS error under a connection failure is named by its code, never by its text."""
    mapped = map_httpx_error(_chained(cause), method="GET", target=TARGET)
    message = str(mapped)
    if detail is None:
        assert message == f"GET {TARGET} failed: ConnectError"
    else:
        assert detail in message
    assert SECRET not in message
