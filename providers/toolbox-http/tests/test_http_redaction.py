"""Secrets stay out of trace records and error messages."""

from __future__ import annotations

import asyncio
import base64

import httpx
import pytest

from toolbox import ToolExecutionError
from toolbox.errors import ToolConnectionError, ToolTimeoutError
from toolbox_http import HttpTool

SECRET_URL = "https://alice:hunter2@api.example.com/v1/sync?token=tok-123&api_key=key-456&page=2"
REDACTED = "https://api.example.com/v1/sync?token=[REDACTED]&api_key=[REDACTED]&page=2"
HEADER_SECRET = "Bearer hdr-789"
BODY_SECRET = "body-000"
SECRETS = ["alice", "hunter2", "tok-123", "key-456", "hdr-789", BODY_SECRET]


def _trace_text(tools) -> str:
    return repr([record.as_dict() for record in tools.context.trace])


def _assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked into: {text}"


def _post(tools):
    return (
        tools.get(HttpTool)
        .post(SECRET_URL, json={"password": BODY_SECRET}, headers={"Authorization": HEADER_SECRET})
        .audit_as("Sync inventory")
    )


def test_trace_target_is_redacted(respx_mock, http_tools):
    """The trace target has no userinfo and masks token-like query values."""
    respx_mock.get(url__startswith="https://api.example.com/").mock(return_value=httpx.Response(200))
    tools = http_tools()
    ready = tools.get(HttpTool).get(SECRET_URL).purpose("Fetch")
    assert ready.record.target == REDACTED
    response = ready.execute()
    assert response.url == REDACTED
    _assert_clean(_trace_text(tools))


def test_params_are_redacted_in_the_target(respx_mock, http_tools):
    """Token-like names passed as params are masked in the target too."""
    respx_mock.get(url__startswith="https://api.example.com/").mock(return_value=httpx.Response(200))
    tools = http_tools()
    ready = tools.get(HttpTool).get("https://api.example.com/x", params={"access_key": "tok-123"})
    assert ready.target == "https://api.example.com/x?access_key=[REDACTED]"


def test_userinfo_is_sent_as_basic_auth(respx_mock, http_tools):
    """Credentials in the URL are sent as an Authorization header, not in the request URL."""
    route = respx_mock.get(url__startswith="https://api.example.com/").mock(return_value=httpx.Response(200))
    http_tools().get(HttpTool).get(SECRET_URL).purpose("Fetch").execute()
    sent = route.calls.last.request
    assert sent.headers["authorization"] == "Basic " + base64.b64encode(b"alice:hunter2").decode()
    assert not sent.url.userinfo
    assert sent.url.params["token"] == "tok-123"


def test_headers_and_body_never_reach_the_trace(respx_mock, http_tools):
    """After a successful call no record holds the Authorization value or the body."""
    route = respx_mock.post(url__startswith="https://api.example.com/").mock(return_value=httpx.Response(200))
    tools = http_tools()
    _post(tools).execute()
    assert route.calls.last.request.headers["authorization"] == HEADER_SECRET
    _assert_clean(_trace_text(tools))


@pytest.mark.parametrize(
    ("side_effect", "error"),
    [
        (httpx.ConnectTimeout, ToolTimeoutError),
        (httpx.ConnectError, ToolConnectionError),
        # h11 quotes an offending header value in this message; it must not survive.
        (httpx.LocalProtocolError(f"Illegal header value b'{HEADER_SECRET}'"), ToolConnectionError),
        (httpx.InvalidURL(f"Invalid URL {SECRET_URL}"), ToolExecutionError),
    ],
)
def test_errors_hold_no_secret(respx_mock, http_tools, side_effect, error):
    """Mapped errors and the failed record name the redacted URL only."""
    respx_mock.post(url__startswith="https://api.example.com/").mock(side_effect=side_effect)
    tools = http_tools()
    ready = _post(tools)
    with pytest.raises(error) as info:
        ready.execute()
    message = str(info.value)
    assert REDACTED in message
    _assert_clean(message)
    _assert_clean(_trace_text(tools))
    assert info.value.__suppress_context__
    assert info.value.__cause__ is None


@pytest.mark.parametrize(
    ("side_effect", "error"),
    [(httpx.ConnectTimeout, ToolTimeoutError), (httpx.ConnectError, ToolConnectionError)],
)
def test_error_mapping_and_record(respx_mock, http_tools, side_effect, error):
    """httpx errors map to toolbox errors; a GET is retried, then the record ends ERROR."""
    route = respx_mock.get(url__startswith="https://api.example.com/").mock(side_effect=side_effect)
    tools = http_tools()
    ready = tools.get(HttpTool).get(SECRET_URL).purpose("Fetch")
    with pytest.raises(error, match=side_effect.__name__):
        ready.execute()
    assert ready.record.status == "ERROR"
    assert ready.record.error_type == error.__name__
    # GET is READ_ONLY: the governed chain retries transient failures (3 attempts by default).
    assert tools.executions(HttpTool) == 3
    assert route.call_count == 3


@pytest.mark.parametrize(
    ("side_effect", "error"),
    [(httpx.ReadTimeout, ToolTimeoutError), (httpx.ReadError, ToolConnectionError)],
)
def test_error_mapping_async(respx_mock, http_tools, side_effect, error):
    """The async path maps errors at the same boundary."""
    respx_mock.get(url__startswith="https://api.example.com/").mock(side_effect=side_effect)
    tools = http_tools()
    ready = tools.get(HttpTool).get(SECRET_URL).purpose("Fetch")
    with pytest.raises(error) as info:
        asyncio.run(ready.aexecute())
    _assert_clean(str(info.value))
    assert (ready.record.status, ready.record.error_type) == ("ERROR", error.__name__)
