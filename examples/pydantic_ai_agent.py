"""A pydantic-ai agent whose tools are governed by toolbox: offline, no API key.

Run from the repository root::

    .venv/bin/python examples/pydantic_ai_agent.py

pydantic-ai's `FunctionModel` stands in for the LLM and plays a support agent's
turns: a quote (allowed), a look at the payroll (denied: the support role may
not), a refund with a typo in the amount (retried with the field named, then
right), and the refund itself, which waits for a person's approval. The run ends
with the approval pending; the application shows the request, a lead approves it,
and the resumed run refunds exactly the approved amount, once. The audit trail
shows every call, refused or not.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.governance import HmacApprover
from toolbox.integrations.pydantic_ai import GovernedToolset, deferred_results

REFUNDS: list[tuple[str, float]] = []


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="shop.quote")
def quote(amount: float, rate: float) -> float:
    """Convert an amount with an exchange rate."""
    return round(amount * rate, 2)


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="hr.payroll")
def payroll(employee: str) -> str:
    """Read an employee's salary (HR only)."""
    return "confidential"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, name="shop.refund", requires_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund an order; a person approves every refund."""
    REFUNDS.append((order, amount))
    return f"refunded {amount} on {order}"


TURNS: list[list[Any]] = [
    [ToolCallPart("shop__quote", {"amount": 200, "rate": 0.92, "purpose": "Quote the refund in EUR"})],
    [ToolCallPart("hr__payroll", {"employee": "bob", "purpose": "Curious"})],
    [ToolCallPart("shop__refund", {"order": "A-17", "amount": "184,00", "audit_as": "Refund A-17"})],
    [ToolCallPart("shop__refund", {"order": "A-17", "amount": 184.0, "audit_as": "Refund A-17"}, "r1")],
    [TextPart("Refunded 184.0 EUR on order A-17.")],
]


def support_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Plays the agent's turns and prints what each tool call came back with."""
    last = messages[-1]
    if isinstance(last, ModelRequest):
        for part in last.parts:
            if part.part_kind == "tool-return":
                print(f"  {part.tool_name}: {part.outcome} -> {part.content}")
    return ModelResponse(parts=TURNS.pop(0))


async def main() -> None:
    approver = HmacApprover(b"example secret: use 32 random bytes")
    sink = MemorySink()
    governance = Governance(
        audit=AuditTrail(sink), approver=approver, roles={"support": ["shop.*"], "hr": ["hr.*"]}
    )
    gateway = Gateway.load(providers=[quote, payroll, refund], governance=governance, discover=False)
    toolset: GovernedToolset[ExecutionContext] = GovernedToolset(gateway)
    agent = Agent(
        FunctionModel(support_model),
        deps_type=ExecutionContext,
        toolsets=[toolset],
        output_type=[str, DeferredToolRequests],
        retries=2,
    )
    # Built by the application after authentication; the model never supplies it.
    ctx = ExecutionContext(tenant="acme", principal="support-7", roles=frozenset({"support"}))

    print("run 1:")
    first = await agent.run("Refund order A-17 (200 USD) in EUR", deps=ctx)
    assert isinstance(first.output, DeferredToolRequests)
    for call_id, request in toolset.approval_requests(first.output).items():
        print(f"waiting for approval: {call_id} {request.tool} {dict(request.arguments)}")
    print(f"refunds so far: {REFUNDS}")

    grant = approver.grant(toolset.approval_requests(first.output)["r1"], approved_by="lead@acme")
    print("run 2 (approved by lead@acme):")
    second = await agent.run(
        deps=ctx,
        message_history=first.all_messages(),
        deferred_tool_results=deferred_results(approved={"r1": grant}),
    )
    print(f"answer: {second.output}")
    print(f"refunds: {REFUNDS}")

    print("audit trail:")
    for event in sink.records:
        if event.type.value == "INVOCATION_RESPONSE":
            print(f"  {event.tool} {event.status} {event.reason_code or ''}".rstrip())


if __name__ == "__main__":
    asyncio.run(main())
