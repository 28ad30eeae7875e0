"""MCP over stdio with a durable audit: serial calls against the SDK's server plus two raw durable commits.

Run from the repository root::

    .venv/bin/python bench/bench_mcp_durable.py                # the table (about a minute)
    .venv/bin/python bench/bench_mcp_durable.py --repeat 9 --calls 100

A measurement script, not a test: it asserts nothing about time. The official
``mcp`` client calls ``add(a, b)`` over stdio, one call after another, on:

- [S] the SDK's own ``MCPServer`` (``@server.tool()``) in a child process: no governance;
- [C] two raw durable commits in this process: ``BEGIN IMMEDIATE``, one insert,
  ``COMMIT`` on a SQLite file in WAL mode with ``synchronous=FULL``, twice (a
  STRICT call stores its opening before the tool runs and its response after:
  two flushes that cannot be shared by serial calls);
- (info) toolbox with no audit: ``toolbox.mcp.server`` over a `Gateway` of the
  ``MEMORY_ONLY`` ``@tool`` ``add``, served by `toolbox.mcp.serve_stdio` in a child;
- toolbox with a STRICT `SqliteSink` (``synchronous=FULL``), the same server.

The rows take turns repeat by repeat; the garbage collector stays on; a row
reports the median over the repeats of its wall time per call (a durable
commit waits for the disk: CPU time would hide it). The governed row's ratio
divides by [S] + [C] of the same repeat (the issue's target: at most 1.3x).

Then, over streamable HTTP on 127.0.0.1 (each server under uvicorn in a child
process), ``--sessions`` sessions (default 16) call at once for ``--seconds``
per repeat, driven by ``wrk`` (a C load generator: ``apt-get install wrk``),
one thread and one connection per session, one call at a time each: the SDK's
``MCPServer`` with no audit [SH] against `toolbox.mcp.McpHttpApp` (API key on
every request) with the STRICT SQLite trail, whose concurrent calls share its
group commit; throughput ratio (target: at least 0.5x [SH]). The sessions are
initialized first (``initialize``, ``notifications/initialized``, one checked
call); wrk's script then sends ``tools/call`` with a fresh JSON-RPC id per call
and counts every answer that is not the result 3.
The spread of the [S] repeats says how noisy the machine was. Before timing,
a governed call must return 3; at the end, the audit file must hold four
events per governed call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HISTORY = Path(__file__).parent / "history" / "bench_mcp_durable.jsonl"
GOVERNED_ARGS = {"a": 1, "b": 2, "purpose": "Sum"}
SDK_ARGS = {"a": 1, "b": 2}
TARGET = 1.3


def serve(kind: str, directory: Path) -> None:
    """``--serve KIND``: one MCP server on this process's stdin and stdout."""
    if kind == "sdk":
        from mcp.server.mcpserver import MCPServer

        sdk = MCPServer("bench", log_level="WARNING")

        @sdk.tool(name="add")
        def add_plain(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        sdk.run("stdio")
        return
    from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
    from toolbox.audit import AuditTrail, SqliteSink
    from toolbox.mcp import serve_stdio, server

    @tool(name="add", risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    trail = None
    if kind == "sqlite":
        trail = AuditTrail(SqliteSink(directory / "audit.db"), fallback_path=directory / "fallback.jsonl")
    gateway = Gateway.load(providers=[add], discover=False, env={}, governance=Governance(audit=trail))
    mcp_server = server(gateway, context=ExecutionContext(tenant="bench", principal="bench"))
    asyncio.run(serve_stdio(mcp_server))


def serve_http(kind: str, directory: Path) -> None:
    """``--serve http-sdk|http-sqlite``: a streamable HTTP server on a free loopback port; prints its URL."""
    import logging
    import socket

    import uvicorn

    for name in ("mcp", "uvicorn"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if kind == "http-sdk":
        from mcp.server.mcpserver import MCPServer

        sdk = MCPServer("bench", log_level="WARNING")

        @sdk.tool(name="add")
        def add_plain(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        app: Any = sdk.streamable_http_app()
    else:
        from toolbox import Effect, Gateway, Governance, RiskClass, tool
        from toolbox.audit import AuditTrail, SqliteSink
        from toolbox.auth import ApiKeyFile
        from toolbox.mcp import McpHttpApp

        @tool(name="add", risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        sink = SqliteSink(directory / "http-audit.db")
        trail = AuditTrail(sink, fallback_path=directory / "fallback.jsonl")
        gateway = Gateway.load(providers=[add], discover=False, env={}, governance=Governance(audit=trail))
        app = McpHttpApp(gateway, ApiKeyFile(directory / "keys.toml")).starlette()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])


# wrk's Lua script for the HTTP rows: thread N is session N's one client, one call at a time,
# a fresh JSON-RPC id per call; every answer is checked (``bad`` counts the others).
WRK_SCRIPT = """
local sessions = {%(sessions)s}
local version = "%(version)s"
local authorization = "%(authorization)s"
local arguments = '%(arguments)s'
local threads, made = {}, 0
function setup(thread)
  made = made + 1
  thread:set("index", made)
  table.insert(threads, thread)
end
function init(args)
  calls, bad = 0, 0
  headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["mcp-session-id"] = sessions[(index - 1) %% #sessions + 1],
    ["mcp-protocol-version"] = version,
  }
  if authorization ~= "" then headers["Authorization"] = authorization end
end
function request()
  calls = calls + 1
  local body = string.format(
    '{"jsonrpc":"2.0","id":%%d,"method":"tools/call","params":{"name":"add","arguments":%%s}}',
    calls, arguments)
  return wrk.format("POST", nil, headers, body)
end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"structuredContent":{"result":3}', 1, true) then
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local total = 0
  for _, thread in ipairs(threads) do total = total + thread:get("bad") end
  io.write(string.format("BAD %%d\\n", total))
end
"""


def open_sessions(
    url: str, headers: dict[str, str], arguments: dict[str, Any], count: int
) -> tuple[list[str], str]:
    """``count`` initialized MCP sessions on ``url`` (raw JSON-RPC over HTTP), each checked by one call."""
    import httpx

    accept = {"Accept": "application/json, text/event-stream", **headers}

    def answer(response: httpx.Response) -> dict[str, Any]:
        response.raise_for_status()
        if response.headers["content-type"].startswith("application/json"):
            return dict(response.json())
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(data[-1]))

    sessions, version = [], ""
    with httpx.Client(timeout=60, headers=accept) as http:
        for _ in range(count):
            hello = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"},
                },
            }
            response = http.post(url, json=hello)
            version = answer(response)["result"]["protocolVersion"]
            session = {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": version}
            ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            http.post(url, json=ready, headers=session).raise_for_status()
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            call["params"] = {"name": "add", "arguments": arguments}
            result = answer(http.post(url, json=call, headers=session))["result"]
            assert not result.get("isError") and result["structuredContent"] == {"result": 3}, result
            sessions.append(session["mcp-session-id"])
    return sessions, version


def wrk_rate(url: str, script: Path, sessions: int, seconds: float) -> tuple[float, int, int]:
    """Calls per second, answers that were not a correct result, and calls made, from one wrk run."""
    import re
    import subprocess

    command = ["wrk", f"-t{sessions}", f"-c{sessions}", f"-d{seconds:g}s", "-s", str(script), url]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    bad = re.search(r"BAD (\d+)", out)
    total = re.search(r"(\d+) requests in", out)
    if not (rate and bad and total):
        raise SystemExit(f"could not read wrk's output:\n{out}")
    return float(rate.group(1)), int(bad.group(1)), int(total.group(1))


def measure_http(args: argparse.Namespace, directory: Path) -> tuple[dict[str, list[float]], int, int]:
    """Calls per second of ``--sessions`` concurrent sessions (wrk), per repeat, on each server.

    Also returns the wrong answers seen (must be 0) and the governed calls made (for the audit count).
    """
    import shutil
    import subprocess

    from toolbox.testing.credentials import write_api_keys

    if shutil.which("wrk") is None:
        raise SystemExit("the HTTP rows need wrk: apt-get install wrk (Debian/Ubuntu) or brew install wrk")

    key = write_api_keys(directory / "keys.toml", {"bench": {"tenant": "bench"}})["bench"]
    children = {
        kind: subprocess.Popen(
            [sys.executable, __file__, "--serve", kind, "--dir", str(directory)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for kind in ("http-sdk", "http-sqlite")
    }
    urls = {kind: child.stdout.readline().strip() for kind, child in children.items()}  # type: ignore[union-attr]
    rates: dict[str, list[float]] = {"SH": [], "QH": []}
    bad, governed = 0, 0
    try:
        auth = {"Authorization": f"Bearer {key}"}
        scripts = {}
        for label, kind, headers, arguments in (
            ("SH", "http-sdk", {}, SDK_ARGS),
            ("QH", "http-sqlite", auth, GOVERNED_ARGS),
        ):
            sessions, version = open_sessions(urls[kind], headers, arguments, args.sessions)
            governed += args.sessions if label == "QH" else 0
            script = directory / f"{label}.lua"
            script.write_text(
                WRK_SCRIPT
                % {
                    "sessions": ", ".join(f'"{s}"' for s in sessions),
                    "version": version,
                    "authorization": headers.get("Authorization", ""),
                    "arguments": json.dumps(arguments, separators=(",", ":")),
                }
            )
            scripts[label] = (urls[kind], script)
        for label, (url, script) in scripts.items():  # warm-up
            _, wrong, calls = wrk_rate(url, script, args.sessions, 1.0)
            bad += wrong
            governed += calls if label == "QH" else 0
        for _ in range(args.http_repeat):
            for label, (url, script) in scripts.items():
                rate, wrong, calls = wrk_rate(url, script, args.sessions, args.seconds)
                rates[label].append(rate)
                bad += wrong
                governed += calls if label == "QH" else 0
    finally:
        for child in children.values():
            child.terminate()
            child.wait(timeout=30)
            if child.stdout is not None:
                child.stdout.close()
    return rates, bad, governed


def raw_commits(path: Path) -> Any:
    """[C]: two durable SQLite commits of one small row each (WAL, synchronous=FULL)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, body TEXT)")
    body = "x" * 400  # about an audit event's row

    def two() -> None:
        for _ in range(2):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO events (body) VALUES (?)", (body,))
            conn.execute("COMMIT")

    return two


async def measure(args: argparse.Namespace, directory: Path) -> dict[str, list[float]]:
    from mcp import Client, StdioServerParameters

    def child(kind: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable, args=[__file__, "--serve", kind, "--dir", str(directory)]
        )

    commits = raw_commits(directory / "raw.db")
    times: dict[str, list[float]] = {"S": [], "C": [], "none": [], "sqlite": []}
    async with (
        Client(child("sdk")) as sdk,
        Client(child("none")) as unaudited,
        Client(child("sqlite")) as strict,
    ):
        for connected, arguments in ((sdk, SDK_ARGS), (unaudited, GOVERNED_ARGS), (strict, GOVERNED_ARGS)):
            result = await connected.call_tool("add", arguments)
            assert not result.is_error and result.structured_content == {"result": 3}, result
            for _ in range(20):  # warm-up
                await connected.call_tool("add", arguments)
        for _ in range(20):
            commits()
        rows: list[tuple[str, Any, dict[str, Any] | None]] = [
            ("S", sdk, SDK_ARGS),
            ("C", None, None),
            ("none", unaudited, GOVERNED_ARGS),
            ("sqlite", strict, GOVERNED_ARGS),
        ]
        clock = time.perf_counter
        for _ in range(args.repeat):
            for label, connected, arguments in rows:
                start = clock()
                for _ in range(args.calls):
                    if connected is None:
                        commits()
                    else:
                        await connected.call_tool("add", arguments)
                times[label].append((clock() - start) / args.calls)
    return times


def stored_events(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return sum(
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("audit_events", "audit_pending")
        )
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=7, help="repeats (default 7)")
    parser.add_argument("--calls", type=int, default=60, help="calls per row per repeat (default 60)")
    parser.add_argument("--sessions", type=int, default=16, help="concurrent HTTP sessions (default 16)")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds per HTTP repeat (default 4)")
    parser.add_argument("--http-repeat", type=int, default=3, help="HTTP repeats (default 3)")
    parser.add_argument("--no-history", action="store_true", help="do not append to bench/history")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        (serve_http if args.serve.startswith("http-") else serve)(args.serve, args.dir)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        times = asyncio.run(measure(args, directory))
        governed_calls = 1 + 20 + args.repeat * args.calls
        stored = stored_events(directory / "audit.db")
        rates, wrong, http_calls = measure_http(args, directory)
        http_stored = stored_events(directory / "http-audit.db")
    median = {label: statistics.median(values) for label, values in times.items()}
    ratios = [q / (s + c) for q, s, c in zip(times["sqlite"], times["S"], times["C"], strict=True)]
    ratio = statistics.median(ratios)
    none_ratio = statistics.median(n / s for n, s in zip(times["none"], times["S"], strict=True))
    spread = max(times["S"]) / min(times["S"])
    print(f"bench_mcp_durable: stdio, serial calls, {args.repeat} repeats x {args.calls} calls, GC on, wall")
    print(f"  [S]  SDK MCPServer                           {median['S'] * 1e3:8.3f} ms")
    print(f"  [C]  two raw durable SQLite commits          {median['C'] * 1e3:8.3f} ms")
    unaudited = median["none"] * 1e3
    print(f"       toolbox, no audit                       {unaudited:8.3f} ms   {none_ratio:5.2f}x S")
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(
        f"       toolbox, STRICT SQLite (FULL)           {median['sqlite'] * 1e3:8.3f} ms   "
        f"{ratio:5.2f}x (S + C)   target <= {TARGET}x: {verdict}"
    )
    low, high = min(times["S"]) * 1e3, max(times["S"]) * 1e3
    print(f"  noise: [S] repeats ranged {low:.3f}-{high:.3f} ms ({spread:.2f}x max/min)")
    expected = governed_calls * 4
    verdict = "all there" if stored == expected else "MISMATCH"
    print(f"  audit: {stored} events stored for {governed_calls} calls ({verdict})")
    http_ratio = statistics.median(q / s for q, s in zip(rates["QH"], rates["SH"], strict=True))
    print(
        f"streamable HTTP, {args.sessions} concurrent sessions (wrk -t{args.sessions} -c{args.sessions}), "
        f"{args.http_repeat} x {args.seconds:g} s"
    )
    print(f"  [SH] SDK MCPServer, no audit                 {statistics.median(rates['SH']):8.0f} calls/s")
    verdict = "met" if http_ratio >= 0.5 else "MISSED"
    print(
        f"       McpHttpApp, STRICT SQLite (FULL)        {statistics.median(rates['QH']):8.0f} calls/s   "
        f"{http_ratio:5.2f}x SH   target >= 0.5x: {verdict}"
    )
    print(f"  answers that were not the result 3: {wrong}")
    verdict = "all there" if http_stored >= 4 * http_calls else "MISSING"
    print(f"  audit: {http_stored} events stored for at least {http_calls} governed calls ({verdict})")
    if not args.no_history:
        entry = {
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "medians_ms": {k: round(v * 1e3, 3) for k, v in median.items()},
            "sqlite_over_s_plus_c": round(ratio, 3),
            "none_over_s": round(none_ratio, 3),
            "noise_s_max_over_min": round(spread, 2),
            "http_calls_per_s": {k: round(statistics.median(v)) for k, v in rates.items()},
            "http_sqlite_over_sdk": round(http_ratio, 3),
            "http_sessions": args.sessions,
        }
        with HISTORY.open("a", encoding="utf-8") as history:
            history.write(json.dumps(entry) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
