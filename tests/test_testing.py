"""toolbox.testing and the pytest plugin: the helpers must catch what they claim to catch."""

import pytest

from toolbox import (
    Acknowledgement,
    AcknowledgementRequiredError,
    RiskClass,
    ToolPolicy,
    ToolPolicyDeniedError,
    ToolUnavailableError,
)
from toolbox.testing import FakeTool, assert_denied, build_tools, fake_provider

pytest_plugins = ["pytester"]


def test_assert_denied_passes_on_a_real_denial():
    """A genuine denial passes and returns the exception."""
    tools = build_tools(fake_provider("ext", risk=RiskClass.EXTERNAL_RESOURCE))
    error = assert_denied(
        lambda: tools.get("ext"), tools, "ext", error=ToolPolicyDeniedError, reason_code="POLICY_DENIED"
    )
    assert error.rule == "default:deny"


def test_assert_denied_fails_when_allowed():
    """If the action succeeds, the helper fails the test."""
    tools = build_tools(fake_provider("mem"))
    with pytest.raises(AssertionError, match="the action succeeded"):
        assert_denied(
            lambda: tools.get("mem"), tools, "mem", error=ToolPolicyDeniedError, reason_code="POLICY_DENIED"
        )


def test_assert_denied_fails_on_wrong_exception():
    """A different exception type fails the test, naming both."""
    tools = build_tools()
    with pytest.raises(AssertionError, match=r"expected ToolPolicyDeniedError.*got ToolUnavailableError"):
        assert_denied(
            lambda: tools.get("x"), tools, "x", error=ToolPolicyDeniedError, reason_code="POLICY_DENIED"
        )


def test_assert_denied_fails_on_wrong_reason():
    """The reason code is checked."""
    tools = build_tools()
    with pytest.raises(AssertionError, match="expected reason code POLICY_DENIED"):
        assert_denied(
            lambda: tools.get("x"), tools, "x", error=ToolUnavailableError, reason_code="POLICY_DENIED"
        )


def test_assert_denied_fails_when_the_tool_ran():
    """A 'denial' raised after the tool's code ran is caught as a failure."""
    tools = build_tools(fake_provider("mem"))
    tool = tools.get("mem")

    def runs_then_raises():
        tool.read(1).purpose("Run").execute()
        raise ToolPolicyDeniedError("late", tool="mem", reason_code="POLICY_DENIED", rule="r")

    with pytest.raises(AssertionError, match="ran 1 time"):
        assert_denied(
            runs_then_raises, tools, "mem", error=ToolPolicyDeniedError, reason_code="POLICY_DENIED"
        )


def test_assert_denied_requires_the_trace_entry():
    """A denial that was not recorded in the trace fails the helper."""
    tools = build_tools()

    def unrecorded():
        raise ToolPolicyDeniedError("x", tool="x", reason_code="POLICY_DENIED", rule="r")

    with pytest.raises(AssertionError, match="missing from the trace"):
        assert_denied(unrecorded, tools, "x", error=ToolPolicyDeniedError, reason_code="POLICY_DENIED")


def test_fake_tool_counts_calls():
    """FakeTool records every execution of its code."""
    tools = build_tools(fake_provider("f"))
    tool = tools.get("f")
    assert isinstance(tool, FakeTool)
    tool.read("a").purpose("Read").execute()
    tool.write("b").audit_as("Write").execute()
    assert tool.calls == [("read", "a"), ("write", "b")]
    assert tools.executions("f") == 2


def test_build_tools_ignores_the_real_environment(monkeypatch):
    """build_tools never reads os.environ: acknowledgements and TOOLBOX_POLICY stay out."""
    monkeypatch.setenv("FAKE_ACK", "yes")
    monkeypatch.setenv("TOOLBOX_POLICY", "/nonexistent/policy.toml")
    provider = fake_provider(
        "p", risk=RiskClass.PRIVILEGED, acknowledgement=Acknowledgement(env="FAKE_ACK", value="yes")
    )
    tools = build_tools(provider, policy=ToolPolicy.standard().allow("p"))
    assert_denied(
        lambda: tools.get("p"), tools, "p", error=AcknowledgementRequiredError, reason_code="NOT_ACKNOWLEDGED"
    )


def test_plugin_fixtures(pytester):
    """The pytest11 plugin provides toolbox_env, toolbox_context and make_tools."""
    pytester.makepyfile(
        """
        from toolbox import Acknowledgement, RiskClass, ToolPolicy, AcknowledgementRequiredError
        from toolbox.testing import assert_denied, fake_provider

        ACK = Acknowledgement(env="X_ACK", value="ok")

        def test_four_paths(make_tools, toolbox_env, toolbox_context):
            provider = fake_provider("p", risk=RiskClass.PRIVILEGED, acknowledgement=ACK)
            tools = make_tools(provider, policy=ToolPolicy.standard().allow("p"))
            assert tools.context is toolbox_context
            assert_denied(lambda: tools.get("p"), tools, "p",
                          error=AcknowledgementRequiredError, reason_code="NOT_ACKNOWLEDGED")
            toolbox_env["X_ACK"] = "ok"
            assert tools.get("p").read(1).purpose("Read").execute() == 1
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
