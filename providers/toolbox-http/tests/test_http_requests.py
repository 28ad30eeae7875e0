"""Unit tests (respx): what each operation sends, and the intent phase around it."""

from __future__ import annotations

import asyncio
import gzip
import json

import httpx
import pytest

from toolbox import ReadIntent, WriteIntent
from toolbox.errors import IntentAlreadyExecutedError, ResponseTooLargeError
from toolbox_http import HttpTool

URL = "https://api.example.com/v1/items"
READS = ["get", "head"]
WRITES = ["put", "delete", "post", "patch"]


@pytest.mark.parametrize("operation", READS + WRITES)
def test_each_method_sends_its_request(respx_mock, http_tools, operation):
    """Every operation sends its HTTP method to the URL, with the caller's headers."""
    route = respx_mock.request(operation.upper(), URL).mock(return_value=httpx.Response(204))
    tool = http_tools().get(HttpTool)
    intent = getattr(tool, operation)(URL, headers={"X-Request": "1"})
    assert isinstance(intent, ReadIntent if operation in READS else WriteIntent)
    response = intent.audit_as(f"Exercise {operation}").execute()
    assert response.status_code == 204
    sent = route.calls.last.request
    assert sent.method == operation.upper()
    assert str(sent.url) == URL
    assert sent.headers["x-request"] == "1"
    assert sent.headers["user-agent"] == "toolbox-http"
    assert route.call_count == 1


@pytest.mark.parametrize("operation", WRITES)
def test_writes_send_json(respx_mock, http_tools, operation):
    """json= is sent compactly encoded with Content-Type application/json."""
    route = respx_mock.request(operation.upper(), URL).mock(return_value=httpx.Response(200))
    tool = http_tools().get(HttpTool)
    getattr(tool, operation)(URL, json={"sku": 7, "name": "é"}).audit_as("Sync inventory").execute()
    sent = route.calls.last.request
    assert json.loads(sent.content) == {"sku": 7, "name": "é"}
    assert sent.headers["content-type"] == "application/json"


@pytest.mark.parametrize("content", [b"\x00raw", "text"])
def test_writes_send_content(respx_mock, http_tools, content):
    """content= is sent as given (str as UTF-8), with the caller's Content-Type kept."""
    route = respx_mock.post(URL).mock(return_value=httpx.Response(200))
    tool = http_tools().get(HttpTool)
    tool.post(URL, content=content, headers={"Content-Type": "application/x-test"}).audit_as(
        "Upload"
    ).execute()
    sent = route.calls.last.request
    assert sent.content == (content if isinstance(content, bytes) else content.encode())
    assert sent.headers["content-type"] == "application/x-test"


def test_caller_headers_replace_defaults(respx_mock, http_tools):
    """A caller's header replaces the default of the same name, whatever its case."""
    route = respx_mock.get(URL).mock(return_value=httpx.Response(200))
    tool = http_tools().get(HttpTool)
    tool.get(URL, headers={"user-agent": "agent/1", "accept-encoding": "gzip"}).purpose("Fetch").execute()
    sent = route.calls.last.request.headers
    assert sent.get_list("user-agent") == ["agent/1"]
    assert sent.get_list("accept-encoding") == ["gzip"]


def test_compressed_responses_are_not_requested_by_default(respx_mock, http_tools):
    """Accept-Encoding is identity unless the caller asks otherwise."""
    route = respx_mock.get(URL).mock(return_value=httpx.Response(200))
    http_tools().get(HttpTool).get(URL).purpose("Fetch").execute()
    assert route.calls.last.request.headers["accept-encoding"] == "identity"


def test_size_limit_counts_decoded_bytes(respx_mock, http_tools):
    """A small gzip body that inflates past max_response_bytes is rejected."""
    bomb = gzip.compress(b"0" * 1_000_000)
    respx_mock.get(URL).mock(
        return_value=httpx.Response(200, headers={"Content-Encoding": "gzip"}, content=bomb)
    )
    tool = http_tools(max_response_bytes=64 * 1024).get(HttpTool)
    with pytest.raises(ResponseTooLargeError):
        tool.get(URL, headers={"Accept-Encoding": "gzip"}).purpose("Fetch").execute()


def test_params_are_added_to_the_query(respx_mock, http_tools):
    """params join the URL's own query."""
    route = respx_mock.get(url__startswith=URL).mock(return_value=httpx.Response(200))
    tool = http_tools().get(HttpTool)
    tool.get(f"{URL}?page=2", params={"q": "rates", "tag": ["a", "b"]}).purpose("Search").execute()
    assert route.calls.last.request.url.params.multi_items() == [
        ("page", "2"),
        ("q", "rates"),
        ("tag", "a"),
        ("tag", "b"),
    ]


def test_async_execution(respx_mock, http_tools):
    """aexecute() runs the async implementation and returns the same response type."""
    respx_mock.get(URL).mock(return_value=httpx.Response(200, json={"ok": True}))
    tool = http_tools().get(HttpTool)

    async def main():
        return await tool.get(URL).purpose("Fetch").aexecute()

    assert asyncio.run(main()).json() == {"ok": True}


def test_redirects_are_not_followed(respx_mock, http_tools):
    """A 302 is returned as is; its Location is not requested."""
    respx_mock.get(URL).mock(return_value=httpx.Response(302, headers={"Location": "https://other.example/"}))
    tool = http_tools().get(HttpTool)
    response = tool.get(URL).purpose("Fetch").execute()
    assert response.status_code == 302
    assert respx_mock.calls.call_count == 1


def test_cookies_do_not_carry_over(respx_mock, http_tools):
    """A cookie set by one response is not sent with the next request."""
    route = respx_mock.get(URL).mock(return_value=httpx.Response(200, headers={"Set-Cookie": "sid=abc"}))
    tool = http_tools().get(HttpTool)
    tool.get(URL).purpose("First").execute()
    tool.get(URL).purpose("Second").execute()
    assert "cookie" not in route.calls.last.request.headers


def test_read_intent_has_no_execute(respx_mock, http_tools):
    """An undeclared read cannot execute; the error says to call purpose or audit_as."""
    intent = http_tools().get(HttpTool).get(URL)
    for name in ("execute", "aexecute"):
        with pytest.raises(AttributeError, match=r"purpose\(.*audit_as"):
            getattr(intent, name)
    assert respx_mock.calls.call_count == 0


def test_write_intent_rejects_purpose(respx_mock, http_tools):
    """A write cannot be declared with purpose(); the error says to use audit_as."""
    intent = http_tools().get(HttpTool).post(URL)
    with pytest.raises(AttributeError, match="audit_as"):
        intent.purpose("x")  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="audit_as"):
        intent.execute  # type: ignore[attr-defined]  # noqa: B018
    assert respx_mock.calls.call_count == 0


@pytest.mark.parametrize("text", ["", "   ", "x" * 1001, "two\nlines", "nul\x00", "bell\x07"])
@pytest.mark.parametrize("declare", ["purpose", "audit_as"])
def test_invalid_intent_text_is_rejected(respx_mock, http_tools, text, declare):
    """purpose()/audit_as() themselves reject empty, too long or control-character text."""
    tools = http_tools()
    intent = tools.get(HttpTool).get(URL)
    with pytest.raises(ValueError, match="intent text"):
        getattr(intent, declare)(text)
    assert tools.context.trace.operations() == []
    assert respx_mock.calls.call_count == 0


def test_intent_text_of_1000_characters_is_accepted(respx_mock, http_tools):
    """The limit is inclusive: 1000 characters are fine."""
    respx_mock.get(URL).mock(return_value=httpx.Response(200))
    ready = http_tools().get(HttpTool).get(URL).purpose("x" * 1000)
    assert ready.execute().is_success


def test_ready_executes_once(respx_mock, http_tools):
    """A second execute() raises IntentAlreadyExecutedError and sends nothing."""
    route = respx_mock.post(URL).mock(return_value=httpx.Response(201))
    tools = http_tools()
    ready = tools.get(HttpTool).post(URL, json={}).audit_as("Create item")
    ready.execute()
    with pytest.raises(IntentAlreadyExecutedError):
        ready.execute()
    with pytest.raises(IntentAlreadyExecutedError):
        asyncio.run(ready.aexecute())
    assert route.call_count == 1
    assert tools.executions(HttpTool) == 1


def test_trace_records_the_declared_intent(respx_mock, http_tools):
    """The trace holds tool, operation, intent kind and text, and the final status."""
    respx_mock.get(URL).mock(return_value=httpx.Response(200))
    tools = http_tools()
    tools.get(HttpTool).get(URL).purpose("Fetch rates").execute()
    (record,) = tools.context.trace.operations("http")
    assert (record.operation, record.intent_kind, record.intent_text) == ("get", "purpose", "Fetch rates")
    assert (record.target, record.status) == (URL, "SUCCESS")


def test_server_errors_are_retried_for_get_not_post(respx_mock, http_tools):
    """A 503 is retried for GET (READ_ONLY) and returned as is for POST (UNSAFE)."""
    route = respx_mock.get("https://api.example.test/flaky").mock(
        side_effect=[httpx.Response(503), httpx.Response(200, json={"ok": True})]
    )
    tools = http_tools()
    response = tools.get(HttpTool).get("https://api.example.test/flaky").purpose("Read").execute()
    assert response.status_code == 200
    assert route.call_count == 2
    post = respx_mock.post("https://api.example.test/flaky").mock(return_value=httpx.Response(503))
    response = tools.get(HttpTool).post("https://api.example.test/flaky").audit_as("Write").execute()
    assert response.status_code == 503
    assert post.call_count == 1
