"""The model's id of a tool call reaches the chain (``Invocation.call_id``) from every door that
has one: raw OpenAI / Anthropic calls, the OpenAI Agents SDK, LangChain and pydantic-ai. `OtelHook`
records it as ``gen_ai.tool.call.id``; it is model output, so it decides nothing.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents.tool_context import ToolContext
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, ToolResult, tool
from toolbox.doors.tool_calls import aanthropic_tool_result, openai_tool_result
from toolbox.integrations.langchain import CONTEXT_KEY, GovernedLangChainTools
from toolbox.integrations.openai_agents import GovernedAgentTools
from toolbox.integrations.pydantic_ai import GovernedToolset
from toolbox.pipeline._invocation import Invocation

CONTEXT = ExecutionContext(tenant="acme", principal="alice")
ARGUMENTS = {"a": 2, "b": 3, "purpose": "Sum"}


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="math.add")
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class CallIds:
    """An audit hook that keeps each finished call's ``call_id``."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []

    def on_request(self, invocation: Invocation) -> ToolResult | None:
        return None

    def on_response(self, invocation: Invocation, result: ToolResult) -> None:
        self.seen.append(invocation.call_id)


def gateway() -> tuple[Gateway, CallIds]:
    ids = CallIds()
    made = Gateway.load(providers=[add], discover=False, env={}, governance=Governance(audit_hooks=[ids]))
    return made, ids


def test_raw_calls_pass_their_ids():
    g, ids = gateway()
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "math__add", "arguments": json.dumps(ARGUMENTS)},
    }
    openai_tool_result(g, call, context=CONTEXT)
    block = {"type": "tool_use", "id": "toolu_1", "name": "math__add", "input": ARGUMENTS}
    asyncio.run(aanthropic_tool_result(g, block, context=CONTEXT))
    assert ids.seen == ["call_1", "toolu_1"]


def test_the_openai_agents_tool_passes_the_sdk_call_id():
    g, ids = gateway()
    (function_tool,) = GovernedAgentTools(g).tools
    text = json.dumps(ARGUMENTS)
    context = ToolContext(CONTEXT, tool_name="math__add", tool_call_id="agents_1", tool_arguments=text)
    assert asyncio.run(function_tool.on_invoke_tool(context, text)) == "5"  # type: ignore[attr-defined]
    assert ids.seen == ["agents_1"]


def test_the_langchain_tool_passes_the_tool_call_id():
    g, ids = gateway()
    (structured,) = GovernedLangChainTools(g).tools
    call = {"name": "math__add", "args": ARGUMENTS, "id": "lc_1", "type": "tool_call"}
    message = structured.invoke(call, config={"configurable": {CONTEXT_KEY: CONTEXT}})
    assert message.content == "5"
    assert ids.seen == ["lc_1"]


def test_the_pydantic_ai_toolset_passes_the_tool_call_id():
    g, ids = gateway()

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("math__add", ARGUMENTS, tool_call_id="pai_1")])
        return ModelResponse(parts=[TextPart("5")])

    agent: Agent[ExecutionContext, str] = Agent(
        FunctionModel(model), deps_type=ExecutionContext, toolsets=[GovernedToolset(g)]
    )
    result: Any = asyncio.run(agent.run("add", deps=CONTEXT))  # run_sync would leave its loop open
    assert result.output == "5"
    assert ids.seen == ["pai_1"]
