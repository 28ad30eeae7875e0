"""The typed door's fast path: a ``Ready.execute`` whose plan holds only the context gates.

`toolbox.pipeline._paths.typed_fast_path` decides, once per operation, that a
typed call's plan holds nothing but the kill switch and the context's own
gates (``plan.inline``); `run_inline` then tests `gates_open` on every call,
records the call through the audit trail itself and runs it, and hands any
failure, transient result or unrecordable response to the chain
(`Pipeline.continue_failed` / `continue_returned`), so the result, trace
record and audit events are the full chain's (``tests/test_typed_audit.py``).
A result that summarises itself for the audit trail (toolbox-sql's rows) is
recorded here with its summary, as the chain's audit hook would
(``tests/test_result_summary.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, final

from toolbox.foundations._context import OperationRecord
from toolbox.foundations._dispatch import run_dispatched
from toolbox.pipeline._attempts import count_attempt
from toolbox.pipeline._audit_hooks import CallRecorder, audit_unavailable
from toolbox.pipeline._chain import Pipeline
from toolbox.pipeline._invocation import TYPED, Invocation
from toolbox.pipeline._paths import Plan, gates_open
from toolbox.pipeline._ports import CallRuntime
from toolbox.pipeline._result import Status, ToolResult
from toolbox.pipeline._result_summary import inline_summary, settled_inline

__all__ = ["NOT_INLINE", "Fallback", "run_inline"]

#: `run_inline` did not apply: nothing ran.
NOT_INLINE: Any = object()


@final
class Fallback:
    """`run_inline` continued in the full chain; ``result`` is the final result."""

    __slots__ = ("result",)

    def __init__(self, result: ToolResult) -> None:
        self.result = result


def run_inline(  # noqa: PLR0917 - positional on purpose: the typed hot path
    pipeline: Pipeline,
    runtime: CallRuntime,
    record: OperationRecord,
    call: Callable[[], Any],
    build: Callable[[], Invocation],
    arguments: Mapping[str, Any],
) -> Any:
    """The typed call of ``record`` through ``pipeline``'s fast path, when its plan allows it.

    Returns the content after a plain success, a `Fallback` holding the final
    `ToolResult` when it had to continue in the full chain (after dispatch, or
    refused by the audit trail), and `NOT_INLINE` when the fast path does not
    apply (nothing ran). ``arguments`` are what the audit trail records.
    """
    plan = runtime.plans.get(record.operation)
    if plan is None:
        plan = pipeline.plan_of(record.tool, record.operation, TYPED)
        if plan is None:
            return NOT_INLINE
        runtime.plans[record.operation] = plan
    context = runtime.context
    if not plan.inline or not gates_open(runtime.tools.context_gated, pipeline.engaged, record.tool):
        return NOT_INLINE
    trail = pipeline.recorder
    opening = None
    if trail is not None:
        subject = plan.subjects.get(record.intent_kind)
        if subject is None or subject.name != record.name:
            subject = _subject(trail, runtime, record, plan)
        opening = trail.open_call(subject, context, record.intent_text, arguments)
        if opening is None:
            invocation = build()
            return Fallback(pipeline.finish(invocation, audit_unavailable(invocation)))
    count_attempt(record, runtime)
    try:
        # Calls a runtime guards need the chain's permit; a @tool function's do not.
        content = run_dispatched(record.tool, call) if runtime.guarded else call()
    except Exception as exc:  # noqa: BLE001 - continue in the full chain, which classifies it
        return Fallback(pipeline.continue_failed(_opened(build(), opening), plan, exc))
    summary = None
    if not settled_inline(content):  # transient, or a result the audit trail summarises
        summary = inline_summary(content)
        if summary is None:  # transient (the chain may retry it), or a summary that failed
            return Fallback(pipeline.continue_returned(_opened(build(), opening), plan, content))
    record.end("SUCCESS")
    if trail is not None and opening is not None:
        duration, ended = record.duration, record.ended_at
        assert duration is not None and ended is not None  # set by end(), after start()
        if not trail.close_call(opening, "SUCCESS", duration, 1, ended, summary):
            # It ran, but its response is not recorded: the typed door raises AuditIncompleteError.
            result = _opened(build(), opening).result(Status.SUCCESS, content=content)
            result.audit_failed = True
            return Fallback(result)
    return content


def _subject(trail: CallRecorder, runtime: CallRuntime, record: OperationRecord, plan: Plan) -> Any:
    """The audit subject of a typed call of ``plan``'s operation, kept by intent kind on the plan."""
    effect = runtime.effect_of(record.operation).value
    subject = trail.subject_of(
        record.name, record.tool, record.operation, runtime.descriptor.risk.value, effect, record.intent_kind
    )
    if record.name == f"{record.tool}.{record.operation}":  # the typed door's own name: one per kind
        plan.subjects[record.intent_kind] = subject
    return subject


def _opened(invocation: Invocation, opening: object | None) -> Invocation:
    """``invocation`` with the audit opening its fast path already stored."""
    invocation.opening = opening
    return invocation
