"""Approval requests and decisions are audited STRICT like calls (issue 27, findings 2 and 3).

The service over a STRICT SQLite audit store that stops answering: a new
request is refused with 503 and nothing waits for a decision; a decision that
cannot be recorded is refused with 503 and the request stays pending; a
redemption the audit refuses keeps its grant for when the store is back.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from service_support import RUNS, Deployment, deployment
from toolbox.audit import AuditEvent, AuditQuery, AuditRecord, AuditSinkError, SqliteSink

PAY = {"amount": 40, "to": "acct-7"}


class StoppingSqlite:
    """A STRICT SQLite audit store whose writes fail while ``down`` is set (reads keep working)."""

    def __init__(self, path: Path) -> None:
        self.inner = SqliteSink(path)
        self.down = False

    def append(self, events: Sequence[AuditEvent]) -> None:
        if self.down:
            raise AuditSinkError("sqlite audit store unavailable")
        self.inner.append(events)

    def read_trace(self, trace_id: str) -> list[AuditRecord]:
        return self.inner.read_trace(trace_id)

    def query(self, query: AuditQuery) -> list[AuditRecord]:
        return self.inner.query(query)

    def close(self) -> None:
        self.inner.close()


def _problem(response: httpx.Response, status: int, reason: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["reason_code"] == reason, body
    return body


def _transfer(service: Deployment, **body: Any) -> httpx.Response:
    return service.invoke("alice", "transfer", PAY, audit_as="Pay the supplier", **body)


def _decide(service: Deployment, approval_id: str) -> httpx.Response:
    return service.post(
        f"/v1/approvals/{approval_id}/decision", "bob", json={"decision": "approve", "reason": "checked"}
    )


def _state(service: Deployment, approval_id: str) -> str:
    state: str = service.get(f"/v1/approvals/{approval_id}", "bob").json()["state"]
    return state


def test_a_request_the_audit_cannot_record_is_refused_and_never_waits(tmp_path: Path) -> None:
    sink = StoppingSqlite(tmp_path / "audit.db")
    with deployment(tmp_path, sink=sink) as service:  # type: ignore[arg-type]
        sink.down = True
        body = _problem(_transfer(service), 503, "AUDIT_UNAVAILABLE")  # on main: 202, unrecorded
        assert body["tool_status"] == "DENIED" and "approval" not in body
        sink.down = False
        assert service.get("/v1/approvals?state=pending", "bob").json()["approvals"] == []
        assert RUNS["transfer"] == 0


def test_a_decision_the_audit_cannot_record_is_not_taken(tmp_path: Path) -> None:
    sink = StoppingSqlite(tmp_path / "audit.db")
    with deployment(tmp_path, sink=sink) as service:  # type: ignore[arg-type]
        asked = _transfer(service)
        assert asked.status_code == 202 and not asked.json().get("audit_failed")
        approval = asked.json()["approval"]
        sink.down = True
        _problem(_decide(service, approval["id"]), 503, "AUDIT_UNAVAILABLE")  # on main: 200 approved
        sink.down = False
        assert _state(service, approval["id"]) == "pending"
        decided = _decide(service, approval["id"])
        assert decided.status_code == 200 and decided.json()["state"] == "approved"
        events = service.events(approval["run_id"])
        assert [e.decision for e in events if e.name == "approval"] == ["APPROVED"]  # one, the one taken


def test_a_redemption_the_audit_refuses_keeps_the_grant(tmp_path: Path) -> None:
    sink = StoppingSqlite(tmp_path / "audit.db")
    with deployment(tmp_path, sink=sink) as service:  # type: ignore[arg-type]
        approval = _transfer(service).json()["approval"]
        assert _decide(service, approval["id"]).status_code == 200
        sink.down = True
        _problem(_transfer(service, approval_id=approval["id"]), 503, "AUDIT_UNAVAILABLE")
        assert RUNS["transfer"] == 0
        sink.down = False
        assert _state(service, approval["id"]) == "approved"  # on main: "used", never redeemable
        done = _transfer(service, approval_id=approval["id"])
        assert done.status_code == 200 and RUNS["transfer"] == 1
        _problem(_transfer(service, approval_id=approval["id"]), 409, "APPROVAL_USED")
        assert RUNS["transfer"] == 1
