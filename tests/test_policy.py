"""ToolPolicy: precedence, immutability, reason codes and rules."""

import pytest

from toolbox import ReasonCode, RiskClass, ToolDescriptor, ToolPolicy
from toolbox.errors import PolicyFileError


def descriptor(name: str, risk: RiskClass) -> ToolDescriptor:
    return ToolDescriptor(name=name, version="1", risk=risk, operations=[{"name": "op"}])


MEM = descriptor("calc", RiskClass.MEMORY_ONLY)
EXT = descriptor("http", RiskClass.EXTERNAL_RESOURCE)
PRIV = descriptor("fs", RiskClass.PRIVILEGED)


class HttpLike:
    """Stands in for a tool type."""


@pytest.mark.parametrize(
    ("policy", "desc", "allowed", "rule"),
    [
        # risk-class default
        (ToolPolicy.standard(), MEM, True, "default:risk:MEMORY_ONLY"),
        (ToolPolicy.standard(), EXT, False, "default:deny"),
        (ToolPolicy.standard(), PRIV, False, "default:deny"),
        (ToolPolicy.deny_all(), MEM, False, "default:deny"),
        # explicit allow > default
        (ToolPolicy.standard().allow("http"), EXT, True, "allow:tool:http"),
        (ToolPolicy.deny_all().allow(RiskClass.EXTERNAL_RESOURCE), EXT, True, "allow:risk:EXTERNAL_RESOURCE"),
        (ToolPolicy.deny_all().allow(HttpLike), EXT, True, "allow:tool:http"),
        # explicit deny > explicit allow, whatever the order
        (ToolPolicy.standard().allow("http").deny("http"), EXT, False, "deny:tool:http"),
        (ToolPolicy.standard().deny("http").allow("http"), EXT, False, "deny:tool:http"),
        (ToolPolicy.standard().allow("fs").deny(RiskClass.PRIVILEGED), PRIV, False, "deny:risk:PRIVILEGED"),
        (ToolPolicy.standard().allow(RiskClass.PRIVILEGED).deny("fs"), PRIV, False, "deny:tool:fs"),
        (ToolPolicy.standard().deny(HttpLike).allow("http"), EXT, False, "deny:tool:http"),
        # explicit deny > default
        (ToolPolicy.standard().deny("calc"), MEM, False, "deny:tool:calc"),
        (ToolPolicy.standard().deny(RiskClass.MEMORY_ONLY), MEM, False, "deny:risk:MEMORY_ONLY"),
        # a tool allow outranks a risk deny? no: any explicit deny wins
        (
            ToolPolicy.standard().deny(RiskClass.EXTERNAL_RESOURCE).allow(HttpLike),
            EXT,
            False,
            "deny:risk:EXTERNAL_RESOURCE",
        ),
    ],
)
def test_precedence(policy, desc, allowed, rule):
    """Explicit deny > explicit allow > risk-class default > deny, with the deciding rule."""
    decision = policy.decide(desc, HttpLike if desc is EXT else None)
    assert decision.allowed is allowed
    assert decision.rule == rule
    assert decision.reason_code is (ReasonCode.ALLOWED if allowed else ReasonCode.POLICY_DENIED)


def test_policies_are_immutable():
    """Modifiers return new policies and leave the original untouched."""
    base = ToolPolicy.standard()
    allowed = base.allow("http")
    assert base.decide(EXT).allowed is False
    assert allowed.decide(EXT).allowed is True
    assert allowed is not base
    with pytest.raises(AttributeError):
        base.extra = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("ref", ["Http", "", 42, None, "a b"])
def test_bad_refs_rejected(ref):
    """allow()/deny() take a tool type, a valid tool name or a RiskClass."""
    with pytest.raises(PolicyFileError, match="pass a tool type"):
        ToolPolicy.standard().allow(ref)


def test_block_distribution_normalises_names():
    """Blocked distributions match however the name is spelled (PEP 503)."""
    policy = ToolPolicy.standard().block_distribution("Evil_Tools")
    assert policy.is_blocked("evil-tools")
    assert policy.is_blocked("EVIL.tools")
    assert not policy.is_blocked("good-tools")


def test_repr_lists_rules():
    """The repr shows what the policy does, for logs and debugging."""
    text = repr(ToolPolicy.standard().allow("http").deny(RiskClass.PRIVILEGED))
    assert "allow=['http']" in text
    assert "PRIVILEGED" in text
