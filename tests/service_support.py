"""A real uvicorn server on 127.0.0.1 running the governance service, and the tools it serves.

Every tool counts its executions in `RUNS`, so a refusal test can assert that
the tool's code ran zero times. Credentials come from `toolbox.testing`'s key
file and JWT helpers, through the real `toolbox.auth` authenticator.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from sqlalchemy import text

from audit_sql_support import POSTGRES_URL, postgres_admin
from toolbox import Effect, Governance, RiskClass, ToolPolicy, tool
from toolbox.audit import AuditSink, AuditTrail, PostgresSink, SqliteSink
from toolbox.auth import ApiKeyFile, CredentialAuthenticator
from toolbox.auth._config import JwtSettings
from toolbox.auth._jwt import JwtAuthenticator
from toolbox.governance import BusinessFailure
from toolbox.governance._mcp_table import McpConfig
from toolbox.service import ServiceSettings, create_app
from toolbox.testing.credentials import jwt_keypair, mint_jwt, write_api_keys

RUNS: collections.Counter[str] = collections.Counter()


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def echo(text: str) -> str:
    """Return the text."""
    RUNS["echo"] += 1
    return text


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, requires_approval=True)
def transfer(amount: int, to: str) -> str:
    """Move money (needs a human approval)."""
    RUNS["transfer"] += 1
    return f"moved {amount} to {to}"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def broken(text: str) -> str:
    """Always fails."""
    RUNS["broken"] += 1
    raise RuntimeError("secret-internal-detail")


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def limited(text: str) -> str:
    """Refused by `RateLimit` before it runs."""
    RUNS["limited"] += 1
    return text


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE)
def refund(amount: int) -> dict[str, Any]:
    """Runs, but the business outcome is a failure (mapped by `refund_mapper`)."""
    RUNS["refund"] += 1
    return {"ok": False, "why": "order already refunded"}


def refund_mapper(content: Any) -> BusinessFailure | None:
    return None if content.get("ok") else BusinessFailure("ALREADY_REFUNDED", "order already refunded")


class RateLimit:
    """An interceptor that refuses every call of ``limited``: DENIED/RATE_LIMITED."""

    name = "test_rate_limit"
    per_attempt = False

    def __call__(self, invocation: Any) -> Any:
        if invocation.tool != "limited":
            return None
        return invocation.denied("RATE_LIMITED", "test:rate_limit", "too many calls")


@tool(risk=RiskClass.EXTERNAL_RESOURCE, effect=Effect.UNSAFE)
async def slow_write(amount: int) -> str:
    """A write that outlives its timeout: the effect is uncertain."""
    RUNS["slow_write"] += 1
    await asyncio.sleep(5)
    return "written"


TOOLS = (echo, transfer, broken, limited, refund, slow_write)
ISSUER, AUDIENCE = "https://idp.test", "toolbox"

USERS: dict[str, dict[str, Any]] = {
    "alice": {"tenant": "acme", "roles": ["caller"]},
    "bob": {"tenant": "acme", "roles": ["approver", "auditor", "caller"]},
    "carol": {"tenant": "acme", "roles": ["admin", "auditor"]},
    "mallory": {"tenant": "evil", "roles": ["caller", "approver", "auditor", "admin"]},
    "dave": {"tenant": "acme", "roles": ["approver"]},
    "viewer": {"tenant": "acme", "roles": ["caller"]},
    "old": {"tenant": "acme", "roles": ["caller"], "expires": "2020-01-01T00:00:00Z"},
    # Alice's second key, limited to the ``echoes`` toolset (defined with ``deployment(toolsets=...)``).
    "alice-echo": {"tenant": "acme", "principal": "alice", "roles": ["caller"], "toolset": "echoes"},
    # A key limited to a toolset no policy defines: it may use nothing.
    "ghost": {"tenant": "acme", "roles": ["caller", "approver"], "toolset": "nowhere"},
}


class LiveServer:
    """uvicorn serving ``app`` on 127.0.0.1 at a free port, in a thread."""

    def __init__(self, app: Any) -> None:
        # A keep-alive longer than any pause of this busy machine: a connection closed by the
        # server while the client sends its next request is a client-side ReadError, not a finding.
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="on",
            timeout_keep_alive=60,
            ws="none",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(20)


#: The test servers speak plain HTTP on loopback: a client context with no CAs (it would refuse
#: any certificate) instead of httpx's default, whose CA bundle costs ~25 ms of CPU per client.
PLAIN_HTTP = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class Deployment:
    """One running service: its URL, its users' keys, its audit sink, and HTTP helpers."""

    def __init__(
        self, server: LiveServer, keys: dict[str, str], sink: AuditSink, key_file: Path, jwt_key: str
    ) -> None:
        self.jwt_key = jwt_key
        self.server = server
        self.url = server.url
        self.keys = keys
        self.sink = sink
        self.key_file = key_file
        self.client = httpx.Client(base_url=self.url, timeout=30, verify=PLAIN_HTTP)

    def headers(self, user: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[user]}"} if user else {}

    def jwt(self, **fields: Any) -> str:
        """A token signed by the trusted issuer (override any claim or ``expires_in``)."""
        fields.setdefault("issuer", ISSUER)
        fields.setdefault("audience", AUDIENCE)
        fields.setdefault("subject", "erin")
        fields.setdefault("tenant", "acme")
        fields.setdefault("roles", ["caller"])
        return mint_jwt(self.jwt_key, **fields)

    def get(self, path: str, user: str | None = None, **kwargs: Any) -> httpx.Response:
        return self.client.get(path, headers={**self.headers(user), **kwargs.pop("headers", {})}, **kwargs)

    def post(self, path: str, user: str | None = None, **kwargs: Any) -> httpx.Response:
        return self.client.post(path, headers={**self.headers(user), **kwargs.pop("headers", {})}, **kwargs)

    def put(self, path: str, user: str | None = None, **kwargs: Any) -> httpx.Response:
        return self.client.put(path, headers={**self.headers(user), **kwargs.pop("headers", {})}, **kwargs)

    def invoke(self, user: str, name: str, arguments: dict[str, Any], **body: Any) -> httpx.Response:
        return self.post(f"/v1/tools/{name}/invoke", user, json={"arguments": arguments, **body})

    def events(self, trace_id: str) -> list[Any]:
        return self.sink.read_trace(trace_id)

    def close(self) -> None:
        self.client.close()
        self.server.stop()


def make_sink(kind: str, tmp_path: Path) -> tuple[AuditSink, Any]:
    """A fresh SQLite file or PostgreSQL schema sink, and its clean-up."""
    if kind == "sqlite":
        sink: AuditSink = SqliteSink(tmp_path / "audit.db")
        return sink, lambda: None
    admin = postgres_admin()
    schema = f"toolbox_service_{uuid.uuid4().hex[:12]}"
    sink = PostgresSink(POSTGRES_URL, schema=schema)

    def drop() -> None:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()

    return sink, drop


@contextmanager
def deployment(
    tmp_path: Path,
    kind: str = "sqlite",
    *,
    settings: ServiceSettings | None = None,
    console: bool = False,
    tools: tuple[object, ...] = TOOLS,
    mode: str = "STRICT",
    sink: AuditSink | None = None,
    state: Any = None,
    toolsets: dict[str, tuple[str, ...]] | None = None,
    **app_options: Any,
) -> Iterator[Deployment]:
    """The service over ``tools`` with a ``kind`` audit store (or ``sink``), on a live loopback server."""
    RUNS.clear()
    key_file = tmp_path / "keys.toml"
    keys = write_api_keys(key_file, USERS)
    private_pem, public_pem = jwt_keypair()
    (tmp_path / "jwt.pem").write_text(public_pem, encoding="utf-8")
    jwt = JwtAuthenticator(
        JwtSettings(issuer=ISSUER, audience=AUDIENCE, key_file=tmp_path / "jwt.pem", algorithms=("ES256",))
    )
    authenticator = CredentialAuthenticator(api_keys=ApiKeyFile(key_file), jwt=jwt)
    cleanup: Any = lambda: None  # noqa: E731
    if sink is None:
        sink, cleanup = make_sink(kind, tmp_path)
    trail = AuditTrail(sink, mode=mode, fallback_path=tmp_path / "fallback.jsonl")
    policy = ToolPolicy.standard().allow("slow_write")
    if toolsets is not None:
        # As the policy file's ``[mcp.toolsets]`` would define them.
        policy = ToolPolicy(
            default_risks=[RiskClass.MEMORY_ONLY],
            allow=["slow_write"],
            governance={"mcp": McpConfig(toolsets=toolsets)},
        )
    app = create_app(
        policy=policy,
        authenticator=authenticator,
        providers=tools,
        discover=False,
        env={},
        governance=Governance(
            audit=trail,
            interceptors=[RateLimit()],
            mappers={"refund": refund_mapper},
            timeouts={"slow_write": 0.2},
            state=state,
        ),
        settings=settings,
        console=console,
        **app_options,
    )
    server = LiveServer(app)
    deployed = Deployment(server, keys, sink, key_file, private_pem)
    try:
        yield deployed
    finally:
        deployed.close()
        cleanup()


__all__ = ["RUNS", "USERS", "Deployment", "LiveServer", "deployment", "write_keys_again"]


def write_keys_again(deployed: Deployment) -> dict[str, str]:
    """Rotate every key: a new key file (renamed over the old one), the deployment's keys updated."""
    # Renamed over the old file, the new one has another inode: a change however coarse the clock.
    keys = write_api_keys(deployed.key_file, USERS)
    deployed.keys = keys
    return keys
