"""A governed call through ``toolbox.mcp`` against the same function served by the SDK's `MCPServer`.

Run from the repository root::

    .venv/bin/python bench/bench_mcp.py                    # the table (about 40 s)
    .venv/bin/python bench/bench_mcp.py --repeat 7 --calls 300

A measurement script, not a test: it asserts nothing about time. One function,
``add(a, b) -> int``, is served three ways:

- [S] by the SDK's own ``MCPServer`` (``@server.tool()``): no governance;
- (info) by the SDK's bare low-level ``Server`` with two hand-written handlers and no
  argument validation: the floor any MCP server stands on;
- governed: ``@tool(risk=MEMORY_ONLY, effect=READ_ONLY)``, a `Gateway` with a STRICT
  audit trail to a `MemorySink` (4 events per call), served by `toolbox.mcp._server`
  (in memory) or `toolbox.mcp.McpHttpApp` (HTTP, an API key checked on every request).

The official client calls each one ``--calls`` times per repeat, in one session.
Sections:

1. In memory, the client's default mode (2026-07-28: direct dispatch, no JSON-RPC framing).
2. In memory, ``mode="legacy"`` (the initialize handshake; JSON-RPC over memory streams).
3. Streamable HTTP on 127.0.0.1, ``mode="legacy"`` (one session, SSE responses): each
   server runs under uvicorn in its own child process (as a deployed server does), so the
   servers never compete for this process's GIL.

The rows of a section are interleaved repeat by repeat so they see the same machine
load; the garbage collector stays on (as in a real server); a row reports the median
time per call over the repeats, and its ratio divides by the [S] row of its section,
measured in the same run. Times are CPU time, so they measure the work and not what
other processes take of a shared machine's cores meanwhile: in memory this process's
(client and server); over HTTP this process's plus the server child's (``/proc``).
Target: the governed row within 1.10x of [S] (informational).
Before timing, each governed call is checked: SUCCESS with 3, and 4 audit events.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import uvicorn
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.auth import ApiKeyFile
from toolbox.mcp import McpHttpApp, server
from toolbox.testing.credentials import write_api_keys

TARGET = 1.10
GOVERNED_ARGS = {"a": 1, "b": 2, "purpose": "Sum"}
SDK_ARGS = {"a": 1, "b": 2}


def add_plain(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(name="add", risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _sdk_server() -> MCPServer:
    sdk = MCPServer("bench", log_level="WARNING")
    sdk.tool(name="add")(add_plain)
    return sdk


def _lowlevel_server() -> Server[Any]:
    """The same function on the SDK's bare low-level Server: the floor of any MCP server."""
    listed = types.Tool(
        name="add",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[listed])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        value = add_plain(int(arguments["a"]), int(arguments["b"]))
        return types.CallToolResult(
            content=[types.TextContent(text=str(value))], structured_content={"result": value}
        )

    return Server("bench-lowlevel", on_list_tools=list_tools, on_call_tool=call_tool)


def _governed() -> tuple[Gateway, MemorySink]:
    sink = MemorySink()
    gateway = Gateway.load(
        providers=[add], discover=False, env={}, governance=Governance(audit=AuditTrail(sink))
    )
    return gateway, sink


async def _time_rows(
    rows: list[tuple[str, Any, dict[str, Any], Callable[[], None]]],
    calls: int,
    repeat: int,
    clocks: dict[str, Callable[[], float]],
) -> dict[str, list[float]]:
    """Per row: the per-call times of each repeat (each row on its own clock), rows interleaved."""
    times: dict[str, list[float]] = {label: [] for label, *_ in rows}
    for _ in range(repeat):
        for label, connected, arguments, reset in rows:
            reset()
            clock = clocks[label]
            start = clock()
            for _ in range(calls):
                await connected.call_tool("add", arguments)
            times[label].append((clock() - start) / calls)
    return times


def labels(rows: list[tuple[str, Any, dict[str, Any], Callable[[], None]]]) -> list[str]:
    """The labels of ``rows``."""
    return [row[0] for row in rows]


def _cpu_of(pid: int) -> Callable[[], float]:
    """This process's CPU time plus that of server process ``pid`` (Linux ``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    stat = Path(f"/proc/{pid}/stat")

    def clock() -> float:
        fields = stat.read_text().rpartition(")")[2].split()
        return time.process_time() + (int(fields[11]) + int(fields[12])) / tick  # utime, stime

    return clock


def _check(result: Any, sink: MemorySink) -> None:
    assert not result.is_error and result.structured_content == {"result": 3}, result
    trace = result.meta["io.toolbox/trace_id"]
    assert [e.type.value for e in sink.read_trace(trace)] == [
        "INTENT_DECLARED",
        "GOVERNANCE_DECISION",
        "INVOCATION_REQUEST",
        "INVOCATION_RESPONSE",
    ]


def _reset(sink: MemorySink) -> Callable[[], None]:
    def reset() -> None:
        # Only a benchmark touches these: keep memory bounded across repeats.
        sink._pending.clear()
        sink._rows.clear()

    return reset


async def _in_memory(mode: str, calls: int, repeat: int) -> dict[str, list[float]]:
    gateway, sink = _governed()
    governed = server(gateway, context=ExecutionContext(tenant="bench", principal="bench"))
    async with (
        Client(_sdk_server(), mode=mode) as sdk,
        Client(_lowlevel_server(), mode=mode) as bare,
        Client(governed, mode=mode) as ours,
    ):
        _check(await ours.call_tool("add", GOVERNED_ARGS), sink)
        assert (await sdk.call_tool("add", SDK_ARGS)).structured_content == {"result": 3}
        rows = [
            ("[S] SDK MCPServer", sdk, SDK_ARGS, lambda: None),
            ("(info) SDK low-level Server, no validation", bare, SDK_ARGS, lambda: None),
            ("governed (audit STRICT to memory)", ours, GOVERNED_ARGS, _reset(sink)),
        ]
        # Client and server share this process: its CPU time is the work of both, whatever
        # the other processes on the machine take of the cores meanwhile.
        return await _time_rows(rows, calls, repeat, dict.fromkeys(labels(rows), time.process_time))


def _serve_child(kind: str, keys: Path) -> None:
    """``--serve KIND``: run one server on a free loopback port in this process; print its URL."""
    for name in ("mcp", "httpx2", "uvicorn"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if kind == "governed":
        gateway, sink = _governed()
        app: Any = McpHttpApp(gateway, ApiKeyFile(keys)).starlette()
        # Bounded memory: this process keeps the events of every call.
        threading.Thread(target=_drain, args=(sink,), daemon=True).start()
    elif kind == "sdk":
        app = _sdk_server().streamable_http_app()
    else:
        app = _lowlevel_server().streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])


def _drain(sink: MemorySink) -> None:
    while True:
        time.sleep(1.0)
        _reset(sink)()


def _start(kind: str, keys: Path) -> tuple[str, subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "--keys", str(keys)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    return child.stdout.readline().strip(), child


async def _http(calls: int, repeat: int, tmp: Path) -> dict[str, list[float]]:
    keys = write_api_keys(tmp / "keys.toml", {"bench": {"tenant": "bench"}})
    servers = {kind: _start(kind, tmp / "keys.toml") for kind in ("sdk", "lowlevel", "governed")}
    headers = {"Authorization": f"Bearer {keys['bench']}"}
    try:
        async with (
            httpx2.AsyncClient(timeout=60) as plain,
            httpx2.AsyncClient(timeout=60) as bare_http,
            httpx2.AsyncClient(timeout=60, headers=headers) as authed,
            Client(streamable_http_client(servers["sdk"][0], http_client=plain), mode="legacy") as sdk,
            Client(
                streamable_http_client(servers["lowlevel"][0], http_client=bare_http), mode="legacy"
            ) as low,
            Client(streamable_http_client(servers["governed"][0], http_client=authed), mode="legacy") as ours,
        ):
            result = await ours.call_tool("add", GOVERNED_ARGS)
            assert not result.is_error and result.structured_content == {"result": 3}, result
            assert (await sdk.call_tool("add", SDK_ARGS)).structured_content == {"result": 3}
            rows = [
                ("[S] SDK MCPServer streamable_http_app", sdk, SDK_ARGS, lambda: None),
                ("(info) SDK low-level Server, no validation", low, SDK_ARGS, lambda: None),
                ("governed McpHttpApp (API key, audit STRICT)", ours, GOVERNED_ARGS, lambda: None),
            ]
            kinds = ("sdk", "lowlevel", "governed")
            clocks = {row[0]: _cpu_of(servers[kind][1].pid) for row, kind in zip(rows, kinds, strict=True)}
            return await _time_rows(rows, calls, repeat, clocks)
    finally:
        for _, child in servers.values():
            child.terminate()
            child.wait(timeout=10)
            if child.stdout is not None:
                child.stdout.close()


def _report(title: str, times: dict[str, list[float]]) -> list[str]:
    labels = list(times)
    base = statistics.median(times[labels[0]])
    floor = statistics.median(times[labels[1]])
    print(f"\n{title}")
    print(f"  {'row':<48} {'median/call':>12} {'ratio':>8}  target")
    missed = []
    for label in labels:
        median = statistics.median(times[label])
        ratio = median / base
        if label == labels[0]:
            print(f"  {label:<48} {median * 1e6:>9.0f} us")
        elif label.startswith("(info)"):
            print(f"  {label:<48} {median * 1e6:>9.0f} us {ratio:>7.2f}x")
        else:
            status = "met" if ratio <= TARGET else "MISSED"
            print(f"  {label:<48} {median * 1e6:>9.0f} us {ratio:>7.2f}x  <= {TARGET:.2f}x S: {status}")
            print(f"  {'':<48} {'':>12} {median / floor:>7.2f}x  of the low-level Server (info)")
            if status == "MISSED":
                missed.append(f"{title}: {label} {ratio:.2f}x")
    return missed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="repeats per row (median kept)")
    parser.add_argument("--calls", type=int, default=100, help="calls per repeat")
    parser.add_argument("--serve", choices=("governed", "sdk", "lowlevel"), help=argparse.SUPPRESS)
    parser.add_argument("--keys", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        _serve_child(args.serve, args.keys)
        return
    for name in ("mcp", "httpx2", "uvicorn"):  # per-request INFO lines would be timed too
        logging.getLogger(name).setLevel(logging.WARNING)
    load = os.getloadavg()
    print(f"bench_mcp: {args.calls} calls x {args.repeat} repeats per row, GC on, load {load[0]:.2f}")
    missed: list[str] = []
    for title, mode in (
        ("1. In memory, default (2026-07-28) mode", "auto"),
        ("2. In memory, legacy", "legacy"),
    ):
        missed += _report(title, anyio.run(_in_memory, mode, args.calls, args.repeat))
    with tempfile.TemporaryDirectory() as tmp:
        missed += _report(
            "3. Streamable HTTP, 127.0.0.1", anyio.run(_http, args.calls, args.repeat, Path(tmp))
        )
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    print("missed targets: " + ("; ".join(missed) if missed else "none"))


if __name__ == "__main__":
    main()
