"""`ToolsetGate`: a credential limited to a toolset sees and calls only that toolset's operations.

`Identity.toolset` names a ``[mcp.toolsets.NAME]`` of the policy file (the same
`Toolsets` the MCP server enforces, so both doors agree). Every context the
service builds for such a caller carries the toolset as a `DelegationScope`,
so the chain itself refuses anything outside it (DENIED/DELEGATION_SCOPE) on
every path, turns included; in front of that, an invoke of any name outside the
toolset, registered or not, is answered as the MCP server answers it:
DENIED/NOT_IN_TOOLSET, recorded in the trace and audited, a 403 problem. A
credential naming a toolset the policy does not define is refused everything
(403 UNKNOWN_TOOLSET): fail closed.
"""

from __future__ import annotations

from typing import Any, final

from starlette.concurrency import run_in_threadpool

from toolbox.auth import Identity
from toolbox.doors._catalog import Catalog
from toolbox.doors._toolsets import NOT_IN_TOOLSET, Toolsets, in_toolset, not_in_toolset
from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._delegation import DelegationScope
from toolbox.service._audit_log import ServiceAudit
from toolbox.service._problems import Problem

__all__ = ["NOT_IN_TOOLSET", "UNKNOWN_TOOLSET", "ToolsetGate"]

UNKNOWN_TOOLSET = "UNKNOWN_TOOLSET"


@final
class ToolsetGate:
    """The toolsets of the served catalog, checked for each caller.

    Raises:
        ConfigurationError: at construction, a toolset naming an unregistered tool or operation.
    """

    __slots__ = ("_audit", "_catalog", "_scopes", "_toolsets")

    def __init__(self, catalog: Catalog, audit: ServiceAudit) -> None:
        self._catalog = catalog
        self._audit = audit
        self._toolsets = Toolsets(catalog)
        # One immutable scope per toolset, shared by every context of its callers.
        self._scopes = {
            name: DelegationScope(operations=self._toolsets.get(name)) for name in self._toolsets.names()
        }

    def allowed(self, identity: Identity) -> frozenset[str] | None:
        """The dotted operations ``identity`` may use; None for all; empty for an unknown toolset."""
        if identity.toolset is None:
            return None
        return self._toolsets.find(identity.toolset)

    async def context(self, identity: Identity, route: str, trace_id: str, **fields: Any) -> ExecutionContext:
        """``identity``'s trusted context, scoped to its toolset.

        Raises:
            Problem: 403 UNKNOWN_TOOLSET (audited) when the toolset is not defined by the policy.
        """
        name = identity.toolset
        if name is None:
            return identity.context(**fields)
        scope = self._scopes.get(name)
        if scope is None:
            rule = "service:toolset"
            await self._audit.refused(route, UNKNOWN_TOOLSET, rule, trace_id=trace_id, identity=identity)
            raise Problem(
                403,
                UNKNOWN_TOOLSET,
                "the credential is limited to a toolset this service does not define; it may use nothing",
                rule=rule,
                trace_id=trace_id,
            )
        return identity.context(scope=scope, **fields)

    async def check(self, identity: Identity, name: str, context: ExecutionContext) -> None:
        """Refuse ``name`` when it is outside ``identity``'s toolset, as the MCP server does.

        Every such name gets the same answer, registered or not (`toolbox.doors._toolsets.not_in_toolset`):
        an unknown tool or a made-up operation is not a 404 or a 422 that would tell the caller
        what is installed.

        Raises:
            Problem: 403 NOT_IN_TOOLSET, recorded in ``context``'s trace and audited.
        """
        allowed = self.allowed(identity)
        if allowed is None or in_toolset(self._catalog, allowed, name):
            return
        rule = f"service:toolset:{identity.toolset}"
        # The audit hook may write to a durable sink on the calling thread: off the loop.
        refused = await run_in_threadpool(not_in_toolset, self._catalog, context, name, rule)
        raise Problem(403, NOT_IN_TOOLSET, refused.message, rule=rule, trace_id=context.run_id)
