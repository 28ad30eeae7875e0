"""The typed door runs the same chain as the by-name door and raises the matching exceptions."""

import asyncio

import pytest

from governed_tools import PROVIDER, Billing
from toolbox import (
    ApprovalRequired,
    Budget,
    Effect,
    ExecutionContext,
    Gateway,
    Governance,
    RiskClass,
    Status,
    ToolboxError,
    ToolDeniedError,
    ToolPolicy,
    Tools,
    tool,
)
from toolbox.errors import BusinessFailedError, ToolTimeoutError, UncertainEffectError
from toolbox.governance import BusinessFailure, Decision, HmacApprover, RetryPolicy

FAST = RetryPolicy(base_delay=0.0, max_delay=0.0)


def load(context, **governance):
    governance.setdefault("retry", FAST)
    return Tools.load(
        context,
        policy=ToolPolicy.standard().allow("billing"),
        providers=[PROVIDER],
        discover=False,
        env={},
        governance=Governance(**governance),
    )


def ctx(**fields):
    return ExecutionContext(tenant="tenant-a", principal="alice", **fields)


def test_authorization_denial_raises_permission_error():
    """DENIED becomes a ToolDeniedError (a PermissionError) with the reason code; nothing ran."""
    tools = load(ctx(), authorizers=[lambda *a: Decision.deny("no")])
    billing = tools.get(Billing)
    with pytest.raises(PermissionError) as info:
        billing.lookup_invoice(7).purpose("Look").execute()
    assert isinstance(info.value, ToolDeniedError)
    assert (info.value.reason_code, billing.calls) == ("AUTH_DENIED", [])


def test_guarded_arguments_reach_authorizers():
    """Typed calls hand their arguments to authorizers and guardrails like by-name calls."""
    seen = []
    tools = load(ctx(), authorizers=[lambda t, o, c, a: seen.append(dict(a)) or Decision.allow()])
    tools.get(Billing).charge(40).audit_as("Charge").execute()
    assert seen == [{"amount": 40, "currency": "EUR"}]


def test_budget_and_kill_switch_apply_to_typed_calls():
    """The budget and the kill switch stop typed calls too."""
    tools = load(ctx(budget=Budget(max_calls=1)))
    billing = tools.get(Billing)
    billing.lookup_invoice(1).purpose("One").execute()
    with pytest.raises(ToolDeniedError) as info:
        billing.lookup_invoice(2).purpose("Two").execute()
    assert info.value.reason_code == "BUDGET_EXHAUSTED" and len(billing.calls) == 1
    stopped = load(ctx(), enabled=False).get(Billing)
    with pytest.raises(ToolDeniedError, match="kill switch"):
        stopped.lookup_invoice(1).purpose("x").execute()
    assert stopped.calls == []


def test_business_failure_and_uncertain_effect_raise():
    """BUSINESS_FAILED and UNCERTAIN_EFFECT have their own exceptions."""
    tools = load(ctx(), mappers={"billing.charge": lambda p: BusinessFailure("DECLINED")})
    billing = tools.get(Billing)
    with pytest.raises(BusinessFailedError) as info:
        billing.charge(5).audit_as("Charge").execute()
    assert info.value.error_code == "DECLINED"
    billing.script = [ToolTimeoutError("slow")]
    with pytest.raises(UncertainEffectError) as uncertain:
        billing.charge(5).audit_as("Again").execute()
    assert isinstance(uncertain.value.__cause__, ToolTimeoutError)


def test_read_timeouts_are_retried_and_errors_reraised():
    """READ_ONLY typed calls retry; a final failure re-raises the tool's own exception."""
    tools = load(ctx())
    billing = tools.get(Billing)
    billing.script = [ToolTimeoutError("slow")]
    assert billing.lookup_invoice(1).purpose("Retry").execute()["invoice_id"] == 1
    billing.script = [KeyError("bug")]
    with pytest.raises(KeyError):
        billing.lookup_invoice(1).purpose("Bug").execute()
    assert len(billing.calls) == 3


def test_approval_required_is_not_a_toolbox_error():
    """APPROVAL_REQUIRED raises ApprovalRequired, which `except ToolboxError` cannot swallow."""
    approver = HmacApprover(b"0123456789abcdef-secret")
    tools = load(ctx(), approver=approver)
    billing = tools.get(Billing)
    with pytest.raises(ApprovalRequired) as info:
        try:
            billing.refund(10).audit_as("Refund").execute()
        except ToolboxError:  # pragma: no cover - must not happen
            pytest.fail("ApprovalRequired was caught as a ToolboxError")
    grant = approver.grant(info.value.request, approved_by="manager")
    assert billing.refund(10).audit_as("Refund").execute(approval=grant) == {"ok": True, "amount": 10}
    assert len(billing.calls) == 1


def test_approval_survives_pickling():
    """The signal carries its request across process boundaries."""
    import pickle

    error = ApprovalRequired({"id": "r1"})
    assert pickle.loads(pickle.dumps(error)).request == {"id": "r1"}


def test_both_doors_leave_the_same_records():
    """A typed call and a by-name call of the same operation produce the same record shape."""
    context = ctx()
    gateway = Gateway.load(
        policy=ToolPolicy.standard().allow("billing"), providers=[PROVIDER], discover=False, env={}
    )
    tools = gateway.tools_for(context)
    tools.get(Billing).lookup_invoice(7).purpose("Same").execute()
    gateway.invoke("billing.lookup_invoice", {"invoice_id": 7, "purpose": "Same"}, context=context)
    typed, by_name = (r.as_dict() for r in context.trace.operations("billing"))
    volatile = {"declared_at", "started_at", "ended_at", "duration"}
    assert {k: v for k, v in typed.items() if k not in volatile} == {
        k: v for k, v in by_name.items() if k not in volatile
    }


def test_user_interceptor_runs_in_the_chain():
    """An interceptor added through Governance runs without editing the chain."""

    class Quota:
        name = "quota"
        per_attempt = False

        def __init__(self):
            self.seen = []

        def __call__(self, invocation):
            self.seen.append(invocation.name)
            if invocation.arguments.get("amount", 0) > 100:
                return invocation.denied("QUOTA", "quota", "over the quota")
            return None

    quota = Quota()
    tools = load(ctx(), interceptors=[quota])
    billing = tools.get(Billing)
    billing.charge(5).audit_as("Small").execute()
    with pytest.raises(ToolDeniedError) as info:
        billing.charge(500).audit_as("Big").execute()
    assert info.value.reason_code == "QUOTA"
    assert quota.seen == ["billing.charge", "billing.charge"] and len(billing.calls) == 1
    names = [i.name for i in tools.catalog.pipeline.interceptors]
    assert names == [
        "kill_switch",
        "delegation",
        "access",
        "deadline",
        "validation",
        "quota",
        "approval",
        "budget",
        "approval_redemption",  # the grant is spent last, by a call that runs
    ]


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.IDEMPOTENT, name="notes.save")
async def save_note(text: str) -> str:
    """Save a note."""
    await asyncio.sleep(0)
    return text.upper()


def test_function_tools_both_doors():
    """@tool functions work through get().call(...) and by name, sync and async."""
    context = ctx()
    gateway = Gateway.load(providers=[add, save_note], discover=False, env={})
    tools = gateway.tools_for(context)
    assert add.function(2, 3) == 5, "the plain function stays directly callable"
    assert tools.get(add).call(2, b=3).purpose("Sum").execute() == 5
    assert gateway.invoke("add", {"a": 2, "purpose": "Sum"}, context=context).content == 2
    saved = asyncio.run(gateway.ainvoke("notes.save", {"text": "hi", "audit_as": "Save"}, context=context))
    assert (saved.status, saved.content) == (Status.SUCCESS, "HI")
    assert asyncio.run(tools.get(save_note).call("x").audit_as("Save").aexecute()) == "X"
    sync_of_async = gateway.invoke("notes.save", {"text": "hi", "audit_as": "Save"}, context=context)
    assert (sync_of_async.status, sync_of_async.error_code) == (Status.ERROR, "ToolExecutionError")
    assert "call it with aexecute() or Gateway.ainvoke()" in sync_of_async.message
    with pytest.raises(ValueError, match="unexpected keyword"):
        tools.get(add).call(1, c=2)
    definitions = {d["name"]: d for d in gateway.definitions()}
    assert set(definitions) == {"add", "notes__save"}
    assert definitions["add"]["description"] == "Add two integers."
    assert definitions["add"]["parameters"]["required"] == ["a", "purpose"]
    assert "audit_as" in definitions["notes__save"]["parameters"]["required"]


def test_function_tool_arguments_bind_like_a_python_call():
    """Every way of passing arguments binds as Python would, and the intent holds all of them."""
    context = ctx()
    gateway = Gateway.load(providers=[add], discover=False, env={})
    bound = gateway.tools_for(context).get(add)
    for args, kwargs in [((2, 3), {}), ((2,), {"b": 3}), ((), {"a": 2, "b": 3}), ((), {"b": 3, "a": 2})]:
        intent = bound.call(*args, **kwargs)
        assert dict(intent.arguments) == {"a": 2, "b": 3}
        assert intent.purpose("Sum").execute() == 5
    assert dict(bound.call(2).arguments) == {"a": 2, "b": 0}, "defaults are filled in"
    for args, kwargs, message in [
        ((1, 2, 3), {}, "too many positional"),
        ((), {"b": 3}, "missing a required argument: 'a'"),
        ((1,), {"a": 2}, "multiple values for argument 'a'"),
    ]:
        with pytest.raises(ValueError, match=message):
            bound.call(*args, **kwargs)
    assert context.trace.operations("add")[-1].status == "SUCCESS"


def test_function_tool_signature_checked_at_decoration():
    """A signature that cannot be a schema fails when decorated, not on the first call."""
    from toolbox.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="args"):

        @tool(risk=RiskClass.MEMORY_ONLY)
        def spread(*values: int) -> int:
            return sum(values)

    with pytest.raises(ConfigurationError, match="clashes with the intent"):

        @tool(risk=RiskClass.MEMORY_ONLY)
        def odd(purpose: str) -> str:
            return purpose


def test_function_tool_needs_risk():
    """A function tool has no default risk class."""
    with pytest.raises(TypeError):
        tool(effect=Effect.READ_ONLY)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="RiskClass"):
        tool(risk="MEMORY_ONLY")  # type: ignore[arg-type]


def test_typed_invalid_arguments_from_a_tool_are_value_errors():
    """A tool that rejects its input at execute time surfaces INVALID_ARGUMENTS as a ValueError."""
    from toolbox import CalculatorTool
    from toolbox.registry._calculator import toolbox_providers

    tools = Tools.load(ctx(), providers=toolbox_providers(), discover=False, env={})
    with pytest.raises(ValueError, match="division by zero"):
        tools.get(CalculatorTool).evaluate("1/0").purpose("Divide").execute()


def test_fast_path_keeps_every_guarantee():
    """After the first call (which plans), typed calls take the fast path with the same semantics."""
    env: dict[str, str] = {}
    tools = Tools.load(
        ctx(),
        policy=ToolPolicy.standard().allow("billing"),
        providers=[PROVIDER],
        discover=False,
        env=env,
        governance=Governance(retry=FAST),
    )
    billing = tools.get(Billing)
    billing.lookup_invoice(1).purpose("Plan").execute()  # plans the operation
    billing.script = [ToolTimeoutError("slow")]
    assert billing.lookup_invoice(2).purpose("Retry").execute()["invoice_id"] == 2
    assert [op for op, _ in billing.calls] == ["lookup_invoice"] * 3
    billing.script = [KeyError("bug")]
    with pytest.raises(KeyError):
        billing.lookup_invoice(3).purpose("Bug").execute()
    env["TOOLBOX_KILL_SWITCH"] = "1"
    with pytest.raises(ToolDeniedError) as info:
        billing.lookup_invoice(4).purpose("Stopped").execute()
    assert info.value.reason_code == "KILL_SWITCH" and len(billing.calls) == 4
    statuses = [r.status for r in tools.context.trace.operations("billing")]
    assert statuses == ["SUCCESS", "SUCCESS", "ERROR", "DENIED"]
    assert tools.executions(Billing) == 4
