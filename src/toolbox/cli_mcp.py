"""``toolbox mcp``: the MCP sub-commands (``lock``; ``serve`` joins them from its own module)."""

from __future__ import annotations

import argparse
from typing import Any

from toolbox.cli_mcp_lock import add_lock

__all__ = ["add_mcp"]


def add_mcp(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``mcp`` command group."""
    group = commands.add_parser("mcp", help="MCP: pin remote servers' tools (lock)")
    sub = group.add_subparsers(dest="mcp_command", required=True, metavar="COMMAND")
    add_lock(sub, common)
