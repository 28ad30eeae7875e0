"""The intent phase: building blocks every provider uses.

An operation returns an intent object that has no ``execute()``. Declaring
why the call happens returns the object that does:

- `ReadIntent` (``READ_ONLY`` operations) offers ``purpose(text)`` and
  ``audit_as(text)``;
- `WriteIntent` (every other effect) offers only ``audit_as(text)``;
- both return a `Ready`, which executes exactly once.

The split is visible to the type checker, so ``mypy --strict`` rejects
``tool.get(url).execute()`` and ``tool.post(url).purpose("...")``.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, NoReturn, Protocol, TypeVar, cast, final

from toolbox.errors import (
    ApprovalRequired,
    AuditIncompleteError,
    BusinessFailedError,
    IntentAlreadyExecutedError,
    InvalidArgumentsError,
    ToolDeniedError,
    ToolExecutionError,
    UncertainEffectError,
)
from toolbox.foundations._context import OperationRecord
from toolbox.foundations._intent_text import MAX_INTENT_LENGTH, VALID_TEXTS, validate_intent_text
from toolbox.pipeline._chain import Pipeline
from toolbox.pipeline._invocation import TYPED, Invocation
from toolbox.pipeline._ports import CallRuntime, CallTools
from toolbox.pipeline._result import Status, ToolResult
from toolbox.pipeline._typed_path import NOT_INLINE, Fallback, run_inline
from toolbox.pipeline.checks._arguments import dispatch_calls

if TYPE_CHECKING:
    from toolbox.pipeline.checks._approval import Approval

__all__ = [
    "MAX_INTENT_LENGTH",
    "ReadIntent",
    "Ready",
    "WriteIntent",
    "dispatch_calls",
    "validate_intent_text",
]

R = TypeVar("R")


class IntentRuntime(CallRuntime, Protocol):
    """What an intent uses of its tool's `toolbox.ToolRuntime` (which imports this module)."""

    @property
    def tool_name(self) -> str:
        """The tool's name."""

    @property
    def tools(self) -> CallTools:
        """The `Tools` that built the tool."""

    @property
    def pipeline(self) -> Pipeline:
        """The governed chain intents execute through."""

    @property
    def record(self) -> Callable[[OperationRecord], None]:
        """Appends a record to the context's trace."""


# One lock for all claims: the critical section is two attribute operations.
_CLAIM_LOCK = threading.Lock()


class _Intent(Generic[R]):
    __slots__ = ("_acall", "_arguments", "_bound", "_call", "_operation", "_runtime", "_target", "_warnings")

    def __init__(  # noqa: PLR0917 - built on every call: positional arguments are cheaper
        self,
        runtime: IntentRuntime,
        operation: str,
        target: str | None,
        call: Callable[[], R],
        acall: Callable[[], Awaitable[R]] | None,
        arguments: Mapping[str, Any],
        warnings: tuple[str, ...] = (),
        bound: Mapping[str, Any] | None = None,
    ) -> None:
        self._runtime = runtime
        self._operation = operation
        self._target = target
        self._call = call
        self._acall = acall
        self._arguments = arguments
        self._warnings = warnings
        # None: the call's bound arguments are ``arguments`` (a @tool function, a described tool).
        self._bound = bound if bound is not arguments else None

    @property
    def tool(self) -> str:
        """The tool's name."""
        return self._runtime.descriptor.name

    @property
    def operation(self) -> str:
        """The operation's name."""
        return self._operation

    @property
    def target(self) -> str | None:
        """The redacted target, e.g. a URL without credentials."""
        return self._target

    def audit_as(self, text: str) -> Ready[R]:
        """Declare what this call does, for the audit trail; returns the executable call.

        Raises:
            ValueError: ``text`` is empty, longer than 1000 characters or has control characters.
        """
        return self._ready("audit_as", text)

    @property
    def arguments(self) -> Mapping[str, Any]:
        """What authorization and guardrails decide on (never recorded as is)."""
        return self._arguments

    @property
    def bound(self) -> Mapping[str, Any]:
        """The call's arguments by declared parameter: what approvals bind and the audit records."""
        bound = self._bound
        return self._arguments if bound is None else bound

    @property
    def warnings(self) -> tuple[str, ...]:
        """Warnings the tool attached when the operation was called (e.g. a report-only egress rule)."""
        return self._warnings

    def _ready(self, kind: str, text: str) -> Ready[R]:
        if type(text) is not str or text not in VALID_TEXTS:
            text = validate_intent_text(text)
        runtime = self._runtime
        record = OperationRecord(runtime.tool_name, self._operation, kind, text, self._target)
        runtime.record(record)
        return Ready(runtime, record, self._call, self._acall, self._arguments, self._warnings, self._bound)

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> NoReturn:
            if name in ("execute", "aexecute"):
                raise AttributeError(
                    f"{self.tool}.{self._operation}() has no {name}(): declare the intent first, "
                    f"with {self._intent_methods()}"
                )
            raise AttributeError(name)

    def _intent_methods(self) -> str:
        return '.audit_as("...")'

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.tool}.{self._operation} target={self._target!r})"


@final
class ReadIntent(_Intent[R]):
    """Intent of a ``READ_ONLY`` operation: call `purpose` or `audit_as`."""

    __slots__ = ()

    def purpose(self, text: str) -> Ready[R]:
        """Declare why this read happens; returns the executable call.

        Raises:
            ValueError: ``text`` is empty, longer than 1000 characters or has control characters.
        """
        return self._ready("purpose", text)

    def _intent_methods(self) -> str:
        return '.purpose("...") or .audit_as("...")'


@final
class WriteIntent(_Intent[R]):
    """Intent of an operation with side effects: only `audit_as` is accepted."""

    __slots__ = ()

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> NoReturn:
            if name == "purpose":
                raise AttributeError(
                    f"{self.tool}.{self._operation}() has side effects: declare it with "
                    '.audit_as("...") instead of .purpose(...)'
                )
            return super().__getattr__(name)


@final
class Ready(Generic[R]):
    """A call with its intent declared. Executes exactly once, through the governed chain."""

    __slots__ = (
        "_acall",
        "_arguments",
        "_bound",
        "_call",
        "_claimed",
        "_last",
        "_record",
        "_runtime",
        "_warnings",
    )

    def __init__(  # noqa: PLR0917 - built on every call: positional arguments are cheaper
        self,
        runtime: IntentRuntime,
        record: OperationRecord,
        call: Callable[[], R],
        acall: Callable[[], Awaitable[R]] | None,
        arguments: Mapping[str, Any],
        warnings: tuple[str, ...] = (),
        bound: Mapping[str, Any] | None = None,
    ) -> None:
        self._warnings = warnings
        self._bound = bound
        self._runtime = runtime
        self._record = record
        self._call = call
        self._acall = acall
        self._arguments = arguments
        self._claimed = False
        self._last: Invocation | None = None

    @property
    def record(self) -> OperationRecord:
        """The trace record of this operation."""
        return self._record

    def _claim(self) -> None:
        with _CLAIM_LOCK:
            already, self._claimed = self._claimed, True
        if already:
            raise IntentAlreadyExecutedError(
                f"{self._record.tool}.{self._record.operation} was already executed; "
                "build a new intent for another call"
            )

    def _invocation(self, approval: Approval | None) -> Invocation:
        self._claim()
        invocation = self._build_invocation()
        invocation.approval = approval
        return invocation

    def _build_invocation(self) -> Invocation:
        runtime = self._runtime
        record = self._record
        invocation = Invocation(
            door=TYPED,
            name=record.name,
            tool=record.tool,
            operation=record.operation,
            context=runtime.context,
            arguments=self._arguments,
            record=record,
        )
        invocation.tools = runtime.tools
        invocation.runtime = runtime
        if self._bound is not None:
            invocation.bound = self._bound
        invocation.descriptor = runtime.descriptor
        invocation.effect = runtime.effect_of(record.operation)
        invocation.call = self._call
        invocation.acall = self._acall
        if self._warnings:
            invocation.warnings = self._warnings
        self._last = invocation
        return invocation

    def execute(self, *, approval: Approval | None = None) -> R:
        """Run the operation through the governed chain and return its result.

        Args:
            approval: a grant for an earlier `ApprovalRequired` with the same arguments.

        Raises:
            IntentAlreadyExecutedError: this object was executed before.
            ToolDeniedError: a check refused the call (a `PermissionError`).
            ApprovalRequired: the call needs a human approval (not a `ToolboxError`).
            BusinessFailedError, UncertainEffectError: see `toolbox.Status`.
            Exception: whatever the operation raised, when it failed.
        """
        if approval is None and not self._warnings:
            self._claim()
            bound = self._bound
            outcome = run_inline(
                self._runtime.pipeline,
                self._runtime,
                self._record,
                self._call,
                self._build_invocation,
                self._arguments if bound is None else bound,
            )
            if outcome is NOT_INLINE:
                invocation = self._build_invocation()
            elif type(outcome) is Fallback:
                return self._content(outcome.result, self._last)
            else:
                return cast("R", outcome)
        else:
            invocation = self._invocation(approval)
        return self._content(self._runtime.pipeline.run(invocation), invocation)

    def _content(self, result: ToolResult, invocation: Invocation | None) -> R:
        if result.status is Status.SUCCESS and not result.audit_failed:
            return cast("R", result.content)
        assert invocation is not None
        raise_for_result(result, invocation)

    async def aexecute(self, *, approval: Approval | None = None) -> R:
        """Async twin of `execute`.

        Uses the tool's async implementation where it has one. A ``MEMORY_ONLY``
        tool runs inline; other sync-only tools run on a worker thread.
        """
        runtime = self._runtime
        if (
            approval is None
            and not self._warnings
            and self._acall is None
            and runtime.runs_inline
            and not runtime.pipeline.awaits_state
        ):
            # A MEMORY_ONLY tool without an async implementation runs inline either way
            # (unless a state store's checks must be awaited off the loop).
            return self.execute()
        invocation = self._invocation(approval)
        return self._content(await self._runtime.pipeline.arun(invocation), invocation)

    def __repr__(self) -> str:
        r = self._record
        return f"Ready({r.tool}.{r.operation} {r.intent_kind}={r.intent_text!r} status={r.status})"


def raise_for_result(result: ToolResult, invocation: Invocation) -> NoReturn:
    """Raise the typed door's exception for a result that is not SUCCESS."""
    error = invocation.error
    status = result.status
    message = result.message or f"{result.name}: {status.value}"
    if result.audit_failed and result.attempts > 0:
        raise AuditIncompleteError(
            f"{result.name} ran (status {status.value}) and its effect happened, but the audit trail "
            "could not record it; the record was kept in the fallback file for replay",
            status=status.value,
            content=result.content,
        ) from error
    if status is Status.APPROVAL_REQUIRED:
        raise ApprovalRequired(result.approval)
    if status is Status.DENIED:
        if isinstance(error, ToolDeniedError):
            raise error
        raise ToolDeniedError(
            message, tool=result.tool, reason_code=result.reason_code or "DENIED", rule=result.rule or ""
        )
    if status is Status.INVALID_ARGUMENTS:
        if isinstance(error, InvalidArgumentsError):
            raise error
        raise InvalidArgumentsError(
            message, error_code=result.error_code or "invalid", field_path=result.field_path or ""
        )
    if status is Status.BUSINESS_FAILED:
        raise BusinessFailedError(message, error_code=result.error_code or "", content=result.content)
    if status is Status.UNCERTAIN_EFFECT:
        raise UncertainEffectError(message) from error
    if error is not None:
        raise error
    raise ToolExecutionError(message)
