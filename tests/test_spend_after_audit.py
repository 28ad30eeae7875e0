"""Nothing is spent by a call the audit trail refuses (issue 27, finding 2).

A grant, a context budget unit, a shared budget unit, a rate-limit token and
an approval request's pending slot are taken only after the STRICT audit
trail stored the call's request: a call refused as AUDIT_UNAVAILABLE keeps
them all, on the sync and async doors and on every state store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit_faults import FlakySink
from state_support import CALL, Counter, context, governed_gateway, state_store
from toolbox import Budget, ExecutionContext, Gateway, Status, ToolResult
from toolbox.audit import AuditMode, AuditTrail
from toolbox.governance import Approval, Guardrail, GuardrailAction, HmacApprover
from toolbox.pipeline.checks._shared_limits import LimitRule
from toolbox.state import GovernanceState, MemoryApprovalStore, MemoryLimitStore

APPROVE_ADD = Guardrail(id="APPROVE_ADD", tool="add", action=GuardrailAction.REQUIRE_APPROVAL)
APPROVER = HmacApprover(b"k" * 32)


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    with state_store(request.param, tmp_path) as store:
        yield request.param, store


def _gateway(
    backend: tuple[str, Any], counter: Counter, sink: FlakySink, **state: Any
) -> tuple[Gateway, Any]:
    kind, store = backend
    approvals = store if store is not None else MemoryApprovalStore()
    limits = store if store is not None else MemoryLimitStore()
    governed = GovernanceState(backend=kind, limits=limits, approvals=approvals, **state)
    trail = AuditTrail(sink, mode=AuditMode.STRICT, fallback_path=None)  # type: ignore[arg-type]
    gateway = governed_gateway(governed, counter, audit=trail, guardrails=[APPROVE_ADD], approver=APPROVER)
    return gateway, approvals


def _call(
    gateway: Gateway, door: str, grant: Approval | None, ctx: ExecutionContext | None = None
) -> ToolResult:
    ctx = ctx or context()
    if door == "sync":
        return gateway.invoke("add", CALL, context=ctx, approval=grant)
    return asyncio.run(gateway.ainvoke("add", CALL, context=ctx, approval=grant))


def _refused_by_the_audit(result: ToolResult, counter: Counter) -> None:
    assert (result.status, result.reason_code) == (Status.DENIED, "AUDIT_UNAVAILABLE")
    assert result.attempts == 0 and counter.runs == 0


@pytest.mark.parametrize("door", ["sync", "async"])
def test_a_store_grant_survives_a_call_the_audit_refuses(backend: tuple[str, Any], door: str) -> None:
    counter, sink = Counter(), FlakySink()
    gateway, approvals = _gateway(backend, counter, sink)
    asked = gateway.invoke("add", CALL, context=context())
    assert asked.status is Status.APPROVAL_REQUIRED and asked.approval is not None
    approvals.decide(asked.approval.id, approve=True, decided_by="bob", reason="ok")
    grant = Approval.of_request(asked.approval.id, asked.approval.fingerprint)

    sink.failing = True
    _refused_by_the_audit(_call(gateway, door, grant), counter)
    kept = approvals.get(grant.request_id)
    assert kept is not None and kept.state == "approved"  # on main: "used", and the payment never runs

    sink.failing = False
    assert _call(gateway, door, grant).status is Status.SUCCESS and counter.runs == 1
    replay = _call(gateway, door, grant)
    assert (replay.reason_code, replay.message) == ("APPROVAL_INVALID", "the approval was already used")
    assert counter.runs == 1


@pytest.mark.parametrize("door", ["sync", "async"])
def test_a_signed_grant_survives_a_call_the_audit_refuses(door: str) -> None:
    counter, sink = Counter(), FlakySink()
    gateway, _ = _gateway(("memory", None), counter, sink)
    asked = gateway.invoke("add", CALL, context=context())
    assert asked.approval is not None
    grant = APPROVER.grant(asked.approval, approved_by="bob")
    sink.failing = True
    _refused_by_the_audit(_call(gateway, door, grant), counter)
    sink.failing = False
    assert _call(gateway, door, grant).status is Status.SUCCESS and counter.runs == 1


@pytest.mark.parametrize("door", ["sync", "async"])
@pytest.mark.parametrize("limit", ["budgets", "rate_limits"])
def test_shared_limits_are_not_spent_by_a_call_the_audit_refuses(
    backend: tuple[str, Any], door: str, limit: str
) -> None:
    counter, sink = Counter(), FlakySink()
    rule = (LimitRule("tenant", 1, 60.0, "add"),)
    gateway, _ = _gateway(backend, counter, sink, **{limit: rule})
    asked = gateway.invoke("add", CALL, context=context())  # every call of add needs a grant
    assert asked.approval is not None
    grant = APPROVER.grant(asked.approval, approved_by="bob")
    sink.failing = True
    for _ in range(3):
        _refused_by_the_audit(_call(gateway, door, grant), counter)
    sink.failing = False
    done = _call(gateway, door, grant)
    assert done.status is Status.SUCCESS and counter.runs == 1  # the one unit was still there


@pytest.mark.parametrize("door", ["sync", "async"])
def test_a_context_budget_unit_is_not_spent_by_a_call_the_audit_refuses(door: str) -> None:
    counter, sink = Counter(), FlakySink()
    gateway, _ = _gateway(("memory", None), counter, sink)
    asked = gateway.invoke("add", CALL, context=context())
    assert asked.approval is not None
    grant = APPROVER.grant(asked.approval, approved_by="bob")
    budget = Budget(max_calls=1)
    ctx = ExecutionContext(tenant="acme", principal="alice", budget=budget)
    sink.failing = True
    _refused_by_the_audit(_call(gateway, door, grant, ctx), counter)
    assert budget.remaining() == 1
    sink.failing = False
    assert _call(gateway, door, grant, ctx).status is Status.SUCCESS and budget.remaining() == 0


@pytest.mark.parametrize("door", ["sync", "async"])
def test_an_approval_request_the_audit_cannot_record_is_not_submitted(
    backend: tuple[str, Any], door: str
) -> None:
    counter, sink = Counter(), FlakySink()
    gateway, approvals = _gateway(backend, counter, sink, max_pending_approvals=1)
    sink.failing = True
    refused = _call(gateway, door, None)
    _refused_by_the_audit(refused, counter)
    assert refused.approval is None
    assert approvals.list(tenant="acme", state="pending", limit=10) == []  # on main: a request waits
    sink.failing = False
    # The principal's one pending slot is still free: the request that is recorded takes it.
    asked = _call(gateway, door, None)
    assert asked.status is Status.APPROVAL_REQUIRED and asked.approval is not None
    assert [p.id for p in approvals.list(tenant="acme", state="pending", limit=10)] == [asked.approval.id]
    assert not asked.audit_failed
