"""The checks on a state store, in one process, over every backend: denials, counts, audit, outages."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from state_support import (
    CALL,
    REDIS_URL,
    Counter,
    audit_events,
    context,
    dead_redis,
    governed_gateway,
    state_store,
)
from toolbox import Status
from toolbox.governance import Approval, Guardrail, GuardrailAction, HmacApprover
from toolbox.pipeline._state_ports import ApprovalDecisionError
from toolbox.pipeline.checks._shared_limits import FAIL_OPEN_WARNING, LimitRule
from toolbox.state import GovernanceState, MemoryApprovalStore, MemoryLimitStore, change_kill_switch
from toolbox.state._redis_backend import RedisState, connect
from toolbox.testing import ManualClock

SHARED = ["redis", "sqlite", "postgres"]


@pytest.fixture
def clock() -> ManualClock:
    """The stores' time: windows pass when a test moves it, never by sleeping."""
    return ManualClock()


@pytest.fixture(params=SHARED)
def shared(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock) -> Iterator[Any]:
    with state_store(request.param, tmp_path, clock=clock) as store:
        yield store


def _state(store: Any, **fields: Any) -> GovernanceState:
    return GovernanceState(backend="redis", kill=store, limits=store, approvals=store, **fields)


def test_kill_switch_from_the_store(shared: Any) -> None:
    counter = Counter()
    gateway = governed_gateway(_state(shared, kill_switch_refresh=0.0), counter)
    assert gateway.invoke("add", CALL, context=context()).status is Status.SUCCESS
    change_kill_switch(shared, "engage", tool="add", reason="incident 42", who="oncall", trail=gateway.audit)
    result = gateway.invoke("add", CALL, context=context())
    assert (result.status, result.reason_code, result.rule) == (
        Status.DENIED,
        "KILL_SWITCH",
        "kill_switch:tool",
    )
    assert "incident 42" in result.message
    assert counter.runs == 1  # the denied call ran zero times
    assert audit_events(gateway, "KILL_SWITCH")  # the denial is audited
    engaged = audit_events(gateway, "KILL_SWITCH_ENGAGED")
    assert [(e.tool, e.principal, e.intent_text) for e in engaged] == [("add", "oncall", "incident 42")]
    change_kill_switch(shared, "release", tool="add", reason="fixed", who="oncall", trail=gateway.audit)
    assert gateway.invoke("add", CALL, context=context()).status is Status.SUCCESS
    assert counter.runs == 2
    assert audit_events(gateway, "KILL_SWITCH_RELEASED")


def test_global_kill_switch_stops_every_tool(shared: Any) -> None:
    counter = Counter()
    gateway = governed_gateway(_state(shared, kill_switch_refresh=0.0), counter)
    shared.engage(None, reason="all stop", who="ops")
    result = gateway.invoke("add", CALL, context=context())
    assert (result.status, result.reason_code, result.rule) == (
        Status.DENIED,
        "KILL_SWITCH",
        "kill_switch:global",
    )
    assert counter.runs == 0
    assert shared.release(None, reason="ok", who="ops") is not None
    assert shared.release(None, reason="ok", who="ops") is None


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_kill_switch_is_cached_for_the_refresh_delay(backend: str, tmp_path: Path) -> None:
    """SQL stores have no push: a change is seen within the refresh delay, not before.

    Redis announces changes (pub/sub), so there the bound is an upper bound only:
    see test_redis_kill_switch_changes_are_pushed.
    """
    with state_store(backend, tmp_path) as shared:
        _cached_for_the_refresh_delay(shared)


def _cached_for_the_refresh_delay(shared: Any) -> None:
    counter = Counter()
    gateway = governed_gateway(_state(shared, kill_switch_refresh=30.0), counter)
    assert gateway.invoke("add", CALL, context=context()).status is Status.SUCCESS
    shared.engage(None, reason="later", who="ops")
    # Within the delay the process may still run calls: the documented staleness bound.
    assert gateway.invoke("add", CALL, context=context()).status is Status.SUCCESS


def _until(gateway: Any, reason: str | None) -> Any:
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        result = gateway.invoke("add", CALL, context=context())
        if result.reason_code == reason:
            return result
        time.sleep(0.01)
    raise AssertionError(f"no {reason} within the bound; last: {result!r}")


def test_redis_kill_switch_changes_are_pushed(tmp_path: Path) -> None:
    """With a refresh of an hour, a change made by another process still arrives (pub/sub)."""
    with state_store("redis", tmp_path) as store:
        counter = Counter()
        gateway = governed_gateway(_state(store, kill_switch_refresh=3600.0), counter)
        assert gateway.invoke("add", CALL, context=context()).status is Status.SUCCESS
        operator = RedisState(connect(REDIS_URL), namespace=store.prefix.split("{")[1].split("}")[0])
        try:
            change_kill_switch(operator, "engage", tool="add", reason="incident 11", who="oncall")
            stopped = _until(gateway, "KILL_SWITCH")
            assert (stopped.status, stopped.rule) == (Status.DENIED, "kill_switch:tool")
            runs = counter.runs
            change_kill_switch(operator, "release", tool="add", reason="fixed", who="oncall")
            assert _until(gateway, None).status is Status.SUCCESS
            assert counter.runs == runs + 1
        finally:
            operator.close()
        listener = store._listener
        assert listener is not None and listener.is_alive()
    # Closing the store stops its listener thread.
    assert not listener.is_alive()


def test_shared_budget_admits_exactly_k(shared: Any) -> None:
    counter = Counter()
    budgets = (LimitRule("tenant", 3, 3600.0),)
    gateway = governed_gateway(_state(shared, budgets=budgets), counter)
    results = [gateway.invoke("add", CALL, context=context(principal=f"p{i}")) for i in range(5)]
    assert [r.status for r in results] == [Status.SUCCESS] * 3 + [Status.DENIED] * 2
    assert {(r.reason_code, r.rule) for r in results[3:]} == {("BUDGET_EXHAUSTED", "state:budget:tenant")}
    assert counter.runs == 3
    assert len({e.trace_id for e in audit_events(gateway, "BUDGET_EXHAUSTED")}) == 2
    # Another tenant has its own count.
    assert gateway.invoke("add", CALL, context=context(tenant="other")).status is Status.SUCCESS


def test_rate_limit_reports_the_wait(shared: Any) -> None:
    counter = Counter()
    rates = (LimitRule("principal", 2, 60.0),)
    gateway = governed_gateway(_state(shared, rate_limits=rates), counter)
    results = [gateway.invoke("add", CALL, context=context()) for _ in range(3)]
    assert [r.status for r in results] == [Status.SUCCESS, Status.SUCCESS, Status.DENIED]
    denied = results[2]
    assert (denied.reason_code, denied.rule) == ("RATE_LIMITED", "state:rate:principal")
    assert denied.retry_after is not None and 0 < denied.retry_after <= 60.0
    assert denied.as_dict()["retry_after"] == denied.retry_after
    assert counter.runs == 2
    assert audit_events(gateway, "RATE_LIMITED")


def test_rate_limit_window_slides(shared: Any, clock: ManualClock) -> None:
    counter = Counter()
    gateway = governed_gateway(_state(shared, rate_limits=(LimitRule("tool", 1, 20.0),)), counter)
    assert gateway.invoke("add", CALL, context=context()).status is Status.SUCCESS
    clock.advance(19.9)
    denied = gateway.invoke("add", CALL, context=context())
    assert denied.reason_code == "RATE_LIMITED" and denied.retry_after == pytest.approx(0.1, abs=0.002)
    clock.advance(denied.retry_after)
    assert gateway.invoke("add", CALL, context=context()).status is Status.SUCCESS
    assert counter.runs == 2


def test_refused_rate_spends_no_budget(shared: Any, clock: ManualClock) -> None:
    counter = Counter()
    state = _state(
        shared, budgets=(LimitRule("run", 2, 3600.0),), rate_limits=(LimitRule("tenant", 1, 30.0),)
    )
    gateway = governed_gateway(state, counter)
    ctx = context(run_id="run-r")
    assert gateway.invoke("add", CALL, context=ctx).status is Status.SUCCESS
    for _ in range(3):
        limited = gateway.invoke("add", CALL, context=ctx)
        assert limited.reason_code == "RATE_LIMITED"
    assert limited.retry_after is not None
    clock.advance(limited.retry_after)
    # The run budget of 2 still has a call left: the refused calls counted nowhere.
    assert gateway.invoke("add", CALL, context=ctx).status is Status.SUCCESS
    clock.advance(30)
    spent = gateway.invoke("add", CALL, context=ctx)
    assert (spent.reason_code, spent.rule) == ("BUDGET_EXHAUSTED", "state:budget:run")
    assert counter.runs == 2


def test_store_unavailable_fails_closed() -> None:
    store = dead_redis()
    counter = Counter()
    gateway = governed_gateway(_state(store, budgets=(LimitRule("tenant", 5, 60.0),)), counter)
    result = gateway.invoke("add", CALL, context=context())
    assert (result.status, result.reason_code) == (Status.DENIED, "STATE_UNAVAILABLE")
    assert "127.0.0.1" not in result.message and "redis://" not in result.message
    assert counter.runs == 0
    assert audit_events(gateway, "STATE_UNAVAILABLE")


def test_limits_unavailable_fail_closed_for_budgets_even_when_rates_fail_open() -> None:
    store = dead_redis()
    counter = Counter()
    state = GovernanceState(
        backend="redis",
        limits=store,
        budgets=(LimitRule("tenant", 5, 60.0),),
        rate_limits=(LimitRule("tenant", 5, 1.0),),
        rate_limits_fail_open=True,
    )
    result = governed_gateway(state, counter).invoke("add", CALL, context=context())
    assert (result.status, result.reason_code, result.rule) == (
        Status.DENIED,
        "STATE_UNAVAILABLE",
        "state:limits",
    )
    assert counter.runs == 0


def test_rate_limits_fail_open_only_when_configured(caplog: pytest.LogCaptureFixture) -> None:
    store = dead_redis()
    counter = Counter()
    state = GovernanceState(
        backend="redis", limits=store, rate_limits=(LimitRule("tenant", 5, 1.0),), rate_limits_fail_open=True
    )
    gateway = governed_gateway(state, counter)
    result = gateway.invoke("add", CALL, context=context())
    assert result.status is Status.SUCCESS and counter.runs == 1
    assert FAIL_OPEN_WARNING in result.warnings
    assert "rate limits not applied" in caplog.text
    trail = gateway.audit
    assert trail is not None
    rules = {rule for r in trail.sink.records for rule in r.rule_ids}  # type: ignore[attr-defined]
    assert "STATE_UNAVAILABLE_FAIL_OPEN" in rules


REFUND = Guardrail(id="APPROVE_ADD", tool="add", action=GuardrailAction.REQUIRE_APPROVAL)


@pytest.mark.parametrize("backend", ["memory", *SHARED])
def test_approval_through_the_store(backend: str, tmp_path: Path) -> None:
    with state_store(backend, tmp_path) as store:
        approvals = store if store is not None else MemoryApprovalStore()
        limits = store if store is not None else MemoryLimitStore()
        state = GovernanceState(backend=backend, limits=limits, approvals=approvals)
        counter = Counter()
        gateway = governed_gateway(state, counter, guardrails=[REFUND])
        asked = gateway.invoke("add", CALL, context=context(principal="alice"))
        assert asked.status is Status.APPROVAL_REQUIRED and asked.approval is not None
        request = asked.approval
        pending = approvals.get(request.id)
        assert pending is not None and pending.state == "pending"
        assert (pending.intent_kind, pending.intent_text) == ("purpose", "Sum the order")
        grant = Approval.of_request(request.id, request.fingerprint)
        early = gateway.invoke("add", CALL, context=context(principal="alice"), approval=grant)
        assert (early.reason_code, early.message) == (
            "APPROVAL_INVALID",
            "the approval request has not been decided yet",
        )
        with pytest.raises(ApprovalDecisionError):
            approvals.decide(request.id, approve=True, decided_by="alice", reason="mine")
        approvals.decide(request.id, approve=True, decided_by="bob", reason="checked")
        other = gateway.invoke("add", {**CALL, "a": 99}, context=context(principal="alice"), approval=grant)
        assert other.reason_code == "APPROVAL_INVALID" and counter.runs == 0
        done = gateway.invoke("add", CALL, context=context(principal="alice"), approval=grant)
        assert done.status is Status.SUCCESS and counter.runs == 1
        replay = gateway.invoke("add", CALL, context=context(principal="alice"), approval=grant)
        assert (replay.reason_code, replay.message) == ("APPROVAL_INVALID", "the approval was already used")
        assert counter.runs == 1
        assert audit_events(gateway, "APPROVAL_INVALID")


def test_signed_grants_keep_working_and_are_single_use_fleet_wide(shared: Any) -> None:
    approver = HmacApprover(b"k" * 32)
    counters = [Counter(), Counter()]
    state = _state(shared)
    gateways = [governed_gateway(state, c, guardrails=[REFUND], approver=approver) for c in counters]
    asked = gateways[0].invoke("add", CALL, context=context())
    assert asked.approval is not None
    grant = approver.grant(asked.approval, approved_by="bob")
    results = [g.invoke("add", CALL, context=context(), approval=grant) for g in gateways]
    assert sorted(r.status.value for r in results) == ["DENIED", "SUCCESS"]
    assert counters[0].runs + counters[1].runs == 1


def test_approval_submit_unavailable_fails_closed() -> None:
    store = dead_redis()
    counter = Counter()
    gateway = governed_gateway(
        GovernanceState(backend="redis", approvals=store), counter, guardrails=[REFUND]
    )
    result = gateway.invoke("add", CALL, context=context())
    assert (result.status, result.reason_code, result.rule) == (
        Status.DENIED,
        "STATE_UNAVAILABLE",
        "state:approvals",
    )
    grant = Approval.of_request("x", "y")
    result = gateway.invoke("add", CALL, context=context(), approval=grant)
    assert result.reason_code == "STATE_UNAVAILABLE" and counter.runs == 0


def test_memory_limits_forget_what_expired() -> None:
    from toolbox.pipeline._state_ports import Quota

    now = [0.0]
    store = MemoryLimitStore(clock=lambda: now[0])
    for i in range(5000):
        assert store.admit([Quota(f"b:run:{i}", 1, 1.0, "r")], [Quota(f"r:run:{i}", 1, 1.0, "r")]) is None
        now[0] += 0.01
    # Runs of long ago were forgotten on the way; the recent ones are still counted.
    assert len(store._counters) < 5000 and len(store._windows) < 5000
    assert store.admit([Quota("b:run:4999", 1, 1.0, "r")], []) is not None


def test_host_rate_limit_counts_every_spelling_of_a_host(shared: Any) -> None:
    from toolbox import Effect, Gateway, Governance, RiskClass, tool
    from toolbox.pipeline.checks._shared_limits import canonical_host

    fetched: list[str] = []

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def fetch(url: str) -> str:
        """Pretend to fetch a URL."""
        fetched.append(url)
        return "ok"

    state = _state(shared, rate_limits=(LimitRule("host", 2, 60.0, "fetch"),))
    gateway = Gateway.load(providers=[fetch], discover=False, governance=Governance(state=state))

    def get(url: str) -> Any:
        return gateway.invoke("fetch", {"url": url, "purpose": "Read the page"}, context=context())

    assert get("http://Example.COM./a").status is Status.SUCCESS
    assert get("https://example.com:8443/b").status is Status.SUCCESS
    assert get("http://EXAMPLE.com/c").reason_code == "RATE_LIMITED"
    assert get("http://other.example/").status is Status.SUCCESS
    assert get("http://127.0.0.1/").status is Status.SUCCESS
    assert get("http://0x7f.1/").status is Status.SUCCESS
    denied = get("http://2130706433/")
    assert (denied.reason_code, denied.rule) == ("RATE_LIMITED", "state:rate:host:fetch")
    assert len(fetched) == 5
    assert canonical_host("http://[::ffff:7f00:1]/") == "127.0.0.1"  # the address it connects to
    assert canonical_host("not a url") is None and canonical_host(42) is None
    assert canonical_host("http://" + "a" * 10_000) is None


@pytest.mark.parametrize("backend", ["memory", *SHARED])
def test_a_model_retrying_for_approval_fills_no_queue(backend: str, tmp_path: Path) -> None:
    with state_store(backend, tmp_path) as store:
        approvals = store if store is not None else MemoryApprovalStore()
        state = GovernanceState(backend=backend, approvals=approvals, max_pending_approvals=2)
        counter = Counter()
        gateway = governed_gateway(state, counter, guardrails=[REFUND])
        retried = [gateway.invoke("add", CALL, context=context()) for _ in range(5)]
        assert {r.status for r in retried} == {Status.APPROVAL_REQUIRED}
        assert len({r.approval.id for r in retried if r.approval is not None}) == 1
        second = gateway.invoke("add", {**CALL, "a": 2}, context=context())
        assert second.status is Status.APPROVAL_REQUIRED
        full = gateway.invoke("add", {**CALL, "a": 3}, context=context())
        assert (full.status, full.reason_code, full.rule) == (
            Status.DENIED,
            "APPROVAL_QUEUE_FULL",
            "approval:queue_full",
        )
        assert "already waiting" in full.message
        assert counter.runs == 0
        assert audit_events(gateway, "APPROVAL_QUEUE_FULL")
        # Another principal still asks; the retried call is still answered with its request.
        assert (
            gateway.invoke("add", CALL, context=context(principal="bob")).status is Status.APPROVAL_REQUIRED
        )
        again = gateway.invoke("add", CALL, context=context())
        assert again.approval is not None and again.approval.id == retried[0].approval.id  # type: ignore[union-attr]
        mine = approvals.list(tenant="acme", state="pending", limit=100)
        assert sorted(p.request.principal for p in mine) == ["alice", "alice", "bob"]
