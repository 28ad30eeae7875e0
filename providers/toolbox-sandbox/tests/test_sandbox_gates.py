"""The four ways to ask for the sandbox tool, its descriptor, and discovery by entry point."""

from __future__ import annotations

import importlib_metadata
import pytest
from sandbox_support import ACK, ALLOW_SANDBOX

import toolbox_sandbox
from toolbox import (
    AcknowledgementRequiredError,
    Effect,
    RiskClass,
    ToolPolicy,
    ToolPolicyDeniedError,
    Tools,
    ToolUnavailableError,
)
from toolbox.testing import assert_denied, test_context
from toolbox_sandbox import SANDBOX_ACKNOWLEDGEMENT, SANDBOX_DESCRIPTOR, SandboxTool, plugin


def test_descriptor_is_privileged_acknowledged_and_unsafe_by_default():
    assert SANDBOX_DESCRIPTOR.name == "sandbox"
    assert SANDBOX_DESCRIPTOR.risk is RiskClass.PRIVILEGED
    assert (SANDBOX_ACKNOWLEDGEMENT.env, SANDBOX_ACKNOWLEDGEMENT.value) == (
        "TOOLBOX_SANDBOX_ACK",
        "allow-sandboxed-code",
    )
    assert {op.name: op.effect for op in SANDBOX_DESCRIPTOR.operations} == {
        "run_python": Effect.UNSAFE,
        "run": Effect.UNSAFE,
    }


@pytest.mark.parametrize(
    ("table", "effect", "approval"),
    [
        ({}, Effect.UNSAFE, False),
        ({"profiles": {"default": {}}}, Effect.UNSAFE, False),
        ({"profiles": {"a": {"read_only_world": True}}, "default_profile": "a"}, Effect.IDEMPOTENT, False),
        (
            {"profiles": {"a": {"read_only_world": True}, "b": {}}, "default_profile": "a"},
            Effect.UNSAFE,
            False,
        ),
        ({"require_approval": True}, Effect.UNSAFE, True),
        ({"profiles": "not a table"}, Effect.UNSAFE, True),  # invalid: the safe side until built
    ],
)
def test_the_hook_reads_effect_and_approval_from_the_policy(table, effect, approval):
    policy = ToolPolicy.standard()
    policy.governance["tools"] = {"sandbox": table}
    (provider,) = plugin.toolbox_providers(policy)
    assert {op.effect for op in provider.descriptor.operations} == {effect}
    assert {op.requires_approval for op in provider.descriptor.operations} == {approval}


def test_unavailable_without_the_provider(make_tools):
    tools = make_tools(policy=ALLOW_SANDBOX, env=ACK)
    assert_denied(
        lambda: tools.get(SandboxTool),
        tools,
        SandboxTool,
        error=ToolUnavailableError,
        reason_code="TOOL_UNAVAILABLE",
    )


def test_standard_policy_denies_the_privileged_sandbox(make_tools):
    tools = make_tools(plugin, policy=ToolPolicy.standard(), env=ACK)
    error = assert_denied(
        lambda: tools.get(SandboxTool),
        tools,
        SandboxTool,
        error=ToolPolicyDeniedError,
        reason_code="POLICY_DENIED",
    )
    assert "allow('sandbox')" in str(error)


@pytest.mark.parametrize("value", [None, "Allow-sandboxed-code", "allow-sandboxed-code ", "yes"])
def test_acknowledgement_is_required_and_exact(make_tools, value):
    env = {} if value is None else {"TOOLBOX_SANDBOX_ACK": value}
    tools = make_tools(plugin, policy=ALLOW_SANDBOX, env=env)
    error = assert_denied(
        lambda: tools.get(SandboxTool),
        tools,
        SandboxTool,
        error=AcknowledgementRequiredError,
        reason_code="NOT_ACKNOWLEDGED",
    )
    assert (error.env, error.value) == ("TOOLBOX_SANDBOX_ACK", "allow-sandboxed-code")


def test_allowed_and_acknowledged_runs_code_and_counts_it(sandbox_tools, host):
    tools = sandbox_tools()
    sandbox = tools.get(SandboxTool)
    result = sandbox.run_python("print(6 * 7)").audit_as("Multiply").execute()
    assert (result.exit_code, result.stdout, result.ok) == (0, "42\n", True)
    assert tools.executions(SandboxTool) == 1
    (record,) = tools.context.trace.operations("sandbox")
    assert (record.operation, record.target, record.status) == ("run_python", "sandbox/default", "SUCCESS")


def test_code_options_cannot_claim_idempotence_or_approval_the_descriptor_lacks(sandbox_tools):
    with pytest.raises(ValueError, match="require_approval is read when the tool is registered"):
        sandbox_tools(require_approval=True).get(SandboxTool)


def test_entry_point_is_declared_and_discovered():
    (ep,) = importlib_metadata.entry_points(group="toolbox.providers", name="sandbox")
    assert ep.value == "toolbox_sandbox.plugin"
    assert ep.dist is not None and ep.dist.name == "toolbox-sandbox"
    tools = Tools.load(test_context(), env=ACK, policy=ALLOW_SANDBOX)
    assert tools.has(SandboxTool) and tools.distribution_of("sandbox") == "toolbox-sandbox"
    assert not [b for b in tools.broken_providers if b.distribution == "toolbox-sandbox"]


def test_public_api_is_explicit():
    assert toolbox_sandbox.__all__ == sorted(toolbox_sandbox.__all__, key=lambda n: (not n.isupper(), n))
    for name in toolbox_sandbox.__all__:
        assert getattr(toolbox_sandbox, name) is not None
