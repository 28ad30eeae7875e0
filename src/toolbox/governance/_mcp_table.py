"""The policy file's ``[mcp]`` table: how ``toolbox mcp serve`` serves the governed tools.

::

    [mcp.context]                    # the trusted context of stdio sessions, set by the operator
    tenant = "acme"
    principal = "desktop-user"
    roles = ["analyst"]

    [mcp.toolsets.support]           # a named subset an endpoint or a credential can be limited to
    tools = ["calculator", "billing.lookup_invoice"]   # tool names or tool.operation names

Validated when the file loads (a bad value is a `PolicyFileError` naming the
key path); the validated `McpConfig` is stored in ``policy.governance["mcp"]``.
Whether a toolset's names are registered tools is checked when a server is
built from the catalog (`toolbox.mcp`), as ``[allow]`` names are by ``Tools.load``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, final

from toolbox.foundations._descriptor import MAX_NAME_LENGTH, OPERATION_NAME_PATTERN, TOOL_NAME_PATTERN
from toolbox.foundations._line_text import breaks_line
from toolbox.foundations._table_reader import TableReader

__all__ = ["MCP_KEY", "McpConfig", "McpContext", "mcp_config", "read_mcp_table"]

MCP_KEY = "mcp"
"""The key of the validated `McpConfig` in ``policy.governance``."""

_TOP = ("context", "toolsets")
_CONTEXT = ("tenant", "principal", "roles")
_TOOLSET = ("tools", "description")
TOOLSET_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
_TOOLSET_NAME = re.compile(TOOLSET_NAME_PATTERN)
# A toolset entry is a tool name, or a tool name and an operation joined by one dot.
_ENTRY = rf"(?:{TOOL_NAME_PATTERN[1:-1]})(?:\.{OPERATION_NAME_PATTERN[1:-1]})?"
_REF_MAX = 256


@final
@dataclass(frozen=True)
class McpContext:
    """The operator's trusted context for stdio sessions: never taken from the client."""

    tenant: str
    principal: str
    roles: tuple[str, ...] = ()


@final
@dataclass(frozen=True)
class McpConfig:
    """The validated ``[mcp]`` table."""

    context: McpContext | None = None
    """``[mcp.context]``, or None when the file gives none."""
    toolsets: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    """Toolset name -> the tool and ``tool.operation`` names it holds."""


def _reference(table: TableReader, key: str) -> str:
    value = table.string(key)
    if not value or len(value) > _REF_MAX or breaks_line(value):
        raise table.error(key, f"must be 1-{_REF_MAX} printable characters")
    return value


def read_mcp_table(table: TableReader) -> McpConfig:
    """Validate the ``[mcp]`` table.

    Raises:
        PolicyFileError: a key path that is unknown, of the wrong type or malformed.
    """
    table.only(_TOP)
    context = None
    if "context" in table:
        section = table.table("context")
        section.only(_CONTEXT)
        roles = section.strings("roles", what="role")
        for index, role in enumerate(roles):
            if len(role) > _REF_MAX or breaks_line(role):
                raise section.error("roles", f"[{index}] must be at most {_REF_MAX} printable characters")
        context = McpContext(_reference(section, "tenant"), _reference(section, "principal"), tuple(roles))
    toolsets: dict[str, tuple[str, ...]] = {}
    sets = table.table("toolsets")
    for name in sets:
        if not isinstance(name, str) or not _TOOLSET_NAME.fullmatch(name):
            raise sets.error(name, f"not a valid toolset name ({TOOLSET_NAME_PATTERN})")
        toolsets[name] = tuple(_toolset(sets, name))
    return McpConfig(context=context, toolsets=MappingProxyType(toolsets))


def _toolset(sets: TableReader, name: str) -> list[str]:
    # `name = ["calculator"]` is short for `[mcp.toolsets.name] tools = ["calculator"]`.
    if isinstance(sets.value(name), (list, tuple)):
        entries = sets.strings(name, pattern=_ENTRY, max_length=MAX_NAME_LENGTH * 2, what="tool name")
    else:
        section = sets.table(name)
        section.only(_TOOLSET)
        if "description" in section:
            section.string("description")
        entries = section.strings("tools", pattern=_ENTRY, max_length=MAX_NAME_LENGTH * 2, what="tool name")
    if not entries:
        raise sets.error(name, "a toolset names at least one tool or tool.operation")
    return entries


def mcp_config(governance: Mapping[str, Any]) -> McpConfig:
    """The `McpConfig` a policy's ``governance`` mapping holds (an empty one when it has none)."""
    found = governance.get(MCP_KEY)
    return found if isinstance(found, McpConfig) else McpConfig()
