"""`ServedGateway`: the gateway the service calls through, rebuilt when a tool is stopped.

A per-tool kill switch is part of a chain's configuration, so stopping a tool
builds a new `Catalog` over the same registered tools, the same policy and
the same audit trail, and swaps the gateway in one assignment: calls already
running finish on the old one, new calls take the new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import final

from toolbox.audit.trail import AuditTrail
from toolbox.catalog import Catalog
from toolbox.gateway import Gateway
from toolbox.governance import Governance
from toolbox.policy import ToolPolicy
from toolbox.service.kill_switch import KillSwitchControl

__all__ = ["ServedGateway"]


@final
class ServedGateway:
    """Loads the catalog once (discovery + policy) and owns the current `Gateway`.

    Args:
        policy: the policy every call is decided by.
        providers: explicit providers, besides the installed ones when ``discover``.
        discover: load the ``toolbox.providers`` entry points.
        env: the environment for acknowledgements and the kill switch variable.
        governance: the chain's configuration from code (the policy file adds its own).
    """

    __slots__ = ("_base", "_catalog", "_gateway", "kill_switch")

    def __init__(
        self,
        *,
        policy: ToolPolicy,
        providers: tuple[object, ...] = (),
        discover: bool = True,
        env: Mapping[str, str],
        governance: Governance | None = None,
    ) -> None:
        self.kill_switch = KillSwitchControl(env, self._rebuild)
        base = governance if governance is not None else Governance()
        self._catalog = Catalog.load(
            policy=policy, providers=providers, discover=discover, env=self.kill_switch.env, governance=base
        )
        # Rebuilds reuse the trail the first load built from the policy file, never a second one.
        self._base = base.replace(audit=self._catalog.audit)
        self._gateway = Gateway(self._catalog)

    @property
    def gateway(self) -> Gateway:
        """The gateway new calls go through."""
        return self._gateway

    @property
    def catalog(self) -> Catalog:
        """The current catalog."""
        return self._catalog

    @property
    def audit(self) -> AuditTrail | None:
        """The audit trail (the policy file's ``[audit]`` or the code's)."""
        return self._catalog.audit

    def _rebuild(self, stopped: frozenset[str]) -> None:
        old = self._catalog
        registered = [entry.registered for name in old.names() if (entry := old.entry(name)) is not None]
        catalog = Catalog(
            old.policy,
            registered,
            broken=old.broken_providers,
            blocked=old.blocked_distributions,
            env=self.kill_switch.env,
            governance=self._base.replace(disabled_tools=tuple(sorted(stopped))),
        )
        self._catalog, self._gateway = catalog, Gateway(catalog)

    def close(self) -> None:
        """Close the gateway's tools and the audit trail."""
        self._gateway.close()
        trail = self.audit
        if trail is not None:
            trail.close()
