"""Operation schemas: the argument model and JSON Schema of each operation.

Derived from a method's or function's signature (`operation_schema`), or taken
from the JSON Schema a `DescribedOperations` tool gives (`described_schema`).
`toolbox.pipeline.checks._arguments` validates by-name arguments against them.

Deriving builds a pydantic model (about a millisecond), for every operation of
every catalog load; what it derives depends only on the function and the names it
is offered under. So a schema derived from a plain function is kept, keyed
weakly by the function (a dynamically created one is not kept alive), and shared
by every catalog of the process: it is read, never changed, by its users.
"""

from __future__ import annotations

import inspect
import threading
import types
import typing
import weakref
from collections.abc import Callable, Mapping
from typing import Any, final

from pydantic import AllowInfNan, BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from toolbox.errors import ConfigurationError
from toolbox.foundations._binding import is_operation_method
from toolbox.foundations._descriptor import Effect
from toolbox.foundations._intent_text import intent_field_for

__all__ = ["OperationSchema", "check_local_refs", "described_schema", "operation_schema"]


# allow_inf_nan=False: "NaN" and "Infinity" (as numbers or strings) are refused unless a
# parameter opts in with AllowInfNan(True) or Field(allow_inf_nan=True).
_FORBID = ConfigDict(extra="forbid", arbitrary_types_allowed=True, allow_inf_nan=False)


@final
class OperationSchema:
    """The argument model and JSON Schema of one operation, derived from its signature."""

    __slots__ = (
        "_json_schema",
        "_lock",
        "described",
        "intent_field",
        "method",
        "model",
        "name",
        "non_finite",
        "renames",
        "summary",
    )

    def __init__(
        self,
        name: str,
        method: str,
        model: type[BaseModel],
        intent_field: str,
        summary: str,
        *,
        renames: dict[str, str] | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> None:
        #: The by-name form, e.g. ``http.get``.
        self.name = name
        #: The operation is described by JSON Schema (`DescribedOperations`): the
        #: model checks only the intent field, and the tool's ``operation_intent`` validates the rest.
        self.described = json_schema is not None
        self.method = method
        self.model = model
        self.intent_field = intent_field
        self.summary = summary
        #: Model field -> parameter, for parameters that shadow a BaseModel attribute (``json``).
        self.renames = renames or {}
        #: Parameters (public names) that opt in to NaN and infinities with ``AllowInfNan``.
        self.non_finite = frozenset(
            self.renames.get(name, info.alias or name)
            for name, info in model.model_fields.items()
            if _allows_non_finite(info)
        )
        self._json_schema: dict[str, Any] | None = json_schema
        self._lock = threading.Lock()

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments (intent field included); local ``$ref`` only.

        One dict, shared by every catalog of the function: read it, never change it
        (`definition` hands out a copy).
        """
        with self._lock:
            if self._json_schema is None:
                schema = self.model.model_json_schema()
                check_local_refs(schema)
                self._json_schema = schema
            return self._json_schema

    def definition(self) -> dict[str, Any]:
        """An LLM function definition: name, description, parameters (a copy, the caller's to change)."""
        return {"name": self.name, "description": self.summary, "parameters": _copied(self.json_schema())}


def _copied(value: Any) -> Any:
    """``value`` with each dict and list copied (a JSON Schema's; a third of `copy.deepcopy`'s time)."""
    kind = type(value)
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}
    if kind is list:
        return [_copied(item) for item in value]
    return value


def _allows_non_finite(info: FieldInfo) -> bool:
    """Whether a field says ``AllowInfNan(True)``, on itself or anywhere inside its type."""
    pending: list[object] = [*info.metadata, info.annotation]
    while pending:
        item = pending.pop()
        if isinstance(item, AllowInfNan):
            if item.allow_inf_nan:
                return True
            continue
        if isinstance(item, FieldInfo):  # Annotated[float, Field(allow_inf_nan=True)]
            pending.extend(item.metadata)
            continue
        # pydantic before 2.14 keeps Field(allow_inf_nan=True) as a general metadata object, not
        # an AllowInfNan: read the setting, whatever holds it.
        if getattr(item, "allow_inf_nan", None) is True:
            return True
        pending.extend(typing.get_args(item))
        pending.extend(getattr(item, "__metadata__", ()))
    return False


def check_local_refs(schema: object, path: str = "") -> None:
    """Reject any ``$ref`` that is not local (``#/...``): remote schemas are never fetched."""
    if isinstance(schema, Mapping):
        ref = schema.get("$ref")
        if ref is not None and (not isinstance(ref, str) or not ref.startswith("#")):
            raise ConfigurationError(f"schema {path or '(root)'}: only local $ref is allowed, got {ref!r}")
        for key, value in schema.items():
            check_local_refs(value, f"{path}.{key}" if path else str(key))
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            check_local_refs(value, f"{path}.{index}")


def _hints(function: Callable[..., Any]) -> dict[str, Any] | None:
    """``function``'s resolved annotations; None when they cannot be resolved (yet)."""
    try:
        return typing.get_type_hints(function, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations fall back to Any below
        return None


#: (tool, operation, effect, summary, whether ``self`` was dropped, name)
_Key = tuple[str, str, Effect, str, bool, str | None]


@final
class _Kept:
    """What is kept of one function: whether its first parameter is ``self``, and its schemas."""

    __slots__ = ("first_is_self", "schemas")

    def __init__(self, first_is_self: bool) -> None:
        self.first_is_self = first_is_self  # read from its signature once, not on every look-up
        self.schemas: dict[_Key, OperationSchema] = {}


#: Plain functions only: their equality is identity (a callable object's may not be; a bound
#: method lives one access).
_derived: weakref.WeakKeyDictionary[Callable[..., Any], _Kept] = weakref.WeakKeyDictionary()
_derived_lock = threading.Lock()


def operation_schema(
    tool: str,
    operation: str,
    function: Callable[..., Any],
    effect: Effect,
    summary: str = "",
    *,
    name: str | None = None,
) -> OperationSchema:
    """Derive the argument model of ``function`` (a tool method or a plain function).

    Every parameter becomes a field (annotation and default kept; unannotated
    means any JSON value). The intent field is ``purpose`` for ``READ_ONLY``
    operations and ``audit_as`` for all others. ``name`` is the by-name form
    (default ``tool.operation``).

    Derived once per function and arguments, then shared; not kept when the
    annotations could not be resolved (a later call may resolve them).

    Raises:
        ConfigurationError: the signature has ``*args``/``**kwargs`` or a name clashing
            with the intent field (every time: a refusal is not kept).
    """
    target = inspect.unwrap(function)
    # A method's ``self`` is no argument. The key says whether it was dropped, not why, so that
    # a @tool function's catalogs find the schema its decoration derived.
    method = target is function or is_operation_method(function)
    keeps = type(target) is types.FunctionType
    if keeps:
        with _derived_lock:
            kept = _derived.get(target)
            if kept is not None:
                dropped = method and kept.first_is_self
                found = kept.schemas.get((tool, operation, effect, summary, dropped, name))
                if found is not None:
                    return found
    parameters = list(inspect.signature(target).parameters.values())
    first_is_self = bool(parameters) and parameters[0].name == "self"
    if method and first_is_self:
        parameters = parameters[1:]
    hints = _hints(target)
    intent_field = intent_field_for(effect)
    fields: dict[str, Any] = {}
    renames: dict[str, str] = {}
    for parameter in parameters:
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ConfigurationError(
                f"{tool}.{operation}: *args and **kwargs cannot be described as a schema"
            )
        if parameter.name in ("purpose", "audit_as"):
            raise ConfigurationError(
                f"{tool}.{operation}: parameter {parameter.name!r} clashes with the intent"
            )
        annotation = Any if hints is None else hints.get(parameter.name, Any)
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        if hasattr(BaseModel, parameter.name):
            # e.g. ``json``: keep the public name as the alias, rename the model field.
            renames[f"{parameter.name}_"] = parameter.name
            fields[f"{parameter.name}_"] = (annotation, Field(default, alias=parameter.name))
        else:
            fields[parameter.name] = (annotation, default)
    description = f"Why this call is made; recorded in the audit trail ({intent_field})."
    fields[intent_field] = (str, Field(..., min_length=1, max_length=1000, description=description))
    model_name = "".join(part.capitalize() for part in f"{tool}_{operation}".replace(".", "_").split("_"))
    model = create_model(f"{model_name}Arguments", __config__=_FORBID, **fields)
    schema = OperationSchema(
        name or f"{tool}.{operation}", operation, model, intent_field, summary, renames=renames
    )
    if not keeps or hints is None:
        return schema
    key: _Key = (tool, operation, effect, summary, method and first_is_self, name)
    with _derived_lock:  # two threads deriving at once: both get the first one kept
        return _derived.setdefault(target, _Kept(first_is_self)).schemas.setdefault(key, schema)


def described_schema(
    tool: str,
    operation: str,
    parameters: Mapping[str, Any],
    effect: Effect,
    summary: str = "",
    *,
    name: str | None = None,
) -> OperationSchema:
    """The schema of an operation described by JSON Schema (`DescribedOperations`).

    The JSON Schema shown to models is ``parameters`` with the intent field
    added (required) and, unless it says otherwise, no additional properties;
    validation of everything else is the tool's. ``name`` is the by-name form
    (default ``tool.operation``). Not kept: the tool gives its schema per catalog.

    Raises:
        ConfigurationError: ``parameters`` is not an object schema with local ``$ref`` only,
            or it already has a property named like the intent field.
    """
    intent_field = intent_field_for(effect)
    if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
        raise ConfigurationError(f"{tool}.{operation}: the argument schema must be an object schema")
    check_local_refs(parameters)
    properties = parameters.get("properties", {})
    if not isinstance(properties, Mapping) or intent_field in properties:
        raise ConfigurationError(
            f"{tool}.{operation}: the argument schema needs a properties object without {intent_field!r}"
        )
    description = f"Why this call is made; recorded in the audit trail ({intent_field})."
    required = [r for r in parameters.get("required") or () if isinstance(r, str)]
    shown: dict[str, Any] = {
        **dict(parameters),
        "type": "object",
        "properties": {
            **dict(properties),
            intent_field: {"type": "string", "minLength": 1, "maxLength": 1000, "description": description},
        },
        "required": [*required, intent_field],
    }
    if "additionalProperties" not in parameters and "patternProperties" not in parameters:
        shown["additionalProperties"] = False  # exact, like schemas from signatures
    intent = (str, Field(..., min_length=1, max_length=1000))
    model_name = "".join(part.capitalize() for part in f"{tool}_{operation}".replace(".", "_").split("_"))
    # extra="allow": the other arguments pass through as given, for the tool to validate.
    model = create_model(
        f"{model_name}Arguments",
        __config__=ConfigDict(extra="allow", allow_inf_nan=False),
        **{intent_field: intent},  # type: ignore[call-overload]
    )
    return OperationSchema(
        name or f"{tool}.{operation}", operation, model, intent_field, summary, json_schema=shown
    )
