"""Denial paths and discovery: presence of the provider is not permission to use it."""

from __future__ import annotations

import httpx

import toolbox_http.plugin
from toolbox import (
    AcknowledgementState,
    RiskClass,
    ToolPolicy,
    ToolPolicyDeniedError,
    Tools,
    ToolUnavailableError,
)
from toolbox.testing import assert_denied, test_context
from toolbox_http import HTTP_DESCRIPTOR, HttpTool

URL = "https://api.example.com/rates"


def test_unavailable_without_the_provider(respx_mock, make_tools):
    """Without the http provider, get() raises ToolUnavailableError (TOOL_UNAVAILABLE)."""
    tools = make_tools(policy=ToolPolicy.standard().allow("http"))
    assert_denied(
        lambda: tools.get(HttpTool),
        tools,
        HttpTool,
        error=ToolUnavailableError,
        reason_code="TOOL_UNAVAILABLE",
    )
    assert respx_mock.calls.call_count == 0


def test_denied_by_the_standard_policy(respx_mock, make_tools):
    """ToolPolicy.standard() denies an EXTERNAL_RESOURCE tool by default (rule default:deny)."""
    tools = make_tools(toolbox_http.plugin)
    error = assert_denied(
        lambda: tools.get(HttpTool), tools, HttpTool, error=ToolPolicyDeniedError, reason_code="POLICY_DENIED"
    )
    assert error.rule == "default:deny"
    assert tools.explain(HttpTool).rule == "default:deny"
    assert respx_mock.calls.call_count == 0


def test_explicit_deny_beats_allow(respx_mock, make_tools):
    """deny("http") wins over allow(HttpTool)."""
    tools = make_tools(toolbox_http.plugin, policy=ToolPolicy.standard().allow(HttpTool).deny("http"))
    error = assert_denied(
        lambda: tools.get(HttpTool), tools, HttpTool, error=ToolPolicyDeniedError, reason_code="POLICY_DENIED"
    )
    assert error.rule.startswith("deny:")
    assert respx_mock.calls.call_count == 0


def test_no_acknowledgement_needed_and_allowed_path_runs_once(respx_mock, make_tools, toolbox_env):
    """HttpTool needs no acknowledgement: allowed with an empty env, it executes exactly once."""
    assert toolbox_env == {}
    route = respx_mock.get(URL).mock(return_value=httpx.Response(200, json={"EUR": 1.1}))
    tools = make_tools(toolbox_http.plugin, policy=ToolPolicy.standard().allow(HttpTool))
    decision = tools.explain(HttpTool)
    assert decision.acknowledgement is AcknowledgementState.NOT_REQUIRED
    assert decision.allowed
    try:
        response = tools.get(HttpTool).get(URL).purpose("Fetch rates").execute()
    finally:
        tools.close()
    assert response.json() == {"EUR": 1.1}
    assert tools.executions(HttpTool) == 1
    assert route.call_count == 1
    assert tools.context.trace.denials() == []


def test_descriptor():
    """The descriptor declares the risk class and each operation's effect."""
    assert HTTP_DESCRIPTOR.name == "http"
    assert HTTP_DESCRIPTOR.risk is RiskClass.EXTERNAL_RESOURCE
    assert HTTP_DESCRIPTOR.acknowledgement is None
    effects = {op.name: op.effect.value for op in HTTP_DESCRIPTOR.operations}
    assert effects == {
        "get": "READ_ONLY",
        "head": "READ_ONLY",
        "put": "IDEMPOTENT",
        "delete": "IDEMPOTENT",
        "post": "UNSAFE",
        "patch": "UNSAFE",
    }


def test_discovered_through_its_entry_point():
    """Installed, toolbox-http is found by entry-point discovery and reported as its distribution."""
    with Tools.load(test_context(), env={}, policy=ToolPolicy.standard().allow(HttpTool)) as tools:
        assert tools.has("http")
        assert tools.has(HttpTool)
        assert tools.distribution_of("http") == "toolbox-http"
        assert tools.explain("http").allowed
        assert isinstance(tools.get(HttpTool), HttpTool)


def test_discovered_but_denied_by_default():
    """Discovery alone grants nothing: the standard policy still denies http."""
    tools = Tools.load(test_context(), env={}, policy=ToolPolicy.standard())
    assert tools.has("http")
    assert not tools.explain(HttpTool).allowed
