"""`serve_stdio`: one MCP connection over this process's stdin and stdout."""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

__all__ = ["serve_stdio"]


async def serve_stdio(
    mcp_server: Server[Any],
    stdin: anyio.AsyncFile[str] | None = None,
    stdout: anyio.AsyncFile[str] | None = None,
) -> None:
    """Serve ``mcp_server`` (from `toolbox.mcp._server`) until the client closes stdin.

    ``stdin`` and ``stdout`` default to the process's own (the conformance matrix passes pipes).
    """
    async with stdio_server(stdin, stdout) as (read_stream, write_stream):
        await mcp_server.run(read_stream, write_stream, mcp_server.create_initialization_options())
