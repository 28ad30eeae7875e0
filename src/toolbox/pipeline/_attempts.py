"""What an attempt's outcome means: a result, a retry after a delay, or an uncertain effect.

After each attempt the chain asks `AttemptOutcomes`: a returned value goes
through the outcome mapper (a transient-looking value may be retried when the
effect allows it); a raised exception is classified: a denial, invalid
arguments, a plain error, a retry, a reconciliation for a ``RECONCILABLE``
operation, or ``UNCERTAIN_EFFECT`` when nobody can tell whether it took effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

from toolbox.errors import InvalidArgumentsError, ToolboxError, ToolDeniedError
from toolbox.foundations._context import OperationRecord
from toolbox.foundations._descriptor import Effect
from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline._outcomes import BusinessFailure
from toolbox.pipeline._paths import Plan
from toolbox.pipeline._ports import CallRuntime
from toolbox.pipeline._result import Status, ToolResult
from toolbox.pipeline._result_summary import PLAIN_RESULTS
from toolbox.pipeline._retry import (
    ReconcileOutcome,
    Reconciler,
    RetryPolicy,
    find_reconciler,
    is_transient_error,
    is_transient_result,
    retries_allowed,
)

__all__ = ["PLAIN_RESULTS", "AttemptOutcomes", "count_attempt", "safe_message"]


def count_attempt(record: OperationRecord, runtime: CallRuntime | None) -> None:
    """An attempt starts: its record counts it (and marks the start), the tool's runtime too.

    The one bookkeeping of every attempt, the chain's and the fast paths' first ones.
    """
    record.attempts += 1
    record.start()
    if runtime is not None:
        runtime.executions += 1


def safe_message(exc: BaseException) -> str:
    """A message safe to show a model: toolbox errors are written secret-free; others are not."""
    if isinstance(exc, ToolboxError):
        return str(exc)
    return f"the tool failed with {type(exc).__name__}"


@final
class AttemptOutcomes:
    """Turns an attempt's return value or exception into a `ToolResult`, or a delay before a retry."""

    __slots__ = ("_reconcilers", "_retry")

    def __init__(self, retry: RetryPolicy, reconcilers: Mapping[str, Reconciler]) -> None:
        self._retry = retry
        self._reconcilers = dict(reconcilers)

    def after_success(self, invocation: Invocation, content: Any, plan: Plan) -> ToolResult | float:
        """The result of an attempt that returned ``content``, or seconds to wait before retrying."""
        if (
            type(content) not in PLAIN_RESULTS
            and retries_allowed(invocation.effect)
            and self._can_retry(invocation)
            and is_transient_result(content)
        ):
            return self._retry.delay(invocation.record.attempts)
        return self.map_outcome(invocation, content, plan)

    def after_failure(self, invocation: Invocation, exc: Exception, plan: Plan) -> ToolResult | float:
        """The result of an attempt that raised ``exc``, or seconds to wait before retrying."""
        invocation.error = exc
        if isinstance(exc, ToolDeniedError):
            if exc.request_sent is False and invocation.record.attempts:
                invocation.record.attempts -= 1  # refused before anything was sent: no attempt made
            return invocation.denied(exc.reason_code, exc.rule, str(exc))
        if isinstance(exc, InvalidArgumentsError):
            return invocation.invalid(exc.error_code, exc.field_path, str(exc))
        transient = is_transient_error(exc)
        if transient is None:
            return invocation.result(Status.ERROR, error_code=type(exc).__name__, message=safe_message(exc))
        effect = invocation.effect
        if retries_allowed(effect):
            if self._can_retry(invocation):
                return self._retry.delay(invocation.record.attempts)
            return invocation.result(Status.ERROR, error_code=transient, message=safe_message(exc))
        if getattr(exc, "request_sent", None) is False:
            # Nothing reached the remote side: a plain failure, not an uncertain effect.
            return invocation.result(Status.ERROR, error_code=transient, message=safe_message(exc))
        if effect is Effect.RECONCILABLE:
            reconciler = find_reconciler(self._reconcilers, invocation.tool, invocation.operation)
            if reconciler is not None:
                return self._reconcile(invocation, reconciler, exc, transient, plan)
        return _uncertain(invocation, transient)

    def map_outcome(self, invocation: Invocation, content: Any, plan: Plan) -> ToolResult:
        """SUCCESS, or what the plan's outcome mapper makes of ``content`` (BUSINESS_FAILED, ERROR)."""
        mapper = plan.mapper
        if mapper is None:
            return invocation.result(Status.SUCCESS, content=content)
        try:
            verdict: object = mapper(content)
        except Exception as exc:  # noqa: BLE001 - the tool ran: report an error, never hide the run
            invocation.error = exc
            return invocation.result(
                Status.ERROR,
                reason_code="GOVERNANCE_EVALUATION_FAILED",
                error_code="MAPPER_FAILED",
                message=f"the outcome mapper failed ({type(exc).__name__}) after the tool ran",
                content=content,
            )
        if verdict is None:
            return invocation.result(Status.SUCCESS, content=content)
        if not isinstance(verdict, BusinessFailure):
            return invocation.result(
                Status.ERROR, error_code="MAPPER_FAILED", message="the outcome mapper returned a non-verdict"
            )
        return invocation.result(
            Status.BUSINESS_FAILED,
            error_code=verdict.error_code,
            message=verdict.message or f"business outcome failed: {verdict.error_code}",
            content=content,
        )

    def _can_retry(self, invocation: Invocation) -> bool:
        return invocation.record.attempts < self._retry.max_attempts

    def _reconcile(
        self, invocation: Invocation, reconciler: Reconciler, exc: Exception, transient: str, plan: Plan
    ) -> ToolResult | float:
        try:
            found = reconciler(invocation, exc)
            outcome = found.outcome
        except Exception:  # noqa: BLE001 - an unanswerable reconciliation is an uncertain effect
            return _uncertain(invocation, transient)
        if outcome is ReconcileOutcome.APPLIED:
            return self.map_outcome(invocation, found.content, plan)
        if outcome is ReconcileOutcome.NOT_APPLIED:
            if self._can_retry(invocation):
                return self._retry.delay(invocation.record.attempts)
            return invocation.result(
                Status.ERROR, error_code=transient, message=f"{transient.lower()} and not applied"
            )
        return _uncertain(invocation, transient)


def _uncertain(invocation: Invocation, transient: str) -> ToolResult:
    return invocation.result(
        Status.UNCERTAIN_EFFECT,
        error_code=transient,
        message=(
            f"{invocation.tool}.{invocation.operation} may or may not have taken effect "
            f"({transient}); check before repeating it"
        ),
    )
