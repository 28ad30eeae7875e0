"""Stores for the state tests: each backend in its own namespace or tables, on the real servers.

Redis and PostgreSQL are required, not optional (TOOLBOX_TEST_REDIS_URL and
TOOLBOX_TEST_POSTGRES_URL override the local defaults).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
from toolbox.audit import AuditMode, AuditTrail, MemorySink
from toolbox.pipeline._grants import ApprovalRequest, PendingApproval
from toolbox.state import GovernanceState
from toolbox.state._redis_backend import RedisState, connect
from toolbox.state._sql_backend import SqlState


def pending(
    *,
    request_id: str | None = None,
    tenant: str = "acme",
    principal: str = "alice",
    fingerprint: str | None = None,
    ttl: float = 60.0,
    created_at: float | None = None,
) -> PendingApproval:
    """A fresh pending request of ``principal`` in ``tenant`` (its own fingerprint unless given)."""
    now = time.time() if created_at is None else created_at
    request = ApprovalRequest(
        id=request_id or uuid.uuid4().hex,
        tool="payments",
        operation="refund",
        arguments={"amount": 10, "card": "***"},
        fingerprint=fingerprint or uuid.uuid4().hex * 2,  # a fresh call's: no two deduplicated
        rules=("descriptor",),
        tenant=tenant,
        principal=principal,
        created_at=now,
    )
    return PendingApproval(
        request=request,
        intent_kind="reason",
        intent_text="refund the duplicate charge",
        run_id="run-1",
        created_at=now,
        expires_at=now + ttl,
    )


REDIS_URL = os.environ.get("TOOLBOX_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get(
    "TOOLBOX_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def unique(tag: str = "t") -> str:
    """A fresh name for a Redis namespace or a table prefix (others share the servers)."""
    return f"fleet_{tag}_{uuid.uuid4().hex[:10]}"


def redis_state(namespace: str, url: str = REDIS_URL, **options: Any) -> RedisState:
    """A Redis state store in its own namespace."""
    return RedisState(connect(url), namespace=namespace, **options)


def wipe_redis(state: RedisState) -> None:
    """Delete every key of ``state``'s namespace."""
    client = state._client
    keys = list(client.scan_iter(match=state.prefix.replace("{", "\\{").replace("}", "\\}") + "*"))
    if keys:
        client.delete(*keys)
    state.close()


def sql_url(kind: str, directory: Path) -> str:
    """A SQLite file in ``directory`` or the shared PostgreSQL."""
    return f"sqlite:///{directory / 'state.db'}" if kind == "sqlite" else POSTGRES_URL


@contextmanager
def state_store(kind: str, directory: Path, **options: Any) -> Iterator[Any]:
    """A fresh store of backend ``kind`` (memory, redis, sqlite, postgres), removed afterwards."""
    if kind == "memory":
        yield None
        return
    if kind == "redis":
        store = redis_state(unique(), **options)
        try:
            yield store
        finally:
            wipe_redis(store)
        return
    sql = SqlState(sql_url(kind, directory), prefix=unique() + "_", **options)
    sql.create()
    try:
        yield sql
    finally:
        sql.drop()
        sql.close()


def dead_redis() -> RedisState:
    """A Redis store whose server is not there (a closed loopback port): every call fails."""
    return RedisState(connect("redis://127.0.0.1:1/0", timeout=0.2), namespace=unique())


@dataclass
class Counter:
    """How many times the tool's code ran."""

    runs: int = 0


def governed_gateway(state: GovernanceState | None, counter: Counter, **governance: Any) -> Gateway:
    """A gateway with one MEMORY_ONLY tool ``add`` that counts its runs, governed on ``state``."""

    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def add(a: int, b: int = 0) -> int:
        """Add two integers."""
        counter.runs += 1
        return a + b

    governance.setdefault("audit", AuditTrail(MemorySink(), mode=AuditMode.STRICT, fallback_path=None))
    return Gateway.load(providers=[add], discover=False, governance=Governance(state=state, **governance))


CALL = {"a": 1, "b": 2, "purpose": "Sum the order"}


def context(tenant: str = "acme", principal: str = "alice", run_id: str | None = None) -> ExecutionContext:
    """A trusted context."""
    if run_id is None:
        return ExecutionContext(tenant=tenant, principal=principal)
    return ExecutionContext(tenant=tenant, principal=principal, run_id=run_id)


def audit_events(gateway: Gateway, reason_code: str) -> list[Any]:
    """The gateway's audit events with ``reason_code``."""
    trail = gateway.audit
    assert trail is not None
    sink: Any = trail.sink
    return [r for r in sink.records if r.reason_code == reason_code]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis(port: int, directory: Path) -> subprocess.Popen[bytes]:
    server = shutil.which("redis-server")
    assert server is not None, "redis-server is required for the outage test"
    process = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = connect(f"redis://127.0.0.1:{port}/0", timeout=0.5)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if client.ping():
                client.close()
                return process
        except Exception:
            time.sleep(0.05)
    process.kill()
    raise AssertionError("redis-server did not start")
