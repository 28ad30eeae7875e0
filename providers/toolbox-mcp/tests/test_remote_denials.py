"""Refusals before anything reaches the server: zero upstream executions, the audit events written."""

from __future__ import annotations

import pytest
from conftest import lock, stdio_server, wait_no_server_children, write_policy

from toolbox import ExecutionContext, Status
from toolbox.errors import AcknowledgementRequiredError, ToolPolicyDeniedError
from toolbox.governance import Guardrail, GuardrailAction, HmacApprover

CTX = ExecutionContext(tenant="tenant-a", principal="alice")
ADD = {"a": 1, "b": 2, "audit_as": "Add numbers"}


def _setup(tmp_path, count_file, make_setup, *, allow=None, governance=None, env=None, **server):
    policy = write_policy(
        tmp_path / "policy.toml", {"notes": stdio_server(count_file, **server)}, allow=allow
    )
    lock(policy, "notes")
    # Locking ran the server once to list its tools (no tool executed); later calls are what counts.
    assert wait_no_server_children() == []
    return make_setup(policy, count_file, governance=governance, env=env)


def test_a_server_the_policy_does_not_allow_is_denied_and_never_started(tmp_path, count_file, make_setup):
    setup = _setup(tmp_path, count_file, make_setup, allow=[])
    result = setup.gateway.invoke("mcp.notes.add", ADD, context=CTX)
    assert result.status is Status.DENIED
    assert result.reason_code == "POLICY_DENIED"
    assert setup.executions() == []
    assert server_started(setup) is False
    assert ("GOVERNANCE_DECISION", "DENY", "POLICY_DENIED") in setup.events(CTX)
    with pytest.raises(ToolPolicyDeniedError):
        setup.gateway.tools_for(CTX).get("mcp.notes")
    assert setup.gateway.definitions() == []


def server_started(setup) -> bool:
    return bool(wait_no_server_children(0))


def test_a_privileged_server_needs_its_acknowledgement(tmp_path, count_file, make_setup):
    ack = {"env": "TOOLBOX_MCP_NOTES_ACK", "value": "i-trust-notes"}
    setup = _setup(tmp_path, count_file, make_setup, risk="PRIVILEGED", acknowledgement=ack)
    result = setup.gateway.invoke("mcp.notes.add", ADD, context=CTX)
    assert result.status is Status.DENIED
    assert result.reason_code == "NOT_ACKNOWLEDGED"
    assert setup.executions() == []
    assert server_started(setup) is False
    assert ("GOVERNANCE_DECISION", "DENY", "NOT_ACKNOWLEDGED") in setup.events(CTX)
    with pytest.raises(AcknowledgementRequiredError):
        setup.gateway.tools_for(CTX).get("mcp.notes")

    acknowledged = make_setup(setup.policy_path, count_file, env={"TOOLBOX_MCP_NOTES_ACK": "i-trust-notes"})
    assert acknowledged.gateway.invoke("mcp.notes.add", ADD, context=CTX).status is Status.SUCCESS
    assert acknowledged.executions() == ["add"]


def test_a_guardrail_deny_stops_the_call(tmp_path, count_file, make_setup):
    rule = Guardrail(id="NO_ADD", action=GuardrailAction.DENY, tool="mcp.*", operation="add")
    setup = _setup(tmp_path, count_file, make_setup, governance={"guardrails": [rule]})
    result = setup.gateway.invoke("mcp.notes.add", ADD, context=CTX)
    assert result.status is Status.DENIED
    assert result.reason_code == "GUARDRAIL_NO_ADD"
    assert setup.executions() == []
    assert ("GOVERNANCE_DECISION", "DENY", "GUARDRAIL_NO_ADD") in setup.events(CTX)


def test_a_guardrail_sees_the_arguments_as_sent(tmp_path, count_file, make_setup):
    rule = Guardrail(
        id="NO_BIG_A",
        action=GuardrailAction.DENY,
        operation="add",
        when=lambda arguments: arguments.get("a", 0) > 10,
    )
    setup = _setup(tmp_path, count_file, make_setup, governance={"guardrails": [rule]})
    assert (
        setup.gateway.invoke("mcp.notes.add", {**ADD, "a": 11}, context=CTX).reason_code
        == "GUARDRAIL_NO_BIG_A"
    )
    assert setup.gateway.invoke("mcp.notes.add", ADD, context=CTX).status is Status.SUCCESS
    assert setup.executions() == ["add"]


def test_an_operation_that_needs_approval_waits_for_it(tmp_path, count_file, make_setup):
    approver = HmacApprover(b"k" * 32)
    setup = _setup(
        tmp_path,
        count_file,
        make_setup,
        operations={"add": {"requires_approval": True}},
        governance={"approver": approver},
    )
    result = setup.gateway.invoke("mcp.notes.add", ADD, context=CTX)
    assert result.status is Status.APPROVAL_REQUIRED
    assert result.approval is not None
    assert setup.executions() == []
    assert server_started(setup) is False
    assert setup.events(CTX)[-1][1] == "APPROVAL_REQUIRED"
    grant = approver.grant(result.approval, approved_by="carol")
    approved = setup.gateway.invoke("mcp.notes.add", ADD, context=CTX, approval=grant)
    assert approved.status is Status.SUCCESS
    assert setup.executions() == ["add"]


def test_a_missing_intent_is_refused(tmp_path, count_file, make_setup):
    setup = _setup(tmp_path, count_file, make_setup)
    result = setup.gateway.invoke("mcp.notes.add", {"a": 1, "b": 2}, context=CTX)
    assert result.status is Status.INVALID_ARGUMENTS
    assert result.field_path == "audit_as"
    assert setup.executions() == []
    tool = setup.gateway.tools_for(CTX).get("mcp.notes")
    with pytest.raises(AttributeError):
        tool.call("add", {"a": 1, "b": 2}).execute()  # type: ignore[union-attr]
    assert setup.executions() == []


def test_the_kill_switch_refuses_every_server_operation(tmp_path, count_file, make_setup):
    setup = _setup(tmp_path, count_file, make_setup, governance={"disabled_tools": ["mcp.notes"]})
    result = setup.gateway.invoke("mcp.notes.add", ADD, context=CTX)
    assert result.status is Status.DENIED
    assert setup.executions() == []
    assert server_started(setup) is False
