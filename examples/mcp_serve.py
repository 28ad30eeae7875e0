"""Serve governed tools over MCP and call them with the official client, offline.

    .venv/bin/python examples/mcp_serve.py

One process, no network: the SDK's in-memory transport connects the client to
`toolbox.mcp._server`. The model (played here by the client) sees only what the
policy lets it use, must state its intent, and gets every refusal as a
readable tool error; the audit trail holds the whole session under one run id.
"""

from __future__ import annotations

import anyio
from mcp import Client
from mcp.types import CallToolResult

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, ToolPolicy, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.mcp import ERROR_META_KEY, TRACE_META_KEY, server


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def order_status(order_id: int) -> dict[str, str]:
    """Look up the status of an order."""
    return {"order": str(order_id), "status": "shipped"}


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, requires_approval=True)
def refund(order_id: int, amount: int) -> dict[str, int]:
    """Refund part of an order (a human approves each refund)."""
    return {"order": order_id, "refunded": amount}


@tool(risk=RiskClass.EXTERNAL_RESOURCE, effect=Effect.UNSAFE)
def wire_transfer(iban: str, amount: int) -> str:
    """Send money (the policy does not allow it)."""
    raise AssertionError("never runs: EXTERNAL_RESOURCE tools need an explicit allow")


def _codes(result: CallToolResult) -> str:
    """The status and codes of a refused call: its ``_meta``, where every error result has them."""
    assert result.is_error and result.meta is not None
    outcome = result.meta[ERROR_META_KEY]
    codes = (outcome["status"], outcome["reason_code"], outcome["field_path"])
    return " ".join(code for code in codes if code)


async def main() -> None:
    sink = MemorySink()
    gateway = Gateway.load(
        policy=ToolPolicy.standard(),
        providers=[order_status, refund, wire_transfer],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink)),
    )
    # The operator decides who the calls are made for; the client never does.
    operator = ExecutionContext(tenant="acme", principal="support-desk")
    async with Client(server(gateway, context=operator)) as client:
        listed = await client.list_tools()
        for listed_tool in listed.tools:
            hints = listed_tool.annotations
            assert hints is not None
            shown = f"read-only {hints.read_only_hint}, destructive {hints.destructive_hint}"
            print(f"listed {listed_tool.name}: {shown}")

        why = "Customer asked where order 7 is"
        ok = await client.call_tool("order_status", {"order_id": 7, "purpose": why})
        print("order_status ->", ok.structured_content)

        no_intent = await client.call_tool("order_status", {"order_id": 7})
        print("without purpose ->", _codes(no_intent))

        arguments = {"order_id": 7, "amount": 5, "audit_as": "Refund the late fee"}
        pending = await client.call_tool("refund", arguments)
        print("refund ->", _codes(pending))

        denied = await client.call_tool("wire_transfer", {"iban": "X", "amount": 1, "audit_as": "Pay"})
        print("wire_transfer ->", _codes(denied))

    assert ok.meta is not None
    run_id = ok.meta[TRACE_META_KEY]
    print(f"audit trail of run {run_id}: {len(sink.read_trace(run_id))} events")
    gateway.close()


if __name__ == "__main__":
    anyio.run(main)
