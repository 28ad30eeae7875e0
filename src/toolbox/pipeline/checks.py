"""Small built-in checks: kill switch, delegation scope, tool access, deadline, budget."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import final

from toolbox.errors import ToolDeniedError, ToolUnavailableError
from toolbox.pipeline.invocation import BY_NAME, Invocation
from toolbox.pipeline.result import ToolResult

__all__ = ["AccessCheck", "BudgetCheck", "DeadlineCheck", "DelegationCheck", "KillSwitch"]

KILL_SWITCH_ENV = "TOOLBOX_KILL_SWITCH"
_OFF_VALUES = frozenset({"", "0", "off", "false", "no"})


@final
class KillSwitch:
    """Stops every call (or every call of some tools): DENIED/KILL_SWITCH.

    Engaged when ``enabled`` is False, or when the environment variable
    ``TOOLBOX_KILL_SWITCH`` holds anything but an empty string, ``0``, ``off``,
    ``false`` or ``no`` (so a typo engages it rather than silently not). The
    ``env`` mapping (default ``os.environ``) is read on every call: pass one
    your application keeps current to stop a running fleet without a restart.
    """

    name = "kill_switch"
    per_attempt = True
    __slots__ = ("_disabled_tools", "_enabled", "_env")

    def __init__(
        self,
        *,
        enabled: bool = True,
        disabled_tools: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(f"enabled must be a bool, got {type(enabled).__name__}")
        self._enabled = enabled
        self._disabled_tools = frozenset(disabled_tools)
        self._env: Mapping[str, str] = os.environ if env is None else env

    def engaged(self, tool: str | None = None) -> bool:
        """Whether calls (of ``tool``) are stopped right now."""
        if not self._enabled:
            return True
        value = self._env.get(KILL_SWITCH_ENV)
        if value and value.strip().lower() not in _OFF_VALUES:
            return True
        return tool is not None and tool in self._disabled_tools

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        if self.engaged(invocation.tool):
            return invocation.denied(
                "KILL_SWITCH", "kill_switch", "tool calls are stopped by the kill switch"
            )
        return None


@final
class DelegationCheck:
    """Refuses what a delegated context's scope does not allow: DENIED/DELEGATION_SCOPE.

    Runs before access and validation, so an out-of-scope call learns nothing
    about the tool or its arguments.
    """

    name = "delegation"
    per_attempt = False
    __slots__ = ()

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        scope = invocation.context.scope
        if scope is None or scope.allows(invocation.tool, invocation.operation):
            return None
        return invocation.denied(
            "DELEGATION_SCOPE",
            "delegation:scope",
            f"{invocation.tool}.{invocation.operation} is outside this delegated run's scope",
        )


@final
class AccessCheck:
    """Registry, policy and acknowledgement, the same decisions as ``Tools.get``.

    The by-name door resolves the tool here; the typed door got its tool from
    ``get()`` already, and only the acknowledgement is re-checked.
    """

    name = "access"
    per_attempt = False
    __slots__ = ()

    @staticmethod
    def applies(invocation: Invocation) -> bool:
        """Typed calls of tools without an acknowledgement were fully checked by ``get()``."""
        descriptor = invocation.descriptor
        return invocation.door == BY_NAME or descriptor is None or descriptor.acknowledgement is not None

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        tools = invocation.tools
        if tools is None:  # pragma: no cover - both doors always attach the tools
            raise RuntimeError("invocation has no tools attached")
        version = invocation.version
        descriptor = invocation.descriptor
        if version is not None and descriptor and not _version_matches(descriptor.version, version):
            return invocation.denied(
                "TOOL_UNAVAILABLE",
                "registry:version",
                f"version {version!r} of {invocation.tool!r} is not registered "
                f"(registered: {descriptor.version})",
            )
        try:
            if invocation.door == BY_NAME:
                tool = tools.acquire(invocation.tool)
                runtime = tools.runtime_of(invocation.tool)
                invocation.runtime = runtime
                invocation.descriptor = runtime.descriptor
                invocation.effect = runtime.effect_of(invocation.operation)
                invocation.instance = tool
            else:
                tools.check_acknowledgement(invocation.tool, report=False)
        except ToolUnavailableError as exc:
            return invocation.denied(exc.reason_code, "registry", str(exc))
        except ToolDeniedError as exc:
            invocation.error = exc
            return invocation.denied(exc.reason_code, exc.rule, str(exc))
        return None


def _version_matches(registered: str, requested: str) -> bool:
    wanted = requested[1:] if requested[:1] in ("v", "V") else requested
    return registered == wanted or registered.split(".", maxsplit=1)[0] == wanted


@final
class DeadlineCheck:
    """Refuses calls (and retries) after the context's deadline: DENIED/DEADLINE_EXCEEDED."""

    name = "deadline"
    per_attempt = True
    __slots__ = ()

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        deadline = invocation.context.deadline
        if deadline is not None and datetime.now(timezone.utc) >= deadline:
            return invocation.denied(
                "DEADLINE_EXCEEDED", "context:deadline", "the context's deadline has passed"
            )
        return None


@final
class BudgetCheck:
    """Counts the call against the context's budget: DENIED/BUDGET_EXHAUSTED when spent."""

    name = "budget"
    per_attempt = False
    __slots__ = ()

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        budget = invocation.context.budget
        if budget is None:
            return None
        exhausted = budget.try_consume(invocation.tool)
        if exhausted is not None:
            return invocation.denied(
                "BUDGET_EXHAUSTED", exhausted, f"the run's tool-call budget is spent ({exhausted})"
            )
        return None
