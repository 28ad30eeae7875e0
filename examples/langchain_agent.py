"""Governed tools inside a LangChain agent (`create_agent`), offline.

A fake chat model that can bind tools stands in for a provider: no network, no
API key. The agent adds two numbers, is refused a wipe and asks for a refund;
a human approves it and the application runs that exact tool call with the grant.

Run: ``.venv/bin/python examples/langchain_agent.py``
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.governance import Decision, HmacApprover
from toolbox.integrations.langchain import CONTEXT_KEY, GovernedLangChainTools


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="math.add")
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.IDEMPOTENT, name="shop.refund", requires_approval=True)
def refund(order: str, amount: int) -> str:
    """Refund an order; a human approves each refund."""
    return f"refunded {amount} on {order}"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, name="shop.wipe")
def wipe(target: str) -> str:
    """Wipe a store."""
    return "wiped"


def no_wiping(tool: str, operation: str, context: ExecutionContext, arguments: object, /) -> Decision:
    return Decision.deny("nobody may wipe") if tool == "shop.wipe" else Decision.allow()


class ToolCallingFake(GenericFakeChatModel):
    """LangChain's fake chat model, accepting bind_tools as an agent needs."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFake:
        return self


def asks(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}]
    )


async def main() -> None:
    approver = HmacApprover(b"load-me-from-your-secret-store!")
    sink = MemorySink()
    gateway = Gateway.load(
        providers=[add, refund, wipe],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink), approver=approver, authorizers=[no_wiping]),
    )
    governed = GovernedLangChainTools(gateway)
    model = ToolCallingFake(
        messages=iter(
            [
                asks("math__add", {"a": 2, "b": 3, "purpose": "Total the order"}, "c1"),
                asks("shop__wipe", {"target": "orders", "audit_as": "Clean up"}, "c2"),
                asks("shop__refund", {"order": "o-7", "amount": 5, "audit_as": "Late order"}, "c3"),
                AIMessage(content="A manager will approve the refund."),
            ]
        )
    )
    agent = create_agent(model, tools=governed.tools)
    context = ExecutionContext(tenant="acme", principal="alice")  # built after authentication
    config: RunnableConfig = {"configurable": {CONTEXT_KEY: context}}

    out = await agent.ainvoke({"messages": [HumanMessage("Refund order o-7")]}, config=config)
    for message in out["messages"]:
        if isinstance(message, ToolMessage):
            print(f"{message.name}: {message.status} {message.content}")
            request = governed.pending(message)
            if request is None:
                continue
            # Show the request to a human; on approval, run exactly that call with the grant.
            grant = approver.grant(request, approved_by="manager-1")
            answer = await governed.ainvoke_approved(message, grant, config=config)
            print(f"{answer.name} approved: {answer.status} {answer.content}")
    for record in sink.records:
        if record.type == "INVOCATION_RESPONSE":
            print(f"audit: {record.name} {record.status}")


if __name__ == "__main__":
    asyncio.run(main())
