"""The governed pipeline through the by-name door: the scenarios of the governance issue.

Every scenario asserts the status, the codes and the exact number of tool executions.
"""

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from governed_tools import PROVIDER, Billing
from toolbox import Budget, ExecutionContext, Gateway, Governance, Status, ToolPolicy
from toolbox.errors import ConfigurationError, PolicyFileError, ToolTimeoutError
from toolbox.governance import (
    BusinessFailure,
    Decision,
    Guardrail,
    GuardrailAction,
    HmacApprover,
    ReconcileOutcome,
    Reconciliation,
    RetryPolicy,
)
from toolbox.testing import ManualClock

FAST = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0)
POLICY = ToolPolicy.standard().allow("billing")


def make(**governance):
    governance.setdefault("retry", FAST)
    return Gateway.load(
        policy=POLICY, providers=[PROVIDER], discover=False, env={}, governance=Governance(**governance)
    )


def ctx(**fields):
    fields.setdefault("tenant", "tenant-a")
    fields.setdefault("principal", "alice")
    return ExecutionContext(**fields)


def billing(gateway, context) -> Billing:
    return gateway.tools_for(context).get(Billing)


def run(gateway, context, name, arguments, **kwargs):
    tool = billing(gateway, context)
    result = gateway.invoke(name, arguments, context=context, **kwargs)
    return result, tool


LOOKUP = {"invoice_id": 7, "purpose": "Answer the customer's question"}
CHARGE = {"amount": 40, "audit_as": "Charge the approved order"}


def test_success():
    """A valid call runs once and returns its content with ids."""
    gateway, context = make(), ctx()
    result, tool = run(gateway, context, "billing.lookup_invoice", LOOKUP)
    assert result.status is Status.SUCCESS and not result.is_error
    assert result.content == {"ok": True, "invoice_id": 7, "tenant": "tenant-a"}
    assert (result.attempts, len(tool.calls)) == (1, 1)
    assert result.trace_id == context.run_id and result.correlation_id == context.correlation_id


def test_missing_trusted_context():
    """No trusted context: DENIED/NO_TRUSTED_CONTEXT, zero executions."""
    gateway, context = make(), ctx()
    tool = billing(gateway, context)
    for given in (None, {"tenant": "tenant-a", "principal": "alice"}, "session-123"):
        result = gateway.invoke("billing.lookup_invoice", LOOKUP, context=given)
        assert (result.status, result.reason_code) == (Status.DENIED, "NO_TRUSTED_CONTEXT")
    assert tool.calls == []
    assert len(gateway.unattributed) == 3


def test_context_resolver():
    """A serialized reference is resolved by the application's resolver; failures are refused."""
    context = ctx()

    class Sessions:
        def resolve(self, reference):
            if reference != "good":
                raise LookupError(reference)
            return context

    gateway = Gateway(make().catalog, resolver=Sessions())
    tool = billing(gateway, context)
    assert gateway.invoke("billing.lookup_invoice", LOOKUP, context="good").status is Status.SUCCESS
    bad = gateway.invoke("billing.lookup_invoice", LOOKUP, context="forged")
    assert bad.reason_code == "NO_TRUSTED_CONTEXT"
    assert len(tool.calls) == 1


def test_authorization_denies():
    """An authorizer's denial: DENIED/AUTH_DENIED, zero executions, its reason shown."""
    gateway = make(authorizers=[lambda tool, op, c, args: Decision.deny("not during the freeze")])
    result, tool = run(gateway, ctx(), "billing.lookup_invoice", LOOKUP)
    assert (result.status, result.reason_code, result.message) == (
        Status.DENIED,
        "AUTH_DENIED",
        "not during the freeze",
    )
    assert (result.attempts, tool.calls) == (0, [])


def test_role_policy():
    """Roles grant tools or tool.operation patterns; no matching role is denied."""
    gateway = make(roles={"support": ["billing.lookup_invoice"], "admin": ["*"]})
    support, admin, nobody = ctx(roles={"support"}), ctx(roles={"admin"}), ctx()
    assert run(gateway, support, "billing.lookup_invoice", LOOKUP)[0].status is Status.SUCCESS
    denied, tool = run(gateway, support, "billing.charge", CHARGE)
    assert (denied.reason_code, denied.rule) == ("AUTH_DENIED", "roles")
    assert [op for op, _ in tool.calls] == ["lookup_invoice"], "the denied charge never ran"
    assert run(gateway, admin, "billing.charge", CHARGE)[0].status is Status.SUCCESS
    assert run(gateway, nobody, "billing.lookup_invoice", LOOKUP)[0].reason_code == "AUTH_DENIED"


def test_tenant_scope_compares_tenants():
    """The tenant check compares the resource's tenant with the caller's, not mere presence."""
    from toolbox.governance import TenantScope

    scope = TenantScope(lambda tool, op, args: args.get("tenant"), scoped=["billing.lookup_invoice"])
    gateway = make(authorizers=[scope])
    mine = run(gateway, ctx(), "billing.lookup_invoice", {**LOOKUP, "tenant": "tenant-a"})[0]
    theirs, tool = run(gateway, ctx(), "billing.lookup_invoice", {**LOOKUP, "tenant": "tenant-b"})
    assert mine.status is Status.SUCCESS
    assert (theirs.status, theirs.reason_code) == (Status.DENIED, "AUTH_DENIED")
    assert len(tool.calls) == 0


@pytest.mark.parametrize(
    ("arguments", "code", "path"),
    [
        ({"invoice_id": -3, "purpose": "x"}, "greater_than", "invoice_id"),
        ({"invoice_id": "seven", "purpose": "x"}, "int_parsing", "invoice_id"),
        ({"purpose": "x"}, "missing", "invoice_id"),
        ({"invoice_id": 7}, "missing", "purpose"),
        ({"invoice_id": 7, "purpose": "x", "admin": True}, "extra_forbidden", "admin"),
        ({"invoice_id": 7, "purpose": "line\nbreak"}, "invalid_intent", "purpose"),
        ({"invoice_id": 7, "audit_as": "x"}, "missing", "purpose"),
        (["not", "an", "object"], "not_an_object", ""),
    ],
)
def test_invalid_arguments(arguments, code, path):
    """Invalid arguments: INVALID_ARGUMENTS with error code and field path, zero executions."""
    result, tool = run(make(), ctx(), "billing.lookup_invoice", arguments)
    assert (result.status, result.error_code, result.field_path) == (Status.INVALID_ARGUMENTS, code, path)
    assert result.is_error and tool.calls == [] and result.attempts == 0


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"invoice_id": 1, "purpose": "x", "tenant": "t" * 70_000}, "too_large"),
        ({"invoice_id": 1, "purpose": "x", "tenant": {"a": list(range(1001))}}, "too_many_items"),
    ],
)
def test_argument_guards(arguments, code):
    """Size and collection guards run before the schema, with zero executions."""
    result, tool = run(make(), ctx(), "billing.lookup_invoice", arguments)
    assert (result.status, result.error_code) == (Status.INVALID_ARGUMENTS, code)
    assert tool.calls == []


def test_depth_guard():
    """Nesting deeper than the limit is refused without recursion."""
    deep: object = "leaf"
    for _ in range(10_000):
        deep = [deep]
    result, tool = run(
        make(), ctx(), "billing.lookup_invoice", {"invoice_id": 1, "purpose": "x", "tenant": deep}
    )
    assert (result.status, result.error_code, tool.calls) == (Status.INVALID_ARGUMENTS, "too_deep", [])


def test_business_mapper_declines():
    """A registered mapper turns a payload into BUSINESS_FAILED; the tool ran once."""
    declined = {"status": "declined", "code": "CARD_DECLINED"}
    mapper = {
        "billing.charge": lambda p: BusinessFailure(p["code"]) if p.get("status") == "declined" else None
    }
    gateway, context = make(mappers=mapper), ctx()
    billing(gateway, context).script = [declined]
    result, tool = run(gateway, context, "billing.charge", CHARGE)
    assert (result.status, result.error_code, len(tool.calls)) == (Status.BUSINESS_FAILED, "CARD_DECLINED", 1)
    assert result.content == declined


def test_same_payload_without_mapper_is_success():
    """Unmapped payloads are never searched for words like 'declined'."""
    gateway, context = make(), ctx()
    billing(gateway, context).script = [{"status": "declined", "error": "declined"}]
    result, tool = run(gateway, context, "billing.charge", CHARGE)
    assert (result.status, len(tool.calls)) == (Status.SUCCESS, 1)


def test_timeout_then_success_read_only():
    """READ_ONLY: a timeout is retried; the second attempt succeeds (2 executions)."""
    gateway, context = make(), ctx()
    billing(gateway, context).script = [ToolTimeoutError("slow")]
    result, tool = run(gateway, context, "billing.lookup_invoice", LOOKUP)
    assert (result.status, result.attempts, len(tool.calls)) == (Status.SUCCESS, 2, 2)


def test_timeout_then_success_idempotent():
    """IDEMPOTENT: retried like reads."""
    gateway, context = make(), ctx()
    billing(gateway, context).script = [ConnectionResetError("reset")]
    result, tool = run(
        gateway, context, "billing.update_note", {"invoice_id": 1, "note": "n", "audit_as": "Note"}
    )
    assert (result.status, len(tool.calls)) == (Status.SUCCESS, 2)


def test_timeout_unsafe_is_uncertain():
    """UNSAFE: a timeout is UNCERTAIN_EFFECT after one execution, never retried."""
    gateway, context = make(), ctx()
    billing(gateway, context).script = [ToolTimeoutError("slow")]
    result, tool = run(gateway, context, "billing.charge", CHARGE)
    assert (result.status, result.error_code, len(tool.calls)) == (Status.UNCERTAIN_EFFECT, "TIMEOUT", 1)


def test_unsafe_not_sent_is_plain_error():
    """A failure that provably sent nothing is ERROR, not UNCERTAIN_EFFECT (and still not retried)."""
    gateway, context = make(), ctx()
    billing(gateway, context).script = [ToolTimeoutError("connect timeout", request_sent=False)]
    result, tool = run(gateway, context, "billing.charge", CHARGE)
    assert (result.status, result.error_code, len(tool.calls)) == (Status.ERROR, "TIMEOUT", 1)


def test_retries_exhausted():
    """Transient failures on every attempt end as ERROR/TIMEOUT after max_attempts."""
    gateway, context = make(), ctx()
    billing(gateway, context).script = [TimeoutError(), TimeoutError(), TimeoutError(), {"late": 1}]
    result, tool = run(gateway, context, "billing.lookup_invoice", LOOKUP)
    assert (result.status, result.error_code, len(tool.calls)) == (Status.ERROR, "TIMEOUT", 3)


def test_non_transient_error_not_retried():
    """A tool bug is ERROR at once, without a stack trace or the exception's message."""
    gateway, context = make(), ctx()
    billing(gateway, context).script = [KeyError("secret-token-123")]
    result, tool = run(gateway, context, "billing.lookup_invoice", LOOKUP)
    assert (result.status, result.error_code, len(tool.calls)) == (Status.ERROR, "KeyError", 1)
    assert "secret-token-123" not in repr(result.as_dict())
    assert "Traceback" not in result.message


def test_reconcilable_checks_before_retrying():
    """RECONCILABLE: the reconciler decides: NOT_APPLIED retries, APPLIED returns, UNKNOWN is uncertain."""
    seen = []

    def reconcile(invocation, error):
        seen.append(invocation.arguments["reference"])
        outcome = {"r1": ReconcileOutcome.NOT_APPLIED, "r2": ReconcileOutcome.APPLIED}.get(
            invocation.arguments["reference"], ReconcileOutcome.UNKNOWN
        )
        return Reconciliation(outcome, content={"reconciled": True})

    gateway, context = make(reconcilers={"billing.transfer": reconcile}), ctx()
    tool = billing(gateway, context)
    tool.script = [TimeoutError()]
    retried = gateway.invoke(
        "billing.transfer", {"amount": 1, "reference": "r1", "audit_as": "Pay"}, context=context
    )
    assert (retried.status, retried.attempts) == (Status.SUCCESS, 2)
    tool.script = [TimeoutError()]
    applied = gateway.invoke(
        "billing.transfer", {"amount": 1, "reference": "r2", "audit_as": "Pay"}, context=context
    )
    assert (applied.status, applied.content, applied.attempts) == (Status.SUCCESS, {"reconciled": True}, 1)
    tool.script = [TimeoutError()]
    unknown = gateway.invoke(
        "billing.transfer", {"amount": 1, "reference": "r3", "audit_as": "Pay"}, context=context
    )
    assert (unknown.status, unknown.attempts) == (Status.UNCERTAIN_EFFECT, 1)
    assert seen == ["r1", "r2", "r3"] and len(tool.calls) == 4


def test_reconcilable_without_reconciler_is_uncertain():
    """Without a reconciler, RECONCILABLE behaves like UNSAFE."""
    gateway, context = make(), ctx()
    billing(gateway, context).script = [TimeoutError()]
    result, tool = run(
        gateway, context, "billing.transfer", {"amount": 1, "reference": "r", "audit_as": "Pay"}
    )
    assert (result.status, len(tool.calls)) == (Status.UNCERTAIN_EFFECT, 1)


def test_authorization_revoked_between_attempts():
    """Authorization runs on every attempt: revoked after the first, the retry is DENIED (1 execution)."""
    allowed = {"yes": True}

    def auth(tool, op, c, args):
        return Decision.allow() if allowed["yes"] else Decision.deny("access revoked")

    gateway, context = make(authorizers=[auth]), ctx()
    tool = billing(gateway, context)
    tool.script = [TimeoutError()]
    tool.on_call = lambda: allowed.update(yes=False)
    result = gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
    assert (result.status, result.reason_code, len(tool.calls)) == (Status.DENIED, "AUTH_DENIED", 1)


def test_deadline_between_attempts():
    """A deadline that passes during a retry stops the next attempt."""
    clock = ManualClock()
    gateway = make(
        retry=RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.001, jitter=0), clock=clock
    )
    context = ctx(deadline=datetime.fromtimestamp(clock() + 60, timezone.utc))
    tool = billing(gateway, context)
    tool.script = [TimeoutError()]
    tool.on_call = lambda: clock.advance(60)  # the first attempt takes the minute that was left
    result = gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
    assert (result.status, result.reason_code, len(tool.calls)) == (Status.DENIED, "DEADLINE_EXCEEDED", 1)


def test_deadline_passed():
    """A passed deadline: DENIED/DEADLINE_EXCEEDED, zero executions."""
    context = ctx(deadline=datetime.now(timezone.utc) - timedelta(seconds=1))
    result, tool = run(make(), context, "billing.lookup_invoice", LOOKUP)
    assert (result.reason_code, tool.calls) == ("DEADLINE_EXCEEDED", [])


@pytest.mark.parametrize("where", ["authorizer", "guardrail", "interceptor"])
def test_evaluator_raises(where):
    """Any evaluator that raises fails closed: DENIED/GOVERNANCE_EVALUATION_FAILED, zero executions."""

    def boom(*args):
        raise RuntimeError("secret-detail")

    class Broken:
        name = "mine"
        per_attempt = False

        def __call__(self, invocation):
            raise RuntimeError("secret-detail")

    settings = {
        "authorizer": {"authorizers": [boom]},
        "guardrail": {"guardrails": [Guardrail(id="X", action=GuardrailAction.DENY, when=boom)]},
        "interceptor": {"interceptors": [Broken()]},
    }[where]
    result, tool = run(make(**settings), ctx(), "billing.lookup_invoice", LOOKUP)
    assert (result.status, result.reason_code, tool.calls) == (
        Status.DENIED,
        "GOVERNANCE_EVALUATION_FAILED",
        [],
    )
    assert "secret-detail" not in result.message


def test_kill_switch():
    """enabled=False or the environment variable: DENIED/KILL_SWITCH, zero executions."""
    result, tool = run(make(enabled=False), ctx(), "billing.lookup_invoice", LOOKUP)
    assert (result.status, result.reason_code, tool.calls) == (Status.DENIED, "KILL_SWITCH", [])
    env = {"TOOLBOX_KILL_SWITCH": "1"}
    gateway = Gateway.load(policy=POLICY, providers=[PROVIDER], discover=False, env=env)
    result, tool = run(gateway, ctx(), "billing.lookup_invoice", LOOKUP)
    assert (result.reason_code, tool.calls) == ("KILL_SWITCH", [])
    env["TOOLBOX_KILL_SWITCH"] = "0"
    assert gateway.invoke("billing.lookup_invoice", LOOKUP, context=ctx()).status is Status.SUCCESS


def test_kill_switch_per_tool_and_typo_engages():
    """disabled_tools stops one tool; an unrecognised value engages the switch (fail safe)."""
    result, _ = run(make(disabled_tools=["billing"]), ctx(), "billing.lookup_invoice", LOOKUP)
    assert result.reason_code == "KILL_SWITCH"
    gateway = Gateway.load(
        policy=POLICY, providers=[PROVIDER], discover=False, env={"TOOLBOX_KILL_SWITCH": "of"}
    )
    assert gateway.invoke("billing.lookup_invoice", LOOKUP, context=ctx()).reason_code == "KILL_SWITCH"


def test_invalid_arguments_never_retried():
    """INVALID_ARGUMENTS to a READ_ONLY tool with retries on: not retried, zero executions."""
    gateway = make(retry=RetryPolicy(max_attempts=5, base_delay=0))
    result, tool = run(gateway, ctx(), "billing.lookup_invoice", {"invoice_id": 0, "purpose": "x"})
    assert (result.status, result.attempts, tool.calls) == (Status.INVALID_ARGUMENTS, 0, [])


def test_approval_required_then_granted():
    """APPROVAL_REQUIRED (0 executions), then SUCCESS with a grant for the same arguments (1)."""
    approver = HmacApprover(b"0123456789abcdef-secret")
    gateway, context = make(approver=approver), ctx()
    arguments = {"amount": 25, "audit_as": "Refund the damaged item"}
    pending, tool = run(gateway, context, "billing.refund", arguments)
    assert (pending.status, pending.is_error, tool.calls) == (Status.APPROVAL_REQUIRED, False, [])
    request = pending.approval
    assert request.tool == "billing" and request.arguments == {"amount": 25}
    grant = approver.grant(request, approved_by="manager-1")
    done = gateway.invoke("billing.refund", arguments, context=context, approval=grant)
    assert (done.status, len(tool.calls)) == (Status.SUCCESS, 1)
    again = gateway.invoke("billing.refund", arguments, context=context, approval=grant)
    assert (again.reason_code, len(tool.calls)) == ("APPROVAL_INVALID", 1), "grants are single-use"


@pytest.mark.parametrize("change", ["arguments", "principal", "expired", "forged"])
def test_approval_replay_refused(change):
    """A grant for other arguments, another principal, an expired or forged one: DENIED/APPROVAL_INVALID."""
    approver = HmacApprover(b"0123456789abcdef-secret")
    gateway, context = make(approver=approver), ctx()
    arguments = {"amount": 25, "audit_as": "Refund"}
    request = gateway.invoke("billing.refund", arguments, context=context).approval
    grant = approver.grant(request, approved_by="manager-1", ttl_seconds=-1 if change == "expired" else 60)
    if change == "forged":
        grant = HmacApprover(b"another-secret-0123456789").grant(request, approved_by="manager-1")
    other = ctx(principal="mallory") if change == "principal" else context
    replay = {"amount": 2500, "audit_as": "Refund"} if change == "arguments" else arguments
    result, tool = run(gateway, other, "billing.refund", replay, approval=grant)
    assert (result.status, result.reason_code, tool.calls) == (Status.DENIED, "APPROVAL_INVALID", [])


def test_approval_does_not_replace_authorization():
    """A valid grant does not bypass an authorizer's denial."""
    approver = HmacApprover(b"0123456789abcdef-secret")
    gateway = make(approver=approver, authorizers=[lambda *a: Decision.deny("no refunds today")])
    context = ctx()
    gateway_open = make(approver=approver)
    request = gateway_open.invoke("billing.refund", {"amount": 1, "audit_as": "R"}, context=context).approval
    grant = approver.grant(request, approved_by="manager-1")
    result, tool = run(gateway, context, "billing.refund", {"amount": 1, "audit_as": "R"}, approval=grant)
    assert (result.reason_code, tool.calls) == ("AUTH_DENIED", [])


def test_budget_of_two_calls():
    """A budget of 2 calls: the third is DENIED/BUDGET_EXHAUSTED; 2 executions in total."""
    gateway, context = make(), ctx(budget=Budget(max_calls=2))
    tool = billing(gateway, context)
    statuses = [gateway.invoke("billing.lookup_invoice", LOOKUP, context=context) for _ in range(3)]
    assert [r.status for r in statuses] == [Status.SUCCESS, Status.SUCCESS, Status.DENIED]
    assert statuses[2].reason_code == "BUDGET_EXHAUSTED"
    assert len(tool.calls) == 2


def test_budget_per_tool_and_retries_count_once():
    """Per-tool limits apply; a retried call counts once."""
    gateway, context = make(), ctx(budget=Budget(per_tool={"billing": 1}))
    billing(gateway, context).script = [TimeoutError()]
    first, tool = run(gateway, context, "billing.lookup_invoice", LOOKUP)
    second = gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
    assert (first.status, first.attempts, second.reason_code) == (Status.SUCCESS, 2, "BUDGET_EXHAUSTED")
    assert len(tool.calls) == 2
    assert second.rule == "budget:tool:billing"


def test_guardrails_deny_warn_and_approval():
    """DENY stops with GUARDRAIL_<id>; WARN runs and reports; REQUIRE_APPROVAL asks."""
    rules = [
        Guardrail(
            id="BIG_CHARGE",
            action=GuardrailAction.DENY,
            tool="billing",
            operation="charge",
            when=lambda a: a["amount"] > 1000,
            message="charges over 1000 need finance",
        ),
        Guardrail(
            id="FOREIGN",
            action=GuardrailAction.WARN,
            operation="charge",
            when=lambda a: a["currency"] != "EUR",
        ),
        Guardrail(
            id="MEDIUM",
            action=GuardrailAction.REQUIRE_APPROVAL,
            operation="charge",
            when=lambda a: a["amount"] > 500,
        ),
    ]
    gateway, context = make(guardrails=rules), ctx()
    denied, tool = run(gateway, context, "billing.charge", {"amount": 5000, "audit_as": "Charge"})
    assert (denied.status, denied.reason_code, denied.message) == (
        Status.DENIED,
        "GUARDRAIL_BIG_CHARGE",
        "charges over 1000 need finance",
    )
    warned = gateway.invoke(
        "billing.charge", {"amount": 5, "currency": "USD", "audit_as": "Charge"}, context=context
    )
    assert warned.status is Status.SUCCESS and warned.warnings[0].startswith("GUARDRAIL_FOREIGN")
    pending = gateway.invoke("billing.charge", {"amount": 600, "audit_as": "Charge"}, context=context)
    assert pending.status is Status.APPROVAL_REQUIRED and pending.approval.rules == ("MEDIUM",)
    assert len(tool.calls) == 1
    record = context.trace.operations("billing")[1]
    assert record.warnings == warned.warnings


def test_guardrail_report_mode():
    """REPORT mode turns DENY into WARN, for roll-out."""
    rules = [Guardrail(id="ALL", action=GuardrailAction.DENY)]
    result, tool = run(
        make(guardrails=rules, guardrail_mode="REPORT"), ctx(), "billing.lookup_invoice", LOOKUP
    )
    assert result.status is Status.SUCCESS and result.warnings and len(tool.calls) == 1


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"guardrail_mode": "PERMISSIVE"}, "unknown guardrail mode"),
        ({"guardrails": [Guardrail(id="A", action=GuardrailAction.DENY)] * 2}, "used twice"),
        ({"roles": {"support": "billing"}}, "must be a list"),
        ({"timeouts": {"billing": 0}}, "positive number"),
        ({"interceptors": [object()]}, "not an interceptor"),
    ],
)
def test_governance_configuration_errors(settings, message):
    """Malformed governance fails at configuration time."""
    with pytest.raises(ConfigurationError, match=message):
        Governance(**settings)


def test_unknown_guardrail_action_in_policy_file(tmp_path):
    """An unknown guardrail action (or mode) in the policy file fails at load: zero executions."""
    for text, message in [
        ('version = 1\n[[guardrails.rules]]\nid = "X"\naction = "IGNORE"\n', "unknown action 'IGNORE'"),
        ('version = 1\n[guardrails]\nmode = "LAX"\n', "unknown guardrail mode"),
        ("version = 1\n[guardrails]\nrulez = []\n", "unknown key"),
    ]:
        path = tmp_path / "policy.toml"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(PolicyFileError, match=message):
            ToolPolicy.from_file(path)


def test_policy_file_roles_and_guardrails(tmp_path):
    """Roles and guardrails from the policy file govern calls."""
    path = tmp_path / "policy.toml"
    path.write_text(
        'version = 1\n[allow]\ntools = ["billing"]\n[roles]\nsupport = ["billing.lookup_invoice"]\n'
        '[[guardrails.rules]]\nid = "NO_BIG"\ntool = "billing"\noperation = "lookup_invoice"\n'
        'action = "DENY"\nargument = "invoice_id"\ngreater_than = 1000\n',
        encoding="utf-8",
    )
    gateway = Gateway.load(
        policy=ToolPolicy.from_file(path),
        providers=[PROVIDER],
        discover=False,
        env={},
        governance=Governance(retry=FAST),
    )
    support = ctx(roles={"support"})
    assert gateway.invoke("billing.lookup_invoice", LOOKUP, context=support).status is Status.SUCCESS
    big = gateway.invoke("billing.lookup_invoice", {"invoice_id": 5000, "purpose": "x"}, context=support)
    assert big.reason_code == "GUARDRAIL_NO_BIG"
    assert gateway.invoke("billing.charge", CHARGE, context=support).reason_code == "AUTH_DENIED"


def test_policy_and_acknowledgement_apply_by_name():
    """The by-name door applies the same registry and policy decisions as get()."""
    gateway = Gateway.load(providers=[PROVIDER], discover=False, env={})
    result = gateway.invoke("billing.lookup_invoice", LOOKUP, context=ctx())
    assert (result.status, result.reason_code, result.rule) == (
        Status.DENIED,
        "POLICY_DENIED",
        "default:deny",
    )
    unknown = gateway.invoke("nothing.here", {}, context=ctx())
    assert (unknown.status, unknown.reason_code, unknown.rule, unknown.error_code, unknown.field_path) == (
        Status.DENIED,
        "TOOL_UNAVAILABLE",
        "registry",
        "unknown_tool",
        None,
    )
    assert "field_path" not in unknown.as_dict()
    bad_op = gateway.invoke("billing.nope", {}, context=ctx())
    assert (bad_op.status, bad_op.error_code) == (Status.INVALID_ARGUMENTS, "unknown_operation")


def test_versions():
    """name:version selects a registered version; the full string is recorded."""
    gateway, context = make(), ctx()
    ok = gateway.invoke("billing.lookup_invoice:v2", LOOKUP, context=context)
    assert (ok.status, ok.name) == (Status.SUCCESS, "billing.lookup_invoice:v2")
    assert context.trace.operations("billing")[-1].name == "billing.lookup_invoice:v2"
    missing = gateway.invoke("billing.lookup_invoice:v3", LOOKUP, context=context)
    assert (missing.status, missing.reason_code, missing.rule) == (
        Status.DENIED,
        "TOOL_UNAVAILABLE",
        "registry:version",
    )


def test_per_operation_timeout_sync_and_async():
    """A governed timeout: ERROR/TIMEOUT for READ_ONLY after retries, UNCERTAIN_EFFECT for UNSAFE."""
    import threading

    gateway, context = make(timeouts={"billing": 0.05}, retry=RetryPolicy(max_attempts=1)), ctx()
    tool = billing(gateway, context)
    # The call never ends by itself (not "takes longer than the timeout"), so no scheduling delay
    # can let it finish first; it is released when the test is done with it.
    release = threading.Event()
    tool.on_call = lambda: release.wait(60)

    async def charge():
        try:
            return await gateway.ainvoke("billing.charge", CHARGE, context=context)
        finally:
            release.set()  # before asyncio.run waits for its executor's threads

    try:
        read = gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
        assert (read.status, read.error_code) == (Status.ERROR, "TIMEOUT")
        write = asyncio.run(charge())
        assert (write.status, write.error_code) == (Status.UNCERTAIN_EFFECT, "TIMEOUT")
    finally:
        release.set()


def test_ainvoke_matches_invoke():
    """The async door returns the same statuses."""
    gateway, context = make(), ctx()
    result = asyncio.run(gateway.ainvoke("billing.lookup_invoice", LOOKUP, context=context))
    assert result.status is Status.SUCCESS
    invalid = asyncio.run(gateway.ainvoke("billing.lookup_invoice", {"purpose": "x"}, context=context))
    assert invalid.status is Status.INVALID_ARGUMENTS


def test_definitions_are_function_schemas():
    """Each allowed operation exports a JSON Schema usable as an LLM function definition."""
    definitions = {d["name"]: d for d in make().definitions()}
    lookup = definitions["billing__lookup_invoice"]
    schema = lookup["parameters"]
    assert schema["required"] == ["invoice_id", "purpose"]
    assert schema["properties"]["invoice_id"]["exclusiveMinimum"] == 0
    assert schema["additionalProperties"] is False
    assert "audit_as" in definitions["billing__charge"]["parameters"]["properties"]
    assert "calculator__evaluate" not in definitions  # not registered here


def test_every_outcome_is_recorded():
    """Denials, invalid arguments, errors and successes all leave an operation record."""
    gateway, context = (
        make(authorizers=[lambda t, o, c, a: Decision.deny("no") if o == "charge" else Decision.allow()]),
        ctx(),
    )
    billing(gateway, context).script = [{"ok": 1}, KeyError("boom")]
    gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
    gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
    gateway.invoke("billing.lookup_invoice", {"purpose": "x"}, context=context)
    gateway.invoke("billing.charge", CHARGE, context=context)
    statuses = [(r.status, r.reason_code or r.error_code) for r in context.trace.operations("billing")]
    assert statuses == [
        ("SUCCESS", None),
        ("ERROR", "KeyError"),
        ("INVALID_ARGUMENTS", "INVALID_ARGUMENTS"),
        ("DENIED", "AUTH_DENIED"),
    ]


def test_remote_refs_rejected():
    """Only local $ref may appear in a schema; a remote one is refused, never fetched."""
    from toolbox.pipeline.checks._schemas import check_local_refs

    check_local_refs({"$defs": {"A": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/A"}}})
    for ref in ("https://schemas.example.com/a.json", "file:///etc/passwd", "other.json#/x"):
        with pytest.raises(ConfigurationError, match="only local"):
            check_local_refs({"properties": {"a": {"items": [{"$ref": ref}]}}})


def test_audit_hook_points():
    """Audit hooks see each dispatched request and every final result, denials included."""
    seen = []

    class Hook:
        def on_request(self, invocation):
            seen.append(("request", invocation.name))

        def on_response(self, invocation, result):
            seen.append(("response", result.status.value))

    gateway = make(
        audit_hooks=[Hook()],
        authorizers=[lambda t, o, c, a: Decision.allow() if o != "charge" else Decision.deny("no")],
    )
    context = ctx()
    gateway.invoke("billing.lookup_invoice", LOOKUP, context=context)
    gateway.invoke("billing.charge", CHARGE, context=context)
    assert seen == [("request", "billing.lookup_invoice"), ("response", "SUCCESS"), ("response", "DENIED")]


def test_approval_request_redacts_nested_secrets():
    """Approval requests mask nested secrets and URLs before a model or a person sees them."""
    from toolbox.pipeline.checks._approval import _redact

    shown = _redact(
        {"headers": {"Authorization": "Bearer abc"}, "url": "https://u:p@h/x?token=t", "n": "EUR"}
    )
    assert shown == {
        "headers": {"Authorization": "[REDACTED]"},
        "url": "https://h/x?token=[REDACTED]",
        "n": "EUR",
    }
