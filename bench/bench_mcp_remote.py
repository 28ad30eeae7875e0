"""A governed call through toolbox-mcp to a stdio MCP server, against a direct `mcp` ClientSession call.

Run from the repository root::

    .venv/bin/python bench/bench_mcp_remote.py                 # the table (about 30 s)
    .venv/bin/python bench/bench_mcp_remote.py --repeat 21 --calls 200

This is a measurement script, not a test: it asserts nothing about time. Both
sides talk to the same server script (the SDK's `MCPServer` with one ``add``
tool), each to a child of its own, over stdio. The garbage collector stays on.
Each row makes ``--calls`` calls per repeat; the repeats of all rows are
interleaved, in alternating order, so they see the same machine load; a row reports the **median**
time per call over the repeats, and its ratio divides by the direct
ClientSession row [D] of the same run.

Rows:

- [D] ``await session.call_tool("add", {...})`` on one `ClientSession` over
  ``stdio_client`` (the baseline);
- ``await gateway.ainvoke("mcp.bench.add", {..., "audit_as": ...})``: the by-name
  door, the whole governed chain with an audit trail to memory, arguments
  validated against the pinned schema, the call sent on the server's pooled
  session (on its own event-loop thread) and the result converted;
- ``tool.call("add", {...}).audit_as(...).execute()``: the typed door, sync.

Target: the by-name async row within 1.10x of [D].
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

import toolbox_mcp.plugin
from toolbox import ExecutionContext, Gateway, Governance, ToolPolicy
from toolbox.audit import AuditTrail, MemorySink
from toolbox.registry._discovery import discover

TARGET = 1.10
SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


server.run("stdio")
"""


def _policy(folder: Path) -> Path:
    script = folder / "bench_server.py"
    script.write_text(SERVER, encoding="utf-8")
    policy = folder / "policy.toml"
    policy.write_text(
        "\n".join(
            [
                "version = 1",
                "[allow]",
                'tools = ["mcp.bench"]',
                "[tools.mcp.servers.bench]",
                f"command = {sys.executable!r}".replace("'", '"'),
                f"args = [{str(script)!r}]".replace("'", '"'),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    return policy


async def _run(policy_path: Path, script: Path, repeats: int, calls: int) -> dict[str, list[float]]:
    policy = ToolPolicy.from_file(policy_path)
    (server_lock,) = discover(policy, [toolbox_mcp.plugin], entry_points=False).locks
    server_lock.lock(timeout=60)
    sink = MemorySink()
    gateway = Gateway.load(
        policy=ToolPolicy.from_file(policy_path),
        providers=[toolbox_mcp.plugin],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink)),
    )
    ctx = ExecutionContext(tenant="bench-tenant", principal="bench-principal")
    tool = gateway.tools_for(ctx).get("mcp.bench")
    arguments = {"a": 1, "b": 2, "audit_as": "Benchmark the governed path"}
    parameters = StdioServerParameters(command=sys.executable, args=[str(script)])
    times: dict[str, list[float]] = {"direct": [], "by_name": [], "typed": []}
    async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        first = await gateway.ainvoke("mcp.bench.add", arguments, context=ctx)
        assert first.status.value == "SUCCESS" and first.content.text == "3", first
        assert (await session.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"

        async def direct() -> None:
            for _ in range(calls):
                await session.call_tool("add", {"a": 1, "b": 2})

        async def by_name() -> None:
            for _ in range(calls):
                await gateway.ainvoke("mcp.bench.add", arguments, context=ctx)

        def typed() -> None:
            for _ in range(calls):
                tool.call("add", {"a": 1, "b": 2}).audit_as("Benchmark the typed path").execute()

        rows = [("direct", direct), ("by_name", by_name)]
        for repeat in range(repeats):
            # Interleaved, and in alternating order, so both rows see the same machine load.
            for name, work in rows if repeat % 2 == 0 else rows[::-1]:
                ctx.trace._records.clear()  # bounded memory: only a benchmark touches these
                sink._pending.clear()
                sink._rows.clear()
                started = time.perf_counter()
                await work()
                times[name].append((time.perf_counter() - started) / calls)
            started = time.perf_counter()
            await asyncio.to_thread(typed)
            times["typed"].append((time.perf_counter() - started) / calls)
    gateway.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=15, help="interleaved repeats per row (default 15)")
    parser.add_argument("--calls", type=int, default=100, help="calls per repeat (default 100)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        policy = _policy(Path(folder))
        times = asyncio.run(_run(policy, Path(folder) / "bench_server.py", args.repeat, args.calls))
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians["direct"]
    print(f"toolbox-mcp over stdio; GC on; {args.repeat} repeats x {args.calls} calls; median per call")
    print(f"load average before: {load:.2f}, after: {os.getloadavg()[0]:.2f}")
    print(f"{'row':62} {'per call':>10} {'ratio':>8} {'target':>7}  status")
    rows = (
        ("[D] await session.call_tool (direct ClientSession)", "direct", None),
        ("await gateway.ainvoke('mcp.bench.add', ...) (governed, audited)", "by_name", TARGET),
        ("tool.call('add', ...).audit_as(...).execute() (typed, sync)", "typed", None),
    )
    for label, key, target in rows:
        ratio = medians[key] / base
        status = "" if target is None else ("met" if ratio <= target else "MISSED")
        shown = "(info)" if target is None else f"{target:.2f}x"
        print(f"{label:62} {medians[key] * 1e6:8.0f}us {ratio:7.2f}x {shown:>7}  {status}")


if __name__ == "__main__":
    main()
