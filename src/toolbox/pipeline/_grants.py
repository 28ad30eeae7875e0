"""`ApprovalRequest`, `Approval` and `PendingApproval`: the data of an argument-bound approval.

Apart from `toolbox.pipeline.checks._approval` (the check that asks and verifies), so
that a `ToolResult` and an `Invocation` can carry them without importing the
check. `PendingApproval` is a request as an approval store keeps it, with its
decision. The names are re-exported by `toolbox.pipeline.checks._approval` and `toolbox`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, final

__all__ = ["APPROVAL_STATES", "Approval", "ApprovalRequest", "PendingApproval"]

#: The states of a `PendingApproval`: only ``pending`` can be decided, only ``approved`` consumed.
APPROVAL_STATES = ("pending", "approved", "denied", "expired", "used")


@final
@dataclass(frozen=True)
class ApprovalRequest:
    """What a human is asked to approve. Arguments are redacted for display."""

    id: str
    tool: str
    operation: str
    arguments: Mapping[str, Any]
    fingerprint: str
    rules: tuple[str, ...]
    tenant: str
    principal: str
    created_at: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "id": self.id,
            "tool": self.tool,
            "operation": self.operation,
            "arguments": dict(self.arguments),
            "fingerprint": self.fingerprint,
            "rules": list(self.rules),
            "tenant": self.tenant,
            "principal": self.principal,
        }


@final
@dataclass(frozen=True)
class Approval:
    """A grant for one `ApprovalRequest`, issued by the application's approver."""

    request_id: str
    fingerprint: str
    approved_by: str
    expires_at: float
    signature: str = ""

    @staticmethod
    def of_request(request_id: str, fingerprint: str) -> Approval:
        """A reference to a grant an approval store holds (decided there; no signature)."""
        return Approval(request_id, fingerprint, approved_by="", expires_at=0.0)


@final
@dataclass(frozen=True)
class PendingApproval:
    """An `ApprovalRequest` as an approval store keeps it: why it was asked, and its decision.

    ``state`` is one of `APPROVAL_STATES`. A store reports a ``pending`` or
    ``approved`` record whose ``expires_at`` has passed as ``expired``.
    """

    request: ApprovalRequest
    intent_kind: str
    intent_text: str
    run_id: str
    created_at: float
    expires_at: float
    state: str = "pending"
    decided_by: str | None = None
    decided_at: float | None = None
    reason: str = ""

    @property
    def id(self) -> str:
        """The request's id."""
        return self.request.id

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (the request's arguments are already redacted)."""
        return {
            "request": self.request.as_dict(),
            "intent_kind": self.intent_kind,
            "intent_text": self.intent_text,
            "run_id": self.run_id,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "state": self.state,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at,
            "reason": self.reason,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> PendingApproval:
        """The record `as_dict` wrote (how the SQL and Redis stores read it back)."""
        r = data["request"]
        request = ApprovalRequest(
            id=str(r["id"]),
            tool=str(r["tool"]),
            operation=str(r["operation"]),
            arguments=dict(r["arguments"]),
            fingerprint=str(r["fingerprint"]),
            rules=tuple(str(rule) for rule in r["rules"]),
            tenant=str(r["tenant"]),
            principal=str(r["principal"]),
            created_at=float(data["created_at"]),
        )
        decided_at = data.get("decided_at")
        return PendingApproval(
            request=request,
            intent_kind=str(data["intent_kind"]),
            intent_text=str(data["intent_text"]),
            run_id=str(data["run_id"]),
            created_at=float(data["created_at"]),
            expires_at=float(data["expires_at"]),
            state=str(data["state"]),
            decided_by=None if data.get("decided_by") is None else str(data["decided_by"]),
            decided_at=None if decided_at is None else float(decided_at),
            reason=str(data.get("reason", "")),
        )
