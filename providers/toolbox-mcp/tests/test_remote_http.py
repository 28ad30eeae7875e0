"""Streamable-HTTP servers: through toolbox-http's egress policy and SSRF guard, operator credentials only."""

from __future__ import annotations

import json

import pytest
from conftest import lock, write_policy

import toolbox_mcp.plugin
from toolbox import ExecutionContext, Status, ToolPolicy
from toolbox.registry._discovery import discover

ALICE = ExecutionContext(tenant="tenant-a", principal="alice")
BOB = ExecutionContext(tenant="tenant-b", principal="bob")
CAROL = ExecutionContext(tenant="tenant-a", principal="carol")
LOOPBACK = {"allow_networks": ["127.0.0.0/8"]}
ADD = {"a": 2, "b": 3, "audit_as": "Add numbers"}


def _server(url: str, **extra):
    return {"url": url, "egress": LOOPBACK, **extra}


def test_a_governed_call_over_streamable_http(tmp_path, http_server, make_setup):
    policy = write_policy(tmp_path / "policy.toml", {"remote": _server(http_server.url)})
    lock(policy, "remote")
    setup = make_setup(policy, tmp_path / "unused")
    result = setup.gateway.invoke("mcp.remote.add", ADD, context=ALICE)
    assert result.status is Status.SUCCESS
    assert result.content.text == "5"
    assert http_server.executions == ["add"]
    assert ("INVOCATION_RESPONSE", "SUCCESS", None) in setup.events(ALICE)


def test_loopback_is_refused_by_the_ssrf_guard_unless_allowed(tmp_path, http_server, make_setup):
    allowed = write_policy(tmp_path / "policy.toml", {"remote": _server(http_server.url)})
    lock(allowed, "remote")
    # Same server and lock, without the explicit opt-in for loopback addresses.
    refused = write_policy(tmp_path / "policy.toml", {"remote": {"url": http_server.url}})
    setup = make_setup(refused, tmp_path / "unused")
    result = setup.gateway.invoke("mcp.remote.add", ADD, context=ALICE)
    assert result.status is Status.DENIED
    assert result.reason_code == "EGRESS_DENIED"
    assert result.rule == "http:egress:address"
    assert http_server.executions == []


def test_a_url_outside_the_egress_policy_is_a_configuration_error(tmp_path, http_server):
    policy = write_policy(
        tmp_path / "policy.toml", {"remote": _server(http_server.url, egress={"hosts": ["api.example.com"]})}
    )
    found = discover(ToolPolicy.from_file(policy), [toolbox_mcp.plugin], entry_points=False)
    assert found.tools == ()
    assert "outside the server's egress policy" in found.broken[0].error


def test_upstream_credentials_are_the_operators_per_tenant_and_principal(tmp_path, http_server, make_setup):
    (tmp_path / "carol.token").write_text("carol-secret-token\n")
    credentials = [
        {"env": "SHARED_TOKEN", "prefix": "Bearer ", "allow_http": True},
        {"env": "TENANT_B_TOKEN", "prefix": "Bearer ", "tenant": "tenant-b", "allow_http": True},
        {
            "file": "carol.token",
            "prefix": "Bearer ",
            "tenant": "tenant-a",
            "principal": "carol",
            "allow_http": True,
        },
    ]
    policy = write_policy(
        tmp_path / "policy.toml", {"remote": _server(http_server.url, credentials=credentials)}
    )
    env = {"SHARED_TOKEN": "shared-secret-token", "TENANT_B_TOKEN": "tenant-b-secret-token"}
    lock_env = pytest.MonkeyPatch.context()
    with lock_env as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        lock(policy, "remote")
    http_server.headers.clear()
    setup = make_setup(policy, tmp_path / "unused", env=env)
    seen = {}
    for context in (ALICE, BOB, CAROL):
        http_server.headers.clear()
        assert setup.gateway.invoke("mcp.remote.add", ADD, context=context).status is Status.SUCCESS
        seen[context.principal] = {h.get("authorization") for h in http_server.headers}
    assert seen == {
        "alice": {"Bearer shared-secret-token"},
        "bob": {"Bearer tenant-b-secret-token"},
        "carol": {"Bearer carol-secret-token"},
    }
    # No secret reaches the audit trail, a record or a result.
    dumped = json.dumps(
        [r.model_dump() for c in (ALICE, BOB, CAROL) for r in setup.trail.read_trace(c.run_id, context=c)]
    )
    for secret in ("shared-secret-token", "tenant-b-secret-token", "carol-secret-token"):
        assert secret not in dumped


def test_credentials_never_go_over_plain_http_without_opting_in(tmp_path, http_server):
    policy = write_policy(
        tmp_path / "policy.toml", {"remote": _server(http_server.url, credentials=[{"env": "TOKEN"}])}
    )
    found = discover(ToolPolicy.from_file(policy), [toolbox_mcp.plugin], entry_points=False)
    assert "credentials go only over https" in found.broken[0].error


def test_a_missing_credential_fails_the_call_without_naming_a_secret(tmp_path, http_server, make_setup):
    credentials = [{"env": "REMOTE_TOKEN", "allow_http": True}]
    policy = write_policy(
        tmp_path / "policy.toml", {"remote": _server(http_server.url, credentials=credentials)}
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REMOTE_TOKEN", "lock-time-token")
        lock(policy, "remote")
    setup = make_setup(policy, tmp_path / "unused", env={})
    result = setup.gateway.invoke("mcp.remote.add", ADD, context=ALICE)
    assert result.status is Status.ERROR
    assert result.error_code == "CredentialError"
    assert "REMOTE_TOKEN is not set" in result.message
    assert "lock-time-token" not in result.message
    assert http_server.executions == []


def test_the_callers_own_credentials_are_never_forwarded(tmp_path, http_server, make_setup):
    # Whatever authenticated the caller (an MCP client's bearer token, a session cookie) is not
    # part of the context toolbox-mcp sees; upstream gets only what the operator configured.
    policy = write_policy(tmp_path / "policy.toml", {"remote": _server(http_server.url)})
    lock(policy, "remote")
    setup = make_setup(policy, tmp_path / "unused")
    caller = ExecutionContext(
        tenant="tenant-a", principal="client-with-token", correlation_id="Bearer client-token"
    )
    http_server.headers.clear()
    assert setup.gateway.invoke("mcp.remote.add", ADD, context=caller).status is Status.SUCCESS
    for headers in http_server.headers:
        assert "authorization" not in headers
        assert "cookie" not in headers
        assert "client-token" not in json.dumps(headers)
