"""Servers that hang, die, flood or never start: ERROR or UNCERTAIN_EFFECT by effect, never a hang."""

from __future__ import annotations

import sys
import threading
import time
from datetime import datetime, timedelta, timezone

from conftest import lock, server_children, stdio_server, wait_no_server_children, write_policy

from tiers import sized
from toolbox import ExecutionContext, Status

CTX = ExecutionContext(tenant="tenant-a", principal="alice")


def _setup(tmp_path, count_file, make_setup, servers=None, **server):
    servers = servers or {"notes": stdio_server(count_file, **server)}
    policy = write_policy(tmp_path / "policy.toml", servers)
    for name in servers:
        lock(policy, name)
    return make_setup(policy, count_file)


def test_a_hanging_write_times_out_as_an_uncertain_effect(tmp_path, count_file, make_setup):
    setup = _setup(tmp_path, count_file, make_setup, timeout=1.0)
    # The server sleeps 30 s; the answer below comes from the 1 s timeout, not from the server.
    result = setup.gateway.invoke("mcp.notes.sleep", {"seconds": 30, "audit_as": "Wait"}, context=CTX)
    assert result.status is Status.UNCERTAIN_EFFECT
    assert result.error_code == "TIMEOUT"
    assert ("INVOCATION_RESPONSE", "UNCERTAIN_EFFECT", "TIMEOUT") in setup.events(CTX)
    # The session survives a slow call: the next one is answered.
    assert (
        setup.gateway.invoke("mcp.notes.echo", {"text": "x", "audit_as": "Echo"}, context=CTX).status
        is Status.SUCCESS
    )


def test_a_hanging_read_is_an_error(tmp_path, count_file, make_setup):
    setup = _setup(
        tmp_path, count_file, make_setup, timeout=1.0, operations={"sleep": {"effect": "READ_ONLY"}}
    )
    result = setup.gateway.invoke("mcp.notes.sleep", {"seconds": 30, "purpose": "Wait"}, context=CTX)
    assert result.status is Status.ERROR
    assert result.error_code == "TIMEOUT"


def test_the_context_deadline_cuts_the_call_short(tmp_path, count_file, make_setup):
    setup = _setup(tmp_path, count_file, make_setup, timeout=60.0)
    assert (
        setup.gateway.invoke("mcp.notes.echo", {"text": "warm", "audit_as": "Warm up"}, context=CTX).status
        is Status.SUCCESS
    )
    soon = ExecutionContext(
        tenant="tenant-a", principal="alice", deadline=datetime.now(timezone.utc) + timedelta(seconds=1)
    )
    result = setup.gateway.invoke("mcp.notes.sleep", {"seconds": 30, "audit_as": "Wait"}, context=soon)
    assert result.status is Status.UNCERTAIN_EFFECT
    assert result.error_code == "TIMEOUT"


def test_a_server_that_exits_mid_call_is_reaped_and_restarted(tmp_path, count_file, make_setup):
    setup = _setup(tmp_path, count_file, make_setup)
    result = setup.gateway.invoke("mcp.notes.crash", {"audit_as": "Crash it"}, context=CTX)
    assert result.status is Status.UNCERTAIN_EFFECT
    assert result.error_code == "CONNECTION_FAILED"
    assert wait_no_server_children() == []  # the dead child is reaped, not left a zombie
    again = setup.gateway.invoke("mcp.notes.add", {"a": 1, "b": 2, "audit_as": "Add"}, context=CTX)
    assert again.status is Status.SUCCESS
    tool = setup.gateway.tools_for(CTX).get("mcp.notes")
    assert tool._connection.sessions_started == 2
    assert setup.executions() == ["crash", "add"]
    setup.gateway.close()
    assert wait_no_server_children() == []


def test_a_read_that_crashes_the_server_is_an_error(tmp_path, count_file, make_setup):
    setup = _setup(tmp_path, count_file, make_setup, operations={"crash": {"effect": "READ_ONLY"}})
    result = setup.gateway.invoke("mcp.notes.crash", {"purpose": "Crash it"}, context=CTX)
    assert result.status is Status.ERROR
    assert result.error_code == "CONNECTION_FAILED"


def test_a_result_of_megabytes_is_refused(tmp_path, count_file, make_setup):
    """Over max_result_bytes (1 MiB by default): 10 MB in the full tier, 2 MB in the default tier
    (the server builds it, the SDK reads its line whole and decodes it: CPU per megabyte)."""
    setup = _setup(tmp_path, count_file, make_setup)
    arguments = {"megabytes": sized(2, 10), "audit_as": "Fetch a lot"}
    result = setup.gateway.invoke("mcp.notes.big", arguments, context=CTX)
    assert result.status is Status.ERROR
    assert result.error_code == "ResponseTooLargeError"
    assert "max_result_bytes" in result.message
    assert result.content is None
    small = setup.gateway.invoke("mcp.notes.big", {"megabytes": 0, "audit_as": "Fetch nothing"}, context=CTX)
    assert small.status is Status.SUCCESS


def test_a_tool_error_is_an_error_with_the_servers_text(tmp_path, count_file, make_setup):
    setup = _setup(tmp_path, count_file, make_setup)
    result = setup.gateway.invoke("mcp.notes.fail", {"audit_as": "Fail"}, context=CTX)
    assert result.status is Status.ERROR
    assert result.error_code == "McpToolError"
    assert "reported an error" in result.message
    assert "Traceback" not in result.message


def test_a_server_that_cannot_start_is_an_error_not_an_uncertain_effect(tmp_path, count_file, make_setup):
    broken = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(4)"]}
    setup = _setup(tmp_path, count_file, make_setup, servers={"notes": stdio_server(count_file)})
    # Point a second catalog at the same lock with a server that exits at once.
    policy = write_policy(tmp_path / "policy.toml", {"notes": broken})
    bad = make_setup(policy, count_file)
    result = bad.gateway.invoke("mcp.notes.add", {"a": 1, "b": 2, "audit_as": "Add"}, context=CTX)
    assert result.status is Status.ERROR  # nothing reached the server: not uncertain
    assert result.error_code == "CONNECTION_FAILED"
    assert setup.executions() == []


def test_a_missing_command_is_reported_without_a_call(tmp_path, count_file, make_setup):
    setup = _setup(tmp_path, count_file, make_setup)
    policy = write_policy(tmp_path / "policy.toml", {"notes": {"command": "no-such-mcp-server-xyz"}})
    bad = make_setup(policy, count_file)
    result = bad.gateway.invoke("mcp.notes.add", {"a": 1, "b": 2, "audit_as": "Add"}, context=CTX)
    assert result.status is Status.ERROR
    assert result.error_code == "CONNECTION_FAILED"
    assert "'no-such-mcp-server-xyz' of the MCP server was not found" in result.message
    assert setup.executions() == []


def test_one_slow_server_does_not_hold_up_another(tmp_path, count_file, make_setup):
    servers = {"slow": stdio_server(count_file, timeout=20.0), "fast": stdio_server(count_file)}
    setup = _setup(tmp_path, count_file, make_setup, servers=servers)
    assert (
        setup.gateway.invoke("mcp.fast.add", {"a": 0, "b": 0, "audit_as": "Warm"}, context=CTX).status
        is Status.SUCCESS
    )
    assert (
        setup.gateway.invoke("mcp.slow.add", {"a": 0, "b": 0, "audit_as": "Warm"}, context=CTX).status
        is Status.SUCCESS
    )
    slow_done = threading.Event()
    release = tmp_path / "release"
    slow_results = []

    def slow_call():
        # Busy until the test releases it (bounded by 15 s), not for a guessed number of seconds.
        arguments = {"path": str(release), "seconds": 15, "audit_as": "Wait"}
        slow_results.append(setup.gateway.invoke("mcp.slow.hold", arguments, context=CTX))
        slow_done.set()

    thread = threading.Thread(target=slow_call)
    thread.start()
    while "hold" not in setup.executions():  # bounded by the slow call itself
        time.sleep(0.02)
    for n in range(3):
        fast = setup.gateway.invoke("mcp.fast.add", {"a": n, "b": 1, "audit_as": "Add"}, context=CTX)
        assert fast.status is Status.SUCCESS
    assert not slow_done.is_set()  # the fast server answered while the slow one was still busy
    release.touch()
    thread.join(30)
    assert slow_done.is_set()
    assert [(r.status, r.content.text) for r in slow_results] == [(Status.SUCCESS, "released")]
    assert len(server_children()) == 2
