"""`Gateway`: the by-name front door, for what an LLM emits.

A model emits a tool name and JSON arguments; the gateway runs them through
the same governed chain as the typed door and returns a `ToolResult` the
model can read. It never raises for a denial or a tool failure, and never puts
a stack trace or a secret into a result.

The context is trusted input: build an `ExecutionContext` in application code
after authentication, or pass a reference that your `ContextResolver` turns
into one. Model output or user JSON is never turned into a context.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, final

from toolbox.audit._trail import AuditTrail
from toolbox.doors._catalog import Catalog
from toolbox.doors._definition_formats import FORMATS, format_definition
from toolbox.doors._route import MethodRoute, Route, compile_route
from toolbox.doors._tools import Tools
from toolbox.errors import InvalidArgumentsError
from toolbox.foundations._context import ExecutionContext, OperationRecord, Trace
from toolbox.foundations._intent_text import intent_field_for
from toolbox.governance import Governance
from toolbox.pipeline._invocation import Invocation, declared_record
from toolbox.pipeline._result import Status, ToolResult
from toolbox.pipeline.checks._approval import Approval
from toolbox.registry._policy import ToolPolicy

__all__ = ["ContextResolver", "Gateway"]

_CACHED_CONTEXTS = 256
_ROUTED_NAMES = 4096
_MAX_CALL_ID = 200


class ContextResolver(Protocol):
    """Turns a serialized context reference (e.g. a session id) into a trusted context.

    Implementations look the reference up in application state and revalidate
    it (session still valid, principal still active). Raise, or return
    anything but an `ExecutionContext`, to refuse.
    """

    def resolve(self, reference: str) -> ExecutionContext:
        """The trusted context ``reference`` stands for."""


@final
class Gateway:
    """Invoke tools by name with JSON arguments, governed like typed calls."""

    __slots__ = ("_catalog", "_fallback", "_last", "_lock", "_resolver", "_routes", "_tools", "unattributed")

    def __init__(
        self,
        catalog: Catalog,
        *,
        strict: bool = True,
        resolver: ContextResolver | None = None,
        fallback_context: ExecutionContext | None = None,
    ) -> None:
        """Args:
        catalog: discovered tools, policy decisions and the governed chain.
        strict: refuse calls without a trusted context (DENIED/NO_TRUSTED_CONTEXT). Keep it on
            in production.
        resolver: resolves serialized context references passed as ``context=``.
        fallback_context: with ``strict=False`` only, the context used when none is given
            (for local tools and development).
        """
        if not isinstance(catalog, Catalog):
            raise TypeError(f"catalog must be a toolbox.Catalog, got {type(catalog).__name__}")
        if strict and fallback_context is not None:
            raise ValueError("fallback_context applies only with strict=False")
        if not strict and not isinstance(fallback_context, ExecutionContext):
            raise ValueError(
                "strict=False needs fallback_context=ExecutionContext(...) built by the application"
            )
        self._catalog = catalog
        self._fallback = fallback_context
        self._resolver = resolver
        self._tools: OrderedDict[int, tuple[ExecutionContext, Tools]] = OrderedDict()
        # Compiled by-name calls (None: the name always takes the full chain); see toolbox.doors._route.
        self._routes: dict[str, Route | MethodRoute | None] = {}
        self._lock = threading.Lock()
        # The latest (context, tools) pair bound or moved under the lock; one tuple, read without it.
        self._last: tuple[ExecutionContext, Tools] | None = None
        #: Records of calls refused before a trusted context existed.
        self.unattributed = Trace()

    @classmethod
    def load(
        cls,
        *,
        policy: ToolPolicy | None = None,
        providers: Iterable[object] = (),
        discover: bool = True,
        env: Mapping[str, str] | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        governance: Governance | None = None,
        resolver: ContextResolver | None = None,
    ) -> Gateway:
        """`Catalog.load` plus a gateway over it; see `toolbox.Tools.load` for the arguments."""
        catalog = Catalog.load(
            policy=policy,
            providers=providers,
            discover=discover,
            env=env,
            options=options,
            governance=governance,
        )
        return cls(catalog, resolver=resolver)

    @property
    def catalog(self) -> Catalog:
        """The catalog this gateway serves."""
        return self._catalog

    @property
    def audit(self) -> AuditTrail | None:
        """The audit trail calls are recorded in, if one is configured."""
        return self._catalog.audit

    def definitions(self, format: str = "neutral") -> list[dict[str, Any]]:
        """LLM function definitions for every operation the policy allows, under wire names.

        Each name matches ``^[a-zA-Z0-9_-]{1,64}$`` (``calculator__evaluate``); see
        `toolbox.foundations._wire_names`. ``format`` picks the shape: ``"neutral"`` (name,
        description, parameters), ``"openai"`` (strict-mode function tools),
        ``"anthropic"`` (``input_schema``) or ``"mcp"`` (``inputSchema`` and
        annotations); see `toolbox.doors._definition_formats`.

        Raises:
            ValueError: ``format`` is none of those.
        """
        if format not in FORMATS:
            raise ValueError(f"unknown definitions format {format!r}: use one of {', '.join(FORMATS)}")
        neutral = self._catalog.definitions()
        if format == "neutral":
            return neutral
        shaped: list[dict[str, Any]] = []
        for definition in neutral:
            _, tool, operation, _ = self._catalog.resolve_name(definition["name"])
            entry = self._catalog.entry(tool)
            assert entry is not None
            effect = next(op.effect for op in entry.descriptor.operations if op.name == operation)
            shaped.append(format_definition(definition, format, effect, entry.descriptor.risk))
        return shaped

    def tools_for(self, context: ExecutionContext) -> Tools:
        """The `Tools` of ``context`` (built once per context, kept for recent contexts)."""
        last = self._last
        if last is not None and last[0] is context:
            return last[1]  # the context of the latest new context's call: the common case in a run
        key = id(context)
        cached = self._tools.get(key)
        if cached is not None and cached[0] is context:
            return cached[1]  # without the lock (the LRU order is approximate)
        with self._lock:
            cached = self._tools.get(key)
            if cached is not None and cached[0] is context:
                self._tools.move_to_end(key)
                self._last = cached
                return cached[1]
            tools = Tools(self._catalog, context)
            self._tools[key] = self._last = (context, tools)
            if len(self._tools) > _CACHED_CONTEXTS:
                _, (_, evicted) = self._tools.popitem(last=False)
                if self._last is not None and self._last[1] is evicted:
                    self._last = None
                evicted.close()
            return tools

    # -- invoke ---------------------------------------------------------------

    def invoke(
        self,
        name: str,
        arguments: object,
        *,
        context: ExecutionContext | str | None = None,
        approval: Approval | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """Call ``name`` (``tool.operation``, optionally ``:version``) with JSON ``arguments``.

        ``name`` may also be the wire name `definitions` emits (``tool__operation``);
        both spellings reach the same tool, and the result, trace and audit keep the
        dotted name.

        ``arguments`` carry the operation's parameters plus its intent field:
        ``purpose`` for READ_ONLY operations, ``audit_as`` for the others.

        ``call_id`` is the model's id of this tool call, when there is one: hooks see it
        as `Invocation.call_id` (`OtelHook` records it as ``gen_ai.tool.call.id``). It is
        model output: it decides nothing.
        """
        route = self._routes.get(name) if type(name) is str else None
        if route is not None and approval is None and type(context) is ExecutionContext:
            last = self._last  # tools_for's common case, without its call
            tools = last[1] if last is not None and last[0] is context else self.tools_for(context)
            routed = route.run(context, arguments, tools)
            if routed is not None:
                return routed
        prepared = self._prepare(name, arguments, context, approval, call_id)
        if isinstance(prepared, ToolResult):
            return prepared
        result = self._catalog.pipeline.run(prepared)
        if route is None:
            self._learn(name, prepared)
        return result

    async def ainvoke(
        self,
        name: str,
        arguments: object,
        *,
        context: ExecutionContext | str | None = None,
        approval: Approval | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """Async twin of `invoke`."""
        route = self._routes.get(name) if type(name) is str else None
        if route is not None and approval is None and type(context) is ExecutionContext:
            last = self._last  # tools_for's common case, without its call
            tools = last[1] if last is not None and last[0] is context else self.tools_for(context)
            routed = await route.arun(context, arguments, tools)
            if routed is not None:
                return routed
        prepared = self._prepare(name, arguments, context, approval, call_id)
        if isinstance(prepared, ToolResult):
            return prepared
        result = await self._catalog.pipeline.arun(prepared)
        if route is None:
            self._learn(name, prepared)
        return result

    def _learn(self, name: str, invocation: Invocation) -> None:
        """After a full-chain call that dispatched: compile a route for the spelling ``name``, once.

        Routes are kept per spelling the caller used (dotted or wire), so the hot path is one
        dict lookup either way; the route itself records the dotted name.
        """
        if not invocation.record.attempts or name in self._routes or len(self._routes) >= _ROUTED_NAMES:
            return
        schema = self._catalog.schema(invocation.tool, invocation.operation)
        self._routes[name] = compile_route(invocation, self._catalog.pipeline, schema)

    def _trusted(self, context: object) -> ExecutionContext | None:
        if isinstance(context, ExecutionContext):
            return context
        if context is None:
            return self._fallback
        if isinstance(context, str) and self._resolver is not None:
            try:
                resolved = self._resolver.resolve(context)
            except Exception:  # noqa: BLE001 - a failed resolution is no trusted context
                return None
            return resolved if isinstance(resolved, ExecutionContext) else None
        return None

    def _refuse_untrusted(self, name: str) -> ToolResult:
        record = OperationRecord(str(name)[:200], "", "", "", None)
        record.reason_code = "NO_TRUSTED_CONTEXT"
        record.rule = "context"
        record.end(Status.DENIED.value)
        self.unattributed.append(record)
        self._catalog.pipeline.report_untrusted(record.tool)
        return ToolResult(
            Status.DENIED,
            name=str(name)[:200],
            reason_code="NO_TRUSTED_CONTEXT",
            rule="context",
            message="no trusted execution context: the application must supply one after authentication",
        )

    def _prepare(
        self, name: str, arguments: object, context: object, approval: Approval | None, call_id: object
    ) -> Invocation | ToolResult:
        trusted = self._trusted(context)
        if trusted is None:
            return self._refuse_untrusted(name)
        catalog = self._catalog
        try:
            dotted, tool, operation, version = catalog.resolve_name(name)
        except InvalidArgumentsError as exc:
            return self._refuse_name(name, trusted, exc)
        entry = catalog.entry(tool)
        assert entry is not None  # resolve_name only returns registered tools
        effect = entry.descriptor.effect_of(operation)
        record = declared_record(tool, operation, intent_field_for(effect), arguments, dotted)
        trusted.trace.append(record)
        tools = self.tools_for(trusted)
        invocation = Invocation.by_name(
            dotted, tool, operation, trusted, arguments, record, version=version, tools=tools
        )
        invocation.effect = effect
        invocation.descriptor = entry.descriptor
        invocation.approval = approval
        if type(call_id) is str and call_id:
            invocation.call_id = call_id[:_MAX_CALL_ID]  # model output: bounded, only ever shown
        return invocation

    def _refuse_name(self, name: str, context: ExecutionContext, exc: InvalidArgumentsError) -> ToolResult:
        shown = str(name)[:200]
        record = OperationRecord(shown, "", "", "", None)
        unknown = exc.error_code == "unknown_tool"
        status = Status.DENIED if unknown else Status.INVALID_ARGUMENTS
        reason = "TOOL_UNAVAILABLE" if unknown else "INVALID_ARGUMENTS"
        record.reason_code, record.error_code = reason, exc.error_code
        record.end(status.value)
        context.trace.append(record)
        self._catalog.pipeline.report_denial(context, shown, reason, "registry")
        return ToolResult(
            status,
            name=shown,
            reason_code=reason,
            rule="registry",
            error_code=exc.error_code,
            # An unknown tool is not an argument problem: no field to point at.
            field_path=None if unknown else exc.field_path,
            message=str(exc),
            trace_id=context.run_id,
            correlation_id=context.correlation_id,
        )

    def release(self, context: ExecutionContext) -> None:
        """Forget ``context``'s `Tools`, closing its tools: it makes no more calls (a request's).

        It leaves the recent contexts at once, not after 256 newer ones, and is freed at
        once (`Tools.release`), so one context per request leaves no garbage to collect.
        """
        with self._lock:
            cached = self._tools.pop(id(context), None)  # the entry holds the context: its id is its own
            last = self._last
            if last is not None and last[0] is context:
                self._last = None
        if cached is not None:
            cached[1].release()

    def close(self) -> None:
        """Close the tools built for recent contexts."""
        with self._lock:
            cached = list(self._tools.values())
            self._tools.clear()
            self._last = None
        for _, tools in cached:
            tools.close()
