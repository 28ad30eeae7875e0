"""The SQL tools are governed on every door: typed and by name (sync and async), MCP, pydantic-ai.

On each door: an allowed query returns the tenant's rows; a hostile one is
refused with its reason code, runs zero times and is audited; a write waits
for approval. MCP uses the official ``mcp`` client over the SDK's in-memory
transport; pydantic-ai a real ``Agent`` driven by its ``FunctionModel``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import pytest
from mcp import Client
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests
from sql_support import ACK, ACME, APPROVER, TestDatabase

from toolbox import ApprovalRequired, ExecutionContext, Status, Tools
from toolbox.audit import EventType, MemorySink
from toolbox.integrations.pydantic_ai import GovernedToolset, deferred_results
from toolbox.mcp import ERROR_META_KEY, TRACE_META_KEY, server
from toolbox_sql import SqlDeniedError, SqlResult, SqlTool

HOSTILE = "SELECT id FROM orders; DELETE FROM orders"
BOTH = ("sql.shop", "sql_write.shop")


def _deny_events(sink: MemorySink, run_id: str) -> list[str | None]:
    return [
        e.reason_code
        for e in sink.read_trace(run_id)
        if e.type is EventType.GOVERNANCE_DECISION and e.decision == "DENY"
    ]


def test_typed_door_sync_and_async(reads: TestDatabase, runs: list[str]) -> None:
    """execute() and aexecute() return the same rows; a refusal raises before an intent."""
    sink = MemorySink()
    gateway = reads.gateway(sink=sink)
    with Tools(gateway.catalog, ACME) as tools:
        shop: SqlTool = tools.get("sql.shop")
        sync = shop.query("SELECT count(*) AS n FROM orders").purpose("Count").execute()
        asynchronous = asyncio.run(shop.query("SELECT count(*) AS n FROM orders").purpose("Count").aexecute())
        assert isinstance(sync, SqlResult) and sync.rows == asynchronous.rows == ((3,),)
        with pytest.raises(SqlDeniedError) as caught:
            shop.query(HOSTILE)
        assert caught.value.reason_code == "SQL_NOT_ONE_STATEMENT"
    assert runs == ["SELECT", "SELECT"]
    assert _deny_events(sink, ACME.run_id) == ["SQL_NOT_ONE_STATEMENT"]


def test_a_released_context_leaves_the_pools_for_the_next_request(reads: TestDatabase) -> None:
    """What `toolbox serve` does after each request (`Gateway.release`) keeps the pools open."""
    gateway = reads.gateway()
    probe = Tools(gateway.catalog, ACME)
    database = type(probe.get("sql.shop")).database
    probe.release()
    engines = []
    for principal in ("ann", "bob", "ann"):
        context = ExecutionContext(tenant=ACME.tenant, principal=principal)
        ok = gateway.invoke(
            "sql.shop.query", {"sql": "SELECT count(*) AS n FROM orders", "purpose": "Count"}, context=context
        )
        assert ok.status is Status.SUCCESS
        gateway.release(context)
        engines.append(database._reader)
    assert engines[0] is not None and all(engine is engines[0] for engine in engines)
    with Tools(gateway.catalog, ACME) as tools:  # the owner's close: the last tool disposes them
        tools.get("sql.shop")
    assert database._reader is None


def test_by_name_sync_and_async(reads: TestDatabase, runs: list[str]) -> None:
    """invoke() and ainvoke(), by dotted and wire name."""
    sink = MemorySink()
    gateway = reads.gateway(sink=sink)
    ok = gateway.invoke(
        "sql__shop__query",
        {"sql": "SELECT customer FROM orders WHERE id = 1", "purpose": "Who"},
        context=ACME,
    )
    same = asyncio.run(
        gateway.ainvoke(
            "sql.shop.query",
            {"sql": "SELECT customer FROM orders WHERE id = 1", "purpose": "Who"},
            context=ACME,
        )
    )
    assert ok.content.rows == same.content.rows == (("ann",),)
    refused = asyncio.run(gateway.ainvoke("sql.shop.query", {"sql": HOSTILE, "purpose": "x"}, context=ACME))
    assert (refused.status, refused.reason_code, refused.attempts) == (
        Status.DENIED,
        "SQL_NOT_ONE_STATEMENT",
        0,
    )
    assert runs == ["SELECT", "SELECT"]
    assert _deny_events(sink, ACME.run_id) == ["SQL_NOT_ONE_STATEMENT"]


def test_mcp_official_client(reads: TestDatabase, runs: list[str]) -> None:
    """Over MCP: listed by wire name, rows as structured content, refusals as errors, approvals asked."""
    sink = MemorySink()
    gateway = reads.gateway(policy=reads.policy(allow=BOTH, writes={}), sink=sink, env=reads.env(**ACK))
    operator = ExecutionContext(tenant="acme", principal="desktop")

    async def steps(client: Client) -> tuple[Any, ...]:
        listed = await client.list_tools()
        ok = await client.call_tool(
            "sql__shop__query", {"sql": "SELECT count(*) AS n FROM orders", "purpose": "Count"}
        )
        refused = await client.call_tool("sql__shop__query", {"sql": HOSTILE, "purpose": "Count"})
        write = await client.call_tool(
            "sql_write__shop__execute",
            {"sql": "UPDATE orders SET status = 'x' WHERE id = 1", "audit_as": "Fix"},
        )
        return listed, ok, refused, write

    async def main() -> tuple[Any, ...]:
        async with Client(server(gateway, context=operator)) as client:
            return await steps(client)

    listed, ok, refused, write = anyio.run(main)
    names = {tool.name for tool in listed.tools}
    assert {"sql__shop__query", "sql__shop__schema", "sql_write__shop__execute"} <= names
    assert not ok.is_error and ok.structured_content["rows"] == [[3]]
    # An error result's codes are in _meta (structured content is a success's, by the output schema).
    assert refused.is_error and refused.meta[ERROR_META_KEY]["reason_code"] == "SQL_NOT_ONE_STATEMENT"
    assert refused.meta[ERROR_META_KEY]["attempts"] == 0 and refused.structured_content is None
    assert write.meta[ERROR_META_KEY]["status"] == "APPROVAL_REQUIRED"
    assert runs == ["SELECT"]
    trace = refused.meta[TRACE_META_KEY]
    assert _deny_events(sink, trace) == ["SQL_NOT_ONE_STATEMENT"]


def test_pydantic_ai_agent(db: TestDatabase, runs: list[str]) -> None:
    """A FunctionModel agent: reads, reads a refusal as a tool failure, and waits for approval of a write."""
    sink = MemorySink()
    gateway = db.gateway(policy=db.policy(allow=BOTH, writes={}), sink=sink, env=db.env(**ACK))
    turns = [
        [
            ToolCallPart(
                "sql__shop__query", {"sql": "SELECT sum(total) AS s FROM orders", "purpose": "Revenue"}
            )
        ],
        [ToolCallPart("sql__shop__query", {"sql": HOSTILE, "purpose": "Clean up"})],
        [
            ToolCallPart(
                "sql_write__shop__execute",
                {"sql": "UPDATE orders SET status = 'paid' WHERE id = 2", "audit_as": "Mark paid"},
                tool_call_id="w1",
            )
        ],
        [TextPart("Done.")],
    ]
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart):
                seen.append(part.model_response_str())  # what the model reads
        return ModelResponse(parts=turns.pop(0))

    toolset = GovernedToolset(gateway)
    agent: Agent[ExecutionContext, Any] = Agent(
        FunctionModel(model),
        deps_type=ExecutionContext,
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests],
    )
    first = asyncio.run(agent.run("Revenue, then mark order 2 paid", deps=ACME))
    assert isinstance(first.output, DeferredToolRequests)
    assert "500.5" in seen[0] and "SQL_NOT_ONE_STATEMENT" in seen[1]
    assert runs == ["SELECT"]
    request = toolset.approval_requests(first.output)["w1"]
    assert request.arguments["sql"] == "-- UPDATE orders\nUPDATE orders SET status = 'paid'\nWHERE\n  id = 2"
    grant = APPROVER.grant(request, approved_by="lead")
    done = asyncio.run(
        agent.run(
            deps=ACME,
            message_history=first.all_messages(),
            deferred_tool_results=deferred_results(approved={"w1": grant}),
        )
    )
    assert done.output == "Done." and runs == ["SELECT", "UPDATE"]
    assert db.rows(f"SELECT status FROM {db.prefix}orders WHERE id = 2") == [("paid",)]
    assert "SQL_NOT_ONE_STATEMENT" in _deny_events(sink, ACME.run_id)


def test_typed_write_needs_the_grant(reads: TestDatabase, runs: list[str]) -> None:
    """The typed door's execute raises ApprovalRequired (nothing runs) until it has a grant."""
    gateway = reads.gateway(policy=reads.policy(allow=BOTH, writes={}), env=reads.env(**ACK))
    with Tools(gateway.catalog, ACME) as tools:
        intent = tools.get("sql_write.shop").execute("DELETE FROM orders WHERE id = :id", {"id": 3})
        with pytest.raises(ApprovalRequired):
            intent.audit_as("Remove").execute()
    assert runs == []
    assert json.dumps(dict(intent.arguments)) and intent.arguments["kind"] == "DELETE"
