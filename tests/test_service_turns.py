"""``POST /v1/turns``: a pydantic-ai `FunctionModel` plans governed calls through the live service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from service_support import RUNS, Deployment, deployment


def scripted(*steps: list[Any]) -> FunctionModel:
    """A model that plays ``steps`` (lists of parts), then answers with what the last tool returned."""
    queue = list(steps)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if queue:
            return ModelResponse(parts=queue.pop(0))
        returned = [
            p.content for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)
        ]
        return ModelResponse(parts=[TextPart(f"the tool said: {returned[-1] if returned else 'nothing'}")])

    return FunctionModel(model)


@pytest.fixture
def turns(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Deployment]:
    with deployment(tmp_path, turn_model=request.param) as deployed:
        yield deployed


ECHO = [ToolCallPart("echo", {"text": "hi", "purpose": "Answer the user"}, "c1")]
PAY = [ToolCallPart("transfer", {"amount": 9, "to": "x", "audit_as": "Pay as asked"}, "c2")]


@pytest.mark.parametrize("turns", [scripted(ECHO)], indirect=True)
def test_a_turn_runs_governed_calls_in_the_callers_context(turns: Deployment) -> None:
    response = turns.post(
        "/v1/turns", "alice", json={"message": "say hi", "tenant": "evil", "principal": "root"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answer"] == "the tool said: hi" and body["tool_calls"] == 1
    assert RUNS["echo"] == 1
    events = turns.events(body["trace_id"])
    assert events and {(e.tenant, e.principal) for e in events} == {("acme", "alice")}


@pytest.mark.parametrize("turns", [scripted(PAY)], indirect=True)
def test_a_turn_stops_at_an_approval(turns: Deployment) -> None:
    response = turns.post("/v1/turns", "alice", json={"message": "pay x"})
    assert response.status_code == 202, response.text
    (approval,) = response.json()["approvals"]
    assert approval["tool"] == "transfer" and approval["requester"] == "alice" and RUNS["transfer"] == 0
    assert turns.get(f"/v1/approvals/{approval['id']}", "bob").json()["state"] == "pending"


@pytest.mark.parametrize("turns", [scripted(ECHO)], indirect=True)
def test_turns_need_the_caller_role_and_a_message(turns: Deployment) -> None:
    assert turns.post("/v1/turns", json={"message": "x"}).status_code == 401
    assert turns.post("/v1/turns", "dave", json={"message": "x"}).json()["reason_code"] == "ROLE_REQUIRED"
    for body in ({}, {"message": ""}, {"message": 5}, {"message": "x" * 9000}):
        assert turns.post("/v1/turns", "alice", json=body).status_code == 422
    assert RUNS["echo"] == 0


def broken_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    raise RuntimeError("api key sk-secret leaked in a message")


@pytest.mark.parametrize("turns", [FunctionModel(broken_model)], indirect=True)
def test_a_failing_model_is_a_502_without_its_text(turns: Deployment) -> None:
    response = turns.post("/v1/turns", "alice", json={"message": "x"})
    assert response.status_code == 502 and response.json()["reason_code"] == "MODEL_ERROR"
    assert "sk-secret" not in response.text


def test_turns_are_404_without_a_model(tmp_path: Path) -> None:
    with deployment(tmp_path) as service:
        response = service.post("/v1/turns", "alice", json={"message": "x"})
        assert response.status_code == 404 and response.json()["reason_code"] == "TURNS_NOT_CONFIGURED"
