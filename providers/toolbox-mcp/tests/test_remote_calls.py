"""Governed calls to a real stdio MCP server, through the Gateway and the typed door."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import lock, stdio_server, wait_no_server_children, wait_server_children, write_policy

from toolbox import ExecutionContext, Status
from toolbox_mcp import McpResult, McpTool

CTX = ExecutionContext(tenant="tenant-a", principal="alice")


@pytest.fixture
def setup(tmp_path, count_file, make_setup):
    servers = {"notes": stdio_server(count_file, operations={"echo": {"effect": "READ_ONLY"}})}
    policy = write_policy(tmp_path / "policy.toml", servers)
    lock(policy, "notes")
    return make_setup(policy, count_file)


def test_a_by_name_call_runs_upstream_once_and_is_audited(setup):
    result = setup.gateway.invoke("mcp.notes.add", {"a": 2, "b": 3, "audit_as": "Add numbers"}, context=CTX)
    assert result.status is Status.SUCCESS
    assert isinstance(result.content, McpResult)
    assert result.content.text == "5"
    assert result.content.structured == {"result": 5}
    assert setup.executions() == ["add"]
    types = [event[0] for event in setup.events(CTX)]
    assert types == ["INTENT_DECLARED", "GOVERNANCE_DECISION", "INVOCATION_REQUEST", "INVOCATION_RESPONSE"]
    assert setup.events(CTX)[-1][1] == "SUCCESS"


def test_wire_names_and_dotted_names_reach_the_same_operation(setup):
    wire = setup.gateway.invoke("mcp__notes__echo", {"text": "hi", "purpose": "Echo"}, context=CTX)
    dotted = setup.gateway.invoke("mcp.notes.echo", {"text": "ho", "purpose": "Echo"}, context=CTX)
    assert (wire.content.text, dotted.content.text) == ("hi", "ho")
    assert setup.executions() == ["echo", "echo"]


def test_the_typed_door_returns_read_and_write_intents_by_effect(setup):
    tool = setup.gateway.tools_for(CTX).get("mcp.notes")
    assert isinstance(tool, McpTool)
    assert tool.call("echo", {"text": "x"}).purpose("Check the echo").execute().text == "x"
    assert tool.call("add", {"a": 1, "b": 1}).audit_as("Add").execute().text == "2"
    with pytest.raises(AttributeError):
        tool.call("add", {"a": 1, "b": 1}).purpose("a write has no purpose")  # type: ignore[union-attr]
    assert setup.executions() == ["echo", "add"]


def test_async_calls_share_the_session(setup):
    async def run():
        return await asyncio.gather(
            *(
                setup.gateway.ainvoke("mcp.notes.add", {"a": i, "b": 1, "audit_as": "Add"}, context=CTX)
                for i in range(5)
            )
        )

    results = asyncio.run(run())
    assert sorted(r.content.text for r in results) == ["1", "2", "3", "4", "5"]
    tool = setup.gateway.tools_for(CTX).get("mcp.notes")
    assert tool._connection.sessions_started == 1  # one session on that loop, for five calls
    # The loop's session ended with the loop (asyncio.run cancels its tasks): the child is reaped.
    assert wait_no_server_children() == []


def test_sync_and_async_callers_each_get_a_pooled_session(setup):
    tool = setup.gateway.tools_for(CTX).get("mcp.notes")
    for _ in range(3):
        assert tool.call("add", {"a": 1, "b": 1}).audit_as("Add").execute().text == "2"

    async def run():
        for _ in range(3):
            result = await setup.gateway.ainvoke(
                "mcp.notes.add", {"a": 1, "b": 2, "audit_as": "Add"}, context=CTX
            )
            assert result.content.text == "3"
        assert len(wait_no_server_children(0)) == 2  # the background session and this loop's

    asyncio.run(run())
    assert tool._connection.sessions_started == 2
    assert len(wait_server_children(1)) == 1  # the loop's child is gone; the sync one is pooled
    setup.gateway.close()
    assert wait_no_server_children() == []


def test_sessions_are_pooled_across_calls_and_contexts(setup):
    other = ExecutionContext(tenant="tenant-a", principal="bob")
    for context in (CTX, other, CTX, other):
        assert (
            setup.gateway.invoke("mcp.notes.add", {"a": 1, "b": 2, "audit_as": "Add"}, context=context).status
            is Status.SUCCESS
        )
    first = setup.gateway.tools_for(CTX).get("mcp.notes")._connection
    second = setup.gateway.tools_for(other).get("mcp.notes")._connection
    assert first is second
    assert first.sessions_started == 1
    assert len([c for c in wait_no_server_children(0)]) == 1  # one child for four calls


def test_definitions_show_the_pinned_schema_with_a_required_intent(setup):
    definitions = {d["name"]: d for d in setup.gateway.definitions()}
    add = definitions["mcp__notes__add"]
    assert add["description"] == "Add two integers."
    assert set(add["parameters"]["properties"]) == {"a", "b", "audit_as"}
    assert set(add["parameters"]["required"]) == {"a", "b", "audit_as"}
    echo = definitions["mcp__notes__echo"]
    assert "purpose" in echo["parameters"]["required"]
    assert "mcp__notes__notes_search" in definitions  # notesSearch, as an operation name


def test_invalid_arguments_are_refused_before_anything_is_sent(setup):
    for arguments, code in (
        ({"a": "two", "b": 3, "audit_as": "Add"}, "type"),
        ({"a": 2, "audit_as": "Add"}, "required"),
        ({"a": 2, "b": 3}, "missing"),
        ({"a": 2, "b": 3, "audit_as": ""}, "string_too_short"),
        ({"a": [[[[1]]]] * 2000, "b": 3, "audit_as": "Add"}, "too_many_items"),
    ):
        result = setup.gateway.invoke("mcp.notes.add", arguments, context=CTX)
        assert result.status is Status.INVALID_ARGUMENTS, arguments
        assert result.error_code == code, arguments
    assert setup.executions() == []
    assert wait_no_server_children(0) == []  # validation never even starts the server


def test_the_child_gets_only_the_listed_environment(tmp_path, count_file, make_setup, monkeypatch):
    monkeypatch.setenv("TOOLBOX_MCP_PARENT_SECRET", "do-not-leak")
    servers = {"envs": stdio_server(count_file, env={"ONLY_THIS": "1"}, pass_env=["LISTED_FROM_PARENT"])}
    policy = write_policy(tmp_path / "policy.toml", servers)
    lock(policy, "envs")
    setup = make_setup(
        policy, count_file, env={"LISTED_FROM_PARENT": "yes", "PATH": "/usr/bin", "HOME": "/root"}
    )
    result = setup.gateway.invoke("mcp.envs.env_names", {"audit_as": "Inspect"}, context=CTX)
    names = set(result.content.text.split(","))
    # Python itself may add LC_CTYPE; nothing of the parent's is inherited.
    assert names - {"LC_CTYPE"} == {"COUNT_FILE", "MODE", "ONLY_THIS", "LISTED_FROM_PARENT"}


def test_closing_the_gateway_reaps_the_server(setup):
    assert (
        setup.gateway.invoke("mcp.notes.add", {"a": 1, "b": 2, "audit_as": "Add"}, context=CTX).status
        is Status.SUCCESS
    )
    assert len(wait_no_server_children(0)) == 1
    setup.gateway.close()
    assert wait_no_server_children() == []


def test_a_released_context_leaves_the_session_pooled_for_the_next_request(setup):
    # What `toolbox serve` does after each request: `Gateway.release(context)`. The context's
    # tool lets go of the server's session without ending it, so the next request reuses the
    # same process (and whatever the server keeps between calls) instead of starting another.
    for principal in ("alice", "bob", "carol", "alice"):
        context = ExecutionContext(tenant="tenant-a", principal=principal)
        result = setup.gateway.invoke("mcp.notes.add", {"a": 1, "b": 2, "audit_as": "Add"}, context=context)
        assert result.status is Status.SUCCESS
        setup.gateway.release(context)
        assert len(wait_server_children(1)) == 1
    first = wait_server_children(1)
    tool = setup.gateway.tools_for(CTX).get("mcp.notes")
    assert tool.call("add", {"a": 2, "b": 2}).audit_as("Add").execute().text == "4"
    assert tool._connection.sessions_started == 1
    assert wait_server_children(1) == first  # the same process served every request
    setup.gateway.close()  # the owner is done: the last tool closed ends the session
    assert wait_no_server_children() == []


def test_every_definition_format_carries_the_pinned_operations(setup):
    for format in ("openai", "anthropic", "mcp"):
        names = json.dumps(setup.gateway.definitions(format=format))
        assert "mcp__notes__add" in names, format
        assert "Add two integers." in names, format
