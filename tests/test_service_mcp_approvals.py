"""An approval raised over ``/mcp`` is decided in the console and redeemed over REST, end to end.

The MCP client (the official SDK's, over the mounted streamable-HTTP endpoint)
and the REST API share one gateway and one approval store: the request an MCP
call raises is the one the console lists. Also: both doors show a credential
limited to a toolset the same tools.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from service_support import PLAIN_HTTP, RUNS, Deployment, deployment
from test_mcp_serve import outcome

PAY = {"amount": 40, "to": "acct-7"}
INTENT = "Pay the supplier"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Deployment]:
    with deployment(tmp_path, console=True, toolsets={"echoes": ("echo",)}) as deployed:
        yield deployed


def over_mcp(service: Deployment, user: str, steps: Any) -> Any:
    """Run ``steps(client)`` in one MCP session on ``/mcp``, authenticated as ``user``."""

    async def main() -> Any:
        headers = {"Authorization": f"Bearer {service.keys[user]}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(service.url + "/mcp", http_client=http)) as connected,
        ):
            return await steps(connected)

    return anyio.run(main)


def console(service: Deployment, user: str) -> httpx.Client:
    """A browser-like client signed in to the console as ``user``."""
    client = httpx.Client(base_url=service.url, timeout=30, verify=PLAIN_HTTP)
    login = client.get("/console/login")
    token = re.search(r'name="csrf" value="([^"]+)"', login.text)
    assert token
    signed = client.post("/console/login", data={"csrf": token.group(1), "token": service.keys[user]})
    assert signed.status_code == 303, signed.text
    return client


def test_an_mcp_approval_is_approved_in_the_console_and_redeemed_once_over_rest(service: Deployment) -> None:
    async def call(connected: Any) -> Any:
        return await connected.call_tool("transfer", {**PAY, "audit_as": INTENT})

    # 1. The MCP client learns that a human must approve, and the request id.
    asked = over_mcp(service, "alice", call)
    assert asked.is_error and outcome(asked)["status"] == "APPROVAL_REQUIRED"
    request_id = outcome(asked)["approval"]["request_id"]
    assert request_id in asked.content[0].text and RUNS["transfer"] == 0

    # 2. The console lists it, with its arguments and intent; an approver decides it there.
    with closing(console(service, "bob")) as bob:
        page = bob.get("/console/approvals")
        assert page.status_code == 200 and f'id="approval-{request_id}"' in page.text
        assert "acct-7" in page.text and INTENT in page.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf
        decided = bob.post(
            f"/console/approvals/{request_id}/decision",
            data={"csrf": csrf.group(1), "decision": "approve", "reason": "invoice checked"},
        )
        assert decided.status_code == 303, decided.text
    assert service.get(f"/v1/approvals/{request_id}", "bob").json()["state"] == "approved"

    # Asking again over MCP does not spend the grant: MCP carries none; it raises a new request.
    again = over_mcp(service, "alice", call)
    assert outcome(again)["status"] == "APPROVAL_REQUIRED" and RUNS["transfer"] == 0
    fresh = outcome(again)["approval"]["request_id"]
    assert fresh != request_id
    assert service.get(f"/v1/approvals/{fresh}", "bob").json()["state"] == "pending"

    # 3. The agent's application redeems it over REST with the same credential and arguments.
    done = service.invoke("alice", "transfer", PAY, audit_as=INTENT, approval_id=request_id)
    assert done.status_code == 200, done.text
    assert done.json()["content"] == "moved 40 to acct-7" and RUNS["transfer"] == 1
    replay = service.invoke("alice", "transfer", PAY, audit_as=INTENT, approval_id=request_id)
    assert replay.status_code == 409 and replay.json()["reason_code"] == "APPROVAL_USED"
    assert RUNS["transfer"] == 1
    # The request, the decision and the execution are one trace, and its chain verifies.
    run_id = service.get(f"/v1/approvals/{request_id}", "bob").json()["run_id"]
    statuses = {e.status for e in service.events(run_id)}
    assert {"APPROVAL_REQUIRED", "APPROVED", "SUCCESS"} <= statuses
    assert service.get(f"/v1/audit/traces/{run_id}/verify", "bob").json()["ok"] is True


def test_edited_arguments_or_another_principal_cannot_redeem_an_mcp_approval(service: Deployment) -> None:
    async def call(connected: Any) -> Any:
        return await connected.call_tool("transfer", {**PAY, "audit_as": INTENT})

    request_id = outcome(over_mcp(service, "alice", call))["approval"]["request_id"]
    decided = service.post(
        f"/v1/approvals/{request_id}/decision", "bob", json={"decision": "approve", "reason": "ok"}
    )
    assert decided.status_code == 200
    edited = service.invoke(
        "alice", "transfer", {**PAY, "to": "acct-666"}, audit_as=INTENT, approval_id=request_id
    )
    assert edited.status_code == 403 and edited.json()["reason_code"] == "APPROVAL_INVALID"
    other = service.invoke("viewer", "transfer", PAY, audit_as=INTENT, approval_id=request_id)
    assert other.status_code == 403 and other.json()["reason_code"] == "NOT_REQUESTER"
    assert RUNS["transfer"] == 0


def test_both_doors_show_a_limited_credential_the_same_tools(service: Deployment) -> None:
    async def steps(connected: Any) -> Any:
        names = [t.name for t in (await connected.list_tools()).tools]
        refused = await connected.call_tool("transfer", {**PAY, "audit_as": INTENT})
        return names, refused

    names, refused = over_mcp(service, "alice-echo", steps)
    assert names == ["echo"] == service.get("/v1/tools", "alice-echo").json()["names"]
    assert outcome(refused)["reason_code"] == "NOT_IN_TOOLSET"
    rest = service.invoke("alice-echo", "transfer", PAY, audit_as=INTENT)
    assert rest.status_code == 403 and rest.json()["reason_code"] == "NOT_IN_TOOLSET"
    assert RUNS["transfer"] == 0
