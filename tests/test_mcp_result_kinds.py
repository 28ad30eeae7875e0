"""Every kind of MCP result toolbox sends, read by both official SDKs: the Python client and the
TypeScript client (``@modelcontextprotocol/sdk``, run with node; see tests/mcp_ts_support.py).

The MCP specification says structured content MUST conform to the tool's declared output schema,
and the TypeScript SDK enforces it even on error results: a result that breaks it is an
``McpError`` there, not an answer. Each kind is called over streamable HTTP on 127.0.0.1 by
both clients; each answer must be a result the SDK accepts, with ``isError`` as expected,
structured content only where it conforms, and the outcome's codes in ``_meta``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import jsonschema
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import mcp_scenario_tools as scenario
from mcp_ts_support import ts_client
from test_mcp_http import serve
from test_mcp_stdio import Child
from toolbox import Effect, Gateway, Governance, RiskClass, ToolPolicy, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.auth import authenticator_from_policy
from toolbox.errors import ToolTimeoutError
from toolbox.mcp import ERROR_META_KEY, TRACE_META_KEY, McpHttpApp
from toolbox.testing.credentials import write_api_keys

PURPOSE = "Answer the user's question"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE)
def transfer(amount: int) -> dict[str, int]:
    """Move money; the connection drops after the request was sent."""
    scenario.EXECUTIONS.append("transfer")
    raise ToolTimeoutError("the bank did not answer", request_sent=True)


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def count(word: str) -> int:
    """Count the letters of a word."""
    scenario.EXECUTIONS.append("count")
    return len(word)


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def freeform(word: str):  # type: ignore[no-untyped-def]  # no return type: no output schema
    """Describe a word (no declared return type)."""
    scenario.EXECUTIONS.append("freeform")
    return {"word": word, "letters": len(word)}


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def misdeclared(word: str) -> int:
    """Declares an int, returns text: a tool whose result breaks its own output schema."""
    scenario.EXECUTIONS.append("misdeclared")
    return f"{word}!"  # type: ignore[return-value]


EXTRA = [transfer, count, freeform, misdeclared]
POLICY = scenario.POLICY + '\n[auth]\napi_keys = "keys.toml"\n'

# id, key, name, arguments, is_error, status, reason code, error code, executions
KINDS: list[tuple[str, str, str, dict[str, Any], bool, str, str | None, str | None, int]] = [
    (
        "success-object",
        "alice",
        "lookup",
        {"note_id": 1, "purpose": PURPOSE},
        False,
        "SUCCESS",
        None,
        None,
        1,
    ),
    (
        "success-wrapped",
        "alice",
        "count",
        {"word": "four", "purpose": PURPOSE},
        False,
        "SUCCESS",
        None,
        None,
        1,
    ),
    (
        "success-no-schema",
        "alice",
        "freeform",
        {"word": "ab", "purpose": PURPOSE},
        False,
        "SUCCESS",
        None,
        None,
        1,
    ),
    (
        "success-breaking-its-schema",
        "alice",
        "misdeclared",
        {"word": "ab", "purpose": PURPOSE},
        True,
        "SUCCESS",
        None,
        "OUTPUT_SCHEMA_MISMATCH",
        1,
    ),
    (
        "denied-policy",
        "alice",
        "vault",
        {"item": "a", "purpose": PURPOSE},
        True,
        "DENIED",
        "POLICY_DENIED",
        None,
        0,
    ),
    (
        "denied-guardrail",
        "alice",
        "lookup",
        {"note_id": 13, "purpose": PURPOSE},
        True,
        "DENIED",
        "GUARDRAIL_NO_SECRET_NOTE",
        None,
        0,
    ),
    (
        "denied-kill-switch",
        "alice",
        "halt",
        {"item": "x", "purpose": PURPOSE},
        True,
        "DENIED",
        "KILL_SWITCH",
        None,
        0,
    ),
    (
        "denied-toolset",
        "reader",
        "refund",
        {"amount": 1, "audit_as": "Refund"},
        True,
        "DENIED",
        "NOT_IN_TOOLSET",
        None,
        0,
    ),
    (
        "denied-unknown-tool",
        "alice",
        "no_such_tool",
        {"purpose": PURPOSE},
        True,
        "DENIED",
        "TOOL_UNAVAILABLE",
        "unknown_tool",
        0,
    ),
    (
        "invalid-arguments",
        "alice",
        "lookup",
        {"note_id": "seven", "purpose": PURPOSE},
        True,
        "INVALID_ARGUMENTS",
        "INVALID_ARGUMENTS",
        "int_parsing",
        0,
    ),
    (
        "invalid-missing-intent",
        "alice",
        "lookup",
        {"note_id": 1},
        True,
        "INVALID_ARGUMENTS",
        "INVALID_ARGUMENTS",
        "missing",
        0,
    ),
    (
        "approval-required",
        "alice",
        "refund",
        {"amount": 5, "audit_as": "Refund"},
        True,
        "APPROVAL_REQUIRED",
        "APPROVAL_REQUIRED",
        None,
        0,
    ),
    (
        "business-failed",
        "alice",
        "settle",
        {"order": 4, "audit_as": "Settle"},
        True,
        "BUSINESS_FAILED",
        None,
        "NOT_SETTLED",
        1,
    ),
    ("error", "alice", "explode", {"item": "x", "purpose": PURPOSE}, True, "ERROR", None, "RuntimeError", 1),
    (
        "uncertain-effect",
        "alice",
        "transfer",
        {"amount": 5, "audit_as": "Pay"},
        True,
        "UNCERTAIN_EFFECT",
        None,
        "TIMEOUT",
        1,
    ),
]


class Endpoint:
    def __init__(self, url: str, keys: dict[str, str], sink: MemorySink) -> None:
        self.url = url
        self.keys = keys
        self.sink = sink


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    tmp: Path = tmp_path_factory.mktemp("mcp-kinds")
    keys = write_api_keys(
        tmp / "keys.toml",
        {
            "alice": {"tenant": "tenant-a", "roles": ["analyst"]},
            "reader": {"tenant": "tenant-a", "toolset": "readers"},
        },
    )
    (tmp / "policy.toml").write_text(POLICY, encoding="utf-8")
    policy = ToolPolicy.from_file(tmp / "policy.toml")
    sink = MemorySink()
    gateway = Gateway.load(
        policy=policy,
        providers=[*scenario.PROVIDERS, *EXTRA],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink), mappers=scenario.MAPPERS, disabled_tools=["halt"]),
    )
    authenticator = authenticator_from_policy(policy)
    assert authenticator is not None
    url, server, thread = serve(McpHttpApp(gateway, authenticator).starlette())
    yield Endpoint(url, keys, sink)
    server.should_exit = True
    thread.join(timeout=10)


def _python_client(
    endpoint: Endpoint, key: str, calls: list[tuple[str, dict[str, Any]]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The official Python client: the listed output schemas and each call's result, as sent."""

    async def main() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        headers = {"Authorization": f"Bearer {endpoint.keys[key]}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(endpoint.url, http_client=http)) as client,
        ):
            tools = {t.name: t.output_schema for t in (await client.list_tools()).tools}
            results = []
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                results.append(result.model_dump(by_alias=True, mode="json", exclude_none=True))
            return tools, results

    return anyio.run(main)


def _schemas(endpoint: Endpoint) -> dict[str, Any]:
    """Every served tool's output schema, as the Python client lists them to the analyst."""
    tools, _ = _python_client(endpoint, "alice", [])
    return tools


def _check(kind: tuple[Any, ...], result: dict[str, Any], schema: dict[str, Any] | None) -> None:
    _, _, _, _, is_error, status, reason, error, _ = kind
    assert result.get("isError", False) is is_error, result
    structured = result.get("structuredContent")
    if schema is not None and structured is not None:
        jsonschema.validate(structured, schema)  # what both SDKs check: it must conform
    if schema is not None and not is_error:
        assert structured is not None
    text = result["content"][0]["text"]
    assert text and "Traceback" not in text and "hunter2" not in text
    meta = result["_meta"]
    assert meta[TRACE_META_KEY]
    if is_error:
        outcome = meta[ERROR_META_KEY]
        assert (outcome["status"], outcome["reason_code"], outcome["error_code"]) == (status, reason, error)
        assert outcome["trace_id"] == meta[TRACE_META_KEY]
    else:
        assert ERROR_META_KEY not in meta


def _by_key() -> dict[str, list[tuple[Any, ...]]]:
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for kind in KINDS:
        grouped.setdefault(kind[1], []).append(kind)
    return grouped


def test_python_client_accepts_every_result_kind(endpoint):
    """The official Python client reads every kind as a result, each as the table says."""
    schemas = _schemas(endpoint)
    for key, kinds in _by_key().items():
        scenario.EXECUTIONS.clear()
        _, results = _python_client(endpoint, key, [(k[2], k[3]) for k in kinds])
        for kind, result in zip(kinds, results, strict=True):
            _check(kind, result, schemas.get(kind[2]))
        assert len(scenario.EXECUTIONS) == sum(k[8] for k in kinds)


def test_typescript_client_accepts_every_result_kind(endpoint):
    """The official TypeScript SDK raises no McpError on any kind: structured content conforms."""
    schemas = _schemas(endpoint)
    for key, kinds in _by_key().items():
        scenario.EXECUTIONS.clear()
        answer = ts_client(
            {
                "transport": "http",
                "url": endpoint.url,
                "token": endpoint.keys[key],
                "calls": [{"name": k[2], "arguments": k[3]} for k in kinds],
            }
        )
        for kind, outcome in zip(kinds, answer["results"], strict=True):
            assert outcome["ok"], (kind[0], outcome)
            _check(kind, outcome["result"], schemas.get(kind[2]))
        assert len(scenario.EXECUTIONS) == sum(k[8] for k in kinds)


def test_typescript_client_sees_the_listing(endpoint):
    """What the TypeScript SDK lists: wire names, output schemas where the return type gives one."""
    answer = ts_client(
        {"transport": "http", "url": endpoint.url, "token": endpoint.keys["alice"], "calls": []}
    )
    tools = {t["name"]: t for t in answer["tools"]}
    assert tools["lookup"]["hasOutputSchema"] and tools["count"]["hasOutputSchema"]
    assert not tools["freeform"]["hasOutputSchema"]
    assert tools["lookup"]["annotations"]["readOnlyHint"] is True


def test_typescript_client_over_stdio(tmp_path):
    """``toolbox mcp serve`` as the TypeScript SDK's stdio child: the same results, nothing thrown."""
    child = Child(tmp_path)
    wanted = ("success-object", "denied-policy", "invalid-arguments", "approval-required", "error")
    kinds = [k for k in KINDS if k[0] in wanted]
    params = child.params
    answer = ts_client(
        {
            "transport": "stdio",
            "command": params.command,
            "args": params.args,
            "env": params.env,
            "calls": [{"name": k[2], "arguments": k[3]} for k in kinds],
        }
    )
    schemas = {t["name"]: t["hasOutputSchema"] for t in answer["tools"]}
    assert schemas["lookup"] and schemas["refund"]
    for kind, outcome in zip(kinds, answer["results"], strict=True):
        assert outcome["ok"], (kind[0], outcome)
        result = outcome["result"]
        assert result.get("isError", False) is kind[4]
        assert "structuredContent" not in result or not kind[4]
        if kind[4]:
            assert result["_meta"][ERROR_META_KEY]["status"] == kind[5]
    assert child.executions() == ["lookup", "explode"]
