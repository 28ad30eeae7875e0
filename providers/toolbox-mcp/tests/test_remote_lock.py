"""No rug pulls: operations are pinned; a changed, removed or new tool is refused until locked again."""

from __future__ import annotations

import json

import pytest
from conftest import AUDITOR, lock, stdio_server, write_policy

import toolbox_mcp.plugin
from toolbox import ExecutionContext, Status, ToolPolicy, Tools
from toolbox.cli import main
from toolbox.registry._discovery import discover
from toolbox_mcp import DRIFT, DriftError

CTX = ExecutionContext(tenant="tenant-a", principal="alice")
ADD = {"a": 1, "b": 2, "audit_as": "Add numbers"}


def test_nothing_is_usable_before_the_server_is_locked(tmp_path, count_file):
    policy = write_policy(tmp_path / "policy.toml", {"notes": stdio_server(count_file)})
    found = discover(ToolPolicy.from_file(policy), [toolbox_mcp.plugin], entry_points=False)
    assert [t.descriptor.name for t in found.tools] == []  # not pinned: no tool yet
    assert [lock.tool for lock in found.locks] == ["mcp.notes"]
    # The policy may still name it: it is known (its lock says so), just not usable.
    tools = Tools.load(
        CTX, policy=ToolPolicy.from_file(policy), providers=[toolbox_mcp.plugin], discover=False, env={}
    )
    assert "mcp.notes" not in tools.catalog.names()
    assert list(found.locks[0].drift(timeout=5)) == [
        "nothing pinned in mcp.lock.json: run `toolbox mcp lock notes`"
    ]


def test_the_lock_file_pins_names_and_digests(tmp_path, count_file):
    policy = write_policy(tmp_path / "policy.toml", {"notes": stdio_server(count_file)})
    lines = lock(policy, "notes")
    assert any(line.startswith("mcp.notes.add: pinned (remote 'add', sha256:") for line in lines)
    pinned = json.loads((tmp_path / "mcp.lock.json").read_text())["servers"]["notes"]["operations"]
    assert pinned["notes_search"]["remote"] == "notesSearch"
    for entry in pinned.values():
        assert entry["input_schema_sha256"].startswith("sha256:")
        assert entry["description_sha256"].startswith("sha256:")
    assert count_file.exists() is False  # listing tools executes none


def test_a_changed_schema_and_a_new_tool_are_refused_until_locked_again(tmp_path, count_file, make_setup):
    policy = write_policy(tmp_path / "policy.toml", {"notes": stdio_server(count_file, mode="v1")})
    lock(policy, "notes")
    # The server is updated: add gains a parameter (a rug pull), wipe is new.
    write_policy(tmp_path / "policy.toml", {"notes": stdio_server(count_file, mode="v2")})
    setup = make_setup(policy, count_file)
    result = setup.gateway.invoke("mcp.notes.add", ADD, context=CTX)
    assert result.status is Status.DENIED
    assert result.reason_code == DRIFT
    assert result.rule == "mcp:lock:changed"
    assert "toolbox mcp lock notes" in result.message
    assert result.attempts == 0  # refused before anything was sent
    assert ("INVOCATION_RESPONSE", "DENIED", DRIFT) in setup.events(CTX)
    # The new tool is no operation at all, on either door.
    unknown = setup.gateway.invoke("mcp.notes.wipe", {"audit_as": "Wipe"}, context=CTX)
    assert unknown.status is Status.INVALID_ARGUMENTS
    assert unknown.error_code == "unknown_operation"
    tool = setup.gateway.tools_for(CTX).get("mcp.notes")
    with pytest.raises(DriftError) as refused:
        tool.call("wipe")
    assert refused.value.rule == "mcp:lock:unpinned"
    # Unchanged operations keep working.
    assert (
        setup.gateway.invoke("mcp.notes.echo", {"text": "ok", "audit_as": "Echo"}, context=CTX).content.text
        == "ok"
    )
    assert setup.executions() == ["echo"]
    # After review the operator locks again; a new catalog uses the new pins.
    setup.gateway.close()
    lock(policy, "notes")
    again = make_setup(policy, count_file)
    assert again.gateway.invoke("mcp.notes.add", {**ADD, "c": 3}, context=CTX).content.text == "6"
    assert again.gateway.invoke("mcp.notes.wipe", {"audit_as": "Wipe"}, context=CTX).status is Status.SUCCESS


def test_a_removed_tool_is_refused_with_the_way_out_and_no_attempt(tmp_path, count_file, make_setup):
    """The server stops listing a pinned tool: DENIED/MCP_LOCK_DRIFT naming `toolbox mcp lock`, and
    0 attempts (nothing was sent), in the result and the audit trail alike (docs/audit.md)."""
    policy = write_policy(tmp_path / "policy.toml", {"notes": stdio_server(count_file)})
    lock(policy, "notes")
    write_policy(tmp_path / "policy.toml", {"notes": stdio_server(count_file, env={"DROP": "echo"})})
    setup = make_setup(policy, count_file)
    result = setup.gateway.invoke("mcp.notes.echo", {"text": "hi", "audit_as": "Echo"}, context=CTX)
    assert (result.status, result.reason_code, result.rule) == (Status.DENIED, DRIFT, "mcp:lock:removed")
    assert "toolbox mcp lock notes" in result.message
    assert result.attempts == 0
    (response,) = [
        r for r in setup.trail.read_trace(CTX.run_id, context=AUDITOR) if r.type == "INVOCATION_RESPONSE"
    ]
    assert (response.status, response.reason_code, response.attempt) == ("DENIED", DRIFT, 0)
    assert setup.executions() == []


def test_a_list_changed_notification_never_adds_a_usable_operation(tmp_path, count_file, make_setup):
    policy = write_policy(tmp_path / "policy.toml", {"notes": stdio_server(count_file)})
    lock(policy, "notes")
    setup = make_setup(policy, count_file)
    assert setup.gateway.invoke("mcp.notes.add", ADD, context=CTX).status is Status.SUCCESS
    # The server swaps add for one with another schema and announces tools/list_changed.
    assert (
        setup.gateway.invoke("mcp.notes.mutate", {"audit_as": "Mutate"}, context=CTX).status is Status.SUCCESS
    )
    result = setup.gateway.invoke("mcp.notes.add", ADD, context=CTX)
    assert result.status is Status.DENIED
    assert result.reason_code == DRIFT
    assert setup.executions() == ["add", "mutate"]


def test_a_hand_edited_lock_file_is_refused(tmp_path, count_file):
    policy = write_policy(tmp_path / "policy.toml", {"notes": stdio_server(count_file)})
    lock(policy, "notes")
    path = tmp_path / "mcp.lock.json"
    document = json.loads(path.read_text())
    document["servers"]["notes"]["operations"]["add"]["description"] = "Add (and mail the result away)."
    path.write_text(json.dumps(document))
    found = discover(ToolPolicy.from_file(policy), [toolbox_mcp.plugin], entry_points=False)
    assert found.tools == ()
    assert "digests do not match" in found.broken[0].error


def test_the_cli_locks_and_check_shows_the_drift(tmp_path, count_file, capsys, monkeypatch):
    # The CLI discovers installed providers: toolbox-mcp is installed in this environment.
    policy = write_policy(tmp_path / "policy.toml", {"notes": stdio_server(count_file)})
    assert main(["mcp", "lock", "notes", "--policy", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "Locked mcp.notes" in out
    assert "mcp.notes.add: pinned" in out
    assert main(["check", "--policy", str(policy)]) == 0
    assert "mcp.notes: in sync" in capsys.readouterr().out
    write_policy(tmp_path / "policy.toml", {"notes": stdio_server(count_file, mode="v2")})
    assert main(["check", "--policy", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "mcp.notes: drift" in out
    assert "add: changed since it was pinned" in out
    assert "wipe: new on the server, not pinned" in out
    assert main(["--json", "check", "--policy", str(policy)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["pinned_operations"][0]["state"] == "drift"


def test_the_cli_names_the_configured_servers_for_an_unknown_one(tmp_path, count_file, capsys):
    policy = write_policy(tmp_path / "policy.toml", {"notes": stdio_server(count_file)})
    assert main(["mcp", "lock", "nope", "--policy", str(policy)]) == 2
    assert "no server 'nope' is configured (configured: notes)" in capsys.readouterr().err


def test_drift_names_a_configured_operation_that_is_not_pinned(tmp_path, count_file):
    servers = {"notes": stdio_server(count_file, operations={"serch": {"effect": "READ_ONLY"}})}
    policy = write_policy(tmp_path / "policy.toml", servers)
    lock(policy, "notes")
    found = discover(ToolPolicy.from_file(policy), [toolbox_mcp.plugin], entry_points=False)
    assert list(found.locks[0].drift(timeout=30)) == [
        "serch: configured under operations, but no such operation is pinned"
    ]
