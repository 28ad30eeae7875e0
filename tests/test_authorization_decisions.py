"""Decisions that name their policies, and the two kinds of authorizer."""

from collections.abc import Mapping
from typing import Any

import pytest

from governed_tools import PROVIDER, Billing
from toolbox import ExecutionContext, Gateway, Governance, Status, ToolPolicy
from toolbox.audit import AuditTrail, EventType, MemorySink
from toolbox.governance import Decision, InvocationAuthorizer, RetryPolicy
from toolbox.pipeline._invocation import Invocation


def gateway(*authorizers, sink=None):
    return Gateway.load(
        policy=ToolPolicy.standard().allow("billing"),
        providers=[PROVIDER],
        discover=False,
        env={},
        governance=Governance(
            authorizers=list(authorizers),
            audit=AuditTrail(sink, fallback_path=None) if sink is not None else None,
            retry=RetryPolicy(base_delay=0, max_delay=0),
        ),
    )


CTX = {"tenant": "t", "principal": "p"}
LOOKUP = {"invoice_id": 7, "purpose": "Look"}


def test_decision_policies_are_validated():
    """Policies are non-empty strings; one string is not a list of policies."""
    assert Decision.allow() is Decision.allow()  # no policies: the shared instance
    assert Decision.allow(policies=["a"]).policies == ("a",)
    assert repr(Decision.deny("no", policies=["f"])) == "Decision.deny('no', policies=['f'])"
    with pytest.raises(TypeError):
        Decision.deny("no", policies="forbid-all")
    with pytest.raises(ValueError, match="non-empty"):
        Decision.allow(policies=[""])


def test_any_parameter_names_work_for_a_plain_authorizer():
    """The Authorizer protocol is positional-only: implementers choose their names."""

    def by_tenant(name: str, op: str, who: ExecutionContext, args: Mapping[str, Any]) -> Decision:
        return Decision.allow() if who.tenant == "t" else Decision.deny("other tenant")

    context = ExecutionContext(**CTX)
    assert (
        gateway(by_tenant).invoke("billing.lookup_invoice", LOOKUP, context=context).status is Status.SUCCESS
    )


def test_determining_policies_reach_the_audit_event_for_allow_and_deny():
    """Permits and forbids named by a Decision are the decision event's rule ids, prefixed by the rule."""

    class Limits:
        rule = "limits"

        def authorize(self, invocation: Invocation, /) -> Decision:
            if invocation.arguments.get("invoice_id") == 7:
                return Decision.allow(policies=["small-invoices", "business-hours"])
            return Decision.deny("too big", policies=["big-invoices"])

    assert isinstance(Limits(), InvocationAuthorizer)
    sink, context = MemorySink(), ExecutionContext(**CTX)
    gw = gateway(Limits(), sink=sink)
    allowed = gw.invoke("billing.lookup_invoice", LOOKUP, context=context)
    denied = gw.invoke("billing.lookup_invoice", {"invoice_id": 8, "purpose": "Look"}, context=context)
    assert allowed.status is Status.SUCCESS
    assert (denied.status, denied.reason_code, denied.rule) == (
        Status.DENIED,
        "AUTH_DENIED",
        "limits:big-invoices",
    )
    decisions = [r for r in sink.read_trace(context.run_id) if r.type is EventType.GOVERNANCE_DECISION]
    assert [(d.decision, d.rule_ids) for d in decisions] == [
        ("ALLOW", ["limits:small-invoices", "limits:business-hours"]),
        ("DENY", ["limits:big-invoices"]),
    ]
    assert gw.tools_for(context).get(Billing).calls == [
        ("lookup_invoice", {"invoice_id": 7, "tenant": "tenant-a"})
    ]


def test_otel_spans_carry_the_determining_policies():
    """The OpenTelemetry span lists the same rule ids as the audit event."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolbox.audit import OtelHook

    class Named:
        rule = "named"

        def authorize(self, invocation: Invocation, /) -> Decision:
            if invocation.arguments.get("invoice_id") == 7:
                return Decision.allow(policies=["p-allow"])
            return Decision.deny("no", policies=["p-deny"])

    exporter, tracer_provider = InMemorySpanExporter(), TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    gw = Gateway.load(
        policy=ToolPolicy.standard().allow("billing"),
        providers=[PROVIDER],
        discover=False,
        env={},
        governance=Governance(
            authorizers=[Named()], audit_hooks=[OtelHook(tracer=tracer_provider.get_tracer("t"))]
        ),
    )
    context = ExecutionContext(**CTX)
    gw.invoke("billing.lookup_invoice", LOOKUP, context=context)
    gw.invoke("billing.lookup_invoice", {"invoice_id": 8, "purpose": "Look"}, context=context)
    spans = exporter.get_finished_spans()
    assert [s.attributes["toolbox.rule_ids"] for s in spans] == [("named:p-allow",), ("named:p-deny",)]
    tracer_provider.shutdown()
