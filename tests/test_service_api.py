"""The governance service's REST API, against a real uvicorn on 127.0.0.1 (SQLite and PostgreSQL audit).

Every refusal asserts the HTTP status, the problem's reason code, that the
tool ran zero times (`RUNS`) and the audit event the refusal wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service_support import RUNS, Deployment, deployment, write_keys_again
from toolbox.service import REASON_HTTP, STATUS_HTTP

PROBLEM = "application/problem+json"
PAY = {"amount": 40, "to": "acct-7"}


@pytest.fixture(params=["sqlite", "postgres"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    with deployment(tmp_path, request.param) as deployed:
        yield deployed


@pytest.fixture
def sqlite_service(tmp_path: Path) -> Iterator[Deployment]:
    with deployment(tmp_path) as deployed:
        yield deployed


def problem(response, status: int, reason: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["status"] == status and body["reason_code"] == reason
    assert body["type"] == "urn:toolbox:problem:" + reason.lower()
    assert {"title", "detail", "rule", "trace_id"} <= set(body)
    return body


def refusals(service: Deployment, trace: str, reason: str) -> list:
    return [e for e in service.events(trace) if e.reason_code == reason]


# -- calls ---------------------------------------------------------------------


def test_invoke_runs_once_as_the_authenticated_caller(service: Deployment) -> None:
    """A tenant and principal in the body are ignored: the events name the key's tenant and principal."""
    response = service.post(
        "/v1/tools/echo/invoke",
        "alice",
        json={"arguments": {"text": "hi"}, "purpose": "Greet", "tenant": "evil", "principal": "mallory"},
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["content"], RUNS["echo"]) == ("SUCCESS", "hi", 1)
    events = service.events(body["trace_id"])
    assert events and {(e.tenant, e.principal) for e in events} == {("acme", "alice")}
    verify = service.get(f"/v1/audit/traces/{body['trace_id']}/verify", "bob").json()
    assert verify["ok"] is True and verify["events"] == len(events)


def test_wire_name_and_arguments_tenant_are_tool_arguments(sqlite_service: Deployment) -> None:
    """A ``tenant`` inside ``arguments`` is an argument the tool does not take: 422, zero runs."""
    response = sqlite_service.invoke("alice", "echo", {"text": "x", "tenant": "evil"}, purpose="Greet")
    body = problem(response, 422, "INVALID_ARGUMENTS")
    assert body["tool_status"] == "INVALID_ARGUMENTS" and RUNS["echo"] == 0


def test_no_credentials_bad_key_and_expired_key_are_refused_and_audited(service: Deployment) -> None:
    for headers, reason in (
        ({}, "MISSING_CREDENTIALS"),
        ({"Authorization": "Bearer"}, "MISSING_CREDENTIALS"),  # the scheme with an empty token
        ({"Authorization": "Basic YWxpY2U6eA=="}, "INVALID_CREDENTIALS"),
        ({"Authorization": "Bearer tbx_not-a-key"}, "INVALID_CREDENTIALS"),
        ({"Authorization": f"Bearer {service.keys['old']}"}, "EXPIRED"),
    ):
        response = service.post(
            "/v1/tools/echo/invoke", json={"arguments": {"text": "x"}, "purpose": "Greet"}, headers=headers
        )
        body = problem(response, 401, reason)
        assert body["rule"] == "auth"  # the rule every refused credential names (docs/auth.md)
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert refusals(service, "unauthenticated", reason), reason
        assert body["trace_id"] in {e.correlation_id for e in service.events("unauthenticated")}
    assert RUNS["echo"] == 0
    # No credential is ever stored: the key never appears in an event.
    for event in service.events("unauthenticated"):
        assert service.keys["old"] not in event.model_dump_json()


def test_jwt_accepted_expired_wrong_audience_and_issuer_refused(sqlite_service: Deployment) -> None:
    service = sqlite_service
    good = service.jwt()
    ok = service.post(
        "/v1/tools/echo/invoke",
        json={"arguments": {"text": "j"}, "purpose": "Greet"},
        headers={"Authorization": f"Bearer {good}"},
    )
    assert ok.status_code == 200 and RUNS["echo"] == 1
    for token, reason in (
        (service.jwt(expires_in=-60), "EXPIRED"),
        (service.jwt(audience="someone-else"), "WRONG_AUDIENCE"),
        (service.jwt(issuer="https://evil.test"), "WRONG_ISSUER"),
    ):
        response = service.post(
            "/v1/tools/echo/invoke",
            json={"arguments": {"text": "j"}, "purpose": "Greet"},
            headers={"Authorization": f"Bearer {token}"},
        )
        problem(response, 401, reason)
        assert refusals(service, "unauthenticated", reason)
        assert token not in response.text
    assert RUNS["echo"] == 1


def test_key_rotation_without_restart(sqlite_service: Deployment) -> None:
    """Rewriting the key file revokes the old keys and admits the new ones at once."""
    service = sqlite_service
    old = service.keys["alice"]
    new = write_keys_again(service)
    assert new["alice"] != old
    refused = service.post(
        "/v1/tools/echo/invoke",
        json={"arguments": {"text": "r"}, "purpose": "Greet"},
        headers={"Authorization": f"Bearer {old}"},
    )
    problem(refused, 401, "INVALID_CREDENTIALS")
    assert service.invoke("alice", "echo", {"text": "r"}, purpose="Greet").status_code == 200
    assert RUNS["echo"] == 1


def test_roles_are_required_and_refusals_audited(sqlite_service: Deployment) -> None:
    service = sqlite_service
    for method, path, user, role in (
        ("get", "/v1/audit/events", "alice", "auditor"),
        ("get", "/v1/approvals", "alice", "approver"),
        ("get", "/v1/kill-switch", "bob", "admin"),
        ("post", "/v1/tools/echo/invoke", "dave", "caller"),
        ("get", "/metrics", "alice", "auditor"),
    ):
        kwargs = {"json": {"arguments": {"text": "x"}, "purpose": "Greet"}} if method == "post" else {}
        response = getattr(service, method)(path, user, **kwargs)
        body = problem(response, 403, "ROLE_REQUIRED")
        assert body["rule"] == f"service:role:{role}"
        events = refusals(service, body["trace_id"], "ROLE_REQUIRED")
        assert events and events[0].principal == user and events[0].tenant == "acme"
    assert RUNS["echo"] == 0


def test_status_mapping_over_http(sqlite_service: Deployment) -> None:
    service = sqlite_service
    bad = problem(service.invoke("alice", "echo", {"text": 5}, purpose="Greet"), 422, "INVALID_ARGUMENTS")
    assert bad["field_path"] == "text"
    unknown = problem(service.invoke("alice", "nope.call", {}, purpose="Greet"), 404, "TOOL_UNAVAILABLE")
    assert unknown["tool_status"] == "DENIED"
    failed = problem(service.invoke("alice", "broken", {"text": "x"}, purpose="Try"), 502, "ERROR")
    assert "secret-internal-detail" not in str(failed) and failed["uncertain_effect"] is False
    business = problem(
        service.invoke("alice", "refund", {"amount": 3}, audit_as="Refund"), 409, "BUSINESS_FAILED"
    )
    assert business["error_code"] == "ALREADY_REFUNDED"
    limited = service.invoke("alice", "limited", {"text": "x"}, purpose="Try")
    problem(limited, 429, "RATE_LIMITED")
    assert limited.headers["retry-after"] == "1"
    assert (RUNS["broken"], RUNS["refund"], RUNS["limited"]) == (1, 1, 0)
    uncertain = service.invoke("alice", "slow_write", {"amount": 1}, audit_as="Write slowly")
    body = problem(uncertain, 502, uncertain.json()["reason_code"])
    assert body["tool_status"] == "UNCERTAIN_EFFECT" and body["uncertain_effect"] is True
    assert RUNS["slow_write"] == 1


def test_audit_unavailable_in_strict_is_503_with_zero_runs(tmp_path: Path) -> None:
    from audit_faults import FlakySink

    sink = FlakySink()
    with deployment(tmp_path, sink=sink) as service:
        sink.failing = True
        body = problem(
            service.invoke("alice", "echo", {"text": "x"}, purpose="Greet"), 503, "AUDIT_UNAVAILABLE"
        )
        assert body["tool_status"] == "DENIED"
        assert RUNS["echo"] == 0


def test_mapping_table_covers_every_status() -> None:
    from toolbox import Status

    assert set(STATUS_HTTP) == set(Status)
    assert REASON_HTTP["AUDIT_UNAVAILABLE"] == 503 and STATUS_HTTP[Status.APPROVAL_REQUIRED] == 202


def test_tools_listing_in_each_format(sqlite_service: Deployment) -> None:
    service = sqlite_service
    for fmt, key in (("openai", "function"), ("anthropic", "input_schema"), ("mcp", "inputSchema")):
        body = service.get(f"/v1/tools?format={fmt}", "alice").json()
        assert "echo" in body["names"] and all(key in str(d) for d in body["tools"])
    problem(service.get("/v1/tools?format=xml", "alice"), 422, "INVALID_REQUEST")


# -- approvals -------------------------------------------------------------------


def raise_approval(service: Deployment, user: str = "alice", arguments: dict | None = None) -> dict:
    response = service.invoke(user, "transfer", arguments or PAY, audit_as="Pay the supplier")
    assert response.status_code == 202, response.text
    approval = response.json()["approval"]
    assert response.headers["location"] == approval["url"] == f"/v1/approvals/{approval['id']}"
    return approval


def decide(service: Deployment, user: str, approval_id: str, decision: str = "approve"):
    return service.post(
        f"/v1/approvals/{approval_id}/decision",
        user,
        json={"decision": decision, "reason": "checked the invoice"},
    )


def redeem(service: Deployment, approval_id: str, user: str = "alice", arguments: dict | None = None):
    return service.invoke(
        user, "transfer", arguments or PAY, audit_as="Pay the supplier", approval_id=approval_id
    )


def test_approval_flow_runs_exactly_once_with_the_approved_arguments(service: Deployment) -> None:
    approval = raise_approval(service)
    assert approval["state"] == "pending" and approval["requester"] == "alice"
    assert approval["arguments"] == PAY and approval["intent_text"] == "Pay the supplier"
    assert RUNS["transfer"] == 0
    listed = service.get("/v1/approvals?state=pending", "bob").json()["approvals"]
    assert [a["id"] for a in listed] == [approval["id"]]
    decided = decide(service, "bob", approval["id"])
    assert decided.status_code == 200 and decided.json()["decided_by"] == "bob"
    done = redeem(service, approval["id"])
    assert done.status_code == 200 and done.json()["content"] == "moved 40 to acct-7"
    assert RUNS["transfer"] == 1
    # One trace tells the story: the request, the human decision, the execution.
    trace = service.get(f"/v1/audit/traces/{approval['run_id']}", "bob").json()["events"]
    assert {"APPROVAL_REQUIRED", "APPROVED", "SUCCESS"} <= {e["decision"] or e["status"] for e in trace} | {
        e["status"] for e in trace
    }
    assert service.get(f"/v1/audit/traces/{approval['run_id']}/verify", "bob").json()["ok"] is True
    replay = redeem(service, approval["id"])
    problem(replay, 409, "APPROVAL_USED")
    assert RUNS["transfer"] == 1
    assert refusals(service, approval["run_id"], "APPROVAL_USED")


def test_requester_cannot_approve_own_call(service: Deployment) -> None:
    approval = raise_approval(service, user="bob")  # bob is a caller and an approver
    body = problem(decide(service, "bob", approval["id"]), 403, "SELF_APPROVAL")
    assert refusals(service, body["trace_id"], "SELF_APPROVAL")
    problem(redeem(service, approval["id"], user="bob"), 409, "APPROVAL_PENDING")
    assert RUNS["transfer"] == 0


def test_approving_twice_is_409(sqlite_service: Deployment) -> None:
    service = sqlite_service
    approval = raise_approval(service)
    assert decide(service, "bob", approval["id"]).status_code == 200
    body = problem(decide(service, "dave", approval["id"], "deny"), 409, "ALREADY_DECIDED")
    assert refusals(service, body["trace_id"], "ALREADY_DECIDED")
    assert RUNS["transfer"] == 0


def test_denied_approval_cannot_be_redeemed(sqlite_service: Deployment) -> None:
    service = sqlite_service
    approval = raise_approval(service)
    assert decide(service, "bob", approval["id"], "deny").json()["state"] == "denied"
    problem(redeem(service, approval["id"]), 409, "APPROVAL_DENIED")
    assert RUNS["transfer"] == 0


def test_replay_with_edited_arguments_runs_nothing(service: Deployment) -> None:
    approval = raise_approval(service)
    decide(service, "bob", approval["id"])
    edited = redeem(service, approval["id"], arguments={"amount": 4000, "to": "acct-7"})
    body = problem(edited, 403, "APPROVAL_INVALID")
    assert body["tool_status"] == "DENIED"
    assert RUNS["transfer"] == 0
    assert refusals(service, approval["run_id"], "APPROVAL_INVALID")
    # Edited arguments consume nothing: the approved ones still run, exactly once.
    assert redeem(service, approval["id"]).status_code == 200
    problem(redeem(service, approval["id"]), 409, "APPROVAL_USED")
    assert RUNS["transfer"] == 1


def test_only_the_requester_redeems(sqlite_service: Deployment) -> None:
    service = sqlite_service
    approval = raise_approval(service)
    decide(service, "bob", approval["id"])
    body = problem(redeem(service, approval["id"], user="viewer"), 403, "NOT_REQUESTER")
    assert refusals(service, body["trace_id"], "NOT_REQUESTER")
    assert RUNS["transfer"] == 0


def test_approving_after_expiry_is_409(tmp_path: Path) -> None:
    from toolbox.state import MemoryApprovalStore

    now = [1_000.0]
    store = MemoryApprovalStore(clock=lambda: now[0])
    with deployment(tmp_path, approvals=store) as service:
        approval = raise_approval(service)
        now[0] = approval["expires_at"] + 1
        body = problem(decide(service, "bob", approval["id"]), 409, "EXPIRED")
        assert refusals(service, body["trace_id"], "EXPIRED")
        problem(redeem(service, approval["id"]), 409, "APPROVAL_EXPIRED")
        assert RUNS["transfer"] == 0


def test_tenant_b_cannot_see_or_decide_tenant_a(service: Deployment) -> None:
    """mallory has every role in tenant evil: acme's traces and approvals do not exist for her."""
    done = service.invoke("alice", "echo", {"text": "secret plan"}, purpose="Greet").json()
    approval = raise_approval(service)
    trace = done["trace_id"]
    problem(service.get(f"/v1/audit/traces/{trace}", "mallory"), 404, "UNKNOWN_TRACE")
    problem(service.get(f"/v1/audit/traces/{trace}/verify", "mallory"), 404, "UNKNOWN_TRACE")
    # Only her own refusals, of her tenant: nothing of acme's.
    assert {e["tenant"] for e in service.get("/v1/audit/events", "mallory").json()["events"]} == {"evil"}
    assert service.get("/v1/approvals?state=any", "mallory").json()["approvals"] == []
    problem(service.get(f"/v1/approvals/{approval['id']}", "mallory"), 404, "UNKNOWN_REQUEST")
    body = problem(decide(service, "mallory", approval["id"]), 404, "UNKNOWN_REQUEST")
    problem(redeem(service, approval["id"], user="mallory"), 404, "UNKNOWN_REQUEST")
    assert refusals(service, body["trace_id"], "UNKNOWN_REQUEST")
    assert RUNS["transfer"] == 0 and RUNS["echo"] == 1
    assert service.get(f"/v1/approvals/{approval['id']}", "bob").json()["state"] == "pending"


# -- audit read-back -----------------------------------------------------------------


def test_events_filter_and_cursor_paging(service: Deployment) -> None:
    for index in range(5):
        assert service.invoke("alice", "echo", {"text": str(index)}, purpose="Greet").status_code == 200
    seen: list[str] = []
    cursor = None
    while True:
        query = "/v1/audit/events?tool=echo&principal=alice&limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = service.get(query, "bob").json()
        seen += [e["event_id"] for e in page["events"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 5 * 4  # four events per call, none twice, none lost
    problem(service.get("/v1/audit/events?cursor=bm9wZQ", "bob"), 422, "INVALID_REQUEST")
    problem(service.get("/v1/audit/events?since=yesterday", "bob"), 422, "INVALID_REQUEST")
    success = service.get("/v1/audit/events?status=SUCCESS", "bob").json()["events"]
    assert success and {e["status"] for e in success} == {"SUCCESS"}


# -- kill switch ---------------------------------------------------------------------


def test_kill_switch_per_tool_and_global_audited(service: Deployment) -> None:
    stop = service.put(
        "/v1/kill-switch", "carol", json={"engaged": True, "tool": "echo", "reason": "incident 7"}
    )
    assert stop.status_code == 200 and stop.json()["tools"]["echo"]["changed_by"] == "carol"
    problem(service.invoke("alice", "echo", {"text": "x"}, purpose="Greet"), 403, "KILL_SWITCH")
    assert (
        service.invoke("alice", "refund", {"amount": 1}, audit_as="Refund").status_code == 409
    )  # others run
    service.put("/v1/kill-switch", "carol", json={"engaged": False, "tool": "echo", "reason": "fixed"})
    assert service.invoke("alice", "echo", {"text": "x"}, purpose="Greet").status_code == 200
    service.put("/v1/kill-switch", "carol", json={"engaged": True, "tool": None, "reason": "all stop"})
    problem(service.invoke("alice", "refund", {"amount": 1}, audit_as="Refund"), 403, "KILL_SWITCH")
    assert service.get("/v1/kill-switch", "carol").json()["global"]["engaged"] is True
    assert (RUNS["echo"], RUNS["refund"]) == (1, 1)
    changes = [
        e
        for e in service.get("/v1/audit/events?principal=carol", "carol").json()["events"]
        if e["reason_code"] == "KILL_SWITCH_CHANGED"
    ]
    assert [(c["decision"], c["tool"], c["intent_text"]) for c in changes] == [
        ("ENGAGED", "echo", "incident 7"),
        ("RELEASED", "echo", "fixed"),
        ("ENGAGED", "", "all stop"),
    ]
    problem(
        service.put("/v1/kill-switch", "carol", json={"engaged": True, "tool": "ghost", "reason": "x"}),
        404,
        "TOOL_UNAVAILABLE",
    )
    problem(
        service.put("/v1/kill-switch", "carol", json={"engaged": "yes", "reason": "x"}),
        422,
        "INVALID_REQUEST",
    )
    problem(service.put("/v1/kill-switch", "carol", json={"engaged": True}), 422, "INVALID_REQUEST")


# -- health ---------------------------------------------------------------------------


def test_health_ready_and_metrics(sqlite_service: Deployment) -> None:
    service = sqlite_service
    assert service.get("/healthz").json() == {"status": "ok"}
    ready = service.get("/readyz")
    assert ready.json()["checks"] == {"audit": "ok", "approvals": "ok", "kill_switch": "ok"}
    assert ready.status_code == 200
    service.invoke("alice", "echo", {"text": "x"}, purpose="Greet")
    service.invoke("alice", "nope.call", {}, purpose="Greet")
    problem(service.get("/metrics"), 401, "MISSING_CREDENTIALS")
    text = service.get("/metrics", "bob").text
    assert 'toolbox_calls_total{status="SUCCESS",tool="echo"} 1.0' in text
    assert 'tool="unknown"' in text and "nope" not in text
    assert "toolbox_call_seconds_bucket" in text and "toolbox_audit_queue_depth" in text
    # The OpenAPI document maps every route: like every route but the probes, it needs a credential.
    problem(service.get("/openapi.json"), 401, "MISSING_CREDENTIALS")
    assert refusals(service, "unauthenticated", "MISSING_CREDENTIALS")
    document = service.get("/openapi.json", "alice").json()
    assert document["info"]["title"] == "toolbox governance service"
    assert "/v1/tools/{name}/invoke" in document["paths"] and "/openapi.json" not in document["paths"]


def test_readyz_reports_an_unavailable_audit_store(tmp_path: Path) -> None:
    from audit_faults import FlakySink

    class Unreadable(FlakySink):
        def query(self, query):
            raise OSError("store down")

    with deployment(tmp_path, sink=Unreadable()) as service:
        ready = service.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["audit"] == "unavailable"
        assert "store down" not in ready.text


def test_docs_status_table_matches_the_mapping() -> None:
    """docs/service.md's status table says what STATUS_HTTP and REASON_HTTP do."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "service.md").read_text(encoding="utf-8")
    section = text.split("### Status to HTTP", 1)[1].split("###", 1)[0]
    documented: dict[str, int] = {}
    for codes, status in re.findall(r"^\| (`[^|]+`)[^|]* \| (\d{3}) \|", section, re.M):
        for code in re.findall(r"`([A-Z_]+)`", codes):
            documented[code] = int(status)
    mapping = {s.value: code for s, code in STATUS_HTTP.items()} | REASON_HTTP
    assert documented == mapping


def test_mcp_endpoint_is_mounted_only_when_the_mcp_room_exists(sqlite_service: Deployment) -> None:
    """/mcp answers (401 without credentials) when toolbox.mcp provides McpHttpApp; else 404."""
    import importlib.util

    try:
        present = importlib.util.find_spec("toolbox.mcp") is not None
        if present:
            import toolbox.mcp

            present = hasattr(toolbox.mcp, "McpHttpApp")
    except ImportError:
        present = False
    response = sqlite_service.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize"})
    assert response.status_code == (401 if present else 404)
    if present:  # the same credentials open an MCP session
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        accept = {"Accept": "application/json, text/event-stream"}
        opened = sqlite_service.post("/mcp", "alice", json=initialize, headers=accept)
        assert opened.status_code == 200 and '"serverInfo"' in opened.text
    assert RUNS == {}


def test_an_unavailable_state_store_is_503_and_runs_nothing(tmp_path: Path) -> None:
    from toolbox.pipeline._state_ports import StateUnavailableError
    from toolbox.state import GovernanceState, MemoryApprovalStore, MemoryKillSwitchStore

    down = {"approvals": False, "kill": False}

    class Approvals:
        def __init__(self) -> None:
            self.inner = MemoryApprovalStore()

        def __getattr__(self, name: str):
            if down["approvals"]:
                raise StateUnavailableError("approval store down")
            return getattr(self.inner, name)

    class Kill(MemoryKillSwitchStore):
        def engaged(self):
            if down["kill"]:
                raise StateUnavailableError("kill store down")
            return super().engaged()

    state = GovernanceState(kill=Kill(), approvals=Approvals(), kill_switch_refresh=0.0)
    with deployment(tmp_path, state=state) as service:
        approval = raise_approval(service)
        down["approvals"] = True
        problem(decide(service, "bob", approval["id"]), 503, "STATE_UNAVAILABLE")
        problem(service.get("/v1/approvals", "bob"), 503, "STATE_UNAVAILABLE")
        problem(redeem(service, approval["id"]), 503, "STATE_UNAVAILABLE")
        ready = service.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["approvals"] == "unavailable"
        down["approvals"], down["kill"] = False, True
        problem(service.get("/v1/kill-switch", "carol"), 503, "STATE_UNAVAILABLE")
        body = problem(
            service.invoke("alice", "echo", {"text": "x"}, purpose="Greet"), 503, "STATE_UNAVAILABLE"
        )
        assert body["tool_status"] == "DENIED"
        assert RUNS["echo"] == 0 and RUNS["transfer"] == 0
