"""What `Tools.explain` answers: a tool's `ToolDecision`, its acknowledgement's state, and the
sentences that tell people what to do about a refusal."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import final

from toolbox.foundations._descriptor import Acknowledgement, RiskClass, ToolDescriptor
from toolbox.registry._policy import PolicyDecision

__all__ = [
    "UNMET",
    "AcknowledgementState",
    "ToolDecision",
    "ack_detail",
    "ack_rule",
    "acknowledgement_state",
    "policy_detail",
]


class AcknowledgementState(str, enum.Enum):
    """Whether a tool's deployment acknowledgement is in place."""

    NOT_REQUIRED = "NOT_REQUIRED"
    SATISFIED = "SATISFIED"
    MISSING = "MISSING"
    MISMATCH = "MISMATCH"


@final
@dataclass(frozen=True)
class ToolDecision:
    """Whether a tool is usable now, and why. Returned by `Tools.explain`."""

    tool: str
    allowed: bool
    """True when ``get()`` would return the tool."""
    reason_code: str
    """``ALLOWED``, ``POLICY_DENIED``, ``NOT_ACKNOWLEDGED`` or ``TOOL_UNAVAILABLE``."""
    rule: str
    """The rule that decided, e.g. ``allow:tool:http`` or ``default:deny``."""
    risk: RiskClass | None = None
    distribution: str | None = None
    acknowledgement: AcknowledgementState = AcknowledgementState.NOT_REQUIRED
    acknowledgement_env: str | None = None
    acknowledgement_value: str | None = None
    detail: str = ""
    """A sentence for people saying what to do."""

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready mapping."""
        return {
            "tool": self.tool,
            "allowed": self.allowed,
            "reason_code": self.reason_code,
            "rule": self.rule,
            "risk": self.risk.value if self.risk else None,
            "distribution": self.distribution,
            "acknowledgement": self.acknowledgement.value,
            "acknowledgement_env": self.acknowledgement_env,
            "acknowledgement_value": self.acknowledgement_value,
            "detail": self.detail,
        }

    def __str__(self) -> str:
        verdict = "allowed" if self.allowed else "denied"
        return f"{self.tool}: {verdict} ({self.reason_code}, rule {self.rule}). {self.detail}".strip()


#: The states of a required acknowledgement that refuse the tool.
UNMET = frozenset({AcknowledgementState.MISSING, AcknowledgementState.MISMATCH})


def acknowledgement_state(ack: Acknowledgement | None, env: Mapping[str, str]) -> AcknowledgementState:
    if ack is None:
        return AcknowledgementState.NOT_REQUIRED
    current = env.get(ack.env)
    if current is None:
        return AcknowledgementState.MISSING
    # Exact comparison on purpose: no trimming, no case folding.
    return AcknowledgementState.SATISFIED if current == ack.value else AcknowledgementState.MISMATCH


def policy_detail(desc: ToolDescriptor, decision: PolicyDecision) -> str:
    if decision.rule.startswith("deny:"):
        return f"It is explicitly denied; remove {decision.rule!r} from the policy to use it."
    return (
        f"{desc.risk.value} tools need an explicit allow: "
        f"policy.allow({desc.name!r}) in code, or add {desc.name!r} to [allow].tools "
        "in the policy file."
    )


def ack_rule(ack: Acknowledgement) -> str:
    return f"acknowledgement:{ack.env}"


def ack_detail(name: str, ack: Acknowledgement, state: AcknowledgementState) -> str:
    now = "is not set" if state is AcknowledgementState.MISSING else "holds a different value"
    return (
        f"{ack.env} {now}. An operator approves {name!r} for this deployment by setting "
        f"{ack.env}={ack.value} (exact value, case-sensitive)."
    )
