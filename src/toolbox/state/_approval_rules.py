"""The rules every approval store applies, in one place: expiry, four eyes, one decision, one use.

The memory store applies them under a lock, the SQL store inside a
transaction holding the request's row, the Redis store in the same order in a
Lua script (`toolbox.state._redis_scripts`); the tests run one suite over all three.
"""

from __future__ import annotations

import dataclasses
import hmac

from toolbox.pipeline._grants import APPROVAL_STATES, PendingApproval
from toolbox.pipeline._state_ports import ApprovalDecisionError

__all__ = [
    "GRANT_TTL",
    "MAX_REASON",
    "RETAIN",
    "check_decision",
    "check_listing",
    "consumable",
    "decided",
    "effective",
]

#: Seconds an approved grant stays redeemable after the decision.
GRANT_TTL = 900.0
#: Seconds a decided or used record is kept after it expires, so a replay finds it ``used``.
RETAIN = 86_400.0
#: The longest reason or ``decided_by`` kept (longer input is refused, not cut).
MAX_REASON = 1_000
_MAX_LIMIT = 1_000


def effective(pending: PendingApproval, now: float) -> PendingApproval:
    """``pending`` as of ``now``: a pending or approved record past its expiry is ``expired``."""
    if pending.state in ("pending", "approved") and pending.expires_at <= now:
        return dataclasses.replace(pending, state="expired")
    return pending


def check_decision(decided_by: str, reason: str) -> None:
    """Refuse a ``decided_by`` or ``reason`` that is not a short string (`ValueError`)."""
    if not isinstance(decided_by, str) or not decided_by.strip() or len(decided_by) > MAX_REASON:
        raise ValueError(f"decided_by must be a non-empty string of at most {MAX_REASON} characters")
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise ValueError(f"reason must be a string of at most {MAX_REASON} characters")


def decided(
    pending: PendingApproval | None,
    request_id: str,
    *,
    approve: bool,
    decided_by: str,
    reason: str,
    now: float,
    grant_ttl: float = GRANT_TTL,
) -> PendingApproval:
    """The record after the decision, or `ApprovalDecisionError` naming why it cannot be taken.

    An approved grant expires ``grant_ttl`` seconds after the decision.
    """
    check_decision(decided_by, reason)
    if pending is None:
        raise ApprovalDecisionError(f"no approval request {request_id!r}", reason_code="UNKNOWN_REQUEST")
    current = effective(pending, now)
    if current.state == "expired":
        raise ApprovalDecisionError(f"approval request {request_id!r} has expired", reason_code="EXPIRED")
    if current.state != "pending":
        raise ApprovalDecisionError(
            f"approval request {request_id!r} is already {current.state}", reason_code="ALREADY_DECIDED"
        )
    if decided_by == current.request.principal:
        raise ApprovalDecisionError(
            "the principal who made the request cannot decide it (four eyes)", reason_code="SELF_APPROVAL"
        )
    expires_at = now + grant_ttl if approve else current.expires_at
    return dataclasses.replace(
        current,
        state="approved" if approve else "denied",
        decided_by=decided_by,
        decided_at=now,
        reason=reason,
        expires_at=expires_at,
    )


def consumable(pending: PendingApproval | None, fingerprint: str, now: float) -> bool:
    """Whether ``pending`` is an approved, unexpired grant for ``fingerprint``."""
    return (
        pending is not None
        and isinstance(fingerprint, str)
        and pending.state == "approved"
        and pending.expires_at > now
        and hmac.compare_digest(pending.request.fingerprint.encode(), fingerprint.encode())
    )


def check_listing(state: str | None, limit: int) -> None:
    """Refuse an unknown state filter or a limit outside 1..1000 (`ValueError`)."""
    if state is not None and state not in APPROVAL_STATES:
        raise ValueError(f"unknown approval state {state!r}; one of {', '.join(APPROVAL_STATES)}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= _MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {_MAX_LIMIT}")
