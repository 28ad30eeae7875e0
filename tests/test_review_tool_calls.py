"""Security review of raw tool calls: argument text a compromised model sends."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.doors.tool_calls import openai_tool_result

CALLS: list[dict[str, Any]] = []
CONTEXT = ExecutionContext(principal="alice", tenant="acme")


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="math.add")
def add(a: int, b: int = 10) -> int:
    """Add two integers."""
    CALLS.append({"a": a, "b": b})
    return a + b


@pytest.fixture(autouse=True)
def _no_calls_yet() -> None:
    CALLS.clear()


def gateway() -> tuple[Gateway, MemorySink]:
    sink = MemorySink()
    return Gateway.load(
        providers=[add], discover=False, env={}, governance=Governance(audit=AuditTrail(sink))
    ), sink


def call(arguments: str) -> dict[str, Any]:
    return {"id": "call_1", "type": "function", "function": {"name": "math__add", "arguments": arguments}}


@pytest.mark.parametrize("unknown", ["evil", "A", "a ", "purpose\u200b"])
def test_an_unknown_key_sent_as_null_is_refused_not_stripped(unknown: str) -> None:
    """Null means "absent" only for an optional parameter the schema has: an unknown key is still unknown."""
    g, sink = gateway()
    text = json.dumps({"a": 1, "b": None, unknown: None, "purpose": "Sum"})
    answer = openai_tool_result(g, call(text), context=CONTEXT)
    body = json.loads(answer["content"])
    assert (body["status"], body["reason_code"]) == ("INVALID_ARGUMENTS", "INVALID_ARGUMENTS")
    assert body["field_path"] == unknown
    assert CALLS == []
    assert any(r.status == "INVALID_ARGUMENTS" for r in sink.records)


def test_a_null_for_an_optional_parameter_still_means_absent() -> None:
    g, _ = gateway()
    answer = openai_tool_result(g, call('{"a": 1, "b": null, "purpose": "Sum"}'), context=CONTEXT)
    assert answer["content"] == "11"
    assert CALLS == [{"a": 1, "b": 10}]
