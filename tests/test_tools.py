"""Tools: has / get / explain, the four paths, acknowledgements and the trace."""

import threading

import pytest

from toolbox import (
    Acknowledgement,
    AcknowledgementRequiredError,
    AcknowledgementState,
    CalculatorTool,
    RiskClass,
    ToolPolicy,
    ToolPolicyDeniedError,
    ToolProvider,
    Tools,
    ToolUnavailableError,
)
from toolbox.testing import assert_denied, build_tools, fake_provider, test_context

ACK = Acknowledgement(env="ACME_PAYMENTS_ACK", value="charge-real-cards")


def payments():
    return fake_provider("payments", risk=RiskClass.PRIVILEGED, acknowledgement=ACK)


def test_has_by_type_and_name():
    """has() answers registration, by type or name, regardless of policy."""
    provider = fake_provider("ext", risk=RiskClass.EXTERNAL_RESOURCE)
    tools = build_tools(provider, policy=ToolPolicy.deny_all())
    assert tools.has(provider.tool_type)
    assert tools.has("ext")
    assert not tools.has("other")
    assert not tools.has(CalculatorTool)


def test_unavailable():
    """get() of an unregistered tool raises ToolUnavailableError, also a LookupError."""
    tools = build_tools()
    error = assert_denied(
        lambda: tools.get(CalculatorTool),
        tools,
        CalculatorTool,
        error=ToolUnavailableError,
        reason_code="TOOL_UNAVAILABLE",
    )
    assert isinstance(error, LookupError)
    assert "install the provider package" in str(error)
    with pytest.raises(LookupError):
        tools.get("calculator")


def test_policy_denied_runs_nothing():
    """A denied tool is never even built, and the denial is traced with its rule."""
    built = []
    base = fake_provider("ext", risk=RiskClass.EXTERNAL_RESOURCE)
    provider = ToolProvider(
        tool_type=base.tool_type,
        descriptor=base.descriptor,
        factory=lambda rt: built.append(rt) or base.tool_type(rt),
    )
    tools = build_tools(provider)
    error = assert_denied(
        lambda: tools.get(base.tool_type),
        tools,
        "ext",
        error=ToolPolicyDeniedError,
        reason_code="POLICY_DENIED",
    )
    assert isinstance(error, PermissionError)
    assert error.rule == "default:deny"
    assert "policy.allow('ext')" in str(error)
    assert built == []
    [denial] = tools.context.trace.denials()
    assert (denial.tool, denial.reason_code, denial.rule) == ("ext", "POLICY_DENIED", "default:deny")


def test_explicit_deny_message():
    """An explicit deny says which rule to remove."""
    tools = build_tools(fake_provider("calc2"), policy=ToolPolicy.standard().deny("calc2"))
    error = assert_denied(
        lambda: tools.get("calc2"), tools, "calc2", error=ToolPolicyDeniedError, reason_code="POLICY_DENIED"
    )
    assert error.rule == "deny:tool:calc2"
    assert "explicitly denied" in str(error)


@pytest.mark.parametrize(
    ("env", "state"),
    [
        ({}, AcknowledgementState.MISSING),
        ({"ACME_PAYMENTS_ACK": ""}, AcknowledgementState.MISMATCH),
        ({"ACME_PAYMENTS_ACK": "charge-real-cards "}, AcknowledgementState.MISMATCH),
        ({"ACME_PAYMENTS_ACK": " charge-real-cards"}, AcknowledgementState.MISMATCH),
        ({"ACME_PAYMENTS_ACK": "Charge-Real-Cards"}, AcknowledgementState.MISMATCH),
        ({"ACME_PAYMENTS_ACK": "yes"}, AcknowledgementState.MISMATCH),
        ({"acme_payments_ack": "charge-real-cards"}, AcknowledgementState.MISSING),
    ],
)
def test_acknowledgement_exact(env, state):
    """An allow never waives the acknowledgement, compared exactly: no trimming, no case folding."""
    provider = payments()
    tools = build_tools(provider, policy=ToolPolicy.standard().allow("payments"), env=env)
    error = assert_denied(
        lambda: tools.get(provider.tool_type),
        tools,
        "payments",
        error=AcknowledgementRequiredError,
        reason_code="NOT_ACKNOWLEDGED",
    )
    assert isinstance(error, PermissionError)
    assert (error.env, error.value) == ("ACME_PAYMENTS_ACK", "charge-real-cards")
    assert "ACME_PAYMENTS_ACK=charge-real-cards" in str(error)
    assert tools.explain("payments").acknowledgement is state


def test_acknowledged_and_allowed():
    """With the policy allow and the exact acknowledgement, get() returns the tool."""
    provider = payments()
    env = {"ACME_PAYMENTS_ACK": "charge-real-cards"}
    tools = build_tools(provider, policy=ToolPolicy.standard().allow(provider.tool_type), env=env)
    tool = tools.get(provider.tool_type)
    assert tool.write(3).audit_as("Charge the test card").execute() == 3
    assert tools.executions("payments") == 1
    assert tool.calls == [("write", 3)]
    decision = tools.explain("payments")
    assert decision.allowed and decision.acknowledgement is AcknowledgementState.SATISFIED


def test_acknowledgement_checked_on_every_get():
    """Withdrawing the acknowledgement takes effect on the next get()."""
    provider = payments()
    env = {"ACME_PAYMENTS_ACK": "charge-real-cards"}
    tools = build_tools(provider, policy=ToolPolicy.standard().allow("payments"), env=env)
    tools.get("payments")
    del env["ACME_PAYMENTS_ACK"]
    with pytest.raises(AcknowledgementRequiredError):
        tools.get("payments")


def test_ack_without_allow_is_policy_denied():
    """Setting the acknowledgement is not authorization: the policy still decides first."""
    provider = payments()
    tools = build_tools(provider, env={"ACME_PAYMENTS_ACK": "charge-real-cards"})
    assert_denied(
        lambda: tools.get("payments"),
        tools,
        "payments",
        error=ToolPolicyDeniedError,
        reason_code="POLICY_DENIED",
    )


def test_get_returns_one_instance_per_tools():
    """get() by type and by name return the same instance."""
    tools = build_tools(fake_provider("f"))
    assert tools.get("f") is tools.get(type(tools.get("f")))


def test_concurrent_first_get_builds_once():
    """Concurrent first get() calls build the tool once."""
    built = []
    base = fake_provider("f")

    def factory(rt):
        built.append(rt)
        return base.tool_type(rt)

    tools = build_tools(ToolProvider(tool_type=base.tool_type, descriptor=base.descriptor, factory=factory))
    results = []
    threads = [threading.Thread(target=lambda: results.append(tools.get("f"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1
    assert len({id(r) for r in results}) == 1


def test_explain_fields():
    """explain() carries the decision, rule, risk, distribution and acknowledgement."""
    tools = build_tools(payments(), policy=ToolPolicy.standard().allow("payments"))
    decision = tools.explain("payments")
    assert decision.as_dict() == {
        "tool": "payments",
        "allowed": False,
        "reason_code": "NOT_ACKNOWLEDGED",
        "rule": "acknowledgement:ACME_PAYMENTS_ACK",
        "risk": "PRIVILEGED",
        "distribution": "<explicit>",
        "acknowledgement": "MISSING",
        "acknowledgement_env": "ACME_PAYMENTS_ACK",
        "acknowledgement_value": "charge-real-cards",
        "detail": decision.detail,
    }
    assert "ACME_PAYMENTS_ACK=charge-real-cards" in str(decision)


def test_decisions_for_all_tools():
    """decisions() lists every registered tool, sorted by name."""
    tools = build_tools(fake_provider("b"), fake_provider("a", risk=RiskClass.EXTERNAL_RESOURCE))
    assert [(d.tool, d.allowed) for d in tools.decisions()] == [("a", False), ("b", True)]


def test_options_for_unknown_tool_rejected():
    """A typo in an options key is an error, not ignored."""
    with pytest.raises(ValueError, match="options given for unknown tool 'fss'"):
        build_tools(fake_provider("fs"), options={"fss": {}})


def test_options_reach_the_tool():
    """options={name: ...} arrive in the tool's runtime."""
    tools = build_tools(fake_provider("f"), options={"f": {"limit": 3}})
    assert tools.get("f")._runtime.options == {"limit": 3}


def test_context_must_be_execution_context():
    """A dict pretending to be a context is refused: contexts are built by the application."""
    with pytest.raises(TypeError, match="ExecutionContext"):
        Tools.load({"tenant": "t", "principal": "p"}, discover=False, env={})  # type: ignore[arg-type]


def test_policy_must_be_tool_policy():
    """Passing something else as policy fails loudly instead of defaulting."""
    with pytest.raises(TypeError, match="ToolPolicy"):
        Tools.load(test_context(), policy="standard", discover=False, env={})  # type: ignore[arg-type]


def test_close_closes_built_tools():
    """close() calls close() on built tools; the context manager does it too."""
    closed = []

    class Closing:
        def __init__(self, runtime):
            pass

        def close(self):
            closed.append(True)

    base = fake_provider("c")
    with build_tools(ToolProvider(tool_type=Closing, descriptor=base.descriptor)) as tools:
        tools.get(Closing)
    assert closed == [True]
