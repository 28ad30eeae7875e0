"""`Pipeline`: runs the ordered interceptors, the effect-aware dispatch and the outcome mapping.

Both front doors run an `Invocation` through the same `Pipeline`::

    kill switch -> delegation scope -> access (registry, policy, acknowledgement) -> deadline -> authorization
    -> argument validation -> guardrails -> approval (verify) -> your interceptors
    -> audit(request) -> spend (budget, shared limits, grant)
    -> retry by effect { per-attempt checks -> operation }
    -> business-outcome mapping -> audit(response)

What a call spends (a budget unit, a rate-limit token, a grant: the checks
marked ``spends``) is taken after every other check and after the audit trail
stored the request, so a call refused by anything but the spend itself spends
nothing. An approval request takes its pending-queue slot the same way: it is
submitted (`Invocation.commit`) only once the audit trail recorded it.

On the async door, a check whose state store does I/O (``blocks``: the kill
switch's refresh, the shared limits, the approval store on Redis or SQL) is
awaited through its ``acall``, which runs the store operation off the event
loop (`toolbox.pipeline._offload`); every other check runs as on the sync door.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, final

from toolbox.errors import InvalidArgumentsError
from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._descriptor import RiskClass
from toolbox.foundations._dispatch import arun_dispatched, run_dispatched
from toolbox.pipeline._attempts import PLAIN_RESULTS, AttemptOutcomes, count_attempt
from toolbox.pipeline._audit_hooks import AuditHook, AwaitedAuditHook, CallRecorder, audit_unavailable
from toolbox.pipeline._interceptor import Interceptor, spends
from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline._outcomes import OutcomeMappers
from toolbox.pipeline._paths import Plan, typed_fast_path
from toolbox.pipeline._result import Status, ToolResult
from toolbox.pipeline._retry import Reconciler, RetryPolicy
from toolbox.pipeline._timed import OperationTimeoutError, await_within, call_within
from toolbox.pipeline.checks._builtin import KillSwitch

if TYPE_CHECKING:
    pass

__all__ = [
    "PLAIN_RESULTS",
    "AuditHook",
    "CallRecorder",
    "OperationTimeoutError",
    "Pipeline",
    "Plan",
    "audit_unavailable",
]


def _always(invocation: Invocation) -> bool:
    return True


def _never(tool: str) -> bool:
    return False


#: What a step of the chain asks its door to do (`Pipeline._steps`), with the door's answer:
#: run checks (a refusal or None), call the operation ((content, None) or (None, exception)),
#: sleep before a retry (None), settle a commit ((commit, result): the settled result); with
#: hooks whose writes the async door awaits: open (the audit request: a refusal or None) and
#: finish (a result: the recorded result).
_CHECK, _CALL, _SLEEP, _SETTLE, _OPEN, _FINISH = "check", "call", "sleep", "settle", "open", "finish"
Steps: TypeAlias = Generator[tuple[str, Any], Any, ToolResult]


@final
class Pipeline:
    """The governed chain. Built once from `toolbox.Governance`; runs any number of invocations."""

    __slots__ = (
        "_awaited",
        "_awaited_hooks",
        "_before",
        "_hooks",
        "_mappers",
        "_outcomes",
        "_plans",
        "_timeouts",
        "engaged",
        "recorder",
    )

    def __init__(
        self,
        interceptors: Sequence[Interceptor],
        *,
        retry: RetryPolicy,
        reconcilers: Mapping[str, Reconciler],
        mappers: OutcomeMappers,
        timeouts: Mapping[str, float],
        hooks: Sequence[AuditHook] = (),
        recorder: CallRecorder | None = None,
    ) -> None:
        self._before = tuple(interceptors)
        self._outcomes = AttemptOutcomes(retry, reconcilers)
        self._mappers = mappers
        self._timeouts = dict(timeouts)
        self._hooks = tuple(hooks)
        self._plans: dict[tuple[str, str, str], Plan] = {}
        kill_switch = next((c for c in self._before if isinstance(c, KillSwitch)), None)
        #: Whether the kill switch stops calls of a tool now (never, without a kill switch).
        self.engaged: Callable[[str], bool] = kill_switch.engaged if kill_switch is not None else _never
        # The async door awaits these checks (by id): their stores do I/O. Empty: arun checks as run does.
        self._awaited: dict[int, Callable[[Invocation], Awaitable[ToolResult | None]]] = {
            id(c): c.acall  # type: ignore[attr-defined]
            for c in self._before
            if getattr(c, "blocks", False) is True and callable(getattr(c, "acall", None))
        }
        # Hooks whose writes the async door awaits (a durable audit trail): by id, their hook points.
        self._awaited_hooks: dict[int, AwaitedAuditHook] = {
            id(h): h  # type: ignore[misc]
            for h in self._hooks
            if getattr(h, "awaits_writes", False) is True
        }
        only = self._hooks[0] if len(self._hooks) == 1 else None
        #: The audit trail, when it is the only hook: the fast paths record through it.
        self.recorder = recorder if recorder is not None and recorder is only else None

    @property
    def awaits_state(self) -> bool:
        """Whether the async door awaits some check off the loop (a state store that does I/O)."""
        return bool(self._awaited)

    @property
    def interceptors(self) -> tuple[Interceptor, ...]:
        """The ordered checks run before dispatch (those that spend last)."""
        return self._before

    # -- checks ---------------------------------------------------------------

    @staticmethod
    def _check(invocation: Invocation, checks: Sequence[Interceptor]) -> ToolResult | None:
        for check in checks:
            try:
                stop = check(invocation)
            except Exception as exc:  # noqa: BLE001 - any evaluator failure fails closed
                return _check_failed(invocation, check, exc)
            if stop is not None:
                return stop
        return None

    async def _acheck(self, invocation: Invocation, checks: Sequence[Interceptor]) -> ToolResult | None:
        """`_check` for the async door: checks whose store does I/O are awaited off the loop."""
        awaited = self._awaited
        if not awaited:
            return self._check(invocation, checks)
        for check in checks:
            acall = awaited.get(id(check))
            try:
                stop = check(invocation) if acall is None else await acall(invocation)
            except Exception as exc:  # noqa: BLE001 - any evaluator failure fails closed
                return _check_failed(invocation, check, exc)
            if stop is not None:
                return stop
        return None

    def _open(self, invocation: Invocation) -> ToolResult | None:
        for hook in self._hooks:
            try:
                stop = hook.on_request(invocation)
            except Exception as exc:  # noqa: BLE001 - a failing hook fails closed
                return _hook_failed(invocation, hook, exc)
            if stop is not None:
                return stop
        return None

    async def _aopen(self, invocation: Invocation) -> ToolResult | None:
        """`_open` for the async door: a hook whose writes are awaited is awaited."""
        awaited = self._awaited_hooks
        for hook in self._hooks:
            try:
                hooked = awaited.get(id(hook))
                stop = hook.on_request(invocation) if hooked is None else await hooked.aon_request(invocation)
            except Exception as exc:  # noqa: BLE001 - a failing hook fails closed
                return _hook_failed(invocation, hook, exc)
            if stop is not None:
                return stop
        return None

    @property
    def awaits_audit(self) -> bool:
        """Whether the async door awaits some audit hook's writes (a durable trail)."""
        return bool(self._awaited_hooks)

    @property
    def hooks(self) -> tuple[AuditHook, ...]:
        """The audit hooks, in order."""
        return self._hooks

    def report_denial(
        self, context: ExecutionContext, tool: str, reason_code: str, rule: str, *, operation: str = ""
    ) -> None:
        """Tell hooks that implement ``on_denial`` about a refusal outside the chain (e.g. ``get()``).

        ``operation`` names the operation tried, when the refusal knows one (a call outside a
        toolset); hooks get it as the keyword ``operation`` only then.
        """
        for hook in self._hooks:
            on_denial = getattr(hook, "on_denial", None)
            if on_denial is None:
                continue
            if operation:
                on_denial(context, tool, reason_code, rule, operation=operation)
            else:
                on_denial(context, tool, reason_code, rule)

    def report_untrusted(self, name: str) -> None:
        """Tell hooks that implement ``on_untrusted`` about a call without a trusted context."""
        for hook in self._hooks:
            on_untrusted = getattr(hook, "on_untrusted", None)
            if on_untrusted is not None:
                on_untrusted(name)

    def _plan(self, invocation: Invocation) -> Plan:
        """The checks that can apply to this tool, operation and door, decided once."""
        key = (invocation.tool, invocation.operation, invocation.door)
        plan = self._plans.get(key)
        if plan is None:
            applies = [c for c in self._before if getattr(c, "applies", _always)(invocation)]
            tool, operation = invocation.tool, invocation.operation
            timeout = self._timeouts.get(f"{tool}.{operation}") or self._timeouts.get(tool)
            descriptor = invocation.descriptor
            inline = descriptor is not None and descriptor.risk is RiskClass.MEMORY_ONLY
            plan = Plan(
                tuple(c for c in applies if not spends(c)),
                tuple(c for c in applies if c.per_attempt),
                None if inline else timeout,
                self._mappers.find(tool, operation) if self._mappers else None,
                tuple(c for c in applies if spends(c)),
            )
            plan.inline = typed_fast_path(plan, self._hooks, self.recorder)
            self._plans[key] = plan
        return plan

    # -- the steps: one implementation, both doors --------------------------------

    def _steps(self, invocation: Invocation, plan: Plan, checks: Sequence[Interceptor]) -> Steps:
        """The chain from ``checks`` on: checks, audit request, spends, attempts, outcome, commit.

        Written once for both doors: it yields what needs a door (running checks, the
        operation, a sleep before a retry, settling a commit) and its door's shell
        (`_drive`, `_adrive`) does it inline or awaited, and sends the answer back.
        """
        result = (yield _CHECK, checks) if checks else None
        if result is None and self._hooks:
            result = (yield _OPEN, None) if self._awaited_hooks else self._open(invocation)
        if result is None and plan.spends:
            result = yield _CHECK, plan.spends
        if result is None:
            result = yield from self._attempts(invocation, plan, None)
        return (yield from self._recorded(invocation, result))

    def _attempts(self, invocation: Invocation, plan: Plan, pending: ToolResult | float | None) -> Steps:
        """The effect-aware retry loop, from ``pending`` (a first attempt's outcome) when given."""
        while True:
            if pending is None:
                record = invocation.record
                if record.attempts and plan.per_attempt:  # a retry: its per-attempt checks first
                    stop: ToolResult | None = yield _CHECK, plan.per_attempt
                    if stop is not None:
                        return stop
                count_attempt(record, invocation.runtime)
                content, exc = yield _CALL, None
                if exc is not None:
                    step = self._outcomes.after_failure(invocation, exc, plan)
                else:
                    step = self._outcomes.after_success(invocation, content, plan)
            else:
                step, pending = pending, None
            if isinstance(step, ToolResult):
                return step
            yield _SLEEP, step

    def _recorded(self, invocation: Invocation, result: ToolResult) -> Steps:
        """Record ``result`` as final; then what waited for the record (an approval request's slot)."""
        result = yield from self._finished(invocation, result)
        commit = invocation.commit
        if commit is not None:
            # An approval request recorded by the audit trail (or not): now its slot is taken (or not).
            invocation.commit = None
            settled = yield _SETTLE, (commit, result)
            if settled is not result:
                result = yield from self._finished(invocation, settled)
        return result

    def _finished(self, invocation: Invocation, result: ToolResult) -> Steps:
        """`_finish`, as a step of the door's when it awaits audit writes."""
        if self._awaited_hooks:
            recorded: ToolResult = yield _FINISH, result
            return recorded
        return self._finish(invocation, result)

    def _continued(self, invocation: Invocation, plan: Plan, step: ToolResult | float) -> Steps:
        """The steps after a first attempt made outside the chain, whose outcome is ``step``."""
        result = yield from self._attempts(invocation, plan, step)
        return (yield from self._finished(invocation, result))

    # -- the doors: thin shells over the steps ----------------------------------------

    def run(self, invocation: Invocation) -> ToolResult:
        """Run ``invocation`` through the chain and return its result (never raises for denials)."""
        plan = self._plan(invocation)
        return self.run_from(invocation, plan, plan.checks)

    def run_from(self, invocation: Invocation, plan: Plan, checks: Sequence[Interceptor]) -> ToolResult:
        """`run` from ``checks`` on: the plan's other checks were settled by a by-name route.

        The plan's spending checks run after the audit request, whatever ``checks`` holds.
        """
        return self._drive(invocation, plan, self._steps(invocation, plan, checks))

    async def arun(self, invocation: Invocation) -> ToolResult:
        """Async twin of `run`; sync-only I/O tools run on a worker thread, MEMORY_ONLY inline."""
        plan = self._plan(invocation)
        return await self.arun_from(invocation, plan, plan.checks)

    async def arun_from(
        self, invocation: Invocation, plan: Plan, checks: Sequence[Interceptor]
    ) -> ToolResult:
        """Async twin of `run_from`."""
        return await self._adrive(invocation, plan, self._steps(invocation, plan, checks))

    def continue_failed(self, invocation: Invocation, plan: Plan, exc: Exception) -> ToolResult:
        """Finish ``invocation``, whose first attempt ran outside the chain and raised ``exc``."""
        step = self._outcomes.after_failure(invocation, exc, plan)
        return self._drive(invocation, plan, self._continued(invocation, plan, step))

    def continue_returned(self, invocation: Invocation, plan: Plan, content: Any) -> ToolResult:
        """Finish ``invocation``, whose first attempt ran outside the chain and returned ``content``."""
        step = self._outcomes.after_success(invocation, content, plan)
        return self._drive(invocation, plan, self._continued(invocation, plan, step))

    async def acontinue_failed(self, invocation: Invocation, plan: Plan, exc: Exception) -> ToolResult:
        """Async twin of `continue_failed`."""
        step = self._outcomes.after_failure(invocation, exc, plan)
        return await self._adrive(invocation, plan, self._continued(invocation, plan, step))

    async def acontinue_returned(self, invocation: Invocation, plan: Plan, content: Any) -> ToolResult:
        """Async twin of `continue_returned`."""
        step = self._outcomes.after_success(invocation, content, plan)
        return await self._adrive(invocation, plan, self._continued(invocation, plan, step))

    def _drive(self, invocation: Invocation, plan: Plan, steps: Steps) -> ToolResult:
        """The sync door's shell: does what each step asks, inline."""
        reply: Any = None
        while True:
            try:
                kind, payload = steps.send(reply)
            except StopIteration as done:
                result: ToolResult = done.value
                return result
            if kind is _CHECK:
                reply = self._check(invocation, payload)
            elif kind is _CALL:
                try:
                    reply = (self._call(invocation, plan), None)
                except Exception as exc:  # noqa: BLE001 - the step classifies it, never swallowed silently
                    reply = (None, exc)
            elif kind is _SLEEP:
                time.sleep(payload)
                reply = None
            elif kind is _OPEN:
                reply = self._open(invocation)
            elif kind is _FINISH:
                reply = self._finish(invocation, payload)
            else:
                commit, result = payload
                reply = commit.settle(invocation, result)

    async def _adrive(self, invocation: Invocation, plan: Plan, steps: Steps) -> ToolResult:
        """The async door's shell: `_drive`, awaiting checks whose store does I/O, the call and sleeps."""
        reply: Any = None
        while True:
            try:
                kind, payload = steps.send(reply)
            except StopIteration as done:
                result: ToolResult = done.value
                return result
            if kind is _CHECK:
                reply = await self._acheck(invocation, payload)
            elif kind is _CALL:
                try:
                    reply = (await self._acall(invocation, plan), None)
                except Exception as exc:  # noqa: BLE001 - the step classifies it, never swallowed silently
                    reply = (None, exc)
            elif kind is _SLEEP:
                await asyncio.sleep(payload)
                reply = None
            elif kind is _OPEN:
                reply = await self._aopen(invocation)
            elif kind is _FINISH:
                reply = await self._afinish(invocation, payload)
            else:
                commit, result = payload
                reply = await commit.asettle(invocation, result)

    def _call(self, invocation: Invocation, plan: Plan) -> Any:
        call = invocation.call
        if call is None:  # pragma: no cover - validation always sets it
            raise RuntimeError("invocation has no operation to call")
        timeout = plan.timeout
        if timeout is None:
            return run_dispatched(invocation.tool, call)
        return call_within(invocation.tool, invocation.operation, call, timeout)

    async def _acall(self, invocation: Invocation, plan: Plan) -> Any:
        return await arun_dispatched(invocation.tool, lambda: self._acall_permitted(invocation, plan))

    async def _acall_permitted(self, invocation: Invocation, plan: Plan) -> Any:
        runtime = invocation.runtime
        if invocation.acall is not None:
            awaitable = invocation.acall()
        elif runtime is not None and runtime.runs_inline:
            return invocation.call() if invocation.call else None
        else:
            awaitable = asyncio.to_thread(invocation.call)  # type: ignore[arg-type]
        timeout = plan.timeout
        if timeout is None:
            return await awaitable
        return await await_within(invocation.tool, invocation.operation, awaitable, timeout)

    # -- what the fast paths use of the chain ------------------------------------------

    def plan_of(self, tool: str, operation: str, door: str) -> Plan | None:
        """The plan already made for ``tool.operation`` on ``door``, if a call made one."""
        return self._plans.get((tool, operation, door))

    def check(self, invocation: Invocation, checks: Sequence[Interceptor]) -> ToolResult | None:
        """Run ``checks`` on ``invocation`` as the chain does: a result refuses the call."""
        return self._check(invocation, checks)

    def finish(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        """Record ``result`` as the final outcome of ``invocation`` (trace record and audit hooks)."""
        return self._finish(invocation, result)

    async def afinish(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        """`finish` for the async door: a hook whose writes are awaited is awaited."""
        return await self._afinish(invocation, result)

    # -- shared decisions -------------------------------------------------------

    def _finish(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        self._end_record(invocation, result)
        for hook in self._hooks:
            try:
                hook.on_response(invocation, result)
            except Exception:  # noqa: BLE001 - the call happened: flag the gap, never hide the result
                result.audit_failed = True
        return result

    async def _afinish(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        self._end_record(invocation, result)
        awaited = self._awaited_hooks
        for hook in self._hooks:
            try:
                hooked = awaited.get(id(hook))
                if hooked is None:
                    hook.on_response(invocation, result)
                else:
                    await hooked.aon_response(invocation, result)
            except Exception:  # noqa: BLE001 - the call happened: flag the gap, never hide the result
                result.audit_failed = True
        return result

    @staticmethod
    def _end_record(invocation: Invocation, result: ToolResult) -> None:
        """The trace record of ``invocation`` ends with ``result``."""
        record = invocation.record
        if result.status is not Status.SUCCESS:
            record.reason_code = result.reason_code
            record.rule = result.rule
            record.error_code = result.error_code
            record.field_path = result.field_path
        if result.warnings:
            record.warnings = result.warnings
        error = invocation.error
        record.end(result.status.value, type(error).__name__ if error is not None else None)


def _hook_failed(invocation: Invocation, hook: AuditHook, exc: Exception) -> ToolResult:
    """An audit hook raised before the call: it is refused."""
    return invocation.denied(
        "GOVERNANCE_EVALUATION_FAILED",
        type(hook).__name__,
        f"an audit hook failed ({type(exc).__name__}), so the call was refused",
    )


def _check_failed(invocation: Invocation, check: Interceptor, exc: Exception) -> ToolResult:
    """A check raised: invalid arguments are INVALID_ARGUMENTS, anything else refuses the call."""
    if isinstance(exc, InvalidArgumentsError):
        return invocation.invalid(exc.error_code, exc.field_path, str(exc))
    return invocation.denied(
        "GOVERNANCE_EVALUATION_FAILED",
        check.name,
        f"the {check.name} check failed ({type(exc).__name__}), so the call was refused",
    )
