"""A real MCP server (the SDK's `MCPServer`) for the toolbox-mcp tests.

Run as ``python mcp_test_server.py`` (stdio) with ``MODE`` choosing its tools
(``v1``: ``add``, ``echo``, ``notes_search``, ``sleep``, ``hold``, ``crash``,
``big``, ``fail``; ``v2``: ``add`` with another schema, and a new tool ``wipe``), and
``COUNT_FILE`` naming a file each tool call appends one line to, so tests count
upstream executions; ``DROP`` names tools it no longer lists (comma-separated).
`build_server` is used in-process for the HTTP server.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations


def _count(name: str) -> None:
    path = os.environ.get("COUNT_FILE")
    if path:
        with Path(path).open("a", encoding="utf-8") as out:
            out.write(name + "\n")


def build_server(mode: str = "v1", count=_count) -> MCPServer:
    """The server for ``mode``; ``count(name)`` is called on every tool execution."""
    server = MCPServer("toolbox-mcp-test")

    if mode == "v1":

        @server.tool(description="Add two integers.")
        def add(a: int, b: int) -> int:
            count("add")
            return a + b

    else:

        @server.tool(description="Add two integers.")
        def add(a: int, b: int, c: int = 0) -> int:
            count("add")
            return a + b + c

        @server.tool(description="Delete everything.")
        def wipe() -> str:
            count("wipe")
            return "wiped"

    @server.tool(description="Echo the text back.", annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        count("echo")
        return text

    @server.tool(
        name="notesSearch", description="Search notes.", annotations=ToolAnnotations(read_only_hint=False)
    )
    def notes_search(query: str) -> str:
        count("notesSearch")
        return f"found: {query}"

    @server.tool(description="Sleep for some seconds.")
    async def sleep(seconds: float) -> str:
        count("sleep")
        # Awaited on the server's loop, not time.sleep on a worker thread: the call hangs for the
        # client all the same, but the server still exits when its stdin closes (a blocked thread
        # held the exit until the SDK's 2 s shutdown grace ran out and it killed the server).
        await anyio.sleep(seconds)
        return "slept"

    @server.tool(description="Wait until a file exists, at most some seconds.")
    async def hold(path: str, seconds: float) -> str:
        count("hold")
        # A call that stays busy until the test releases it: no guess at how long the test needs.
        with anyio.move_on_after(seconds):
            while not await anyio.Path(path).exists():
                await anyio.sleep(0.01)
            return "released"
        return "timed out"

    @server.tool(description="Exit the server process mid-call.")
    def crash() -> str:
        count("crash")
        sys.stdout.flush()
        os._exit(3)

    @server.tool(description="Return a large text.")
    def big(megabytes: int) -> str:
        count("big")
        return "x" * (megabytes * 1024 * 1024)

    @server.tool(description="Report a tool error.")
    def fail() -> str:
        count("fail")
        raise ValueError("the upstream tool failed")

    @server.tool(description="Show the environment variable names the server got.")
    def env_names() -> str:
        count("env_names")
        return ",".join(sorted(os.environ))

    @server.tool(description="Change the add tool's schema and announce it.")
    async def mutate(ctx: Context) -> str:
        count("mutate")
        server.remove_tool("add")

        def add(a: int, b: int, c: int = 0) -> int:
            count("add")
            return a + b + c

        server.add_tool(add, description="Add two integers.")
        await ctx.session.send_tool_list_changed()
        return "mutated"

    return server


if __name__ == "__main__":
    served = build_server(os.environ.get("MODE", "v1"))
    for dropped in filter(None, os.environ.get("DROP", "").split(",")):
        served.remove_tool(dropped)  # a tool the server no longer lists
    served.run("stdio")
