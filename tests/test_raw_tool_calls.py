"""Raw API tool calling: definitions per API format, and one model tool call in, one result message out."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolbox.doors.tool_calls
from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, ToolPolicy, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.doors._definition_formats import strip_optional_nulls, to_openai_strict
from toolbox.doors.tool_calls import (
    aanthropic_tool_result,
    anthropic_tool_result,
    aopenai_tool_result,
    openai_tool_result,
)
from toolbox.foundations._wire_names import WIRE_NAME_PATTERN
from toolbox.governance import ArgumentLimits

FIXTURES = Path(__file__).parent / "fixtures"
WIRE = re.compile(WIRE_NAME_PATTERN)
CALLS: list[dict[str, Any]] = []
CONTEXT = ExecutionContext(principal="alice", tenant="acme")


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY, name="math.add")
def add(a: int, b: int = 10) -> int:
    """Add two integers."""
    CALLS.append({"a": a, "b": b})
    return a + b


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, name="math.wipe", requires_approval=True)
def wipe(target: str) -> str:
    """Wipe a target (needs approval)."""
    CALLS.append({"target": target})
    return "wiped"


@pytest.fixture(autouse=True)
def _no_calls_yet():
    CALLS.clear()


def gateway(
    policy: ToolPolicy | None = None, limits: ArgumentLimits | None = None
) -> tuple[Gateway, MemorySink]:
    sink = MemorySink()
    governance = Governance(audit=AuditTrail(sink), limits=limits)
    return Gateway.load(
        policy=policy or ToolPolicy.standard(), providers=[add, wipe], governance=governance
    ), sink


def openai_calls() -> list[dict[str, Any]]:
    return json.loads((FIXTURES / "openai_tool_calls.json").read_text())["choices"][0]["message"][
        "tool_calls"
    ]


def anthropic_block() -> dict[str, Any]:
    content = json.loads((FIXTURES / "anthropic_tool_use.json").read_text())["content"]
    return next(block for block in content if block["type"] == "tool_use")


def openai_call(arguments: str, name: str = "math__add") -> dict[str, Any]:
    return {"id": "call_x", "type": "function", "function": {"name": name, "arguments": arguments}}


def refusal(content: str) -> dict[str, Any]:
    parsed = json.loads(content)
    assert "Traceback" not in content
    return parsed


# -- definitions --------------------------------------------------------------


def test_default_format_is_unchanged():
    g, _ = gateway()
    assert g.definitions() == g.catalog.definitions() == g.definitions(format="neutral")


def test_unknown_format_is_a_clear_value_error():
    g, _ = gateway()
    with pytest.raises(ValueError, match="unknown definitions format 'gemini'"):
        g.definitions(format="gemini")


def assert_strict(schema: Any, path: str = "$") -> None:
    """OpenAI strict mode: every object closed, every property required, no default, refs local."""
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            assert_strict(item, f"{path}[{i}]")
        return
    if not isinstance(schema, dict):
        return
    assert "default" not in schema, path
    if "$ref" in schema:
        assert schema["$ref"].startswith("#/"), path
    if schema.get("type") == "object" or "properties" in schema:
        assert schema.get("additionalProperties") is False, path
        assert sorted(schema.get("required", [])) == sorted(schema.get("properties", {})), path
    for value in schema.values():
        assert_strict(value, path)


def test_every_format_uses_wire_names_and_openai_is_strict():
    g, _ = gateway()
    openai = g.definitions(format="openai")
    anthropic = g.definitions(format="anthropic")
    mcp = g.definitions(format="mcp")
    assert len(openai) == len(anthropic) == len(mcp) == len(g.definitions())
    for item in openai:
        assert item["type"] == "function" and item["function"]["strict"] is True
        assert set(item["function"]) == {"name", "description", "parameters", "strict"}
        assert WIRE.fullmatch(item["function"]["name"])
        assert_strict(item["function"]["parameters"])
    for item in anthropic:
        assert set(item) == {"name", "description", "input_schema"} and WIRE.fullmatch(item["name"])
    for item in mcp:
        assert set(item) == {"name", "description", "inputSchema", "annotations"} and WIRE.fullmatch(
            item["name"]
        )


def test_openai_optional_parameter_becomes_required_and_nullable():
    g, _ = gateway()
    add_def = next(
        d["function"] for d in g.definitions(format="openai") if d["function"]["name"] == "math__add"
    )
    params = add_def["parameters"]
    assert params["properties"]["b"]["type"] == ["integer", "null"]
    assert params["properties"]["a"]["type"] == "integer"
    assert set(params["required"]) == {"a", "b", "purpose"}


def test_strict_conversion_handles_nested_refs_and_unions():
    schema = {
        "type": "object",
        "properties": {
            "point": {"$ref": "#/$defs/Point"},
            "tag": {"anyOf": [{"type": "string"}, {"type": "integer"}], "default": "x"},
            "mode": {"enum": ["a", "b"], "default": "a"},
        },
        "required": [],
        "$defs": {
            "Point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x"],
            }
        },
    }
    strict = to_openai_strict(schema)
    assert_strict(strict)
    assert strict["properties"]["point"] == {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}
    assert {"type": "null"} in strict["properties"]["tag"]["anyOf"]
    assert strict["properties"]["mode"] == {"anyOf": [{"enum": ["a", "b"]}, {"type": "null"}]}
    assert strict["$defs"]["Point"]["properties"]["y"]["type"] == ["number", "null"]
    assert "default" in schema["properties"]["tag"]  # the input is not modified


def test_strip_optional_nulls_keeps_required_nulls_and_follows_nesting():
    schema = {
        "type": "object",
        "properties": {
            "a": {},
            "b": {},
            "c": {},
            "p": {"$ref": "#/$defs/P"},
            "ps": {"items": {"$ref": "#/$defs/P"}},
        },
        "required": ["a"],
        "$defs": {"P": {"type": "object", "properties": {"x": {}, "y": {}}, "required": ["x"]}},
    }
    arguments = {"a": None, "b": None, "c": 1, "p": {"x": None, "y": None}, "ps": [{"x": 1, "y": None}]}
    assert strip_optional_nulls(arguments, schema) == {"a": None, "c": 1, "p": {"x": None}, "ps": [{"x": 1}]}
    deep: dict[str, Any] = {}
    for _ in range(2000):
        deep = {"p": deep}
    node = {"type": "object", "properties": {"p": {"$ref": "#/$defs/N"}, "q": {}}}
    recursive = {**node, "$defs": {"N": node}}
    deep["q"] = None
    assert strip_optional_nulls(deep, recursive) == {"p": deep["p"]}  # bounded walk, nothing else lost


def test_shipped_tools_have_strict_openai_definitions(tmp_path):
    from toolbox_fs import FS_ACKNOWLEDGEMENT, FsTool
    from toolbox_http import HttpTool

    g = Gateway.load(
        policy=ToolPolicy.standard().allow(HttpTool, FsTool),
        providers=[add, wipe],
        env={FS_ACKNOWLEDGEMENT.env: FS_ACKNOWLEDGEMENT.value},
        options={"fs": {"roots": [str(tmp_path)]}},
    )
    definitions = g.definitions(format="openai")
    assert {"http__get", "fs__read_text", "calculator__evaluate"} <= {
        d["function"]["name"] for d in definitions
    }
    for item in definitions:
        assert WIRE.fullmatch(item["function"]["name"])
        assert_strict(item["function"]["parameters"])
    openworld = {d["name"]: d["annotations"]["openWorldHint"] for d in g.definitions(format="mcp")}
    assert openworld["http__get"] is True and openworld["fs__read_text"] is True
    assert openworld["calculator__evaluate"] is False


def test_mcp_annotations_follow_effects_and_risk():
    g, _ = gateway()
    by_name = {d["name"]: d["annotations"] for d in g.definitions(format="mcp")}
    assert by_name["math__add"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
    }
    assert by_name["math__wipe"]["destructiveHint"] is True
    assert by_name["math__wipe"]["readOnlyHint"] is False


# -- tool calls: round trips ---------------------------------------------------


def test_openai_fixture_round_trip_and_null_means_absent():
    g, sink = gateway()
    first, second = openai_calls()
    assert openai_tool_result(g, first, context=CONTEXT) == {
        "role": "tool",
        "tool_call_id": "call_Qz1x2y3z4AbCdEfGh",
        "content": "5",
    }
    assert openai_tool_result(g, second, context=CONTEXT)["content"] == "12"  # b's default, not None
    assert CALLS == [{"a": 2, "b": 3}, {"a": 2, "b": 10}]
    assert [r.status for r in sink.records if r.status] == ["SUCCESS", "SUCCESS"]


def test_anthropic_fixture_round_trip():
    g, sink = gateway()
    assert anthropic_tool_result(g, anthropic_block(), context=CONTEXT) == {
        "type": "tool_result",
        "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
        "content": "5",
        "is_error": False,
    }
    assert len(CALLS) == 1
    assert [r.status for r in sink.records if r.status] == ["SUCCESS"]


def test_the_sdks_own_objects_are_accepted_like_dicts():
    """The OpenAI SDK's ``ChatCompletionMessageFunctionToolCall`` and the Anthropic SDK's
    ``ToolUseBlock`` are answered under their own ids (an empty id breaks the next request)."""
    from anthropic.types import ToolUseBlock
    from openai.types.chat import ChatCompletionMessageFunctionToolCall

    g, sink = gateway()
    call = ChatCompletionMessageFunctionToolCall.model_validate(openai_calls()[0])
    block = ToolUseBlock.model_validate(anthropic_block())
    assert openai_tool_result(g, call, context=CONTEXT) == {
        "role": "tool",
        "tool_call_id": "call_Qz1x2y3z4AbCdEfGh",
        "content": "5",
    }
    assert anthropic_tool_result(g, block, context=CONTEXT) == {
        "type": "tool_result",
        "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
        "content": "5",
        "is_error": False,
    }
    assert asyncio.run(aopenai_tool_result(g, call, context=CONTEXT))["tool_call_id"] == call.id
    assert asyncio.run(aanthropic_tool_result(g, block, context=CONTEXT))["tool_use_id"] == block.id
    assert len(CALLS) == 4
    assert [r.status for r in sink.records if r.status] == ["SUCCESS"] * 4


def test_sdk_objects_with_bad_arguments_or_denied_tools_keep_their_ids():
    """A refusal of an SDK object still answers its id; nothing runs; the refusal is audited."""
    from anthropic.types import ToolUseBlock
    from openai.types.chat import ChatCompletionMessageFunctionToolCall

    g, sink = gateway(policy=ToolPolicy.standard().deny("math.wipe"))
    bad = ChatCompletionMessageFunctionToolCall(
        id="call_bad", type="function", function={"name": "math__add", "arguments": "{"}
    )
    denied = ToolUseBlock(
        id="toolu_denied", type="tool_use", name="math__wipe", input={"target": "db", "audit_as": "Wipe"}
    )
    message = openai_tool_result(g, bad, context=CONTEXT)
    block = anthropic_tool_result(g, denied, context=CONTEXT)
    assert message["tool_call_id"] == "call_bad"
    assert refusal(message["content"])["error_code"] == "malformed_json"
    assert block["tool_use_id"] == "toolu_denied" and block["is_error"] is True
    assert (refusal(block["content"])["status"], refusal(block["content"])["reason_code"]) == (
        "DENIED",
        "POLICY_DENIED",
    )
    assert CALLS == []
    decided = [(r.decision, r.reason_code) for r in sink.records if r.type.value == "GOVERNANCE_DECISION"]
    assert ("INVALID", "INVALID_ARGUMENTS") in decided and ("DENY", "POLICY_DENIED") in decided


def test_async_twins():
    g, _sink = gateway()
    openai = asyncio.run(aopenai_tool_result(g, openai_calls()[0], context=CONTEXT))
    anthropic = asyncio.run(aanthropic_tool_result(g, anthropic_block(), context=CONTEXT))
    bad = asyncio.run(aopenai_tool_result(g, openai_call("{"), context=CONTEXT))
    bad_block = asyncio.run(aanthropic_tool_result(g, {"type": "tool_use", "id": 3}, context=CONTEXT))
    assert openai["content"] == anthropic["content"] == "5"
    assert refusal(bad["content"])["error_code"] == "malformed_json"
    assert bad_block["is_error"] is True and refusal(bad_block["content"])["error_code"] == "bad_call"
    assert len(CALLS) == 2


def test_policy_denial_is_a_refusal_message():
    g, sink = gateway(policy=ToolPolicy.standard().deny("math.add"))
    message = openai_tool_result(g, openai_calls()[0], context=CONTEXT)
    block = anthropic_tool_result(g, anthropic_block(), context=CONTEXT)
    assert refusal(message["content"])["status"] == "DENIED"
    assert block["is_error"] is True and refusal(block["content"])["status"] == "DENIED"
    assert CALLS == []
    assert [r.reason_code for r in sink.records if r.status == "DENIED"] != []


def test_approval_required_is_not_run():
    g, sink = gateway()
    block = {
        "type": "tool_use",
        "id": "toolu_w",
        "name": "math__wipe",
        "input": {"target": "db", "audit_as": "wipe"},
    }
    result = anthropic_tool_result(g, block, context=CONTEXT)
    assert refusal(result["content"])["status"] == "APPROVAL_REQUIRED"
    assert result["is_error"] is True
    assert CALLS == []
    assert any(r.status == "APPROVAL_REQUIRED" for r in sink.records)


def test_schema_invalid_arguments_name_the_field():
    g, sink = gateway()
    result = openai_tool_result(g, openai_call('{"a": "two", "purpose": "p"}'), context=CONTEXT)
    body = refusal(result["content"])
    assert body["status"] == "INVALID_ARGUMENTS" and body["field_path"] == "a"
    assert CALLS == []
    assert any(r.status == "INVALID_ARGUMENTS" for r in sink.records)


# -- tool calls: attacks on the boundary ---------------------------------------


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ('{"a": 1, "a": 2, "purpose": "p"}', "duplicate_key"),
        ('{"a": 1, "purpose": "p", "x": {"k": 1, "k": 2}}', "duplicate_key"),
        ("{not json", "malformed_json"),
        ("[1, 2]", "not_an_object"),
        ("42", "not_an_object"),
        ("null", "not_an_object"),
        ("", "malformed_json"),
        ('{"a": NaN, "purpose": "p"}', None),
    ],
)
def test_bad_json_text_is_an_audited_invalid_arguments_result(arguments, code):
    g, sink = gateway()
    result = openai_tool_result(g, openai_call(arguments), context=CONTEXT)
    body = refusal(result["content"])
    assert result["tool_call_id"] == "call_x"
    assert body["status"] == "INVALID_ARGUMENTS"
    if code is not None:
        assert body["error_code"] == code
    assert CALLS == []
    assert any(r.status == "INVALID_ARGUMENTS" and r.tool == "math.add" for r in sink.records)


def test_huge_text_is_refused_before_parsing(monkeypatch):
    g, sink = gateway(limits=ArgumentLimits(max_bytes=1000))

    def never(*args, **kwargs):
        raise AssertionError("parsed oversized text")

    monkeypatch.setattr(toolbox.doors.tool_calls, "json", SimpleNamespace(loads=never, dumps=json.dumps))
    text = '{"a": 1, "purpose": "' + "x" * 5000 + '"}'
    body = refusal(openai_tool_result(g, openai_call(text), context=CONTEXT)["content"])
    assert body["error_code"] == "too_large" and body["status"] == "INVALID_ARGUMENTS"
    multibyte = '{"a": 1, "purpose": "' + "é" * 600 + '"}'  # under 1000 chars, over 1000 bytes
    assert refusal(openai_tool_result(g, openai_call(multibyte), context=CONTEXT)["content"])[
        "error_code"
    ] == ("too_large")
    assert CALLS == []
    assert sum(r.status == "INVALID_ARGUMENTS" for r in sink.records) >= 2


def test_deep_nesting_and_many_items_hit_the_gateway_guards():
    g, sink = gateway()
    deep = '{"a": 1, "purpose": "p", "x": ' + "[" * 5000 + "]" * 5000 + "}"
    many = '{"a": 1, "purpose": "p", "x": [' + ",".join(["1"] * 2000) + "]}"
    for text in (deep, many):
        body = refusal(openai_tool_result(g, openai_call(text), context=CONTEXT)["content"])
        assert body["status"] == "INVALID_ARGUMENTS"
    assert CALLS == []
    assert sum(r.status == "INVALID_ARGUMENTS" for r in sink.records) >= 2


@pytest.mark.parametrize(
    "call",
    [
        None,
        "call",
        [],
        {},
        {"type": "function", "function": {"name": "math__add", "arguments": "{}"}},
        {"id": 7, "type": "function", "function": {"name": "math__add", "arguments": "{}"}},
        {"id": "c", "type": "custom", "function": {"name": "math__add", "arguments": "{}"}},
        {"id": "c", "type": "function"},
        {"id": "c", "type": "function", "function": {"arguments": "{}"}},
        {"id": "c", "type": "function", "function": {"name": 3, "arguments": "{}"}},
        {"id": "c", "type": "function", "function": {"name": "math__add", "arguments": {"a": 1}}},
    ],
)
def test_wrong_openai_call_shapes_are_refusals_not_exceptions(call):
    g, sink = gateway()
    message = openai_tool_result(g, call, context=CONTEXT)
    assert message["role"] == "tool"
    assert refusal(message["content"])["status"] == "INVALID_ARGUMENTS"
    assert CALLS == []
    assert any(r.status in ("INVALID_ARGUMENTS", "DENIED") for r in sink.records)


@pytest.mark.parametrize(
    "block",
    [
        None,
        {"type": "text", "text": "hi"},
        {"type": "tool_use", "name": "math__add", "input": {}},
        {"type": "tool_use", "id": "t", "input": {}},
        {"type": "tool_use", "id": "t", "name": "math__add", "input": '{"a": 1}'},
        {"type": "tool_use", "id": "t", "name": "math__add", "input": [1]},
    ],
)
def test_wrong_anthropic_block_shapes_are_refusals_not_exceptions(block):
    g, sink = gateway()
    result = anthropic_tool_result(g, block, context=CONTEXT)
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert refusal(result["content"])["status"] == "INVALID_ARGUMENTS"
    assert CALLS == []
    assert any(r.status in ("INVALID_ARGUMENTS", "DENIED") for r in sink.records)


def test_no_trusted_context_is_refused():
    g, _ = gateway()
    result = openai_tool_result(g, openai_calls()[0], context=None)
    assert refusal(result["content"])["status"] == "DENIED"
    assert CALLS == []


@given(
    st.text(max_size=300)
    | st.recursive(st.none() | st.integers() | st.text(max_size=5), st.lists, max_leaves=8)
)
def test_any_arguments_text_gives_a_tool_message_and_never_raises(value):
    g, _ = gateway()
    text = value if isinstance(value, str) else json.dumps(value)
    message = openai_tool_result(g, openai_call(text), context=CONTEXT)
    assert message["role"] == "tool" and message["tool_call_id"] == "call_x"
    assert CALLS == []  # none of these is a valid {"a": int, "purpose": str} object
