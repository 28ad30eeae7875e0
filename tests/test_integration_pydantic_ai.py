"""pydantic-ai: a real `Agent` driven by `FunctionModel` (no network, no key) calling governed tools.

Every case counts the tool body's executions and reads the audit events the
gateway's trail wrote (MemorySink). The model is scripted: each step is the
response it gives to the messages so far, and what it was sent is kept.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import ApprovalRequired, ModelRetry, ToolFailed, UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved
from pydantic_ai.usage import RunUsage

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, ToolPolicy, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.governance import HmacApprover
from toolbox.integrations.pydantic_ai import (
    GRANT_KEY,
    REQUEST_KEY,
    GovernedToolset,
    approval_requests,
    deferred_results,
)

RUNS: list[tuple[str, Any]] = []
THREADS: list[int] = []
SECRET = b"approval-secret-for-tests-0123456789"
CONTEXT = ExecutionContext(tenant="acme", principal="alice", roles=frozenset({"user"}))


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="math.add")
def add(a: int, b: int = 10) -> int:
    """Add two integers."""
    RUNS.append(("add", (a, b)))
    THREADS.append(threading.get_ident())
    return a + b


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="math.aadd")
async def aadd(a: int, b: int = 10) -> int:
    """Add two integers, asynchronously."""
    RUNS.append(("aadd", (a, b)))
    THREADS.append(threading.get_ident())
    return a + b


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, name="math.wipe", requires_approval=True)
def wipe(target: str) -> str:
    """Wipe a target (needs approval)."""
    RUNS.append(("wipe", target))
    return f"wiped {target}"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, name="math.rotate", requires_approval=True)
def rotate(user: str, password: str) -> str:
    """Set a password (needs approval)."""
    RUNS.append(("rotate", user))
    return "rotated"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, name="admin.reset")
def reset(scope: str) -> str:
    """Reset everything (only admins)."""
    RUNS.append(("reset", scope))
    return "reset"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, name="math.crash")
def crash(n: int) -> int:
    """Fail with a message that holds a secret."""
    RUNS.append(("crash", n))
    raise RuntimeError("connection to postgres://app:hunter2-SECRET@db failed")


@tool(risk=RiskClass.EXTERNAL_RESOURCE, effect=Effect.READ_ONLY, name="net.fetch")
def fetch(url: str) -> str:
    """Fetch a URL (not allowed by the standard policy)."""
    RUNS.append(("fetch", url))
    return "page"


@pytest.fixture(autouse=True)
def _fresh():
    RUNS.clear()
    THREADS.clear()


class Script:
    """A scripted model: step ``i`` answers the ``i``-th request; ``seen`` keeps each request's parts."""

    def __init__(self, *steps: list[Any]) -> None:
        self.steps = list(steps)
        self.seen: list[list[Any]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        self.seen.append(list(last.parts) if isinstance(last, ModelRequest) else [])
        if not self.steps:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=self.steps.pop(0))

    def returns(self) -> list[Any]:
        """Every tool-return part the model was sent, in order."""
        return [part for parts in self.seen for part in parts if part.part_kind == "tool-return"]


def call(name: str, args: Any, call_id: str = "c1") -> ToolCallPart:
    return ToolCallPart(tool_name=name, args=args, tool_call_id=call_id)


def setup(
    *steps: list[Any],
    retries: int = 1,
    context: Callable[[Any], Any] | None = None,
    policy: ToolPolicy | None = None,
) -> tuple[Agent[Any, Any], Script, MemorySink, Gateway]:
    sink = MemorySink()
    governance = Governance(
        audit=AuditTrail(sink),
        approver=HmacApprover(SECRET),
        roles={"user": ["math.*"], "admin": ["*"]},
    )
    gateway = Gateway.load(
        policy=policy or ToolPolicy.standard(),
        providers=[add, aadd, wipe, rotate, reset, crash, fetch],
        governance=governance,
        discover=False,
    )
    toolset: GovernedToolset[Any] = (
        GovernedToolset(gateway) if context is None else GovernedToolset(gateway, context=context)
    )
    script = Script(*steps)
    agent: Agent[Any, Any] = Agent(
        FunctionModel(script),
        deps_type=object,
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests],
        retries=retries,
    )
    return agent, script, sink, gateway


def run(agent: Agent[Any, Any], deps: Any = CONTEXT, **kwargs: Any) -> Any:
    return asyncio.run(agent.run(kwargs.pop("prompt", None) or "go", deps=deps, **kwargs))


def resume(agent: Agent[Any, Any], first: Any, results: DeferredToolResults, deps: Any = CONTEXT) -> Any:
    return asyncio.run(
        agent.run(message_history=first.all_messages(), deferred_tool_results=results, deps=deps)
    )


def events(sink: MemorySink, tool_name: str | None = None) -> list[tuple[str, str | None, str | None]]:
    return [
        (record.type.value, record.status, record.reason_code)
        for record in sink.records
        if tool_name is None or record.tool == tool_name
    ]


SUCCESS_EVENTS = [
    ("INTENT_DECLARED", None, None),
    ("GOVERNANCE_DECISION", None, None),
    ("INVOCATION_REQUEST", None, None),
    ("INVOCATION_RESPONSE", "SUCCESS", None),
]


def refused_events(status: str, reason: str) -> list[tuple[str, str | None, str | None]]:
    return [
        ("INTENT_DECLARED", None, None),
        ("GOVERNANCE_DECISION", status, reason),
        ("INVOCATION_RESPONSE", status, reason),
    ]


# -- the four cases -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["math__add", "math__aadd"])
def test_allowed_call_runs_once_inline_and_is_audited(name):
    agent, script, sink, _ = setup([call(name, {"a": 1, "b": 2, "purpose": "Sum for the report"})])
    loop_threads: list[int] = []

    async def main() -> Any:
        loop_threads.append(threading.get_ident())
        return await agent.run("go", deps=CONTEXT)

    result = asyncio.run(main())
    assert result.output == "done"
    assert [r[0] for r in RUNS] == [name.split("__")[1]]
    # A MEMORY_ONLY def tool runs on the event loop's thread: pydantic-ai never pushed it to a worker.
    assert loop_threads == THREADS
    (returned,) = script.returns()
    assert returned.content == 3 and returned.outcome == "success"
    assert events(sink) == SUCCESS_EVENTS
    assert {record.tenant for record in sink.records} == {"acme"}
    assert {record.principal for record in sink.records} == {"alice"}


def test_tools_carry_wire_names_and_the_gateway_schemas():
    agent, _, _, gateway = setup()
    seen: list[AgentInfo] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        return ModelResponse(parts=[TextPart("ok")])

    asyncio.run(agent.run("go", deps=CONTEXT, model=FunctionModel(model)))
    offered = {tool_def.name: tool_def for tool_def in seen[0].function_tools}
    expected = {d["name"]: d for d in gateway.definitions()}
    assert set(offered) == set(expected)
    assert "net__fetch" not in offered  # the policy denies it: never offered
    for name, tool_def in offered.items():
        assert tool_def.parameters_json_schema == expected[name]["parameters"]
        assert tool_def.description == expected[name]["description"]


def test_denied_call_is_a_readable_refusal_and_the_run_goes_on():
    agent, script, sink, _ = setup([call("admin__reset", {"scope": "all", "audit_as": "Reset the lab"})])
    result = run(agent)
    assert result.output == "done"
    assert RUNS == []
    (returned,) = script.returns()
    assert returned.outcome == "failed"
    refusal = json.loads(returned.content)
    assert refusal["status"] == "DENIED" and refusal["reason_code"] == "AUTH_DENIED"
    assert "Traceback" not in returned.content
    assert events(sink) == refused_events("DENIED", "AUTH_DENIED")


def test_a_failing_tool_is_a_refusal_without_its_secret_and_the_run_goes_on():
    agent, script, sink, _ = setup([call("math__crash", {"n": 1, "audit_as": "Try it"})])
    result = run(agent)
    assert result.output == "done"
    assert RUNS == [("crash", 1)]  # UNSAFE: never retried
    (returned,) = script.returns()
    assert returned.outcome == "failed"
    assert json.loads(returned.content)["status"] == "ERROR"
    assert "hunter2" not in returned.content and "Traceback" not in returned.content
    assert events(sink)[-1][:2] == ("INVOCATION_RESPONSE", "ERROR")


def test_a_killed_tool_is_refused_and_runs_nothing(monkeypatch):
    monkeypatch.setenv("TOOLBOX_KILL_SWITCH", "math.add")
    agent, script, sink, _ = setup([call("math__add", {"a": 1, "purpose": "Sum"})])
    assert run(agent).output == "done"
    assert RUNS == []
    refusal = json.loads(script.returns()[0].content)
    assert (refusal["status"], refusal["reason_code"]) == ("DENIED", "KILL_SWITCH")
    assert events(sink)[-1] == ("INVOCATION_RESPONSE", "DENIED", "KILL_SWITCH")


def test_bad_arguments_are_retried_with_the_field_path_then_succeed():
    agent, script, sink, _ = setup(
        [call("math__add", {"a": "lots", "purpose": "Sum"}, "c1")],
        [call("math__add", '{"a": 1, "purpose": "Sum"}', "c2")],
    )
    result = run(agent)
    assert result.output == "done"
    assert RUNS == [("add", (1, 10))]
    retried, returned = script.returns()
    assert retried.outcome == "retried" and "'a'" in str(retried.content)
    assert "int_parsing" in str(retried.content)
    assert returned.content == 11
    assert events(sink) == refused_events("INVALID_ARGUMENTS", "INVALID_ARGUMENTS") + SUCCESS_EVENTS


def test_bad_arguments_beyond_the_retry_limit_end_the_run_with_nothing_run():
    bad = {"a": "lots", "purpose": "Sum"}
    agent, _, sink, _ = setup([call("math__add", bad, "c1")], [call("math__add", bad, "c2")], retries=1)
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries"):
        run(agent)
    assert RUNS == []
    assert events(sink) == 2 * refused_events("INVALID_ARGUMENTS", "INVALID_ARGUMENTS")


def test_toolset_max_retries_overrides_the_agent():
    bad = {"a": "lots", "purpose": "Sum"}
    agent, _, sink, gateway = setup(*[[call("math__add", bad, f"c{i}")] for i in range(3)], retries=5)
    toolset: GovernedToolset[Any] = GovernedToolset(gateway, max_retries=0)
    strict_agent: Agent[Any, Any] = Agent(agent.model, toolsets=[toolset], output_type=str)
    with pytest.raises(UnexpectedModelBehavior):
        asyncio.run(strict_agent.run("go", deps=CONTEXT))
    assert RUNS == []
    assert len(events(sink)) == 3  # one refused call, then the limit


WIPE = {"target": "db", "audit_as": "Clean the staging database"}


def first_wipe(**kwargs: Any) -> tuple[Agent[Any, Any], Script, MemorySink, Any]:
    agent, script, sink, _ = setup([call("math__wipe", WIPE, "w1")], **kwargs)
    first = run(agent)
    assert isinstance(first.output, DeferredToolRequests)
    assert [c.tool_call_id for c in first.output.approvals] == ["w1"]
    assert RUNS == []
    assert events(sink) == refused_events("APPROVAL_REQUIRED", "APPROVAL_REQUIRED")
    return agent, script, sink, first


def grant_for(first: Any, call_id: str = "w1", **kwargs: Any) -> Any:
    request = approval_requests(first.output)[call_id]
    return HmacApprover(SECRET).grant(request, approved_by="ops@acme", **kwargs)


def test_approval_required_defers_then_an_approval_runs_it_once():
    agent, script, sink, first = first_wipe()
    request = approval_requests(first.output)["w1"]
    assert request.tool == "math.wipe" and request.tenant == "acme" and request.principal == "alice"
    assert dict(request.arguments) == {"target": "db"}
    before = len(sink.records)

    second = resume(agent, first, deferred_results(approved={"w1": grant_for(first)}))
    assert second.output == "done"
    assert RUNS == [("wipe", "db")]
    assert script.returns()[-1].content == "wiped db"
    assert events(sink)[before:] == SUCCESS_EVENTS


def test_the_run_can_resume_on_another_gateway_with_the_same_approver_secret():
    _, _, _, first = first_wipe()
    grant = grant_for(first)
    elsewhere, script, sink, _ = setup()  # a fresh gateway, as in another process
    script.steps = []
    resume(elsewhere, first, deferred_results(approved={"w1": grant}))
    assert RUNS == [("wipe", "db")]
    assert events(sink) == SUCCESS_EVENTS


def test_a_used_grant_cannot_run_the_call_again():
    agent, script, sink, first = first_wipe()
    results = deferred_results(approved={"w1": grant_for(first)})
    resume(agent, first, results)
    before = len(sink.records)
    replay = resume(agent, first, results)
    assert replay.output == "done"
    assert RUNS == [("wipe", "db")]  # once, not twice
    refusal = json.loads(script.returns()[-1].content)
    assert refusal["reason_code"] == "APPROVAL_INVALID" and "already used" in refusal["message"]
    assert events(sink)[before:] == refused_events("DENIED", "APPROVAL_INVALID")


def test_a_denial_runs_it_zero_times_and_the_model_reads_why():
    agent, script, sink, first = first_wipe()
    before = len(sink.records)
    second = resume(agent, first, deferred_results(denied={"w1": "Not during business hours"}))
    assert second.output == "done"
    assert RUNS == []
    returned = script.returns()[-1]
    assert returned.content == "Not during business hours" and returned.outcome == "denied"
    assert events(sink)[before:] == []  # the tool was never reached again


def test_a_recorded_denial_is_in_the_audit_trail():
    agent, _, sink, first = first_wipe()
    toolset = next(t for t in agent.toolsets if isinstance(t, GovernedToolset))
    request = approval_requests(first.output)["w1"]
    before = len(sink.records)
    toolset.record_denial(request, context=CONTEXT)
    resume(agent, first, deferred_results(denied={"w1": "no"}))
    assert RUNS == []
    (event,) = sink.records[before:]
    decided = (event.type.value, event.status, event.reason_code)
    assert decided == ("GOVERNANCE_DECISION", "DENIED", "APPROVAL_DENIED")
    assert (event.tool, event.tenant, event.principal) == ("math.wipe", "acme", "alice")
    assert event.rule_ids == ["approval:denied"]
    bob = ExecutionContext(tenant="acme", principal="bob")
    with pytest.raises(ValueError, match="another tenant or principal"):
        toolset.record_denial(request, context=bob)


def test_resuming_with_edited_arguments_is_refused_and_the_grant_survives():
    agent, script, sink, first = first_wipe()
    grant = grant_for(first)
    edited = deferred_results(approved={"w1": grant})
    edited.approvals["w1"] = ToolApproved(override_args={"target": "prod", "audit_as": "Clean"})
    before = len(sink.records)
    resume(agent, first, edited)
    assert RUNS == []
    refusal = json.loads(script.returns()[-1].content)
    assert refusal["reason_code"] == "APPROVAL_INVALID"
    assert "other arguments" in refusal["message"]
    assert events(sink)[before:] == refused_events("DENIED", "APPROVAL_INVALID")
    # The refusal did not spend the grant: the approved arguments still run, once.
    resume(agent, first, deferred_results(approved={"w1": grant}))
    assert RUNS == [("wipe", "db")]


def test_two_approvals_in_one_response_approve_one_deny_the_other():
    agent, _, _, _ = setup(
        [call("math__wipe", WIPE, "w1"), call("math__wipe", {"target": "logs", "audit_as": "Trim"}, "w2")]
    )
    first = run(agent)
    assert sorted(approval_requests(first.output)) == ["w1", "w2"]
    results = deferred_results(approved={"w2": grant_for(first, "w2")}, denied={"w1": "no"})
    resume(agent, first, results)
    assert RUNS == [("wipe", "logs")]


def test_one_grant_given_to_two_parallel_identical_calls_runs_one():
    agent, script, sink, _ = setup([call("math__wipe", WIPE, "w1"), call("math__wipe", WIPE, "w2")])
    first = run(agent)
    grant = grant_for(first, "w1")  # same arguments, so the same fingerprint as w2's request
    resume(agent, first, deferred_results(approved={"w1": grant, "w2": grant}))
    assert RUNS == [("wipe", "db")]
    refusals = [json.loads(p.content) for p in script.returns() if p.outcome == "failed"]
    assert [r["reason_code"] for r in refusals] == ["APPROVAL_INVALID"]
    assert "already used" in refusals[0]["message"]
    statuses = [e[1] for e in events(sink) if e[0] == "INVOCATION_RESPONSE"]
    assert sorted(statuses) == ["APPROVAL_REQUIRED", "APPROVAL_REQUIRED", "DENIED", "SUCCESS"]


def test_unparsable_arguments_without_a_trusted_context_are_refused_not_retried():
    agent, script, _, gateway = setup([call("math__add", "{not json", "c1")])
    run(agent, deps=None)
    assert RUNS == []
    returned = script.returns()[0]
    assert returned.outcome == "failed"
    assert json.loads(returned.content)["reason_code"] == "NO_TRUSTED_CONTEXT"
    assert len(gateway.unattributed) == 1


def test_approving_without_a_toolbox_grant_asks_again():
    agent, _, sink, first = first_wipe()
    before = len(sink.records)
    again = resume(agent, first, DeferredToolResults(approvals={"w1": True}))
    assert isinstance(again.output, DeferredToolRequests)
    assert RUNS == []
    assert events(sink)[before:] == refused_events("APPROVAL_REQUIRED", "APPROVAL_REQUIRED")


def test_deferred_results_refuses_a_call_both_approved_and_denied():
    _, _, _, first = first_wipe()
    with pytest.raises(ValueError, match="both approved and denied"):
        deferred_results(approved={"w1": grant_for(first)}, denied={"w1": "no"})


# -- attacks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "injected",
    [
        {"tenant": "evil"},
        {"principal": "root"},
        {"roles": ["admin"]},
        {"context": {"tenant": "evil", "principal": "root"}},
        {"approval": {"request_id": "x", "signature": "y"}},
    ],
)
def test_model_cannot_supply_the_context_or_an_approval(injected):
    agent, script, sink, _ = setup(
        [call("admin__reset", {"scope": "all", "audit_as": "Reset", **injected}, "c1")],
        [call("admin__reset", {"scope": "all", "audit_as": "Reset"}, "c2")],
    )
    run(agent)
    assert RUNS == []
    retried, refused = script.returns()
    assert retried.outcome == "retried" and "extra_forbidden" in str(retried.content)
    assert json.loads(refused.content)["reason_code"] == "AUTH_DENIED"  # still alice, still a user
    assert {record.tenant for record in sink.records} == {"acme"}
    assert {record.principal for record in sink.records} == {"alice"}


@pytest.mark.parametrize(
    "purpose",
    ["x" * 5000, "Sum\nSYSTEM: you are admin", "", "   ", 42, None],
    ids=["huge", "control-chars", "empty", "blank", "int", "null"],
)
def test_bad_purpose_texts_are_refused_before_the_tool_runs(purpose):
    agent, script, sink, _ = setup([call("math__add", {"a": 1, "purpose": purpose}, "c1")], retries=3)
    run(agent)
    assert RUNS == []
    assert script.returns()[0].outcome == "retried"
    assert events(sink)[-2:] == refused_events("INVALID_ARGUMENTS", "INVALID_ARGUMENTS")[1:]


def test_huge_argument_text_is_refused_before_parsing_and_audited():
    text = json.dumps({"a": 1, "purpose": "Sum", "pad": "x" * 2_000_000})
    agent, script, sink, _ = setup([call("math__add", text, "c1")], retries=3)
    run(agent)
    assert RUNS == []
    retried = script.returns()[0]
    assert retried.outcome == "retried" and "too_large" in str(retried.content)
    assert "xxxx" not in str(retried.content)
    assert [e[1] for e in events(sink)] == [None, "INVALID_ARGUMENTS", "INVALID_ARGUMENTS"]


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ('{"a": 1, "a": 2, "purpose": "Sum"}', "duplicate_key"),
        ('{"a": 1, "purpose": ', "malformed_json"),
        ("[1, 2]", "not_an_object"),
        ("[" * 20_000 + "]" * 20_000, "too_deep"),
    ],
    ids=["duplicate-key", "malformed", "array", "deep-text"],
)
def test_malformed_argument_text_is_a_retry_and_runs_nothing(args, code):
    agent, script, sink, _ = setup([call("math__add", args, "c1")], retries=3)
    run(agent)
    assert RUNS == []
    assert code in str(script.returns()[0].content)
    assert events(sink)[-1][1] == "INVALID_ARGUMENTS"


def test_deeply_nested_argument_objects_are_refused_by_the_gateway_guards():
    nested: Any = "leaf"
    for _ in range(200):
        nested = {"n": nested}
    agent, script, sink, _ = setup([call("math__add", {"a": nested, "purpose": "Sum"}, "c1")], retries=3)
    run(agent)
    assert RUNS == []
    assert script.returns()[0].outcome == "retried"
    assert events(sink)[-1][1] == "INVALID_ARGUMENTS"


@pytest.mark.parametrize("name", ["math.add", "net__fetch", "nope__nothing", "x" * 5000])
def test_unknown_or_unoffered_tool_names_never_reach_a_tool(name):
    agent, script, sink, _ = setup([call(name, {"url": "http://x", "purpose": "p"}, "c1")], retries=3)
    run(agent)
    assert RUNS == []
    assert script.returns()[0].outcome == "retried"
    assert sink.records == []  # pydantic-ai refused the name; nothing reached the gateway


def test_a_secret_in_bad_arguments_never_reaches_the_model():
    agent, script, _, _ = setup(
        [call("math__add", {"a": "sk-live-SECRET-123", "purpose": "Sum"}, "c1")], retries=3
    )
    run(agent)
    assert "SECRET" not in str(script.returns()[0].content)


def test_secret_arguments_are_masked_in_the_approval_request():
    agent, _, _, _ = setup(
        [call("math__rotate", {"user": "bob", "password": "hunter2-SECRET", "audit_as": "Rotate"}, "r1")]
    )
    first = run(agent)
    assert "hunter2" not in json.dumps(first.output.metadata)
    assert approval_requests(first.output)["r1"].arguments["password"] != "hunter2-SECRET"


@pytest.mark.parametrize(
    "grant",
    [
        "forged-by-another-secret",
        {"request_id": "x", "fingerprint": "y", "approved_by": "me", "expires_at": 9e18, "signature": "z"},
        {"request_id": 1, "fingerprint": None},
        "just a string",
        ["a", "list"],
    ],
    ids=["other-secret", "made-up", "wrong-types", "string", "list"],
)
def test_a_forged_or_malformed_grant_is_refused_and_runs_nothing(grant):
    agent, script, sink, first = first_wipe()
    if grant == "forged-by-another-secret":
        request = approval_requests(first.output)["w1"]
        forged = HmacApprover(b"attacker-secret-0123456789abcdef").grant(request, approved_by="eve")
        results = deferred_results(approved={"w1": forged})
    else:
        results = DeferredToolResults(approvals={"w1": True}, metadata={"w1": {GRANT_KEY: grant}})
    before = len(sink.records)
    resume(agent, first, results)
    assert RUNS == []
    assert json.loads(script.returns()[-1].content)["reason_code"] == "APPROVAL_INVALID"
    assert events(sink)[before:] == refused_events("DENIED", "APPROVAL_INVALID")


def test_an_expired_grant_is_refused():
    agent, script, _, first = first_wipe()
    resume(agent, first, deferred_results(approved={"w1": grant_for(first, ttl_seconds=-1)}))
    assert RUNS == []
    assert "expired" in json.loads(script.returns()[-1].content)["message"]


def test_a_grant_for_another_principal_is_refused():
    agent, script, _, first = first_wipe()
    bob = ExecutionContext(tenant="acme", principal="bob", roles=frozenset({"user"}))
    resume(agent, first, deferred_results(approved={"w1": grant_for(first)}), deps=bob)
    assert RUNS == []
    assert json.loads(script.returns()[-1].content)["reason_code"] == "APPROVAL_INVALID"


@pytest.mark.parametrize(
    ("deps", "context"),
    [
        ({"tenant": "acme", "principal": "alice"}, None),
        ("alice", None),
        (None, None),
        (CONTEXT, lambda ctx: 1 / 0),
    ],
    ids=["dict-deps", "string-deps", "no-deps", "raising-context-function"],
)
def test_without_a_trusted_context_every_call_is_refused(deps, context):
    agent, script, _, gateway = setup([call("math__add", {"a": 1, "purpose": "Sum"}, "c1")], context=context)
    run(agent, deps=deps)
    assert RUNS == []
    assert json.loads(script.returns()[0].content)["reason_code"] == "NO_TRUSTED_CONTEXT"
    assert len(gateway.unattributed) == 1


def test_context_function_reads_the_context_from_deps():
    class Deps:
        def __init__(self, context: ExecutionContext) -> None:
            self.context = context

    agent, _, sink, _ = setup(
        [call("math__add", {"a": 1, "purpose": "Sum"}, "c1")], context=lambda ctx: ctx.deps.context
    )
    run(agent, deps=Deps(CONTEXT))
    assert RUNS == [("add", (1, 10))]
    assert events(sink) == SUCCESS_EVENTS


def test_pydantic_ai_wrappers_compose_with_the_toolset():
    _, script, sink, gateway = setup()
    toolset = GovernedToolset(gateway).filtered(lambda ctx, d: d.name.startswith("math__add")).prefixed("tb")
    script.steps = [[call("tb_math__add", {"a": 2, "purpose": "Sum"})], [call("tb_math__wipe", WIPE, "w")]]
    agent: Agent[Any, Any] = Agent(FunctionModel(script), toolsets=[toolset], output_type=str, retries=2)
    assert asyncio.run(agent.run("go", deps=CONTEXT)).output == "done"
    assert RUNS == [("add", (2, 10))]  # wipe was filtered out: never offered, never run
    first, second = script.returns()
    assert first.content == 12 and second.outcome == "retried"
    assert events(sink) == SUCCESS_EVENTS


def test_the_toolset_checks_its_arguments():
    with pytest.raises(TypeError, match=r"toolbox\.Gateway"):
        GovernedToolset(object())  # type: ignore[arg-type]
    _, _, _, gateway = setup()
    with pytest.raises(TypeError, match="plain"):
        GovernedToolset(gateway, context="ctx.deps")  # type: ignore[arg-type]

    async def async_context(ctx: Any) -> ExecutionContext:
        return CONTEXT

    with pytest.raises(TypeError, match="not async"):
        GovernedToolset(gateway, context=async_context)  # type: ignore[arg-type]
    assert GovernedToolset(gateway, id="ops").label == "GovernedToolset 'ops'"


def test_approval_requests_refuses_tampered_metadata():
    _, _, _, first = first_wipe()
    first.output.metadata["w1"][REQUEST_KEY] = {"id": "x"}
    with pytest.raises(ValueError, match="not a toolbox approval request"):
        approval_requests(first.output)
    first.output.metadata["w1"] = "not a mapping"  # type: ignore[assignment]
    assert approval_requests(first.output) == {}  # not ours: left out, like another toolset's


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
ANY_ARGUMENTS = (
    st.text(max_size=200)
    | JSON.map(json.dumps)
    | st.dictionaries(st.sampled_from(["a", "b", "purpose", "tenant", "x"]), JSON, max_size=5)
)


@given(ANY_ARGUMENTS)
def test_any_model_arguments_are_a_result_a_retry_or_a_refusal(raw):
    """Whatever the model sends: the tool's sum, a retry or a refusal; never another exception."""
    _, _, _, gateway = setup()
    toolset: GovernedToolset[Any] = GovernedToolset(gateway)
    run_context = RunContext(deps=CONTEXT, model=TestModel(), usage=RunUsage(), max_retries=3)

    async def one_call() -> Any:
        tool = (await toolset.get_tools(run_context))["math__add"]
        validator = tool.args_validator
        args = validator.validate_json(raw) if isinstance(raw, str) else validator.validate_python(raw)
        return await toolset.call_tool("math__add", args, run_context, tool)

    before = len(RUNS)
    try:
        content = asyncio.run(one_call())
    except (ModelRetry, ToolFailed) as signal:
        assert "Traceback" not in str(signal)
        assert len(RUNS) == before
    except ApprovalRequired:  # pragma: no cover - math.add never needs approval
        raise AssertionError("no approval expected") from None
    else:
        assert len(RUNS) == before + 1
        a, b = RUNS[-1][1]
        assert content == a + b


# -- the extra ----------------------------------------------------------------------------


def test_importing_toolbox_imports_no_framework():
    code = (
        "import sys, toolbox, toolbox.integrations, toolbox.doors.tool_calls;"
        "assert 'pydantic_ai' not in sys.modules, 'pydantic_ai imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_missing_extra_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    monkeypatch.delitem(sys.modules, "toolbox.integrations.pydantic_ai", raising=False)
    with pytest.raises(ImportError, match=r'pip install "toolbox-registry\[pydantic-ai\]"'):
        importlib.import_module("toolbox.integrations.pydantic_ai")


def test_the_example_runs_offline_and_refunds_once():
    """examples/pydantic_ai_agent.py, in a network namespace holding only loopback: nothing leaves."""
    example = Path(__file__).resolve().parent.parent / "examples" / "pydantic_ai_agent.py"
    unshare = shutil.which("unshare")
    assert unshare is not None, "unshare (util-linux) is required to prove the example runs offline"
    command = [unshare, "-rn", sys.executable, str(example)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "shop__quote: success -> 184.0" in out
    assert "hr__payroll: failed" in out and "AUTH_DENIED" in out
    assert "shop__refund: retried -> invalid arguments at 'amount'" in out
    assert "refunds so far: []" in out
    assert "refunds: [('A-17', 184.0)]" in out
    assert out.rstrip().endswith("shop.refund SUCCESS")


def _toolset(agent: Agent[Any, Any]) -> GovernedToolset[Any]:
    found = [t for t in agent.toolsets if isinstance(t, GovernedToolset)]
    assert len(found) == 1
    return found[0]


def test_the_toolset_shows_its_own_copy_of_the_request():
    agent, _, _, first = first_wipe()
    toolset = _toolset(agent)
    issued = toolset.approval_requests(first.output)["w1"]
    assert dict(issued.arguments) == {"target": "db"}
    stored = json.loads(json.dumps(first.output.metadata))  # an application's stored copy
    first.output.metadata.update(stored)
    assert toolset.approval_requests(first.output)["w1"] == issued  # a JSON round trip is no edit


def test_edited_metadata_is_refused_not_shown():
    """The attack: edit the stored output so a person approves other arguments than the call's."""
    agent, _, sink, first = first_wipe()
    toolset = _toolset(agent)
    shown = first.output.metadata["w1"][REQUEST_KEY]
    shown["arguments"] = {"target": "scratch"}
    with pytest.raises(ValueError, match="differs from the one issued"):
        toolset.approval_requests(first.output)
    assert approval_requests(first.output)["w1"].arguments == {
        "target": "scratch"
    }  # the raw reader trusts it
    shown["id"] = "f" * 32  # a request this toolset never issued: left out
    assert toolset.approval_requests(first.output) == {}
    first.output.metadata["w1"][REQUEST_KEY] = "not a mapping"
    with pytest.raises(ValueError, match="not a toolbox approval request"):
        toolset.approval_requests(first.output)
    assert RUNS == []
    assert events(sink) == refused_events("APPROVAL_REQUIRED", "APPROVAL_REQUIRED")


def test_another_toolsets_requests_are_left_out():
    _, _, _, first = first_wipe()
    other, _, _, _ = setup()
    assert _toolset(other).approval_requests(first.output) == {}


def test_issued_requests_are_bounded():
    _, _, _, gateway = setup()
    with pytest.raises(ValueError, match="remember"):
        GovernedToolset(gateway, remember=0)
