"""The OpenAI Agents SDK integration: `Runner.run` with a scripted `Model`, every call governed.

No OpenAI call and no API key: `ScriptedModel` answers each turn. Each case
counts the tool body's runs and reads the audit events of the run.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
import threading
from typing import Any

import pytest
from agents import Agent, FunctionTool, ModelBehaviorError, RunConfig, Runner, RunState, set_tracing_disabled
from agents._tool_invocation import tool_invocation_identity
from agents.strict_schema import ensure_strict_json_schema

from agent_framework_support import RUNS, THREADS, TOOLS, Governed, governed
from scripted_agents_model import ScriptedModel, call, say
from toolbox import ExecutionContext, Gateway, Governance, ToolPolicy
from toolbox.audit import AuditTrail, MemorySink
from toolbox.governance import Guardrail, GuardrailAction, HmacApprover
from toolbox.integrations.openai_agents import GovernedAgentTools

set_tracing_disabled(True)  # the SDK would otherwise try to export traces to OpenAI

OK = ("INTENT_DECLARED", "GOVERNANCE_DECISION", "INVOCATION_REQUEST", "INVOCATION_RESPONSE")


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def agent(tools: GovernedAgentTools, model: ScriptedModel) -> Agent[Any]:
    return Agent(name="clerk", instructions="Use the tools.", model=model, tools=tools.tools)


def refusal(text: str) -> dict[str, Any]:
    parsed = json.loads(text)
    assert isinstance(parsed, dict)
    return parsed


def events_of(g: Governed, name: str) -> list[tuple[str, str | None]]:
    return [(kind, status) for kind, event_name, status in g.events() if event_name == name]


# -- the four cases ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["math__add", "math__aadd"])
def test_allowed_tool_runs_once_inline_and_is_audited(name):
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = ScriptedModel([call(name, {"a": 2, "b": 3, "purpose": "Sum"}, "c1")], [say("5")])
    result = run(Runner.run(agent(tools, model), "add 2 and 3", context=g.context))
    assert result.final_output == "5"
    assert model.tool_outputs() == {"c1": "5"}
    assert RUNS[name.replace("math__", "")] == 1
    dotted = name.replace("__", ".")
    assert [kind for kind, _ in events_of(g, dotted)] == list(OK)
    assert events_of(g, dotted)[-1] == ("INVOCATION_RESPONSE", "SUCCESS")
    assert {r.tenant for r in g.records()} == {"acme"} and {r.principal for r in g.records()} == {"alice"}


def test_def_memory_only_tool_runs_on_the_event_loop_thread():
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = ScriptedModel(
        [call("math__add", {"a": 1, "b": None, "purpose": "Sum"}, "c1")],
        [call("math__add", {"a": 2, "b": None, "purpose": "Sum"}, "c2")],
        [say("done")],
    )
    run(Runner.run(agent(tools, model), "go", context=g.context))
    assert [threading.current_thread().name] * 2 == THREADS  # never a worker thread


def test_denied_tool_is_a_refusal_the_model_reads_and_the_run_goes_on():
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = ScriptedModel([call("shop__wipe", {"target": "db", "audit_as": "Wipe"}, "c1")], [say("refused")])
    result = run(Runner.run(agent(tools, model), "wipe it", context=g.context))
    assert result.final_output == "refused"
    answer = refusal(model.tool_outputs()["c1"])
    assert answer["status"] == "DENIED" and answer["reason_code"] == "AUTH_DENIED"
    assert RUNS["wipe"] == 0
    assert events_of(g, "shop.wipe") == [
        ("INTENT_DECLARED", None),
        ("GOVERNANCE_DECISION", "DENIED"),
        ("INVOCATION_RESPONSE", "DENIED"),
    ]


def _policy_denies_wipe() -> Governed:
    """`governed()`'s tools, but the policy denies ``shop.wipe``: it is never offered to the model."""
    g = governed()
    sink = MemorySink()
    gateway = Gateway.load(
        policy=ToolPolicy.standard().deny("shop.wipe"),
        providers=list(TOOLS),
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink), approver=g.approver),
    )
    return Governed(gateway, sink, g.approver)


def test_the_sdks_default_ends_the_run_when_the_model_names_a_tool_it_was_not_offered():
    """What the documented set-up now avoids: under the SDK's own default the run crashes."""
    g = _policy_denies_wipe()
    tools = GovernedAgentTools(g.gateway)
    assert "shop__wipe" not in [t.name for t in tools.tools]
    model = ScriptedModel([call("shop__wipe", {"target": "db", "audit_as": "Wipe"}, "c1")], [say("ok")])
    with pytest.raises(ModelBehaviorError):
        run(Runner.run(agent(tools, model), "wipe it", context=g.context))


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("shop__wipe", "POLICY_DENIED"),
        ("bank__purge", "TOOL_UNAVAILABLE"),
        ("shop.refund", "TOOL_NOT_OFFERED"),
    ],
)
def test_a_tool_not_offered_is_a_governed_refusal_under_run_config(name, reason):
    """With ``run_config=governed.run_config()`` a denied, unknown or misspelled name is an answer."""
    g = _policy_denies_wipe()
    tools = GovernedAgentTools(g.gateway)
    model = ScriptedModel([call(name, {"target": "db", "audit_as": "Wipe"}, "c1")], [say("refused")])
    result = run(Runner.run(agent(tools, model), "wipe it", context=g.context, run_config=tools.run_config()))
    assert result.final_output == "refused"
    answer = refusal(model.tool_outputs()["c1"])
    assert (answer["status"], answer["reason_code"]) == ("DENIED", reason)
    assert RUNS["wipe"] == 0 and RUNS["refund"] == 0
    if reason != "TOOL_NOT_OFFERED":  # the refusal is the gateway's own, recorded and audited
        decisions = [(e.decision, e.reason_code) for e in g.records() if e.type == "GOVERNANCE_DECISION"]
        assert decisions == [("DENY", reason)]


def test_run_config_keeps_the_base_settings_and_its_formatter_for_other_errors():
    g = _policy_denies_wipe()
    tools = GovernedAgentTools(g.gateway)
    seen: list[str] = []

    def mine(args: Any) -> str:
        seen.append(args.kind)
        return "mine"

    config = tools.run_config(RunConfig(workflow_name="clerk", tool_error_formatter=mine))
    assert config.workflow_name == "clerk" and config.tool_not_found_behavior == "return_error_to_model"
    model = ScriptedModel([call("bank__purge", {}, "c1")], [say("done")])
    run(Runner.run(agent(tools, model), "purge", context=g.context, run_config=config))
    assert refusal(model.tool_outputs()["c1"])["reason_code"] == "TOOL_UNAVAILABLE" and seen == []


def test_bad_arguments_come_back_with_the_field_and_the_retry_succeeds():
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = ScriptedModel(
        [call("math__add", {"a": "two", "b": 3, "purpose": "Sum"}, "c1")],
        [call("math__add", {"a": 2, "b": 3, "purpose": "Sum"}, "c2")],
        [say("5")],
    )
    result = run(Runner.run(agent(tools, model), "add", context=g.context))
    assert result.final_output == "5"
    first = refusal(model.tool_outputs()["c1"])
    assert first["status"] == "INVALID_ARGUMENTS" and first["field_path"] == "a"
    assert model.tool_outputs()["c2"] == "5"
    assert RUNS["add"] == 1
    assert [s for k, s in events_of(g, "math.add") if k == "INVOCATION_RESPONSE"] == [
        "INVALID_ARGUMENTS",
        "SUCCESS",
    ]


def interrupted(g: Governed, tools: GovernedAgentTools, model: ScriptedModel) -> tuple[Any, Agent[Any]]:
    clerk = agent(tools, model)
    result = run(Runner.run(clerk, "refund order 7", context=g.context))
    assert result.final_output is None and len(result.interruptions) == 1
    return result, clerk


def refund_model(*after: list[Any]) -> ScriptedModel:
    arguments = {"order": "o-7", "amount": 30, "audit_as": "Refund a late order"}
    return ScriptedModel([call("shop__refund", arguments, "c1")], *after)


def test_approval_interrupts_and_the_granted_resume_runs_once():
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = refund_model([say("refunded")])
    result, clerk = interrupted(g, tools, model)
    assert RUNS["refund"] == 0
    [pending] = tools.pending(result)
    assert pending.request.tool == "shop.refund"
    assert pending.request.arguments["amount"] == 30
    assert events_of(g, "shop.refund")[-1] == ("INVOCATION_RESPONSE", "APPROVAL_REQUIRED")

    state = result.to_state()
    tools.approve(state, pending, g.approver.grant(pending.request, approved_by="manager"))
    resumed = run(Runner.run(clerk, state))
    assert resumed.final_output == "refunded"
    assert model.tool_outputs()["c1"] == "refunded 30 on o-7"
    assert RUNS["refund"] == 1
    assert [s for k, s in events_of(g, "shop.refund") if k == "INVOCATION_RESPONSE"] == [
        "APPROVAL_REQUIRED",
        "SUCCESS",
    ]


def test_rejection_runs_the_tool_zero_times():
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = refund_model([say("not refunded")])
    result, clerk = interrupted(g, tools, model)
    [pending] = tools.pending(result)
    state = result.to_state()
    tools.reject(state, pending, message="the manager said no")
    resumed = run(Runner.run(clerk, state))
    assert resumed.final_output == "not refunded"
    assert model.tool_outputs()["c1"] == "the manager said no"
    assert RUNS["refund"] == 0
    assert [s for k, s in events_of(g, "shop.refund") if k == "INVOCATION_RESPONSE"] == ["APPROVAL_REQUIRED"]
    assert tools.pending(result) == []


def test_resuming_with_edited_arguments_is_refused():
    """An attacker edits the serialized state (arguments and the SDK's own record of them)."""
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = refund_model([say("refused")])
    result, clerk = interrupted(g, tools, model)
    [pending] = tools.pending(result)
    state = result.to_state()
    tools.approve(state, pending, g.approver.grant(pending.request, approved_by="manager"))
    original = state.to_json()
    snapshot = json.dumps(original).replace('\\"amount\\": 30', '\\"amount\\": 30000')
    # The SDK keeps an unkeyed fingerprint of each call; an attacker recomputes it for the edit.
    edited = run(
        RunState.from_json(
            clerk,
            json.loads(
                snapshot.replace(original["context"]["tool_invocations"]["c1"]["fingerprint"], "0" * 64)
            ),
            context_override=g.context,
        )
    )
    fingerprint = tool_invocation_identity(edited.get_interruptions()[0].raw_item)
    assert fingerprint is not None
    snapshot = snapshot.replace(original["context"]["tool_invocations"]["c1"]["fingerprint"], fingerprint[2])
    tampered = run(RunState.from_json(clerk, json.loads(snapshot), context_override=g.context))
    assert json.loads(tampered.get_interruptions()[0].raw_item.arguments)["amount"] == 30000
    resumed = run(Runner.run(clerk, tampered))
    assert resumed.final_output == "refused"
    answer = refusal(model.tool_outputs()["c1"])
    assert answer["status"] == "DENIED" and answer["reason_code"] == "APPROVAL_INVALID"
    assert "other arguments" in answer["message"]
    assert RUNS["refund"] == 0
    assert events_of(g, "shop.refund")[-1] == ("INVOCATION_RESPONSE", "DENIED")


# -- attacks on approval ---------------------------------------------------------------------------


def test_an_sdk_approval_without_a_toolbox_grant_runs_nothing():
    """``state.approve`` alone (or an approval forged into a serialized state) is no grant."""
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = refund_model([say("still waiting")])
    result, clerk = interrupted(g, tools, model)
    state = result.to_state()
    state.approve(result.interruptions[0])
    run(Runner.run(clerk, state))
    answer = refusal(model.tool_outputs()["c1"])
    assert answer["status"] == "APPROVAL_REQUIRED"
    assert RUNS["refund"] == 0


def test_a_grant_signed_by_another_secret_is_refused_when_the_call_runs():
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = refund_model([say("refused")])
    result, clerk = interrupted(g, tools, model)
    [pending] = tools.pending(result)
    state = result.to_state()
    forged = HmacApprover(b"an-attacker-guessed-this-secret").grant(pending.request, approved_by="me")
    tools.approve(state, pending, forged)
    run(Runner.run(clerk, state))
    answer = refusal(model.tool_outputs()["c1"])
    assert answer["reason_code"] == "APPROVAL_INVALID" and "approver" in answer["message"]
    assert RUNS["refund"] == 0


def test_a_grant_for_another_request_is_refused_at_approve():
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    result, _ = interrupted(g, tools, refund_model([say("x")]))
    [pending] = tools.pending(result)
    other_run = ExecutionContext(tenant="acme", principal="alice")
    other = run(Runner.run(agent(tools, refund_model([say("y")])), "refund", context=other_run))
    [other_pending] = tools.pending(other)  # the same arguments and call id, another run
    foreign = g.approver.grant(other_pending.request, approved_by="manager")
    with pytest.raises(ValueError, match="not an Approval issued for this pending request"):
        tools.approve(result.to_state(), pending, foreign)
    with pytest.raises(ValueError, match="not an Approval"):
        tools.approve(result.to_state(), pending, {"request_id": pending.request.id})  # type: ignore[arg-type]
    assert RUNS["refund"] == 0


def test_a_call_id_reused_in_a_later_run_of_the_same_context_is_a_new_call():
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    interrupted(g, tools, refund_model([say("x")]))  # never resumed
    other = {"order": "o-9", "amount": 99, "audit_as": "Another refund"}
    model = ScriptedModel([call("shop__refund", other, "c1")], [say("refunded")])
    clerk = agent(tools, model)
    result = run(Runner.run(clerk, "refund o-9", context=g.context))
    [pending] = tools.pending(result)
    assert pending.request.arguments == {"order": "o-9", "amount": 99}
    state = result.to_state()
    tools.approve(state, pending, g.approver.grant(pending.request, approved_by="manager"))
    run(Runner.run(clerk, state))
    assert model.tool_outputs()["c1"] == "refunded 99 on o-9"
    assert RUNS["refund"] == 1


def test_a_grant_is_redeemed_once():
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = refund_model([say("refunded")])
    result, clerk = interrupted(g, tools, model)
    [pending] = tools.pending(result)
    grant = g.approver.grant(pending.request, approved_by="manager")
    state = result.to_state()
    tools.approve(state, pending, grant)
    run(Runner.run(clerk, state))
    assert RUNS["refund"] == 1
    with pytest.raises(ValueError):
        tools.approve(result.to_state(), pending, grant)  # no longer pending
    replayed = run(
        g.gateway.ainvoke(
            "shop.refund",
            {"order": "o-7", "amount": 30, "audit_as": "again"},
            context=g.context,
            approval=grant,
        )
    )
    assert replayed.reason_code == "APPROVAL_INVALID"
    assert RUNS["refund"] == 1


def test_a_guardrail_approval_interrupts_only_when_its_predicate_holds():
    rule = Guardrail(
        id="BIG_SUM", action=GuardrailAction.REQUIRE_APPROVAL, tool="math.add", when=lambda a: a["a"] > 100
    )
    g = governed(guardrails=[rule])
    tools = GovernedAgentTools(g.gateway)
    model = ScriptedModel(
        [
            call("math__add", {"a": 1, "b": 2, "purpose": "Small"}, "c1"),
            call("math__add", {"a": 500, "b": 2, "purpose": "Big"}, "c2"),
        ],
        [say("done")],
    )
    clerk = agent(tools, model)
    result = run(Runner.run(clerk, "go", context=g.context))
    assert [item.call_id for item in result.interruptions] == ["c2"]
    assert RUNS["add"] == 1  # the small sum ran once, while the SDK asked about approval
    [pending] = tools.pending(result)
    state = result.to_state()
    tools.approve(state, pending, g.approver.grant(pending.request, approved_by="manager"))
    run(Runner.run(clerk, state))
    assert model.tool_outputs() == {"c1": "3", "c2": "502"}
    assert RUNS["add"] == 2


# -- attacks on context and arguments -------------------------------------------------------------


def test_context_smuggled_in_arguments_is_refused():
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    smuggled = {"a": 1, "b": 2, "purpose": "Sum", "tenant": "evil", "context": {"principal": "root"}}
    model = ScriptedModel([call("math__add", smuggled, "c1")], [say("no")])
    run(Runner.run(agent(tools, model), "go", context=g.context))
    answer = refusal(model.tool_outputs()["c1"])
    assert answer["status"] == "INVALID_ARGUMENTS"
    assert RUNS["add"] == 0
    assert {r.tenant for r in g.records()} == {"acme"}


@pytest.mark.parametrize(
    "context",
    [{"tenant": "evil", "principal": "root"}, None, "a-session-reference"],
    ids=["dict-shaped-like-a-context", "none", "reference-without-resolver"],
)
def test_no_trusted_context_in_the_run_context_is_refused(context):
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = ScriptedModel([call("math__add", {"a": 1, "b": 2, "purpose": "Sum"}, "c1")], [say("no")])
    run(Runner.run(agent(tools, model), "go", context=context))
    answer = refusal(model.tool_outputs()["c1"])
    assert answer["reason_code"] == "NO_TRUSTED_CONTEXT"
    assert RUNS["add"] == 0
    assert len(g.gateway.unattributed) == 1


def test_a_context_function_that_raises_is_no_trusted_context():
    g = governed()

    def broken(wrapper: Any) -> ExecutionContext:
        raise KeyError("no session")

    tools = GovernedAgentTools(g.gateway, context=broken)
    model = ScriptedModel(
        [call("shop__refund", {"order": "o", "amount": 1, "audit_as": "x"}, "c1")], [say("no")]
    )
    run(Runner.run(agent(tools, model), "go", context=g.context))
    assert refusal(model.tool_outputs()["c1"])["reason_code"] == "NO_TRUSTED_CONTEXT"
    assert RUNS["refund"] == 0


def test_the_context_function_reads_the_application_context():
    g = governed()

    class Session:
        def __init__(self, context: ExecutionContext) -> None:
            self.execution = context

    tools = GovernedAgentTools(g.gateway, context=lambda wrapper: wrapper.context.execution)
    model = ScriptedModel([call("math__add", {"a": 1, "b": 2, "purpose": "Sum"}, "c1")], [say("3")])
    run(Runner.run(agent(tools, model), "go", context=Session(g.context)))
    assert RUNS["add"] == 1 and {r.principal for r in g.records()} == {"alice"}


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('{"a": 1, "b": 2, "purpose": "' + "x" * 70_000 + '"}', "too_large"),
        ('{"a": ' + "[" * 200 + "]" * 200 + ', "b": 0, "purpose": "Sum"}', "too_deep"),
        ('{"a": 1, "a": 2, "b": 0, "purpose": "Sum"}', "duplicate_key"),
        ('{"a": 1, "b": ', "malformed_json"),
        ('["a", 1]', "not_an_object"),
        ('{"a": ' + '{"b": ' * 100 + "1" + "}" * 100 + ', "b": 0, "purpose": "Sum"}', "too_deep"),
    ],
    ids=["huge", "deep-array", "duplicate-key", "truncated", "array", "deep-object"],
)
def test_bad_argument_text_never_runs_the_tool(text, code):
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = ScriptedModel([call("math__add", text, "c1")], [say("no")])
    run(Runner.run(agent(tools, model), "go", context=g.context))
    answer = refusal(model.tool_outputs()["c1"])
    assert answer["status"] == "INVALID_ARGUMENTS" and answer["error_code"] == code
    assert RUNS["add"] == 0
    assert events_of(g, "math.add")[-1] == ("INVOCATION_RESPONSE", "INVALID_ARGUMENTS")


@pytest.mark.parametrize(
    "arguments",
    [
        {"order": "o" * 70_000, "amount": 1, "audit_as": "Refund"},
        {"order": "o-7", "amount": 1, "audit_as": "Refund", "principal": "root"},
        {"order": "o-7", "amount": "lots", "audit_as": "Refund"},
    ],
    ids=["huge", "smuggled-principal", "bad-type"],
)
def test_bad_arguments_to_an_approval_tool_are_refused_without_asking_a_human(arguments):
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = ScriptedModel([call("shop__refund", arguments, "c1")], [say("no")])
    result = run(Runner.run(agent(tools, model), "refund", context=g.context))
    assert result.interruptions == [] and result.final_output == "no"
    assert refusal(model.tool_outputs()["c1"])["status"] == "INVALID_ARGUMENTS"
    assert RUNS["refund"] == 0
    assert events_of(g, "shop.refund")[-1] == ("INVOCATION_RESPONSE", "INVALID_ARGUMENTS")


def test_argument_text_nested_beyond_pythons_json_limit_fails_in_the_sdk_before_any_tool():
    """The SDK parses argument text itself (to dedupe calls) and raises; nothing runs."""
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    model = ScriptedModel([call("math__add", "[" * 5000 + "]" * 5000, "c1")], [say("no")])
    with pytest.raises(RecursionError):
        run(Runner.run(agent(tools, model), "go", context=g.context))
    assert RUNS["add"] == 0


def test_no_secret_reaches_the_model_or_the_audit():
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    arguments = {"order": "https://shop.test/o/7?api_key=sk-live-123456", "amount": 1, "audit_as": "Refund"}
    model = ScriptedModel([call("shop__refund", arguments, "c1")], [say("x")])
    result = run(Runner.run(agent(tools, model), "go", context=g.context))
    [pending] = tools.pending(result)
    assert "sk-live-123456" not in json.dumps(pending.request.as_dict())
    assert all("sk-live-123456" not in (r.payload_summary or "") for r in g.records())


# -- definitions, packaging ------------------------------------------------------------------------


def test_every_shipped_definition_passes_the_sdks_own_strict_check(tmp_path):
    from agent_framework_support import TOOLS
    from toolbox_fs import FS_ACKNOWLEDGEMENT, FsTool
    from toolbox_http import HttpTool

    g = Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool, FsTool),
        providers=list(TOOLS),
        env={FS_ACKNOWLEDGEMENT.env: FS_ACKNOWLEDGEMENT.value},
        options={"fs": {"roots": [str(tmp_path)]}},
    )
    definitions = g.definitions(format="openai")
    assert {"http__get", "fs__read_text", "calculator__evaluate", "shop__refund"} <= {
        d["function"]["name"] for d in definitions
    }
    for definition in definitions:
        schema = definition["function"]["parameters"]
        assert ensure_strict_json_schema(json.loads(json.dumps(schema))) == schema, definition["function"][
            "name"
        ]
    for function_tool in GovernedAgentTools(g).tools:
        assert isinstance(function_tool, FunctionTool) and function_tool.strict_json_schema is True


def test_missing_sdk_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "toolbox.integrations.openai_agents")
    with pytest.raises(ImportError, match=r'pip install "toolbox-registry\[openai-agents\]"'):
        importlib.import_module("toolbox.integrations.openai_agents")
    monkeypatch.undo()
    importlib.import_module("toolbox.integrations.openai_agents")


def test_the_gateway_must_be_a_gateway():
    with pytest.raises(TypeError, match=r"toolbox\.Gateway"):
        GovernedAgentTools(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        GovernedAgentTools(governed().gateway, context="ctx")  # type: ignore[arg-type]


def test_importing_toolbox_imports_no_framework():
    """Only the rooms import their framework: ``toolbox`` and ``toolbox.integrations`` import none."""
    code = (
        "import sys, toolbox, toolbox.integrations, toolbox.doors.tool_calls, toolbox.integrations._offered\n"
        "loaded = [m for m in ('agents', 'openai', 'langchain_core', 'langchain') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
