"""How provider packages hand tools to toolbox.

A provider package declares an entry point in the ``toolbox.providers`` group
that names a module (or object) implementing the `toolbox_providers` hook::

    # pyproject.toml
    [project.entry-points."toolbox.providers"]
    weather = "acme_weather.plugin"

    # acme_weather/plugin.py
    from toolbox import ToolProvider, hookimpl

    @hookimpl
    def toolbox_providers():
        return [ToolProvider(tool_type=WeatherTool, descriptor=WEATHER)]

Providing a tool grants nothing: the `ToolPolicy` decides whether it may be used.

A hook may take a ``policy`` parameter: a provider whose tools are configured
(toolbox-mcp: one tool per server under ``[tools.mcp.servers.NAME]``) reads its
``policy.governance["tools"]`` table there. A provider may also implement
``toolbox_operation_locks`` (`toolbox.foundations._operations.OperationLock`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, final

import pluggy

from toolbox.foundations._descriptor import ToolDescriptor
from toolbox.foundations._operations import OperationLock
from toolbox.registry._policy import ToolPolicy
from toolbox.registry._runtime import ToolRuntime

__all__ = ["ENTRY_POINT_GROUP", "ProviderSpec", "ToolProvider", "hookimpl", "hookspec"]

ENTRY_POINT_GROUP = "toolbox.providers"
PROJECT_NAME = "toolbox"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

T = TypeVar("T")


@final
@dataclass(frozen=True)
class ToolProvider(Generic[T]):
    """One tool offered by a provider package.

    Attributes:
        tool_type: the class users pass to ``tools.get(...)``.
        descriptor: a `ToolDescriptor`, or a mapping of its fields (validated on load).
        factory: builds the tool from its `ToolRuntime`; defaults to ``tool_type(runtime)``.
            It runs on the first allowed ``get()``, never during discovery.
        bind: optional, per operation, what each declared parameter is bound as (approval
            fingerprints, what approvers are shown, audit payloads): a callable applied to the
            value (a large body by its digest) or None (the value as passed). An operation's
            mapping names every parameter of its method; one left out is refused when the
            provider loads (`toolbox.foundations._binding`). Without it, every parameter is bound as passed.
    """

    tool_type: type[T]
    descriptor: ToolDescriptor | Mapping[str, Any]
    factory: Callable[[ToolRuntime], T] | None = None
    bind: Mapping[str, Mapping[str, Callable[[Any], object] | None]] | None = None

    def create(self, runtime: ToolRuntime) -> T:
        """Build the tool instance for ``runtime``."""
        factory: Callable[[ToolRuntime], T] = self.factory or self.tool_type
        return factory(runtime)


class ProviderSpec:
    """Hook specifications a provider package may implement."""

    @hookspec
    def toolbox_providers(self, policy: ToolPolicy) -> Sequence[ToolProvider[Any]]:  # type: ignore[empty-body]
        """Return the tools this package provides; ``policy`` is optional in an implementation.

        Must not perform I/O: no network, no subprocesses, and no files except
        those the policy's own tables name (a lock file). Return descriptors and
        factories only; tools are built lazily when allowed.
        """

    @hookspec
    def toolbox_operation_locks(self, policy: ToolPolicy) -> Sequence[OperationLock]:  # type: ignore[empty-body]
        """Return the `OperationLock` of every configured remote tool (optional; no I/O)."""
