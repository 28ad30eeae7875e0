"""The key id (``[keys.ci-bot]``) is "shown in logs and the audit trail", as docs/auth.md says.

A call's audit events carry the label of the credential it came with (``api-key:ci-bot``,
``jwt:<issuer>``; never the secret), on every path the trail records (full chain, compiled
route, ASYNC queue) and through both doors; the service logs it beside each request's trace.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from service_support import Deployment, deployment
from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
from toolbox.audit import AuditTrail, JsonlSink, MemorySink
from toolbox.auth import Identity

RAN: list[int] = []


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def double(n: int) -> int:
    """Double a number."""
    RAN.append(n)
    return 2 * n


IDENTITY = Identity("acme", "ci", frozenset({"caller"}), None, "api-key:ci-bot")


@pytest.mark.parametrize("mode", ["STRICT", "ASYNC"])
@pytest.mark.parametrize("sink_kind", ["memory", "jsonl"])
def test_every_event_of_a_call_names_the_credential(tmp_path: Path, mode: str, sink_kind: str) -> None:
    """Full chain, then the compiled route (the same name again), held or queued: all carry it."""
    sink = MemorySink() if sink_kind == "memory" else JsonlSink(tmp_path / "audit.jsonl")
    trail = AuditTrail(sink, mode=mode, fallback_path=tmp_path / "fallback.jsonl")
    gateway = Gateway.load(providers=[double], discover=False, env={}, governance=Governance(audit=trail))
    context = IDENTITY.context()
    assert context.credential == "api-key:ci-bot"
    for n in (1, 2, 3):
        assert gateway.invoke("double", {"n": n, "purpose": "Double"}, context=context).content == 2 * n
    refused = gateway.invoke("double", {"n": "x", "purpose": "Double"}, context=context)
    assert refused.reason_code == "INVALID_ARGUMENTS"
    trail.flush()
    events = sink.read_trace(context.run_id)
    assert len(events) == 4 * 3 + 3
    assert {e.credential for e in events} == {"api-key:ci-bot"}
    gateway.close()


def test_a_delegated_run_keeps_the_credential_and_a_context_without_one_records_none() -> None:
    sink = MemorySink()
    gateway = Gateway.load(
        providers=[double], discover=False, env={}, governance=Governance(audit=AuditTrail(sink))
    )
    parent = IDENTITY.context()
    child = parent.delegate(tools=["double"])
    plain = ExecutionContext(tenant="acme", principal="ops")
    for context in (child, plain):
        gateway.invoke("double", {"n": 1, "purpose": "Double"}, context=context)
    assert {e.credential for e in sink.read_trace(child.run_id)} == {"api-key:ci-bot"}
    assert {e.credential for e in sink.read_trace(plain.run_id)} == {None}
    gateway.close()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Deployment]:
    with deployment(tmp_path) as deployed:
        yield deployed


def test_the_service_records_and_logs_which_key_or_issuer_called(
    service: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="toolbox.service"):
        by_key = service.invoke("alice", "echo", {"text": "hi"}, purpose="Greet")
        by_token = service.post(
            "/v1/tools/echo/invoke",
            json={"arguments": {"text": "hi"}, "purpose": "Greet"},
            headers={"Authorization": f"Bearer {service.jwt()}"},
        )
        refused = service.get("/v1/approvals", "alice")  # alice is no approver
    assert by_key.status_code == by_token.status_code == 200
    assert refused.status_code == 403
    key_trace, token_trace = by_key.json()["trace_id"], by_token.json()["trace_id"]
    assert {e.credential for e in service.events(key_trace)} == {"api-key:alice"}
    assert {e.credential for e in service.events(token_trace)} == {"jwt:https://idp.test"}
    (denial,) = service.events(refused.json()["trace_id"])
    assert (denial.reason_code, denial.credential) == ("ROLE_REQUIRED", "api-key:alice")
    logged = caplog.text
    assert f"api-key:alice (tenant 'acme'), trace {key_trace}" in logged
    assert f"jwt:https://idp.test (tenant 'acme'), trace {token_trace}" in logged
    assert service.keys["alice"] not in logged
