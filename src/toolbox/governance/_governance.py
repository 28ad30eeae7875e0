"""`Governance`: the configuration of the chain every call runs through."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, final

from toolbox.audit._redaction import Redaction
from toolbox.audit._trail import AuditTrail
from toolbox.errors import ConfigurationError
from toolbox.pipeline._audit_hooks import AuditHook
from toolbox.pipeline._chain import Pipeline
from toolbox.pipeline._interceptor import Interceptor
from toolbox.pipeline._outcomes import OutcomeMapper, OutcomeMappers
from toolbox.pipeline._retry import Reconciler, RetryPolicy
from toolbox.pipeline._state_ports import DEFAULT_MAX_PENDING, Clock
from toolbox.pipeline.checks._approval import ApprovalCheck, Approver
from toolbox.pipeline.checks._approval_display import use_cleaner
from toolbox.pipeline.checks._arguments import ArgumentLimits, ArgumentValidation
from toolbox.pipeline.checks._authorization import (
    AuthorizationCheck,
    Authorizer,
    InvocationAuthorizer,
    RolePolicy,
)
from toolbox.pipeline.checks._builtin import (
    AccessCheck,
    BudgetCheck,
    DeadlineCheck,
    DelegationCheck,
    KillSwitch,
)
from toolbox.pipeline.checks._guardrails import Guardrail, GuardrailMode, Guardrails, guardrails_from_config
from toolbox.pipeline.checks._shared_limits import SharedLimits
from toolbox.state._config import GovernanceState

if TYPE_CHECKING:
    from toolbox.registry._policy import ToolPolicy

__all__ = ["Governance"]

# Approval requests show arguments with the audit trail's default redaction.
use_cleaner(Redaction())


@final
class Governance:
    """How calls are governed. Immutable; the defaults are the safe ones.

    Args:
        enabled: False engages the kill switch (every call DENIED/KILL_SWITCH).
        disabled_tools: tools stopped by the kill switch.
        authorizers: `Authorizer` callables and `InvocationAuthorizer` objects (such as
            `CedarAuthorizer`), run on every attempt in order.
        roles: a role-to-tool mapping turned into a `RolePolicy` authorizer.
        limits: guards on by-name arguments (64 KiB, depth 64, 1000 items).
        guardrails: ordered `Guardrail` rules.
        guardrail_mode: ``ENFORCE`` (default) or ``REPORT`` (DENY becomes WARN).
        approver: verifies approval grants; without one, approvals cannot be resumed.
        retry: the `RetryPolicy` for retryable effects.
        reconcilers: `Reconciler` callables by ``tool`` or ``tool.operation``.
        mappers: business-outcome mappers by ``tool`` or ``tool.operation``.
        timeouts: per-operation timeouts in seconds, by ``tool`` or ``tool.operation``.
        interceptors: your own `Interceptor` objects, run after the built-in checks.
        audit_hooks: `AuditHook` objects called around dispatch.
        audit: the `AuditTrail` (its hooks run first); a policy file's ``[audit]`` builds one.
        state: where the kill switches, shared budgets, rate limits and approvals live
            (`toolbox.state.GovernanceState`); a policy file's ``[state]`` builds one.
            None: this process alone, today's behaviour (docs/fleet.md).
        clock: wall-clock seconds the chain reads for deadlines, approval requests and grants
            (``time.time``); tests pass a `toolbox.testing.ManualClock` and move time instead of
            sleeping (give the state stores the same clock).
    """

    __slots__ = ("_settings",)

    def __init__(
        self,
        *,
        enabled: bool = True,
        disabled_tools: Iterable[str] = (),
        authorizers: Sequence[Authorizer | InvocationAuthorizer] = (),
        roles: Mapping[str, Iterable[str]] | None = None,
        limits: ArgumentLimits | None = None,
        guardrails: Sequence[Guardrail] = (),
        guardrail_mode: GuardrailMode | str = GuardrailMode.ENFORCE,
        approver: Approver | None = None,
        retry: RetryPolicy | None = None,
        reconcilers: Mapping[str, Reconciler] | None = None,
        mappers: Mapping[str, OutcomeMapper] | None = None,
        timeouts: Mapping[str, float] | None = None,
        interceptors: Sequence[Interceptor] = (),
        audit_hooks: Sequence[AuditHook] = (),
        audit: AuditTrail | None = None,
        state: GovernanceState | None = None,
        clock: Clock = time.time,
    ) -> None:
        for interceptor in interceptors:
            if not isinstance(interceptor, Interceptor):
                raise ConfigurationError(
                    f"{interceptor!r} is not an interceptor: it needs name, per_attempt and __call__"
                )
        for key, seconds in (timeouts or {}).items():
            if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds <= 0:
                raise ConfigurationError(f"timeout for {key!r} must be a positive number of seconds")
        self._settings: dict[str, Any] = {
            "enabled": enabled,
            "disabled_tools": tuple(disabled_tools),
            "authorizers": tuple(authorizers),
            "roles": dict(roles) if roles is not None else None,
            "limits": limits or ArgumentLimits(),
            "guardrails": tuple(guardrails),
            "guardrail_mode": guardrail_mode,
            "approver": approver,
            "retry": retry or RetryPolicy(),
            "reconcilers": dict(reconcilers or {}),
            "mappers": dict(mappers or {}),
            "timeouts": dict(timeouts or {}),
            "interceptors": tuple(interceptors),
            "audit_hooks": tuple(audit_hooks),
            "audit": audit,
            "state": state,
            "clock": clock,
        }
        # Fail at configuration time, not on the first call.
        Guardrails(self._settings["guardrails"], mode=guardrail_mode)
        if roles is not None:
            RolePolicy(roles)
        OutcomeMappers(self._settings["mappers"])

    def replace(self, **changes: Any) -> Governance:
        """A copy with ``changes`` applied."""
        return Governance(**{**self._settings, **changes})

    def with_policy(self, policy: ToolPolicy) -> Governance:
        """Add the roles, Cedar authorizer, audit and guardrails a policy file declares.

        Code settings come first: the file's Cedar authorizer runs after the code's authorizers.
        """
        config = policy.governance
        if not config:
            return self
        changes: dict[str, Any] = {}
        if "roles" in config and self._settings["roles"] is None:
            changes["roles"] = config["roles"]
        if "audit" in config and self._settings["audit"] is None:
            from toolbox.audit._config import trail_from_config

            changes["audit"] = trail_from_config(config["audit"], source=policy.source or "policy")
        if "state" in config and self._settings["state"] is None:
            from toolbox.state._config import state_from_config

            changes["state"] = state_from_config(config["state"], source=policy.source or "policy")
        if "cedar" in config:
            changes["authorizers"] = (*self._settings["authorizers"], config["cedar"])
        if "guardrails" in config:
            parsed = guardrails_from_config(config["guardrails"], source=policy.source or "policy")
            # The file's mode applies to the file's rules only; code rules keep the code's mode.
            changes["guardrails"] = (*self._settings["guardrails"], *parsed.rules)
        return self.replace(**changes) if changes else self

    def build(self, *, env: Mapping[str, str] | None = None) -> Pipeline:
        """The `Pipeline` these settings describe. ``env`` feeds the kill switch variable."""
        s = self._settings
        state: GovernanceState | None = s["state"]
        authorizers = list(s["authorizers"])
        if s["roles"] is not None:
            authorizers.insert(0, RolePolicy(s["roles"]))
        # Validation runs before authorization (a deliberate change from the target design's order):
        # authorizers must judge validated, typed arguments, the same on both doors, never raw JSON.
        checks: list[Interceptor] = [
            KillSwitch(
                enabled=s["enabled"],
                disabled_tools=s["disabled_tools"],
                env=os.environ if env is None else env,
                store=state.kill if state is not None else None,
                refresh=state.kill_switch_refresh if state is not None else 1.0,
                max_stale=state.kill_switch_hold if state is not None else 0.0,
            ),
            DelegationCheck(),
            AccessCheck(),
            DeadlineCheck(s["clock"]),
            ArgumentValidation(s["limits"]),
        ]
        if authorizers:
            checks.append(AuthorizationCheck(authorizers))
        guardrails = Guardrails(s["guardrails"], mode=s["guardrail_mode"]) if s["guardrails"] else None
        if guardrails is not None:
            checks.append(guardrails)
        checks.extend(s["interceptors"])
        # The approval check verifies a grant (or asks for one); what is spent comes last and runs
        # after the audit request (the checks marked ``spends``): a call refused anywhere spends nothing.
        redaction = s["audit"].redaction if s["audit"] is not None else None
        approval = ApprovalCheck(
            s["approver"],
            guardrails=guardrails,
            redaction=redaction,
            store=state.approvals if state is not None else None,
            limits=state.limits if state is not None and state.backend != "memory" else None,
            request_ttl=state.approval_ttl if state is not None else 3600.0,
            max_pending=state.max_pending_approvals if state is not None else DEFAULT_MAX_PENDING,
            clock=s["clock"],
        )
        checks.append(approval)
        checks.append(BudgetCheck())
        if state is not None and (state.budgets or state.rate_limits):
            # The fleet's limits count last: a call any other check refuses spends none of them.
            checks.append(
                SharedLimits(
                    state.limits,
                    budgets=state.budgets,
                    rates=state.rate_limits,
                    fail_open_rates=state.rate_limits_fail_open,
                )
            )
        # The grant is spent last, by a call that is dispatched: a rate or budget refusal keeps it.
        checks.append(approval.redemption())
        hooks = (s["audit"],) * (s["audit"] is not None) + s["audit_hooks"]
        # The typed fast path records through the trail itself, when it is the only hook.
        only = hooks[0] if len(hooks) == 1 else None
        return Pipeline(
            checks,
            retry=s["retry"],
            reconcilers=s["reconcilers"],
            mappers=OutcomeMappers(s["mappers"]),
            timeouts=s["timeouts"],
            hooks=hooks,
            recorder=only if type(only) is AuditTrail else None,
        )

    @property
    def state(self) -> GovernanceState | None:
        """Where governance state lives (its ``approvals`` store is what a console decides in), if set."""
        state: GovernanceState | None = self._settings["state"]
        return state

    @property
    def audit(self) -> AuditTrail | None:
        """The audit trail, if any."""
        trail: AuditTrail | None = self._settings["audit"]
        return trail
