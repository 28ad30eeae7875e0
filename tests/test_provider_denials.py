"""A denial a tool decides itself (`ToolRuntime.record_denial`) is audited once, on every door.

On the typed door the program calls the operation method, so the runtime
reports the denial to the audit hooks; on the by-name door, and when the
tool refuses while it is being dispatched, the chain sees the error and
records it itself: never twice.
"""

from __future__ import annotations

import asyncio

import pytest

from toolbox import (
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
    ToolPolicy,
    ToolProvider,
    ToolRuntime,
    Tools,
)
from toolbox.audit import AuditTrail, EventType, MemorySink

VAULT = ToolDescriptor(
    name="vault",
    version="1",
    risk=RiskClass.EXTERNAL_RESOURCE,
    operations=(OperationDescriptor(name="open", effect=Effect.READ_ONLY),),
)
RAN: list[str] = []


class Vault:
    """Refuses the key "forbidden" when called, and the key "late" when dispatched."""

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def open(self, key: str) -> ReadIntent[str]:
        if key == "forbidden":
            error = ToolDeniedError(
                "that key is refused", tool="vault", reason_code="KEY_DENIED", rule="vault:key"
            )
            self._runtime.record_denial(error)
            raise error

        def run() -> str:
            if key == "late":
                error = ToolDeniedError(
                    "refused late", tool="vault", reason_code="KEY_DENIED", rule="vault:late"
                )
                self._runtime.record_denial(error)
                raise error
            RAN.append(key)
            return key

        return self._runtime.read_intent("open", run, arguments={"key": key})


PROVIDER = ToolProvider(tool_type=Vault, descriptor=VAULT)


@pytest.fixture(autouse=True)
def _reset() -> None:
    RAN.clear()


def _denials(sink: MemorySink, run_id: str) -> list[tuple[str | None, str | None, tuple[str, ...]]]:
    return [
        (e.decision, e.reason_code, tuple(e.rule_ids))
        for e in sink.read_trace(run_id)
        if e.type is EventType.GOVERNANCE_DECISION and e.decision == "DENY"
    ]


def _load(sink: MemorySink) -> Governance:
    return Governance(audit=AuditTrail(sink, fallback_path=None))


def test_typed_door_denial_is_audited_once():
    """The method's own refusal raises, runs nothing, and leaves one DENY decision in the audit trail."""
    sink = MemorySink()
    context = ExecutionContext(tenant="acme", principal="ann")
    tools = Tools.load(
        context, providers=[PROVIDER], discover=False, env={}, policy=_allow(), governance=_load(sink)
    )
    with pytest.raises(ToolDeniedError) as caught:
        tools.get(Vault).open("forbidden")
    assert caught.value.reason_code == "KEY_DENIED"
    assert RAN == []
    assert _denials(sink, context.run_id) == [("DENY", "KEY_DENIED", ("vault:key",))]
    assert [r.reason_code for r in context.trace.denials()] == ["KEY_DENIED"]


def _denied_responses(sink: MemorySink, run_id: str) -> int:
    return sum(
        1 for e in sink.read_trace(run_id) if e.type is EventType.INVOCATION_RESPONSE and e.status == "DENIED"
    )


# Refused while the call is built: the chain's refusal events (one DENY decision). Refused while it
# is dispatched: its opening (ALLOW) and a DENIED response, no DENY decision. Never one more.
@pytest.mark.parametrize(("key", "decisions"), [("forbidden", 1), ("late", 0)])
def test_by_name_denial_is_audited_once(key, decisions):
    """By name, building the call or dispatching it: the chain records the denial, the runtime does not."""
    sink = MemorySink()
    gateway = Gateway.load(
        providers=[PROVIDER], discover=False, env={}, policy=_allow(), governance=_load(sink)
    )
    context = ExecutionContext(tenant="acme", principal="ann")
    result = gateway.invoke("vault.open", {"key": key, "purpose": "Open"}, context=context)
    assert (result.status, result.reason_code) == (Status.DENIED, "KEY_DENIED")
    assert RAN == []
    assert len(_denials(sink, context.run_id)) == decisions
    assert _denied_responses(sink, context.run_id) == 1
    again = asyncio.run(gateway.ainvoke("vault.open", {"key": key, "purpose": "Open"}, context=context))
    assert again.status is Status.DENIED and len(_denials(sink, context.run_id)) == 2 * decisions
    assert _denied_responses(sink, context.run_id) == 2
    gateway.close()


def test_typed_door_dispatch_denial_is_audited_once():
    """A refusal raised while the typed call is dispatched is the chain's to record: one DENIED response."""
    sink = MemorySink()
    context = ExecutionContext(tenant="acme", principal="ann")
    tools = Tools.load(
        context, providers=[PROVIDER], discover=False, env={}, policy=_allow(), governance=_load(sink)
    )
    with pytest.raises(ToolDeniedError):
        tools.get(Vault).open("late").purpose("Open").execute()
    events = sink.read_trace(context.run_id)
    assert [e.status for e in events if e.type is EventType.INVOCATION_RESPONSE] == ["DENIED"]
    assert _denials(sink, context.run_id) == []  # the response carries it; no separate decision


def _allow() -> ToolPolicy:
    return ToolPolicy.standard().allow("vault")
