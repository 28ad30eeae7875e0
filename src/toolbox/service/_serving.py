"""`ServedGateway`: the catalog, gateway and governance state the service calls through.

The service always has a kill-switch store and an approval store: those of
the code's `Governance(state=...)`, else of the policy file's ``[state]``,
else this process's memory. Approval requests are submitted to the store by
the chain itself; the console and the API decide them there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import final

from toolbox.audit._trail import AuditTrail
from toolbox.doors._catalog import Catalog
from toolbox.doors._gateway import Gateway
from toolbox.governance import Governance
from toolbox.pipeline._state_ports import ApprovalStore
from toolbox.registry._policy import ToolPolicy
from toolbox.service._kill_switch import KillSwitchControl
from toolbox.state._config import GovernanceState, state_from_policy
from toolbox.state._memory import MemoryApprovalStore, MemoryKillSwitchStore

__all__ = ["ServedGateway", "service_state"]


def service_state(
    policy: ToolPolicy, governance: Governance, approvals: ApprovalStore | None
) -> GovernanceState:
    """The governance state the service runs on, with a kill-switch and an approval store."""
    state = governance.state if governance.state is not None else state_from_policy(policy)
    if state is None:
        # This process alone: a change of a memory switch is seen by the next call.
        state = GovernanceState(kill_switch_refresh=0.0)
    changes: dict[str, object] = {}
    if state.kill is None:
        changes["kill"] = MemoryKillSwitchStore()
    if approvals is not None:
        changes["approvals"] = approvals
    elif state.approvals is None:
        changes["approvals"] = MemoryApprovalStore()
    return dataclasses.replace(state, **changes) if changes else state  # type: ignore[arg-type]


@final
class ServedGateway:
    """Loads the catalog once (discovery + policy) and owns the `Gateway`.

    Args:
        policy: the policy every call is decided by.
        providers: explicit providers, besides the installed ones when ``discover``.
        discover: load the ``toolbox.providers`` entry points.
        env: the environment for acknowledgements and the kill switch variable.
        governance: the chain's configuration from code (the policy file adds its own).
        approvals: the approval store, overriding the state's.
    """

    __slots__ = ("_catalog", "_gateway", "_state", "approvals", "kill_switch")

    def __init__(
        self,
        *,
        policy: ToolPolicy,
        providers: tuple[object, ...] = (),
        discover: bool = True,
        env: Mapping[str, str],
        governance: Governance | None = None,
        approvals: ApprovalStore | None = None,
    ) -> None:
        base = governance if governance is not None else Governance()
        state = service_state(policy, base, approvals)
        assert state.kill is not None and state.approvals is not None
        self._state = state
        self._catalog = Catalog.load(
            policy=policy,
            providers=providers,
            discover=discover,
            env=env,
            governance=base.replace(state=state),
        )
        self._gateway = Gateway(self._catalog)
        self.kill_switch = KillSwitchControl(state.kill, env)
        #: Where approval requests wait for a decision.
        self.approvals: ApprovalStore = state.approvals

    @property
    def shared_state(self) -> bool:
        """Whether kill switches and approvals live in a store other processes see (sql or redis)."""
        return self._state.backend != "memory"

    @property
    def gateway(self) -> Gateway:
        """The gateway every call goes through."""
        return self._gateway

    @property
    def catalog(self) -> Catalog:
        """The catalog."""
        return self._catalog

    @property
    def audit(self) -> AuditTrail | None:
        """The audit trail (the policy file's ``[audit]`` or the code's)."""
        return self._catalog.audit

    def close(self) -> None:
        """Close the gateway's tools, the audit trail and the state stores' connections."""
        self._gateway.close()
        trail = self.audit
        if trail is not None:
            trail.close()
        self._state.close()
