"""What a tool instance receives from toolbox when it is created."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, final

from toolbox.audit._held import held_context
from toolbox.errors import ToolDeniedError
from toolbox.foundations._binding import called_with, transformed
from toolbox.foundations._context import DenialRecord, ExecutionContext
from toolbox.foundations._descriptor import Effect, RiskClass, ToolDescriptor
from toolbox.foundations._dispatch import chain_records, guard, guard_async
from toolbox.registry._intent import ReadIntent, WriteIntent

if TYPE_CHECKING:
    from toolbox.pipeline._chain import Pipeline
    from toolbox.pipeline._ports import CallTools

__all__ = ["ToolRuntime"]

R = TypeVar("R")


@final
class ToolRuntime:
    """The bridge between a tool and toolbox: descriptor, context, options, intents.

    Providers receive one in their factory and build every operation's intent
    through `read_intent` or `write_intent`. The operation calls they pass are
    guarded: run outside the governed chain's dispatch of this tool, they raise
    `toolbox.errors.GovernanceBypassError` (see `toolbox.foundations._dispatch`).
    """

    __slots__ = (
        "_bind",
        "_effects",
        "context",
        "descriptor",
        "executions",
        "guarded",
        "held_context",
        "options",
        "pipeline",
        "plans",
        "record",
        "record_finished",
        "redaction_keys",
        "runs_inline",
        "tool_name",
        "tools",
        "trace",
    )

    def __init__(
        self,
        descriptor: ToolDescriptor,
        context: ExecutionContext,
        options: Mapping[str, Any] | None = None,
        *,
        tools: CallTools,
        bind: Mapping[str, Mapping[str, Callable[[Any], object] | None]] | None = None,
    ) -> None:
        self.descriptor = descriptor
        # The provider's ``bind`` mapping (`toolbox.ToolProvider`): what a parameter is bound as.
        self._bind = bind or {}
        self.context = context
        #: What the audit trail's held calls repeat from the context (`toolbox.audit._held.held_context`):
        #: taken once, as the context is immutable, for the by-name route's calls.
        self.held_context = held_context(context)
        #: The `Tools` that built this tool; intents execute through its governed chain.
        self.tools = tools
        self.pipeline: Pipeline = tools.catalog.pipeline
        #: Appends a record to the context's trace (bound once: it runs on every intent).
        self.record = context.trace.appender
        #: Appends the compact record of a call that has ended (see `toolbox.foundations._context.Trace`).
        self.record_finished = context.trace.finished_appender
        self.tool_name = descriptor.name
        #: The pipeline's plans of this tool's typed operations, looked up once per operation.
        self.plans: dict[str, Any] = {}
        #: The context's trace, where intents, outcomes and denials are recorded.
        self.trace = context.trace
        #: Tool-specific settings passed to ``Tools.load(options={name: ...})``.
        self.options: Mapping[str, Any] = dict(options or {})
        #: How many operations of this tool instance have started executing.
        self.executions = 0
        #: A MEMORY_ONLY tool does no I/O, so async callers run it inline, not on a thread.
        self.runs_inline = descriptor.risk is RiskClass.MEMORY_ONLY
        #: Whether operation calls are guarded (False only for ``@tool``, whose plain function is public).
        self.guarded = True
        self._effects = {op.name: op.effect for op in descriptor.operations}
        audit = tools.catalog.audit
        #: The audit trail's configured ``redact_keys`` (normalised): redact targets with them too,
        #: e.g. ``toolbox.foundations._redact.redact_url(url, runtime.redaction_keys)``.
        self.redaction_keys: frozenset[str] = audit.redaction.keys if audit is not None else frozenset()

    def effect_of(self, operation: str) -> Effect:
        """The declared effect of ``operation`` (undeclared means `Effect.UNSAFE`)."""
        return self._effects.get(operation, Effect.UNSAFE)

    def record_denial(self, error: ToolDeniedError) -> None:
        """Record a denial the tool decided itself, e.g. a path outside its roots.

        It goes to the trace, and, when the program called the operation (the
        typed door), to the audit hooks as a ``GOVERNANCE_DECISION`` (DENY); a
        by-name call or a dispatch is recorded by the chain, which sees the error.
        """
        self.trace.append(DenialRecord(error.tool, error.reason_code, error.rule))
        if not chain_records(self.tool_name):
            self.pipeline.report_denial(self.context, error.tool, error.reason_code, error.rule)

    def read_intent(
        self,
        operation: str,
        call: Callable[[], R],
        *,
        target: str | None = None,
        acall: Callable[[], Awaitable[R]] | None = None,
        arguments: Mapping[str, Any] | None = None,
        warnings: tuple[str, ...] = (),
    ) -> ReadIntent[R]:
        """The intent of a ``READ_ONLY`` operation.

        Args:
            operation: the operation name, declared ``READ_ONLY`` in the descriptor.
            call: runs the operation synchronously.
            target: what the operation touches, already redacted (never a secret).
            acall: runs it asynchronously, where the tool is async-capable.
            arguments: optional, what authorization and guardrails decide on when it is not the
                call's own arguments (HTTP: the request as it will be sent), unredacted. Approval
                fingerprints, approval requests and audit payloads always bind the arguments the
                operation method was called with (`foundations._binding`): ``arguments=`` is not needed
                for that.
            warnings: warnings to record with the call (e.g. a report-only rule it breaks).

        Raises:
            TypeError: the descriptor does not declare ``operation`` as ``READ_ONLY``.
        """
        effect = self._effects.get(operation, Effect.UNSAFE)
        if effect is not Effect.READ_ONLY:
            raise TypeError(
                f"provider bug: {self.descriptor.name}.{operation} is {effect.value}, "
                "so it must return write_intent(), which accepts only audit_as()"
            )
        bound = self._bound(operation)
        view = bound if arguments is None else arguments
        return ReadIntent(self, operation, target, *self._guarded(call, acall), view or {}, warnings, bound)

    def write_intent(
        self,
        operation: str,
        call: Callable[[], R],
        *,
        target: str | None = None,
        acall: Callable[[], Awaitable[R]] | None = None,
        arguments: Mapping[str, Any] | None = None,
        warnings: tuple[str, ...] = (),
    ) -> WriteIntent[R]:
        """The intent of an operation with side effects (anything but ``READ_ONLY``); see `read_intent`.

        Raises:
            TypeError: the descriptor declares ``operation`` as ``READ_ONLY``.
        """
        if self._effects.get(operation, Effect.UNSAFE) is Effect.READ_ONLY:
            raise TypeError(
                f"provider bug: {self.descriptor.name}.{operation} is READ_ONLY, "
                "so it must return read_intent()"
            )
        bound = self._bound(operation)
        view = bound if arguments is None else arguments
        return WriteIntent(self, operation, target, *self._guarded(call, acall), view or {}, warnings, bound)

    def _bound(self, operation: str) -> Mapping[str, Any] | None:
        """The arguments ``operation``'s method was called with, as the provider binds them."""
        bound = called_with(operation)
        transforms = self._bind.get(operation) if self._bind else None
        return transformed(bound, transforms) if bound is not None and transforms else bound

    def _guarded(
        self, call: Callable[[], R], acall: Callable[[], Awaitable[R]] | None
    ) -> tuple[Callable[[], R], Callable[[], Awaitable[R]] | None]:
        # Every operation call of a provider needs the chain's dispatch permit for this tool.
        name = self.tool_name
        return guard(name, call), None if acall is None else guard_async(name, acall)
