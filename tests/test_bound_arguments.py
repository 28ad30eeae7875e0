"""Approvals, fingerprints and audit payloads bind the call's own arguments (issue 27, finding 1).

A class-based tool whose operation builds its intent without ``arguments=``:
on main the approver was shown ``{}``, a grant for "100 cents to alice" ran
"999999 to mallory" through both doors, and a read audited the payload ``{}``.
The chain now binds every call to its arguments by declared parameter
(`toolbox.foundations._binding`), on the by-name and typed doors alike.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, final

import pytest
from pydantic import SecretStr

from toolbox import (
    ApprovalRequired,
    Effect,
    ExecutionContext,
    Gateway,
    Governance,
    OperationDescriptor,
    ReadIntent,
    RiskClass,
    Status,
    ToolDeniedError,
    ToolDescriptor,
    ToolProvider,
    ToolRuntime,
    ToolUnavailableError,
    WriteIntent,
)
from toolbox.audit import AuditTrail, EventType, MemorySink
from toolbox.governance import Approval, HmacApprover

APPROVER = HmacApprover(b"p" * 32)
RUNS: list[tuple[str, Any]] = []

PAYMENTS = ToolDescriptor(
    name="acme.payments",
    version="1",
    risk=RiskClass.MEMORY_ONLY,
    operations=(
        OperationDescriptor(name="pay", effect=Effect.UNSAFE, requires_approval=True),
        OperationDescriptor(name="invoice", effect=Effect.READ_ONLY),
        OperationDescriptor(name="charge", effect=Effect.UNSAFE, requires_approval=True),
        OperationDescriptor(name="upload", effect=Effect.IDEMPOTENT, requires_approval=True),
    ),
)


@final
class Payments:
    """Builds every intent without ``arguments=``: the pitfall the chain now closes."""

    __slots__ = ("_runtime",)

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def pay(self, to: str, cents: int) -> WriteIntent[str]:
        return self._runtime.write_intent("pay", lambda: _ran("pay", (to, cents)))

    def invoice(self, invoice_id: str) -> ReadIntent[str]:
        return self._runtime.read_intent("invoice", lambda: _ran("invoice", invoice_id))

    def charge(self, card_token: SecretStr, cents: int = 100) -> WriteIntent[str]:
        return self._runtime.write_intent("charge", lambda: _ran("charge", cents))

    def upload(self, name: str, body: str) -> WriteIntent[str]:
        # A provider view that leaves out the body: the binding does not depend on it.
        return self._runtime.write_intent("upload", lambda: _ran("upload", name), arguments={"name": name})


def _ran(operation: str, value: Any) -> str:
    RUNS.append((operation, value))
    return "done"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RUNS.clear()


def _gateway(**provider: Any) -> tuple[Gateway, MemorySink]:
    sink = MemorySink()
    gateway = Gateway.load(
        providers=[ToolProvider(Payments, PAYMENTS, **provider)],
        discover=False,
        env={},
        governance=Governance(approver=APPROVER, audit=AuditTrail(sink, fallback_path=None)),
    )
    return gateway, sink


def _ctx() -> ExecutionContext:
    return ExecutionContext(tenant="acme", principal="agent")


def _grant_for(gateway: Gateway, ctx: ExecutionContext, arguments: dict[str, Any]) -> Approval:
    asked = gateway.invoke("acme.payments.pay", {**arguments, "audit_as": "Pay"}, context=ctx)
    assert asked.status is Status.APPROVAL_REQUIRED and asked.approval is not None
    assert dict(asked.approval.arguments) == arguments  # on main: {}, the approver saw nothing
    return APPROVER.grant(asked.approval, approved_by="bob")


def test_a_grant_for_one_payment_cannot_run_another_by_name() -> None:
    gateway, sink = _gateway()
    ctx = _ctx()
    grant = _grant_for(gateway, ctx, {"to": "alice", "cents": 100})
    edited = {"to": "mallory", "cents": 999999, "audit_as": "Pay"}
    refused = gateway.invoke("acme.payments.pay", edited, context=ctx, approval=grant)
    assert (refused.status, refused.reason_code) == (Status.DENIED, "APPROVAL_INVALID")  # main: SUCCESS
    assert refused.attempts == 0 and RUNS == []
    decisions = [e for e in sink.read_trace(ctx.run_id) if e.type is EventType.GOVERNANCE_DECISION]
    assert decisions[-1].reason_code == "APPROVAL_INVALID"
    done = gateway.invoke(
        "acme.payments.pay", {"to": "alice", "cents": 100, "audit_as": "Pay"}, context=ctx, approval=grant
    )
    assert done.status is Status.SUCCESS and RUNS == [("pay", ("alice", 100))]


def test_a_grant_for_one_payment_cannot_run_another_typed() -> None:
    gateway, _ = _gateway()
    ctx = _ctx()
    grant = _grant_for(gateway, ctx, {"to": "alice", "cents": 100})
    payments = gateway.tools_for(ctx).get(Payments)
    with pytest.raises(ToolDeniedError) as denied:
        payments.pay("mallory", 999999).audit_as("Pay").execute(approval=grant)  # main: it ran
    assert denied.value.reason_code == "APPROVAL_INVALID" and RUNS == []
    # The same call by keyword and by position binds alike, and the by-name grant fits the typed door.
    assert payments.pay(to="alice", cents=100).audit_as("Pay").execute(approval=grant) == "done"
    assert RUNS == [("pay", ("alice", 100))]


def test_the_typed_door_asks_for_the_call_it_makes() -> None:
    gateway, _ = _gateway()
    payments = gateway.tools_for(_ctx()).get(Payments)
    with pytest.raises(ApprovalRequired) as asked:
        payments.pay("alice", 100).audit_as("Pay").execute()
    assert dict(asked.value.request.arguments) == {"to": "alice", "cents": 100}
    assert RUNS == []


def test_a_read_audits_what_it_read() -> None:
    gateway, sink = _gateway()
    ctx = _ctx()
    done = gateway.invoke("acme.payments.invoice", {"invoice_id": "inv-42", "purpose": "Check"}, context=ctx)
    assert done.status is Status.SUCCESS
    typed = gateway.tools_for(ctx).get(Payments)
    assert typed.invoice("inv-43").purpose("Check").execute() == "done"
    intents = [e for e in sink.read_trace(ctx.run_id) if e.type is EventType.INTENT_DECLARED]
    assert [json.loads(e.payload_summary or "{}") for e in intents] == [
        {"invoice_id": "inv-42"},
        {"invoice_id": "inv-43"},
    ]  # on main: {} twice: the trail never said which invoice was read


def test_a_secret_parameter_is_bound_by_keyed_hash_and_masked() -> None:
    gateway, sink = _gateway()
    ctx = _ctx()
    payments = gateway.tools_for(ctx).get(Payments)
    with pytest.raises(ApprovalRequired) as asked:
        payments.charge(SecretStr("tok_live_1"), 500).audit_as("Charge").execute()
    request = asked.value.request
    assert dict(request.arguments) == {"card_token": "[REDACTED]", "cents": 500}
    grant = APPROVER.grant(request, approved_by="bob")
    with pytest.raises(ToolDeniedError) as other_card:
        payments.charge(SecretStr("tok_live_2"), 500).audit_as("Charge").execute(approval=grant)
    assert other_card.value.reason_code == "APPROVAL_INVALID" and RUNS == []
    assert payments.charge(SecretStr("tok_live_1"), 500).audit_as("Charge").execute(approval=grant) == "done"
    stored = " ".join(str(e.model_dump()) for e in sink.read_trace(ctx.run_id))
    assert "tok_live" not in stored and "tok_live" not in request.fingerprint


def test_a_provider_view_does_not_narrow_the_binding() -> None:
    gateway, _ = _gateway()
    ctx = _ctx()
    payments = gateway.tools_for(ctx).get(Payments)
    with pytest.raises(ApprovalRequired) as asked:
        payments.upload("report.txt", "the approved text").audit_as("Upload").execute()
    assert dict(asked.value.request.arguments) == {"name": "report.txt", "body": "the approved text"}
    grant = APPROVER.grant(asked.value.request, approved_by="bob")
    with pytest.raises(ToolDeniedError):
        payments.upload("report.txt", "something else").audit_as("Upload").execute(approval=grant)
    assert RUNS == []


def _digest(value: object) -> str:
    return "sha256:" + hashlib.sha256(str(value).encode()).hexdigest()


EVERY_PARAMETER = {
    "pay": {"to": None, "cents": None},
    "upload": {"name": None, "body": _digest},
}


def test_a_bind_mapping_maps_what_is_bound() -> None:
    gateway, _ = _gateway(bind=EVERY_PARAMETER)
    payments = gateway.tools_for(_ctx()).get(Payments)
    with pytest.raises(ApprovalRequired) as asked:
        payments.upload("report.txt", "the approved text").audit_as("Upload").execute()
    assert dict(asked.value.request.arguments) == {"name": "report.txt", "body": _digest("the approved text")}
    grant = APPROVER.grant(asked.value.request, approved_by="bob")
    with pytest.raises(ToolDeniedError):
        payments.upload("report.txt", "something else").audit_as("Upload").execute(approval=grant)
    assert payments.upload("report.txt", "the approved text").audit_as("Upload").execute(approval=grant)


@pytest.mark.parametrize(
    ("bind", "message"),
    [
        ({"pay": {"to": None}}, "bind for acme.payments.pay leaves out the declared parameter 'cents'"),
        ({"pay": {"to": None, "cents": None, "memo": None}}, "names 'memo', which is not one of its"),
        ({"refund": {}}, "bind names acme.payments.refund, which the descriptor does not declare"),
        ({"pay": {"to": None, "cents": "int"}}, "maps a parameter to something that is not callable"),
    ],
)
def test_a_bind_mapping_that_leaves_out_a_parameter_is_refused_at_load(
    bind: dict[str, Any], message: str
) -> None:
    gateway, _ = _gateway(bind=bind)
    broken = gateway.catalog.broken_providers
    assert len(broken) == 1 and message in broken[0].error
    with pytest.raises(ToolUnavailableError) as missing:
        gateway.tools_for(_ctx()).get("acme.payments")
    assert message in str(missing.value)
    assert RUNS == []


# -- attacks on the binding ---------------------------------------------------------------------


def test_concurrent_calls_each_bind_their_own_arguments() -> None:
    """Threads calling one tool instance at once: each intent carries its own call's arguments."""
    from concurrent.futures import ThreadPoolExecutor

    gateway, _ = _gateway()
    ctx = _ctx()
    grant = _grant_for(gateway, ctx, {"to": "alice", "cents": 100})
    payments = gateway.tools_for(ctx).get(Payments)

    def attempt(index: int) -> str:
        to, cents = ("alice", 100) if index == 0 else (f"mallory{index}", index)
        try:
            return payments.pay(to, cents).audit_as("Pay").execute(approval=grant)
        except ToolDeniedError as refused:
            return refused.reason_code

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(attempt, range(32)))
    assert answers[0] == "done" and set(answers[1:]) == {"APPROVAL_INVALID"}
    assert RUNS == [("pay", ("alice", 100))]


class Relay(Payments):
    """An operation whose method calls another operation method first: each binds its own call."""

    __slots__ = ()

    def pay(self, to: str, cents: int) -> WriteIntent[str]:
        self.invoice(f"check-{to}")  # an intent built and dropped: another operation's call
        return super().pay(to, cents)


def test_a_nested_operation_call_does_not_rebind_the_outer_one() -> None:
    sink = MemorySink()
    gateway = Gateway.load(
        providers=[ToolProvider(Relay, PAYMENTS)],
        discover=False,
        env={},
        governance=Governance(approver=APPROVER, audit=AuditTrail(sink, fallback_path=None)),
    )
    relay = gateway.tools_for(_ctx()).get(Relay)
    with pytest.raises(ApprovalRequired) as asked:
        relay.pay("alice", 100).audit_as("Pay").execute()
    assert dict(asked.value.request.arguments) == {"to": "alice", "cents": 100}


def test_a_factorys_own_class_binds_its_calls_too() -> None:
    """A factory may build an instance of another class than tool_type: its methods are bound on build."""

    class Subclassed(Payments):
        __slots__ = ()

        def pay(self, to: str, cents: int) -> WriteIntent[str]:  # an override of its own
            return self._runtime.write_intent("pay", lambda: _ran("pay", (to, cents)))

    gateway = Gateway.load(
        providers=[ToolProvider(Payments, PAYMENTS, factory=Subclassed)],
        discover=False,
        env={},
        governance=Governance(approver=APPROVER),
    )
    payments = gateway.tools_for(_ctx()).get(Payments)
    assert type(payments) is Subclassed
    with pytest.raises(ApprovalRequired) as asked:
        payments.pay("alice", 100).audit_as("Pay").execute()
    assert dict(asked.value.request.arguments) == {"to": "alice", "cents": 100}


def test_fs_binds_a_write_by_its_digest_and_never_stores_the_content(tmp_path: Any) -> None:
    import toolbox_fs.plugin
    from toolbox import ToolPolicy
    from toolbox_fs import FsTool

    sink = MemorySink()
    gateway = Gateway.load(
        policy=ToolPolicy.standard().allow("fs"),
        providers=[toolbox_fs.plugin],
        discover=False,
        env={"TOOLBOX_FS_ACK": "allow-fs-within-roots"},
        options={"fs": {"roots": [str(tmp_path)]}},
        governance=Governance(audit=AuditTrail(sink, fallback_path=None)),
    )
    ctx = _ctx()
    secret_text = "the quarterly numbers, not for the log"
    written = gateway.tools_for(ctx).get(FsTool).write("notes.txt", secret_text).audit_as("Save").execute()
    assert written == len(secret_text)
    saved = {"path": "b.txt", "data": secret_text, "audit_as": "Save"}
    by_name = gateway.invoke("fs.write", saved, context=ctx)
    assert by_name.status is Status.SUCCESS
    stored = " ".join(str(e.model_dump()) for e in sink.read_trace(ctx.run_id))
    assert secret_text not in stored
    assert "sha256:" + hashlib.sha256(secret_text.encode()).hexdigest() in stored
