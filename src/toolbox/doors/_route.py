"""`Route`: a by-name call compiled for its name, where only the default checks apply.

The full chain builds an `Invocation` and asks every interceptor whether it
applies, on every call. For a ``MEMORY_ONLY`` tool whose plan holds nothing
but the built-in checks (kill switch, access, deadline, argument validation,
budget), no outcome mapper, no timeout and no hook but the audit trail, the
gateway compiles a route after the first call of the name that reached the
tool (`toolbox.pipeline._paths.by_name_route` decides, beside the typed fast
path's decision). The decisions that cannot change between calls (registry,
policy, version, which checks apply) are then taken once; what can change is
checked on every call, and anything out of the ordinary goes to the full
chain before anything is recorded:

- a context with a deadline, a budget or a delegation scope, an engaged kill
  switch, a tool not yet built for this context, an approval grant;
- for a ``@tool`` function (``def`` or ``async def``): arguments that are not a
  small, flat JSON object, or that fail validation (the full chain then
  produces the INVALID_ARGUMENTS result); a sync call of an ``async def`` tool;
- after dispatch, an exception or a transient result continues in the full
  chain's retry loop with the same record and audit opening.

A class-based tool's route (`toolbox.doors._route_method`) skips only the access
check (the tool is built for the context) and runs every other check, the
audit opening and the dispatch as the chain does.

A routed call leaves the same `ToolResult`, trace record and audit events as
the full chain; ``tests/test_route.py`` runs every scenario through both.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from inspect import CO_VARARGS, CO_VARKEYWORDS
from types import FunctionType, UnionType
from typing import TYPE_CHECKING, Any, Literal, Union, final, get_args, get_origin

from toolbox.audit._batch import IMMUTABLE_TYPES, Closing, Opening
from toolbox.audit._held import held_call, held_response
from toolbox.audit._trail import AuditTrail, audit_unavailable
from toolbox.doors._route_method import CompiledName, MethodRoute
from toolbox.foundations._context import ExecutionContext, OperationRecord
from toolbox.foundations._intent_text import VALID_TEXTS
from toolbox.pipeline._attempts import count_attempt
from toolbox.pipeline._chain import Pipeline, Plan
from toolbox.pipeline._field_values import field_values, known_keys_values
from toolbox.pipeline._invocation import BY_NAME, Invocation
from toolbox.pipeline._paths import by_name_route, gates_open
from toolbox.pipeline._record_rows import first_success_row
from toolbox.pipeline._result import ToolResult, succeeded
from toolbox.pipeline._result_summary import settled_inline
from toolbox.pipeline.checks._arguments import ArgumentLimits, ArgumentValidation, flat_and_small
from toolbox.pipeline.checks._builtin import KillSwitch
from toolbox.pipeline.checks._schemas import OperationSchema
from toolbox.registry._intent import dispatch_calls, validate_intent_text

if TYPE_CHECKING:
    from toolbox.doors._tools import Tools
    from toolbox.registry._runtime import ToolRuntime

__all__ = ["MethodRoute", "Route", "compile_route"]

# Validated values of these types cannot change after the call: the audit redacts them lazily.
_IMMUTABLE = IMMUTABLE_TYPES | {Any}


def _immutable(annotation: Any) -> bool:
    if annotation in _IMMUTABLE or (isinstance(annotation, type) and issubclass(annotation, enum.Enum)):
        return True
    origin = get_origin(annotation)
    if origin is Literal:
        return True
    if origin is Union or origin is UnionType:
        return all(_immutable(member) for member in get_args(annotation))
    return False


_now = time.time


def _takes_positionally(function: Callable[..., Any], names: tuple[str, ...]) -> bool:
    """Whether ``function`` binds ``names`` positionally as it binds them by keyword: a plain function
    whose parameters are exactly ``names``, in order, each positional or keyword.

    The validated values come with every field, in the model's field order, so such a
    function may be called with them positionally: about 100 ns a call less than by
    keyword (the chain's form). Read from the code object, which is how Python binds a call
    (a ``__signature__`` or ``__wrapped__`` may say otherwise): anything else is called by keyword.
    """
    if type(function) is not FunctionType:
        return False
    code = function.__code__
    return (
        not code.co_flags & (CO_VARARGS | CO_VARKEYWORDS)
        and code.co_posonlyargcount == 0
        and code.co_kwonlyargcount == 0
        and code.co_varnames[: code.co_argcount] == names
    )


def compile_route(
    invocation: Invocation, pipeline: Pipeline, schema: OperationSchema
) -> Route | MethodRoute | None:
    """A route for the name of ``invocation``, a by-name call that ran through ``pipeline``; else None."""
    plan = pipeline.plan_of(invocation.tool, invocation.operation, BY_NAME)
    recorder = pipeline.recorder
    if (
        plan is None
        or (recorder is not None and not isinstance(recorder, AuditTrail))  # a route records through a trail
        or not by_name_route(
            invocation,
            plan,
            schema,
            hooks=pipeline.hooks,
            recorder=recorder,
            immutable_values=all(_immutable(f.annotation) for f in schema.model.model_fields.values()),
        )
    ):
        return None
    trail = recorder if isinstance(recorder, AuditTrail) else None
    if not getattr(invocation.instance, "is_function_tool", False):
        return MethodRoute(invocation, plan=plan, pipeline=pipeline, trail=trail)
    kill_switch = next(c for c in plan.checks if type(c) is KillSwitch)
    validation = next(c for c in plan.checks if type(c) is ArgumentValidation)
    return Route(
        invocation,
        plan=plan,
        pipeline=pipeline,
        schema=schema,
        function=getattr(invocation.instance, "function"),  # noqa: B009 - a @tool's, checked by by_name_route
        kill_switch=kill_switch,
        limits=validation.limits,
        trail=trail,
    )


@final
class Route(CompiledName):
    """One compiled name of a ``@tool`` function: ``run`` and ``arun`` return a result, or None.

    None means the call takes the full chain; nothing was recorded then.
    """

    __slots__ = (
        "_engaged",
        "_function",
        "_hold_call",
        "_is_async",
        "_key",
        "_known_keys",
        "_limits",
        "_positional",
        "_row",
        "_validate",
    )

    def __init__(
        self,
        invocation: Invocation,
        *,
        plan: Plan,
        pipeline: Pipeline,
        schema: OperationSchema,
        function: Callable[..., Any],
        kill_switch: KillSwitch,
        limits: ArgumentLimits,
        trail: AuditTrail | None,
    ) -> None:
        super().__init__(invocation, plan=plan, pipeline=pipeline, trail=trail)
        # The chain's model's own validation, without the model instance; for arguments with no key
        # but its fields (tested first, `_known_keys`), without pydantic-core's extra-key check.
        known = known_keys_values(schema.model)
        self._known_keys: frozenset[str] | None = None if known is None else known[0]
        self._validate = field_values(schema.model) if known is None else known[1]
        self._function = function
        self._is_async: bool = getattr(invocation.instance, "is_async", False)
        self._engaged = kill_switch.engaged
        self._limits = limits
        self._row = first_success_row(
            tool=self.tool, operation=self.operation, name=self.name, intent_kind=self._intent_field
        )
        # A sink that keeps held calls (the memory sink): two tuples per call, no object to walk.
        self._hold_call = trail.call_hold if trail is not None else None
        # Validated values come in the model's field order: a held call carries them in that order,
        # and a function whose parameters are those names, in that order, takes them positionally.
        names = tuple(name for name in schema.model.model_fields if name != schema.intent_field)
        self._positional = _takes_positionally(function, names)
        self._key = -1
        if trail is not None and self._subject is not None and self._hold_call is not None:
            self._key = trail.subject_key(self._subject, names)

    # -- the doors: twins, each one frame for the whole routed call ---------------------------
    #
    # `run` and `arun` take the same steps in the same order; the async door awaits the
    # writes of a trail that awaits them and an ``async def`` tool. Each call level costs
    # about 100 ns on this path (a Python frame, and the tuple it returns), so the steps
    # are not split into methods: every decision is a call (`gates_open`, `flat_and_small`,
    # the validation, `settled_inline`) and every record is built by its own module
    # (`held_call`, `held_response`, the compact row, `succeeded`). A change to one door is
    # made to the other: ``tests/test_route.py`` runs every scenario through both.

    def run(self, context: ExecutionContext, arguments: object, tools: Tools) -> ToolResult | None:
        """The call's result, or None when it must take the full chain (nothing was recorded then)."""
        if self._is_async:
            return None  # the full chain refuses it (call it with ainvoke): nothing to speed up
        # A key that is not one of the fields (`_known_keys`) takes the chain: the model refuses it.
        if not gates_open(tools.context_gated, self._engaged, self.tool) or not flat_and_small(
            arguments, self._limits, self._known_keys
        ):
            return None
        runtime = tools.ready_runtimes.get(self.tool) or tools.route_runtime(self.tool)
        if runtime is None:
            return None
        try:
            # The chain's model's own validation, without the model instance (`known_keys_values`).
            values: dict[str, Any] = self._validate(arguments)
            text = values.pop(self._intent_field)
            if type(text) is not str or text not in VALID_TEXTS:  # validate_intent_text's own shortcut
                text = validate_intent_text(text)
        except ValueError:  # pydantic's ValidationError included
            return None
        # No record object yet: a successful call leaves its compact record in the trace when it
        # ends; a call handed to the full chain gets its record object then (`_handover`).
        declared = _now()
        hold_call = self._hold_call
        opening: Any = None  # a held call (a tuple), an Opening, or None without a trail
        if hold_call is not None:
            # Immutable values (compile_route checked the field types): safe to redact when read.
            opening = held_call(self._key, runtime.held_context, text, declared, values.values())
            hold_call(opening)
        elif self._trail is not None:
            opening = self._opening(context, text, values, declared)
            if not self._trail.store_opening(opening):
                invocation = self._handover(
                    context, tools, runtime, declared, text, values, None, started=False
                )
                return self._pipeline.finish(invocation, audit_unavailable(invocation))
        runtime.executions += 1  # the attempt's count on the tool; its record counts it on handover
        try:
            content = self._function(*values.values()) if self._positional else self._function(**values)
        except Exception as exc:  # noqa: BLE001 - the full chain classifies it
            invocation = self._handover(context, tools, runtime, declared, text, values, opening)
            return self._pipeline.continue_failed(invocation, self._plan, exc)
        if not settled_inline(content):
            invocation = self._handover(context, tools, runtime, declared, text, values, opening)
            return self._pipeline.continue_returned(invocation, self._plan, content)
        ended = _now()
        duration = ended - declared
        runtime.record_finished(self._row(declared, duration, ended, text))
        ids = runtime.held_context  # the context's run and correlation ids first, read once
        result = succeeded(self.name, self.tool, self.operation, content, ids[0], ids[1])
        if hold_call is not None:
            # The response names the held opening (plain values too): nothing more to read.
            hold_call(held_response(opening, ended, duration))
        elif opening is not None and not self._trail.store_closing(  # type: ignore[union-attr]
            Closing(opening, "SUCCESS", None, duration, 1, ended)
        ):
            result.audit_failed = True
        return result

    async def arun(self, context: ExecutionContext, arguments: object, tools: Tools) -> ToolResult | None:
        """Async twin of `run`: an ``async def`` is awaited, a ``def`` runs inline (MEMORY_ONLY).

        With a trail whose writes are awaited (a durable sink), the opening is
        durable before the tool runs and the response before the result returns.
        """
        if not gates_open(tools.context_gated, self._engaged, self.tool) or not flat_and_small(
            arguments, self._limits, self._known_keys
        ):
            return None
        runtime = tools.ready_runtimes.get(self.tool) or tools.route_runtime(self.tool)
        if runtime is None:
            return None
        try:
            values: dict[str, Any] = self._validate(arguments)  # as in `run`
            text = values.pop(self._intent_field)
            if type(text) is not str or text not in VALID_TEXTS:
                text = validate_intent_text(text)
        except ValueError:
            return None
        declared = _now()
        hold_call = self._hold_call
        opening: Any = None
        if hold_call is not None:
            opening = held_call(self._key, runtime.held_context, text, declared, values.values())
            hold_call(opening)
        elif self._trail is not None:
            opening = self._opening(context, text, values, declared)
            if not await self._trail.astore_opening(opening):
                invocation = self._handover(
                    context, tools, runtime, declared, text, values, None, started=False
                )
                return await self._pipeline.afinish(invocation, audit_unavailable(invocation))
        runtime.executions += 1
        try:
            content = self._function(*values.values()) if self._positional else self._function(**values)
            if self._is_async:
                content = await content
        except Exception as exc:  # noqa: BLE001 - the full chain classifies it
            invocation = self._handover(context, tools, runtime, declared, text, values, opening)
            return await self._pipeline.acontinue_failed(invocation, self._plan, exc)
        if not settled_inline(content):
            invocation = self._handover(context, tools, runtime, declared, text, values, opening)
            return await self._pipeline.acontinue_returned(invocation, self._plan, content)
        ended = _now()
        duration = ended - declared
        runtime.record_finished(self._row(declared, duration, ended, text))
        ids = runtime.held_context
        result = succeeded(self.name, self.tool, self.operation, content, ids[0], ids[1])
        if hold_call is not None:
            hold_call(held_response(opening, ended, duration))
        elif opening is not None and not await self._trail.astore_closing(  # type: ignore[union-attr]
            Closing(opening, "SUCCESS", None, duration, 1, ended)
        ):
            result.audit_failed = True
        return result

    # -- the rare steps, shared by both doors ----------------------------------------------

    def _opening(
        self, context: ExecutionContext, text: str, values: dict[str, Any], declared: float
    ) -> Opening:
        """The call's `Opening`, for a trail whose sink does not hold calls (the door stores it)."""
        assert self._subject is not None  # set whenever the trail is
        # Immutable values (compile_route checked the field types): safe to redact when read.
        return Opening(self._subject, context, text, values, declared)

    def _handover(  # noqa: PLR0917 - the call's own values, as the doors hold them
        self,
        context: ExecutionContext,
        tools: Tools,
        runtime: ToolRuntime,
        declared: float,
        text: str,
        values: dict[str, Any],
        opening: object,
        *,
        started: bool = True,
    ) -> Invocation:
        """The full chain's view of the call: to continue it after its first attempt, or (not
        ``started``, no opening) to refuse it as AUDIT_UNAVAILABLE when its opening could not be stored."""
        record = self._record(text, declared, started=started)
        return self._invocation(context, tools, runtime, record, values, opening=opening)

    # -- handing a call to the full chain ---------------------------------------------------

    def _record(self, text: str, declared: float, *, started: bool = True) -> OperationRecord:
        """The record object of a call the full chain takes over, as the chain would have kept it."""
        record = OperationRecord(self.tool, self.operation, self._intent_field, text, None, self.name)
        record.declared_at = declared
        if started:
            record.started_at = declared  # the route dispatched at once: its compact record says so too
            count_attempt(record, None)  # the tool's runtime counted it before the dispatch
        return record

    def _invocation(
        self,
        context: ExecutionContext,
        tools: Tools,
        runtime: ToolRuntime,
        record: OperationRecord,
        values: Mapping[str, Any],
        *,
        opening: object,
    ) -> Invocation:
        """The full chain's view of this call, to continue it there (its record joins the trace now)."""
        runtime.record(record)
        invocation = Invocation.by_name(
            self.name, self.tool, self.operation, context, values, record, version=self.version, tools=tools
        )
        instance = tools.acquire(self.tool)
        invocation.granted(runtime, instance)
        if type(opening) is tuple:
            # The sink holds the opening as plain values; the chain's Closing needs an Opening to refer to.
            assert self._subject is not None  # a held call was made through the trail
            opening = Opening(self._subject, context, record.intent_text, values, record.declared_at)
        invocation.opening = opening
        # The calls the chain's argument validation would have taken from the intent.
        invocation.call, invocation.acall = dispatch_calls(getattr(instance, "call")(**values))  # noqa: B009
        return invocation
