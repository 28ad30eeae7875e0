"""Scoped credentials: injected for matching hosts only, never visible, never recorded."""

from __future__ import annotations

import asyncio

import httpx
import pytest

import toolbox_http.plugin
from toolbox import ExecutionContext, Gateway, Governance, Status, ToolPolicy
from toolbox.audit import AuditTrail, MemorySink
from toolbox_http import Credential, CredentialError, HttpTool

TOKEN = "tok-credential-9f8e7d"
BEARER = [
    {"hosts": ["api.example.com"], "header": "Authorization", "prefix": "Bearer ", "env": "EXAMPLE_TOKEN"}
]


def test_injected_for_the_matching_host_only(respx_mock, http_tools, toolbox_env):
    """The bearer token goes to api.example.com, and not to any other host."""
    toolbox_env["EXAMPLE_TOKEN"] = TOKEN
    api = respx_mock.get("https://api.example.com/rates").mock(return_value=httpx.Response(200))
    other = respx_mock.get("https://other.example.com/rates").mock(return_value=httpx.Response(200))
    tool = http_tools(credentials=BEARER).get(HttpTool)
    tool.get("https://api.example.com/rates").purpose("Read").execute()
    tool.get("https://other.example.com/rates").purpose("Read").execute()
    assert api.calls.last.request.headers["authorization"] == f"Bearer {TOKEN}"
    assert "authorization" not in other.calls.last.request.headers


def test_suffix_pattern_and_callable(respx_mock, http_tools):
    """A callable secret bound to *.example.com reaches eu.example.com but not example.org."""
    respx_mock.get(url__regex=r".*").mock(return_value=httpx.Response(200))
    creds = [Credential(hosts=("*.example.com",), header="X-Api-Key", value_from=lambda: TOKEN)]
    tool = http_tools(credentials=creds).get(HttpTool)
    asyncio.run(tool.get("https://eu.example.com/").purpose("Read").aexecute())
    tool.get("https://example.org/").purpose("Read").execute()
    assert respx_mock.calls[0].request.headers["x-api-key"] == TOKEN
    assert "x-api-key" not in respx_mock.calls[1].request.headers


def test_caller_cannot_override_the_credential(respx_mock, http_tools, toolbox_env):
    """A caller-supplied header of the same name is replaced for a bound host."""
    toolbox_env["EXAMPLE_TOKEN"] = TOKEN
    route = respx_mock.get("https://api.example.com/").mock(return_value=httpx.Response(200))
    tool = http_tools(credentials=BEARER).get(HttpTool)
    tool.get("https://api.example.com/", headers={"Authorization": "Bearer forged"}).purpose("Read").execute()
    assert route.calls.last.request.headers["authorization"] == f"Bearer {TOKEN}"


def test_never_in_trace_result_or_audit(respx_mock, toolbox_env):
    """Neither the by-name result nor the trace nor audit rows contain the secret."""
    respx_mock.get("https://api.example.com/rates").mock(return_value=httpx.Response(200, json={"a": 1}))
    sink = MemorySink()
    gateway = Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool),
        providers=[toolbox_http.plugin],
        discover=False,
        env={"EXAMPLE_TOKEN": TOKEN},
        options={"http": {"credentials": BEARER}},
        governance=Governance(audit=AuditTrail(sink)),
    )
    context = ExecutionContext(tenant="t", principal="p")
    try:
        result = gateway.invoke(
            "http.get", {"url": "https://api.example.com/rates", "purpose": "Read"}, context=context
        )
        tools = gateway.tools_for(context)
    finally:
        gateway.close()
    assert result.status is Status.SUCCESS
    text = (
        repr(result.as_dict())
        + repr([r.as_dict() for r in tools.context.trace])
        + repr([r.model_dump() for r in sink.records])
    )
    assert TOKEN not in text
    assert sink.records, "the audit sink saw the call"


def test_missing_secret_is_an_error_naming_the_variable(respx_mock, http_tools):
    """An unset variable fails the call before sending; the message names the variable only."""
    route = respx_mock.get("https://api.example.com/").mock(return_value=httpx.Response(200))
    ready = http_tools(credentials=BEARER).get(HttpTool).get("https://api.example.com/").purpose("Read")
    with pytest.raises(CredentialError, match="EXAMPLE_TOKEN is not set"):
        ready.execute()
    assert route.call_count == 0


def test_callable_failure_does_not_leak(respx_mock, http_tools):
    """A failing callable's message (which might hold the secret) is not repeated."""
    respx_mock.get("https://api.example.com/").mock(return_value=httpx.Response(200))

    def broken() -> str:
        raise RuntimeError(f"vault said {TOKEN}")

    creds = [Credential(hosts=("api.example.com",), value_from=broken)]
    with pytest.raises(CredentialError) as info:
        http_tools(credentials=creds).get(HttpTool).get("https://api.example.com/").purpose("Read").execute()
    assert TOKEN not in str(info.value)
    assert info.value.__cause__ is None


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"hosts": ["a.example"]}, "exactly one of env or value_from"),
        ({"hosts": [], "env": "X"}, "hosts"),
        ({"hosts": ["a.example"], "env": "X", "header": "Bad Header"}, "header"),
        ({"hosts": ["a.example"], "env": "1X"}, "env"),
        ({"hosts": ["a.example"], "env": "X", "prefix": "a\r\nb"}, "prefix"),
    ],
)
def test_configuration_is_validated(config, match):
    """Malformed credential configuration is refused when the options are validated."""
    with pytest.raises(ValueError, match=match):
        Credential.model_validate(config)


def test_repr_hides_the_callable():
    """repr of a credential names hosts and header, not the secret source callable."""
    credential = Credential(hosts=("a.example",), value_from=lambda: TOKEN)
    assert "value_from" not in repr(credential)
