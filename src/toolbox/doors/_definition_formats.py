"""Tool definitions in the formats of the raw model APIs: OpenAI, Anthropic and MCP.

`Gateway.definitions` builds the neutral form (name, description, JSON Schema
parameters); this module reshapes one of those for an API. OpenAI's strict mode
needs a stricter schema: every object closed and every property required, so
optional properties become nullable (and `strip_optional_nulls` turns a model's
``null`` for them back into "absent" before the call runs).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from toolbox.foundations._descriptor import Effect, RiskClass

__all__ = ["FORMATS", "format_definition", "strip_optional_nulls", "to_openai_strict"]

FORMATS = ("neutral", "openai", "anthropic", "mcp")
"""The values `Gateway.definitions` accepts for ``format``."""

# Keywords OpenAI's strict mode refuses or ignores; a default would also contradict "required".
_STRICT_UNSUPPORTED = frozenset({"default", "examples", "deprecated", "readOnly", "writeOnly"})
_SUBSCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_NULL: dict[str, Any] = {"type": "null"}
# The gateway's depth guard (64 by default) refuses deeper arguments anyway; this only bounds the walk.
_MAX_STRIP_DEPTH = 256


def to_openai_strict(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` that satisfies OpenAI's strict-mode rules.

    Every object gets ``additionalProperties: false`` and lists all its properties
    as required; a property that was optional becomes nullable. ``$defs`` and local
    ``$ref`` are kept. A free-form mapping (``dict[str, int]``) cannot be expressed
    in strict mode and is closed too.
    """
    converted = _strict(copy.deepcopy(dict(schema)))
    assert isinstance(converted, dict)
    return converted


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    for key in _STRICT_UNSUPPORTED & node.keys():
        del node[key]
    for key in ("items", "not", "if", "then", "else"):
        if key in node:
            node[key] = _strict(node[key])
    for key in _SUBSCHEMA_LISTS:
        if key in node:
            node[key] = _strict(node[key])
    if "$defs" in node:
        node["$defs"] = {name: _strict(sub) for name, sub in node["$defs"].items()}
    if node.get("type") == "object" or "properties" in node:
        properties = node.get("properties", {})
        required = set(node.get("required", ()))
        node["properties"] = {
            name: _strict(sub) if name in required else _nullable(_strict(sub))
            for name, sub in properties.items()
        }
        node["required"] = list(node["properties"])
        node["additionalProperties"] = False
    return node


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` widened to accept ``null`` (already nullable schemas are left alone)."""
    kind = node.get("type")
    if "anyOf" in node:
        if _NULL not in node["anyOf"]:
            node["anyOf"] = [*node["anyOf"], dict(_NULL)]
        return node
    if isinstance(kind, str) and "enum" not in node and "const" not in node:
        if kind != "null":
            node["type"] = [kind, "null"]
        return node
    if isinstance(kind, list) and "enum" not in node and "const" not in node:
        if "null" not in kind:
            node["type"] = [*kind, "null"]
        return node
    return {"anyOf": [node, dict(_NULL)]}


def strip_optional_nulls(arguments: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` without the ``null`` values of properties ``schema`` does not require.

    In OpenAI strict mode an optional parameter is required-but-nullable, so the
    model sends ``null`` to leave it out; the call then runs as if it were absent
    (the parameter's default applies). Nested objects are followed through
    properties, array items and local ``$ref``; inside a union (``anyOf``) nothing
    is stripped, since which branch applies is the validator's decision.
    """
    stripped = _strip(arguments, schema, schema.get("$defs", {}), 0)
    assert isinstance(stripped, dict)
    return stripped


def _strip(value: Any, schema: Any, defs: Mapping[str, Any], depth: int) -> Any:
    if not isinstance(schema, Mapping) or depth > _MAX_STRIP_DEPTH:
        return value
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = defs.get(ref.removeprefix("#/$defs/"), {})
    if isinstance(value, dict) and isinstance(schema.get("properties"), Mapping):
        properties, required = schema["properties"], set(schema.get("required", ()))
        return {
            key: _strip(item, properties.get(key), defs, depth + 1)
            for key, item in value.items()
            # A key the schema does not have stays, null or not: validation refuses it by name.
            if item is not None or key in required or key not in properties
        }
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_strip(item, schema["items"], defs, depth + 1) for item in value]
    return value


def format_definition(
    definition: Mapping[str, Any], format: str, effect: Effect, risk: RiskClass
) -> dict[str, Any]:
    """One neutral definition (name, description, parameters) in ``format``'s shape."""
    name, description, parameters = definition["name"], definition["description"], definition["parameters"]
    if format == "neutral":
        return dict(definition)
    if format == "openai":
        function = {
            "name": name,
            "description": description,
            "parameters": to_openai_strict(parameters),
            "strict": True,
        }
        return {"type": "function", "function": function}
    if format == "anthropic":
        return {"name": name, "description": description, "input_schema": parameters}
    if format == "mcp":
        annotations = {
            "readOnlyHint": effect is Effect.READ_ONLY,
            "destructiveHint": effect is Effect.UNSAFE,
            "idempotentHint": effect is Effect.IDEMPOTENT,
            "openWorldHint": risk is not RiskClass.MEMORY_ONLY,
        }
        return {
            "name": name,
            "description": description,
            "inputSchema": parameters,
            "annotations": annotations,
        }
    raise ValueError(f"unknown definitions format {format!r}: use one of {', '.join(FORMATS)}")
