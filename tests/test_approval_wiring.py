"""Approvals as the chain wires them: which store answers, on which thread, by which clock, with what shown.

The check's verdicts are in ``test_approval_edges.py``; these are the promises of how it is put
together: a signed grant still works beside an approval store, a fleet counts each grant under its
own key, a grant is remembered by the clock it expires by, the async door never runs a store's
operation on the event loop, a request shows what the audit trail would, a grant handed to a call
that needs none is not spent, and the check on its own (no redemption step) still spends a grant
once. Written from `scripts/mutation src/toolbox/pipeline/checks/_approval.py` (docs/testing.md):
each test pins a behaviour whose change no other test noticed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import uuid
from typing import Any

import pytest

from audit_faults import FlakySink
from state_support import CALL, Counter, audit_events, context, governed_gateway
from toolbox import Effect, Gateway, Governance, RiskClass, Status, ToolResult, tool
from toolbox.audit import AuditMode, AuditTrail, MemorySink, Redaction
from toolbox.doors._route import Route
from toolbox.foundations._redact import MASK
from toolbox.governance import (
    Approval,
    ApprovalCheck,
    ApprovalRequest,
    Guardrail,
    GuardrailAction,
    HmacApprover,
)
from toolbox.pipeline._invocation import Invocation
from toolbox.pipeline.checks._used_grants import FULL
from toolbox.state import GovernanceState, MemoryApprovalStore, MemoryLimitStore
from toolbox.testing import ManualClock

APPROVE_ADD = Guardrail(id="APPROVE_ADD", tool="add", action=GuardrailAction.REQUIRE_APPROVAL)
SECRET = b"w" * 32
USED = "the approval was already used"
OTHER = "the approval was granted for other arguments, another tool or another principal"


def invoke(gw: Gateway, door: str, arguments: dict[str, Any], **kwargs: Any) -> ToolResult:
    """One by-name call of ``add`` through the sync or the async door."""
    if door == "sync":
        return gw.invoke("add", arguments, **kwargs)
    return asyncio.run(gw.ainvoke("add", arguments, **kwargs))


def refused(gw: Gateway, result: ToolResult, counter: Counter, runs: int, message: str) -> None:
    """DENIED/APPROVAL_INVALID with ``message``; the tool ran ``runs`` times in all; the refusal audited."""
    assert (result.status, result.reason_code, result.rule, result.message) == (
        Status.DENIED,
        "APPROVAL_INVALID",
        "approval",
        message,
    )
    assert result.attempts == 0 and counter.runs == runs
    assert audit_events(gw, "APPROVAL_INVALID")


def asked(gw: Gateway, door: str = "sync", arguments: dict[str, Any] = CALL) -> ApprovalRequest:
    result = invoke(gw, door, arguments, context=context())
    assert result.status is Status.APPROVAL_REQUIRED and result.approval is not None
    return result.approval


class ThreadedApprovals(MemoryApprovalStore):
    """The memory approval store, marked as doing I/O, noting the thread of each operation."""

    in_process = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.threads: list[tuple[str, str]] = []

    def _note(self, operation: str) -> None:
        self.threads.append((operation, threading.current_thread().name))

    def submit(self, pending: Any, *, max_pending: int = 0) -> str:
        self._note("submit")
        return super().submit(pending, max_pending=max_pending)

    def get(self, request_id: str) -> Any:
        self._note("get")
        return super().get(request_id)

    def consume(self, request_id: str, fingerprint: str) -> bool:
        self._note("consume")
        return super().consume(request_id, fingerprint)


class ThreadedLimits(MemoryLimitStore):
    """Likewise for the fleet's limit store (Redis or SQL in production)."""

    in_process = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.threads: list[str] = []

    def admit(self, budgets: Any, rates: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        return super().admit(budgets, rates)


def off_the_loop(threads: list[str]) -> bool:
    """Whether every operation ran on the state pool's threads (`toolbox.pipeline._offload`)."""
    return bool(threads) and all(name.startswith("toolbox-state") for name in threads)


# -- a signed grant beside an approval store ---------------------------------------------------


@pytest.mark.parametrize("door", ["sync", "async"])
def test_a_signed_grant_runs_once_beside_an_approval_store(door: str) -> None:
    """The store holds the request; the approver's signed grant resumes it without the store deciding."""
    counter, clock = Counter(), ManualClock()
    approver, store = HmacApprover(SECRET, clock=clock), ThreadedApprovals(clock=clock)
    gw = governed_gateway(
        GovernanceState(approvals=store), counter, guardrails=[APPROVE_ADD], approver=approver, clock=clock
    )
    request = asked(gw, door)
    grant = approver.grant(request, approved_by="bob")
    assert invoke(gw, door, CALL, context=context(), approval=grant).status is Status.SUCCESS
    assert counter.runs == 1
    waiting = store.get(request.id)
    assert waiting is not None and waiting.state == "pending"  # the store was neither asked nor spent
    refused(gw, invoke(gw, door, CALL, context=context(), approval=grant), counter, 1, USED)


# -- the fleet's counter of spent grants --------------------------------------------------------


def test_a_fleet_counts_each_grant_under_its_own_key() -> None:
    """Spending one grant on the shared limit store never spends another."""
    counter, clock = Counter(), ManualClock()
    approver, shared = HmacApprover(SECRET, clock=clock), MemoryLimitStore(clock=clock)
    first, second = (
        governed_gateway(
            GovernanceState(backend="redis", limits=shared),
            counter,
            guardrails=[APPROVE_ADD],
            approver=approver,
            clock=clock,
        )
        for _ in range(2)
    )
    grants = [approver.grant(asked(first, arguments={**CALL, "b": b}), approved_by="bob") for b in (2, 3)]
    assert first.invoke("add", CALL, context=context(), approval=grants[0]).status is Status.SUCCESS
    done = second.invoke("add", {**CALL, "b": 3}, context=context(), approval=grants[1])
    assert done.status is Status.SUCCESS and counter.runs == 2
    refused(second, second.invoke("add", CALL, context=context(), approval=grants[0]), counter, 2, USED)


# -- the clock grants are remembered by ---------------------------------------------------------


def test_a_spent_grant_is_remembered_by_the_governance_clock() -> None:
    """Under ``Governance(clock=...)`` a spent grant stays spent while that clock says it is valid.

    The clock here runs in 1970: by the process's own time every grant has long expired,
    so a grant remembered by that time would be forgotten at the next spend and replayable.
    """
    counter, clock = Counter(), ManualClock(start=1_000_000.0)
    approver = HmacApprover(SECRET, clock=clock)
    gw = governed_gateway(None, counter, guardrails=[APPROVE_ADD], approver=approver, clock=clock)
    first = approver.grant(asked(gw), approved_by="bob")
    second = approver.grant(asked(gw, arguments={**CALL, "b": 3}), approved_by="bob")
    assert gw.invoke("add", CALL, context=context(), approval=first).status is Status.SUCCESS
    assert gw.invoke("add", {**CALL, "b": 3}, context=context(), approval=second).status is Status.SUCCESS
    clock.advance(899)  # a second before the grants expire
    refused(gw, gw.invoke("add", CALL, context=context(), approval=first), counter, 2, USED)


def test_a_process_remembers_ten_thousand_live_grants_then_refuses_more() -> None:
    """docs/approvals.md: without a shared store, 10,000 grants still valid are remembered, then FULL."""
    counter, clock = Counter(), ManualClock()
    approver = HmacApprover(SECRET, clock=clock)
    gw = governed_gateway(None, counter, guardrails=[APPROVE_ADD], approver=approver, clock=clock)
    check = next(c for c in gw.catalog.pipeline.interceptors if isinstance(c, ApprovalCheck))
    live = clock() + 900
    for _ in range(9_998):  # other calls' verified grants, spent as the redemption step spends them
        assert check._consume(Approval(uuid.uuid4().hex, "f" * 64, "b", live, "signed"), "f" * 64) is None
    grants = [approver.grant(asked(gw, arguments={**CALL, "b": b}), approved_by="bob") for b in (2, 3, 4)]
    for b, grant in zip((2, 3), grants, strict=False):  # the 9,999th and the 10,000th
        assert gw.invoke("add", {**CALL, "b": b}, context=context(), approval=grant).status is Status.SUCCESS
    full = gw.invoke("add", {**CALL, "b": 4}, context=context(), approval=grants[2])
    refused(gw, full, counter, 2, FULL)


# -- the async door keeps the stores off the event loop -----------------------------------------


def test_the_async_door_runs_the_approval_store_off_the_event_loop() -> None:
    """Asking (submit), checking the grant (get) and spending it (consume): each on a worker thread."""
    counter, clock = Counter(), ManualClock()
    store = ThreadedApprovals(clock=clock)
    gw = governed_gateway(GovernanceState(approvals=store), counter, guardrails=[APPROVE_ADD], clock=clock)
    request = asked(gw, "async")
    store.decide(request.id, approve=True, decided_by="bob", reason="ok")
    grant = Approval.of_request(request.id, request.fingerprint)
    assert invoke(gw, "async", CALL, context=context(), approval=grant).status is Status.SUCCESS
    assert [operation for operation, _ in store.threads] == ["submit", "get", "consume"]
    assert off_the_loop([thread for _, thread in store.threads]), store.threads
    assert counter.runs == 1


def test_the_async_door_spends_a_signed_grant_on_the_fleet_store_off_the_event_loop() -> None:
    counter, clock = Counter(), ManualClock()
    approver, shared = HmacApprover(SECRET, clock=clock), ThreadedLimits(clock=clock)
    gw = governed_gateway(
        GovernanceState(backend="redis", limits=shared),
        counter,
        guardrails=[APPROVE_ADD],
        approver=approver,
        clock=clock,
    )
    grant = approver.grant(asked(gw, "async"), approved_by="bob")
    assert invoke(gw, "async", CALL, context=context(), approval=grant).status is Status.SUCCESS
    assert len(shared.threads) == 1 and off_the_loop(shared.threads), shared.threads
    refused(gw, invoke(gw, "async", CALL, context=context(), approval=grant), counter, 1, USED)


@pytest.mark.parametrize(
    ("grant", "message"),
    [
        ("not a grant", "the approval is not a toolbox Approval"),
        ("forged", "the approval was not granted by the configured approver"),
        ("other arguments", OTHER),
        ("other principal", OTHER),
    ],
)
def test_every_bad_grant_is_refused_on_the_async_door_with_a_store_that_does_io(
    grant: str, message: str
) -> None:
    """The check awaited off the loop refuses as the sync one does: the call never reaches the spend."""
    counter, clock = Counter(), ManualClock()
    approver, store = HmacApprover(SECRET, clock=clock), ThreadedApprovals(clock=clock)
    gw = governed_gateway(
        GovernanceState(approvals=store), counter, guardrails=[APPROVE_ADD], approver=approver, clock=clock
    )
    good = approver.grant(asked(gw), approved_by="bob")
    arguments, ctx = CALL, context()
    given: Any = good
    if grant == "not a grant":
        given = dataclasses.asdict(good)
    elif grant == "forged":
        given = dataclasses.replace(good, approved_by="mallory")
    elif grant == "other arguments":
        arguments = {**CALL, "b": 3}
    else:
        ctx = context(principal="mallory")
    refused(gw, invoke(gw, "async", arguments, context=ctx, approval=given), counter, 0, message)
    assert invoke(gw, "async", CALL, context=context(), approval=good).status is Status.SUCCESS  # kept


# -- what a request shows ------------------------------------------------------------------------


def test_a_request_shows_the_arguments_masked_as_the_audit_trail_masks_them() -> None:
    """The trail's own redaction (``redact_keys``), not only the built-in secret names."""
    counter, clock = Counter(), ManualClock()
    store = MemoryApprovalStore(clock=clock)
    sink = MemorySink()
    trail = AuditTrail(sink, mode=AuditMode.STRICT, fallback_path=None, redaction=Redaction.of(["b"]))
    gw = governed_gateway(
        GovernanceState(approvals=store), counter, guardrails=[APPROVE_ADD], audit=trail, clock=clock
    )
    request = asked(gw)
    assert request.arguments == {"a": 1, "b": MASK}
    waiting = store.get(request.id)
    assert waiting is not None and waiting.request.arguments == {"a": 1, "b": MASK}
    assert counter.runs == 0


# -- a grant handed to a call that needs none ------------------------------------------------------


@pytest.mark.parametrize("door", ["sync", "async"])
def test_a_grant_handed_to_a_call_that_needs_no_approval_is_not_spent(door: str) -> None:
    """Only sums over 100 need approval: a small sum carrying the big one's grant runs and keeps it."""
    counter, clock = Counter(), ManualClock()
    approver = HmacApprover(SECRET, clock=clock)
    big_sum = Guardrail(
        id="BIG_SUM", tool="add", action=GuardrailAction.REQUIRE_APPROVAL, when=lambda args: args["b"] > 100
    )
    gw = governed_gateway(None, counter, guardrails=[big_sum], approver=approver, clock=clock)
    big = {**CALL, "b": 500}
    grant = approver.grant(asked(gw, door, big), approved_by="bob")
    assert invoke(gw, door, CALL, context=context(), approval=grant).status is Status.SUCCESS
    assert invoke(gw, door, big, context=context(), approval=grant).status is Status.SUCCESS
    assert counter.runs == 2
    refused(gw, invoke(gw, door, big, context=context(), approval=grant), counter, 2, USED)


# -- an approval rule on one tool costs the others nothing ---------------------------------------


def test_a_tool_no_approval_rule_can_match_keeps_its_compiled_route() -> None:
    """An approval guardrail on ``pay`` leaves ``add`` on the by-name route (`toolbox.doors._route`)."""
    counter = Counter()

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def add(a: int, b: int = 0) -> int:
        """Add two integers."""
        counter.runs += 1
        return a + b

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE)
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        return to

    approve_pay = Guardrail(id="APPROVE_PAY", tool="pay", action=GuardrailAction.REQUIRE_APPROVAL)
    governance = Governance(approver=HmacApprover(SECRET), guardrails=[approve_pay])
    gw = Gateway.load(providers=[add, pay], discover=False, env={}, governance=governance)
    assert gw.invoke("add", CALL, context=context()).status is Status.SUCCESS
    assert isinstance(gw._routes.get("add"), Route)
    paying = gw.invoke("pay", {"to": "bob", "amount": 5, "audit_as": "Pay"}, context=context())
    assert paying.status is Status.APPROVAL_REQUIRED
    assert gw.invoke("add", CALL, context=context()).status is Status.SUCCESS and counter.runs == 2


# -- a request the audit trail cannot record ---------------------------------------------------------


@pytest.mark.parametrize("door", ["sync", "async"])
def test_a_request_the_audit_trail_cannot_record_is_refused_and_not_submitted(door: str) -> None:
    counter, clock, sink = Counter(), ManualClock(), FlakySink()
    store = MemoryApprovalStore(clock=clock)
    trail = AuditTrail(sink, mode=AuditMode.STRICT, fallback_path=None)
    gw = governed_gateway(
        GovernanceState(approvals=store), counter, guardrails=[APPROVE_ADD], audit=trail, clock=clock
    )
    sink.failing = True
    result = invoke(gw, door, CALL, context=context())
    assert (result.status, result.reason_code, result.rule) == (Status.DENIED, "AUDIT_UNAVAILABLE", "audit")
    assert result.approval is None and counter.runs == 0  # nobody is asked to approve what no trail shows
    assert store.list(tenant=None, state=None, limit=10) == []


# -- a grant that names no request -------------------------------------------------------------------


@pytest.mark.parametrize("door", ["sync", "async"])
@pytest.mark.parametrize("request_id", [12345, None, b"id"], ids=["int", "none", "bytes"])
def test_a_store_grant_whose_id_is_not_text_names_no_request(door: str, request_id: Any) -> None:
    counter, clock = Counter(), ManualClock()
    store = ThreadedApprovals(clock=clock)
    gw = governed_gateway(GovernanceState(approvals=store), counter, guardrails=[APPROVE_ADD], clock=clock)
    request = asked(gw)
    grant = Approval.of_request(request_id, request.fingerprint)
    result = invoke(gw, door, CALL, context=context(), approval=grant)
    refused(gw, result, counter, 0, "the approval names no approval request")
    assert [operation for operation, _ in store.threads] == ["submit"]  # the store was never asked


# -- the check on its own, without a redemption step ---------------------------------------------


class Seen:
    """An interceptor that keeps each invocation it sees, to hand to a check of the test's own."""

    name = "seen"
    per_attempt = False

    def __init__(self) -> None:
        self.invocations: list[Invocation] = []

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        self.invocations.append(invocation)
        return None


def seen_call(approval: Approval | None) -> Invocation:
    """The invocation of ``add(1, 2)`` by alice as a chain builds it (the gateway's own check aside)."""
    seen = Seen()
    gw = governed_gateway(None, Counter(), guardrails=[APPROVE_ADD], interceptors=[seen])
    gw.invoke("add", CALL, context=context(), approval=approval)
    return seen.invocations[-1]


def test_the_check_without_a_redemption_step_spends_a_signed_grant_itself_once() -> None:
    """`ApprovalCheck.redemption` moves the spend; a check whose step was never taken spends on its own."""
    approver = HmacApprover(SECRET)
    check = ApprovalCheck(approver)
    ask = check(seen_call(None))
    assert ask is not None and ask.status is Status.APPROVAL_REQUIRED and ask.approval is not None
    call = seen_call(approver.grant(ask.approval, approved_by="bob"))
    assert check(call) is None
    replay = check(call)
    assert replay is not None and (replay.status, replay.reason_code, replay.message) == (
        Status.DENIED,
        "APPROVAL_INVALID",
        USED,
    )


def test_the_check_without_a_redemption_step_spends_a_stored_grant_itself_once() -> None:
    clock = ManualClock()
    store = MemoryApprovalStore(clock=clock)
    check = ApprovalCheck(None, store=store, clock=clock)
    first = seen_call(None)
    ask = check(first)
    assert ask is not None and ask.approval is not None and first.commit is not None
    assert first.commit.settle(first, ask) is ask  # the submission, as the chain makes it once audited
    request = ask.approval
    waiting = store.get(request.id)
    assert waiting is not None and waiting.expires_at == clock() + 3600.0  # an hour to decide, by default
    store.decide(request.id, approve=True, decided_by="bob", reason="ok")
    call = seen_call(Approval.of_request(request.id, request.fingerprint))
    assert check(call) is None
    spent = store.get(request.id)
    assert spent is not None and spent.state == "used"
    replay = check(call)
    assert replay is not None and (replay.reason_code, replay.message) == ("APPROVAL_INVALID", USED)
