"""HttpTool cannot send outside the governed chain: the loopback server receives nothing."""

from __future__ import annotations

import asyncio

import pytest

from toolbox import Status
from toolbox.errors import GovernanceBypassError
from toolbox.registry._intent import dispatch_calls
from toolbox_http import HttpTool

KILL = {"TOOLBOX_KILL_SWITCH": "1"}


@pytest.fixture
def killed_http(http_tools, toolbox_env: dict[str, str]) -> HttpTool:
    """The http tool, built while the kill switch is engaged."""
    toolbox_env.update(KILL)
    return http_tools().get(HttpTool)


def test_issue_9_finding_10_operation_calls_sends_nothing(loopback, killed_http: HttpTool) -> None:
    """``get(url).operation_calls()[0]()`` sent a request with the kill switch engaged; now nothing."""
    intent = killed_http.get(f"{loopback.url}/json")
    with pytest.raises(AttributeError):
        intent.operation_calls()  # type: ignore[attr-defined]
    call, acall = dispatch_calls(intent)
    with pytest.raises(GovernanceBypassError) as caught:
        call()
    assert caught.value.tool == "http"
    assert acall is not None
    with pytest.raises(GovernanceBypassError):
        asyncio.run(acall())  # type: ignore[arg-type]
    assert loopback.requests == []


def test_internals_send_nothing(loopback, killed_http: HttpTool) -> None:
    """The exchange, and the tool's own httpx clients (sync and async), refuse to send."""
    intent = killed_http.post(f"{loopback.url}/echo", json={"a": 1})
    ready = intent.audit_as("Post")
    clients = killed_http._clients
    attempts = [
        ready._call,
        lambda: clients.sync_client().get(f"{loopback.url}/json"),
        lambda: clients.sync_client().post(f"{loopback.url}/echo", content=b"x"),
    ]
    for attempt in attempts:
        with pytest.raises(GovernanceBypassError):
            attempt()

    async def via_async_client() -> None:
        client = await clients.async_client()
        await client.get(f"{loopback.url}/json")

    with pytest.raises(GovernanceBypassError):
        asyncio.run(via_async_client())
    assert loopback.requests == []


def test_exchange_send_refuses(loopback, http_tools) -> None:
    """Exchange.send with a prepared request, outside any dispatch, sends nothing."""
    from toolbox_http._request import prepare

    tool = http_tools().get(HttpTool)
    prepared = prepare("GET", f"{loopback.url}/json", params=None, headers=None, max_request_bytes=1024)
    with pytest.raises(GovernanceBypassError):
        tool._exchange.send(prepared)
    with pytest.raises(GovernanceBypassError):
        asyncio.run(tool._exchange.send_async(prepared))
    assert loopback.requests == []


def test_the_governed_way_is_stopped_by_the_kill_switch(loopback, http_tools, toolbox_env) -> None:
    """Through the chain: DENIED/KILL_SWITCH, and again nothing reaches the server."""
    from toolbox import Gateway

    tools = http_tools()
    toolbox_env.update(KILL)
    result = Gateway(tools.catalog).invoke(
        "http.get", {"url": f"{loopback.url}/json", "purpose": "Fetch"}, context=tools.context
    )
    assert (result.status, result.reason_code) == (Status.DENIED, "KILL_SWITCH")
    assert loopback.requests == []
    toolbox_env.pop("TOOLBOX_KILL_SWITCH")
    assert tools.get(HttpTool).get(f"{loopback.url}/json").purpose("Fetch").execute().status_code == 200
    assert len(loopback.requests) == 1
