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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, final

import pluggy

from toolbox.descriptor import ToolDescriptor
from toolbox.runtime import ToolRuntime

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
    """

    tool_type: type[T]
    descriptor: ToolDescriptor | Mapping[str, Any]
    factory: Callable[[ToolRuntime], T] | None = None

    def create(self, runtime: ToolRuntime) -> T:
        """Build the tool instance for ``runtime``."""
        factory: Callable[[ToolRuntime], T] = self.factory or self.tool_type
        return factory(runtime)


class ProviderSpec:
    """Hook specifications a provider package may implement."""

    @hookspec
    def toolbox_providers(self) -> Sequence[ToolProvider[Any]]:  # type: ignore[empty-body]
        """Return the tools this package provides.

        Must not perform I/O: no network, no files, no subprocesses. Return
        descriptors and factories only; tools are built lazily when allowed.
        """
