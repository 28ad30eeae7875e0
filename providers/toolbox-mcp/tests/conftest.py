"""Fixtures: real MCP servers (the SDK's `MCPServer`), a policy file configuring them, a lock.

The stdio server is `mcp_test_server.py` run by this interpreter (forked by a zygote,
tests/zygote.py, that imported the SDK once); each tool
execution appends a line to ``COUNT_FILE``, so tests count what ran upstream.
The HTTP server is the same server's streamable-HTTP app under uvicorn on
127.0.0.1 (a free port), counting in memory and recording request headers.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp_test_server import build_server

import toolbox_mcp.plugin
import zygote
from toolbox import ExecutionContext, Gateway, Governance, ToolPolicy
from toolbox.audit import AuditTrail, MemorySink
from toolbox.governance import RetryPolicy
from toolbox.registry._discovery import discover

SERVER_SCRIPT = Path(__file__).parent / "mcp_test_server.py"
AUDITOR = ExecutionContext(tenant="ops", principal="auditor", roles=frozenset({"auditor"}))


def toml_value(value: object) -> str:
    """A TOML literal for ``value`` (strings, numbers, booleans, lists and inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def stdio_server(count_file: Path, *, mode: str = "v1", **extra: Any) -> dict[str, Any]:
    """The ``[tools.mcp.servers.X]`` table of the stdio test server."""
    env = {"MODE": mode, "COUNT_FILE": str(count_file), **extra.pop("env", {})}
    # A child Python importing the MCP SDK can take more than the default 10 s on a loaded
    # 2-core machine; the bound only decides how long a broken start takes to be reported.
    extra.setdefault("connect_timeout", 60)
    # ``python -I -S zygote_launcher.py SOCKET mcp_test_server.py``: a real child of toolbox-mcp,
    # forked from a zygote that imported the SDK once (tests/zygote.py says what stays real).
    command, *args = zygote.shared(*zygote.MCP_SERVER_PRELOAD).command(SERVER_SCRIPT)
    return {"command": command, "args": args, "env": env, **extra}


def write_policy(
    path: Path,
    servers: dict[str, dict[str, Any]],
    *,
    allow: list[str] | None = None,
    extra: str = "",
) -> Path:
    """Write a policy file allowing ``allow`` (default: every server) and configuring ``servers``."""
    names = [f"mcp.{name}" for name in servers] if allow is None else allow
    lines = ["version = 1", "[allow]", f"tools = {toml_value(names)}", extra]
    for name, table in servers.items():
        nested = {k: v for k, v in table.items() if isinstance(v, dict) and k in ("operations", "egress")}
        lists = {k: v for k, v in table.items() if k == "credentials"}
        plain = {k: v for k, v in table.items() if k not in nested and k not in lists}
        lines.append(f"[tools.mcp.servers.{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in plain.items()]
        for key, value in nested.items():
            if key == "operations":
                for op, settings in value.items():
                    lines.append(f"[tools.mcp.servers.{name}.operations.{op}]")
                    lines += [f"{k} = {toml_value(v)}" for k, v in settings.items()]
            else:
                lines.append(f"[tools.mcp.servers.{name}.{key}]")
                lines += [f"{k} = {toml_value(v)}" for k, v in value.items()]
        for credential in lists.get("credentials", []):
            lines.append(f"[[tools.mcp.servers.{name}.credentials]]")
            lines += [f"{k} = {toml_value(v)}" for k, v in credential.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def lock(policy_path: Path, name: str, timeout: float = 30.0) -> list[str]:
    """``toolbox mcp lock NAME`` through the provider's `OperationLock`."""
    found = discover(ToolPolicy.from_file(policy_path), [toolbox_mcp.plugin], entry_points=False)
    (server_lock,) = [lock for lock in found.locks if lock.name == name]
    return list(server_lock.lock(timeout=timeout))


def executions(count_file: Path) -> list[str]:
    """The upstream tool executions the stdio server recorded."""
    return count_file.read_text(encoding="utf-8").split() if count_file.exists() else []


def children() -> list[tuple[int, str, str]]:
    """This process's child processes: (pid, state, command line); zombies have state ``Z``."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        state, ppid = stat.rpartition(")")[2].split()[:2]
        if int(ppid) == me:
            found.append((int(entry.name), state, cmdline))
    return found


def server_children() -> list[tuple[int, str, str]]:
    """Children running the test server (or still shown as zombies)."""
    return [c for c in children() if "mcp_test_server" in c[2] or c[1] == "Z"]


def wait_server_children(count: int, limit: float = 15.0) -> list[tuple[int, str, str]]:
    """Poll (bounded) until exactly ``count`` server children are left; returns what is left."""
    end = time.monotonic() + limit
    left = server_children()
    while len(left) != count and time.monotonic() < end:
        time.sleep(0.05)
        left = server_children()
    return left


def wait_no_server_children(limit: float = 15.0) -> list[tuple[int, str, str]]:
    """Poll (bounded) until no server child is left; returns what is left."""
    return wait_server_children(0, limit)


@dataclass
class Setup:
    """A gateway over the configured servers, its audit trail and where the server counts."""

    gateway: Gateway
    trail: AuditTrail
    policy_path: Path
    count_file: Path

    def events(self, context: ExecutionContext) -> list[tuple[str, str | None, str | None]]:
        """(type, status or decision, reason code) of each audit event of ``context``'s run."""
        return [
            (str(r.type.value if hasattr(r.type, "value") else r.type), r.decision or r.status, r.reason_code)
            for r in self.trail.read_trace(context.run_id, context=AUDITOR)
        ]

    def executions(self) -> list[str]:
        return executions(self.count_file)


@dataclass
class Built:
    made: list[Gateway] = field(default_factory=list)


@pytest.fixture
def count_file(tmp_path: Path) -> Path:
    return tmp_path / "executions.txt"


@pytest.fixture
def make_setup(tmp_path: Path) -> Iterator[Callable[..., Setup]]:
    """Build a `Setup` from a policy file (written by the test); every gateway is closed after."""
    built = Built()

    def factory(
        policy_path: Path, count_file: Path, *, governance: dict[str, Any] | None = None, env: Any = None
    ) -> Setup:
        trail = AuditTrail(MemorySink(), fallback_path=tmp_path / "fallback.jsonl")
        options = {"retry": RetryPolicy(max_attempts=1), **(governance or {})}
        gateway = Gateway.load(
            policy=ToolPolicy.from_file(policy_path),
            providers=[toolbox_mcp.plugin],
            discover=False,
            env={} if env is None else env,
            governance=Governance(audit=trail, **options),
        )
        built.made.append(gateway)
        return Setup(gateway, trail, policy_path, count_file)

    yield factory
    for gateway in built.made:
        gateway.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class HttpServer:
    """A streamable-HTTP MCP server on 127.0.0.1: its URL, executions and request headers seen."""

    url: str
    executions: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture(scope="session")
def shared_http_server() -> Iterator[HttpServer]:
    """The test server's streamable-HTTP app under uvicorn on 127.0.0.1, one for the session.

    Its tools keep no state between calls, so the tests share it: starting uvicorn per test
    cost more than the tests themselves.
    """
    port = free_port()
    record = HttpServer(url=f"http://127.0.0.1:{port}/mcp")
    app = build_server("v1", count=record.executions.append).streamable_http_app()

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            record.headers.append({k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]})
        await app(scope, receive, send)

    config = uvicorn.Config(recording, host="127.0.0.1", port=port, log_level="warning", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 15
    while not server.started and time.monotonic() < end:
        time.sleep(0.02)
    assert server.started, "the HTTP MCP server did not start"
    yield record
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def http_server(shared_http_server: HttpServer) -> HttpServer:
    """The session's HTTP MCP server, with what it saw (executions, headers) cleared for this test."""
    shared_http_server.executions.clear()
    shared_http_server.headers.clear()
    return shared_http_server
