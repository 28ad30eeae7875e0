"""The typed fast path with an audit trail: the same events and outcomes as the full chain.

A ``MEMORY_ONLY`` operation whose plan holds only the context gates runs
inline from ``execute()``, recording through the audit trail. Each scenario
runs on two gateways: the default one, and one with a no-op interceptor of
the application, which keeps every call on the full chain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from audit_faults import FlakySink
from toolbox import (
    Effect,
    ExecutionContext,
    Gateway,
    Governance,
    RiskClass,
    ToolDeniedError,
    ToolResult,
    tool,
)
from toolbox.audit import AuditTrail, MemorySink
from toolbox.errors import AuditIncompleteError
from toolbox.governance import RetryPolicy
from toolbox.pipeline._invocation import Invocation

AUDITOR = ExecutionContext(tenant="ops", principal="auditor", roles=frozenset({"auditor"}))


class PassThrough:
    """An interceptor that allows everything: its presence keeps calls on the full chain."""

    name = "pass_through"
    per_attempt = False

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        return None


@dataclass
class Tool:
    """What the function below does: raise these first, and remember what it was given."""

    raises: list[Exception] = field(default_factory=list)
    seen: list[Any] = field(default_factory=list)


def build(state: Tool, sink: Any, *, full_chain: bool, tmp_path: Any) -> tuple[Any, ExecutionContext, Any]:
    @tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
    def tally(values: Any, label: str = "total") -> Any:
        """Sum values (and change the list it was given, as careless code might)."""
        state.seen.append(list(values) if isinstance(values, list) else values)
        if state.raises:
            raise state.raises.pop(0)
        if isinstance(values, list):
            total = sum(values)
            values.append(999)
            return total
        if isinstance(values, dict):
            total = sum(v for v in values.values() if isinstance(v, int))
            values["n"] = 999
            return total
        return values

    trail = AuditTrail(sink, fallback_path=tmp_path / f"fallback-{full_chain}.jsonl")
    governance = Governance(
        audit=trail,
        retry=RetryPolicy(base_delay=0, max_delay=0),
        interceptors=[PassThrough()] if full_chain else [],
    )
    gateway = Gateway.load(providers=[tally], discover=False, env={}, governance=governance)
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    return gateway.tools_for(context).get(tally), context, trail


def events(trail: AuditTrail, context: ExecutionContext) -> list[dict[str, Any]]:
    volatile = {"event_id", "timestamp", "hash", "previous_hash", "trace_id", "correlation_id", "duration"}
    return [
        {k: v for k, v in r.model_dump().items() if k not in volatile}
        for r in trail.read_trace(context.run_id, context=AUDITOR)
    ]


def both(tmp_path: Any, scenario: Any, *, sink: type = MemorySink) -> list[dict[str, Any]]:
    """Run ``scenario(bound, state, sink)`` inline and on the full chain; return the two observations."""
    seen = []
    for full_chain in (False, True):
        state, made = Tool(), sink()
        bound, context, trail = build(state, made, full_chain=full_chain, tmp_path=tmp_path)
        outcome = scenario(bound, state, made)
        seen.append(
            {
                "outcome": outcome,
                "events": events(trail, context),
                "records": [
                    {k: v for k, v in r.as_dict().items() if not k.endswith("_at") and k != "duration"}
                    for r in context.trace.records()
                ],
                "executions": len(state.seen),
            }
        )
    assert seen[0] == seen[1]
    return seen


def test_a_typed_call_records_the_same_events_as_the_full_chain(tmp_path):
    def scenario(bound: Any, state: Tool, sink: Any) -> Any:
        return bound.call(5, label="x").purpose("Tally the order").execute()

    inline, _ = both(tmp_path, scenario)
    assert inline["outcome"] == 5
    kinds = [(e["type"].value, e["status"]) for e in inline["events"]]
    assert kinds == [
        ("INTENT_DECLARED", None),
        ("GOVERNANCE_DECISION", None),
        ("INVOCATION_REQUEST", None),
        ("INVOCATION_RESPONSE", "SUCCESS"),
    ]
    assert json.loads(inline["events"][0]["payload_summary"]) == {"label": "x", "values": 5}


def test_arguments_that_can_change_are_redacted_before_the_call(tmp_path):
    def scenario(bound: Any, state: Tool, sink: Any) -> Any:
        return bound.call([1, 2]).purpose("Tally the order").execute()

    inline, _ = both(tmp_path, scenario)
    assert inline["outcome"] == 3
    # The tool appended 999 to the list it was given; the audit shows what it was called with.
    assert json.loads(inline["events"][0]["payload_summary"]) == {"label": "total", "values": [1, 2]}


def test_a_dict_of_scalars_is_recorded_as_called_and_redacted_when_read(tmp_path):
    """A flat dict argument (toolbox-sql's params) is copied, not redacted, before the call: the
    tool's later change does not reach the record, and its secret keys are masked when it is read."""

    def scenario(bound: Any, state: Tool, sink: Any) -> Any:
        return bound.call({"n": 2, "password": "hunter22"}).purpose("Tally the order").execute()

    inline, _ = both(tmp_path, scenario)
    assert inline["outcome"] == 2
    assert json.loads(inline["events"][0]["payload_summary"]) == {
        "label": "total",
        "values": {"n": 2, "password": "[REDACTED]"},
    }
    assert "hunter22" not in repr(inline["events"])


def test_only_flat_dicts_of_immutable_values_are_kept_for_later():
    from toolbox.audit._batch import immutable_copy

    given = {"sql": "SELECT 1", "params": {"id": 7, "name": "x"}}
    copied = immutable_copy(given)
    assert copied == given and copied is not None and copied["params"] is not given["params"]
    assert immutable_copy({"a": 1}) == {"a": 1}
    # Anything a caller could still change inside is redacted at once instead (None here).
    assert immutable_copy({"params": {"ids": [1, 2]}}) is None
    assert immutable_copy({"params": {"nested": {"id": 1}}}) is None
    assert immutable_copy({"params": {1: "not a text key"}}) is None
    assert immutable_copy({"rows": [1]}) is None


def test_an_unwritable_trail_refuses_the_typed_call(tmp_path):
    def scenario(bound: Any, state: Tool, sink: FlakySink) -> Any:
        sink.failing = True
        with pytest.raises(ToolDeniedError) as info:
            bound.call(5).purpose("Tally the order").execute()
        return info.value.reason_code

    inline, _ = both(tmp_path, scenario, sink=FlakySink)
    assert inline["outcome"] == "AUDIT_UNAVAILABLE"
    assert inline["executions"] == 0
    assert inline["events"] == []
    assert [r["status"] for r in inline["records"]] == ["DENIED"]


def test_a_lost_response_raises_audit_incomplete_after_the_call(tmp_path):
    def scenario(bound: Any, state: Tool, sink: FlakySink) -> Any:
        sink.fail_after = 1
        with pytest.raises(AuditIncompleteError) as info:
            bound.call(5).purpose("Tally the order").execute()
        return (info.value.status, info.value.content)

    inline, _ = both(tmp_path, scenario, sink=FlakySink)
    assert inline["outcome"] == ("SUCCESS", 5)
    assert inline["executions"] == 1
    assert [(e["type"].value) for e in inline["events"]] == [
        "INTENT_DECLARED",
        "GOVERNANCE_DECISION",
        "INVOCATION_REQUEST",
    ]
    fallback = [json.loads(line) for line in (tmp_path / "fallback-False.jsonl").read_text().splitlines()]
    assert [e["type"] for e in fallback] == ["INVOCATION_RESPONSE"]


def test_a_tool_exception_is_raised_and_recorded_alike(tmp_path):
    def scenario(bound: Any, state: Tool, sink: Any) -> Any:
        state.raises = [KeyError("missing")]
        with pytest.raises(KeyError):
            bound.call(5).purpose("Tally the order").execute()
        return "raised"

    inline, _ = both(tmp_path, scenario)
    assert inline["executions"] == 1
    assert (inline["events"][-1]["status"], inline["events"][-1]["reason_code"]) == ("ERROR", "KeyError")


def test_a_transient_failure_is_retried_alike(tmp_path):
    def scenario(bound: Any, state: Tool, sink: Any) -> Any:
        state.raises = [TimeoutError("slow")]
        return bound.call(5).purpose("Tally the order").execute()

    inline, _ = both(tmp_path, scenario)
    assert (inline["outcome"], inline["executions"]) == (5, 2)
    assert inline["events"][-1]["attempt"] == 2


def test_async_execution_of_a_memory_only_tool_records_alike(tmp_path):
    import asyncio

    def scenario(bound: Any, state: Tool, sink: Any) -> Any:
        return asyncio.run(bound.call(7).purpose("Tally the order").aexecute())

    inline, _ = both(tmp_path, scenario)
    assert inline["outcome"] == 7


def test_the_audited_typed_call_does_not_enter_the_full_chain(tmp_path, monkeypatch):
    from toolbox.pipeline._chain import Pipeline

    bound, context, trail = build(Tool(), MemorySink(), full_chain=False, tmp_path=tmp_path)
    bound.call(1).purpose("Warm up").execute()  # the first call makes the plan

    def refuse(*args: Any) -> Any:
        raise AssertionError("the full chain ran")

    monkeypatch.setattr(Pipeline, "run", refuse)
    assert bound.call(2).purpose("Tally the order").execute() == 2
    assert trail.verify(context.run_id, context=AUDITOR) == []
    assert len(trail.read_trace(context.run_id, context=AUDITOR)) == 8
