"""End to end: a toolbox-mcp tool pointing at an MCP server running in another process over HTTP.

Two other processes: the SDK's own `MCPServer` over streamable HTTP, and ``toolbox mcp serve``
(issue 11 part 1) over stdio, so a governed tool of one toolbox is governed again by another.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SERVER_SCRIPT, executions, free_port, lock, write_policy

import zygote
from toolbox import ExecutionContext, Status

CTX = ExecutionContext(tenant="tenant-a", principal="alice")
_RUN = """
import sys, uvicorn
sys.path.insert(0, {folder!r})
from mcp_test_server import build_server
app = build_server("v1").streamable_http_app()
uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning", ws="none")
"""


@pytest.fixture
def remote_process(tmp_path):
    port = free_port()
    count_file = tmp_path / "remote-executions.txt"
    code = _RUN.format(folder=str(SERVER_SCRIPT.parent), port=port)
    env = {"PATH": os.environ.get("PATH", ""), "COUNT_FILE": str(count_file)}
    process = subprocess.Popen([sys.executable, "-c", code], env=env)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert process.poll() is None, "the MCP server process exited"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp", count_file
    process.terminate()
    process.wait(10)


def test_a_tool_of_another_process_is_governed(tmp_path, remote_process, make_setup):
    url, count_file = remote_process
    servers = {"other": {"url": url, "egress": {"allow_networks": ["127.0.0.0/8"]}}}
    policy = write_policy(tmp_path / "policy.toml", servers)
    lock(policy, "other")
    setup = make_setup(policy, count_file)
    result = setup.gateway.invoke("mcp.other.add", {"a": 20, "b": 22, "audit_as": "Add"}, context=CTX)
    assert result.status is Status.SUCCESS
    assert result.content.text == "42"
    invalid = setup.gateway.invoke("mcp.other.add", {"a": "x", "b": 1, "audit_as": "Add"}, context=CTX)
    assert invalid.status is Status.INVALID_ARGUMENTS
    assert executions(Path(count_file)) == ["add"]


def test_a_tool_served_by_toolbox_mcp_serve_is_governed_on_both_sides(tmp_path, make_setup):
    """toolbox-mcp pointing at ``toolbox mcp serve`` of another process (the calculator, over stdio).

    The served side requires its own intent argument (``purpose``): toolbox-mcp offers it as
    ``upstream_purpose`` and sends it under its name, next to its own intent.
    """
    served = tmp_path / "served.toml"
    served.write_text("version = 1\n", encoding="utf-8")
    args = ["mcp", "serve", "--policy", str(served), "--tenant", "served", "--principal", "ops"]
    # The console script in a child forked by a zygote that imported toolbox once (tests/zygote.py).
    command, *arguments = zygote.toolbox_command(*args)
    servers = {"toolbox": {"command": command, "args": arguments, "operations": {}}}
    policy = write_policy(tmp_path / "policy.toml", servers)
    lines = lock(policy, "toolbox")
    assert any(line.startswith("mcp.toolbox.calculator_evaluate: pinned") for line in lines), lines
    setup = make_setup(policy, tmp_path / "unused")
    arguments = {"expression": "6*7", "upstream_purpose": "Compute the answer", "audit_as": "Ask upstream"}
    result = setup.gateway.invoke("mcp.toolbox.calculator_evaluate", arguments, context=CTX)
    assert result.status is Status.SUCCESS, result
    assert "42" in result.content.text
    # The served side refuses what its own governance refuses: a missing upstream intent.
    invalid = setup.gateway.invoke(
        "mcp.toolbox.calculator_evaluate", {"expression": "1", "audit_as": "Ask"}, context=CTX
    )
    assert invalid.status is Status.INVALID_ARGUMENTS
    assert invalid.field_path == "upstream_purpose"
