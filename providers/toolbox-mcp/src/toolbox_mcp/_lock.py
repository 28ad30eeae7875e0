"""`ServerLock`: ``toolbox mcp lock NAME`` and the drift ``toolbox check`` shows, for one server.

Implements `toolbox.foundations._operations.OperationLock`. It opens a session of its own
(started for the command, closed after it), so locking never disturbs the
sessions serving calls, and works for a server nothing is pinned for yet.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import final

import mcp_types

from toolbox_mcp._connection import Connection
from toolbox_mcp._lockfile import pin_tools, write_server
from toolbox_mcp._server import Server

__all__ = ["ServerLock"]


@final
class ServerLock:
    """Pins and compares the operations of one configured server."""

    __slots__ = ("_env", "_server")

    def __init__(self, server: Server, env: Mapping[str, str] | None = None) -> None:
        self._server = server
        self._env = env

    @property
    def name(self) -> str:
        """The server name (``toolbox mcp lock NAME``)."""
        return self._server.name

    @property
    def tool(self) -> str:
        """``mcp.NAME``."""
        return self._server.tool

    def _listing(self, timeout: float) -> list[mcp_types.Tool]:
        server = self._server
        env = os.environ if self._env is None else self._env
        connection = Connection(
            server.opener(server.credential_for(None), env),
            label=f"MCP server {server.name!r}",
            connect_timeout=min(timeout, server.config.connect_timeout),
            on_listing=lambda tools: None,
        )
        try:
            return connection.list_tools(timeout)
        finally:
            connection.close()

    def lock(self, *, timeout: float) -> Sequence[str]:
        """List the server's tools now and pin every one that can be pinned; one line each."""
        server = self._server
        config = server.config
        pins, refused = pin_tools(
            self._listing(timeout),
            max_bytes=config.max_schema_bytes,
            max_depth=config.max_schema_depth,
            tool=server.tool,
        )
        write_server(server.lock_path, server.name, pins)
        lines = [
            f"{server.tool}.{name}: pinned (remote {pin.remote!r}, {pin.digests[0][:19]}...)"
            for name, pin in sorted(pins.items())
        ]
        lines += [f"{server.tool}: {r.remote!r} not pinned: {r.reason}" for r in refused]
        return lines

    def drift(self, *, timeout: float) -> Sequence[str]:
        """How the live server differs from the lock; empty when in sync."""
        server = self._server
        if not server.pins:
            return [f"nothing pinned in {server.lock_path.name}: run `toolbox mcp lock {server.name}`"]
        lines = server.drift_of(self._listing(timeout)).lines()
        unknown = sorted(set(server.config.operations) - set(server.pins))
        lines += [f"{op}: configured under operations, but no such operation is pinned" for op in unknown]
        return lines
