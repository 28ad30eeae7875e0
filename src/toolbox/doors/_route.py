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
from types import UnionType
from typing import TYPE_CHECKING, Any, Literal, Union, final, get_args, get_origin

from toolbox.audit._batch import IMMUTABLE_TYPES, Closing, Opening
from toolbox.audit._held import HELD_OPENING, HELD_RESPONSE
from toolbox.audit._trail import AuditTrail, audit_unavailable
from toolbox.doors._route_method import MethodRoute
from toolbox.foundations._context import ExecutionContext, OperationRecord
from toolbox.foundations._descriptor import ToolDescriptor
from toolbox.foundations._intent_text import VALID_TEXTS
from toolbox.pipeline._chain import Pipeline, Plan
from toolbox.pipeline._invocation import BY_NAME, Invocation
from toolbox.pipeline._paths import by_name_route
from toolbox.pipeline._result import ToolResult, succeeded
from toolbox.pipeline._result_summary import settled_inline
from toolbox.pipeline.checks._arguments import ArgumentLimits, ArgumentValidation, OperationSchema
from toolbox.pipeline.checks._builtin import KillSwitch
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


def compile_route(
    invocation: Invocation, pipeline: Pipeline, schema: OperationSchema
) -> Route | MethodRoute | None:
    """A route for the name of ``invocation``, a by-name call that ran through ``pipeline``; else None."""
    plan = pipeline.plan_of(invocation.tool, invocation.operation, BY_NAME)
    if plan is None or not by_name_route(
        invocation,
        plan,
        schema,
        hooks=pipeline.hooks,
        recorder=pipeline.recorder,
        immutable_values=all(_immutable(f.annotation) for f in schema.model.model_fields.values()),
    ):
        return None
    kill_switch = next(c for c in plan.checks if type(c) is KillSwitch)
    trail: AuditTrail | None = pipeline.hooks[0] if pipeline.hooks else None  # type: ignore[assignment]
    if not getattr(invocation.instance, "is_function_tool", False):
        return MethodRoute(invocation, plan=plan, pipeline=pipeline, trail=trail)
    validation = next(c for c in plan.checks if type(c) is ArgumentValidation)
    return Route(
        invocation,
        plan=plan,
        pipeline=pipeline,
        schema=schema,
        function=invocation.instance.function,  # type: ignore[attr-defined]
        kill_switch=kill_switch,
        limits=validation.limits,
        trail=trail,
    )


@final
class Route:
    """One compiled name of a ``@tool`` function: ``run`` and ``arun`` return a result, or None.

    None means the call takes the full chain; nothing was recorded then.
    """

    __slots__ = (
        "_descriptor",
        "_effect",
        "_engaged",
        "_function",
        "_hold",
        "_hold_call",
        "_int_range",
        "_intent_field",
        "_is_async",
        "_key",
        "_max_bytes",
        "_max_items",
        "_pipeline",
        "_plan",
        "_subject",
        "_trail",
        "_validate",
        "name",
        "operation",
        "tool",
        "version",
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
        descriptor = invocation.descriptor
        assert descriptor is not None
        self.name = invocation.name
        self.tool = invocation.tool
        self.operation = invocation.operation
        self.version = invocation.version
        self._descriptor: ToolDescriptor = descriptor
        self._effect = invocation.effect
        self._plan = plan
        self._pipeline = pipeline
        self._validate = schema.model.__pydantic_validator__.validate_python
        self._intent_field = schema.intent_field
        self._function = function
        self._is_async: bool = invocation.instance.is_async  # type: ignore[attr-defined]
        self._engaged = kill_switch.engaged
        self._max_items = limits.max_items
        self._max_bytes = limits.max_bytes
        self._int_range = limits.fast_int_range
        self._trail = trail
        # Where the trail lets batches go straight to the sink (it cannot fail): one call less.
        self._hold = trail.direct_hold if trail is not None else None
        self._subject = trail.subject(invocation) if trail is not None else None
        # A sink that keeps held calls (the memory sink): two tuples per call, no object to walk.
        self._hold_call = trail.call_hold if trail is not None else None
        # Validated values come in the model's field order; a held call carries them in that order.
        names = tuple(name for name in schema.model.model_fields if name != schema.intent_field)
        self._key = trail.subject_key(self._subject, names) if self._hold_call is not None else -1  # type: ignore[union-attr, arg-type]

    # -- the call -------------------------------------------------------------------

    def _begin(self, context: ExecutionContext, arguments: object, tools: Tools) -> Any:  # noqa: PLR0912
        """Up to the dispatch: None (take the full chain), a `ToolResult` (refused), or the started call.

        The started call is ``(runtime, declared_at, intent_text, values, opening)``.
        One method on purpose: this is the hot path, and each call level costs.
        """
        # These gates stand for the plan's kill switch, deadline, budget and delegation checks: a
        # check that starts reading other state (say, a shared budget) must be re-checked here too.
        if (
            context.deadline is not None
            or context.budget is not None
            or context.scope is not None
            or type(arguments) is not dict
            or len(arguments) > self._max_items
            or self._engaged(self.tool)
        ):
            return None
        # toolbox.pipeline.checks._arguments.flat_and_small, inlined with the limits read once per route.
        size = 2
        low, high = self._int_range
        for key, value in arguments.items():
            kind = type(value)
            if kind is str:
                size += len(value) + len(key) + 6
            elif kind is int:
                if not low < value < high:
                    return None  # possibly too many digits: the chain's check_limits counts them
                size += len(key) + 12
            elif kind is float:
                if value - value != 0.0:
                    return None  # NaN or an infinity: the chain decides (a parameter may opt in)
                size += len(key) + 12
            elif kind is bool or value is None:
                size += len(key) + 12
            else:
                return None
        if size > self._max_bytes:
            return None
        runtime = tools.built_runtime(self.tool)
        if runtime is None:
            return None
        try:
            # The model instance is thrown away: its field dict can be taken as it is.
            values: dict[str, Any] = self._validate(arguments).__dict__
            text = values.pop(self._intent_field)
            if type(text) is not str or text not in VALID_TEXTS:  # validate_intent_text's own shortcut
                text = validate_intent_text(text)
        except ValueError:  # pydantic's ValidationError included
            return None
        # No record object yet: a successful call leaves its compact record in the trace when it ends
        # (`_end`); a call handed to the full chain gets its record object then (`_record`).
        declared = _now()
        trail = self._trail
        opening: Any = None  # a held call (a tuple), an Opening, or None without a trail
        if trail is not None:
            # Immutable values (compile_route checked the field types): safe to redact when read.
            hold_call = self._hold_call
            if hold_call is not None:
                # toolbox.audit._held.held_call, inlined: plain values the collector stops tracking.
                opening = (
                    HELD_OPENING,
                    self._key,
                    context.run_id,
                    context.correlation_id,
                    context.tenant,
                    context.principal,
                    context.parent_run_id,
                    context.credential,
                    text,
                    declared,
                    None,
                    *values.values(),
                )
                hold_call(opening)
            else:
                opening = Opening(self._subject, context, text, values, declared)  # type: ignore[arg-type]
                hold = self._hold
                if hold is not None:
                    hold(opening)
                elif not trail.store_opening(opening):
                    record = self._record(text, declared, started=False)
                    invocation = self._invocation(context, tools, runtime, record, values, opening=None)
                    return self._pipeline.finish(invocation, audit_unavailable(invocation))
        runtime.executions += 1
        return runtime, declared, text, values, opening

    def _record(self, text: str, declared: float, *, started: bool = True) -> OperationRecord:
        """The record object of a call the full chain takes over, as the chain would have kept it."""
        record = OperationRecord(self.tool, self.operation, self._intent_field, text, None, self.name)
        record.declared_at = declared
        if started:
            record.attempts = 1
            record.started_at = declared
            record.status = "STARTED"
        return record

    def _end(  # noqa: PLR0917 - positional on purpose: the hot path
        self,
        context: ExecutionContext,
        runtime: ToolRuntime,
        declared: float,
        text: str,
        opening: Any,
        content: Any,
    ) -> Any:
        """After a first attempt that returned ``content``: the result, or None when it is transient."""
        if not settled_inline(content):
            return None
        ended = _now()
        duration = ended - declared
        # The compact trace record (`foundations._context.Trace`): OperationRecord.FIELDS' values, in order.
        runtime.record_finished(
            (
                1,  # attempts
                declared,
                duration,
                ended,
                None,  # error_code
                None,  # error_type
                None,  # field_path
                self._intent_field,
                text,
                self.name,
                self.operation,
                None,  # reason_code
                None,  # rule
                declared,  # started_at
                "SUCCESS",
                None,  # target
                self.tool,
                (),  # warnings
            )
        )
        result = succeeded(
            self.name, self.tool, self.operation, content, context.run_id, context.correlation_id
        )
        if type(opening) is tuple:
            # The response names the held opening (plain values too): nothing more to read.
            self._hold_call((HELD_RESPONSE, opening, ended, duration))  # type: ignore[misc]
        elif opening is not None:
            closing = Closing(opening, "SUCCESS", None, duration, 1, ended)
            hold = self._hold
            if hold is not None:
                hold(closing)
            elif not self._trail.store_closing(closing):  # type: ignore[union-attr]
                result.audit_failed = True
        return result

    def run(self, context: ExecutionContext, arguments: object, tools: Tools) -> ToolResult | None:
        """The call's result, or None when it must take the full chain (nothing was recorded then)."""
        if self._is_async:
            return None  # the full chain refuses it (call it with ainvoke): nothing to speed up
        begun = self._begin(context, arguments, tools)
        if type(begun) is not tuple:
            return begun  # type: ignore[no-any-return]
        runtime, declared, text, values, opening = begun
        try:
            content = self._function(**values)
        except Exception as exc:  # noqa: BLE001 - the full chain classifies it
            record = self._record(text, declared)
            invocation = self._invocation(context, tools, runtime, record, values, opening=opening)
            return self._pipeline.continue_failed(invocation, self._plan, exc)
        result = self._end(context, runtime, declared, text, opening, content)
        if result is None:
            record = self._record(text, declared)
            invocation = self._invocation(context, tools, runtime, record, values, opening=opening)
            return self._pipeline.continue_returned(invocation, self._plan, content)
        return result  # type: ignore[no-any-return]

    async def arun(self, context: ExecutionContext, arguments: object, tools: Tools) -> ToolResult | None:
        """Async twin of `run`: an ``async def`` is awaited, a ``def`` runs inline (MEMORY_ONLY)."""
        begun = self._begin(context, arguments, tools)
        if type(begun) is not tuple:
            return begun  # type: ignore[no-any-return]
        runtime, declared, text, values, opening = begun
        try:
            content = self._function(**values)
            if self._is_async:
                content = await content
        except Exception as exc:  # noqa: BLE001 - the full chain classifies it
            record = self._record(text, declared)
            invocation = self._invocation(context, tools, runtime, record, values, opening=opening)
            return await self._pipeline.acontinue_failed(invocation, self._plan, exc)
        result = self._end(context, runtime, declared, text, opening, content)
        if result is None:
            record = self._record(text, declared)
            invocation = self._invocation(context, tools, runtime, record, values, opening=opening)
            return await self._pipeline.acontinue_returned(invocation, self._plan, content)
        return result  # type: ignore[no-any-return]

    def _invocation(
        self,
        context: ExecutionContext,
        tools: Tools,
        runtime: ToolRuntime,
        record: OperationRecord,
        values: Mapping[str, Any],
        *,
        opening: Any,
    ) -> Invocation:
        """The full chain's view of this call, to continue it there (its record joins the trace now)."""
        runtime.record(record)
        invocation = Invocation(
            door=BY_NAME,
            name=self.name,
            tool=self.tool,
            operation=self.operation,
            context=context,
            arguments=values,
            record=record,
        )
        invocation.version = self.version
        invocation.descriptor = self._descriptor
        invocation.effect = self._effect
        invocation.runtime = runtime
        invocation.tools = tools
        invocation.instance = instance = tools.acquire(self.tool)
        if type(opening) is tuple:
            # The sink holds the opening as plain values; the chain's Closing needs an Opening to refer to.
            opening = Opening(self._subject, context, record.intent_text, values, record.declared_at)  # type: ignore[arg-type]
        invocation.opening = opening
        # The calls the chain's argument validation would have taken from the intent.
        invocation.call, invocation.acall = dispatch_calls(instance.call(**values))  # type: ignore[attr-defined]
        return invocation
