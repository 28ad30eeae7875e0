"""The by-name namespace: every name a model may call reaches exactly one tool.

A by-name call names ``tool`` or ``tool.operation``, and tool names may hold
dots. If ``http`` (operation ``get``) and a tool named ``http.get`` were both
registered, ``http.get`` would mean two tools, and whichever the resolver
preferred would receive the call and its arguments (an ``Authorization``
header included). So a tool name owns its whole namespace: a name that equals
another tool's name, equals another's ``tool.operation`` or lies anywhere
under another's ``tool.`` prefix is a load-time `ProviderConflictError` naming
both providers. With that rule a by-name name resolves without any choice:
the operation is the last dotted part (`toolbox.Catalog.resolve_name`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from toolbox.errors import ProviderConflictError
from toolbox.foundations._descriptor import ToolDescriptor
from toolbox.foundations._wire_names import to_wire_name

__all__ = ["EXPLICIT", "check_namespace", "claimant"]

EXPLICIT = "<explicit>"


class RegisteredTool(Protocol):
    """What the check reads of a registered tool (`toolbox.registry._discovery.RegisteredTool` is one)."""

    @property
    def descriptor(self) -> ToolDescriptor:
        """The tool's validated descriptor."""

    @property
    def distribution(self) -> str:
        """The distribution that registered it, or `EXPLICIT`."""

    @property
    def origin(self) -> str:
        """Where it came from, for messages."""


_REMEDY = (
    "by-name calls must reach exactly one tool: uninstall one of them, block its distribution "
    "in the policy ([providers].block) or rename the tool"
)


def claimant(tool: RegisteredTool) -> str:
    """Who registered ``tool``, for conflict messages: a distribution or an explicit provider."""
    if tool.distribution == EXPLICIT:
        return f"explicit provider {tool.origin.removeprefix(EXPLICIT).strip()} (passed in providers=[...])"
    return f"distribution {tool.origin}"


def _conflict(what: str, first: RegisteredTool, second: RegisteredTool) -> ProviderConflictError:
    return ProviderConflictError(f"{what}: claimed by {claimant(first)} and by {claimant(second)}; {_REMEDY}")


def check_namespace(tools: Sequence[RegisteredTool]) -> None:
    """Refuse any two tools whose by-name names overlap, or whose wire names collide.

    Raises:
        ProviderConflictError: naming the name and both providers.
    """
    owners: dict[str, RegisteredTool] = {}
    for tool in tools:
        name = tool.descriptor.name
        other = owners.get(name)
        if other is not None:
            raise _conflict(f"tool name {name!r}", other, tool)
        owners[name] = tool
    for tool in tools:
        name = tool.descriptor.name
        # Every shorter dotted prefix ("acme", "acme.pay" of "acme.pay.card") is a possible owner.
        dot = name.find(".")
        while dot != -1:
            prefix = name[:dot]
            owner = owners.get(prefix)
            if owner is not None:
                rest = name[dot + 1 :]
                if any(op.name == rest for op in owner.descriptor.operations):
                    what = f"tool name {name!r} is also operation {rest!r} of tool {prefix!r}"
                else:
                    what = f"tool name {name!r} lies inside the namespace of tool {prefix!r} ({prefix}.*)"
                raise _conflict(what, owner, tool)
            dot = name.find(".", dot + 1)
    _check_wire_names(tools)


def _check_wire_names(tools: Sequence[RegisteredTool]) -> None:
    # The descriptor's name rules make wire names unique; this holds the promise on its own.
    seen: dict[str, tuple[str, RegisteredTool]] = {}
    for tool in tools:
        descriptor = tool.descriptor
        names = [f"{descriptor.name}.{op.name}" for op in descriptor.operations]
        if len(descriptor.operations) == 1:
            names.append(descriptor.name)
        for dotted in names:
            wire = to_wire_name(dotted)
            other = seen.get(wire)
            if other is not None and other[0] != dotted:
                raise _conflict(f"{other[0]!r} and {dotted!r} share the wire name {wire!r}", other[1], tool)
            seen[wire] = (dotted, tool)
