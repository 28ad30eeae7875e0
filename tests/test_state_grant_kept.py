"""A grant is spent only by a call that is dispatched: a budget or rate refusal keeps it.

Over the memory and Redis stores, store grants and signed grants, on the sync and async doors.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from state_support import CALL, Counter, audit_events, context, governed_gateway, state_store
from toolbox import Budget, ExecutionContext, Gateway, Status, ToolResult
from toolbox.governance import Approval, Guardrail, GuardrailAction, HmacApprover
from toolbox.pipeline.checks._shared_limits import LimitRule
from toolbox.state import GovernanceState, MemoryApprovalStore, MemoryLimitStore

APPROVE_ADD = Guardrail(id="APPROVE_ADD", tool="add", action=GuardrailAction.REQUIRE_APPROVAL)
APPROVER = HmacApprover(b"s" * 32)  # one fingerprint key for both gateways


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    with state_store(request.param, tmp_path) as store:
        yield request.param, store


def _gateways(
    backend: tuple[str, Any], counter: Counter, limit: str = "budgets"
) -> tuple[Gateway, Gateway, Any]:
    """A gateway whose fleet budget (or rate) is spent, and one without limits, sharing the approvals."""
    kind, store = backend
    approvals = store if store is not None else MemoryApprovalStore()
    limits = store if store is not None else MemoryLimitStore()
    if limit == "budgets":
        spent = GovernanceState(
            backend=kind, limits=limits, approvals=approvals, budgets=(LimitRule("tenant", 0, 60.0),)
        )
    else:  # one call a minute: the test spends it first
        spent = GovernanceState(
            backend=kind, limits=limits, approvals=approvals, rate_limits=(LimitRule("tenant", 1, 60.0),)
        )
    free = GovernanceState(backend=kind, limits=limits, approvals=approvals)
    kw: dict[str, Any] = {"guardrails": [APPROVE_ADD], "approver": APPROVER}
    return governed_gateway(spent, counter, **kw), governed_gateway(free, counter, **kw), approvals


def _approved(gateway: Gateway, approvals: Any) -> Approval:
    asked = gateway.invoke("add", CALL, context=context())
    assert asked.status is Status.APPROVAL_REQUIRED and asked.approval is not None
    approvals.decide(asked.approval.id, approve=True, decided_by="bob", reason="ok")
    return Approval.of_request(asked.approval.id, asked.approval.fingerprint)


async def _ainvoke(gateway: Gateway, grant: Approval, ctx: ExecutionContext | None = None) -> ToolResult:
    return await gateway.ainvoke("add", CALL, context=ctx or context(), approval=grant)


@pytest.mark.parametrize(
    ("limit", "code"), [("budgets", "BUDGET_EXHAUSTED"), ("rate_limits", "RATE_LIMITED")]
)
@pytest.mark.parametrize("door", ["sync", "async"])
def test_fleet_limit_refusal_keeps_the_store_grant(
    backend: tuple[str, Any], door: str, limit: str, code: str
) -> None:
    counter = Counter()
    spent, free, approvals = _gateways(backend, counter, limit)
    grant = _approved(free, approvals)

    def call(gateway: Gateway, with_grant: Approval = grant) -> ToolResult:
        if door == "sync":
            return gateway.invoke("add", CALL, context=context(), approval=with_grant)
        return asyncio.run(_ainvoke(gateway, with_grant))

    if limit == "rate_limits":  # spend the minute's one call, then count runs from zero
        assert call(spent, _approved(free, approvals)).status is Status.SUCCESS
        counter.runs = 0

    refused = call(spent)
    assert (refused.status, refused.reason_code) == (Status.DENIED, code)
    assert counter.runs == 0
    assert audit_events(spent, code)
    kept = approvals.get(grant.request_id)
    assert kept is not None and kept.state == "approved"  # not spent by the refused call
    done = call(free)
    assert done.status is Status.SUCCESS and counter.runs == 1
    replay = call(free)
    assert (replay.status, replay.reason_code, replay.message) == (
        Status.DENIED,
        "APPROVAL_INVALID",
        "the approval was already used",
    )
    assert counter.runs == 1
    assert audit_events(free, "APPROVAL_INVALID")


@pytest.mark.parametrize("door", ["sync", "async"])
def test_run_budget_refusal_keeps_the_signed_grant(backend: tuple[str, Any], door: str) -> None:
    counter = Counter()
    _, free, _ = _gateways(backend, counter)
    asked = free.invoke("add", CALL, context=context())
    assert asked.approval is not None
    grant = APPROVER.grant(asked.approval, approved_by="bob")
    empty = ExecutionContext(tenant="acme", principal="alice", budget=Budget(max_calls=0))

    def call(ctx: ExecutionContext) -> ToolResult:
        if door == "sync":
            return free.invoke("add", CALL, context=ctx, approval=grant)
        return asyncio.run(_ainvoke(free, grant, ctx))

    refused = call(empty)
    assert (refused.status, refused.reason_code) == (Status.DENIED, "BUDGET_EXHAUSTED")
    assert counter.runs == 0
    assert call(context()).status is Status.SUCCESS and counter.runs == 1
    replay = call(context())
    assert (replay.reason_code, replay.message) == ("APPROVAL_INVALID", "the approval was already used")
    assert counter.runs == 1


def test_an_invalid_grant_spends_no_budget(backend: tuple[str, Any]) -> None:
    counter = Counter()
    _, free, approvals = _gateways(backend, counter)
    grant = _approved(free, approvals)
    budget = Budget(max_calls=1)
    ctx = ExecutionContext(tenant="acme", principal="alice", budget=budget)
    other = free.invoke("add", {**CALL, "a": 99}, context=ctx, approval=grant)
    assert (other.status, other.reason_code) == (Status.DENIED, "APPROVAL_INVALID")
    assert counter.runs == 0 and budget.remaining() == 1  # refused before the budget counted it
    assert free.invoke("add", CALL, context=ctx, approval=grant).status is Status.SUCCESS
    replay = free.invoke("add", CALL, context=ctx, approval=grant)
    assert replay.reason_code == "APPROVAL_INVALID" and counter.runs == 1


def test_racing_calls_with_one_grant_run_once(backend: tuple[str, Any]) -> None:
    counter = Counter()
    _, free, approvals = _gateways(backend, counter)
    grant = _approved(free, approvals)
    results: list[ToolResult] = []
    start = threading.Barrier(8)

    def race() -> None:
        start.wait()
        results.append(free.invoke("add", CALL, context=context(), approval=grant))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status.value for r in results) == ["DENIED"] * 7 + ["SUCCESS"]
    assert {r.reason_code for r in results if r.status is Status.DENIED} == {"APPROVAL_INVALID"}
    assert counter.runs == 1
