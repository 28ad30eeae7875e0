"""Which path a call takes: the one place that decides.

Every call can take the full chain (`Pipeline.run` / `arun`). Two fast paths
skip work a call's `Plan` proved unnecessary, and leave the same result, trace
record and audit events (``tests/test_typed_audit.py``, ``tests/test_route.py``
run every scenario both ways):

- the **typed fast path** (`Pipeline.run_inline`, entered from ``Ready.execute``):
  `typed_fast_path` decides it per tool and operation;
- the **by-name route** (`toolbox.doors._route.Route` for ``@tool`` functions, sync
  or async; `toolbox.doors._route_method.MethodRoute` for class-based tools; compiled
  by the gateway after a name's first dispatched call): `by_name_route`
  decides it per name.

Both decisions are taken once, from what cannot change between calls. What can
change is re-checked on every call where each fast path starts, and sends the
call to the full chain before anything is recorded:

- both: the context has a deadline or a budget; the kill switch is engaged;
  an approval grant is given;
- typed: the intent carries warnings (``Ready.execute``); ``aexecute`` takes the
  typed fast path only for a ``MEMORY_ONLY`` tool without an async implementation;
- by name: the context is not an `ExecutionContext` object, the tool is not
  built for it yet; for a ``@tool`` function, the arguments are not a small
  flat object or fail validation, or a sync call is made of an ``async def``
  (``Route.run``). A class-based tool's route settles only the access check
  (the tool is built for the context) and runs every other check through
  the chain (``MethodRoute.run``).

After dispatch, an exception or a transient result continues in the full
chain's retry loop (`Pipeline.continue_failed` / `continue_returned`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, final

from toolbox.foundations._descriptor import RiskClass
from toolbox.pipeline._interceptor import Interceptor
from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline.checks._arguments import ArgumentValidation, OperationSchema
from toolbox.pipeline.checks._builtin import (
    AccessCheck,
    BudgetCheck,
    DeadlineCheck,
    DelegationCheck,
    KillSwitch,
)

__all__ = ["CONTEXT_GATES", "ROUTABLE_CHECKS", "Plan", "by_name_route", "typed_fast_path"]

#: The checks the typed fast path performs itself: the kill switch and the context's own gates.
CONTEXT_GATES = frozenset({KillSwitch, DelegationCheck, DeadlineCheck, BudgetCheck})
#: The checks a by-name route performs itself: the built-in ones.
ROUTABLE_CHECKS = frozenset(
    {KillSwitch, DelegationCheck, AccessCheck, DeadlineCheck, ArgumentValidation, BudgetCheck}
)


@final
class Plan:
    """What applies to one tool, operation and door: decided on the first call, then reused."""

    __slots__ = ("checks", "inline", "mapper", "per_attempt", "spends", "timeout")

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
