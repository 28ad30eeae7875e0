"""A delegated run counts in every ancestor's per-run shared budget, on every store (issue 27, finding 4).

``[[state.budgets]] per = "run"``: a child of a run whose budget is spent is
refused, and so is every grandchild; a child's calls count in its parent's
run (and in the top-level run's), in the same atomic store operation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from state_support import CALL, Counter, audit_events, context, governed_gateway, state_store
from toolbox import ExecutionContext, Gateway, Status
from toolbox.errors import DelegationError
from toolbox.pipeline.checks._shared_limits import LimitRule
from toolbox.state import GovernanceState, MemoryLimitStore


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
def gateway(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Gateway, Counter]]:
    with state_store(request.param, tmp_path) as store:
        counter = Counter()
        limits = store if store is not None else MemoryLimitStore()
        state = GovernanceState(backend=request.param, limits=limits, budgets=(LimitRule("run", 2, 600.0),))
        yield governed_gateway(state, counter), counter


def _call(gateway: Gateway, ctx: ExecutionContext, door: str = "sync") -> Any:
    if door == "sync":
        return gateway.invoke("add", CALL, context=ctx)
    return asyncio.run(gateway.ainvoke("add", CALL, context=ctx))


@pytest.mark.parametrize("door", ["sync", "async"])
def test_a_child_of_a_spent_run_is_refused_and_so_is_every_grandchild(
    gateway: tuple[Gateway, Counter], door: str
) -> None:
    governed, counter = gateway
    parent = context()
    assert [_call(governed, parent, door).status for _ in range(2)] == [Status.SUCCESS] * 2
    child = parent.delegate(tools=["add"])
    grandchild = child.delegate(tools=["add"])
    for run in (child, grandchild, grandchild.delegate()):
        refused = _call(governed, run, door)  # on main: SUCCESS, the child escapes the spent budget
        assert (refused.status, refused.reason_code, refused.rule) == (
            Status.DENIED,
            "BUDGET_EXHAUSTED",
            "state:budget:run",
        )
    assert counter.runs == 2
    assert len(audit_events(governed, "BUDGET_EXHAUSTED")) >= 3


def test_child_calls_count_in_the_parents_run(gateway: tuple[Gateway, Counter]) -> None:
    governed, counter = gateway
    parent = context()
    child = parent.delegate(tools=["add"])
    assert _call(governed, child.delegate()).status is Status.SUCCESS  # counts in all three runs
    assert _call(governed, child).status is Status.SUCCESS
    assert _call(governed, parent).reason_code == "BUDGET_EXHAUSTED"  # 2 calls below it already
    sibling = parent.delegate()
    assert _call(governed, sibling).reason_code == "BUDGET_EXHAUSTED"
    assert counter.runs == 2


def test_a_context_names_its_lineage_and_delegation_depth_is_bounded() -> None:
    from toolbox.foundations._context import MAX_DELEGATION_DEPTH

    root = context()
    child = root.delegate()
    grandchild = child.delegate()
    assert grandchild.lineage == (root.run_id, child.run_id) and grandchild.parent_run_id == child.run_id
    # Built by hand with only a parent: the parent is its lineage.
    assert ExecutionContext(tenant="t", principal="p", parent_run_id="r1").lineage == ("r1",)
    with pytest.raises(ValueError, match="must end with parent_run_id"):
        ExecutionContext(tenant="t", principal="p", parent_run_id="r1", ancestor_run_ids=("r0",))
    deep = root
    for _ in range(MAX_DELEGATION_DEPTH):
        deep = deep.delegate()
    with pytest.raises(DelegationError, match="levels deep"):
        deep.delegate()
