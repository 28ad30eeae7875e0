"""Security review of `toolbox.mcp` over HTTP: attacks that held before, and breaks now fixed.

Runs against the endpoint of `test_mcp_http` (a real ``[auth]`` section, uvicorn on 127.0.0.1).
"""

from __future__ import annotations

import anyio
import httpx
from mcp.server.auth.provider import principal_components

import mcp_scenario_tools as scenario
from test_mcp_http import ACCEPT, INITIALIZE, _fresh_executions, served, sse_json  # noqa: F401 - fixtures
from test_mcp_serve import PURPOSE
from toolbox.auth import Identity
from toolbox.mcp import IdentityVerifier


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
