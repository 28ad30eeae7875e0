"""`DelegationScope`: the tools and operations a delegated run (a sub-agent) may call.

`ExecutionContext.delegate` builds one; it can only narrow its parent's. A
scope keeps its parent, so what a child allows is always checked against every
ancestor too: a scope cannot grow by construction, and `narrow` also refuses,
at the call site, any attempt to name something the parent does not allow.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import final

from toolbox.errors import DelegationError

__all__ = ["DelegationScope"]


def _names(values: Iterable[object], what: str) -> frozenset[str]:
    if isinstance(values, str):
        raise DelegationError(f"{what} must be a collection of names, not one string: wrap it in a list")
    names = set()
    for value in values:
        name = getattr(value, "name", value)  # a @tool function stands for its name
        if not isinstance(name, str) or not name:
            raise DelegationError(
                f"{what} must hold non-empty names (strings, or @tool functions), got {type(value).__name__}"
            )
        names.add(name)
    return frozenset(names)


@final
class DelegationScope:
    """Which tools (``tool``) and operations (``tool.operation``) a run may call; None means any.

    Immutable. ``parent`` is the delegating run's scope, checked too.
    """

    __slots__ = ("operations", "parent", "tools")

    def __init__(
        self,
        *,
        tools: frozenset[str] | None = None,
        operations: frozenset[str] | None = None,
        parent: DelegationScope | None = None,
    ) -> None:
        self.tools = tools
        self.operations = operations
        self.parent = parent

    def allows(self, tool: str, operation: str) -> bool:
        """Whether this scope and every ancestor allow ``tool.operation``."""
        scope: DelegationScope | None = self
        while scope is not None:
            if scope.tools is not None and tool not in scope.tools:
                return False
            if scope.operations is not None and f"{tool}.{operation}" not in scope.operations:
                return False
            scope = scope.parent
        return True

    def allows_tool(self, tool: str) -> bool:
        """Whether some operation of ``tool`` may be allowed by this scope and every ancestor."""
        scope: DelegationScope | None = self
        prefix = f"{tool}."
        while scope is not None:
            if scope.tools is not None and tool not in scope.tools:
                return False
            if scope.operations is not None and not any(op.startswith(prefix) for op in scope.operations):
                return False
            scope = scope.parent
        return True

    @staticmethod
    def narrow(
        parent: DelegationScope | None,
        tools: Iterable[object] | None,
        operations: Iterable[str] | None,
    ) -> DelegationScope | None:
        """The child scope of ``parent`` limited to ``tools`` and ``operations`` (None: the parent's).

        Raises:
            DelegationError: a tool or operation the parent does not allow, an operation
                whose tool is not among ``tools``, or a malformed name.
        """
        if tools is None and operations is None:
            return parent
        tool_names = None if tools is None else _names(tools, "tools")
        operation_names = None if operations is None else _names(operations, "operations")
        for tool in sorted(tool_names or ()):
            if parent is not None and not parent.allows_tool(tool):
                raise DelegationError(f"cannot delegate tool {tool!r}: the parent run may not call it")
        for name in sorted(operation_names or ()):
            tool, dot, operation = name.rpartition(".")
            if not dot or not tool or not operation:
                raise DelegationError(f"operation {name!r} must be written tool.operation, e.g. 'http.get'")
            if tool_names is not None and tool not in tool_names:
                raise DelegationError(
                    f"operation {name!r} names a tool that is not among the delegated tools"
                )
            if parent is not None and not parent.allows(tool, operation):
                raise DelegationError(f"cannot delegate operation {name!r}: the parent run may not call it")
        return DelegationScope(tools=tool_names, operations=operation_names, parent=parent)

    def __repr__(self) -> str:
        tools = sorted(self.tools) if self.tools is not None else "any"
        operations = sorted(self.operations) if self.operations is not None else "any"
        return f"DelegationScope(tools={tools}, operations={operations}, nested={self.parent is not None})"
