"""Governed tools inside an OpenAI Agents SDK agent, offline.

The SDK's own `ScriptedModel` stands in for OpenAI: no network, no API key.
The agent adds two numbers, is refused a wipe, and asks for a refund that a
human approves; the audit trail records every call.

Run: ``.venv/bin/python examples/openai_agents_agent.py``
"""

from __future__ import annotations

import asyncio

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.governance import Decision, HmacApprover
from toolbox.integrations.openai_agents import GovernedAgentTools

set_tracing_disabled(True)  # traces would be exported to OpenAI


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


async def main() -> None:
    approver = HmacApprover(b"load-me-from-your-secret-store!")
    sink = MemorySink()
    gateway = Gateway.load(
        providers=[add, refund, wipe],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink), approver=approver, authorizers=[no_wiping]),
    )
    governed = GovernedAgentTools(gateway)  # the context is RunContextWrapper.context
    model = ScriptedModel(
        [
            [function_call("math__add", {"a": 2, "b": 3, "purpose": "Total the order"}, call_id="c1")],
            [function_call("shop__wipe", {"target": "orders", "audit_as": "Clean up"}, call_id="c2")],
            [
                function_call(
                    "shop__refund", {"order": "o-7", "amount": 5, "audit_as": "Late order"}, call_id="c3"
                )
            ],
            [assistant_message("Refunded 5 on o-7.")],
        ]
    )
    agent = Agent(name="clerk", instructions="Help the customer.", model=model, tools=governed.tools)
    context = ExecutionContext(tenant="acme", principal="alice")  # built after authentication

    # A model naming a tool it was not offered gets a governed refusal, not ModelBehaviorError.
    config = governed.run_config()
    result = await Runner.run(agent, "Refund order o-7", context=context, run_config=config)
    for pending in governed.pending(result):
        request = pending.request
        print(f"approval needed: {request.tool} {dict(request.arguments)}")
        state = result.to_state()
        governed.approve(state, pending, approver.grant(request, approved_by="manager-1"))
        result = await Runner.run(agent, state, run_config=config)
    print(f"final: {result.final_output}")
    for record in sink.records:
        if record.type == "INVOCATION_RESPONSE":
            print(f"audit: {record.name} {record.status}")


if __name__ == "__main__":
    asyncio.run(main())
