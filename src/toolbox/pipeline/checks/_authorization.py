"""Authorization: may this caller, for this tenant, with these arguments, do this now?

Authorizers run on every attempt, inside the retry boundary. An authorizer
that raises fails closed (DENIED/GOVERNANCE_EVALUATION_FAILED). An
`Authorizer` sees the tool, the operation, the context and the validated
arguments; an `InvocationAuthorizer` sees the whole `Invocation` (the tool's
risk, the operation's effect, the declared intent) and is what
`toolbox.pipeline.checks._cedar.CedarAuthorizer` is.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, final, runtime_checkable

from toolbox.errors import ConfigurationError
from toolbox.foundations._context import ExecutionContext
from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline._result import ToolResult

__all__ = [
    "AuthorizationCheck",
    "Authorizer",
    "Decision",
    "InvocationAuthorizer",
    "RolePolicy",
    "TenantScope",
]


@final
class Decision:
    """An authorizer's answer. Build it with `Decision.allow` or `Decision.deny`.

    ``policies`` names the policies that determined the answer (e.g. Cedar
    policy ids); they are recorded in the audit event's ``rule_ids`` as
    ``<authorizer rule>:<policy>``.
    """

    __slots__ = ("allowed", "policies", "reason")

    def __init__(self, allowed: bool, reason: str, policies: tuple[str, ...] = ()) -> None:
        self.allowed = allowed
        self.reason = reason
        self.policies = policies

    @classmethod
    def allow(cls, *, policies: Iterable[str] = ()) -> Decision:
        """Let the call continue; ``policies`` are the ones that permitted it, if known."""
        named = _policy_names(policies)
        return cls(True, "", named) if named else _ALLOW

    @classmethod
    def deny(cls, reason: str, *, policies: Iterable[str] = ()) -> Decision:
        """Refuse the call; ``reason`` is shown to the caller and recorded (no secrets)."""
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("a denial needs a reason, e.g. Decision.deny('not your tenant')")
        return cls(False, reason, _policy_names(policies))

    def __repr__(self) -> str:
        named = f", policies={list(self.policies)!r}" if self.policies else ""
        if self.allowed:
            return f"Decision.allow({named[2:]})"
        return f"Decision.deny({self.reason!r}{named})"


def _policy_names(policies: Iterable[str]) -> tuple[str, ...]:
    if isinstance(policies, str):
        raise TypeError("policies must be an iterable of policy ids, not one string")
    named = tuple(policies)
    if not all(isinstance(p, str) and p for p in named):
        raise ValueError("policy ids must be non-empty strings")
    return named


_ALLOW = Decision(True, "")


class Authorizer(Protocol):
    """``(tool, operation, context, arguments) -> Decision``, for every attempt.

    The parameters are positional-only, so an implementation may name them as it likes.
    """

    def __call__(
        self, tool: str, operation: str, context: ExecutionContext, arguments: Mapping[str, Any], /
    ) -> Decision:
        """Decide for one attempt."""


@runtime_checkable
class InvocationAuthorizer(Protocol):
    """An authorizer that judges the whole `Invocation`: risk, effect and intent included."""

    def authorize(self, invocation: Invocation, /) -> Decision:
        """Decide for one attempt."""


def _judge(authorizer: Authorizer | InvocationAuthorizer) -> Callable[[Invocation], Decision]:
    """One calling convention for both kinds of authorizer, chosen once."""
    if isinstance(authorizer, InvocationAuthorizer):
        return authorizer.authorize
    plain = authorizer

    def judge(invocation: Invocation) -> Decision:
        return plain(invocation.tool, invocation.operation, invocation.context, invocation.arguments)

    return judge


@final
class AuthorizationCheck:
    """Runs every authorizer in order; the first denial wins (DENIED/AUTH_DENIED)."""

    name = "authorization"
    per_attempt = True
    __slots__ = ("_judges",)

    def __init__(self, authorizers: Sequence[Authorizer | InvocationAuthorizer]) -> None:
        self._judges = tuple(
            (_judge(a), str(getattr(a, "rule", f"authorizer:{index}"))) for index, a in enumerate(authorizers)
        )

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        determining: tuple[str, ...] = ()
        for index, (judge, rule) in enumerate(self._judges):
            decision = judge(invocation)
            if not isinstance(decision, Decision):
                raise TypeError(f"authorizer {index} returned {type(decision).__name__}, not a Decision")
            if decision.policies:
                determining += tuple(f"{rule}:{policy}" for policy in decision.policies)
            if not decision.allowed:
                # Only this attempt's determining policies: earlier permits did not decide a denial.
                invocation.authorization_rules = tuple(f"{rule}:{p}" for p in decision.policies)
                shown = invocation.authorization_rules[0] if decision.policies else rule
                return invocation.denied("AUTH_DENIED", shown, decision.reason)
        invocation.authorization_rules = determining
        return None


@final
class RolePolicy:
    """Which roles may use which tools: ``{"analyst": ["calculator", "http.get"], "admin": ["*"]}``.

    Patterns match ``tool`` or ``tool.operation`` (``*`` wildcards allowed). A
    principal without a matching role is denied.
    """

    rule = "roles"
    __slots__ = ("_grants",)

    def __init__(self, grants: Mapping[str, Iterable[str]]) -> None:
        checked: dict[str, tuple[str, ...]] = {}
        for role, patterns in grants.items():
            if not isinstance(role, str) or not role:
                raise ConfigurationError(f"role names must be non-empty strings, got {role!r}")
            if isinstance(patterns, str):
                raise ConfigurationError(f"roles.{role} must be a list of tool patterns, not a string")
            listed = tuple(patterns)
            for pattern in listed:
                if not isinstance(pattern, str) or not pattern:
                    raise ConfigurationError(f"roles.{role}: patterns must be non-empty strings")
            checked[role] = listed
        self._grants = checked

    def __call__(
        self, tool: str, operation: str, context: ExecutionContext, arguments: Mapping[str, Any]
    ) -> Decision:
        qualified = f"{tool}.{operation}"
        for role in context.roles:
            for pattern in self._grants.get(role, ()):
                if fnmatch.fnmatchcase(tool, pattern) or fnmatch.fnmatchcase(qualified, pattern):
                    return Decision.allow()
        roles = ", ".join(sorted(context.roles)) or "none"
        return Decision.deny(f"no role of the principal ({roles}) grants {qualified}")


@final
class TenantScope:
    """Resource-scoped tenant check: the resource's tenant must equal the caller's.

    ``resource_tenant(tool, operation, arguments)`` returns the tenant that owns
    the resource the call touches, or None when it cannot tell. It applies to
    the tools matching ``scoped`` (all by default). A check that only tests for
    a non-empty tenant is no check at all: this compares the two values, and
    fails closed when the owner cannot be determined.
    """

    rule = "tenant"
    __slots__ = ("_resource_tenant", "_scoped")

    def __init__(
        self,
        resource_tenant: Callable[[str, str, Mapping[str, Any]], str | None],
        *,
        scoped: Iterable[str] = ("*",),
    ) -> None:
        self._resource_tenant = resource_tenant
        self._scoped = tuple(scoped)

    def __call__(
        self, tool: str, operation: str, context: ExecutionContext, arguments: Mapping[str, Any]
    ) -> Decision:
        qualified = f"{tool}.{operation}"
        if not any(fnmatch.fnmatchcase(t, p) for p in self._scoped for t in (tool, qualified)):
            return Decision.allow()
        owner = self._resource_tenant(tool, operation, arguments)
        if owner is None:
            return Decision.deny(f"cannot tell which tenant owns the resource of {qualified}")
        if owner != context.tenant:
            return Decision.deny(f"the resource belongs to another tenant than {context.tenant!r}")
        return Decision.allow()
