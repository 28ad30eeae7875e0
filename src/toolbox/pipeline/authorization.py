"""Authorization: may this caller, for this tenant, with these arguments, do this now?

Authorizers run on every attempt, inside the retry boundary. An authorizer
that raises fails closed (DENIED/GOVERNANCE_EVALUATION_FAILED).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, final

from toolbox.context import ExecutionContext
from toolbox.errors import ConfigurationError
from toolbox.pipeline.invocation import Invocation
from toolbox.pipeline.result import ToolResult

__all__ = ["AuthorizationCheck", "Authorizer", "Decision", "RolePolicy", "TenantScope"]


@final
class Decision:
    """An authorizer's answer. Build it with `Decision.allow` or `Decision.deny`."""

    __slots__ = ("allowed", "reason")

    def __init__(self, allowed: bool, reason: str) -> None:
        self.allowed = allowed
        self.reason = reason

    @classmethod
    def allow(cls) -> Decision:
        """Let the call continue."""
        return _ALLOW

    @classmethod
    def deny(cls, reason: str) -> Decision:
        """Refuse the call; ``reason`` is shown to the caller and recorded (no secrets)."""
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("a denial needs a reason, e.g. Decision.deny('not your tenant')")
        return cls(False, reason)

    def __repr__(self) -> str:
        return "Decision.allow()" if self.allowed else f"Decision.deny({self.reason!r})"


_ALLOW = Decision(True, "")


class Authorizer(Protocol):
    """``(tool, operation, context, arguments) -> Decision``, for every attempt."""

    def __call__(
        self, tool: str, operation: str, context: ExecutionContext, arguments: Mapping[str, Any]
    ) -> Decision:
        """Decide for one attempt."""


@final
class AuthorizationCheck:
    """Runs every authorizer in order; the first denial wins (DENIED/AUTH_DENIED)."""

    name = "authorization"
    per_attempt = True
    __slots__ = ("_authorizers",)

    def __init__(self, authorizers: Sequence[Authorizer]) -> None:
        self._authorizers = tuple(authorizers)

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        for index, authorizer in enumerate(self._authorizers):
            decision = authorizer(
                invocation.tool, invocation.operation, invocation.context, invocation.arguments
            )
            if not isinstance(decision, Decision):
                raise TypeError(f"authorizer {index} returned {type(decision).__name__}, not a Decision")
            if not decision.allowed:
                rule = getattr(authorizer, "rule", f"authorizer:{index}")
                return invocation.denied("AUTH_DENIED", str(rule), decision.reason)
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
