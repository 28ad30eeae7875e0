"""`ApprovalRequest` and `Approval`: the data of an argument-bound approval.

Apart from `toolbox.pipeline.approval` (the check that asks and verifies), so
that a `ToolResult` and an `Invocation` can carry them without importing the
check. Both names are re-exported by `toolbox.pipeline.approval` and `toolbox`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, final

__all__ = ["Approval", "ApprovalRequest"]


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
