"""Approvals at their edges: every reason a grant is refused, expiry to the second, the store's states.

Each refusal is checked as a caller meets it: DENIED with APPROVAL_INVALID (or the store's own
reason), the exact message, the tool's code run zero times, and the refusal in the audit trail.
Written from `scripts/mutation src/toolbox/pipeline/checks/_approval.py` (docs/testing.md, "Mutation
testing"): each test pins a behaviour whose change no other test noticed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
from typing import Any

import pytest

from state_support import CALL, Counter, audit_events, context, governed_gateway
from toolbox import Effect, Gateway, Governance, RiskClass, Status, ToolResult, tool
from toolbox.errors import ConfigurationError
from toolbox.governance import Approval, ApprovalCheck, Guardrail, GuardrailAction, HmacApprover
from toolbox.pipeline._state_ports import StateUnavailableError
from toolbox.pipeline.checks._fingerprint import keyed_fingerprint
from toolbox.state import GovernanceState, MemoryApprovalStore, MemoryLimitStore
from toolbox.testing import ManualClock

APPROVE_ADD = Guardrail(id="APPROVE_ADD", tool="add", action=GuardrailAction.REQUIRE_APPROVAL)
SECRET = b"s" * 32


def gateway(
    counter: Counter,
    clock: ManualClock,
    *,
    approver: Any = None,
    state: GovernanceState | None = None,
) -> Gateway:
    return governed_gateway(state, counter, guardrails=[APPROVE_ADD], approver=approver, clock=clock)


def invoke(gw: Gateway, door: str, arguments: dict[str, Any], **kwargs: Any) -> ToolResult:
    """One by-name call through the sync or the async door."""
    if door == "sync":
        return gw.invoke("add", arguments, **kwargs)
    return asyncio.run(gw.ainvoke("add", arguments, **kwargs))


def refused(gw: Gateway, result: ToolResult, counter: Counter, reason: str, message: str) -> None:
    """DENIED for ``reason`` with ``message``; the tool never ran; the refusal is in the audit trail."""
    assert (result.status, result.reason_code, result.message) == (Status.DENIED, reason, message)
    assert result.rule == ("approval" if reason == "APPROVAL_INVALID" else "state:approvals")
    assert counter.runs == 0
    assert audit_events(gw, reason)


# -- the request -------------------------------------------------------------------------------


def test_a_call_that_needs_approval_returns_a_request_for_exactly_this_call() -> None:
    counter, clock = Counter(), ManualClock(start=1_000_000.0)
    gw = gateway(counter, clock, approver=HmacApprover(SECRET, clock=clock))
    asked = gw.invoke("add", CALL, context=context())
    assert (asked.status, asked.reason_code, asked.rule) == (
        Status.APPROVAL_REQUIRED,
        "APPROVAL_REQUIRED",
        "approval:APPROVE_ADD",
    )
    assert asked.message == "this call needs a human approval for exactly these arguments"
    request = asked.approval
    assert request is not None
    assert (request.tool, request.operation, request.tenant, request.principal) == (
        "add",
        "call",
        "acme",
        "alice",
    )
    assert (request.rules, request.created_at) == (("APPROVE_ADD",), 1_000_000.0)
    assert request.arguments == {"a": 1, "b": 2}
    assert counter.runs == 0
    assert audit_events(gw, "APPROVAL_REQUIRED")


# -- signed grants -----------------------------------------------------------------------------


def test_a_signed_grant_runs_the_call_once_until_the_second_it_expires() -> None:
    counter, clock = Counter(), ManualClock(start=1_000_000.0)
    approver = HmacApprover(SECRET, clock=clock)
    gw = gateway(counter, clock, approver=approver)
    request = gw.invoke("add", CALL, context=context()).approval
    assert request is not None
    grant = approver.grant(request, approved_by="bob", ttl_seconds=60)
    assert grant.expires_at == 1_000_060.0
    assert approver.grant(request, approved_by="bob").expires_at == 1_000_900.0  # fifteen minutes by default

    clock.advance(60)  # exactly at expiry: expired
    result = gw.invoke("add", CALL, context=context(), approval=grant)
    refused(gw, result, counter, "APPROVAL_INVALID", "the approval has expired")

    fresh = approver.grant(request, approved_by="bob", ttl_seconds=1)
    assert gw.invoke("add", CALL, context=context(), approval=fresh).status is Status.SUCCESS
    assert counter.runs == 1
    replay = gw.invoke("add", CALL, context=context(), approval=fresh)
    assert (replay.reason_code, replay.message) == ("APPROVAL_INVALID", "the approval was already used")
    assert counter.runs == 1


@pytest.mark.parametrize(
    ("grant", "message"),
    [
        ("not a grant", "the approval is not a toolbox Approval"),
        ("forged", "the approval was not granted by the configured approver"),
        (
            "other principal",
            "the approval was granted for other arguments, another tool or another principal",
        ),
        (
            "other arguments",
            "the approval was granted for other arguments, another tool or another principal",
        ),
    ],
)
@pytest.mark.parametrize("door", ["sync", "async"])
def test_every_bad_grant_is_refused_with_its_reason(grant: str, message: str, door: str) -> None:
    counter, clock = Counter(), ManualClock()
    approver = HmacApprover(SECRET, clock=clock)
    gw = gateway(counter, clock, approver=approver)
    request = gw.invoke("add", CALL, context=context()).approval
    assert request is not None
    good = approver.grant(request, approved_by="bob")
    arguments, ctx = CALL, context()
    given: Any = good
    if grant == "not a grant":
        given = dataclasses.asdict(good)
    elif grant == "forged":
        given = dataclasses.replace(good, approved_by="mallory")
    elif grant == "other principal":
        ctx = context(principal="mallory")
    else:
        arguments = {**CALL, "b": 3}
    result = invoke(gw, door, arguments, context=ctx, approval=given)
    refused(gw, result, counter, "APPROVAL_INVALID", message)


def test_without_an_approver_or_a_store_no_grant_is_accepted() -> None:
    counter, clock = Counter(), ManualClock()
    gw = gateway(counter, clock)
    request = gw.invoke("add", CALL, context=context()).approval
    assert request is not None
    grant = HmacApprover(SECRET, clock=clock).grant(request, approved_by="bob")
    result = gw.invoke("add", CALL, context=context(), approval=grant)
    refused(gw, result, counter, "APPROVAL_INVALID", "no approver is configured to verify approvals")


@pytest.mark.parametrize("door", ["sync", "async"])
def test_with_a_shared_limit_store_a_grant_runs_once_across_processes(door: str) -> None:
    """Two gateways (two processes of a fleet) sharing a limit store: one grant, one run."""
    counter, clock = Counter(), ManualClock()
    approver = HmacApprover(SECRET, clock=clock)
    shared = IoLimits(clock=clock)
    first, second = (
        gateway(counter, clock, approver=approver, state=GovernanceState(backend="redis", limits=shared))
        for _ in range(2)
    )
    request = first.invoke("add", CALL, context=context()).approval
    assert request is not None
    grant = approver.grant(request, approved_by="bob")
    assert invoke(first, door, CALL, context=context(), approval=grant).status is Status.SUCCESS
    replay = invoke(second, door, CALL, context=context(), approval=grant)
    assert (replay.status, replay.reason_code, replay.rule, replay.message) == (
        Status.DENIED,
        "APPROVAL_INVALID",
        "approval",
        "the approval was already used",
    )
    assert counter.runs == 1
    assert audit_events(second, "APPROVAL_INVALID")


# -- the approver and the check's settings ----------------------------------------------------


def test_the_fingerprint_key_is_derived_from_the_secret_as_documented() -> None:
    """Every process holding the secret derives the same key; the key is never the secret."""
    expected = hmac.new(SECRET, b"toolbox approval fingerprint", hashlib.sha256).digest()
    assert HmacApprover(SECRET).fingerprint_key == expected


@pytest.mark.parametrize("secret", [b"x" * 15, "x" * 32, None])
def test_an_approval_secret_must_be_sixteen_bytes_or_more(secret: Any) -> None:
    with pytest.raises(ValueError, match=r"^the approval secret must be at least 16 random bytes$"):
        HmacApprover(secret)
    HmacApprover(b"x" * 16)


def test_a_grant_verifies_only_with_every_field_as_signed() -> None:
    clock = ManualClock(start=5000.0)
    approver = HmacApprover(SECRET, clock=clock)
    grant = Approval("req", "f" * 64, "bob", 6000.0, "")
    signed = approver.grant(
        dataclasses.replace(_request(), id=grant.request_id, fingerprint=grant.fingerprint), approved_by="bob"
    )
    assert approver.verify(signed)
    for change in ({"request_id": "req2"}, {"fingerprint": "e" * 64}, {"approved_by": "eve"}):
        assert not approver.verify(dataclasses.replace(signed, **change))
    assert not approver.verify(dataclasses.replace(signed, expires_at=signed.expires_at + 1))
    assert not HmacApprover(b"t" * 32, clock=clock).verify(signed)


def _request() -> Any:
    counter, clock = Counter(), ManualClock()
    request = (
        gateway(counter, clock, approver=HmacApprover(SECRET)).invoke("add", CALL, context=context()).approval
    )
    assert request is not None
    return request


class _KeyedApprover:
    def __init__(self, key: object) -> None:
        self.fingerprint_key = key

    def verify(self, approval: Approval) -> bool:
        return True


def test_an_approver_key_of_exactly_sixteen_bytes_is_enough() -> None:
    ApprovalCheck(_KeyedApprover(b"k" * 16))
    with pytest.raises(ConfigurationError, match=r"^an approver's fingerprint_key must be bytes"):
        ApprovalCheck(_KeyedApprover(b"k" * 15))


@pytest.mark.parametrize("bad", [-1, True, 1.5, "3"])
def test_max_pending_must_be_a_non_negative_integer(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"^max_pending must be a non-negative integer$"):
        ApprovalCheck(None, max_pending=bad)
    ApprovalCheck(None, max_pending=0)


# -- grants from the approval store ------------------------------------------------------------


class IoApprovals(MemoryApprovalStore):
    """The memory store, marked as doing I/O: the async door runs its operations off the loop."""

    in_process = False


class IoLimits(MemoryLimitStore):
    """Likewise for the limit store (a fleet's Redis or SQL in production)."""

    in_process = False


def store_gateway(counter: Counter, clock: ManualClock, **state: Any) -> tuple[Gateway, MemoryApprovalStore]:
    store = IoApprovals(clock=clock)
    governed = GovernanceState(approvals=store, limits=MemoryLimitStore(clock=clock), **state)
    return gateway(counter, clock, state=governed), store


def ask(gw: Gateway, arguments: dict[str, Any] = CALL, principal: str = "alice") -> Any:
    asked = gw.invoke("add", arguments, context=context(principal=principal))
    assert asked.status is Status.APPROVAL_REQUIRED and asked.approval is not None
    return asked.approval


def test_each_state_of_a_stored_request_refuses_with_its_reason() -> None:
    counter, clock = Counter(), ManualClock()
    gw, store = store_gateway(counter, clock, approval_ttl=600.0)

    def resume(request_id: str, fingerprint: str) -> ToolResult:
        return gw.invoke(
            "add", CALL, context=context(), approval=Approval.of_request(request_id, fingerprint)
        )

    waiting = ask(gw)
    undecided = resume(waiting.id, waiting.fingerprint)
    refused(gw, undecided, counter, "APPROVAL_INVALID", "the approval request has not been decided yet")

    store.decide(waiting.id, approve=False, decided_by="bob", reason="no")
    denied = resume(waiting.id, waiting.fingerprint)
    assert denied.message == "the approval request was denied"

    for missing in ("0" * 32, "x" * 257):
        unknown = resume(missing, waiting.fingerprint)
        assert (unknown.reason_code, unknown.message) == (
            "APPROVAL_INVALID",
            "the approval names no approval request",
        )

    later = ask(gw, {**CALL, "b": 5})
    store.decide(later.id, approve=True, decided_by="bob", reason="ok")
    other = resume(later.id, later.fingerprint)  # approved for b=5, resumed with b=2
    assert other.message == "the approval was granted for other arguments, another tool or another principal"

    expiring = ask(gw, {**CALL, "b": 7})
    store.decide(expiring.id, approve=True, decided_by="bob", reason="ok")
    clock.advance(900)  # a decided grant lasts 900 s from the decision: exactly then, expired
    gone = gw.invoke(
        "add",
        {**CALL, "b": 7},
        context=context(),
        approval=Approval.of_request(expiring.id, expiring.fingerprint),
    )
    assert gone.message == "the approval has expired"
    assert counter.runs == 0


@pytest.mark.parametrize("door", ["sync", "async"])
def test_a_stored_grant_runs_once(door: str) -> None:
    counter, clock = Counter(), ManualClock()
    gw, store = store_gateway(counter, clock)
    ctx = context()
    request = invoke(gw, door, CALL, context=ctx).approval
    assert request is not None and request.rules == ("APPROVE_ADD",)
    pending = store.get(request.id)
    assert pending is not None and pending.request.fingerprint == request.fingerprint
    assert (pending.intent_kind, pending.intent_text, pending.run_id) == (
        "purpose",
        "Sum the order",
        ctx.run_id,
    )
    store.decide(request.id, approve=True, decided_by="bob", reason="ok")
    grant = Approval.of_request(request.id, request.fingerprint)
    assert invoke(gw, door, CALL, context=context(), approval=grant).status is Status.SUCCESS
    replay = invoke(gw, door, CALL, context=context(), approval=grant)
    assert (replay.reason_code, replay.message) == ("APPROVAL_INVALID", "the approval was already used")
    assert counter.runs == 1


@pytest.mark.parametrize("door", ["sync", "async"])
def test_asking_again_for_the_same_call_names_the_request_already_waiting(door: str) -> None:
    counter, clock = Counter(), ManualClock()
    gw, store = store_gateway(counter, clock)
    first = ask(gw)
    again = invoke(gw, door, CALL, context=context()).approval
    assert again is not None
    assert again.id == first.id and again.fingerprint == first.fingerprint
    other = ask(gw, {**CALL, "b": 9})
    assert other.id != first.id
    pending = store.get(first.id)
    assert pending is not None and pending.expires_at == pending.created_at + 3600.0


@pytest.mark.parametrize("door", ["sync", "async"])
def test_a_full_queue_refuses_the_request_and_runs_nothing(door: str) -> None:
    counter, clock = Counter(), ManualClock()
    gw, _ = store_gateway(counter, clock, max_pending_approvals=1)
    ask(gw)
    full = invoke(gw, door, {**CALL, "b": 4}, context=context())
    assert (full.status, full.reason_code, full.rule) == (
        Status.DENIED,
        "APPROVAL_QUEUE_FULL",
        "approval:queue_full",
    )
    assert full.message == "1 approval requests of this principal are already waiting"
    assert counter.runs == 0
    assert audit_events(gw, "APPROVAL_QUEUE_FULL")
    ask(gw, principal="bob")  # the bound is per principal


def test_a_request_nobody_decided_expires_after_its_ttl() -> None:
    counter, clock = Counter(), ManualClock()
    gw, _ = store_gateway(counter, clock, approval_ttl=600.0)
    request = ask(gw)
    clock.advance(600)
    grant = Approval.of_request(request.id, request.fingerprint)
    result = gw.invoke("add", CALL, context=context(), approval=grant)
    refused(gw, result, counter, "APPROVAL_INVALID", "the approval has expired")


class FlakyApprovals(IoApprovals):
    """An approval store whose named operations fail as a store that does not answer."""

    failing: frozenset[str] = frozenset()

    def _maybe_fail(self, operation: str) -> None:
        if operation in self.failing:
            raise StateUnavailableError("the approval store did not answer")

    def submit(self, pending: Any, *, max_pending: int = 0) -> str:
        self._maybe_fail("submit")
        return super().submit(pending, max_pending=max_pending)

    def get(self, request_id: str) -> Any:
        self._maybe_fail("get")
        return super().get(request_id)

    def consume(self, request_id: str, fingerprint: str) -> bool:
        self._maybe_fail("consume")
        return super().consume(request_id, fingerprint)


UNAVAILABLE = "the governance state store is unavailable"


@pytest.mark.parametrize("door", ["sync", "async"])
@pytest.mark.parametrize("operation", ["submit", "get", "consume"])
def test_an_approval_store_that_does_not_answer_refuses_the_call(operation: str, door: str) -> None:
    """Asking (submit), checking a grant (get) or spending it (consume): STATE_UNAVAILABLE, nothing runs."""
    counter, clock = Counter(), ManualClock()
    store = FlakyApprovals(clock=clock)
    gw = gateway(counter, clock, state=GovernanceState(approvals=store, limits=MemoryLimitStore(clock=clock)))
    if operation == "submit":
        store.failing = frozenset({"submit"})
        result = invoke(gw, door, CALL, context=context())
    else:
        request = ask(gw)
        store.decide(request.id, approve=True, decided_by="bob", reason="ok")
        store.failing = frozenset({operation})
        grant = Approval.of_request(request.id, request.fingerprint)
        result = invoke(gw, door, CALL, context=context(), approval=grant)
    refused(gw, result, counter, "STATE_UNAVAILABLE", UNAVAILABLE)
    store.failing = frozenset()
    if operation != "submit":  # the grant was kept: it still runs the call, once
        assert gw.invoke("add", CALL, context=context(), approval=grant).status is Status.SUCCESS
        assert counter.runs == 1


class LosingApprovals(IoApprovals):
    """A store where another process spends the grant between the check and the spend."""

    def consume(self, request_id: str, fingerprint: str) -> bool:
        super().consume(request_id, fingerprint)  # the other process wins the race
        return super().consume(request_id, fingerprint)


class StuckApprovals(IoApprovals):
    """A store that will not spend an approved grant (its own expiry clock ran out first)."""

    def consume(self, request_id: str, fingerprint: str) -> bool:
        return False


@pytest.mark.parametrize("door", ["sync", "async"])
@pytest.mark.parametrize(
    ("store_type", "message"),
    [(LosingApprovals, "the approval was already used"), (StuckApprovals, "the approval has expired")],
    ids=["lost-race", "not-spent"],
)
def test_a_grant_the_store_does_not_spend_runs_nothing(store_type: type, message: str, door: str) -> None:
    counter, clock = Counter(), ManualClock()
    store = store_type(clock=clock)
    gw = gateway(counter, clock, state=GovernanceState(approvals=store, limits=MemoryLimitStore(clock=clock)))
    request = ask(gw)
    store.decide(request.id, approve=True, decided_by="bob", reason="ok")
    grant = Approval.of_request(request.id, request.fingerprint)
    result = invoke(gw, door, CALL, context=context(), approval=grant)
    refused(gw, result, counter, "APPROVAL_INVALID", message)


@pytest.mark.parametrize("door", ["sync", "async"])
def test_each_state_refuses_on_both_doors(door: str) -> None:
    counter, clock = Counter(), ManualClock()
    gw, store = store_gateway(counter, clock)
    waiting = ask(gw)
    grant = Approval.of_request(waiting.id, waiting.fingerprint)
    undecided = invoke(gw, door, CALL, context=context(), approval=grant)
    refused(gw, undecided, counter, "APPROVAL_INVALID", "the approval request has not been decided yet")
    store.decide(waiting.id, approve=False, decided_by="bob", reason="no")
    denied = invoke(gw, door, CALL, context=context(), approval=grant)
    assert (denied.rule, denied.message) == ("approval", "the approval request was denied")


def test_the_fingerprint_binds_tool_operation_arguments_tenant_and_principal() -> None:
    """Exactly the documented material, so a grant for one tenant, tool or operation fits no other."""
    counter, clock = Counter(), ManualClock()
    approver = HmacApprover(SECRET, clock=clock)
    gw = gateway(counter, clock, approver=approver)
    request = gw.invoke("add", CALL, context=context(tenant="acme", principal="alice")).approval
    assert request is not None
    expected = keyed_fingerprint(approver.fingerprint_key, "add", "call", {"a": 1, "b": 2}, "acme", "alice")
    assert request.fingerprint == expected
    grant = approver.grant(request, approved_by="bob")
    elsewhere = gw.invoke("add", CALL, context=context(tenant="globex", principal="alice"), approval=grant)
    refused(
        gw,
        elsewhere,
        counter,
        "APPROVAL_INVALID",
        "the approval was granted for other arguments, another tool or another principal",
    )


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, requires_approval=True)
def pay(to: str, amount: int) -> str:
    """Pay someone (its descriptor requires approval)."""
    return to


def test_the_request_names_every_rule_that_asked_for_approval() -> None:
    guardrail = Guardrail(id="BIG_PAYMENT", tool="pay", action=GuardrailAction.REQUIRE_APPROVAL)
    for guardrails, rules in (([], ("descriptor",)), ([guardrail], ("BIG_PAYMENT", "descriptor"))):
        gw = Gateway.load(
            providers=[pay],
            discover=False,
            env={},
            governance=Governance(approver=HmacApprover(SECRET), guardrails=guardrails),
        )
        asked = gw.invoke("pay", {"to": "bob", "amount": 5, "audit_as": "Pay"}, context=context())
        assert asked.approval is not None and asked.approval.rules == rules
        assert asked.rule == "approval:" + ",".join(rules)


def test_a_fleet_remembers_a_spent_grant_until_it_expires() -> None:
    """The shared counter outlives the grant: a replay 10 s before expiry is still refused."""
    counter, clock = Counter(), ManualClock()
    approver = HmacApprover(SECRET, clock=clock)
    shared = IoLimits(clock=clock)
    first, second = (
        gateway(counter, clock, approver=approver, state=GovernanceState(backend="redis", limits=shared))
        for _ in range(2)
    )
    request = first.invoke("add", CALL, context=context()).approval
    assert request is not None
    grant = approver.grant(request, approved_by="bob", ttl_seconds=900)
    assert first.invoke("add", CALL, context=context(), approval=grant).status is Status.SUCCESS
    clock.advance(890)
    replay = second.invoke("add", CALL, context=context(), approval=grant)
    assert (replay.status, replay.message) == (Status.DENIED, "the approval was already used")
    assert counter.runs == 1
