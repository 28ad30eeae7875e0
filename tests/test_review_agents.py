"""Security review of the OpenAI Agents room: what one run holds must never answer another principal."""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, Runner, set_tracing_disabled

from agent_framework_support import RUNS, governed
from scripted_agents_model import ScriptedModel, call, say
from toolbox import ExecutionContext
from toolbox.integrations.openai_agents import GovernedAgentTools

set_tracing_disabled(True)

REFUND = {"order": "o-7", "amount": 30, "audit_as": "Refund a broken kettle"}


def agent(tools: GovernedAgentTools, model: ScriptedModel) -> Agent[Any]:
    return Agent(name="clerk", instructions="Use the tools.", model=model, tools=tools.tools)


def test_a_request_held_for_one_tenant_is_never_shown_to_another_with_the_same_run_id() -> None:
    """Tenant A's refund waits for approval; tenant B's run reuses the run id and the model call id.

    B's call must be asked about in B's own governed call (its own request, for B's
    tenant and principal), not be shown A's held request.
    """
    g = governed()
    tools = GovernedAgentTools(g.gateway)
    tenant_a = ExecutionContext(tenant="acme", principal="alice", run_id="shared-run")
    a_model = ScriptedModel([call("shop__refund", REFUND, "c1")], [say("x")])
    a_result = asyncio.run(Runner.run(agent(tools, a_model), "refund", context=tenant_a))
    [a_pending] = tools.pending(a_result)
    assert (a_pending.request.tenant, a_pending.request.principal) == ("acme", "alice")

    tenant_b = ExecutionContext(tenant="globex", principal="bob", run_id="shared-run")
    b_model = ScriptedModel([call("shop__refund", REFUND, "c1")], [say("refunded")])
    clerk_b = agent(tools, b_model)
    b_result = asyncio.run(Runner.run(clerk_b, "refund", context=tenant_b))
    [b_pending] = tools.pending(b_result)
    assert (b_pending.request.tenant, b_pending.request.principal) == ("globex", "bob")
    assert b_pending.request.id != a_pending.request.id
    asked = [
        r
        for r in g.sink.records
        if r.tenant == "globex" and r.type.value == "INVOCATION_RESPONSE" and r.status == "APPROVAL_REQUIRED"
    ]
    assert len(asked) == 1  # B's call was asked about in B's own governed call

    # B's own grant runs B's call once; A's request is still held for A.
    state = b_result.to_state()
    tools.approve(state, b_pending, g.approver.grant(b_pending.request, approved_by="manager"))
    asyncio.run(Runner.run(clerk_b, state))
    assert b_model.tool_outputs()["c1"] == "refunded 30 on o-7"
    assert RUNS["refund"] == 1
    assert [p.request.id for p in tools.pending(a_result)] == [a_pending.request.id]
