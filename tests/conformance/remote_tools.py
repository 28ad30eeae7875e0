"""The remote MCP server of the conformance matrix's ``remote_mcp`` style (the SDK's `MCPServer`).

Run as ``python remote_tools.py`` (stdio) with ``MODE`` choosing its tools (``main``: read and pay;
``ping``; ``vault``; ``guarded``) and ``COUNT_FILE`` naming a file each execution appends a line to,
so the matrix counts what ran upstream.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

READ = ToolAnnotations(read_only_hint=True)


def _ran(name: str) -> None:
    with Path(os.environ["COUNT_FILE"]).open("a", encoding="utf-8") as out:
        out.write(name + "\n")


def build(mode: str) -> MCPServer:
    """The server of ``mode``."""
    server = MCPServer(f"conformance-{mode}")
    if mode == "main":

        @server.tool(description="Read an item.", annotations=READ)
        def read(item: str, api_key: str = "") -> str:
            _ran("read")
            return f"read {item}"

        @server.tool(description="Pay someone.")
        def pay(to: str, cents: int) -> str:
            _ran("pay")
            return f"paid {cents} to {to}"

    elif mode == "ping":

        @server.tool(description="Ping an item.", annotations=READ)
        def ping(item: str) -> str:
            _ran("ping")
            return f"pong {item}"

    else:

        @server.tool(name=mode, description="Read a guarded item.", annotations=READ)
        def guarded(item: str) -> str:
            _ran(mode)
            return f"{mode} {item}"

    return server


if __name__ == "__main__":
    build(os.environ["MODE"]).run("stdio")
