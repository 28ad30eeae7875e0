"""Approval-store factories for the contract tests: one suite over every backend."""

from __future__ import annotations

import time
import uuid

from toolbox.pipeline.grants import ApprovalRequest, PendingApproval


def pending(
    *,
    request_id: str | None = None,
    tenant: str = "acme",
    principal: str = "alice",
    fingerprint: str = "f" * 64,
    ttl: float = 60.0,
    created_at: float | None = None,
) -> PendingApproval:
    """A fresh pending request of ``principal`` in ``tenant``."""
    now = time.time() if created_at is None else created_at
    request = ApprovalRequest(
        id=request_id or uuid.uuid4().hex,
        tool="payments",
        operation="refund",
        arguments={"amount": 10, "card": "***"},
        fingerprint=fingerprint,
        rules=("descriptor",),
        tenant=tenant,
        principal=principal,
        created_at=now,
    )
    return PendingApproval(
        request=request,
        intent_kind="reason",
        intent_text="refund the duplicate charge",
        run_id="run-1",
        created_at=now,
        expires_at=now + ttl,
    )
