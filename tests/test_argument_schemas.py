"""Schemas derived from signatures: exactly what a model is shown and what the by-name door accepts.

Written from `scripts/mutation src/toolbox/pipeline/checks/_arguments.py` (docs/testing.md, "Mutation
testing"): each test pins a behaviour whose change no other test noticed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import pytest
from pydantic import AllowInfNan

from governed_tools import PROVIDER, Billing
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
    tool,
)
from toolbox.audit import AuditTrail, MemorySink
from toolbox.errors import ConfigurationError, InvalidArgumentsError
from toolbox.pipeline.checks._arguments import validate_arguments
from toolbox.pipeline.checks._schemas import described_schema, operation_schema

CONTEXT = ExecutionContext(tenant="tenant-a", principal="alice")
AUDIT_AS = {
    "description": "Why this call is made; recorded in the audit trail (audit_as).",
    "maxLength": 1000,
    "minLength": 1,
    "title": "Audit As",
    "type": "string",
}


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE)
def send(json: dict[str, int], to: str = "ops", note=None) -> Any:  # type: ignore[no-untyped-def]
    """Send a JSON body."""
    return {"json": json, "to": to, "note": note}


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def scale(json: Annotated[float, AllowInfNan(True)], factor: float = 1.0) -> float:
    """A parameter that shadows a BaseModel attribute and opts in to infinities."""
    return json * factor


def gateway(*providers: Any) -> Gateway:
    return Gateway.load(
        policy=ToolPolicy.standard().allow("billing"), providers=list(providers), discover=False, env={}
    )


def test_the_definition_shows_every_parameter_with_its_default_and_the_intent_field() -> None:
    """``json`` keeps its public name, defaults are shown, an unannotated parameter takes any value."""
    assert gateway(send).definitions() == [
        {
            "name": "send",
            "description": "Send a JSON body.",
            "parameters": {
                "additionalProperties": False,
                "properties": {
                    "json": {"additionalProperties": {"type": "integer"}, "title": "Json", "type": "object"},
                    "to": {"default": "ops", "title": "To", "type": "string"},
                    "note": {"default": None, "title": "Note"},
                    "audit_as": AUDIT_AS,
                },
                "required": ["json", "audit_as"],
                "title": "SendCallArguments",
                "type": "object",
            },
        }
    ]


def test_a_renamed_parameter_reaches_the_tool_under_its_own_name() -> None:
    result = gateway(send).invoke(
        "send", {"json": {"a": 1}, "note": [1], "audit_as": "Send"}, context=CONTEXT
    )
    assert (result.status, result.content) == (Status.SUCCESS, {"json": {"a": 1}, "to": "ops", "note": [1]})


def test_a_renamed_parameter_keeps_its_opt_in_to_infinities() -> None:
    gw = gateway(scale)
    assert gw.invoke("scale", {"json": math.inf, "purpose": "Scale"}, context=CONTEXT).content == math.inf
    refused = gw.invoke("scale", {"json": 1.0, "factor": math.inf, "purpose": "Scale"}, context=CONTEXT)
    assert (refused.status, refused.error_code, refused.field_path) == (
        Status.INVALID_ARGUMENTS,
        "non_finite_number",
        "factor",
    )


def test_an_operation_method_is_described_without_self() -> None:
    schema = operation_schema("billing", "charge", Billing.charge, Effect.UNSAFE, "Charge a card.")
    assert (schema.name, schema.method, schema.intent_field, schema.summary) == (
        "billing.charge",
        "charge",
        "audit_as",
        "Charge a card.",
    )
    assert list(schema.json_schema()["properties"]) == ["amount", "currency", "audit_as"]
    assert schema.definition()["name"] == "billing.charge"
    assert schema.definition()["description"] == "Charge a card."
    read = operation_schema("billing", "lookup_invoice", Billing.lookup_invoice, Effect.READ_ONLY)
    assert read.intent_field == "purpose" and read.summary == ""
    assert read.json_schema()["required"] == ["invoice_id", "purpose"]
    shown = gateway(PROVIDER).definitions()
    assert all("self" not in d["parameters"]["properties"] for d in shown)


def test_the_json_schema_is_built_once() -> None:
    schema = operation_schema("billing", "charge", Billing.charge, Effect.UNSAFE)
    assert schema.json_schema() is schema.json_schema()


def _says_purpose(x: int, purpose: str) -> None: ...


def _says_audit_as(x: int, audit_as: str) -> None: ...


@pytest.mark.parametrize(("function", "name"), [(_says_purpose, "purpose"), (_says_audit_as, "audit_as")])
def test_a_parameter_named_like_an_intent_field_is_refused(function: Any, name: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        operation_schema("t", "op", function, Effect.READ_ONLY)
    assert str(caught.value) == f"t.op: parameter {name!r} clashes with the intent"


def test_star_arguments_cannot_be_described() -> None:
    def varargs(*values: int) -> None: ...

    def kwargs(**values: int) -> None: ...

    for function in (varargs, kwargs):
        with pytest.raises(ConfigurationError) as caught:
            operation_schema("t", "op", function, Effect.READ_ONLY)
        assert str(caught.value) == "t.op: *args and **kwargs cannot be described as a schema"


# -- the tool's own argument checks, as the by-name door reports them -------------------------

VAULT = ToolDescriptor(
    name="vault",
    version="1",
    risk=RiskClass.MEMORY_ONLY,
    operations=(OperationDescriptor(name="open", effect=Effect.READ_ONLY),),
)


class Vault:
    """An operation method that checks its argument and refuses in each way a tool can."""

    opened: ClassVar[list[str]] = []

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def open(self, box: str) -> ReadIntent[str]:
        """Intent to open ``box``."""
        if box == "value":
            raise ValueError("box 7 is not open today")
        if box == "type":
            raise TypeError("secret-4321 is not a box")
        if box == "decode":
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "secret-4321")
        if box == "deny":
            error = ToolDeniedError(
                "this box is closed", tool="vault", reason_code="VAULT_CLOSED", rule="vault:closed"
            )
            self._runtime.record_denial(error)  # recorded once: by the chain, which is building the call
            raise error
        if box == "invalid":
            raise InvalidArgumentsError("no such box", error_code="unknown_box", field_path="box")
        # Authorization sees the provider's view (upper case); the audit trail binds the call's own.
        return self._runtime.read_intent(
            "open",
            lambda: Vault.opened.append(box) or box,
            arguments={"box": box.upper()},
            target=f"vault://{box}",
            warnings=(f"box {box} is shared",),
        )


def vault_gateway() -> tuple[Gateway, MemorySink]:
    sink = MemorySink()
    Vault.opened.clear()
    loaded = Gateway.load(
        policy=ToolPolicy.standard(),
        providers=[ToolProvider(tool_type=Vault, descriptor=VAULT)],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink, fallback_path=None)),
    )
    return loaded, sink


@pytest.mark.parametrize(
    ("box", "status", "code", "path", "message"),
    [
        ("value", Status.INVALID_ARGUMENTS, "rejected_by_tool", "", "box 7 is not open today"),
        # A TypeError's or a ValueError subclass's text may quote the input: only its type is shown.
        ("type", Status.INVALID_ARGUMENTS, "rejected_by_tool", "", "TypeError"),
        ("decode", Status.INVALID_ARGUMENTS, "rejected_by_tool", "", "UnicodeDecodeError"),
        ("invalid", Status.INVALID_ARGUMENTS, "unknown_box", "box", "no such box"),
    ],
)
def test_a_tool_refusing_its_arguments_is_reported_without_running(
    box: str, status: Status, code: str, path: str, message: str
) -> None:
    gw, sink = vault_gateway()
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    result = gw.invoke("vault.open", {"box": box, "purpose": "Open"}, context=context)
    assert (result.status, result.reason_code) == (status, "INVALID_ARGUMENTS")
    assert (result.error_code, result.field_path, result.message) == (code, path, message)
    assert Vault.opened == []
    assert "secret-4321" not in repr(result) + repr(sink.read_trace(context.run_id))
    decisions = [(r.decision, r.reason_code) for r in sink.read_trace(context.run_id) if r.decision]
    assert decisions == [("INVALID", "INVALID_ARGUMENTS")]


def test_a_tool_denying_the_call_is_reported_with_its_own_reason_and_rule() -> None:
    gw, sink = vault_gateway()
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    result = gw.invoke("vault.open", {"box": "deny", "purpose": "Open"}, context=context)
    assert (result.status, result.reason_code, result.rule) == (Status.DENIED, "VAULT_CLOSED", "vault:closed")
    assert result.message == "this box is closed"
    assert Vault.opened == []
    decisions = [(r.decision, r.reason_code) for r in sink.read_trace(context.run_id) if r.decision]
    assert decisions == [("DENY", "VAULT_CLOSED")]


def test_an_accepted_call_records_its_intent_text_and_runs_once() -> None:
    gw, sink = vault_gateway()
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    result = gw.invoke("vault.open", {"box": "b1", "purpose": "Open the first box"}, context=context)
    assert (result.status, result.content, Vault.opened) == (Status.SUCCESS, "b1", ["b1"])
    assert result.warnings == ("box b1 is shared",)
    records = sink.read_trace(context.run_id)
    intents = [r.intent_text for r in records if r.intent_text]
    assert intents and set(intents) == {"Open the first box"}
    assert [r.target for r in context.trace.operations("vault")] == ["vault://b1"]
    payloads = " ".join(r.payload_summary or "" for r in records)
    assert '"box":"b1"' in payloads and "B1" not in payloads


# -- operations described by JSON Schema --------------------------------------------------------


def test_a_described_schema_is_shown_exactly_with_the_intent_field_added() -> None:
    parameters = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "refs": {"$ref": "#/$defs/Ref"}},
        "required": ["q", 3],
        "$defs": {"Ref": {"type": "integer"}},
    }
    schema = described_schema("remote", "find", parameters, Effect.READ_ONLY, "Find things.")
    assert schema.described and schema.intent_field == "purpose"
    assert schema.definition() == {
        "name": "remote.find",
        "description": "Find things.",
        "parameters": {
            "type": "object",
            "properties": {
                "q": {"type": "string"},
                "refs": {"$ref": "#/$defs/Ref"},
                "purpose": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1000,
                    "description": "Why this call is made; recorded in the audit trail (purpose).",
                },
            },
            "required": ["q", "purpose"],
            "$defs": {"Ref": {"type": "integer"}},
            "additionalProperties": False,
        },
    }
    write = described_schema("remote", "put", {"properties": {}, "additionalProperties": True}, Effect.UNSAFE)
    assert write.intent_field == "audit_as" and write.definition()["description"] == ""
    assert write.json_schema()["additionalProperties"] is True
    assert write.json_schema()["required"] == ["audit_as"]
    patterned = described_schema("remote", "put", {"patternProperties": {"^x": {}}}, Effect.UNSAFE)
    assert "additionalProperties" not in patterned.json_schema()


def test_described_arguments_pass_through_and_the_intent_is_validated() -> None:
    schema = described_schema("remote", "find", {"properties": {"q": {}}}, Effect.READ_ONLY)
    assert validate_arguments(schema, {"q": [1], "extra": None, "purpose": "Find"}) == (
        {"q": [1], "extra": None},
        "Find",
    )
    for bad, code in (({"q": 1}, "missing"), ({"q": 1, "purpose": ""}, "string_too_short")):
        with pytest.raises(InvalidArgumentsError) as caught:
            validate_arguments(schema, bad)
        assert (caught.value.error_code, caught.value.field_path) == (code, "purpose")


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ([], "remote.find: the argument schema must be an object schema"),
        ({"type": "array"}, "remote.find: the argument schema must be an object schema"),
        ({"properties": []}, "remote.find: the argument schema needs a properties object without 'purpose'"),
        (
            {"properties": {"purpose": {}}},
            "remote.find: the argument schema needs a properties object without 'purpose'",
        ),
        (
            {"properties": {"a": {"$ref": "https://example.invalid/s.json"}}},
            "schema properties.a: only local $ref is allowed, got 'https://example.invalid/s.json'",
        ),
        (
            {"properties": {"a": {"anyOf": [{"type": "string"}, {"$ref": 7}]}}},
            "schema properties.a.anyOf.1: only local $ref is allowed, got 7",
        ),
        ({"$ref": "other.json"}, "schema (root): only local $ref is allowed, got 'other.json'"),
    ],
)
def test_a_described_schema_that_cannot_be_shown_safely_is_refused(parameters: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        described_schema("remote", "find", parameters, Effect.READ_ONLY)
    assert str(caught.value) == message


def test_a_schema_error_message_names_the_argument() -> None:
    schema = operation_schema("billing", "charge", Billing.charge, Effect.UNSAFE)
    with pytest.raises(InvalidArgumentsError) as caught:
        validate_arguments(schema, {"amount": 0, "audit_as": "Charge"})
    assert str(caught.value).startswith("argument amount: Input should be greater than 0")
    with pytest.raises(InvalidArgumentsError) as intent:
        validate_arguments(schema, {"amount": 5, "audit_as": "Charge\x1b[2J"})
    assert (intent.value.error_code, intent.value.field_path) == ("invalid_intent", "audit_as")


@pytest.mark.parametrize("kind", ["described", "signature"])
def test_the_intent_text_is_one_to_a_thousand_characters(kind: str) -> None:
    if kind == "described":
        schema = described_schema("remote", "put", {"properties": {}}, Effect.UNSAFE)
        base: dict[str, Any] = {}
    else:
        schema = operation_schema("billing", "charge", Billing.charge, Effect.UNSAFE)
        base = {"amount": 5}
    for text in ("x", "x" * 1000):
        assert validate_arguments(schema, {**base, "audit_as": text})[1] == text
    for text, code in (("", "string_too_short"), ("x" * 1001, "string_too_long")):
        with pytest.raises(InvalidArgumentsError) as caught:
            validate_arguments(schema, {**base, "audit_as": text})
        assert (caught.value.error_code, caught.value.field_path) == (code, "audit_as")


def test_errors_at_the_root_and_in_the_intent_say_so() -> None:
    schema = operation_schema("billing", "charge", Billing.charge, Effect.UNSAFE)
    with pytest.raises(InvalidArgumentsError) as root:
        validate_arguments(schema, [])  # type: ignore[arg-type]
    assert str(root.value).startswith("argument (root): ") and root.value.field_path == ""
    with pytest.raises(InvalidArgumentsError) as intent:
        validate_arguments(schema, {"amount": 5, "audit_as": "Charge\u2028now"})
    assert str(intent.value) == (
        "intent text contains control characters, line separators or bidirectional controls; "
        "use a single plain line"
    )


def test_a_dotted_tool_name_makes_one_model_title() -> None:
    schema = operation_schema("acme.billing", "charge_card", Billing.charge, Effect.UNSAFE)
    assert schema.json_schema()["title"] == "AcmeBillingChargeCardArguments"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def peek(key: str, json: dict[str, int] | None = None) -> Any:
    """A renamed parameter with a default."""
    return json


def test_a_renamed_parameter_keeps_its_default() -> None:
    result = gateway(peek).invoke("peek", {"key": "k", "purpose": "Peek"}, context=CONTEXT)
    assert (result.status, result.content) == (Status.SUCCESS, None)


def test_a_method_taken_from_its_class_is_described_without_self_whether_bound_or_not() -> None:
    """A class's plain function (never loaded, so never wrapped) and a loaded tool's wrapped method."""

    class Ledger:
        def post(self, amount: int, memo: str = "") -> None:
            """Post an amount."""

    plain = operation_schema("ledger", "post", Ledger.post, Effect.UNSAFE)
    assert list(plain.json_schema()["properties"]) == ["amount", "memo", "audit_as"]
    gateway(PROVIDER)  # loading a provider wraps its operation methods
    wrapped = operation_schema("billing", "refund", Billing.refund, Effect.UNSAFE)
    assert list(wrapped.json_schema()["properties"]) == ["amount", "audit_as"]


REMOTE_VAULT = ToolDescriptor(
    name="remote.vault",
    version="1",
    risk=RiskClass.MEMORY_ONLY,
    operations=(OperationDescriptor(name="open", effect=Effect.READ_ONLY),),
)


class RemoteVault:
    """Operations described by JSON Schema (a remote server's), refusing a box the way a tool records it."""

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    @classmethod
    def operation_parameters(cls, operation: str) -> Mapping[str, Any]:
        return {"type": "object", "properties": {"box": {"type": "string"}}, "required": ["box"]}

    def operation_intent(self, operation: str, arguments: Mapping[str, Any]) -> Any:
        error = ToolDeniedError(
            "that box is remote", tool="remote.vault", reason_code="FAR", rule="vault:far"
        )
        self._runtime.record_denial(error)  # recorded once: by the chain, which is building the call
        raise error


def test_a_described_tool_denying_the_call_is_recorded_once() -> None:
    sink = MemorySink()
    gw = Gateway.load(
        providers=[ToolProvider(RemoteVault, REMOTE_VAULT)],
        discover=False,
        env={},
        governance=Governance(audit=AuditTrail(sink, fallback_path=None)),
    )
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    result = gw.invoke("remote.vault.open", {"box": "b", "purpose": "Open"}, context=context)
    assert (result.status, result.reason_code, result.rule) == (Status.DENIED, "FAR", "vault:far")
    decisions = [(r.decision, r.reason_code) for r in sink.read_trace(context.run_id) if r.decision]
    assert decisions == [("DENY", "FAR")]
