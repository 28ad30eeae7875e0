"""The `ApprovalStore` contract, run over every backend: four eyes, one decision, one use, expiry."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from state_support import pending, state_store
from toolbox.pipeline._grants import PendingApproval
from toolbox.pipeline._state_ports import ApprovalDecisionError, ApprovalQueueFullError, ApprovalStore
from toolbox.state import MemoryApprovalStore
from toolbox.testing import ManualClock

BACKENDS = ["memory", "redis", "sqlite", "postgres"]


@pytest.fixture
def clock() -> ManualClock:
    """The stores' time: a test moves it forward instead of sleeping."""
    return ManualClock()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock) -> Iterator[ApprovalStore]:
    with state_store(request.param, tmp_path, clock=clock) as shared:
        yield MemoryApprovalStore(clock=clock) if shared is None else shared


def test_submit_get_round_trip(store: ApprovalStore) -> None:
    p = pending()
    store.submit(p)
    got = store.get(p.id)
    assert got == p
    assert got is not None and got.state == "pending"
    assert got.request.arguments == {"amount": 10, "card": "***"}
    assert store.get("nope") is None


def test_approve_then_consume_exactly_once(store: ApprovalStore) -> None:
    p = pending()
    store.submit(p)
    decided = store.decide(p.id, approve=True, decided_by="bob", reason="ok")
    assert (decided.state, decided.decided_by, decided.reason) == ("approved", "bob", "ok")
    assert decided.decided_at is not None
    assert store.consume(p.id, "0" * 64) is False  # other arguments
    assert store.consume(p.id, p.request.fingerprint) is True
    assert store.consume(p.id, p.request.fingerprint) is False  # replay
    got = store.get(p.id)
    assert got is not None and got.state == "used"


def test_four_eyes(store: ApprovalStore) -> None:
    p = pending(principal="alice")
    store.submit(p)
    with pytest.raises(ApprovalDecisionError) as info:
        store.decide(p.id, approve=True, decided_by="alice", reason="me")
    assert info.value.reason_code == "SELF_APPROVAL"
    assert store.consume(p.id, p.request.fingerprint) is False


def test_one_decision(store: ApprovalStore) -> None:
    p = pending()
    store.submit(p)
    store.decide(p.id, approve=False, decided_by="bob", reason="no")
    with pytest.raises(ApprovalDecisionError) as info:
        store.decide(p.id, approve=True, decided_by="carol", reason="yes")
    assert info.value.reason_code == "ALREADY_DECIDED"
    assert store.consume(p.id, p.request.fingerprint) is False  # denied


def test_unknown_and_expired(store: ApprovalStore, clock: ManualClock) -> None:
    with pytest.raises(ApprovalDecisionError) as info:
        store.decide("missing", approve=True, decided_by="bob", reason="")
    assert info.value.reason_code == "UNKNOWN_REQUEST"
    p = pending(ttl=60, created_at=clock())
    store.submit(p)
    clock.advance(59.999)
    got = store.get(p.id)
    assert got is not None and got.state == "pending"
    clock.advance(0.001)  # exactly at its expiry: no longer pending
    got = store.get(p.id)
    assert got is not None and got.state == "expired"
    with pytest.raises(ApprovalDecisionError) as info:
        store.decide(p.id, approve=True, decided_by="bob", reason="")
    assert info.value.reason_code == "EXPIRED"


@pytest.mark.parametrize("odd", ["id\x00", "\x00", "a\x00b" * 50])
def test_an_id_or_tenant_with_nul_is_unknown_never_an_outage(store: ApprovalStore, odd: str) -> None:
    """PostgreSQL text holds no NUL: such an id or tenant names nothing stored. Before, PostgreSQL
    answered StateUnavailableError (a store outage) where Redis and SQLite said unknown."""
    p = pending()
    store.submit(p)
    assert store.get(odd) is None
    with pytest.raises(ApprovalDecisionError) as info:
        store.decide(odd, approve=True, decided_by="bob", reason="ok")
    assert info.value.reason_code == "UNKNOWN_REQUEST"
    assert store.consume(odd, p.request.fingerprint) is False
    assert store.consume(p.id, odd) is False
    assert store.list(tenant=odd, state=None, limit=10) == []
    assert store.list(tenant=None, state=None, limit=10, cursor=odd) == []
    got = store.get(p.id)
    assert got is not None and got.state == "pending"  # the real request is untouched


def test_consume_needs_an_approval(store: ApprovalStore) -> None:
    p = pending()
    store.submit(p)
    assert store.consume(p.id, p.request.fingerprint) is False  # still pending
    assert store.consume("missing", p.request.fingerprint) is False


def test_second_submit_is_ignored(store: ApprovalStore) -> None:
    p = pending()
    store.submit(p)
    store.decide(p.id, approve=True, decided_by="bob", reason="ok")
    store.submit(p)  # an attacker re-submitting cannot reset the decision or the use
    got = store.get(p.id)
    assert got is not None and got.state == "approved"


def test_list_filters_and_pages(store: ApprovalStore) -> None:
    base = time.time()
    records = [pending(tenant="t1" if i % 2 else "t2", created_at=base + i) for i in range(7)]
    for p in records:
        store.submit(p)
    store.decide(records[6].id, approve=True, decided_by="bob", reason="")
    mine = [p for p in store.list(tenant="t2", state=None, limit=100) if p.id in {r.id for r in records}]
    assert [p.id for p in mine] == [records[i].id for i in (6, 4, 2, 0)]
    assert [p.id for p in store.list(tenant="t2", state="approved", limit=100)] == [records[6].id]
    first = store.list(tenant="t1", state="pending", limit=2)
    assert [p.id for p in first] == [records[5].id, records[3].id]
    second = store.list(tenant="t1", state="pending", limit=2, cursor=first[-1].id)
    assert [p.id for p in second] == [records[1].id]
    with pytest.raises(ValueError, match="unknown approval state"):
        store.list(tenant=None, state="bogus", limit=1)
    with pytest.raises(ValueError, match="limit"):
        store.list(tenant=None, state=None, limit=0)


def test_bad_decision_input_is_refused(store: ApprovalStore) -> None:
    p = pending()
    store.submit(p)
    with pytest.raises(ValueError, match="decided_by"):
        store.decide(p.id, approve=True, decided_by="", reason="")
    with pytest.raises(ValueError, match="reason"):
        store.decide(p.id, approve=True, decided_by="bob", reason="x" * 100_000)
    got = store.get(p.id)
    assert got is not None and got.state == "pending"  # nothing lost


def test_concurrent_decide_and_consume(store: ApprovalStore) -> None:
    p = pending()
    store.submit(p)
    wins: list[str] = []
    errors: list[str] = []
    barrier = threading.Barrier(8)

    def decide(i: int) -> None:
        barrier.wait()
        try:
            store.decide(p.id, approve=True, decided_by=f"reviewer{i}", reason="")
            wins.append(f"reviewer{i}")
        except ApprovalDecisionError as exc:
            errors.append(exc.reason_code)

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and errors == ["ALREADY_DECIDED"] * 7
    used: list[bool] = []
    barrier = threading.Barrier(8)

    def consume() -> None:
        barrier.wait()
        used.append(store.consume(p.id, p.request.fingerprint))

    threads = [threading.Thread(target=consume) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(used) == [False] * 7 + [True]


@pytest.mark.parametrize("backend", BACKENDS)
def test_used_record_outlives_the_grant(backend: str, tmp_path: Path) -> None:
    """A grant used once and then expired is still known as used: a replay is refused, not unknown."""
    clock = ManualClock()
    with state_store(backend, tmp_path, grant_ttl=30, clock=clock) as shared:
        store = MemoryApprovalStore(grant_ttl=30, clock=clock) if shared is None else shared
        p = pending(ttl=600, created_at=clock())
        store.submit(p)
        approved = store.decide(p.id, approve=True, decided_by="bob", reason="")
        assert approved.expires_at == pytest.approx(clock() + 30, abs=0.002)
        assert store.consume(p.id, p.request.fingerprint) is True
        clock.advance(31)  # the grant has expired
        got = store.get(p.id)
        assert got is not None and got.state == "used"
        assert store.consume(p.id, p.request.fingerprint) is False


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unused_grant_expires_in_the_store(backend: str, tmp_path: Path) -> None:
    clock = ManualClock()
    with state_store(backend, tmp_path, grant_ttl=30, clock=clock) as shared:
        store = MemoryApprovalStore(grant_ttl=30, clock=clock) if shared is None else shared
        p = pending(ttl=600, created_at=clock())
        store.submit(p)
        store.decide(p.id, approve=True, decided_by="bob", reason="")
        clock.advance(30)  # exactly at the grant's expiry: no longer redeemable
        assert store.consume(p.id, p.request.fingerprint) is False
        got = store.get(p.id)
        assert got is not None and got.state == "expired"


def test_identical_pending_request_is_stored_once(store: ApprovalStore) -> None:
    first = pending(fingerprint="a" * 64)
    assert store.submit(first, max_pending=5) == first.id
    again = pending(fingerprint="a" * 64)
    assert store.submit(again, max_pending=5) == first.id  # the same call, retried
    assert store.get(again.id) is None
    # Another principal, or another tenant, with the same fingerprint is a request of its own.
    bob = pending(fingerprint="a" * 64, principal="bob")
    assert store.submit(bob, max_pending=5) == bob.id
    other = pending(fingerprint="a" * 64, tenant="other")
    assert store.submit(other, max_pending=5) == other.id
    # Once decided, the same call asks anew.
    store.decide(first.id, approve=False, decided_by="carol", reason="no")
    third = pending(fingerprint="a" * 64)
    assert store.submit(third, max_pending=5) == third.id


def test_pending_requests_are_bounded_per_principal(store: ApprovalStore) -> None:
    waiting = [pending() for _ in range(3)]
    for p in waiting:
        assert store.submit(p, max_pending=3) == p.id
    extra = pending()
    with pytest.raises(ApprovalQueueFullError) as info:
        store.submit(extra, max_pending=3)
    assert info.value.reason_code == "APPROVAL_QUEUE_FULL"
    assert store.get(extra.id) is None  # nothing stored
    # The identical request is still answered with its id when the queue is full.
    assert (
        store.submit(dataclasses.replace(pending(), request=waiting[0].request), max_pending=3)
        == waiting[0].id
    )
    # Other principals have queues of their own.
    bob = pending(principal="bob")
    assert store.submit(bob, max_pending=3) == bob.id
    # A decision frees a place; 0 is no bound.
    store.decide(waiting[0].id, approve=True, decided_by="bob", reason="")
    assert store.submit(extra, max_pending=3) == extra.id
    with pytest.raises(ApprovalQueueFullError):
        store.submit(pending(), max_pending=3)
    unbounded = pending()
    assert store.submit(unbounded, max_pending=0) == unbounded.id


def test_expired_requests_leave_the_queue(store: ApprovalStore, clock: ManualClock) -> None:
    short = pending(ttl=60, created_at=clock())
    store.submit(short, max_pending=1)
    with pytest.raises(ApprovalQueueFullError):
        store.submit(pending(created_at=clock()), max_pending=1)
    clock.advance(60)
    later = pending(created_at=clock())
    assert store.submit(later, max_pending=1) == later.id


def test_racing_submits_store_at_most_the_bound_and_one_of_identical(store: ApprovalStore) -> None:
    results: list[str] = []
    barrier = threading.Barrier(8)

    def submit(p: PendingApproval) -> None:
        barrier.wait()
        try:
            results.append(store.submit(p, max_pending=3))
        except ApprovalQueueFullError:
            results.append("FULL")

    def race(requests: list[PendingApproval]) -> list[str]:
        results.clear()
        threads = [threading.Thread(target=submit, args=(p,)) for p in requests]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sorted(results)

    distinct = race([pending(principal="racer") for _ in range(8)])
    assert distinct.count("FULL") == 5 and len(set(distinct) - {"FULL"}) == 3
    assert (
        len(
            [
                p
                for p in store.list(tenant="acme", state="pending", limit=100)
                if p.request.principal == "racer"
            ]
        )
        == 3
    )
    identical = race([pending(principal="twin", fingerprint="b" * 64) for _ in range(8)])
    assert len(set(identical)) == 1 and "FULL" not in identical  # eight identical requests: one waits
