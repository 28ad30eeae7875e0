"""The ``toolbox.providers`` entry point of toolbox-mcp: one tool per configured, pinned server.

Reads the ``[tools.mcp]`` table of the policy and the lock file it names; it
never starts a server or opens a connection (sessions open on the first call).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolbox import ToolPolicy, ToolProvider, hookimpl
from toolbox.provider import OperationLock
from toolbox_mcp._config import read_config
from toolbox_mcp._lock import ServerLock
from toolbox_mcp._lockfile import read_lock
from toolbox_mcp._server import Server
from toolbox_mcp._tool import tool_type_for

__all__ = ["servers_of", "toolbox_operation_locks", "toolbox_providers"]


def servers_of(policy: ToolPolicy) -> list[Server]:
    """Every server configured in ``policy``'s ``[tools.mcp]``, with its pinned operations.

    Raises:
        ValueError: the table or the lock file is malformed (names the key or file).
    """
    tools = policy.governance.get("tools") or {}
    table = tools.get("mcp") if isinstance(tools, dict) else None
    if not table:
        return []
    source = policy.source or "options"
    config = read_config(table, source=source)
    directory = Path(policy.source).parent if policy.source else Path()
    lock_path = directory / config.lock_file
    locked = read_lock(lock_path)
    return [
        Server(name, server, locked.get(name, {}), lock_path=lock_path, directory=directory)
        for name, server in sorted(config.servers.items())
    ]


@hookimpl
def toolbox_providers(policy: ToolPolicy) -> Sequence[ToolProvider[Any]]:
    """``mcp.NAME`` for every configured server with at least one pinned operation."""
    return [
        ToolProvider(tool_type=tool_type_for(server), descriptor=server.descriptor())
        for server in servers_of(policy)
        if server.pins
    ]


@hookimpl
def toolbox_operation_locks(policy: ToolPolicy) -> Sequence[OperationLock]:
    """A `ServerLock` for every configured server, pinned or not."""
    return [ServerLock(server) for server in servers_of(policy)]
