"""What the chain needs from the layers above it, as Protocols those layers implement.

The pipeline is a lower layer than the tool runtime and the front doors: it
never imports `toolbox.registry._runtime` or `toolbox.doors._tools`. An `Invocation` carries
their objects typed by these Protocols instead (`toolbox.ToolRuntime` and
`toolbox.Tools` implement them), so a new need of the chain shows up here.
"""

from __future__ import annotations

from typing import Any, Protocol

from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._descriptor import Effect, ToolDescriptor

__all__ = ["CallRuntime", "CallTools"]


class CallRuntime(Protocol):
    """What the chain uses of a built tool's runtime (`toolbox.ToolRuntime`)."""

    #: How many operations of the tool instance have started executing.
    executions: int
    #: Whether operation calls need the chain's dispatch permit (False only for ``@tool``).
    guarded: bool

    @property
    def descriptor(self) -> ToolDescriptor:
        """The tool's descriptor."""

    @property
    def context(self) -> ExecutionContext:
        """The trusted context the tool was built for."""

    @property
    def runs_inline(self) -> bool:
        """A ``MEMORY_ONLY`` tool does no I/O: async callers run it inline."""

    @property
    def plans(self) -> dict[str, Any]:
        """The chain's plans of the tool's typed operations, cached per operation."""

    @property
    def tools(self) -> CallTools:
        """The tools that built the tool (for the context's `CallTools.context_gated`)."""

    def effect_of(self, operation: str) -> Effect:
        """The declared effect of ``operation``."""


class CallTools(Protocol):
    """What the chain uses of the tools a call's tool comes from (`toolbox.Tools`)."""

    @property
    def catalog(self) -> Any:  # toolbox.Catalog, a higher layer: its schemas, pipeline and env
        """The shared catalog."""

    @property
    def context_gated(self) -> bool:
        """`toolbox.pipeline._paths.context_gated` of the context the tools are built for."""

    def acquire(self, ref: object) -> object:
        """The built tool ``ref``; raises the denial `get` would, without recording it."""

    def runtime_of(self, name: str) -> CallRuntime:
        """The runtime of the built tool ``name``."""

    def check_acknowledgement(self, ref: object, *, report: bool = True) -> None:
        """Raise unless ``ref``'s acknowledgement holds now."""
