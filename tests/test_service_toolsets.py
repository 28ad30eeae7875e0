"""A credential limited to a toolset, against the live service: it sees and calls that toolset only.

Attacks: every listing format, every spelling of a name outside the toolset
(wire, dotted, ``name:vN``, case, encoded), another credential's approval
redeemed by the limited one, a turn's model asking for a hidden tool, the
console, concurrent calls, and a credential naming a toolset nobody defined.
Every refusal asserts the status, the reason code, zero runs and the audit event.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from service_support import PLAIN_HTTP, RUNS, Deployment, deployment
from toolbox.errors import ConfigurationError
from toolbox.service import create_app

PROBLEM = "application/problem+json"
PAY = {"amount": 40, "to": "acct-7"}
TOOLSETS = {"echoes": ("echo",)}


@pytest.fixture(params=["sqlite", "postgres"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    with deployment(tmp_path, request.param, toolsets=TOOLSETS) as deployed:
        yield deployed


@pytest.fixture
def sqlite_service(tmp_path: Path) -> Iterator[Deployment]:
    with deployment(tmp_path, toolsets=TOOLSETS, console=True) as deployed:
        yield deployed


def problem(response: httpx.Response, status: int, reason: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["reason_code"] == reason
    return body


def audited(service: Deployment, trace_id: str, reason: str) -> list[Any]:
    events = [e for e in service.events(trace_id) if e.reason_code == reason]
    assert events, f"no {reason} event in trace {trace_id}"
    assert {(e.tenant, e.principal) for e in events} == {("acme", "alice")} or reason != "NOT_IN_TOOLSET"
    return events


@pytest.mark.parametrize("format", ["neutral", "openai", "anthropic", "mcp"])
def test_listing_holds_only_the_toolsets_operations_in_every_format(
    sqlite_service: Deployment, format: str
) -> None:
    limited = sqlite_service.get(f"/v1/tools?format={format}", "alice-echo").json()
    assert limited["names"] == ["echo"] and len(limited["tools"]) == 1
    assert "transfer" not in str(limited["tools"])
    full = sqlite_service.get(f"/v1/tools?format={format}", "alice").json()
    assert {"echo", "transfer"} <= set(full["names"])


def test_a_call_inside_the_toolset_runs(service: Deployment) -> None:
    response = service.invoke("alice-echo", "echo", {"text": "hi"}, purpose="Greet")
    assert response.status_code == 200, response.text
    assert response.json()["content"] == "hi" and RUNS["echo"] == 1


@pytest.mark.parametrize(
    "name", ["transfer", "transfer.call", "transfer:v1", "transfer.call:v1", "%74ransfer"]
)
def test_every_spelling_of_a_call_outside_the_toolset_is_refused_and_audited(
    service: Deployment, name: str
) -> None:
    response = service.invoke("alice-echo", name, PAY, audit_as="Pay the supplier")
    body = problem(response, 403, "NOT_IN_TOOLSET")
    assert body["rule"] == "service:toolset:echoes"
    assert RUNS["transfer"] == 0
    (event,) = audited(service, body["trace_id"], "NOT_IN_TOOLSET")
    # The auditor sees which operation was tried, not only the tool.
    assert (event.tool, event.operation, event.name, event.decision) == (
        "transfer",
        "call",
        "transfer.call",
        "DENY",
    )
    # No approval was raised for a call the credential may not make.
    assert service.get("/v1/approvals?state=pending", "bob").json()["approvals"] == []


def test_names_the_catalog_does_not_know_are_refused_without_running_anything(
    sqlite_service: Deployment,
) -> None:
    for name in ("Transfer", "transfer ", "transfer.call.x", "echo.call/../transfer"):
        response = sqlite_service.invoke("alice-echo", name, PAY)
        problem(response, 403, "NOT_IN_TOOLSET")
    assert RUNS["transfer"] == 0


@pytest.mark.parametrize(
    "name",
    [
        "transfer",  # registered, outside the toolset
        "nosuch",  # registered nowhere
        "transfer.nope",  # a made-up operation of a tool outside the toolset
        "echo.nope",  # a made-up operation of the tool inside it
        "nosuch.tool.op:v9",
        "Ünïcode",
        "x" * 300,
    ],
)
def test_a_limited_credential_gets_one_answer_for_every_name_outside_its_toolset(
    sqlite_service: Deployment, name: str
) -> None:
    """Registered or not, existing operation or not: 403 NOT_IN_TOOLSET, the same words, nothing
    that says what is installed (before: 404 TOOL_UNAVAILABLE, or 422 naming the tool)."""
    response = sqlite_service.invoke("alice-echo", name, PAY, audit_as="Probe")
    body = problem(response, 403, "NOT_IN_TOOLSET")
    assert body["rule"] == "service:toolset:echoes"
    assert body["detail"] == f"{name[:200]!r} is not in the toolset this credential or endpoint is limited to"
    assert set(body) == {"type", "title", "status", "detail", "reason_code", "rule", "trace_id"}
    assert RUNS["transfer"] == 0 and RUNS["echo"] == 0
    (event,) = audited(sqlite_service, body["trace_id"], "NOT_IN_TOOLSET")
    assert event.decision == "DENY" and event.status == "DENIED"


def test_an_approval_of_the_same_principal_cannot_be_redeemed_by_the_limited_credential(
    service: Deployment,
) -> None:
    raised = service.invoke("alice", "transfer", PAY, audit_as="Pay the supplier")
    assert raised.status_code == 202, raised.text
    approval = raised.json()["approval"]
    decided = service.post(
        f"/v1/approvals/{approval['id']}/decision", "bob", json={"decision": "approve", "reason": "ok"}
    )
    assert decided.status_code == 200, decided.text
    stolen = service.invoke(
        "alice-echo", "transfer", PAY, audit_as="Pay the supplier", approval_id=approval["id"]
    )
    body = problem(stolen, 403, "NOT_IN_TOOLSET")
    assert body["trace_id"] == approval["run_id"] and RUNS["transfer"] == 0
    audited(service, approval["run_id"], "NOT_IN_TOOLSET")
    # The grant was not spent: the full credential still redeems it, exactly once.
    done = service.invoke("alice", "transfer", PAY, audit_as="Pay the supplier", approval_id=approval["id"])
    assert done.status_code == 200, done.text
    assert RUNS["transfer"] == 1


def test_concurrent_calls_outside_the_toolset_all_fail_closed(sqlite_service: Deployment) -> None:
    def attempt(index: int) -> int:
        with httpx.Client(base_url=sqlite_service.url, timeout=30, verify=PLAIN_HTTP) as client:
            return client.post(
                "/v1/tools/transfer/invoke",
                headers=sqlite_service.headers("alice-echo"),
                json={"arguments": {"amount": index, "to": "x"}, "audit_as": "Pay"},
            ).status_code

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(attempt, range(24)))
    assert statuses == [403] * 24 and RUNS["transfer"] == 0


def test_a_toolset_the_policy_does_not_define_allows_nothing(service: Deployment) -> None:
    listed = problem(service.get("/v1/tools", "ghost"), 403, "UNKNOWN_TOOLSET")
    assert "toolset" in listed["detail"] and "nowhere" not in listed["detail"]
    audited(service, listed["trace_id"], "UNKNOWN_TOOLSET")
    for name in ("echo", "echo.call", "transfer"):
        called = problem(
            service.invoke("ghost", name, {"text": "x"}, purpose="Greet"), 403, "UNKNOWN_TOOLSET"
        )
        audited(service, called["trace_id"], "UNKNOWN_TOOLSET")
    assert RUNS["echo"] == 0 and RUNS["transfer"] == 0


def test_a_credential_with_a_toolset_and_no_toolsets_defined_at_all_allows_nothing(tmp_path: Path) -> None:
    with deployment(tmp_path) as plain:
        problem(plain.get("/v1/tools", "alice-echo"), 403, "UNKNOWN_TOOLSET")
        problem(plain.invoke("alice-echo", "echo", {"text": "x"}, purpose="Greet"), 403, "UNKNOWN_TOOLSET")
        assert plain.get("/v1/tools", "alice").status_code == 200
        assert RUNS["echo"] == 0


def test_a_toolset_naming_an_unregistered_tool_stops_the_service_from_starting(tmp_path: Path) -> None:
    from toolbox import ToolPolicy
    from toolbox.auth import ApiKeyFile, CredentialAuthenticator
    from toolbox.governance._mcp_table import McpConfig
    from toolbox.testing.credentials import write_api_keys

    write_api_keys(tmp_path / "keys.toml", {"a": {"tenant": "acme"}})
    policy = ToolPolicy(governance={"mcp": McpConfig(toolsets={"bad": ("no_such_tool",)})})
    with pytest.raises(ConfigurationError, match="no_such_tool"):
        create_app(
            policy=policy,
            authenticator=CredentialAuthenticator(api_keys=ApiKeyFile(tmp_path / "keys.toml")),
            discover=False,
            env={},
        )


def test_the_console_tools_page_shows_only_the_toolset(sqlite_service: Deployment) -> None:
    def tools_page(user: str) -> httpx.Response:
        with httpx.Client(base_url=sqlite_service.url, verify=PLAIN_HTTP) as client:
            login = client.get("/console/login")
            token = re.search(r'name="csrf" value="([^"]+)"', login.text)
            assert token
            signed = client.post(
                "/console/login", data={"csrf": token.group(1), "token": sqlite_service.keys[user]}
            )
            assert signed.status_code == 303, signed.text
            return client.get("/console/tools")

    full = tools_page("alice")
    assert full.status_code == 200 and "transfer" in full.text and "echo" in full.text
    limited = tools_page("alice-echo")
    assert limited.status_code == 200 and "echo" in limited.text and "transfer" not in limited.text
    refused = tools_page("ghost")
    assert refused.status_code == 403 and "UNKNOWN_TOOLSET" in refused.text and "transfer" not in refused.text


# -- turns ---------------------------------------------------------------------

SHOWN: list[set[str]] = []


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Records which tools it was shown; asks for a hidden one anyway, then answers."""
    SHOWN.append({t.name for t in info.function_tools})
    if len(SHOWN) == 1:
        return ModelResponse(
            parts=[ToolCallPart("transfer", {"amount": 9, "to": "x", "audit_as": "Pay"}, "c1")]
        )
    return ModelResponse(parts=[TextPart("done")])


def test_a_turn_shows_the_model_only_the_toolset_and_never_runs_a_hidden_tool(tmp_path: Path) -> None:
    SHOWN.clear()
    with deployment(tmp_path, toolsets=TOOLSETS, turn_model=FunctionModel(_model)) as turns:
        response = turns.post("/v1/turns", "alice-echo", json={"message": "pay x"})
        assert response.status_code == 200, response.text
        assert SHOWN[0] == {"echo"} and RUNS["transfer"] == 0
        assert turns.get("/v1/approvals?state=pending", "bob").json()["approvals"] == []
        refused = problem(turns.post("/v1/turns", "ghost", json={"message": "x"}), 403, "UNKNOWN_TOOLSET")
        audited(turns, refused["trace_id"], "UNKNOWN_TOOLSET")
        SHOWN.clear()
        assert turns.post("/v1/turns", "alice", json={"message": "pay x"}).status_code == 202
        assert {"echo", "transfer"} <= SHOWN[0]
