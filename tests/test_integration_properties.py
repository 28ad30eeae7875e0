"""Property tests of the OpenAI Agents SDK and LangChain rooms: any model input is answered, never raised.

Whatever the model sends (any JSON object, extra keys such as a tenant or
LangChain's own keywords, wrong types, nulls), the tool answers with something
the model reads, the body runs at most once and only for valid arguments, and
every audit event names the trusted tenant.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents.tool_context import ToolContext
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage

from agent_framework_support import RUNS, governed
from toolbox.integrations.langchain import CONTEXT_KEY, GovernedLangChainTools
from toolbox.integrations.openai_agents import GovernedAgentTools

KEYS = st.sampled_from(["a", "b", "purpose", "tenant", "principal", "config", "callbacks", "run_manager", ""])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)
ARGUMENTS = st.dictionaries(KEYS, JSON, max_size=6)


def valid(arguments: dict[str, Any]) -> bool:
    """Whether ``arguments`` is a call of ``add(a: int, b: int = 0)`` with a purpose (strict ints)."""
    a, b, purpose = arguments.get("a"), arguments.get("b"), arguments.get("purpose")
    return (
        set(arguments) <= {"a", "b", "purpose"}
        and type(a) is int
        and (b is None or type(b) is int)
        and isinstance(purpose, str)
        and bool(purpose.strip())
    )


@given(ARGUMENTS)
def test_any_agents_arguments_are_answered_and_run_only_when_valid(arguments):
    g = governed()
    tool = next(t for t in GovernedAgentTools(g.gateway).tools if t.name == "math__add")
    text = json.dumps(arguments)
    ctx = ToolContext(g.context, tool_name="math__add", tool_call_id="c1", tool_arguments=text)
    answer = asyncio.run(tool.on_invoke_tool(ctx, text))  # type: ignore[attr-defined]
    assert isinstance(answer, str)
    ran = RUNS["add"]
    assert ran <= 1
    if ran:
        assert answer == str(arguments["a"] + (arguments.get("b") or 0))
    else:
        assert json.loads(answer)["status"] in ("INVALID_ARGUMENTS", "DENIED")
    assert {r.tenant for r in g.records()} == {"acme"}


@given(ARGUMENTS)
def test_any_langchain_arguments_are_answered_and_run_only_when_valid(arguments):
    g = governed()
    tool = next(t for t in GovernedLangChainTools(g.gateway).tools if t.name == "math__add")
    call = {"name": "math__add", "args": arguments, "id": "c1", "type": "tool_call"}
    answer = tool.invoke(call, config={"configurable": {CONTEXT_KEY: g.context}})
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == "c1"
    ran = RUNS["add"]
    assert ran <= 1
    assert (answer.status == "success") == bool(ran)
    assert {r.tenant for r in g.records()} == {"acme"}
    if valid(arguments):
        assert ran == 1
