"""What the checks need from a governance state store, as Protocols `toolbox.state` implements.

The kill switch, the shared limits (budgets and rate limits) and the approval
check keep their state in one store: process memory (the default), SQL
(SQLite or PostgreSQL) or Redis, chosen in the policy file's ``[state]``.
The checks live in this layer and never import `toolbox.state`; they use
these Protocols, and a store that cannot answer raises `StateUnavailableError`
(the checks then refuse: DENIED/STATE_UNAVAILABLE, the tool runs zero times).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias, final
from urllib.parse import quote

from toolbox.errors import ToolboxError
from toolbox.pipeline._grants import PendingApproval

__all__ = [
    "DEFAULT_MAX_PENDING",
    "ApprovalDecisionError",
    "ApprovalQueueFullError",
    "ApprovalStore",
    "Clock",
    "KillEntry",
    "KillSwitchStore",
    "LimitStore",
    "Quota",
    "Refusal",
    "StateUnavailableError",
    "key_part",
]

_MAX_PART = 128

#: Wall-clock seconds since the epoch, as ``time.time`` gives them: what the stores read to
#: expire requests, grants and windows (tests inject `toolbox.testing.ManualClock`).
Clock: TypeAlias = Callable[[], float]


def key_part(value: str) -> str:
    """``value`` as one segment of a store key: never a ``:``, never long, never ambiguous.

    Tenant, principal, run and tool names come from callers: percent-encoding
    keeps ``acme:x`` from reaching another tenant's key, and a value longer than
    128 characters becomes ``%h`` + its SHA-256 (no encoded value starts with
    ``%h``, which is not a percent escape).
    """
    encoded = quote(value, safe="")
    if len(encoded) <= _MAX_PART:
        return encoded
    return "%h" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


class StateUnavailableError(ToolboxError, ConnectionError):
    """The governance state store did not answer. The message never holds its URL or a credential."""

    reason_code = "STATE_UNAVAILABLE"


class ApprovalDecisionError(ToolboxError, ValueError):
    """An approval cannot be decided.

    Attributes:
        reason_code: ``UNKNOWN_REQUEST``, ``ALREADY_DECIDED``, ``EXPIRED`` or ``SELF_APPROVAL``
            (four eyes: the requesting principal cannot decide its own request).
    """

    def __init__(self, message: str, *, reason_code: str) -> None:
        super().__init__(message)
        self.reason_code = reason_code


#: Pending requests one principal may have waiting at once, unless ``[state]`` says otherwise.
DEFAULT_MAX_PENDING = 20


class ApprovalQueueFullError(ToolboxError, RuntimeError):
    """The principal already has as many pending approval requests as the store admits."""

    reason_code = "APPROVAL_QUEUE_FULL"


class ApprovalStore(Protocol):
    """Pending approval requests, their decisions and single-use grants, shared by every process."""

    def submit(self, pending: PendingApproval, *, max_pending: int = 0) -> str:
        """Store a new ``pending`` request, atomically bounded; the id it waits under.

        The same principal's identical request (same tenant, principal and
        fingerprint) still pending and unexpired is not stored twice: its id is
        returned. A second submit of the same id is ignored (its id returned).

        Raises:
            ApprovalQueueFullError: the principal already has ``max_pending`` requests
                pending and unexpired (``max_pending`` 0: no bound); nothing is stored.
        """

    def get(self, request_id: str) -> PendingApproval | None:
        """The request ``request_id`` (state ``expired`` once past its expiry), or None."""

    def list(
        self, *, tenant: str | None, state: str | None, limit: int, cursor: str | None = None
    ) -> list[PendingApproval]:
        """Up to ``limit`` requests, newest first, optionally of one tenant and state.

        ``cursor`` is the id of the last request of the previous page.
        """

    def decide(self, request_id: str, *, approve: bool, decided_by: str, reason: str) -> PendingApproval:
        """Approve or deny a pending request; the decided record.

        Raises:
            ApprovalDecisionError: unknown, already decided, expired, or ``decided_by`` is the
                requesting principal.
        """

    def consume(self, request_id: str, fingerprint: str) -> bool:
        """Mark an approved, unexpired request with this fingerprint ``used``: True exactly once."""


@final
@dataclass(frozen=True)
class KillEntry:
    """One engaged kill switch: global (``tool`` None) or for one tool, with why, who and when."""

    tool: str | None
    reason: str
    who: str
    at: float

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready mapping."""
        return {"tool": self.tool, "reason": self.reason, "who": self.who, "at": self.at}


class KillSwitchStore(Protocol):
    """The fleet's kill switches. Read through a cache (`toolbox.pipeline.checks._builtin.KillSwitch`)."""

    def engaged(self) -> Mapping[str | None, KillEntry]:
        """Every engaged switch, by tool (None: the global one)."""

    def engage(self, tool: str | None, *, reason: str, who: str) -> KillEntry:
        """Engage the global switch (``tool`` None) or one tool's."""

    def release(self, tool: str | None, *, reason: str, who: str) -> KillEntry | None:
        """Release it; the entry that was engaged, or None when it was not."""


@final
@dataclass(frozen=True, slots=True)
class Quota:
    """One shared limit on a call: ``limit`` per ``window`` seconds under ``key``.

    A budget counts calls under ``key`` for ``window`` seconds from its first
    call; a rate limit admits at most ``limit`` calls in any ``window``-second
    sliding window. ``rule`` names it in a denial.
    """

    key: str
    limit: int
    window: float
    rule: str


@final
@dataclass(frozen=True, slots=True)
class Refusal:
    """Why `LimitStore.admit` refused: the quota, and for a rate limit the seconds to wait."""

    quota: Quota
    rate: bool
    retry_after: float


class LimitStore(Protocol):
    """Budgets and rate limits counted for the whole fleet."""

    def admit(self, budgets: Sequence[Quota], rates: Sequence[Quota]) -> Refusal | None:
        """Atomically: refuse if any quota is spent; otherwise count the call in every one.

        A refused call counts in none of them, so racing processes admit exactly ``limit``.
        """
