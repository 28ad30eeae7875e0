"""`ServedTools`: the MCP `Tool` of every operation the policy allows, and who may see which.

The definitions are built once, from `Gateway.definitions(format="mcp")`
(wire names, the intent as a required argument, annotations from the
descriptor) plus an output schema where the return type gives one. What a
caller is shown is decided per `tools/list`: an operation is listed only when
a call to it could run now for that caller (allowed by the policy,
acknowledged, not stopped by the kill switch, inside the caller's toolset and
delegation scope, granted by a role of the policy file's ``[roles]``). A call
by name to anything else is still refused by the governed chain.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, final

from mcp import types

from toolbox.doors._gateway import Gateway
from toolbox.foundations._context import ExecutionContext
from toolbox.mcp._output import OutputShape, output_shape
from toolbox.pipeline.checks._authorization import RolePolicy
from toolbox.pipeline.checks._builtin import KillSwitch

__all__ = ["ServedOperation", "ServedTools"]

_INTENT_TEXT = {
    "purpose": (
        "Required. Why you are making this call, in one sentence (for example 'Check the invoice "
        "total the customer asked about'). It is recorded in the audit trail with the call."
    ),
    "audit_as": (
        "Required. What this change is for, in one sentence (for example 'Refund order 42 as "
        "approved in ticket 7'). It is recorded in the audit trail before the change runs."
    ),
}


@final
class ServedOperation:
    """One operation as MCP serves it."""

    __slots__ = ("definition", "dotted", "name", "operation", "shape", "tool")

    def __init__(
        self, tool: str, operation: str, name: str, shape: OutputShape, definition: types.Tool
    ) -> None:
        self.tool = tool
        self.operation = operation
        self.dotted = f"{tool}.{operation}"
        #: The wire name the tool is listed under (``calculator__evaluate``).
        self.name = name
        self.shape = shape
        #: The MCP tool definition (wire name, schemas, annotations).
        self.definition = definition


@final
class ServedTools:
    """The served operations of one gateway, by wire name, and the per-caller listing."""

    __slots__ = ("_by_wire", "_gateway", "_roles")

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        catalog = gateway.catalog
        self._by_wire: dict[str, ServedOperation] = {}
        for definition in gateway.definitions(format="mcp"):
            shown, tool, operation, _ = catalog.resolve_name(definition["name"])
            shape = output_shape(catalog, tool, operation)
            self._by_wire[definition["name"]] = ServedOperation(
                tool, operation, definition["name"], shape, _tool(definition, shape, shown)
            )
        roles = catalog.policy.governance.get("roles")
        # The file's [roles] also hide what no role of the caller grants; code authorizers decide per call.
        self._roles = RolePolicy(roles) if roles is not None else None

    def operations(self) -> Iterable[ServedOperation]:
        """Every operation the policy allows, whatever the caller."""
        return self._by_wire.values()

    def by_wire(self, name: str) -> ServedOperation | None:
        """The operation served under the wire name ``name``."""
        return self._by_wire.get(name)

    async def listed(self, context: ExecutionContext, allowed: frozenset[str] | None) -> list[types.Tool]:
        """The tools ``context`` may call now; ``allowed`` is its toolset (dotted names), None for all."""
        tools = self._gateway.tools_for(context)
        usable: dict[str, bool] = {}
        # The chain's kill switches, asked per listing: a stale store read is refreshed off the loop
        # first, never answered "stopped" for want of a read (an empty listing on SQL or Redis state).
        kill_switches = [c for c in self._gateway.catalog.pipeline.interceptors if isinstance(c, KillSwitch)]
        found: list[types.Tool] = []
        for served in self._by_wire.values():
            if allowed is not None and served.dotted not in allowed:
                continue
            if served.tool not in usable:
                halted = [await kill_switch.aengaged(served.tool) for kill_switch in kill_switches]
                usable[served.tool] = tools.explain(served.tool).allowed and not any(halted)
            if not usable[served.tool]:
                continue
            if context.scope is not None and not context.scope.allows(served.tool, served.operation):
                continue
            if (
                self._roles is not None
                and not self._roles(served.tool, served.operation, context, {}).allowed
            ):
                continue
            found.append(served.definition)
        return found


def _tool(definition: dict[str, Any], shape: OutputShape, dotted: str) -> types.Tool:
    schema = copy.deepcopy(definition["inputSchema"])
    for field, text in _INTENT_TEXT.items():
        prop = schema.get("properties", {}).get(field)
        if isinstance(prop, dict):
            prop["description"] = text
    hints = definition["annotations"]
    return types.Tool(
        name=definition["name"],
        title=dotted,
        description=definition["description"] or dotted,
        input_schema=schema,
        output_schema=shape.schema,
        annotations=types.ToolAnnotations(
            title=dotted,
            read_only_hint=hints["readOnlyHint"],
            destructive_hint=hints["destructiveHint"],
            idempotent_hint=hints["idempotentHint"],
            open_world_hint=hints["openWorldHint"],
        ),
    )
