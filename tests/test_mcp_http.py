"""`toolbox.mcp.McpHttpApp` over streamable HTTP on 127.0.0.1 (uvicorn), with the official client.

Credentials come from a real ``[auth]`` section (an API-key file and a JWT
public key); every refusal asserts that no tool code ran and no call was audited.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import mcp_scenario_tools as scenario
from service_support import PLAIN_HTTP
from test_mcp_serve import PURPOSE, SCENARIOS, outcome, trace_of
from toolbox import Gateway, Governance, ToolPolicy
from toolbox.audit import AuditQuery, AuditTrail, MemorySink
from toolbox.auth import authenticator_from_policy
from toolbox.errors import ConfigurationError
from toolbox.mcp import McpHttpApp
from toolbox.testing.credentials import jwt_keypair, mint_jwt, write_api_keys

ISSUER, AUDIENCE = "https://idp.test", "toolbox-mcp"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


class Served:
    """A running endpoint: its URL, the keys, the JWT signing key, the sink."""

    def __init__(self, url: str, keys: dict[str, str], private_pem: str, sink: MemorySink) -> None:
        self.url = url
        self.keys = keys
        self.private_pem = private_pem
        self.sink = sink

    def forged_jwt(self) -> str:
        """A well-formed token signed by a key the server does not trust."""
        other = jwt_keypair()[0]
        return mint_jwt(other, issuer=ISSUER, audience=AUDIENCE, subject="x", tenant="tenant-a")

    def jwt(self, **overrides) -> str:
        claims = {"issuer": ISSUER, "audience": AUDIENCE, "subject": "jwt-user", "tenant": "tenant-a"}
        claims.update(overrides)
        return mint_jwt(self.private_pem, **claims)


def _policy(tmp: Path) -> tuple[Path, dict[str, str], str]:
    keys = write_api_keys(
        tmp / "keys.toml",
        {
            "alice": {"tenant": "tenant-a", "roles": ["analyst"]},
            "bob": {"tenant": "tenant-b"},
            "reader": {"tenant": "tenant-a", "toolset": "readers"},
            "ghost": {"tenant": "tenant-a", "toolset": "no-such-set"},
            "old": {"tenant": "tenant-a", "expires": "2020-01-01T00:00:00Z"},
        },
    )
    private_pem, public_pem = jwt_keypair()
    (tmp / "jwt.pem").write_text(public_pem, encoding="utf-8")
    auth = (
        '\n[auth]\napi_keys = "keys.toml"\n[auth.jwt]\n'
        f'issuer = "{ISSUER}"\naudience = "{AUDIENCE}"\nkey_file = "jwt.pem"\nalgorithms = ["ES256"]\n'
    )
    path = tmp / "policy.toml"
    path.write_text(scenario.POLICY + auth, encoding="utf-8")
    return path, keys, private_pem


def serve(app) -> tuple[str, uvicorn.Server, threading.Thread]:
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp", server, thread


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mcp-http")
    path, keys, private_pem = _policy(tmp)
    policy = ToolPolicy.from_file(path)
    sink = MemorySink()
    gateway = Gateway.load(
        policy=policy,
        providers=scenario.PROVIDERS,
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink), mappers=scenario.MAPPERS, disabled_tools=["halt"]),
    )
    authenticator = authenticator_from_policy(policy)
    assert authenticator is not None
    url, server, thread = serve(McpHttpApp(gateway, authenticator).starlette())
    yield Served(url, keys, private_pem, sink)
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(autouse=True)
def _fresh_executions():
    scenario.EXECUTIONS.clear()
    yield
    scenario.EXECUTIONS.clear()


def session(served: Served, token: str, steps, *, mode: str = "auto"):
    """Run ``steps(client)`` in one session of the official client, sending ``token``."""

    async def main():
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(served.url, http_client=http), mode=mode) as connected,
        ):
            return await steps(connected)

    return anyio.run(main)


def sse_json(response: httpx.Response) -> dict:
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])


# -- list, call, the scenario table ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_scenario_table_over_http(served, mode):
    """Every status of the table, in one authenticated session, with executions counted per call."""

    async def steps(connected):
        names = sorted(t.name for t in (await connected.list_tools()).tools)
        outcomes = []
        for _, name, arguments, status, reason, error, executions, _ in SCENARIOS:
            before = len(scenario.EXECUTIONS)
            result = await connected.call_tool(name, arguments)
            ran = len(scenario.EXECUTIONS) - before
            outcomes.append((name, result, status, reason, error, executions, ran))
        return names, outcomes

    names, outcomes = session(served, served.keys["alice"], steps, mode=mode)
    assert names == ["explode", "lookup", "refund", "settle"]
    traces = set()
    for name, result, status, reason, error, executions, ran in outcomes:
        assert ran == executions, name
        traces.add(trace_of(result))
        if status == "SUCCESS":
            assert result.structured_content == {"note_id": 1, "text": "note 1"}
            continue
        assert (outcome(result)["status"], outcome(result)["reason_code"]) == (
            status,
            reason,
        )
        assert outcome(result)["error_code"] == error
    (trace_id,) = traces
    stored = served.sink.read_trace(trace_id)
    assert {(e.tenant, e.principal) for e in stored} == {("tenant-a", "alice")}
    decisions = [
        e.reason_code for e in stored if e.type.value == "GOVERNANCE_DECISION" and e.decision == "DENY"
    ]
    assert decisions == ["POLICY_DENIED", "NOT_ACKNOWLEDGED", "GUARDRAIL_NO_SECRET_NOTE", "KILL_SWITCH"]


def test_jwt_caller(served):
    """A valid JWT calls as its subject, for its tenant claim."""
    result = session(
        served, served.jwt(), lambda c: c.call_tool("lookup", {"note_id": 5, "purpose": PURPOSE})
    )
    assert not result.is_error and scenario.EXECUTIONS == ["lookup"]
    assert {(e.tenant, e.principal) for e in served.sink.read_trace(trace_of(result))} == {
        ("tenant-a", "jwt-user")
    }


def test_sessions_have_their_own_runs(served):
    """Two sessions of one credential are two runs; calls in one session share its run."""

    async def steps(connected):
        first = await connected.call_tool("lookup", {"note_id": 1, "purpose": PURPOSE})
        second = await connected.call_tool("lookup", {"note_id": 2, "purpose": PURPOSE})
        return trace_of(first), trace_of(second)

    one = session(served, served.keys["alice"], steps, mode="legacy")
    two = session(served, served.keys["alice"], steps, mode="legacy")
    assert one[0] == one[1] and two[0] == two[1] and one[0] != two[0]


def test_credential_toolset(served):
    """A key limited to a toolset sees only it and is refused outside it; an unknown set allows nothing."""

    async def steps(connected):
        names = [t.name for t in (await connected.list_tools()).tools]
        refused = await connected.call_tool("settle", {"order": 1, "audit_as": "Settle"})
        return names, refused

    names, refused = session(served, served.keys["reader"], steps)
    assert names == ["lookup"]
    assert outcome(refused)["reason_code"] == "NOT_IN_TOOLSET"
    names, refused = session(served, served.keys["ghost"], steps)
    assert names == [] and outcome(refused)["reason_code"] == "NOT_IN_TOOLSET"
    assert scenario.EXECUTIONS == []


# -- authentication -----------------------------------------------------------------------------


def _refused_tokens(served: Served) -> dict[str, dict[str, str]]:
    return {
        "no token": {},
        "wrong token": {"Authorization": "Bearer tbx_" + "A" * 40},
        "not bearer": {"Authorization": f"Basic {served.keys['alice']}"},
        "expired key": {"Authorization": f"Bearer {served.keys['old']}"},
        "expired jwt": {"Authorization": f"Bearer {served.jwt(expires_in=-60)}"},
        "wrong audience": {"Authorization": f"Bearer {served.jwt(audience='another-service')}"},
        "wrong issuer": {"Authorization": f"Bearer {served.jwt(issuer='https://evil.test')}"},
        "forged jwt": {"Authorization": f"Bearer {served.forged_jwt()}"},
    }


def test_unauthenticated_requests_get_401(served):
    """No, wrong, expired, misaddressed or forged credentials: 401 before listing or any tool code."""
    before = len(served.sink.query(AuditQuery(limit=10**6)))
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "lookup", "arguments": {"note_id": 1, "purpose": PURPOSE}},
    }
    listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    with httpx.Client(timeout=10, verify=PLAIN_HTTP) as http:
        for label, headers in _refused_tokens(served).items():
            for body in (INITIALIZE, listing, call):
                response = http.post(served.url, json=body, headers={**ACCEPT, **headers})
                assert response.status_code == 401, label
                assert "www-authenticate" in response.headers
                for secret in headers.values():
                    assert secret.split()[-1] not in response.text
    assert scenario.EXECUTIONS == []
    assert len(served.sink.query(AuditQuery(limit=10**6))) == before


def test_sdk_client_without_credentials_fails(served):
    """The official client with a bad token cannot even open a session."""
    with pytest.raises(Exception):  # noqa: B017 - the SDK raises its transport error
        session(served, "tbx_wrong", lambda c: c.list_tools())
    assert scenario.EXECUTIONS == []


def test_tenant_a_cannot_use_tenant_b_session(served):
    """A session opened by tenant B answers 404 to tenant A's credential: no call, no event."""
    with httpx.Client(timeout=10, verify=PLAIN_HTTP) as http:
        opened = http.post(
            served.url, json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {served.keys['bob']}"}
        )
        assert opened.status_code == 200
        session_id = opened.headers["mcp-session-id"]
        b = {**ACCEPT, "Authorization": f"Bearer {served.keys['bob']}", "mcp-session-id": session_id}
        b["mcp-protocol-version"] = "2025-06-18"
        http.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=b)
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "lookup", "arguments": {"note_id": 1, "purpose": PURPOSE}},
        }
        own = sse_json(http.post(served.url, json=call, headers=b))
        b_trace = own["result"]["_meta"]["io.toolbox/trace_id"]
        a = {**b, "Authorization": f"Bearer {served.keys['alice']}"}
        stolen = http.post(served.url, json=call, headers=a)
        assert stolen.status_code == 404
        listing = http.post(served.url, json={"jsonrpc": "2.0", "id": 8, "method": "tools/list"}, headers=a)
        assert listing.status_code == 404
    assert scenario.EXECUTIONS == ["lookup"]  # tenant B's own call only
    assert {e.tenant for e in served.sink.read_trace(b_trace)} == {"tenant-b"}


# -- transport guards ---------------------------------------------------------------------------


def test_oversized_body_is_413_before_parsing(served):
    """A body over the argument guards' limit (plus the envelope) is refused with 413; nothing runs."""
    headers = {**ACCEPT, "Authorization": f"Bearer {served.keys['alice']}"}
    body = json.dumps({**INITIALIZE, "params": {**INITIALIZE["params"], "pad": "x" * (100 * 1024)}})
    with httpx.Client(timeout=10, verify=PLAIN_HTTP) as http:
        response = http.post(served.url, content=body, headers=headers)
        assert response.status_code == 413
        # A lying Content-Length does not help: the stream is counted too.
        streamed = http.post(
            served.url,
            content=iter([body.encode()[i : i + 4096] for i in range(0, len(body), 4096)]),
            headers=headers,
        )
        assert streamed.status_code == 413
    assert scenario.EXECUTIONS == []


def test_foreign_host_and_origin_are_refused(served):
    """DNS rebinding: a Host or Origin that is not loopback is refused even with valid credentials."""
    headers = {**ACCEPT, "Authorization": f"Bearer {served.keys['alice']}"}
    with httpx.Client(timeout=10, verify=PLAIN_HTTP) as http:
        assert (
            http.post(served.url, json=INITIALIZE, headers={**headers, "Host": "evil.example"}).status_code
            == 421
        )
        origin = {**headers, "Origin": "https://evil.example"}
        assert http.post(served.url, json=INITIALIZE, headers=origin).status_code == 403
    assert scenario.EXECUTIONS == []


def test_non_loopback_needs_allowed_hosts(tmp_path):
    """Binding another address needs the host names clients use."""
    path, _, _ = _policy(tmp_path)
    policy = ToolPolicy.from_file(path)
    gateway = Gateway.load(policy=policy, providers=scenario.PROVIDERS, discover=False, env={})
    authenticator = authenticator_from_policy(policy)
    assert authenticator is not None
    with pytest.raises(ConfigurationError, match="--allowed-host"):
        McpHttpApp(gateway, authenticator, host="0.0.0.0")
    McpHttpApp(gateway, authenticator, host="0.0.0.0", allowed_hosts=["mcp.example.com"])


def test_an_allowed_host_is_accepted_with_and_without_a_port_and_as_its_own_origin(tmp_path):
    """``--allowed-host mcp.test``: ``Host: mcp.test`` (no port) and ``Origin: http://mcp.test:PORT``
    are the server's own; both were refused. Look-alike hosts and origins still are."""
    from toolbox.auth import ApiKeyFile

    keys = write_api_keys(tmp_path / "keys.toml", {"alice": {"tenant": "tenant-a"}})
    gateway = Gateway.load(providers=scenario.PROVIDERS, discover=False, env={})
    app = McpHttpApp(gateway, ApiKeyFile(tmp_path / "keys.toml"), host="0.0.0.0", allowed_hosts=["mcp.test"])
    url, server, thread = serve(app.starlette())
    port = url.rsplit(":", 1)[1].split("/")[0]
    headers = {**ACCEPT, "Authorization": f"Bearer {keys['alice']}"}
    try:
        with httpx.Client(timeout=10, verify=PLAIN_HTTP) as http:

            def status(**extra: str) -> int:
                return http.post(url, json=INITIALIZE, headers={**headers, **extra}).status_code

            assert status(Host="mcp.test") == 200
            assert status(Host=f"mcp.test:{port}") == 200
            assert status(Host=f"mcp.test:{port}", Origin=f"http://mcp.test:{port}") == 200
            assert status(Host="mcp.test", Origin="https://mcp.test") == 200
            for host in ("evil.test", "mcp.test.evil.test", "xmcp.test", f"evil.test:{port}"):
                assert status(Host=host) == 421, host
            for origin in ("http://mcp.test.evil.test", f"http://evil.test:{port}", "http://mcp.testx:1"):
                assert status(Host="mcp.test", Origin=origin) == 403, origin
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert scenario.EXECUTIONS == []


def test_allowed_hosts_with_a_port_or_ipv6_mean_exactly_that():
    from toolbox.mcp import transport_security

    pinned = transport_security("0.0.0.0", ["10.0.0.5:8443"])
    assert "10.0.0.5:8443" in pinned.allowed_hosts and "10.0.0.5:*" not in pinned.allowed_hosts
    assert (
        "http://10.0.0.5:8443" in pinned.allowed_origins and "http://10.0.0.5:*" not in pinned.allowed_origins
    )
    bare = transport_security("::", ["2001:db8::1"])
    assert "[2001:db8::1]" in bare.allowed_hosts and "[2001:db8::1]:*" in bare.allowed_hosts
    bracketed = transport_security("::", ["[2001:db8::1]:8443"])
    assert "[2001:db8::1]:8443" in bracketed.allowed_hosts


def test_verifier_never_logs_the_token(tmp_path, caplog):
    """A refused token is logged by reason code only."""
    import logging

    from toolbox.auth import ApiKeyFile
    from toolbox.mcp import IdentityVerifier

    write_api_keys(tmp_path / "keys.toml", {"alice": {"tenant": "tenant-a"}})
    verifier = IdentityVerifier(ApiKeyFile(tmp_path / "keys.toml"))
    secret = "tbx_" + "S3cr3t" * 8
    with caplog.at_level(logging.DEBUG, logger="toolbox.mcp"):
        assert anyio.run(verifier.verify_token, secret) is None
    assert caplog.records and secret not in caplog.text
    assert "INVALID_CREDENTIALS" in caplog.text


def test_mounted_in_another_starlette_app(tmp_path):
    """Routed inside an application's own Starlette app, with its lifespan entered there, it serves."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from toolbox.auth import ApiKeyFile

    keys = write_api_keys(tmp_path / "keys.toml", {"alice": {"tenant": "tenant-a"}})
    gateway = Gateway.load(providers=scenario.PROVIDERS, discover=False, env={})
    endpoint = McpHttpApp(gateway, ApiKeyFile(tmp_path / "keys.toml"))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with endpoint.lifespan():
            yield

    async def health(request):
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/health", health), Route("/mcp", endpoint=endpoint)], lifespan=lifespan)
    url, server, thread = serve(app)
    try:
        assert httpx.get(url.replace("/mcp", "/health"), timeout=10).text == "ok"
        served = Served(url, keys, "", MemorySink())
        result = session(
            served, keys["alice"], lambda c: c.call_tool("lookup", {"note_id": 4, "purpose": PURPOSE})
        )
        assert result.structured_content == {"note_id": 4, "text": "note 4"}
        assert scenario.EXECUTIONS == ["lookup"]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
