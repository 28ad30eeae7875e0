"""The LangChain integration: `create_agent` and a plain tool loop over fake chat models, every call governed.

No model API: `ToolCallingFake` (LangChain's `GenericFakeChatModel`, which can
bind tools) answers with scripted `AIMessage`s. Each case counts the tool
body's runs and reads the audit events of the run.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import threading
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from agent_framework_support import RUNS, THREADS, Governed, governed
from toolbox import ExecutionContext, Gateway
from toolbox.governance import Approval, HmacApprover
from toolbox.integrations.langchain import APPROVALS_KEY, CONTEXT_KEY, GovernedLangChainTools, resume_value

OK = ("INTENT_DECLARED", "GOVERNANCE_DECISION", "INVOCATION_REQUEST", "INVOCATION_RESPONSE")
REFUND = {"order": "o-7", "amount": 30, "audit_as": "Refund a late order"}


class ToolCallingFake(GenericFakeChatModel):
    """LangChain's generic fake chat model, accepting ``bind_tools`` as agents require."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:
        return self


def ask(name: str, arguments: Any, call_id: str) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": arguments, "id": call_id, "type": "tool_call"}]
    )


def tool_call(name: str, arguments: Any, call_id: str) -> dict[str, Any]:
    return {"name": name, "args": arguments, "id": call_id, "type": "tool_call"}


def model(*replies: AIMessage) -> ToolCallingFake:
    return ToolCallingFake(messages=iter(replies))


def configured(g: Governed, **extra: Any) -> dict[str, Any]:
    return {"configurable": {CONTEXT_KEY: g.context, **extra}}


def agent_run(
    g: Governed, tools: GovernedLangChainTools, *replies: AIMessage, **extra: Any
) -> list[BaseMessage]:
    agent = create_agent(model(*replies, AIMessage(content="done")), tools=tools.tools)
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]}, config=configured(g, **extra)))
    return list(out["messages"])


def tool_messages(messages: list[BaseMessage]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def by_name(tools: GovernedLangChainTools, name: str) -> BaseTool:
    return next(t for t in tools.tools if t.name == name)


def refusal(message: ToolMessage) -> dict[str, Any]:
    assert message.status == "error"
    parsed = json.loads(str(message.content))
    assert isinstance(parsed, dict)
    return parsed


def responses(g: Governed, name: str) -> list[str | None]:
    return [status for kind, event, status in g.events() if event == name and kind == "INVOCATION_RESPONSE"]


# -- create_agent: the four cases ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["math__add", "math__aadd"])
def test_allowed_tool_runs_once_inline_and_is_audited(name):
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    messages = agent_run(g, tools, ask(name, {"a": 2, "b": 3, "purpose": "Sum"}, "c1"))
    answer = tool_messages(messages)["c1"]
    assert answer.content == "5" and answer.status == "success"
    assert RUNS[name.removeprefix("math__")] == 1
    dotted = name.replace("__", ".")
    assert [kind for kind, event, _ in g.events() if event == dotted] == list(OK)
    assert responses(g, dotted) == ["SUCCESS"]
    assert {r.tenant for r in g.records()} == {"acme"}


def test_def_memory_only_tool_runs_on_the_event_loop_thread():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    agent_run(g, tools, ask("math__add", {"a": 1, "b": None, "purpose": "Sum"}, "c1"))
    assert [threading.current_thread().name] == THREADS  # LangChain would run a def tool on a thread


def test_denied_tool_is_an_error_tool_message_and_the_run_goes_on():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    messages = agent_run(g, tools, ask("shop__wipe", {"target": "db", "audit_as": "Wipe"}, "c1"))
    answer = refusal(tool_messages(messages)["c1"])
    assert answer["status"] == "DENIED" and answer["reason_code"] == "AUTH_DENIED"
    assert messages[-1].content == "done"
    assert RUNS["wipe"] == 0
    assert [(k, s) for k, e, s in g.events() if e == "shop.wipe"] == [
        ("INTENT_DECLARED", None),
        ("GOVERNANCE_DECISION", "DENIED"),
        ("INVOCATION_RESPONSE", "DENIED"),
    ]


def test_bad_arguments_come_back_with_the_field_and_the_retry_succeeds():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    messages = agent_run(
        g,
        tools,
        ask("math__add", {"a": "two", "b": 3, "purpose": "Sum"}, "c1"),
        ask("math__add", {"a": 2, "b": 3, "purpose": "Sum"}, "c2"),
    )
    found = tool_messages(messages)
    first = refusal(found["c1"])
    assert first["status"] == "INVALID_ARGUMENTS" and first["field_path"] == "a"
    assert found["c2"].content == "5"
    assert RUNS["add"] == 1
    assert responses(g, "math.add") == ["INVALID_ARGUMENTS", "SUCCESS"]


def approval_needed(g: Governed, tools: GovernedLangChainTools) -> ToolMessage:
    message = tool_messages(agent_run(g, tools, ask("shop__refund", REFUND, "c1")))["c1"]
    assert refusal(message)["status"] == "APPROVAL_REQUIRED"
    assert RUNS["refund"] == 0
    return message


def test_approval_then_the_granted_call_runs_once():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    message = approval_needed(g, tools)
    request = tools.pending(message)
    assert request is not None and request.tool == "shop.refund" and request.arguments["amount"] == 30
    grant = g.approver.grant(request, approved_by="manager")
    refund = by_name(tools, "shop__refund")
    answer = asyncio.run(
        refund.ainvoke(
            tool_call("shop__refund", REFUND, "c1"), config=configured(g, **{APPROVALS_KEY: {"c1": grant}})
        )
    )
    assert isinstance(answer, ToolMessage) and answer.status == "success"
    assert answer.content == "refunded 30 on o-7"
    assert RUNS["refund"] == 1
    assert responses(g, "shop.refund") == ["APPROVAL_REQUIRED", "SUCCESS"]


def test_invoke_approved_runs_the_held_call_once_with_its_own_arguments():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    message = approval_needed(g, tools)
    request = tools.pending(message)
    assert request is not None
    grant = g.approver.grant(request, approved_by="manager")
    # What the message says is not what runs: the held call does.
    tampered = message.model_copy(update={"content": '{"amount": 30000}'})
    answer = asyncio.run(tools.ainvoke_approved(tampered, grant, config=configured(g)))
    assert answer.status == "success" and answer.content == "refunded 30 on o-7"
    assert answer.tool_call_id == "c1"
    assert RUNS["refund"] == 1
    with pytest.raises(ValueError, match="no pending approval"):
        tools.invoke_approved(message, grant, config=configured(g))  # redeemed once
    assert RUNS["refund"] == 1
    assert responses(g, "shop.refund") == ["APPROVAL_REQUIRED", "SUCCESS"]


def test_invoke_approved_refuses_a_grant_for_another_request():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    first, second = approval_needed(g, tools), approval_needed(g, tools)
    other = tools.pending(second)
    assert other is not None
    foreign = g.approver.grant(other, approved_by="manager")
    with pytest.raises(ValueError, match="no pending approval"):
        tools.invoke_approved(first, foreign, config=configured(g))
    with pytest.raises(ValueError, match="no pending approval"):
        tools.invoke_approved(AIMessage(content="x"), foreign, config=configured(g))
    assert RUNS["refund"] == 0


def test_without_a_grant_nothing_runs():
    """Rejecting is not re-invoking: the call was held before the tool's code."""
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    approval_needed(g, tools)
    assert RUNS["refund"] == 0
    assert responses(g, "shop.refund") == ["APPROVAL_REQUIRED"]


def test_the_grant_does_not_cover_edited_arguments():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    request = tools.pending(approval_needed(g, tools))
    assert request is not None
    grant = g.approver.grant(request, approved_by="manager")
    edited = {**REFUND, "amount": 30_000}
    answer = by_name(tools, "shop__refund").invoke(
        tool_call("shop__refund", edited, "c1"), config=configured(g, **{APPROVALS_KEY: {"c1": grant}})
    )
    parsed = refusal(answer)
    assert parsed["reason_code"] == "APPROVAL_INVALID" and "other arguments" in parsed["message"]
    assert RUNS["refund"] == 0
    assert responses(g, "shop.refund") == ["APPROVAL_REQUIRED", "DENIED"]


# -- a plain tool loop (sync) ----------------------------------------------------------------------


def tool_loop(g: Governed, tools: GovernedLangChainTools, chat: ToolCallingFake) -> list[BaseMessage]:
    """The loop people write by hand: call the model, run each tool call, until it answers."""
    bound = chat.bind_tools(tools.tools)
    named = {t.name: t for t in tools.tools}
    messages: list[BaseMessage] = [HumanMessage("go")]
    while True:
        reply = bound.invoke(messages)
        messages.append(reply)
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            return messages
        for call in reply.tool_calls:
            messages.append(named[call["name"]].invoke(call, config=configured(g)))


def test_a_plain_tool_loop_covers_the_four_cases():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    chat = model(
        ask("math__add", {"a": 2, "b": 3, "purpose": "Sum"}, "c1"),
        ask("shop__wipe", {"target": "db", "audit_as": "Wipe"}, "c2"),
        ask("math__add", {"a": 2, "b": "x", "purpose": "Sum"}, "c3"),
        ask("math__add", {"a": 2, "b": 4, "purpose": "Sum"}, "c4"),
        ask("shop__refund", REFUND, "c5"),
        AIMessage(content="waiting for a manager"),
    )
    found = tool_messages(tool_loop(g, tools, chat))
    assert found["c1"].content == "5" and found["c4"].content == "6"
    assert refusal(found["c2"])["reason_code"] == "AUTH_DENIED"
    assert refusal(found["c3"])["field_path"] == "b"
    request = tools.pending(found["c5"])
    assert request is not None
    assert RUNS == {"add": 2}
    assert [threading.current_thread().name] * 2 == THREADS
    grant = g.approver.grant(request, approved_by="manager")
    config = configured(g, **{APPROVALS_KEY: {"c5": grant}})
    answer = by_name(tools, "shop__refund").invoke(tool_call("shop__refund", REFUND, "c5"), config=config)
    assert answer.content == "refunded 30 on o-7"
    assert RUNS == {"add": 2, "refund": 1}
    assert responses(g, "math.add") == ["SUCCESS", "INVALID_ARGUMENTS", "SUCCESS"]
    assert responses(g, "shop.wipe") == ["DENIED"]
    assert responses(g, "shop.refund") == ["APPROVAL_REQUIRED", "SUCCESS"]


# -- attacks on grants ----------------------------------------------------------------------------


def granted_refund(g: Governed, tools: GovernedLangChainTools, grants: Any, call_id: str = "c1") -> Any:
    return by_name(tools, "shop__refund").invoke(
        tool_call("shop__refund", REFUND, call_id), config=configured(g, **{APPROVALS_KEY: grants})
    )


def test_a_grant_signed_by_another_secret_is_refused():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    request = tools.pending(approval_needed(g, tools))
    assert request is not None
    forged = HmacApprover(b"an-attacker-guessed-this-secret").grant(request, approved_by="me")
    assert refusal(granted_refund(g, tools, {"c1": forged}))["reason_code"] == "APPROVAL_INVALID"
    assert RUNS["refund"] == 0


@pytest.mark.parametrize(
    "grant",
    [{"request_id": "x", "fingerprint": "y"}, "approved", Approval("x", "y", "me", 9e9, "sig")],
    ids=["mapping", "string", "made-up-approval"],
)
def test_a_malformed_or_made_up_grant_is_refused_audited(grant):
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    answer = refusal(granted_refund(g, tools, {"c1": grant}))
    assert answer["reason_code"] == "APPROVAL_INVALID"
    assert RUNS["refund"] == 0
    assert responses(g, "shop.refund") == ["DENIED"]


def test_a_grant_applies_only_to_its_tool_call_and_only_once():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    request = tools.pending(approval_needed(g, tools))
    assert request is not None
    grant = g.approver.grant(request, approved_by="manager")
    assert refusal(granted_refund(g, tools, {"c1": grant}, call_id="c9"))["status"] == "APPROVAL_REQUIRED"
    assert granted_refund(g, tools, {"c1": grant}).content == "refunded 30 on o-7"
    assert refusal(granted_refund(g, tools, {"c1": grant}))["message"] == "the approval was already used"
    assert RUNS["refund"] == 1


def test_one_grant_raced_from_many_threads_runs_the_call_once():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    request = tools.pending(approval_needed(g, tools))
    assert request is not None
    grant = g.approver.grant(request, approved_by="manager")
    barrier = threading.Barrier(8)
    answers: list[Any] = []

    def redeem() -> None:
        barrier.wait()
        answers.append(granted_refund(g, tools, {"c1": grant}))

    threads = [threading.Thread(target=redeem) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(a.status for a in answers) == ["error"] * 7 + ["success"]
    assert RUNS["refund"] == 1
    assert responses(g, "shop.refund").count("SUCCESS") == 1


def test_pending_trusts_only_the_request_it_holds():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    message = approval_needed(g, tools)
    forged = message.model_copy(update={"artifact": {"approval": {"id": "made-up", "fingerprint": "f"}}})
    assert tools.pending(forged) is None
    assert tools.pending(AIMessage(content="x")) is None
    assert tools.pending({"artifact": message.artifact}) is None
    held = tools.pending(message)
    assert held is not None and held.arguments == {"order": "o-7", "amount": 30}


# -- attacks on context and arguments -------------------------------------------------------------


@pytest.mark.parametrize(
    "smuggled",
    [
        {"tenant": "evil"},
        {"toolbox_context": {"tenant": "evil"}},
        {"config": {}},
        {"callbacks": []},
        {"run_manager": 1},
    ],
    ids=["tenant", "context-key", "config", "callbacks", "run_manager"],
)
def test_context_and_langchain_keywords_smuggled_in_arguments_are_refused(smuggled):
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    arguments = {"a": 1, "b": 2, "purpose": "Sum", **smuggled}
    answer = by_name(tools, "math__add").invoke(tool_call("math__add", arguments, "c1"), config=configured(g))
    parsed = refusal(answer)
    assert parsed["status"] == "INVALID_ARGUMENTS"
    assert RUNS["add"] == 0
    assert {r.tenant for r in g.records()} == {"acme"}


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"configurable": {CONTEXT_KEY: {"tenant": "evil", "principal": "root"}}},
        {"configurable": {CONTEXT_KEY: "a-session-reference"}},
        {"configurable": {"tenant": "evil"}},
        {"metadata": {CONTEXT_KEY: ExecutionContext(tenant="evil", principal="root")}},
    ],
    ids=["none", "dict-shaped-like-a-context", "reference-without-resolver", "tenant-key", "in-metadata"],
)
def test_no_trusted_context_in_the_config_is_refused(config):
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    arguments = {"a": 1, "b": 2, "purpose": "Sum"}
    answer = by_name(tools, "math__add").invoke(tool_call("math__add", arguments, "c1"), config=config)
    assert refusal(answer)["reason_code"] == "NO_TRUSTED_CONTEXT"
    assert RUNS["add"] == 0
    assert len(g.gateway.unattributed) == 1


def test_a_development_gateways_fallback_applies_to_no_context_never_to_a_failing_function():
    from agent_framework_support import TOOLS

    RUNS.clear()
    fallback = ExecutionContext(tenant="dev", principal="developer")
    gateway = Gateway(
        Gateway.load(providers=list(TOOLS), discover=False, env={}).catalog,
        strict=False,
        fallback_context=fallback,
    )
    call = tool_call("math__add", {"a": 1, "b": 2, "purpose": "Sum"}, "c1")
    assert by_name(GovernedLangChainTools(gateway), "math__add").invoke(call, config={}).content == "3"
    assert [r.tool for r in fallback.trace] == ["math.add"]

    def broken(config: Any) -> ExecutionContext:
        raise LookupError("no session")

    answer = by_name(GovernedLangChainTools(gateway, context=broken), "math__add").invoke(call, config={})
    assert refusal(answer)["reason_code"] == "NO_TRUSTED_CONTEXT"
    assert RUNS["add"] == 1


def test_a_context_function_reads_the_config_and_a_failing_one_refuses():
    g = governed()
    tools = GovernedLangChainTools(
        g.gateway, context=lambda config: config["configurable"]["session"].context
    )

    class Session:
        context = g.context

    call = tool_call("math__add", {"a": 1, "b": 2, "purpose": "Sum"}, "c1")
    assert (
        by_name(tools, "math__add").invoke(call, config={"configurable": {"session": Session()}}).content
        == "3"
    )
    answer = by_name(tools, "math__add").invoke(call, config={"configurable": {}})
    assert refusal(answer)["reason_code"] == "NO_TRUSTED_CONTEXT"
    assert RUNS["add"] == 1


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"a": 1, "b": 2, "purpose": "x" * 70_000}, "too_large"),
        ({"a": {"b": {"c": {}}}, "b": 0, "purpose": "Sum"}, None),
        ({"a": json.loads("[" * 100 + "]" * 100), "b": 0, "purpose": "Sum"}, "too_deep"),
        ({"a": list(range(5000)), "b": 0, "purpose": "Sum"}, "too_many_items"),
    ],
    ids=["huge", "nested-wrong-type", "deep", "many-items"],
)
def test_huge_and_nested_arguments_never_run_the_tool(arguments, code):
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    answer = refusal(
        by_name(tools, "math__add").invoke(tool_call("math__add", arguments, "c1"), config=configured(g))
    )
    assert answer["status"] == "INVALID_ARGUMENTS"
    if code is not None:
        assert answer["error_code"] == code
    assert RUNS["add"] == 0


def test_input_that_is_not_an_object_is_refused_audited():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    answer = by_name(tools, "math__add").invoke(tool_call("math__add", ["a", 1], "c1"), config=configured(g))
    assert refusal(answer)["status"] == "INVALID_ARGUMENTS"
    assert responses(g, "math.add") == ["INVALID_ARGUMENTS"]
    assert RUNS["add"] == 0


def test_without_a_tool_call_a_tool_answers_with_text():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    assert (
        by_name(tools, "math__add").invoke({"a": 1, "b": None, "purpose": "Sum"}, config=configured(g)) == "1"
    )
    denied = by_name(tools, "shop__wipe").invoke({"target": "db", "audit_as": "Wipe"}, config=configured(g))
    assert json.loads(denied)["reason_code"] == "AUTH_DENIED"


# -- what bind_tools sends, packaging -------------------------------------------------------------


def test_bind_tools_sends_wire_names_and_strict_schemas():
    g = governed()
    tools = GovernedLangChainTools(g.gateway)
    sent = {t["function"]["name"]: t["function"] for t in map(convert_to_openai_tool, tools.tools)}
    assert set(sent) == {"math__add", "math__aadd", "shop__refund", "shop__wipe"}
    schema = sent["math__add"]["parameters"]
    assert schema["additionalProperties"] is False and schema["required"] == ["a", "b", "purpose"]
    assert sent["math__add"]["description"] == "Add two integers."


def test_missing_langchain_names_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m == "langchain_core" or m.startswith("langchain_core.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "toolbox.integrations.langchain")
    with pytest.raises(ImportError, match=r'pip install "toolbox-registry\[langchain\]"'):
        importlib.import_module("toolbox.integrations.langchain")
    monkeypatch.undo()
    importlib.import_module("toolbox.integrations.langchain")


def test_the_context_must_be_a_callable():
    with pytest.raises(TypeError, match="callable"):
        GovernedLangChainTools(governed().gateway, context="ctx")  # type: ignore[arg-type]


# -- approval="interrupt": the graph pauses with LangGraph's interrupt ------------------------------


def paused_agent(
    g: Governed, tools: GovernedLangChainTools, *after: AIMessage
) -> tuple[Any, dict[str, Any], Any]:
    from langgraph.checkpoint.memory import InMemorySaver

    chat = model(ask("shop__refund", REFUND, "c1"), *after)
    agent = create_agent(chat, tools=tools.tools, checkpointer=InMemorySaver())
    config = {"configurable": {CONTEXT_KEY: g.context, "thread_id": "t-1"}}
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("refund")]}, config=config))
    [paused] = out["__interrupt__"]
    assert RUNS["refund"] == 0
    return agent, config, paused


def resumed(agent: Any, config: dict[str, Any], value: Any) -> dict[str, ToolMessage]:
    from langgraph.types import Command

    out = asyncio.run(agent.ainvoke(Command(resume=value), config=config))
    return tool_messages(out["messages"])


def test_interrupt_pauses_the_graph_and_the_grant_resumes_it_once():
    g = governed()
    tools = GovernedLangChainTools(g.gateway, approval="interrupt")
    agent, config, paused = paused_agent(g, tools, AIMessage(content="refunded"))
    request = tools.pending(paused)
    assert request is not None and request.arguments == {"order": "o-7", "amount": 30}
    assert paused.value["tool_call_id"] == "c1"
    answer = resumed(agent, config, resume_value(g.approver.grant(request, approved_by="manager")))["c1"]
    assert answer.status == "success" and answer.content == "refunded 30 on o-7"
    assert RUNS["refund"] == 1
    # LangGraph runs the tool again on resume, so the gateway asked twice before the grant ran it.
    assert responses(g, "shop.refund") == ["APPROVAL_REQUIRED", "APPROVAL_REQUIRED", "SUCCESS"]


def test_interrupt_resumed_with_a_rejection_runs_nothing():
    g = governed()
    tools = GovernedLangChainTools(g.gateway, approval="interrupt")
    agent, config, _ = paused_agent(g, tools, AIMessage(content="declined"))
    answer = refusal(resumed(agent, config, resume_value(None))["c1"])
    assert answer["reason_code"] == "APPROVAL_DECLINED"
    assert RUNS["refund"] == 0
    assert "SUCCESS" not in responses(g, "shop.refund")


@pytest.mark.parametrize(
    "value",
    [
        "yes",
        {"approved": True},
        {"request_id": 1, "fingerprint": "f", "approved_by": "m", "expires_at": 1.0, "signature": "s"},
    ],
    ids=["string", "other-mapping", "wrong-types"],
)
def test_interrupt_resumed_with_something_that_is_not_a_grant_is_refused_audited(value):
    g = governed()
    tools = GovernedLangChainTools(g.gateway, approval="interrupt")
    agent, config, _ = paused_agent(g, tools, AIMessage(content="refused"))
    answer = refusal(resumed(agent, config, value)["c1"])
    assert answer["reason_code"] == "APPROVAL_INVALID"
    assert RUNS["refund"] == 0
    assert responses(g, "shop.refund")[-1] == "DENIED"


def test_interrupt_resumed_with_a_grant_for_other_arguments_is_refused():
    g = governed()
    tools = GovernedLangChainTools(g.gateway, approval="interrupt")
    agent, config, _ = paused_agent(g, tools, AIMessage(content="refused"))
    other = g.gateway.invoke("shop.refund", {**REFUND, "amount": 1}, context=g.context)
    assert other.approval is not None
    forged = resume_value(g.approver.grant(other.approval, approved_by="manager"))
    answer = refusal(resumed(agent, config, forged)["c1"])
    assert answer["reason_code"] == "APPROVAL_INVALID" and "other arguments" in answer["message"]
    assert RUNS["refund"] == 0


def test_interrupt_mode_outside_a_graph_answers_with_the_held_message():
    g = governed()
    tools = GovernedLangChainTools(g.gateway, approval="interrupt")
    answer = by_name(tools, "shop__refund").invoke(
        tool_call("shop__refund", REFUND, "c1"), config=configured(g)
    )
    assert refusal(answer)["status"] == "APPROVAL_REQUIRED" and tools.pending(answer) is not None
    with pytest.raises(ValueError, match="'message' or 'interrupt'"):
        GovernedLangChainTools(g.gateway, approval="ask")
    with pytest.raises(TypeError):
        resume_value("grant")  # type: ignore[arg-type]
