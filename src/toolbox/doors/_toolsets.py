"""Tool sets: named subsets of the served operations, from ``[mcp.toolsets]`` or code.

An endpoint (``toolbox mcp serve --toolset NAME``) or a credential
(`Identity.toolset`) may be limited to one; both together see only what both
allow. A toolset names tools (all their operations) or ``tool.operation``.
Both doors read them here: the MCP server (`toolbox.mcp`) and the REST
service (`toolbox.service`), so a credential sees the same tools through either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import final

from toolbox.doors._catalog import Catalog
from toolbox.errors import ConfigurationError, InvalidArgumentsError
from toolbox.foundations._context import DenialRecord, ExecutionContext
from toolbox.governance._mcp_table import mcp_config
from toolbox.pipeline._result import Status, ToolResult

__all__ = ["NOT_IN_TOOLSET", "Toolsets", "in_toolset", "not_in_toolset"]

NOT_IN_TOOLSET = "NOT_IN_TOOLSET"
_SHOWN_NAME = 200


@final
class Toolsets:
    """Toolset name -> the dotted operation names it allows, checked against the catalog."""

    __slots__ = ("_sets",)

    def __init__(self, catalog: Catalog, toolsets: Mapping[str, Iterable[str]] | None = None) -> None:
        """Args:
        catalog: the registered tools the names must exist in.
        toolsets: toolsets defined in code; by default the policy file's ``[mcp.toolsets]``.

        Raises:
            ConfigurationError: a toolset names a tool or operation that is not registered.
        """
        chosen = toolsets if toolsets is not None else mcp_config(catalog.policy.governance).toolsets
        self._sets: dict[str, frozenset[str]] = {}
        for name, entries in chosen.items():
            if isinstance(entries, str):
                raise ConfigurationError(f"toolset {name!r} must be a list of names, not one string")
            self._sets[name] = frozenset(_expand(catalog, name, entries))

    def names(self) -> list[str]:
        """The defined toolsets, sorted."""
        return sorted(self._sets)

    def get(self, name: str) -> frozenset[str]:
        """The dotted operations toolset ``name`` allows.

        Raises:
            ConfigurationError: no such toolset.
        """
        try:
            return self._sets[name]
        except KeyError:
            known = ", ".join(self.names()) or "none"
            raise ConfigurationError(f"unknown toolset {name!r}; defined toolsets: {known}") from None

    def find(self, name: str) -> frozenset[str]:
        """`get`, failing closed: an unknown toolset allows nothing."""
        return self._sets.get(name, frozenset())


def _expand(catalog: Catalog, name: str, entries: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for entry in entries:
        registered = catalog.entry(entry) if isinstance(entry, str) else None
        if registered is not None:
            found.update(f"{entry}.{op.name}" for op in registered.descriptor.operations)
            continue
        try:
            dotted, tool, operation, version = catalog.resolve_name(entry)
        except InvalidArgumentsError:
            dotted, version = "", None
        if not dotted or version is not None or dotted != f"{tool}.{operation}":
            raise ConfigurationError(
                f"toolset {name!r}: {entry!r} is not a registered tool or tool.operation; "
                f"installed tools: {', '.join(catalog.names()) or 'none'}"
            )
        found.add(dotted)
    return found


def _resolved(catalog: Catalog, name: object) -> tuple[str, str] | None:
    """(tool, operation) of a by-name ``name``, or None when it names no registered operation."""
    try:
        _, tool, operation, _ = catalog.resolve_name(name)  # type: ignore[arg-type]
    except InvalidArgumentsError:
        return None
    return tool, operation


def in_toolset(catalog: Catalog, allowed: frozenset[str], name: object) -> bool:
    """Whether by-name ``name`` is an operation of ``allowed`` (dotted ``tool.operation`` names)."""
    found = _resolved(catalog, name)
    return found is not None and f"{found[0]}.{found[1]}" in allowed


def not_in_toolset(catalog: Catalog, context: ExecutionContext, name: object, rule: str) -> ToolResult:
    """The one answer to any name outside a caller's toolset: DENIED/NOT_IN_TOOLSET, recorded.

    Registered or not, malformed or an operation that does not exist: the caller gets the
    same status, reason and message (naming what it sent), so a limited caller cannot learn
    which tools are installed, nor the operations of one it may not use. The trace and the
    audit trail name the tool and operation tried, when the name resolves to one (the name
    as sent, else), for the operator.
    """
    shown = str(name)[:_SHOWN_NAME]
    tool, operation = _resolved(catalog, name) or (shown, "")
    context.trace.append(DenialRecord(tool, NOT_IN_TOOLSET, rule))
    catalog.pipeline.report_denial(context, tool, NOT_IN_TOOLSET, rule, operation=operation)
    return ToolResult(
        Status.DENIED,
        name=shown,
        tool=tool,
        operation=operation,
        reason_code=NOT_IN_TOOLSET,
        rule=rule,
        message=f"{shown!r} is not in the toolset this credential or endpoint is limited to",
        trace_id=context.run_id,
        correlation_id=context.correlation_id,
    )
