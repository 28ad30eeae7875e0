"""End to end: a toolbox-mcp tool pointing at an MCP server running in another process over HTTP.

The issue asks for this against ``toolbox mcp serve`` of another process; until that command
lands (another branch), the other process runs the SDK's own `MCPServer` over streamable HTTP.
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

from toolbox import ExecutionContext, Status

CTX = ExecutionContext(tenant="tenant-a", principal="alice")
_RUN = """
import sys, uvicorn
sys.path.insert(0, {folder!r})
from mcp_test_server import build_server
uvicorn.run(build_server("v1").streamable_http_app(), host="127.0.0.1", port={port}, log_level="warning")
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
