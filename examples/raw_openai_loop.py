"""A raw OpenAI Chat Completions tool loop with governed tools, offline.

`scripted_completion` returns responses shaped exactly like the API's
(``choices[0].message.tool_calls`` with JSON-text ``arguments``), so the loop is
the one you would write against ``client.chat.completions.create``: send
``gateway.definitions(format="openai")`` as ``tools``, run each tool call through
`toolbox.doors.tool_calls`, append the ``tool`` messages, ask again.

Run: ``.venv/bin/python examples/raw_openai_loop.py``
"""

from __future__ import annotations

import json
from typing import Any

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.doors.tool_calls import invoke_arguments, openai_tool_result, result_text
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


def completion(*calls: tuple[str, str, dict[str, Any] | str], text: str | None = None) -> dict[str, Any]:
    """A chat.completion object as the API returns it."""
    tool_calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
        }
        for call_id, name, args in calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
    }


SCRIPT = [
    completion(("call_1", "math__add", {"a": 2, "b": 3, "purpose": "Total the order"})),
    completion(("call_2", "math__add", '{"a": "two", "b": 3, "purpose": "Total"}')),  # bad arguments
    completion(("call_3", "math__add", {"a": 2, "b": 3, "purpose": "Total, retried"})),
    completion(
        ("call_4", "shop__wipe", {"target": "orders", "audit_as": "Clean up"}),
        ("call_5", "shop__refund", {"order": "o-7", "amount": 5, "audit_as": "Late order"}),
    ),
    completion(text="Refunded 5 on o-7."),
]


def scripted_completion(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Stands in for ``client.chat.completions.create(model=..., messages=..., tools=...)``."""
    assert all(t["function"]["strict"] for t in tools)
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
    tools = gateway.definitions(format="openai")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Refund order o-7"}]
    while True:
        message = scripted_completion(messages, tools)["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            print(f"final: {message['content']}")
            break
        for call in message["tool_calls"]:
            function = call["function"]
            result = invoke_arguments(gateway, function["name"], function["arguments"], context=context)
            if result.status is Status.APPROVAL_REQUIRED and result.approval is not None:
                print(f"approval needed: {result.approval.tool} {dict(result.approval.arguments)}")
                grant = approver.grant(result.approval, approved_by="manager-1")  # a human said yes
                reply = openai_tool_result(gateway, call, context=context, approval=grant)
            else:
                reply = {"role": "tool", "tool_call_id": call["id"], "content": result_text(result)}
            print(f"{function['name']}: {reply['content']}")
            messages.append(reply)
    for record in sink.records:
        if record.type == "INVOCATION_RESPONSE":
            print(f"audit: {record.name} {record.status}")


if __name__ == "__main__":
    main()
