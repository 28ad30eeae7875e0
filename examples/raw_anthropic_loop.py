"""A raw Anthropic Messages API tool loop with governed tools, offline.

`scripted_message` returns responses shaped exactly like the API's (a
``content`` list of ``text`` and ``tool_use`` blocks, ``stop_reason``), so the
loop is the one you would write against ``client.messages.create``: send
``gateway.definitions(format="anthropic")`` as ``tools``, run each ``tool_use``
block through the gateway (a refusal comes back as an ``is_error`` result),
answer with one user turn of
``tool_result`` blocks, ask again.

Run: ``.venv/bin/python examples/raw_anthropic_loop.py``
"""

from __future__ import annotations

from typing import Any

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.doors.tool_calls import anthropic_tool_result, result_text
from toolbox.governance import Decision, HmacApprover


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


def message(*blocks: dict[str, Any]) -> dict[str, Any]:
    """A Messages API response as the API returns it."""
    uses_tools = any(block["type"] == "tool_use" for block in blocks)
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": list(blocks),
        "stop_reason": "tool_use" if uses_tools else "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def use(block_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": block_id, "name": name, "input": arguments}


SCRIPT = [
    message(
        {"type": "text", "text": "Let me total the order."},
        use("toolu_1", "math__add", {"a": 2, "b": 3, "purpose": "Total the order"}),
    ),
    message(use("toolu_2", "math__add", {"a": 2, "purpose": "Total"})),  # b is missing
    message(use("toolu_3", "math__add", {"a": 2, "b": 3, "purpose": "Total, retried"})),
    message(
        use("toolu_4", "shop__wipe", {"target": "orders", "audit_as": "Clean up"}),
        use("toolu_5", "shop__refund", {"order": "o-7", "amount": 5, "audit_as": "Late order"}),
    ),
    message({"type": "text", "text": "Refunded 5 on o-7."}),
]


def scripted_message(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Stands in for ``client.messages.create(model=..., messages=..., tools=...)``."""
    assert all("input_schema" in t for t in tools)
    return SCRIPT.pop(0)


def main() -> None:
    approver = HmacApprover(b"load-me-from-your-secret-store!")
    sink = MemorySink()
    gateway = Gateway.load(
        providers=[add, refund, wipe],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink), approver=approver, authorizers=[no_wiping]),
    )
    context = ExecutionContext(tenant="acme", principal="alice")  # built after authentication
    tools = gateway.definitions(format="anthropic")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Refund order o-7"}]
    while True:
        response = scripted_message(messages, tools)
        messages.append({"role": "assistant", "content": response["content"]})
        if response["stop_reason"] != "tool_use":
            print(f"final: {response['content'][-1]['text']}")
            break
        results = []
        for block in response["content"]:
            if block["type"] != "tool_use":
                continue
            held = gateway.invoke(block["name"], block["input"], context=context)
            if held.status is Status.APPROVAL_REQUIRED and held.approval is not None:
                print(f"approval needed: {held.approval.tool} {dict(held.approval.arguments)}")
                grant = approver.grant(held.approval, approved_by="manager-1")  # a human said yes
                result = anthropic_tool_result(gateway, block, context=context, approval=grant)
            else:
                result = {
                    "type": "tool_result",
                    "tool_use_id": block["id"],
                    "content": result_text(held),
                    "is_error": held.is_error,
                }
            print(f"{block['name']}: error={result['is_error']} {result['content']}")
            results.append(result)
        messages.append({"role": "user", "content": results})
    for record in sink.records:
        if record.type == "INVOCATION_RESPONSE":
            print(f"audit: {record.name} {record.status}")


if __name__ == "__main__":
    main()
