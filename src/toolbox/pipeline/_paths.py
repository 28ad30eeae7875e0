"""Which path a call takes: the one place that decides.

Every call can take the full chain (`Pipeline.run` / `arun`). Two fast paths
skip work a call's `Plan` proved unnecessary, and leave the same result, trace
record and audit events (``tests/test_typed_audit.py``, ``tests/test_route.py``
run every scenario both ways):

- the **typed fast path** (`toolbox.pipeline._typed_path.run_inline`, entered from ``Ready.execute``):
  `typed_fast_path` decides it per tool and operation;
- the **by-name route** (`toolbox.doors._route.Route` for ``@tool`` functions, sync
  or async; `toolbox.doors._route_method.MethodRoute` for class-based tools; compiled
  by the gateway after a name's first dispatched call): `by_name_route`
  decides it per name.

Both decisions are taken once, from what cannot change between calls. What
can change is tested on every call where each fast path starts, and sends the
call to the full chain before anything is recorded: `gates_open` (the
context's deadline, budget and delegation scope, taken once per context as
`context_gated`; the kill switch) where the
plan's checks are skipped (the typed fast path, a ``@tool`` function's route);
then what only one path knows (``Ready.execute``: an approval grant or
warnings; ``Route.run`` / ``MethodRoute.run``: a grant, a context the tool
is not built for yet, and for a ``@tool`` function arguments that are not
`toolbox.pipeline.checks._arguments.flat_and_small` or fail validation, or a sync
call of an ``async def``). A class-based tool's route settles only the access
check and runs every other check through the chain.

After dispatch, an exception or a transient result continues in the full
chain's retry loop (`Pipeline.continue_failed` / `continue_returned`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, final

from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._descriptor import RiskClass
from toolbox.pipeline._interceptor import Interceptor
from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline.checks._arguments import ArgumentValidation
from toolbox.pipeline.checks._builtin import (
    AccessCheck,
    BudgetCheck,
    DeadlineCheck,
    DelegationCheck,
    KillSwitch,
)
from toolbox.pipeline.checks._schemas import OperationSchema

__all__ = [
    "CONTEXT_GATES",
    "ROUTABLE_CHECKS",
    "Plan",
    "by_name_route",
    "context_gated",
    "gates_open",
    "typed_fast_path",
]

#: The checks the typed fast path performs itself: the kill switch and the context's own gates.
CONTEXT_GATES = frozenset({KillSwitch, DelegationCheck, DeadlineCheck, BudgetCheck})
#: The checks a by-name route performs itself: the built-in ones.
ROUTABLE_CHECKS = frozenset(
    {KillSwitch, DelegationCheck, AccessCheck, DeadlineCheck, ArgumentValidation, BudgetCheck}
)


def context_gated(context: ExecutionContext) -> bool:
    """Whether ``context`` has a deadline, a budget or a delegation scope (the `CONTEXT_GATES` checks act).

    Constant for a context, which is immutable: `toolbox.Tools` takes it once, when it
    is built for the context, and the fast paths pass it to `gates_open`.
    """
    return context.deadline is not None or context.budget is not None or context.scope is not None


def gates_open(gated: bool, engaged: Callable[[str], bool], tool: str) -> bool:
    """The per-call gate of every fast path: the plan's checks that read per-call state have nothing to do.

    The call's context is not `context_gated` (``gated``: taken once per context) and the
    kill switch is not ``engaged`` for ``tool``. A check that starts reading other state
    (say, a shared budget) joins here: the typed fast path and the by-name routes call
    this, and nothing else decides it.
    """
    return not gated and not engaged(tool)


@final
class Plan:
    """What applies to one tool, operation and door: decided on the first call, then reused."""

    __slots__ = ("checks", "inline", "mapper", "per_attempt", "spends", "subjects", "timeout")

    def __init__(
        self,
        checks: tuple[Interceptor, ...],
        per_attempt: tuple[Interceptor, ...],
        timeout: float | None,
        mapper: Any,
        spends: tuple[Interceptor, ...] = (),
    ) -> None:
        #: The checks that decide, in order.
        self.checks = checks
        #: The checks that consume something, run after the audit request (``spends``).
        self.spends = spends
        self.per_attempt = per_attempt
        self.timeout = timeout
        self.mapper = mapper
        self.inline = False
        #: The typed fast path's audit subjects, by intent kind (what every event of such a call repeats).
        self.subjects: dict[str, Any] = {}


def _recorded_by_the_trail_alone(hooks: Sequence[object], recorder: object | None) -> bool:
    # A fast path records through the audit trail itself; any other hook must see the full chain.
    return not hooks or recorder is not None


def typed_fast_path(plan: Plan, hooks: Sequence[object], recorder: object | None) -> bool:
    """Whether typed calls of ``plan`` may run inline: only the context gates apply, no mapper or timeout."""
    return (
        _recorded_by_the_trail_alone(hooks, recorder)
        and plan.mapper is None
        and plan.timeout is None
        and all(type(check) in CONTEXT_GATES for check in (*plan.checks, *plan.spends))
    )


def by_name_route(
    invocation: Invocation,
    plan: Plan,
    schema: OperationSchema,
    *,
    hooks: Sequence[object],
    recorder: object | None,
    immutable_values: bool,
) -> bool:
    """Whether the by-name name of ``invocation`` (a call that dispatched) may be compiled into a route.

    Only a ``MEMORY_ONLY`` tool without an acknowledgement, whose plan holds
    only the built-in checks, with no mapper, no timeout, no renamed parameter
    and no hook but the audit trail. A ``@tool`` function (``def`` or ``async
    def``) also needs ``immutable_values``: every parameter validates to a value
    that cannot change after the call (its route hands them to the audit trail
    unredacted, to redact when read). A class-based tool's route runs the
    chain's own argument validation and audit opening (`toolbox.doors._route_method`).
    """
    descriptor = invocation.descriptor
    instance = invocation.instance
    function_tool = getattr(instance, "is_function_tool", False)
    return (
        invocation.runtime is not None
        and descriptor is not None
        and descriptor.risk is RiskClass.MEMORY_ONLY
        and descriptor.acknowledgement is None
        and instance is not None
        and (not function_tool or (callable(getattr(instance, "function", None)) and immutable_values))
        and not schema.renames
        and plan.mapper is None
        and plan.timeout is None
        and all(type(check) in ROUTABLE_CHECKS for check in (*plan.checks, *plan.spends))
        and _recorded_by_the_trail_alone(hooks, recorder)
        and any(type(check) is KillSwitch for check in plan.checks)
        and any(type(check) is ArgumentValidation for check in plan.checks)
    )
