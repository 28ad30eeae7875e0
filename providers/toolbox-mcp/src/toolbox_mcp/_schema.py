"""Remote input schemas: checked before they are pinned, and used to validate arguments.

A server's schema is untrusted input. Before it is pinned it must be a JSON
object schema of bounded size and depth, a valid JSON Schema, with local
``$ref`` only (a remote reference is never fetched: the validator gets an
empty registry). A property named like toolbox's intent fields is offered
under another name (`local_schema`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from jsonschema import SchemaError
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing import Registry

from toolbox.errors import InvalidArgumentsError

__all__ = [
    "canonical",
    "check_schema",
    "digest",
    "local_schema",
    "operation_name",
    "schema_validator",
    "upstream_arguments",
    "validate",
]

_INTENT_FIELDS = ("purpose", "audit_as")
UPSTREAM_PREFIX = "upstream_"
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_OTHER = re.compile(r"[^a-z0-9]+")
_OPERATION = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
_MAX_REMOTE_NAME = 128


def canonical(value: object) -> str:
    """The canonical JSON text of ``value`` (sorted keys, no spaces): what digests are taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(value: object) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()


def operation_name(remote: str) -> str | None:
    """The toolbox operation name of remote tool ``remote`` (``getForecast`` -> ``get_forecast``).

    None when the name cannot be one (empty, too long, or no letter to start with).
    """
    if not isinstance(remote, str) or not remote or len(remote) > _MAX_REMOTE_NAME:
        return None
    name = _OTHER.sub("_", _CAMEL.sub("_", remote).lower()).strip("_")
    return name if _OPERATION.fullmatch(name) else None


def _depth(value: object, limit: int) -> int:
    """The nesting depth of ``value``, walked iteratively; stops counting past ``limit``."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _remote_ref(value: object) -> str | None:
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if ref is not None and (not isinstance(ref, str) or not ref.startswith("#")):
                return str(ref)[:80]
            if "$dynamicRef" in item or "$recursiveRef" in item:
                return "a dynamic reference"
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def check_schema(schema: object, *, max_bytes: int, max_depth: int) -> str | None:
    """Why ``schema`` cannot be pinned as an input schema, or None when it can."""
    if not isinstance(schema, dict):
        return "the input schema is not a JSON object"
    if schema.get("type", "object") != "object":
        return "the input schema is not an object schema"
    try:
        size = len(canonical(schema).encode("utf-8"))
    except (TypeError, ValueError):
        return "the input schema is not plain JSON"
    if size > max_bytes:
        return f"the input schema is {size} bytes, more than max_schema_bytes ({max_bytes})"
    if _depth(schema, max_depth) > max_depth:
        return f"the input schema nests deeper than max_schema_depth ({max_depth})"
    ref = _remote_ref(schema)
    if ref is not None:
        return f"the input schema has a non-local reference ({ref}); only #/... references are allowed"
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return "the input schema's properties is not an object"
    taken = [name for name in _INTENT_FIELDS if UPSTREAM_PREFIX + name in properties]
    if taken:
        return f"the input schema has a property {UPSTREAM_PREFIX + taken[0]!r}, which toolbox-mcp reserves"
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        return f"the input schema is not a valid JSON Schema: {exc.message[:200]}"
    return None


def local_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` as toolbox shows and checks it: a remote ``purpose``/``audit_as`` renamed.

    toolbox adds its own required intent field (``purpose`` or ``audit_as``) to
    every operation. A remote property of either name (a server that is itself
    toolbox, ``toolbox mcp serve``, requires one) is offered as
    ``upstream_purpose`` / ``upstream_audit_as`` and sent under its own name.
    """
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping) or not any(name in properties for name in _INTENT_FIELDS):
        return dict(schema)
    renamed = {UPSTREAM_PREFIX + k if k in _INTENT_FIELDS else k: v for k, v in properties.items()}
    required = [UPSTREAM_PREFIX + r if r in _INTENT_FIELDS else r for r in schema.get("required", ())]
    return {**schema, "properties": renamed, **({"required": required} if "required" in schema else {})}


def upstream_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments as the server names them (``upstream_purpose`` sent as ``purpose``)."""
    return {
        key[len(UPSTREAM_PREFIX) :] if key[len(UPSTREAM_PREFIX) :] in _INTENT_FIELDS else key: value
        for key, value in arguments.items()
    }


def schema_validator(schema: Mapping[str, Any]) -> Validator:
    """A validator for a pinned schema that resolves ``$ref`` within the schema only.

    Arguments are exact, as on the core's by-name door: a top-level schema that
    says nothing about other properties is checked as if it said
    ``additionalProperties: false``, so nothing the reviewer did not see is sent.
    """
    checked = dict(schema)
    if "additionalProperties" not in checked and "patternProperties" not in checked:
        checked["additionalProperties"] = False
    cls = validator_for(checked)
    return cls(checked, registry=Registry())


def validate(validator: Validator, arguments: Mapping[str, Any]) -> None:
    """Validate ``arguments`` against a pinned schema.

    Raises:
        InvalidArgumentsError: ``error_code`` is the failing keyword (``required``, ``type``, ...);
            the message names the path, never the value.
    """
    error = best_match(validator.iter_errors(dict(arguments)))
    if error is None:
        return
    parts = [str(p) for p in error.absolute_path]
    keyword = str(error.validator) if error.validator is not None else "schema"
    instance = error.instance
    if keyword == "required" and isinstance(instance, dict):
        # Point at the missing property itself, as pydantic does for schemas from signatures.
        missing = [name for name in error.validator_value or () if name not in instance]
        parts += [str(missing[0])[:100]] if missing else []
    elif keyword == "additionalProperties" and isinstance(instance, dict) and isinstance(error.schema, dict):
        known = error.schema.get("properties", {})
        extra = sorted(str(name) for name in instance if name not in known)
        parts += [extra[0][:100]] if extra else []
    path = ".".join(parts)
    raise InvalidArgumentsError(
        f"argument {path or '(root)'} breaks the pinned schema ({keyword})",
        error_code=keyword,
        field_path=path,
    )
