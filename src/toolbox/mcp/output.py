"""Output schemas: what an operation's return type says about its `structuredContent`.

A ``@tool`` function's return annotation, or the ``T`` of a class tool's
``ReadIntent[T]`` / ``WriteIntent[T]``, gives the schema. MCP wants an object
at the root, so other types (``int``, ``list[str]``) are wrapped as
``{"result": ...}``, as the SDK's own `MCPServer` does. No annotation, or
``Any``, gives no schema: the result is then text (and structured content
when it is a JSON object).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import typing
from typing import Any, final

from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_jsonable_python

from toolbox.catalog import Catalog
from toolbox.intent import ReadIntent, WriteIntent
from toolbox.pipeline.arguments import check_local_refs

__all__ = ["OutputShape", "output_shape"]

_RESULT = "result"


@final
class OutputShape:
    """How one operation's content becomes structured content, and the schema that describes it."""

    __slots__ = ("_adapter", "schema", "wrapped")

    def __init__(
        self, adapter: TypeAdapter[Any] | None, schema: dict[str, Any] | None, *, wrapped: bool
    ) -> None:
        self._adapter = adapter
        #: The ``outputSchema`` of the tool, or None.
        self.schema = schema
        #: Whether content is sent as ``{"result": content}``.
        self.wrapped = wrapped

    def structured(self, content: Any) -> Any:
        """``content`` as structured content (None when it has none)."""
        if self._adapter is None:
            value = jsonable(content)
            return value if isinstance(value, dict) else None
        try:
            value = self._adapter.dump_python(content, mode="json")
        except Exception:  # noqa: BLE001 - content that is not the declared type is sent as it is
            value = jsonable(content)
        return {_RESULT: value} if self.wrapped else value


NO_SCHEMA = OutputShape(None, None, wrapped=False)


def jsonable(content: Any) -> Any:
    """``content`` as JSON-ready values, as `toolbox.tool_calls` shows it to a model.

    JSON values pass; a pydantic model gives its fields; anything else becomes
    its text (``str``), never its attributes: a result object's ``repr`` is
    what its author made safe to show (``HttpResponse`` leaves out headers,
    cookies and body).
    """
    try:
        return json.loads(json.dumps(content, default=_shown))
    except (ValueError, TypeError, RecursionError):  # a cycle, or a model that cannot dump itself
        return str(content)


def _shown(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return to_jsonable_python(value)
    return str(value)


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
