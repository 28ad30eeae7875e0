"""Untrusted input: the [tools.mcp] table, remote schemas and names, hints, the lock file."""

from __future__ import annotations

import json

import mcp_types
import pytest

from toolbox import Effect
from toolbox_mcp import LockFileError, effective_effect
from toolbox_mcp._config import read_config
from toolbox_mcp._lockfile import pin_tools, read_lock
from toolbox_mcp._schema import check_schema, operation_name

LIMITS = {"max_bytes": 64 * 1024, "max_depth": 16, "tool": "mcp.s"}
URL = "https://a.example/mcp"


def _config(server):
    return read_config({"servers": {"s": server}}, source="policy.toml")


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ({}, "exactly one of command (stdio) or url"),
        ({"command": "x", "url": "https://a.example/mcp"}, "exactly one of command"),
        ({"command": "x", "risk": "PRIVILEGED"}, "needs an acknowledgement"),
        ({"command": "x", "risk": "MEMORY_ONLY"}, "field 'servers.s.risk'"),
        ({"command": "x", "credentials": [{"env": "T"}]}, "credentials are for url servers"),
        ({"url": "ftp://a.example/mcp"}, "must be an http(s) URL"),
        ({"url": "https://user:pw@a.example/mcp"}, "no user information"),
        (
            {"url": "https://a.example/mcp", "credentials": [{"env": "T", "file": "t"}]},
            "exactly one of env or file",
        ),
        ({"command": "x", "env": {"BAD NAME": "1"}}, "not an environment variable name"),
        ({"command": "x", "timeout": 0}, "field 'servers.s.timeout'"),
        (
            {"command": "x", "operations": {"op": {"effect": "RECONCILABLE"}}},
            "servers.s.operations.op.effect",
        ),
        ({"command": "x", "surprise": 1}, "field 'servers.s.surprise'"),
        (
            {"url": "https://a.example/mcp", "credentials": [{"env": "T", "header": "Bad Header"}]},
            "credentials.0",
        ),
        ({"url": "https://a.example/mcp", "credentials": [{"env": "T", "prefix": "a\nb"}]}, "credentials.0"),
    ],
)
def test_a_bad_server_table_names_the_key(server, message):
    with pytest.raises(ValueError, match="invalid") as raised:
        _config(server)
    assert message in str(raised.value)


def test_values_are_never_echoed_in_errors():
    with pytest.raises(ValueError) as raised:
        _config({"url": "https://a.example/mcp", "credentials": [{"env": "T", "header": 123456789}]})
    assert "123456789" not in str(raised.value)


@pytest.mark.parametrize("name", ["Bad", "a__b", "-a", "x" * 41, "a.b"])
def test_server_names_must_fit_a_tool_name(name):
    with pytest.raises(ValueError, match="server name"):
        read_config({"servers": {name: {"command": "x"}}}, source="p")


@pytest.mark.parametrize(
    ("remote", "operation"),
    [
        ("add", "add"),
        ("getForecast", "get_forecast"),
        ("get-forecast", "get_forecast"),
        ("notes.search", "notes_search"),
        ("HTTPGet", "httpget"),
        ("__x__", "x"),
        ("9lives", None),
        ("", None),
        ("ü", None),
        ("x" * 200, None),
    ],
)
def test_remote_names_map_to_operation_names(remote, operation):
    assert operation_name(remote) == operation


def _tool(name, schema, **extra):
    return mcp_types.Tool(name=name, input_schema=schema, **extra)


def _deep(levels):
    schema = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (
            {"type": "object", "properties": {"x": {"$ref": "https://evil.example/s.json"}}},
            "non-local reference",
        ),
        ({"type": "object", "properties": {"x": {"$ref": "file:///etc/passwd"}}}, "non-local reference"),
        ({"type": "object", "properties": {"x": {"$dynamicRef": "#meta"}}}, "non-local reference"),
        ({"type": "object", "properties": {"upstream_purpose": {"type": "string"}}}, "toolbox-mcp reserves"),
        ({"type": "object", "properties": {"upstream_audit_as": {"type": "string"}}}, "toolbox-mcp reserves"),
        ({"type": "array"}, "not an object schema"),
        ({"type": "object", "properties": {"x": {"type": 12}}}, "not a valid JSON Schema"),
        (_deep(40), "nests deeper"),
        ({"type": "object", "properties": []}, "properties is not an object"),
        ({"type": "object", "description": "x" * 70_000}, "more than max_schema_bytes"),
    ],
)
def test_unsafe_remote_schemas_are_not_pinned(schema, reason):
    assert reason in (check_schema(schema, max_bytes=64 * 1024, max_depth=16) or "")
    pins, refused = pin_tools([_tool("t", schema)], **LIMITS)
    assert pins == {}
    assert reason in refused[0].reason


def test_a_local_ref_is_fine():
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/X"}},
        "$defs": {"X": {"type": "string"}},
    }
    assert check_schema(schema, max_bytes=64 * 1024, max_depth=16) is None


def test_two_remote_tools_with_one_operation_name_are_both_refused():
    pins, refused = pin_tools(
        [
            _tool("get-x", {"type": "object"}),
            _tool("getX", {"type": "object"}),
            _tool("ok", {"type": "object"}),
        ],
        **LIMITS,
    )
    assert sorted(pins) == ["ok"]
    assert "also 'get-x''s" in refused[0].reason


def test_server_hints_only_restrict():
    assert effective_effect(Effect.UNSAFE, {"readOnlyHint": True, "idempotentHint": True}) is Effect.UNSAFE
    assert effective_effect(Effect.READ_ONLY, {"readOnlyHint": True}) is Effect.READ_ONLY
    assert effective_effect(Effect.READ_ONLY, {}) is Effect.READ_ONLY
    assert effective_effect(Effect.READ_ONLY, {"readOnlyHint": False}) is Effect.UNSAFE
    assert effective_effect(Effect.READ_ONLY, {"destructiveHint": True}) is Effect.UNSAFE
    assert effective_effect(Effect.IDEMPOTENT, {"idempotentHint": False}) is Effect.UNSAFE
    assert effective_effect(Effect.IDEMPOTENT, {"destructiveHint": True}) is Effect.IDEMPOTENT


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "is not JSON"),
        ('{"version": 2, "servers": {}}', "unsupported version"),
        ('{"version": 1, "servers": []}', "servers is not an object"),
        (
            '{"version": 1, "servers": {"s": {"operations": {"op": {"remote": "op"}}}}}',
            "missing or malformed",
        ),
    ],
)
def test_a_malformed_lock_file_is_refused(tmp_path, content, message):
    path = tmp_path / "mcp.lock.json"
    path.write_text(content)
    with pytest.raises(LockFileError, match=message):
        read_lock(path)


def test_an_absent_lock_file_pins_nothing(tmp_path):
    assert read_lock(tmp_path / "absent.json") == {}


def test_the_lock_file_round_trips(tmp_path):
    from toolbox_mcp._lockfile import write_server

    pins, _ = pin_tools(
        [_tool("a", {"type": "object", "properties": {"q": {"type": "string"}}}, description="A")], **LIMITS
    )
    path = tmp_path / "mcp.lock.json"
    write_server(path, "s", pins)
    write_server(path, "t", pins)
    assert read_lock(path)["s"]["a"] == pins["a"]
    assert sorted(json.loads(path.read_text())["servers"]) == ["s", "t"]


def test_a_name_too_long_for_a_wire_name_is_refused():
    pins, refused = pin_tools([_tool("a" * 70, {"type": "object"})], **LIMITS)
    assert pins == {}
    assert "longer than 64 characters as a wire name" in refused[0].reason


def test_a_remote_intent_field_is_offered_under_another_name():
    from toolbox_mcp._schema import local_schema, upstream_arguments

    remote = {
        "type": "object",
        "properties": {"x": {}, "purpose": {"type": "string"}},
        "required": ["purpose"],
    }
    assert check_schema(remote, max_bytes=64 * 1024, max_depth=16) is None
    shown = local_schema(remote)
    assert set(shown["properties"]) == {"x", "upstream_purpose"}
    assert shown["required"] == ["upstream_purpose"]
    assert upstream_arguments({"x": 1, "upstream_purpose": "why"}) == {"x": 1, "purpose": "why"}
    assert upstream_arguments({"upstream_other": 1}) == {"upstream_other": 1}
