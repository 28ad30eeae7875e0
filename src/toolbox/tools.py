"""`Tools`: the registry a program asks for tools.

Decisions are computed once in `Tools.load`: policies and descriptors are
immutable. ``get()`` is a lookup, plus an environment check for tools that
require a deployment acknowledgement.
"""

from __future__ import annotations

import enum
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, final, overload

from toolbox.context import DenialRecord, ExecutionContext
from toolbox.descriptor import Acknowledgement, RiskClass, ToolDescriptor
from toolbox.discovery import BrokenProvider, RegisteredTool
from toolbox.discovery import discover as discover_tools
from toolbox.errors import (
    AcknowledgementRequiredError,
    ToolPolicyDeniedError,
    ToolUnavailableError,
)
from toolbox.policy import PolicyDecision, ReasonCode, ToolPolicy
from toolbox.runtime import ToolRuntime

__all__ = ["AcknowledgementState", "ToolDecision", "Tools"]

POLICY_ENV = "TOOLBOX_POLICY"

T = TypeVar("T")


class AcknowledgementState(str, enum.Enum):
    """Whether a tool's deployment acknowledgement is in place."""

    NOT_REQUIRED = "NOT_REQUIRED"
    SATISFIED = "SATISFIED"
    MISSING = "MISSING"
    MISMATCH = "MISMATCH"


@final
@dataclass(frozen=True)
class ToolDecision:
    """Whether a tool is usable now, and why. Returned by `Tools.explain`."""

    tool: str
    allowed: bool
    """True when ``get()`` would return the tool."""
    reason_code: str
    """``ALLOWED``, ``POLICY_DENIED``, ``NOT_ACKNOWLEDGED`` or ``TOOL_UNAVAILABLE``."""
    rule: str
    """The rule that decided, e.g. ``allow:tool:http`` or ``default:deny``."""
    risk: RiskClass | None = None
    distribution: str | None = None
    acknowledgement: AcknowledgementState = AcknowledgementState.NOT_REQUIRED
    acknowledgement_env: str | None = None
    acknowledgement_value: str | None = None
    detail: str = ""
    """A sentence for people saying what to do."""

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready mapping."""
        return {
            "tool": self.tool,
            "allowed": self.allowed,
            "reason_code": self.reason_code,
            "rule": self.rule,
            "risk": self.risk.value if self.risk else None,
            "distribution": self.distribution,
            "acknowledgement": self.acknowledgement.value,
            "acknowledgement_env": self.acknowledgement_env,
            "acknowledgement_value": self.acknowledgement_value,
            "detail": self.detail,
        }

    def __str__(self) -> str:
        verdict = "allowed" if self.allowed else "denied"
        return f"{self.tool}: {verdict} ({self.reason_code}, rule {self.rule}). {self.detail}".strip()


def _acknowledgement_state(ack: Acknowledgement | None, env: Mapping[str, str]) -> AcknowledgementState:
    if ack is None:
        return AcknowledgementState.NOT_REQUIRED
    current = env.get(ack.env)
    if current is None:
        return AcknowledgementState.MISSING
    # Exact comparison on purpose: no trimming, no case folding.
    return AcknowledgementState.SATISFIED if current == ack.value else AcknowledgementState.MISMATCH


@final
class _Entry:
    __slots__ = ("decision", "instance", "registered", "runtime")

    def __init__(self, registered: RegisteredTool, decision: PolicyDecision) -> None:
        self.registered = registered
        self.decision = decision
        self.instance: object | None = None
        self.runtime: ToolRuntime | None = None


def _ref_name(ref: object) -> str:
    return ref.__qualname__ if isinstance(ref, type) else str(ref)


@final
class Tools:
    """The tools available to one `ExecutionContext`, filtered by a `ToolPolicy`.

    Build it with `Tools.load`. Use `has`, `get` and `explain` with a tool type
    (``HttpTool``) or a tool name (``"http"``).
    """

    __slots__ = (
        "_blocked",
        "_broken",
        "_by_name",
        "_context",
        "_entries",
        "_env",
        "_lock",
        "_options",
        "_policy",
        "_ready",
    )

    def __init__(
        self,
        context: ExecutionContext,
        policy: ToolPolicy,
        tools: Iterable[RegisteredTool],
        *,
        broken: Iterable[BrokenProvider] = (),
        blocked: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        if not isinstance(context, ExecutionContext):
            raise TypeError(
                "context must be a toolbox.ExecutionContext built by the application "
                f"after authentication, got {type(context).__name__}"
            )
        self._context = context
        self._policy = policy
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._broken = tuple(broken)
        self._blocked = tuple(sorted(set(blocked)))
        self._lock = threading.Lock()
        self._entries: dict[object, _Entry] = {}
        self._by_name: dict[str, _Entry] = {}
        for tool in tools:
            entry = _Entry(tool, policy.decide(tool.descriptor, tool.provider.tool_type))
            self._entries[tool.descriptor.name] = entry
            self._entries[tool.provider.tool_type] = entry
            self._by_name[tool.descriptor.name] = entry
        self._options = dict(options or {})
        for name in self._options:
            if name not in self._by_name:
                raise ValueError(
                    f"options given for unknown tool {name!r}; installed tools: "
                    f"{', '.join(sorted(self._by_name)) or 'none'}"
                )
        # Allowed tools without an acknowledgement, once built: get() is one lookup.
        self._ready: dict[object, object] = {}

    @classmethod
    def load(
        cls,
        context: ExecutionContext,
        *,
        policy: ToolPolicy | None = None,
        providers: Iterable[object] = (),
        discover: bool = True,
        env: Mapping[str, str] | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Tools:
        """Discover providers and decide, once, which tools ``context`` may use.

        Args:
            context: the trusted context built by the application.
            policy: the policy; when omitted, the file named by ``TOOLBOX_POLICY``
                is read, else `ToolPolicy.standard` applies.
            providers: `ToolProvider` objects or plugin modules to register explicitly.
            discover: also load installed ``toolbox.providers`` entry points.
            env: environment for acknowledgements and ``TOOLBOX_POLICY``
                (defaults to ``os.environ``; inject a dict in tests).
            options: tool settings keyed by tool name, e.g. ``{"fs": {"roots": [...]}}``.

        Raises:
            ProviderConflictError: two providers claim one tool.
            PolicyFileError: the policy file is malformed or names an unknown tool.
            TypeError: ``context``, ``policy`` or a ``providers`` item has the wrong type.
            ValueError: ``options`` names a tool nobody provides.
        """
        environ: Mapping[str, str] = os.environ if env is None else env
        if policy is None:
            path = environ.get(POLICY_ENV)
            policy = ToolPolicy.from_file(path) if path else ToolPolicy.standard()
        elif not isinstance(policy, ToolPolicy):
            raise TypeError(f"policy must be a toolbox.ToolPolicy, got {type(policy).__name__}")
        found = discover_tools(policy, providers, entry_points=discover)
        policy.check_known_tools(t.descriptor.name for t in found.tools)
        return cls(
            context,
            policy,
            found.tools,
            broken=found.broken,
            blocked=found.blocked,
            env=env,
            options=options,
        )

    # -- queries ----------------------------------------------------------

    @property
    def context(self) -> ExecutionContext:
        """The context these tools act in."""
        return self._context

    @property
    def policy(self) -> ToolPolicy:
        """The policy that decided."""
        return self._policy

    @property
    def broken_providers(self) -> tuple[BrokenProvider, ...]:
        """Providers that failed to load, with their distribution and error."""
        return self._broken

    @property
    def blocked_distributions(self) -> tuple[str, ...]:
        """Installed provider distributions the policy refused to load."""
        return self._blocked

    def descriptors(self) -> list[ToolDescriptor]:
        """Descriptors of every registered tool, sorted by name (allowed or not)."""
        return [self._by_name[n].registered.descriptor for n in sorted(self._by_name)]

    def distribution_of(self, ref: type | str) -> str | None:
        """The distribution that provided ``ref``, or None."""
        entry = self._entries.get(ref)
        return entry.registered.distribution if entry else None

    def has(self, ref: type | str) -> bool:
        """Whether a provider registered ``ref`` (a tool type or name). Says nothing of policy."""
        return ref in self._entries

    def executions(self, ref: type | str) -> int:
        """How many operations of ``ref`` started executing through these tools."""
        entry = self._entries.get(ref)
        return entry.runtime.executions if entry and entry.runtime else 0

    def explain(self, ref: type | str) -> ToolDecision:
        """The decision for ``ref``: allowed or not, reason code, rule, acknowledgement state."""
        entry = self._entries.get(ref)
        if entry is None:
            return ToolDecision(
                tool=_ref_name(ref),
                allowed=False,
                reason_code=ReasonCode.TOOL_UNAVAILABLE.value,
                rule="registry",
                detail=self._unavailable_detail(ref),
            )
        desc = entry.registered.descriptor
        ack = desc.acknowledgement
        state = _acknowledgement_state(ack, self._env)
        base: dict[str, Any] = {
            "tool": desc.name,
            "risk": desc.risk,
            "distribution": entry.registered.distribution,
            "acknowledgement": state,
            "acknowledgement_env": ack.env if ack else None,
            "acknowledgement_value": ack.value if ack else None,
        }
        decision = entry.decision
        if not decision.allowed:
            return ToolDecision(
                allowed=False,
                reason_code=decision.reason_code.value,
                rule=decision.rule,
                detail=self._policy_detail(desc, decision),
                **base,
            )
        if ack is not None and state is not AcknowledgementState.SATISFIED:
            return ToolDecision(
                allowed=False,
                reason_code=ReasonCode.NOT_ACKNOWLEDGED.value,
                rule=f"acknowledgement:{ack.env}",
                detail=_ack_detail(desc.name, ack, state),
                **base,
            )
        return ToolDecision(
            allowed=True,
            reason_code=ReasonCode.ALLOWED.value,
            rule=decision.rule,
            detail="ready to use",
            **base,
        )

    def decisions(self) -> list[ToolDecision]:
        """`explain` for every registered tool, sorted by name."""
        return [self.explain(name) for name in sorted(self._by_name)]

    # -- get ----------------------------------------------------------------

    @overload
    def get(self, ref: type[T]) -> T: ...
    @overload
    def get(self, ref: str) -> object: ...

    def get(self, ref: type[T] | str) -> T | object:
        """The tool ``ref`` (a type or a name), if this context may use it.

        Raises:
            ToolUnavailableError: no provider registered it (also a `LookupError`).
            ToolPolicyDeniedError: the policy denies it (also a `PermissionError`).
            AcknowledgementRequiredError: its deployment acknowledgement is missing or
                differs (also a `PermissionError`).
        """
        try:
            return self._ready[ref]
        except KeyError:
            return self._get_slow(ref)

    def _deny(self, tool: str, reason_code: str, rule: str) -> None:
        self._context.trace.append(DenialRecord(tool, reason_code, rule))

    def _get_slow(self, ref: object) -> object:
        entry = self._entries.get(ref)
        if entry is None:
            name = _ref_name(ref)
            self._deny(name, ReasonCode.TOOL_UNAVAILABLE.value, "registry")
            raise ToolUnavailableError(
                f"tool {name!r} is not available: {self._unavailable_detail(ref)}", tool=name
            )
        desc = entry.registered.descriptor
        decision = entry.decision
        if not decision.allowed:
            self._deny(desc.name, decision.reason_code.value, decision.rule)
            raise ToolPolicyDeniedError(
                f"tool {desc.name!r} ({desc.risk.value}) is denied by the policy "
                f"(rule {decision.rule}). {self._policy_detail(desc, decision)}",
                tool=desc.name,
                reason_code=decision.reason_code.value,
                rule=decision.rule,
            )
        ack = desc.acknowledgement
        if ack is not None:
            state = _acknowledgement_state(ack, self._env)
            if state is not AcknowledgementState.SATISFIED:
                rule = f"acknowledgement:{ack.env}"
                self._deny(desc.name, ReasonCode.NOT_ACKNOWLEDGED.value, rule)
                raise AcknowledgementRequiredError(
                    f"tool {desc.name!r} requires a deployment acknowledgement: "
                    + _ack_detail(desc.name, ack, state),
                    tool=desc.name,
                    rule=rule,
                    env=ack.env,
                    value=ack.value,
                )
        return self._instance(entry, cache=ack is None)

    def _instance(self, entry: _Entry, *, cache: bool) -> object:
        with self._lock:
            if entry.instance is None:
                registered = entry.registered
                name = registered.descriptor.name
                runtime = ToolRuntime(registered.descriptor, self._context, self._options.get(name))
                entry.instance = registered.provider.create(runtime)
                entry.runtime = runtime
                if cache:
                    self._ready[name] = entry.instance
                    self._ready[registered.provider.tool_type] = entry.instance
            return entry.instance

    # -- messages -----------------------------------------------------------

    def _unavailable_detail(self, ref: object) -> str:
        detail = (
            "no installed provider registered it; install the provider package "
            "or pass it to Tools.load(providers=[...])"
        )
        if self._broken:
            names = ", ".join(f"{b.distribution} ({b.error})" for b in self._broken)
            detail += f". Broken providers that may have provided it: {names}"
        if self._blocked:
            detail += f". Distributions blocked by the policy: {', '.join(self._blocked)}"
        return detail

    def _policy_detail(self, desc: ToolDescriptor, decision: PolicyDecision) -> str:
        if decision.rule.startswith("deny:"):
            return f"It is explicitly denied; remove {decision.rule!r} from the policy to use it."
        return (
            f"{desc.risk.value} tools need an explicit allow: "
            f"policy.allow({desc.name!r}) in code, or add {desc.name!r} to [allow].tools "
            "in the policy file."
        )

    # -- lifecycle ----------------------------------------------------------

    def close(self) -> None:
        """Close every built tool that has a ``close()`` method."""
        with self._lock:
            entries = [e for e in self._by_name.values() if e.instance is not None]
        for entry in entries:
            close = getattr(entry.instance, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> Tools:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Tools({sorted(self._by_name)}, policy={self._policy!r})"


def _ack_detail(name: str, ack: Acknowledgement, state: AcknowledgementState) -> str:
    now = "is not set" if state is AcknowledgementState.MISSING else "holds a different value"
    return (
        f"{ack.env} {now}. An operator approves {name!r} for this deployment by setting "
        f"{ack.env}={ack.value} (exact value, case-sensitive)."
    )
