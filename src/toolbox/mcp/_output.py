"""Output schemas: what an operation's return type says about its `structuredContent`.

A ``@tool`` function's return annotation, or the ``T`` of a class tool's
``ReadIntent[T]`` / ``WriteIntent[T]``, gives the schema. MCP wants an object
at the root, so other types (``int``, ``list[str]``) are wrapped as
``{"result": ...}``, as the SDK's own `MCPServer` does. No annotation, or
``Any``, gives no schema: the result is then text (and structured content
when it is a JSON object). What content becomes as JSON is decided once, for
every door, by `toolbox.pipeline._shown`.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, final

from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from pydantic import TypeAdapter

from toolbox.doors._catalog import Catalog
from toolbox.pipeline._shown import json_content
from toolbox.pipeline.checks._schemas import check_local_refs
from toolbox.registry._intent import ReadIntent, WriteIntent

__all__ = ["OutputShape", "output_shape"]

_RESULT = "result"


@final
class OutputShape:
    """How one operation's content becomes structured content, and the schema that describes it."""

    __slots__ = ("_adapter", "_validator", "schema", "wrapped")

    def __init__(
        self, adapter: TypeAdapter[Any] | None, schema: dict[str, Any] | None, *, wrapped: bool
    ) -> None:
        self._adapter = adapter
        self._validator: Validator | None = None
        #: The ``outputSchema`` of the tool, or None.
        self.schema = schema
        #: Whether content is sent as ``{"result": content}``.
        self.wrapped = wrapped

    def structured(self, content: Any) -> tuple[Any, bool]:
        """``content`` as structured content (None when it has none), and whether it conforms.

        MCP requires structured content to conform to the declared output schema (the
        TypeScript SDK refuses a result that does not): content that is not the declared
        type is checked against the schema the clients check, never sent as conforming.
        """
        if self._adapter is None:
            value = json_content(content)
            return (value if isinstance(value, dict) else None), True
        try:
            value = self._adapter.dump_python(content, mode="json", warnings=False)
        except Exception:  # noqa: BLE001 - content that is not the declared type is checked below
            value = json_content(content)
        structured = {_RESULT: value} if self.wrapped else value
        return structured, self._conforms(structured)

    def _conforms(self, structured: Any) -> bool:
        validator, schema = self._validator, self.schema
        if validator is None:
            assert schema is not None  # only a shape with an adapter checks, and it has a schema
            validator = self._validator = validator_for(schema)(schema)
        try:
            return bool(validator.is_valid(structured))
        except Exception:  # noqa: BLE001 - a value the validator cannot even walk does not conform
            return False


NO_SCHEMA = OutputShape(None, None, wrapped=False)


def _returned(catalog: Catalog, tool: str, operation: str) -> Any:
    """The type the operation's content has, from its annotations (None when unknown)."""
    entry = catalog.entry(tool)
    if entry is None:
        return None
    method = getattr(entry.registered.provider.tool_type, operation, None)
    if method is None:
        return None
    try:
        hints = typing.get_type_hints(inspect.unwrap(method))
    except Exception:  # noqa: BLE001 - unresolvable annotations give no schema
        return None
    returned = hints.get("return")
    if typing.get_origin(returned) in (ReadIntent, WriteIntent):
        args = typing.get_args(returned)
        returned = args[0] if args else None
    if returned in (None, type(None), Any) or isinstance(returned, typing.TypeVar):
        return None
    if dataclasses.is_dataclass(returned):
        return None  # its fields may be hidden from repr on purpose (credentials, headers)
    return returned


def output_shape(catalog: Catalog, tool: str, operation: str) -> OutputShape:
    """The `OutputShape` of ``tool.operation`` (`NO_SCHEMA` when its return type says nothing)."""
    returned = _returned(catalog, tool, operation)
    if returned is None:
        return NO_SCHEMA
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(returned)
        schema = adapter.json_schema(mode="serialization")
        check_local_refs(schema)
    except Exception:  # noqa: BLE001 - a type pydantic cannot describe gives no schema
        return NO_SCHEMA
    if schema.get("type") == "object":
        return OutputShape(adapter, schema, wrapped=False)
    defs = schema.pop("$defs", None)
    wrapper: dict[str, Any] = {"type": "object", "properties": {_RESULT: schema}, "required": [_RESULT]}
    if defs is not None:
        wrapper["$defs"] = defs
    return OutputShape(adapter, wrapper, wrapped=True)
