"""`CallPlacement`: whether a governed call runs on the event loop or whole on a worker thread.

The chain offloads a sync I/O tool to a thread by itself, but an audit trail
with a durable sink (SQLite, PostgreSQL) writes on the calling thread: on the
event loop, each call's commits would stop every other request, and
concurrent calls could never share a commit (`toolbox.audit._group`). Such
calls therefore run whole on a worker thread (`Gateway.invoke`), so
concurrent requests commit side by side; an async tool, or a trail that only
holds events in memory, runs on the loop (`Gateway.ainvoke`). The service and
the MCP server both ask here, and each offloads with its own runtime.
"""

from __future__ import annotations

import inspect
from typing import final

from toolbox.doors._gateway import Gateway
from toolbox.errors import InvalidArgumentsError

__all__ = ["UNKNOWN", "CallPlacement"]

#: The tool name reported for a name the gateway does not know.
UNKNOWN = "unknown"
_CACHED = 4096


@final
class CallPlacement:
    """Decides, once per name, where a call of it runs (thread-safe: a lost race decides twice)."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        # name -> (runs on the loop, the tool's registered name)
        self._known: dict[str, tuple[bool, str]] = {}

    def of(self, gateway: Gateway, name: str) -> tuple[bool, str]:
        """(whether a call of ``name`` runs on the event loop, the tool's registered name)."""
        known = self._known.get(name)
        if known is not None:
            return known
        catalog = gateway.catalog
        trail = catalog.audit
        blocking = trail is not None and trail.direct_hold is None
        try:
            _, tool, operation, _ = catalog.resolve_name(name)
        except InvalidArgumentsError:
            return (not blocking, UNKNOWN)  # refused by the gateway; not cached (names are caller text)
        entry = catalog.entry(tool)
        assert entry is not None
        tool_type = entry.registered.provider.tool_type
        is_async = bool(getattr(tool_type, "is_async", False)) or inspect.iscoroutinefunction(
            getattr(tool_type, operation, None)
        )
        placement = (is_async or not blocking, tool)
        if len(self._known) < _CACHED:
            self._known[name] = placement
        return placement

    def forget(self) -> None:
        """Drop the decisions (after the gateway was rebuilt)."""
        self._known.clear()
