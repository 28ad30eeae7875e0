"""`Tools`: the registry a program asks for tools.

Decisions are computed once in `Tools.load`: policies and descriptors are
immutable. ``get()`` is a lookup, plus an environment check for tools that
require a deployment acknowledgement.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, final, overload

from toolbox.doors._catalog import Catalog, CatalogEntry
from toolbox.doors._tool_decision import (
    UNMET,
    AcknowledgementState,
    ToolDecision,
    ack_detail,
    ack_rule,
    acknowledgement_state,
    policy_detail,
)
from toolbox.errors import (
    AcknowledgementRequiredError,
    PolicyFileError,
    ToolboxError,
    ToolPolicyDeniedError,
    ToolUnavailableError,
)
from toolbox.foundations._binding import bind_operations
from toolbox.foundations._context import DenialRecord, ExecutionContext
from toolbox.foundations._descriptor import ToolDescriptor
from toolbox.governance import Governance
from toolbox.pipeline._paths import context_gated
from toolbox.registry._discovery import BrokenProvider

if TYPE_CHECKING:
    from toolbox.registry._function_tool import (
        FunctionTool,
        ReadCall,
        ReadFunctionTool,
        WriteCall,
        WriteFunctionTool,
    )
from toolbox.registry._policy import ReasonCode, ToolPolicy
from toolbox.registry._runtime import ToolRuntime

__all__ = ["Tools"]

T = TypeVar("T")


def _ref_name(ref: object) -> str:
    return ref.__qualname__ if isinstance(ref, type) else str(ref)


@final
class Tools:
    """The tools available to one `ExecutionContext`, filtered by a `ToolPolicy`.

    Build it with `Tools.load` (or ``Tools(catalog, context)``). Use `has`, `get` and
    `explain` with a tool type (``HttpTool``) or a tool name (``"http"``).
    """

    __slots__ = (
        "_catalog",
        "_context",
        "_instances",
        "_lock",
        "_ready",
        "_runtimes",
        "context_gated",
        "ready_runtimes",
    )

    def __init__(self, catalog: Catalog, context: ExecutionContext) -> None:
        if not isinstance(context, ExecutionContext):
            raise TypeError(
                "context must be a toolbox.ExecutionContext built by the application "
                f"after authentication, got {type(context).__name__}"
            )
        self._catalog = catalog
        self._context = context
        #: Whether the context has a deadline, budget or delegation scope: the fast paths' gate, taken once.
        self.context_gated = context_gated(context)
        self._lock = threading.Lock()
        self._instances: dict[str, object] = {}
        self._runtimes: dict[str, ToolRuntime] = {}
        # Allowed tools without an acknowledgement, once built: get() is one lookup.
        self._ready: dict[object, object] = {}
        #: Their runtimes by tool name: what a by-name route looks up on every call (read it, never write).
        self.ready_runtimes: dict[str, ToolRuntime] = {}

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
        governance: Governance | None = None,
    ) -> Tools:
        """Discover providers and decide, once, which tools ``context`` may use.

        Args:
            context: the trusted context built by the application.
            policy: the policy; when omitted, the file named by ``TOOLBOX_POLICY``
                is read, else `ToolPolicy.standard` applies.
            providers: `ToolProvider` objects or plugin modules to register explicitly.
            discover: also load installed ``toolbox.providers`` entry points.
            env: environment for acknowledgements, ``TOOLBOX_POLICY`` and the kill
                switch (defaults to ``os.environ``; inject a dict in tests).
            options: tool settings keyed by tool name, e.g. ``{"fs": {"roots": [...]}}``.
            governance: how calls are governed (`toolbox.Governance`); safe defaults.

        Raises:
            ProviderConflictError: two providers claim one tool.
            PolicyFileError: the policy file is malformed or names an unknown tool.
            ConfigurationError: the governance configuration is malformed.
            TypeError: ``context``, ``policy`` or a ``providers`` item has the wrong type.
            ValueError: ``options`` names a tool nobody provides.
        """
        if not isinstance(context, ExecutionContext):
            raise TypeError(
                "context must be a toolbox.ExecutionContext built by the application "
                f"after authentication, got {type(context).__name__}"
            )
        catalog = Catalog.load(
            policy=policy,
            providers=providers,
            discover=discover,
            env=env,
            options=options,
            governance=governance,
        )
        return cls(catalog, context)

    # -- queries ----------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """The shared catalog these tools come from."""
        return self._catalog

    @property
    def context(self) -> ExecutionContext:
        """The context these tools act in."""
        return self._context

    @property
    def policy(self) -> ToolPolicy:
        """The policy that decided."""
        return self._catalog.policy

    @property
    def broken_providers(self) -> tuple[BrokenProvider, ...]:
        """Providers that failed to load, with their distribution and error."""
        return self._catalog.broken_providers

    @property
    def blocked_distributions(self) -> tuple[str, ...]:
        """Installed provider distributions the policy refused to load."""
        return self._catalog.blocked_distributions

    def descriptors(self) -> list[ToolDescriptor]:
        """Descriptors of every registered tool, sorted by name (allowed or not)."""
        return [self._entry(n).descriptor for n in self._catalog.names()]

    def _entry(self, ref: object) -> CatalogEntry:
        entry = self._catalog.entry(ref)
        if entry is None:
            raise KeyError(ref)
        return entry

    def distribution_of(self, ref: type | str) -> str | None:
        """The distribution that provided ``ref``, or None."""
        entry = self._catalog.entry(ref)
        return entry.registered.distribution if entry else None

    def has(self, ref: type | str | FunctionTool[Any]) -> bool:
        """Whether a provider registered ``ref`` (a tool type, name or ``@tool`` function). Not policy."""
        return self._catalog.entry(ref) is not None

    def executions(self, ref: type | str | FunctionTool[Any]) -> int:
        """How many operation attempts of ``ref`` (a type, name or ``@tool``) were dispatched here."""
        entry = self._catalog.entry(ref)
        runtime = self._runtimes.get(entry.descriptor.name) if entry else None
        return runtime.executions if runtime else 0

    def built_runtime(self, name: str) -> ToolRuntime | None:
        """The runtime of tool ``name`` if it is built and needs no per-call acknowledgement check."""
        return self.ready_runtimes.get(name)

    def route_runtime(self, name: str) -> ToolRuntime | None:
        """For a compiled by-name route that found no `ready_runtimes` entry: build the tool, its runtime.

        None: the route takes the full chain, whose access check makes the same decision
        (`acquire`) and records any refusal. A tool with an acknowledgement is never ready.
        """
        try:
            self.acquire(name)
        except Exception:  # noqa: BLE001 - the full chain decides again, and reports it
            return None
        return self.ready_runtimes.get(name)

    def runtime_of(self, name: str) -> ToolRuntime:
        """The runtime of the built tool ``name`` (after a successful `get`)."""
        return self._runtimes[name]

    def _verdict(self, entry: CatalogEntry) -> tuple[str, str, AcknowledgementState]:
        """Policy, then acknowledgement: the one order `explain` and `get` decide a registered tool in.

        The reason code (``ALLOWED``, the policy's, or ``NOT_ACKNOWLEDGED``), its rule, and the
        acknowledgement's state now.
        """
        ack = entry.descriptor.acknowledgement
        state = acknowledgement_state(ack, self._catalog.env)
        decision = entry.decision
        if not decision.allowed:
            return decision.reason_code.value, decision.rule, state
        if ack is not None and state in UNMET:
            return ReasonCode.NOT_ACKNOWLEDGED.value, ack_rule(ack), state
        return ReasonCode.ALLOWED.value, decision.rule, state

    def explain(self, ref: type | str | FunctionTool[Any]) -> ToolDecision:
        """The decision for ``ref``: allowed or not, reason code, rule, acknowledgement state."""
        entry = self._catalog.entry(ref)
        if entry is None:
            return ToolDecision(
                tool=_ref_name(ref),
                allowed=False,
                reason_code=ReasonCode.TOOL_UNAVAILABLE.value,
                rule="registry",
                detail=self._unavailable_detail(),
            )
        desc = entry.descriptor
        ack = desc.acknowledgement
        reason_code, rule, state = self._verdict(entry)
        if reason_code == ReasonCode.ALLOWED.value:
            detail = "ready to use"
        elif reason_code == ReasonCode.NOT_ACKNOWLEDGED.value:
            assert ack is not None  # only a required acknowledgement can be missing
            detail = ack_detail(desc.name, ack, state)
        else:
            detail = policy_detail(desc, entry.decision)
        return ToolDecision(
            tool=desc.name,
            allowed=reason_code == ReasonCode.ALLOWED.value,
            reason_code=reason_code,
            rule=rule,
            risk=desc.risk,
            distribution=entry.registered.distribution,
            acknowledgement=state,
            acknowledgement_env=ack.env if ack else None,
            acknowledgement_value=ack.value if ack else None,
            detail=detail,
        )

    def decisions(self) -> list[ToolDecision]:
        """`explain` for every registered tool, sorted by name."""
        return [self.explain(name) for name in self._catalog.names()]

    # -- get ----------------------------------------------------------------

    @overload
    def get(self, ref: type[T]) -> T: ...
    @overload
    def get(self, ref: ReadFunctionTool[T]) -> ReadCall[T]: ...
    @overload
    def get(self, ref: WriteFunctionTool[T]) -> WriteCall[T]: ...
    @overload
    def get(self, ref: str) -> object: ...

    def get(self, ref: type[T] | FunctionTool[T] | str) -> object:
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

    def acquire(self, ref: object) -> object:
        """`get` without recording a denial: for the governed chain, which records it itself."""
        try:
            return self._ready[ref]
        except KeyError:
            return self._get_slow(ref, report=False)

    def _deny(self, tool: str, reason_code: str, rule: str, *, report: bool = True) -> None:
        if not report:
            return
        self._context.trace.append(DenialRecord(tool, reason_code, rule))
        self._catalog.pipeline.report_denial(self._context, tool, reason_code, rule)

    def check_acknowledgement(self, ref: object, *, report: bool = True) -> None:
        """Raise `AcknowledgementRequiredError` unless ``ref``'s acknowledgement holds now.

        ``report=False`` leaves recording the denial to the caller.
        """
        desc = self._entry(ref).descriptor
        ack = desc.acknowledgement
        state = acknowledgement_state(ack, self._catalog.env)
        if ack is not None and state in UNMET:
            self._refuse_unacknowledged(desc, ack_rule(ack), state, report=report)

    def _refuse_unacknowledged(
        self, desc: ToolDescriptor, rule: str, state: AcknowledgementState, *, report: bool
    ) -> NoReturn:
        ack = desc.acknowledgement
        assert ack is not None  # only a required acknowledgement can be missing
        self._deny(desc.name, ReasonCode.NOT_ACKNOWLEDGED.value, rule, report=report)
        raise AcknowledgementRequiredError(
            f"tool {desc.name!r} requires a deployment acknowledgement: " + ack_detail(desc.name, ack, state),
            tool=desc.name,
            rule=rule,
            env=ack.env,
            value=ack.value,
        )

    def _get_slow(self, ref: object, *, report: bool = True) -> object:
        entry = self._catalog.entry(ref)
        if entry is None:
            name = _ref_name(ref)
            self._deny(name, ReasonCode.TOOL_UNAVAILABLE.value, "registry", report=report)
            raise ToolUnavailableError(
                f"tool {name!r} is not available: {self._unavailable_detail()}", tool=name
            )
        desc = entry.descriptor
        reason_code, rule, state = self._verdict(entry)
        if reason_code == ReasonCode.NOT_ACKNOWLEDGED.value:
            self._refuse_unacknowledged(desc, rule, state, report=report)
        if reason_code != ReasonCode.ALLOWED.value:
            self._deny(desc.name, reason_code, rule, report=report)
            raise ToolPolicyDeniedError(
                f"tool {desc.name!r} ({desc.risk.value}) is denied by the policy "
                f"(rule {rule}). {policy_detail(desc, entry.decision)}",
                tool=desc.name,
                reason_code=reason_code,
                rule=rule,
            )
        instance = self._instance(entry, cache=desc.acknowledgement is None)
        if desc.acknowledgement is None and getattr(ref, "__toolbox_provider__", None) is not None:
            self._ready[ref] = instance  # a @tool function: later get(fn) is one lookup too
        return instance

    def _instance(self, entry: CatalogEntry, *, cache: bool) -> object:
        registered = entry.registered
        name = registered.descriptor.name
        with self._lock:
            instance = self._instances.get(name)
            if instance is None:
                runtime = ToolRuntime(
                    registered.descriptor,
                    self._context,
                    self._catalog.options_for(name),
                    tools=self,
                    bind=registered.provider.bind,
                )
                try:
                    instance = registered.provider.create(runtime)
                except (ValueError, TypeError) as exc:
                    error = self._options_error(name, exc)
                    if error is exc:
                        raise
                    raise error from exc
                if type(instance) is not registered.provider.tool_type:
                    # A factory's own class: its operation methods bind their calls too.
                    bind_operations(type(instance), registered.descriptor)
                self._instances[name] = instance
                self._runtimes[name] = runtime
                if cache:
                    self._ready[name] = instance
                    self._ready[registered.provider.tool_type] = instance
                    self.ready_runtimes[name] = runtime
            return instance

    # -- messages -----------------------------------------------------------

    def _options_error(self, name: str, error: ValueError | TypeError) -> ValueError | TypeError:
        """A tool refused its options: a `PolicyFileError` naming ``tools.<name>`` when the file set them.

        Options given only in code keep the provider's own error. A message is shown
        only from a ``ValueError`` (providers phrase those for people); anything else
        is named by its type, so no option value is echoed.
        """
        policy = self._catalog.policy
        if name not in (policy.governance.get("tools") or {}):
            return error
        shown = (
            str(error)
            if isinstance(error, ToolboxError) or type(error) is ValueError
            else type(error).__name__
        )
        return PolicyFileError(f"{policy.source}: tools.{name}: {shown}")

    def _unavailable_detail(self) -> str:
        detail = (
            "no installed provider registered it; install the provider package "
            "or pass it to Tools.load(providers=[...])"
        )
        broken = self._catalog.broken_providers
        if broken:
            names = ", ".join(f"{b.distribution} ({b.error})" for b in broken)
            detail += f". Broken providers that may have provided it: {names}"
        blocked = self._catalog.blocked_distributions
        if blocked:
            detail += f". Distributions blocked by the policy: {', '.join(blocked)}"
        return detail

    # -- lifecycle ----------------------------------------------------------

    def close(self) -> None:
        """Close every built tool that has a ``close()`` method."""
        self._tell_each("close")

    def release(self) -> None:
        """Tell each built tool its context is done, then forget them (a later `get` builds them again).

        For a context that makes no more calls (a served request's): each tool's runtime
        refers back to this `Tools`, so without it the two are freed only by the garbage
        collector. A tool with a ``release()`` method is released, not closed: what it pools
        for every context (an MCP server's sessions) stays open for the next request, where
        `close` (the owner is done) may end it; any other tool is closed.
        """
        self._tell_each("release", "close")
        with self._lock:
            for built in (self._instances, self._runtimes, self._ready, self.ready_runtimes):
                built.clear()

    def _tell_each(self, *methods: str) -> None:
        """Call, on every built tool, the first of ``methods`` it has."""
        with self._lock:
            instances = list(self._instances.values())
        for instance in instances:
            for method in methods:
                call = getattr(instance, method, None)
                if callable(call):
                    call()
                    break

    def __enter__(self) -> Tools:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Tools({self._catalog.names()}, policy={self._catalog.policy!r})"
