"""Without a shared store, a spent grant is remembered until it expires, never evicted to make room."""

from __future__ import annotations

import time
import uuid

import pytest

from toolbox.errors import ConfigurationError
from toolbox.governance import Approval, ApprovalCheck, ApprovalRequest, HmacApprover
from toolbox.pipeline.checks._used_grants import FULL, UsedGrants

USED = "the approval was already used"


def test_a_used_id_is_refused_until_its_grant_expires() -> None:
    used = UsedGrants(2)
    assert used.spend("a", expires_at=100.0, now=10.0) is None
    assert used.used("a")
    assert used.spend("a", expires_at=100.0, now=50.0) == USED
    assert used.spend("b", expires_at=20.0, now=11.0) is None
    # Full: the expired "b" is forgotten to make room, the live "a" never is.
    assert used.spend("c", expires_at=200.0, now=30.0) is None
    assert not used.used("b")
    assert used.spend("a", expires_at=100.0, now=31.0) == USED


def test_a_memory_full_of_live_grants_refuses_new_ones() -> None:
    used = UsedGrants(3)
    for name in "abc":
        assert used.spend(name, expires_at=1000.0, now=1.0) is None
    assert used.spend("d", expires_at=1000.0, now=2.0) == FULL
    assert not used.used("d")  # refused, not remembered in place of another
    assert all(used.used(name) for name in "abc")  # nothing live was forgotten
    assert used.spend("d", expires_at=2000.0, now=1000.0) is None  # all expired: room again


def test_many_redemptions_never_make_an_old_grant_replayable() -> None:
    """The review's attack: redeem `remember` other grants, then replay the first."""
    approver = HmacApprover(b"r" * 32)
    check = ApprovalCheck(approver, remember=50)

    def grant() -> Approval:
        request = ApprovalRequest(
            id=uuid.uuid4().hex,
            tool="t",
            operation="o",
            arguments={},
            fingerprint="f" * 64,
            rules=("x",),
            tenant="acme",
            principal="alice",
        )
        return approver.grant(request, approved_by="bob", ttl_seconds=600)

    first = grant()
    assert check._consume(first, first.fingerprint) is None
    outcomes = [check._consume(g, g.fingerprint) for g in (grant() for _ in range(60))]
    assert outcomes[:49] == [None] * 49
    assert set(outcomes[49:]) == {FULL}  # fail closed once the memory is full of live grants
    assert check._verify(first, first.fingerprint) == USED
    assert check._consume(first, first.fingerprint) == USED


def test_the_full_message_is_clear() -> None:
    assert "retry" in FULL and "approval" in FULL


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_remember_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="remember"):
        UsedGrants(bad)  # type: ignore[arg-type]


def test_an_expired_grant_is_forgotten_on_the_next_spend() -> None:
    used = UsedGrants(10)
    now = time.time()
    assert used.spend("old", expires_at=now - 1, now=now) is None
    assert used.spend("new", expires_at=now + 60, now=now) is None
    assert not used.used("old") and used.used("new")
