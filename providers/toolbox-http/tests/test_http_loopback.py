"""Integration: HttpTool against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest

from toolbox.errors import ResponseTooLargeError, ToolConnectionError, ToolTimeoutError
from toolbox_http import HttpStatusError, HttpTool

LIMIT = 64 * 1024
BIG_PATHS = ["/big-length", "/big-chunked", "/big-close"]


def test_get_json(loopback, http_tools):
    """A sync GET returns the server's JSON."""
    tools = http_tools()
    response = tools.get(HttpTool).get(f"{loopback.url}/json").purpose("Fetch rates").execute()
    assert response.status_code == 200
    assert response.is_success
    assert response.json() == {"rates": {"EUR": 1.1}}
    assert tools.executions(HttpTool) == 1


def test_get_json_async(loopback, http_tools):
    """An async GET returns the server's JSON."""
    tool = http_tools().get(HttpTool)

    async def main():
        return await tool.get(f"{loopback.url}/json").purpose("Fetch rates").aexecute()

    assert asyncio.run(main()).json() == {"rates": {"EUR": 1.1}}


def test_post_echo(loopback, http_tools):
    """A sync POST sends its JSON body, which the server echoes."""
    tool = http_tools().get(HttpTool)
    response = tool.post(f"{loopback.url}/echo", json={"sku": 7}).audit_as("Sync inventory").execute()
    assert response.json() == {
        "method": "POST",
        "path": "/echo",
        "body": '{"sku":7}',
        "content_type": "application/json",
    }


def test_post_echo_async(loopback, http_tools):
    """An async POST sends its body, which the server echoes."""
    tool = http_tools().get(HttpTool)

    async def main():
        intent = tool.post(f"{loopback.url}/echo", content=b"raw")
        return await intent.audit_as("Sync inventory").aexecute()

    assert asyncio.run(main()).json()["body"] == "raw"


def test_keep_alive_connection_is_reused(loopback, http_tools):
    """Sequential sync calls share the pooled client."""
    tool = http_tools().get(HttpTool)
    for _ in range(3):
        assert tool.get(f"{loopback.url}/json").purpose("Fetch rates").execute().is_success


def test_async_calls_share_a_pooled_connection_per_loop(loopback, http_tools):
    """Async calls in one event loop reuse one kept-alive connection; the loop's shutdown closes it."""
    tool = http_tools().get(HttpTool)
    clients = []

    async def main():
        for _ in range(3):
            assert (await tool.get(f"{loopback.url}/json").purpose("Read").aexecute()).is_success
        clients.append(await tool._clients.async_client())

    asyncio.run(main())
    assert len(loopback.peers) == 3
    assert len(set(loopback.peers)) == 1
    assert clients[0].is_closed
    asyncio.run(main())  # a new loop gets a new client
    assert len(set(loopback.peers)) == 2
    assert clients[1] is not clients[0] and clients[1].is_closed


def test_non_2xx_is_returned_not_raised(loopback, http_tools):
    """A 404 is a response; raise_for_status turns it into HttpStatusError."""
    tool = http_tools().get(HttpTool)
    response = tool.get(f"{loopback.url}/missing?token=s3cret").purpose("Look up").execute()
    assert response.status_code == 404
    with pytest.raises(HttpStatusError, match="404") as info:
        response.raise_for_status()
    assert "s3cret" not in str(info.value)


def test_head_ignores_declared_length(loopback, http_tools):
    """HEAD of a large resource succeeds: its Content-Length describes no body."""
    tool = http_tools(max_response_bytes=LIMIT).get(HttpTool)
    response = tool.head(f"{loopback.url}/big-length").purpose("Check").execute()
    assert response.status_code == 200
    assert response.headers["content-length"] == str(loopback.big_body)
    assert response.content == b""


@pytest.mark.parametrize("path", BIG_PATHS)
def test_response_over_limit_stops_reading(loopback, http_tools, path):
    """A 2 MB body with a 64 KiB limit raises ResponseTooLargeError and the connection is dropped."""
    tools = http_tools(max_response_bytes=LIMIT)
    ready = tools.get(HttpTool).get(f"{loopback.url}{path}").purpose("Download")
    with pytest.raises(ResponseTooLargeError, match="max_response_bytes"):
        ready.execute()
    observed = loopback.wait(path)
    assert observed.error is not None, "the server finished writing: the client read everything"
    assert observed.written < loopback.big_body // 2
    assert ready.record.status == "ERROR"
    assert ready.record.error_type == "ResponseTooLargeError"


@pytest.mark.parametrize("path", BIG_PATHS)
def test_response_over_limit_stops_reading_async(loopback, http_tools, path):
    """The async path enforces the limit while streaming too."""
    tool = http_tools(max_response_bytes=LIMIT).get(HttpTool)

    async def main():
        await tool.get(f"{loopback.url}{path}").purpose("Download").aexecute()

    with pytest.raises(ResponseTooLargeError):
        asyncio.run(main())
    observed = loopback.wait(path)
    assert observed.error is not None
    assert observed.written < loopback.big_body // 2


def test_total_timeout_while_streaming(loopback, http_tools):
    """A body that trickles in past total_timeout raises ToolTimeoutError."""
    # 1.5 s, not less: on a loaded machine the request must reach the handler before the timeout.
    tool = http_tools(total_timeout=1.5).get(HttpTool)
    with pytest.raises(ToolTimeoutError, match="total_timeout"):
        tool.get(f"{loopback.url}/slow").purpose("Download").execute()
    assert loopback.wait("/slow").error is not None


def test_total_timeout_while_streaming_async(loopback, http_tools):
    """The async path cancels the exchange at total_timeout."""
    tool = http_tools(total_timeout=1.5).get(HttpTool)

    async def main():
        await tool.get(f"{loopback.url}/slow").purpose("Download").aexecute()

    with pytest.raises(ToolTimeoutError, match="total_timeout"):
        asyncio.run(main())
    assert loopback.wait("/slow").error is not None


def test_connection_refused(loopback, http_tools):
    """A closed port on 127.0.0.1 raises ToolConnectionError naming the OS error."""
    url = loopback.url
    loopback.shutdown()
    loopback.server_close()
    tool = http_tools().get(HttpTool)
    with pytest.raises(ToolConnectionError, match="ECONNREFUSED"):
        tool.get(f"{url}/json").purpose("Fetch rates").execute()
