"""`MethodRoute`: the by-name route of a class-based ``MEMORY_ONLY`` tool's operation.

A class-based tool builds its intent in its own operation method, which may
check its arguments, record a denial or add warnings: the route cannot try it
and hand the call back to the full chain, as a ``@tool`` function's route does
(`toolbox.doors._route.Route`). So the route builds the call's `Invocation` itself,
as the by-name door and the access check would for a tool already built for
this context (a context it is not built for takes the whole chain), runs
every other check of the plan through the chain (kill switch, delegation
scope, deadline, argument validation: whatever state they read), then opens
the audit record, spends the context's budget, makes the first attempt and
records the response as the chain would, continuing in the chain after a
failure or a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, final

from toolbox.audit._batch import CallSubject
from toolbox.audit._trail import AuditTrail
from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._dispatch import arun_dispatched, run_dispatched
from toolbox.pipeline._attempts import count_attempt
from toolbox.pipeline._audit_hooks import opened
from toolbox.pipeline._chain import Pipeline, Plan
from toolbox.pipeline._invocation import Invocation, declared_record
from toolbox.pipeline._result import Status, ToolResult, succeeded
from toolbox.pipeline._result_summary import settled_inline
from toolbox.pipeline.checks._builtin import AccessCheck

if TYPE_CHECKING:
    from toolbox.doors._tools import Tools

__all__ = ["MethodRoute"]

#: What the trail's opening of a call records: its subject, context, intent text and arguments.
_OpeningFields: TypeAlias = tuple[CallSubject, ExecutionContext, str, Mapping[str, Any]]
#: `MethodRoute._open`: the intent carries warnings, so the chain goes on from its audit hook.
_WARNED = ToolResult(Status.SUCCESS, message="the intent carries warnings")


class CompiledName:
    """What a by-name route keeps of the name it was compiled for (`MethodRoute`, `Route`).

    The name, tool, operation and version the first call resolved, its plan and
    pipeline, and the audit trail with the call's subject (the fields every event
    of the name repeats), when the pipeline records through a trail.
    """

    __slots__ = (
        "_intent_field",
        "_pipeline",
        "_plan",
        "_subject",
        "_trail",
        "name",
        "operation",
        "tool",
        "version",
    )

    def __init__(
        self, invocation: Invocation, *, plan: Plan, pipeline: Pipeline, trail: AuditTrail | None
    ) -> None:
        self.name = invocation.name
        self.tool = invocation.tool
        self.operation = invocation.operation
        self.version = invocation.version
        self._intent_field = invocation.record.intent_kind
        self._plan = plan
        self._pipeline = pipeline
        self._trail = trail
        self._subject: CallSubject | None = trail.subject(invocation) if trail is not None else None


@final
class MethodRoute(CompiledName):
    """One compiled name of a class-based tool: ``run`` and ``arun`` return a result, or None.

    None means the call takes the full chain; nothing was recorded then.
    """

    __slots__ = ("_rest", "_spends")

    def __init__(
        self, invocation: Invocation, *, plan: Plan, pipeline: Pipeline, trail: AuditTrail | None
    ) -> None:
        super().__init__(invocation, plan=plan, pipeline=pipeline, trail=trail)
        #: The plan's checks but access (settled: the tool is built for the context), in order.
        self._rest = tuple(check for check in plan.checks if type(check) is not AccessCheck)
        #: What the call spends (the context's budget), taken once the audit trail stored the request.
        self._spends = plan.spends

    def _begin(self, context: ExecutionContext, arguments: object, tools: Tools) -> Invocation | None:
        """The call's invocation, its trace record appended; None: take the full chain."""
        runtime = tools.ready_runtimes.get(self.tool) or tools.route_runtime(self.tool)
        if runtime is None:
            return None
        record = declared_record(self.tool, self.operation, self._intent_field, arguments, self.name)
        runtime.record(record)
        invocation = Invocation.by_name(
            self.name,
            self.tool,
            self.operation,
            context,
            arguments,
            record,
            version=self.version,
            tools=tools,
        )
        # What the access check sets for a tool built for this context.
        invocation.granted(runtime, tools.acquire(self.tool))
        return invocation

    def _open(self, invocation: Invocation) -> ToolResult | None:
        """The chain's steps from its checks to the first attempt; a result ends the call.

        What the chain's checks, audit hook and attempt counting do for a call
        without warnings; `_WARNED` when the intent carries some (the chain then
        goes on from its audit hook, which records the warning rules).
        """
        refused = self._checked(invocation)
        trail = self._trail
        if refused is None and trail is not None:
            refused = opened(invocation, trail.open_call(*self._opening_of(invocation)))
        if refused is None:
            refused = self._spent(invocation)
            if refused is None:
                return None
        return refused if refused is _WARNED else self._pipeline.finish(invocation, refused)

    async def _aopen(self, invocation: Invocation) -> ToolResult | None:
        """`_open` for the async door: a trail's writes awaited when it awaits them."""
        refused = self._checked(invocation)
        trail = self._trail
        if refused is None and trail is not None:
            opening = trail.opening(*self._opening_of(invocation))
            refused = opened(invocation, opening if await trail.astore_opening(opening) else None)
        if refused is None:
            refused = self._spent(invocation)
            if refused is None:
                return None
        return refused if refused is _WARNED else await self._pipeline.afinish(invocation, refused)

    def _checked(self, invocation: Invocation) -> ToolResult | None:
        """The plan's checks but access: a refusal to record, `_WARNED`, or None."""
        refused = self._pipeline.check(invocation, self._rest)
        if refused is not None:
            return refused
        return _WARNED if invocation.warnings else None

    def _opening_of(self, invocation: Invocation) -> _OpeningFields:
        """What the trail's opening of ``invocation`` records."""
        subject = self._subject
        assert subject is not None  # set whenever the trail is
        return subject, invocation.context, invocation.record.intent_text, invocation.bound_arguments()

    def _spent(self, invocation: Invocation) -> ToolResult | None:
        """What the call spends, taken once its request is recorded; then its first attempt counts.

        Returns the spend's refusal, to record, or None.
        """
        if self._spends:
            refused = self._pipeline.check(invocation, self._spends)
            if refused is not None:
                return refused
        count_attempt(invocation.record, invocation.runtime)
        return None

    def _succeeded(self, invocation: Invocation, content: Any) -> ToolResult | None:
        """The result of a first attempt that returned ``content``; None when it is transient."""
        if not settled_inline(content):
            return None
        invocation.record.end("SUCCESS")
        context = invocation.context
        return succeeded(
            self.name, self.tool, self.operation, content, context.run_id, context.correlation_id
        )

    def _close(self, invocation: Invocation, content: Any) -> ToolResult | None:
        """`_succeeded`, its response recorded; None when it is transient."""
        result = self._succeeded(invocation, content)
        opening = invocation.opening
        if result is not None and opening is not None:
            trail, (duration, ended) = self._trail, _timing(invocation)
            assert trail is not None  # the opening was stored by it
            if not trail.close_call(opening, "SUCCESS", duration, 1, ended):
                result.audit_failed = True
        return result

    async def _aclose(self, invocation: Invocation, content: Any) -> ToolResult | None:
        """`_close` for the async door: the response's write awaited when the trail awaits it."""
        trail = self._trail
        if trail is None or not trail.awaits_writes:
            return self._close(invocation, content)
        result = self._succeeded(invocation, content)
        opening = invocation.opening
        if result is not None and opening is not None:
            duration, ended = _timing(invocation)
            if not await trail.astore_closing(trail.closing(opening, "SUCCESS", duration, 1, ended)):
                result.audit_failed = True
        return result

    def run(self, context: ExecutionContext, arguments: object, tools: Tools) -> ToolResult | None:
        """The call's result, or None when it must take the full chain (nothing was recorded then)."""
        invocation = self._begin(context, arguments, tools)
        if invocation is None:
            return None
        ended = self._open(invocation)
        if ended is not None:
            return self._pipeline.run_from(invocation, self._plan, ()) if ended is _WARNED else ended
        try:
            call = invocation.call
            assert call is not None  # set by the argument validation among the checks
            content = run_dispatched(self.tool, call)
        except Exception as exc:  # noqa: BLE001 - the full chain classifies it
            return self._pipeline.continue_failed(invocation, self._plan, exc)
        return self._close(invocation, content) or self._pipeline.continue_returned(
            invocation, self._plan, content
        )

    async def arun(self, context: ExecutionContext, arguments: object, tools: Tools) -> ToolResult | None:
        """Async twin of `run`: an async operation is awaited, a sync one runs inline (MEMORY_ONLY)."""
        invocation = self._begin(context, arguments, tools)
        if invocation is None:
            return None
        ended = await self._aopen(invocation)
        if ended is not None:
            return await self._pipeline.arun_from(invocation, self._plan, ()) if ended is _WARNED else ended
        try:
            acall, call = invocation.acall, invocation.call
            assert call is not None  # set by the argument validation among the checks
            content = await arun_dispatched(self.tool, acall) if acall else run_dispatched(self.tool, call)
        except Exception as exc:  # noqa: BLE001 - the full chain classifies it
            return await self._pipeline.acontinue_failed(invocation, self._plan, exc)
        return await self._aclose(invocation, content) or await self._pipeline.acontinue_returned(
            invocation, self._plan, content
        )


def _timing(invocation: Invocation) -> tuple[float, float]:
    """The duration and end of ``invocation``'s ended record."""
    record = invocation.record
    duration, ended = record.duration, record.ended_at
    assert duration is not None and ended is not None  # set by end(), after start()
    return duration, ended
