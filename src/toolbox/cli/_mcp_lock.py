"""``toolbox mcp lock NAME``: pin a remote tool server's operations; the drift ``toolbox check`` shows.

The core never imports a provider: both commands reach the server through the
`toolbox.foundations._operations.OperationLock` objects providers return from their
``toolbox_operation_locks`` hook (toolbox-mcp returns one per configured server).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from toolbox.doors._catalog import POLICY_ENV
from toolbox.doors._tools import Tools
from toolbox.errors import ToolboxError
from toolbox.foundations._line_text import one_line
from toolbox.foundations._operations import OperationLock
from toolbox.registry._discovery import discover
from toolbox.registry._policy import ToolPolicy

__all__ = ["add_lock", "drift_document", "drift_lines"]

DEFAULT_TIMEOUT = 30.0
DRIFT_TIMEOUT = 10.0
_MAX_LINE = 300


def _clean(text: object) -> str:
    line = one_line(text)
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 3] + "..."


def _policy(policy_file: str | None) -> ToolPolicy:
    path = policy_file or os.environ.get(POLICY_ENV)
    if not path:
        raise ToolboxError(
            f"toolbox mcp lock reads the servers from a policy file: pass --policy or set {POLICY_ENV}"
        )
    return ToolPolicy.from_file(path)


def _cmd_lock(args: argparse.Namespace) -> int:
    """Pin server ``args.name``'s operations in the lock file; print one line per operation."""
    policy = _policy(args.policy)
    found = discover(policy)
    locks = {lock.name: lock for lock in found.locks}
    lock = locks.get(args.name)
    if lock is None:
        known = ", ".join(sorted(locks)) or "none"
        broken = "; ".join(f"{b.distribution}: {b.error}" for b in found.broken)
        raise ToolboxError(
            f"no server {args.name!r} is configured (configured: {known})"
            + (f"; broken: {broken}" if broken else "")
        )
    lines = [_clean(line) for line in lock.lock(timeout=args.timeout)]
    if getattr(args, "json", False):
        print(json.dumps({"server": lock.name, "tool": lock.tool, "pinned": lines}, indent=2))
    else:
        print(f"Locked {lock.tool} ({len(lines)} line(s)):")
        for line in lines:
            print(f"  {line}")
    return 0


def add_lock(actions: Any) -> None:
    """Add ``lock NAME [--policy FILE] [--timeout S]`` to the ``toolbox mcp`` actions."""
    lock = actions.add_parser("lock", help="pin a configured MCP server's tools in the lock file")
    lock.add_argument("name", metavar="NAME", help="the server, as in [tools.mcp.servers.NAME]")
    lock.add_argument(
        "--policy", metavar="FILE", help=f"TOML policy file naming the server (default: ${POLICY_ENV})"
    )
    lock.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document"
    )
    lock.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds to start the server and list its tools",
    )
    lock.set_defaults(handler=_cmd_lock)


def _drift(lock: OperationLock, tools: Tools) -> tuple[str, list[str]]:
    entry = tools.catalog.entry(lock.tool)
    if entry is not None and not entry.decision.allowed:
        return "not checked", [f"the policy denies {lock.tool} ({entry.decision.rule}), so it is not started"]
    try:
        lines = list(lock.drift(timeout=DRIFT_TIMEOUT))
    except ToolboxError as exc:
        return "unreachable", [str(exc)]
    return ("drift" if lines else "in sync"), lines


def drift_document(tools: Tools) -> list[dict[str, Any]]:
    """The drift of every operation lock, for ``toolbox check --json``."""
    found = []
    for lock in tools.catalog.operation_locks:
        state, lines = _drift(lock, tools)
        found.append({"tool": lock.tool, "state": state, "drift": [_clean(line) for line in lines]})
    return found


def drift_lines(tools: Tools) -> list[str]:
    """The ``Pinned operations`` section of ``toolbox check`` (empty without operation locks)."""
    locks = tools.catalog.operation_locks
    if not locks:
        return []
    lines = ["", "Pinned operations (lock file vs the live servers):"]
    for item in drift_document(tools):
        lines.append(f"  {item['tool']}: {item['state']}")
        lines += [f"    {line}" for line in item["drift"]]
    return lines
