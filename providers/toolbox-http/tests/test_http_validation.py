"""Arguments are checked when the operation is called, before any intent or request."""

from __future__ import annotations

import httpx
import pytest

from toolbox_http import HttpTool

URL = "https://api.example.com/v1"
OPERATIONS = ["get", "head", "put", "delete", "post", "patch"]


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("ftp://example.com/file", "'ftp' is not allowed.*only http and https are allowed"),
        ("file:///etc/passwd", "'file' is not allowed.*only http and https are allowed"),
        ("javascript:alert(1)", "'javascript' is not allowed"),
        ("example.com/path", "'' is not allowed"),
        ("http:///path", "no host"),
        ("https://", "no host"),
        ("http://exa mple.com/", "whitespace or control characters"),
        ("http://example.com/\r\nX-Injected: 1", "whitespace or control characters"),
        ("http://[::1/", "not a valid URL"),
        (42, "must be a str, got int"),
        (None, "must be a str, got NoneType"),
        (b"http://example.com/", "must be a str, got bytes"),
    ],
)
def test_bad_urls_fail_before_any_request(respx_mock, http_tools, operation, url, match):
    """Non-http(s), host-less, malformed or non-str URLs raise ValueError at call time."""
    tools = http_tools()
    with pytest.raises(ValueError, match=match):
        getattr(tools.get(HttpTool), operation)(url)
    assert respx_mock.calls.call_count == 0
    assert tools.context.trace.operations() == []


def test_bad_url_message_is_redacted(respx_mock, http_tools):
    """A rejected URL is named without its userinfo or token values."""
    tool = http_tools().get(HttpTool)
    with pytest.raises(ValueError, match=r"ftp://example\.com/") as info:
        tool.get("ftp://alice:hunter2@example.com/?token=abc123")
    assert "hunter2" not in str(info.value)
    assert "alice" not in str(info.value)
    assert "abc123" not in str(info.value)
    assert respx_mock.calls.call_count == 0


@pytest.mark.parametrize("operation", ["put", "delete", "post", "patch"])
def test_json_and_content_are_exclusive(respx_mock, http_tools, operation):
    """Passing both json and content raises ValueError."""
    tool = http_tools().get(HttpTool)
    with pytest.raises(ValueError, match="either json or content"):
        getattr(tool, operation)(URL, json={"a": 1}, content=b"a")
    assert respx_mock.calls.call_count == 0


def test_request_body_limit(respx_mock, http_tools):
    """A body over max_request_bytes raises ValueError; one at the limit is sent."""
    route = respx_mock.post(URL).mock(return_value=httpx.Response(200))
    tool = http_tools(max_request_bytes=10).get(HttpTool)
    with pytest.raises(ValueError, match="11 bytes, more than max_request_bytes"):
        tool.post(URL, content=b"x" * 11)
    with pytest.raises(ValueError, match="max_request_bytes"):
        tool.post(URL, json="x" * 20)
    tool.post(URL, content=b"x" * 10).audit_as("Upload").execute()
    assert route.call_count == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"json": {"when": object()}}, "cannot be encoded as JSON"),
        ({"json": float("nan")}, "cannot be encoded as JSON"),
        ({"content": 5}, "content must be bytes or str"),
        ({"headers": {"X-Secret": "line\r\nbreak"}}, "header 'X-Secret'"),
        ({"headers": {"Bad Name": "v"}}, "header names"),
        ({"headers": {"X-Number": 1}}, "str value"),
        ({"headers": {"X-Name": "café-s3cret"}}, "ASCII str value"),
        ({"headers": ["X-A"]}, "headers must be a mapping"),
        ({"params": {"q": object()}}, "params must map"),
        ({"params": "q=1"}, "params must be a mapping"),
    ],
)
def test_malformed_arguments(respx_mock, http_tools, kwargs, match):
    """Malformed body, headers or params raise ValueError that never echoes a value."""
    tool = http_tools().get(HttpTool)
    with pytest.raises(ValueError, match=match) as info:
        tool.post(URL, **kwargs)
    assert "line\r\nbreak" not in str(info.value)
    assert "s3cret" not in str(info.value)
    assert respx_mock.calls.call_count == 0
