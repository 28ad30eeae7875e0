"""`serve_stdio`: one MCP connection over this process's stdin and stdout."""

from __future__ import annotations

from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

__all__ = ["serve_stdio"]


async def serve_stdio(mcp_server: Server[Any]) -> None:
    """Serve ``mcp_server`` (from `toolbox.mcp._server`) until the client closes stdin."""
    async with stdio_server() as (read_stream, write_stream):
        await mcp_server.run(read_stream, write_stream, mcp_server.create_initialization_options())
