"""CedarAuthorizer: Cedar policies, validated against a schema at load, judge every attempt."""

import contextlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_tools import PROVIDER, Billing
from toolbox import ExecutionContext, Gateway, Governance, Status, ToolDeniedError, ToolPolicy
from toolbox.audit import AuditTrail, EventType, MemorySink
from toolbox.errors import PolicyFileError
from toolbox.governance import CedarAuthorizer, RetryPolicy

FILES = Path(__file__).parent / "cedar"
POLICIES = FILES / "billing.cedar"
SCHEMA = FILES / "billing.cedarschema"


def cedar() -> CedarAuthorizer:
    return CedarAuthorizer.from_files(POLICIES, SCHEMA)


def gateway(sink=None, authorizer=None):
    trail = AuditTrail(sink, fallback_path=None) if sink is not None else None
    return Gateway.load(
        policy=ToolPolicy.standard().allow("billing"),
        providers=[PROVIDER],
        discover=False,
        env={},
        governance=Governance(
            authorizers=[authorizer or cedar()],
            audit=trail,
            retry=RetryPolicy(base_delay=0, max_delay=0),
        ),
    )


def ctx(*roles, tenant="tenant-a"):
    return ExecutionContext(tenant=tenant, principal="alice", roles=frozenset(roles))


def billing_of(gw, context):
    return gw.tools_for(context).get(Billing)


def decision_event(sink, context):
    [event] = [r for r in sink.read_trace(context.run_id) if r.type is EventType.GOVERNANCE_DECISION]
    return event


def assert_refused(result, sink, gw, context, rule):
    """DENIED/AUTH_DENIED by ``rule``, nothing dispatched, and the audit's decision event says so."""
    assert (result.status, result.reason_code, result.rule, result.attempts) == (
        Status.DENIED,
        "AUTH_DENIED",
        rule,
        0,
    )
    events = [r for r in sink.read_trace(context.run_id) if r.type is EventType.GOVERNANCE_DECISION]
    assert (events[-1].decision, events[-1].reason_code) == ("DENY", "AUTH_DENIED")
    assert rule in events[-1].rule_ids
    assert billing_of(gw, context).calls == []


# -- decisions on both doors ---------------------------------------------------------


def test_a_permit_lets_the_call_run_and_the_audit_names_it():
    """A permitting policy lets both doors run; the decision event names the policy."""
    sink, context = MemorySink(), ctx("clerk")
    gw = gateway(sink)
    result = gw.invoke("billing.charge", {"amount": 40, "audit_as": "Charge order 7"}, context=context)
    assert result.status is Status.SUCCESS
    assert billing_of(gw, context).charge(40).audit_as("Charge order 7").execute()["ok"] is True
    events = [r for r in sink.read_trace(context.run_id) if r.type is EventType.GOVERNANCE_DECISION]
    assert [(e.decision, e.rule_ids) for e in events] == [("ALLOW", ["cedar:clerks-use-billing"])] * 2


def test_forbid_overrides_permit_on_both_doors():
    """A forbid beats a permit: DENIED/AUTH_DENIED, the tool never ran, the audit names the forbid."""
    sink, context = MemorySink(), ctx("clerk", "intern")
    gw = gateway(sink)
    result = gw.invoke("billing.charge", {"amount": 40, "audit_as": "Charge"}, context=context)
    assert (result.status, result.reason_code, result.rule) == (
        Status.DENIED,
        "AUTH_DENIED",
        "cedar:no-interns",
    )
    assert "forbidden by Cedar policy no-interns" in result.message
    event = decision_event(sink, context)
    assert (event.decision, event.reason_code, event.rule_ids) == (
        "DENY",
        "AUTH_DENIED",
        ["cedar:no-interns"],
    )
    billing = billing_of(gw, context)
    with pytest.raises(ToolDeniedError) as info:
        billing.charge(40).audit_as("Charge").execute()
    assert (info.value.reason_code, info.value.rule) == ("AUTH_DENIED", "cedar:no-interns")
    assert billing.calls == []


def test_tenant_mismatch_is_denied():
    """An invoice of another tenant is refused; the caller's own tenant is allowed."""
    sink, context = MemorySink(), ctx("clerk")
    gw = gateway(sink)
    other = {"invoice_id": 7, "tenant": "tenant-b", "purpose": "Look it up"}
    result = gw.invoke("billing.lookup_invoice", other, context=context)
    assert_refused(result, sink, gw, context, "cedar:own-tenant-only")
    billing = billing_of(gw, context)
    with pytest.raises(ToolDeniedError, match="own-tenant-only"):
        billing.lookup_invoice(7, tenant="tenant-b").purpose("Look it up").execute()
    assert billing.calls == []
    billing.lookup_invoice(7, tenant="tenant-a").purpose("Look it up").execute()
    assert len(billing.calls) == 1


@pytest.mark.parametrize(("amount", "status"), [(500, Status.SUCCESS), (501, Status.DENIED)])
def test_amount_over_the_limit_is_denied(amount, status):
    """The argument rule sees the validated amount: 500 passes, 501 is forbidden."""
    sink, context = MemorySink(), ctx("clerk")
    gw = gateway(sink)
    result = gw.invoke("billing.charge", {"amount": amount, "audit_as": "Charge"}, context=context)
    assert result.status is status
    if status is Status.DENIED:
        assert_refused(result, sink, gw, context, "cedar:charge-limit")


def test_no_permit_is_a_denial_with_the_default_rule():
    """Without a permitting policy Cedar denies; the rule is plain ``cedar``."""
    sink, context = MemorySink(), ctx()
    gw = gateway(sink)
    result = gw.invoke("billing.charge", {"amount": 1, "audit_as": "Charge"}, context=context)
    assert (result.status, result.reason_code, result.rule) == (Status.DENIED, "AUTH_DENIED", "cedar")
    assert result.message == "no Cedar policy permits billing.charge for this principal"
    assert decision_event(sink, context).rule_ids == ["cedar"]
    assert billing_of(gw, context).calls == []


def test_risk_and_effect_reach_the_policies():
    """The auditor policy reads the operation's effect and the tool's risk."""
    context = ctx("auditor")
    gw = gateway()
    read = gw.invoke("billing.lookup_invoice", {"invoice_id": 7, "purpose": "Audit"}, context=context)
    write = gw.invoke("billing.charge", {"amount": 1, "audit_as": "Charge"}, context=context)
    assert (read.status, write.status) == (Status.SUCCESS, Status.DENIED)
    billing = billing_of(gw, context)
    billing.lookup_invoice(7).purpose("Audit").execute()
    with pytest.raises(ToolDeniedError, match=r"no Cedar policy permits billing\.charge"):
        billing.charge(1).audit_as("Charge").execute()
    assert [op for op, _ in billing.calls] == ["lookup_invoice", "lookup_invoice"]


def test_the_intent_text_reaches_the_policies():
    """The declared intent is in the Cedar context."""
    sink, context = MemorySink(), ctx("clerk")
    gw = gateway(sink)
    result = gw.invoke(
        "billing.lookup_invoice", {"invoice_id": 7, "purpose": "A bulk export of invoices"}, context=context
    )
    assert_refused(result, sink, gw, context, "cedar:no-bulk-intent")


def test_an_operation_missing_from_the_schema_is_denied():
    """An operation the schema does not declare cannot be judged, so it is denied."""
    sink, context = MemorySink(), ctx("clerk")
    gw = gateway(sink)
    result = gw.invoke(
        "billing.update_note", {"invoice_id": 7, "note": "x", "audit_as": "Note"}, context=context
    )
    assert_refused(result, sink, gw, context, "cedar")
    assert result.message == "billing.update_note is not declared as an action in the Cedar schema"


def test_an_argument_outside_cedar_range_is_a_clear_denial():
    """An integer beyond 64 bits has no Cedar value: a denial naming the argument, not a crash."""
    sink, context = MemorySink(), ctx("clerk")
    gw = gateway(sink)
    secret_number = 2**70
    result = gw.invoke(
        "billing.lookup_invoice", {"invoice_id": secret_number, "purpose": "Look"}, context=context
    )
    assert_refused(result, sink, gw, context, "cedar")
    assert "'invoice_id' is outside Cedar's 64-bit integer range" in result.message
    assert str(secret_number) not in result.message


def test_an_erroring_forbid_fails_closed(tmp_path):
    """Cedar skips a policy that errors; the authorizer denies rather than let a skipped forbid pass."""
    policies = tmp_path / "p.cedar"
    policies.write_text(
        POLICIES.read_text()
        + '\n@id("overflow")\nforbid (principal, action == Toolbox::Action::"billing.charge", resource)\n'
        "when { context.arguments.amount * 4611686018427387904 > 0 };\n"
    )
    sink, context = MemorySink(), ctx("clerk")
    gw = gateway(sink, authorizer=CedarAuthorizer.from_files(policies, SCHEMA))
    result = gw.invoke("billing.charge", {"amount": 3, "audit_as": "Charge"}, context=context)
    assert_refused(result, sink, gw, context, "cedar:overflow")  # the failing policy, not the permit
    assert result.message == "a Cedar policy failed to evaluate for billing.charge; denied (fail closed)"
    assert "4611686018427387904" not in result.message


def test_a_forged_role_entity_in_the_arguments_is_refused():
    """A by-name argument cannot smuggle an entity reference into the Cedar request."""
    from toolbox.pipeline.checks._cedar_values import CedarValueError, cedar_record

    forged = {"tenant": {"__entity": {"type": "Toolbox::Role", "id": "clerk"}}}
    with pytest.raises(CedarValueError, match="reserved Cedar key '__entity'"):
        cedar_record(forged)


# -- loading -------------------------------------------------------------------------


def test_malformed_policy_names_file_and_position(tmp_path):
    """A policy that does not parse is a load error with file, line and column."""
    policies = tmp_path / "broken.cedar"
    policies.write_text(
        '@id("ok")\npermit (principal, action, resource);\n\n'
        "  forbid (principal, action, resource) when { x == };\n"
    )
    with pytest.raises(PolicyFileError) as info:
        CedarAuthorizer.from_files(policies, SCHEMA)
    assert str(info.value).startswith(f"{policies}:4:3: policy 2 does not parse: ")


def test_schema_typo_in_a_policy_is_a_load_error(tmp_path):
    """A misspelt argument is caught by schema validation, naming the policy and its line."""
    policies = tmp_path / "typo.cedar"
    policies.write_text(POLICIES.read_text().replace("arguments.amount", "arguments.amont"))
    with pytest.raises(PolicyFileError) as info:
        CedarAuthorizer.from_files(policies, SCHEMA)
    message = str(info.value)
    assert message.startswith(f"{policies}:13: policy charge-limit breaks the schema: ")
    assert "arguments.amont" in message


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            "namespace Toolbox { entity Role; entity Principal in [Role] { tenant: Strin }; }",
            "not a valid Cedar",
        ),
        ("namespace Other { entity User; }", "must declare the entity types toolbox sends"),
        ('{"Toolbox": {"entityTypes": {}, "actions": {}', "not a valid Cedar schema"),
    ],
)
def test_bad_schema_is_a_load_error(tmp_path, schema, expected):
    """A schema that does not parse, or lacks toolbox's entity types, fails the load."""
    path = tmp_path / "bad.cedarschema"
    path.write_text(schema)
    with pytest.raises(PolicyFileError, match=expected) as info:
        CedarAuthorizer(POLICIES.read_text(), schema, schema_source=str(path))
    assert str(info.value).startswith(str(path))


def test_json_schema_is_accepted(tmp_path):
    """A Cedar JSON schema (``.json``) works like the Cedar syntax."""
    import cedarpy

    path = tmp_path / "schema.json"
    text = cedarpy.Schema.from_str(SCHEMA.read_text())
    path.write_text(_as_json(str(text)))
    authorizer = CedarAuthorizer.from_files(POLICIES, path)
    assert authorizer.policy_ids[0] == "clerks-use-billing"


def _as_json(cedar_text):
    # cedarpy renders a schema only as Cedar syntax; round-trip through the CLI-free JSON form.
    import json

    return json.dumps(
        {
            "Toolbox": {
                "entityTypes": {
                    "Role": {},
                    "Principal": {
                        "memberOfTypes": ["Role"],
                        "shape": {"type": "Record", "attributes": {"tenant": {"type": "String"}}},
                    },
                    "Tool": {"shape": {"type": "Record", "attributes": {"risk": {"type": "String"}}}},
                    "Operation": {
                        "memberOfTypes": ["Tool"],
                        "shape": {
                            "type": "Record",
                            "attributes": {
                                "effect": {"type": "String"},
                                "tool": {"type": "Entity", "name": "Tool"},
                            },
                        },
                    },
                },
                "actions": {
                    name: {
                        "appliesTo": {
                            "principalTypes": ["Principal"],
                            "resourceTypes": ["Operation"],
                            "context": {
                                "type": "Record",
                                "attributes": {
                                    "arguments": {"type": "Record", "attributes": attributes},
                                    "intent": {"type": "String"},
                                },
                            },
                        }
                    }
                    for name, attributes in {
                        "billing.lookup_invoice": {
                            "invoice_id": {"type": "Long"},
                            "tenant": {"type": "String"},
                        },
                        "billing.charge": {"amount": {"type": "Long"}, "currency": {"type": "String"}},
                    }.items()
                },
            }
        }
    )


def test_duplicate_policy_ids_are_a_load_error(tmp_path):
    """Two policies with one @id would make the audit trail ambiguous."""
    policies = tmp_path / "twice.cedar"
    policies.write_text(
        POLICIES.read_text() + '\n@id("charge-limit")\nforbid (principal, action, resource);\n'
    )
    with pytest.raises(PolicyFileError, match="policy id 'charge-limit' is used twice"):
        CedarAuthorizer.from_files(policies, SCHEMA)


def test_missing_files_are_load_errors(tmp_path):
    """A missing policy or schema file is named."""
    with pytest.raises(PolicyFileError, match="does not exist"):
        CedarAuthorizer.from_files(tmp_path / "none.cedar", SCHEMA)
    with pytest.raises(PolicyFileError, match="does not exist"):
        CedarAuthorizer.from_files(POLICIES, tmp_path / "none.cedarschema")


def test_semicolons_in_strings_and_comments_do_not_split_policies(tmp_path):
    """The statement splitter that locates errors respects strings and comments."""
    policies = tmp_path / "tricky.cedar"
    policies.write_text(
        '// a comment; with a semicolon\n@id("semi;colon")\npermit (principal, action, resource)\n'
        'when { context.intent == "a;b\\";c" };\nforbid (principal, action, resource) when { ) };\n'
    )
    with pytest.raises(PolicyFileError, match=r":5:1: policy 2 does not parse"):
        CedarAuthorizer.from_files(policies, SCHEMA)


# -- the policy file ---------------------------------------------------------------------


def _policy_file(tmp_path, policies=POLICIES):
    (tmp_path / "authz").mkdir()
    (tmp_path / "authz" / "billing.cedar").write_text(policies.read_text())
    (tmp_path / "authz" / "billing.cedarschema").write_text(SCHEMA.read_text())
    path = tmp_path / "toolbox.toml"
    path.write_text(
        textwrap.dedent(
            """
            version = 1
            [allow]
            tools = ["billing"]
            [authorization]
            cedar_policies = "authz/billing.cedar"
            cedar_schema = "authz/billing.cedarschema"
            """
        )
    )
    return path


def test_policy_file_wires_the_authorizer(tmp_path):
    """``[authorization]`` paths are read relative to the policy file; calls are then judged by Cedar."""
    policy = ToolPolicy.from_file(_policy_file(tmp_path))
    gw = Gateway.load(policy=policy, providers=[PROVIDER], discover=False, env={})
    context = ctx("clerk")
    assert (
        gw.invoke("billing.charge", {"amount": 9, "audit_as": "Charge"}, context=context).status
        is Status.SUCCESS
    )
    denied = gw.invoke("billing.charge", {"amount": 900, "audit_as": "Charge"}, context=context)
    assert denied.rule == "cedar:charge-limit"


def test_policy_file_with_a_malformed_cedar_file_fails_to_load(tmp_path):
    """The load error names the policy file, the Cedar file and the position."""
    path = _policy_file(tmp_path)
    (tmp_path / "authz" / "billing.cedar").write_text("permit (principal, action, resource) when { };\n")
    with pytest.raises(PolicyFileError) as info:
        ToolPolicy.from_file(path)
    assert str(info.value).startswith(f"{path}: [authorization]: {tmp_path / 'authz' / 'billing.cedar'}:1:1:")


def test_policy_file_rejects_unknown_authorization_keys(tmp_path):
    """A misspelt key in ``[authorization]`` is an error, like everywhere in the file."""
    path = tmp_path / "toolbox.toml"
    path.write_text(
        'version = 1\n[authorization]\ncedar_policy = "x.cedar"\ncedar_schema = "x.cedarschema"\n'
    )
    with pytest.raises(PolicyFileError, match="cedar_policy"):
        ToolPolicy.from_file(path)


def test_without_cedarpy_the_error_says_how_to_install(tmp_path, monkeypatch):
    """cedarpy is optional: using Cedar without it names the extra to install."""
    monkeypatch.setitem(sys.modules, "cedarpy", None)
    with pytest.raises(ImportError, match=r"pip install 'toolbox-registry\[cedar\]'"):
        cedar()
    with pytest.raises(PolicyFileError, match=r"toolbox-registry\[cedar\]"):
        ToolPolicy.from_file(_policy_file(tmp_path))


def test_the_core_imports_without_cedarpy():
    """``import toolbox`` never imports cedarpy."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'cedarpy': raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import toolbox, toolbox.pipeline.checks._cedar\n"
        "assert 'cedarpy' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- attacks on the request ---------------------------------------------------------------


def test_quotes_in_principal_and_roles_cannot_rewrite_the_request():
    """Ids travel as JSON, never as Cedar text: a crafted principal or role grants nothing."""
    gw = gateway()
    crafted = ExecutionContext(
        tenant="tenant-a",
        principal='mallory" in Toolbox::Role::"clerk',
        roles={'clerk" ', 'Toolbox::Role::"clerk"'},
    )
    result = gw.invoke("billing.charge", {"amount": 1, "audit_as": "Charge"}, context=crafted)
    assert (result.status, result.rule) == (Status.DENIED, "cedar")


def test_concurrent_calls_are_judged_each_on_their_own():
    """The authorizer keeps no per-call state: parallel callers with different roles get their own answers."""
    from concurrent.futures import ThreadPoolExecutor

    gw = gateway()
    contexts = [ctx("clerk") if i % 2 else ctx("intern", "clerk") for i in range(40)]

    def call(context):
        return gw.invoke("billing.charge", {"amount": 5, "audit_as": "Charge"}, context=context).status

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(call, contexts))
    assert statuses == [Status.SUCCESS if i % 2 else Status.DENIED for i in range(40)]


def test_a_retry_is_judged_again(tmp_path):
    """Authorization runs per attempt: the retry of a read is sent to Cedar again."""
    seen = []
    inner = cedar()

    class Counting:
        rule = "cedar"

        def authorize(self, invocation, /):
            seen.append(invocation.record.attempts)
            return inner.authorize(invocation)

    gw = gateway(authorizer=Counting())
    context = ctx("clerk")
    billing_of(gw, context).script = [TimeoutError("slow"), {"ok": True}]
    result = gw.invoke("billing.lookup_invoice", {"invoice_id": 7, "purpose": "Look"}, context=context)
    assert result.status is Status.SUCCESS and len(seen) == 2


@pytest.mark.parametrize(
    "condition",
    [
        "(" * 1000 + "true" + ")" * 1000,
        "[" * 5000 + "]" * 5000 + " == []",
        "if true then " * 20000 + "true" + " else false" * 20000,
    ],
    ids=["parentheses", "sets", "if-chains"],
)
def test_deep_nesting_is_a_load_error_not_a_crash(condition):
    """cedarpy's parser crashes the process on deep nesting; toolbox refuses it first, with a position."""
    policies = f'@id("deep")\npermit (principal, action, resource)\nwhen {{ {condition} }};\n'
    with pytest.raises(PolicyFileError, match=r"^<policies>:3:\d+: nested deeper than 64 levels"):
        CedarAuthorizer(policies, SCHEMA.read_text())


def test_deeply_nested_schema_is_a_load_error():
    """The schema text gets the same guard (Cedar syntax or JSON)."""
    nested = "{ a: " * 500 + "String" + " }" * 500
    schema = SCHEMA.read_text().replace("entity Role;", f"entity Role {{ deep: {nested} }};")
    with pytest.raises(PolicyFileError, match="nested deeper than 64 levels"):
        CedarAuthorizer(POLICIES.read_text(), schema)


@given(st.text(alphabet='permitforbid(){}[];"\\/ \n@id&|!<>=.:', max_size=200))
def test_any_policy_text_loads_or_is_a_policy_error(text):
    """Whatever the policy text, loading ends in an authorizer or a PolicyFileError."""
    with contextlib.suppress(PolicyFileError):
        CedarAuthorizer(text, SCHEMA.read_text())


def test_code_authorizers_run_before_the_policy_files_cedar(tmp_path):
    """Code settings come first: a code authorizer's denial wins; the file's Cedar still judges the rest."""
    from toolbox.governance import Decision

    def no_charges(tool, operation, context, arguments, /):
        return Decision.deny("charges are paused") if operation == "charge" else Decision.allow()

    policy = ToolPolicy.from_file(_policy_file(tmp_path))
    gw = Gateway.load(
        policy=policy,
        providers=[PROVIDER],
        discover=False,
        env={},
        governance=Governance(authorizers=[no_charges]),
    )
    context = ctx("clerk")
    paused = gw.invoke("billing.charge", {"amount": 9, "audit_as": "Charge"}, context=context)
    assert (paused.rule, paused.message) == ("authorizer:0", "charges are paused")
    other = gw.invoke(
        "billing.lookup_invoice", {"invoice_id": 7, "tenant": "x", "purpose": "L"}, context=context
    )
    assert other.rule == "cedar:own-tenant-only"
