"""`Route`: a by-name call compiled for its name, where only the default checks apply.

The full chain builds an `Invocation` and asks every interceptor whether it
applies, on every call. For a synchronous ``MEMORY_ONLY`` function tool
whose parameters validate to immutable values and whose plan holds nothing
but the built-in checks (kill switch, access, deadline, argument validation,
budget), no outcome mapper, no timeout and no hook but the audit trail, the
gateway compiles a route after the first call of the name that reached the
tool (`toolbox.pipeline.paths.by_name_route` decides, beside the typed fast
path's decision). The decisions that cannot change between calls (registry, policy,
version, which checks apply) are then taken once; what can change is checked
on every call, and anything out of the ordinary goes to the full chain before
anything is recorded:

- a context with a deadline, a budget or a delegation scope, an engaged kill switch, a tool not
  yet built for this context, an approval grant;
- arguments that are not a small, flat JSON object, or that fail validation
  (the full chain then produces the INVALID_ARGUMENTS result);
- after dispatch, an exception or a transient result continues in the full
  chain's retry loop with the same record and audit opening.

A routed call leaves the same `ToolResult`, trace record and audit events as
the full chain; the test suite runs every scenario through both.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from types import UnionType
from typing import TYPE_CHECKING, Any, Literal, Union, final, get_args, get_origin

from toolbox.audit.batch import IMMUTABLE_TYPES, Closing, Opening
from toolbox.audit.trail import AuditTrail, audit_unavailable
from toolbox.context import ExecutionContext, OperationRecord
from toolbox.descriptor import ToolDescriptor
from toolbox.intent import validate_intent_text
from toolbox.pipeline.arguments import ArgumentLimits, ArgumentValidation, OperationSchema, flat_and_small
from toolbox.pipeline.chain import PLAIN_RESULTS, Pipeline, Plan
from toolbox.pipeline.checks import KillSwitch
from toolbox.pipeline.invocation import BY_NAME, Invocation
from toolbox.pipeline.paths import by_name_route
from toolbox.pipeline.result import ToolResult, succeeded
from toolbox.pipeline.retry import is_transient_result

if TYPE_CHECKING:
    from toolbox.runtime import ToolRuntime
    from toolbox.tools import Tools

__all__ = ["Route", "compile_route"]

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


def compile_route(invocation: Invocation, pipeline: Pipeline, schema: OperationSchema) -> Route | None:
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
    validation = next(c for c in plan.checks if type(c) is ArgumentValidation)
    return Route(
        invocation,
        plan=plan,
        pipeline=pipeline,
        schema=schema,
        function=invocation.instance.function,  # type: ignore[attr-defined]
        kill_switch=kill_switch,
        limits=validation.limits,
        trail=pipeline.hooks[0] if pipeline.hooks else None,  # type: ignore[arg-type]
    )


@final
class Route:
    """One compiled by-name name: ``run`` and ``arun`` return a result, or None for the full chain."""

    __slots__ = (
        "_descriptor",
        "_effect",
        "_engaged",
        "_function",
        "_hold",
        "_intent_field",
        "_limits",
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
        self._engaged = kill_switch.engaged
        self._limits = limits
        self._trail = trail
        # Where the trail lets batches go straight to the sink (it cannot fail): one call less.
        self._hold = trail.direct_hold if trail is not None else None
        self._subject = trail.subject(invocation) if trail is not None else None

    # -- the call -------------------------------------------------------------------

    def _attempt(self, context: ExecutionContext, arguments: object, tools: Tools) -> Any:
        """The first attempt: a `ToolResult`, None (take the full chain), or a `_Continue`.

        One method on purpose: this is the hot path, and each call level costs.
        """
        if (
            context.deadline is not None
            or context.budget is not None
            or context.scope is not None
            or not flat_and_small(arguments, self._limits)  # type: ignore[arg-type]
            or self._engaged(self.tool)
        ):
            return None
        runtime = tools.built_runtime(self.tool)
        if runtime is None:
            return None
        try:
            # The model instance is thrown away: its field dict can be taken as it is.
            values: dict[str, Any] = self._validate(arguments).__dict__
            text = validate_intent_text(values.pop(self._intent_field))
        except ValueError:  # pydantic's ValidationError included
            return None
        record = OperationRecord(self.tool, self.operation, self._intent_field, text, None, self.name)
        runtime.record(record)
        trail = self._trail
        opening = None
        if trail is not None:
            # Immutable values (compile_route checked the field types): safe to redact when read.
            opening = Opening(self._subject, context, text, values, record.declared_at)  # type: ignore[arg-type]
            hold = self._hold
            if hold is not None:
                hold(opening)
            elif not trail.store_opening(opening):
                invocation = self._invocation(context, tools, runtime, record, values, opening=None)
                return self._pipeline.finish(invocation, audit_unavailable(invocation))
        record.attempts = 1
        record.started_at = record.declared_at
        record.status = "STARTED"
        runtime.executions += 1
        try:
            content = self._function(**values)
        except Exception as exc:  # noqa: BLE001 - the full chain classifies it
            invocation = self._invocation(context, tools, runtime, record, values, opening=opening)
            return _Continue(invocation, exc, None)
        if type(content) not in PLAIN_RESULTS and is_transient_result(content):
            invocation = self._invocation(context, tools, runtime, record, values, opening=opening)
            return _Continue(invocation, None, content)
        record.ended_at = ended = _now()
        record.duration = duration = ended - record.declared_at
        record.status = "SUCCESS"
        result = succeeded(
            self.name, self.tool, self.operation, content, context.run_id, context.correlation_id
        )
        if opening is not None:
            closing = Closing(opening, "SUCCESS", None, duration, 1, ended)
            hold = self._hold
            if hold is not None:
                hold(closing)
            elif not trail.store_closing(closing):  # type: ignore[union-attr]
                result.audit_failed = True
        return result

    def run(self, context: ExecutionContext, arguments: object, tools: Tools) -> ToolResult | None:
        """The call's result, or None when it must take the full chain (nothing was recorded then)."""
        outcome = self._attempt(context, arguments, tools)
        if type(outcome) is _Continue:
            if outcome.error is not None:
                return self._pipeline.continue_failed(outcome.invocation, self._plan, outcome.error)
            return self._pipeline.continue_returned(outcome.invocation, self._plan, outcome.content)
        return outcome  # type: ignore[no-any-return]

    async def arun(self, context: ExecutionContext, arguments: object, tools: Tools) -> ToolResult | None:
        """Async twin of `run`: the function runs inline (MEMORY_ONLY); retries sleep without blocking."""
        outcome = self._attempt(context, arguments, tools)
        if type(outcome) is _Continue:
            if outcome.error is not None:
                return await self._pipeline.acontinue_failed(outcome.invocation, self._plan, outcome.error)
            return await self._pipeline.acontinue_returned(outcome.invocation, self._plan, outcome.content)
        return outcome  # type: ignore[no-any-return]

    def _invocation(
        self,
        context: ExecutionContext,
        tools: Tools,
        runtime: ToolRuntime,
        record: OperationRecord,
        values: Mapping[str, Any],
        *,
        opening: Opening | None,
    ) -> Invocation:
        """The full chain's view of this call, to continue it there."""
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
        invocation.instance = tools.acquire(self.tool)
        invocation.opening = opening
        function = self._function
        invocation.call = lambda: function(**values)
        return invocation


@final
class _Continue:
    """The first attempt raised or returned a transient result: the full chain's retry loop goes on."""

    __slots__ = ("content", "error", "invocation")

    def __init__(self, invocation: Invocation, error: Exception | None, content: Any) -> None:
        self.invocation = invocation
        self.error = error
        self.content = content
