"""The static egress policy: scheme, host, port and method, checked when the operation is called."""

from __future__ import annotations

import httpx
import pytest

import toolbox_http.plugin
from toolbox import ExecutionContext, Gateway, Status, ToolPolicy
from toolbox.testing import assert_denied
from toolbox_http import EgressDeniedError, EgressPolicy, HttpTool

EGRESS = {
    "schemes": ["https"],
    "hosts": ["api.example.com", "*.partner.example", "203.0.113.7"],
    "ports": [443, 8443],
    "methods": ["GET", "POST"],
}


@pytest.mark.parametrize(
    ("method", "url", "rule"),
    [
        ("get", "http://api.example.com/rates", "http:egress:scheme"),
        ("get", "https://evil.example.com/rates", "http:egress:host"),
        ("get", "https://partner.example/rates", "http:egress:host"),
        ("get", "https://api.example.com.evil.test/", "http:egress:host"),
        ("get", "https://api.example.com:444/rates", "http:egress:port"),
        ("delete", "https://api.example.com/rates", "http:egress:method"),
        ("get", "https://203.0.113.8/", "http:egress:host"),
    ],
)
def test_outside_the_policy_is_denied_at_call_time(respx_mock, http_tools, method, url, rule):
    """DENIED/EGRESS_DENIED when the operation is called: no intent, no execution, no request."""
    tools = http_tools(egress=EGRESS)
    tool = tools.get(HttpTool)
    error = assert_denied(
        lambda: getattr(tool, method)(url),
        tools,
        HttpTool,
        error=EgressDeniedError,
        reason_code="EGRESS_DENIED",
    )
    assert error.rule == rule
    assert respx_mock.calls.call_count == 0
    assert tools.context.trace.denials()[-1].reason_code == "EGRESS_DENIED"


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/rates",
        "https://API.EXAMPLE.COM./rates",
        "https://eu.partner.example/rates",
        "https://a.b.partner.example:8443/rates",
        "https://203.0.113.7/rates",
    ],
)
def test_inside_the_policy_runs(respx_mock, http_tools, url):
    """Exact names (any case, trailing dot), *.suffix patterns, listed IPs and ports pass."""
    respx_mock.get(url__regex=r".*").mock(return_value=httpx.Response(200, json={}))
    tools = http_tools(egress=EGRESS)
    assert tools.get(HttpTool).get(url).purpose("Read").execute().status_code == 200
    assert respx_mock.calls.call_count == 1


def test_by_name_door_denies_with_zero_executions(respx_mock):
    """gateway.invoke returns DENIED/EGRESS_DENIED; the tool never executes."""
    gateway = Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool),
        providers=[toolbox_http.plugin],
        discover=False,
        env={},
        options={"http": {"egress": EGRESS}},
    )
    context = ExecutionContext(tenant="t", principal="p")
    try:
        tools = gateway.tools_for(context)
        result = gateway.invoke(
            "http.get", {"url": "https://evil.example.com/x", "purpose": "Probe"}, context=context
        )
        assert result.status is Status.DENIED
        assert result.reason_code == "EGRESS_DENIED"
        assert result.rule == "http:egress:host"
        assert tools.executions(HttpTool) == 0
    finally:
        gateway.close()
    assert respx_mock.calls.call_count == 0


def test_report_mode_allows_and_records_a_warning(respx_mock, http_tools):
    """mode=REPORT lets the call through and records the would-be denial as a warning."""
    respx_mock.get("https://evil.example.com/x").mock(return_value=httpx.Response(200))
    tools = http_tools(egress={**EGRESS, "mode": "REPORT"})
    ready = tools.get(HttpTool).get("https://evil.example.com/x").purpose("Roll-out")
    assert ready.execute().status_code == 200
    assert ready.record.status == "SUCCESS"
    assert len(ready.record.warnings) == 1
    assert ready.record.warnings[0].startswith("EGRESS_DENIED (report only)")
    assert "evil.example.com" in ready.record.warnings[0]


def test_report_mode_warning_on_the_by_name_door(respx_mock):
    """The by-name result carries the report-only warning."""
    respx_mock.get("https://evil.example.com/x").mock(return_value=httpx.Response(200))
    gateway = Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool),
        providers=[toolbox_http.plugin],
        discover=False,
        env={},
        options={"http": {"egress": {**EGRESS, "mode": "REPORT"}}},
    )
    try:
        result = gateway.invoke(
            "http.get",
            {"url": "https://evil.example.com/x", "purpose": "Roll-out"},
            context=ExecutionContext(tenant="t", principal="p"),
        )
    finally:
        gateway.close()
    assert result.status is Status.SUCCESS
    assert any(w.startswith("EGRESS_DENIED (report only)") for w in result.warnings)


@pytest.mark.parametrize(
    ("egress", "match"),
    [
        ({"hosts": ["*"]}, "host pattern"),
        ({"hosts": ["a..b"]}, "host pattern"),
        ({"hosts": ["*.*.example.com"]}, "host pattern"),
        ({"ports": [0]}, "ports"),
        ({"allow_networks": ["10.0.0.1/8"]}, "allow_networks"),
        ({"resolver": "dns.google"}, "resolver"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_policy_is_validated(egress, match):
    """Malformed egress settings are refused with a message naming the field."""
    with pytest.raises(ValueError, match=match):
        EgressPolicy.model_validate(egress)


def test_default_policy_allows_any_public_http_url():
    """By default only the address check restricts where requests go."""
    policy = EgressPolicy()
    assert policy.violation("GET", httpx.URL("https://example.org:8080/")) is None
    assert policy.allow_networks == ()


def test_internationalised_names_match_their_idna_form(respx_mock, http_tools):
    """Patterns are ASCII: bücher.example is allowed by xn--bcher-kva.example, and nothing else."""
    respx_mock.get(url__regex=r".*").mock(return_value=httpx.Response(200))
    tools = http_tools(egress={"hosts": ["xn--bcher-kva.example"]})
    assert tools.get(HttpTool).get("https://bücher.example/").purpose("Read").execute().status_code == 200
    with pytest.raises(EgressDeniedError):
        tools.get(HttpTool).get("https://bucher.example/")
