"""Protocols for tools whose operations are described at run time, and for pinning them.

Most tools are Python classes: an operation is a method, and its by-name
schema comes from the method's signature. A tool that fronts a remote tool
server (toolbox-mcp) has operations known only from that server: JSON Schema
and a description, pinned by the operator in a lock file. Such a tool type
implements `DescribedOperations`, and the by-name door validates through it.

`OperationLock` is how operator commands (``toolbox mcp lock``, ``toolbox
check``) pin and compare those operations without the core importing the
provider: a provider returns its locks from the optional
``toolbox_operation_locks`` hook (`toolbox.registry._provider.ProviderSpec`).

This module imports nothing from toolbox: every layer may use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["DescribedOperations", "OperationLock", "describes_operations"]


@runtime_checkable
class DescribedOperations(Protocol):
    """A tool type whose operations carry a JSON Schema instead of a method signature.

    The catalog asks the *type* for the schema (definitions are context-free),
    and the by-name door asks the built *instance* for the intent.
    """

    @classmethod
    def operation_parameters(cls, operation: str) -> Mapping[str, Any]:
        """The JSON Schema (an ``object`` schema, local ``$ref`` only) of ``operation``'s arguments."""
        ...

    def operation_intent(self, operation: str, arguments: Mapping[str, Any]) -> Any:
        """The intent (`toolbox.ReadIntent` or `toolbox.WriteIntent`) of a by-name call.

        Raises:
            toolbox.errors.InvalidArgumentsError: the arguments break the operation's schema.
            toolbox.ToolDeniedError: the tool refuses the call (e.g. the operation drifted).
        """
        ...


def describes_operations(tool_type: type) -> bool:
    """Whether ``tool_type`` implements `DescribedOperations` (checked on the class, not an instance)."""
    return callable(getattr(tool_type, "operation_parameters", None)) and callable(
        getattr(tool_type, "operation_intent", None)
    )


@runtime_checkable
class OperationLock(Protocol):
    """Pins a tool's remotely described operations, and reports how the remote side drifted."""

    @property
    def name(self) -> str:
        """What ``toolbox mcp lock NAME`` calls it (e.g. the server name)."""
        ...

    @property
    def tool(self) -> str:
        """The tool name its operations belong to (e.g. ``mcp.NAME``)."""
        ...

    def lock(self, *, timeout: float) -> Sequence[str]:
        """Read the remote operations, write the lock file; one line per operation pinned.

        Raises:
            toolbox.ToolExecutionError: the remote side could not be read in ``timeout`` seconds.
            toolbox.errors.ConfigurationError: the lock file could not be written.
        """
        ...

    def drift(self, *, timeout: float) -> Sequence[str]:
        """How the remote operations differ from the lock, one line each; empty when in sync.

        Raises:
            toolbox.ToolExecutionError: the remote side could not be read in ``timeout`` seconds.
        """
        ...
