"""Security review of `toolbox.mcp` over HTTP: attacks that held before, and breaks now fixed.

Runs against the endpoint of `test_mcp_http` (a real ``[auth]`` section, uvicorn on 127.0.0.1).
"""

from __future__ import annotations

import anyio
import httpx
from mcp.server.auth.provider import principal_components

import mcp_scenario_tools as scenario
from test_mcp_http import ACCEPT, INITIALIZE, _fresh_executions, served, sse_json  # noqa: F401 - fixtures
from test_mcp_serve import OPERATOR, PURPOSE, make_gateway, outcome, run, trace_of
from toolbox.auth import Identity
from toolbox.mcp import IdentityVerifier, server


class _Fixed:
    """An authenticator that maps each token to a fixed identity."""

    def __init__(self, identities: dict[str, Identity]) -> None:
        self._identities = identities

    def authenticate(self, token: str, /) -> Identity:
        return self._identities[token]


def test_session_owners_never_collide_across_tenant_and_principal():
    """``tenant-a/x`` + ``y`` and ``tenant-a`` + ``x/y`` are two owners, not one ``tenant-a/x/y``."""
    one = Identity("tenant-a/x", "y", frozenset(), None, "jwt:https://idp.test")
    two = Identity("tenant-a", "x/y", frozenset(), None, "jwt:https://idp.test")
    verifier = IdentityVerifier(_Fixed({"one": one, "two": two}))
    first, second = anyio.run(verifier.verify_token, "one"), anyio.run(verifier.verify_token, "two")
    assert first is not None and second is not None
    assert principal_components(first) != principal_components(second)


def test_a_colliding_jwt_identity_cannot_use_another_session(served):  # noqa: F811 - the fixture
    """Tenant ``tenant-a/x`` opens a session; tenant ``tenant-a``, subject ``x/y`` (same issuer) gets 404."""
    owner = served.jwt(tenant="tenant-a/x", subject="y")
    other = served.jwt(tenant="tenant-a", subject="x/y")
    with httpx.Client(timeout=10) as http:
        first = {**ACCEPT, "Authorization": f"Bearer {owner}"}
        opened = http.post(served.url, json=INITIALIZE, headers=first)
        assert opened.status_code == 200
        headers = {
            **ACCEPT,
            "Authorization": f"Bearer {owner}",
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        http.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "lookup", "arguments": {"note_id": 1, "purpose": PURPOSE}},
        }
        assert not sse_json(http.post(served.url, json=call, headers=headers))["result"].get("isError")
        stolen = {**headers, "Authorization": f"Bearer {other}"}
        assert http.post(served.url, json=call, headers=stolen).status_code == 404
        assert http.delete(served.url, headers=stolen).status_code == 404
        # The owner's session survived the attempt to end it.
        assert http.post(served.url, json=call, headers=headers).status_code == 200
    assert scenario.EXECUTIONS == ["lookup", "lookup"]  # the owner's calls only


def test_a_toolset_caller_cannot_tell_registered_tools_from_unknown_names(tmp_path):
    """Outside its toolset, a registered tool, an unknown name and an unknown operation look alike."""
    gateway, sink = make_gateway(tmp_path)
    mcp_server = server(gateway, context=OPERATOR, toolset="readers")
    names = ["settle", "nosuch", "settle__nope", "lookup__nope", "vault.x:v9"]

    async def steps(client):
        return [await client.call_tool(name, {"purpose": PURPOSE}) for name in names]

    results = run(mcp_server, steps)
    for name, result in zip(names, results, strict=True):
        data = outcome(result)
        assert result.is_error and (data["status"], data["reason_code"]) == ("DENIED", "NOT_IN_TOOLSET"), name
        assert data["error_code"] is None and "registered" not in data["message"]
    assert scenario.EXECUTIONS == []
    decisions = [e for e in sink.read_trace(trace_of(results[0])) if e.reason_code == "NOT_IN_TOOLSET"]
    assert len(decisions) == len(names)  # every refusal is audited
