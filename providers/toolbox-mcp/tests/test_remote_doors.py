"""A remote MCP tool's result reaches every door: REST, a raw tool call, toolbox's own MCP server.

Before, ``POST /v1/tools/mcp.NAME.OP/invoke`` answered 500 INTERNAL_ERROR with no trace id
*after the upstream call ran* (an `McpResult` could not be serialised): an UNSAFE remote
operation looked like a failure that had not happened, inviting a blind retry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from conftest import executions, lock, stdio_server, write_policy
from mcp import Client

import toolbox_mcp.plugin
from service_support import LiveServer
from toolbox import ExecutionContext, Gateway, Governance, RiskClass, ToolPolicy, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.auth import ApiKeyFile
from toolbox.doors.tool_calls import openai_tool_result
from toolbox.mcp import server
from toolbox.service import create_app
from toolbox.testing.credentials import write_api_keys

CTX = ExecutionContext(tenant="acme", principal="alice")


class Unshowable:
    """A result no door can show: its JSON hook and its text both fail."""

    def __toolbox_json__(self) -> Any:
        raise RuntimeError("no JSON form")

    def __str__(self) -> str:
        raise RuntimeError("no text form")


RAN: list[str] = []


@tool(risk=RiskClass.MEMORY_ONLY, name="ledger.post")
def post(amount: int) -> Unshowable:
    """Post an entry; its result cannot be shown."""
    RAN.append("post")
    return Unshowable()


@pytest.fixture
def policy_path(tmp_path: Path, count_file: Path) -> Path:
    servers = {"web": stdio_server(count_file, operations={"echo": {"effect": "READ_ONLY"}})}
    path = write_policy(
        tmp_path / "policy.toml",
        servers,
        allow=["mcp.web", "ledger.post"],
        extra='[auth]\napi_keys = "keys.toml"',
    )
    lock(path, "web")
    return path


@pytest.fixture
def live(tmp_path: Path, policy_path: Path) -> Any:
    keys = write_api_keys(tmp_path / "keys.toml", {"alice": {"tenant": "acme", "roles": ["caller"]}})
    sink = MemorySink()
    app = create_app(
        policy=ToolPolicy.from_file(policy_path),
        authenticator=ApiKeyFile(tmp_path / "keys.toml"),
        providers=[toolbox_mcp.plugin, post],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink)),
        console=False,
    )
    running = LiveServer(app)
    RAN.clear()
    yield running, {"Authorization": f"Bearer {keys['alice']}"}, sink
    running.stop()


def test_a_remote_tool_answers_over_rest(live: Any, count_file: Path) -> None:
    running, headers, _ = live
    answer = httpx.post(
        f"{running.url}/v1/tools/mcp.web.echo/invoke",
        json={"arguments": {"text": "hello"}, "purpose": "Check the echo"},
        headers=headers,
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["status"] == "SUCCESS" and document["trace_id"]
    # The remote structured content is the result (its text is the same value as JSON).
    assert document["content"] == {"result": "hello"}
    assert executions(count_file) == ["echo"]


def test_a_result_that_cannot_be_shown_is_an_uncertain_effect_with_its_trace(live: Any) -> None:
    running, headers, sink = live
    answer = httpx.post(
        f"{running.url}/v1/tools/ledger.post/invoke",
        json={"arguments": {"amount": 5}, "audit_as": "Post the entry"},
        headers=headers,
        timeout=60,
    )
    assert answer.status_code == 502, answer.text
    problem = answer.json()
    assert (problem["reason_code"], problem["tool_status"], problem["uncertain_effect"]) == (
        "UNCERTAIN_EFFECT",
        "UNCERTAIN_EFFECT",
        True,
    )
    assert problem["trace_id"] and "no text form" not in answer.text
    assert RAN == ["post"]  # it ran: the caller must not be told it failed
    statuses = [e.status for e in sink.read_trace(problem["trace_id"]) if e.status]
    assert statuses[-1] == "SUCCESS"  # the trace the answer names shows what happened


def test_a_remote_tool_answers_a_raw_tool_call_and_over_mcp(policy_path: Path, count_file: Path) -> None:
    gateway = Gateway.load(
        policy=ToolPolicy.from_file(policy_path), providers=[toolbox_mcp.plugin, post], discover=False, env={}
    )
    try:
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "mcp__web__echo", "arguments": '{"text": "hi", "purpose": "Echo"}'},
        }
        message = openai_tool_result(gateway, call, context=CTX)
        assert message == {"role": "tool", "tool_call_id": "call_1", "content": '{"result": "hi"}'}

        async def over_mcp() -> Any:
            async with Client(server(gateway, context=CTX)) as client:
                return await client.call_tool("mcp__web__echo", {"text": "yo", "purpose": "Echo"})

        result = anyio.run(over_mcp)
        assert not result.is_error
        assert result.structured_content == {"result": "yo"}
        assert result.content[0].text == '{"result":"yo"}'
        assert executions(count_file) == ["echo", "echo"]
    finally:
        gateway.close()
