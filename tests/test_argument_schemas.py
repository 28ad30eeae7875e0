"""Schemas derived from signatures: exactly what a model is shown and what the by-name door accepts.

Written from `scripts/mutation src/toolbox/pipeline/arguments.py` (docs/testing.md, "Mutation
testing"): each test pins a behaviour whose change no other test noticed.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import pytest
from pydantic import AllowInfNan

from governed_tools import PROVIDER, Billing
from toolbox import (
    ConfigurationError,
    Effect,
    ExecutionContext,
    Gateway,
    RiskClass,
    Status,
    ToolPolicy,
    tool,
)
from toolbox.pipeline.arguments import operation_schema

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
