"""By-name arguments: size guards, schemas derived from signatures, validation.

A model emits JSON; before anything runs it must be an object of bounded size,
depth, collection length and integer length, without NaN or infinities (unless
the parameter opts in with pydantic's ``AllowInfNan``), and match the
operation's schema exactly (required fields, types, enums, bounds, no
additional properties).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import threading
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast, final

from pydantic import AllowInfNan, BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from toolbox.errors import ConfigurationError, InvalidArgumentsError, ToolboxError, ToolDeniedError
from toolbox.foundations._binding import is_operation_method
from toolbox.foundations._descriptor import Effect
from toolbox.foundations._dispatch import building
from toolbox.foundations._intent_text import intent_field_for, validate_intent_text
from toolbox.foundations._operations import DescribedOperations
from toolbox.pipeline._invocation import BY_NAME, Invocation
from toolbox.pipeline._result import ToolResult

__all__ = [
    "ArgumentLimits",
    "ArgumentValidation",
    "OperationSchema",
    "check_limits",
    "described_schema",
    "flat_and_small",
    "operation_schema",
    "validate_arguments",
]

# allow_inf_nan=False: "NaN" and "Infinity" (as numbers or strings) are refused unless a
# parameter opts in with AllowInfNan(True) or Field(allow_inf_nan=True).
_FORBID = ConfigDict(extra="forbid", arbitrary_types_allowed=True, allow_inf_nan=False)


@final
@dataclass(frozen=True)
class ArgumentLimits:
    """Guards applied to by-name arguments before schema validation."""

    max_bytes: int = 64 * 1024
    """Approximate serialized size of all arguments."""
    max_depth: int = 64
    """Nesting depth of objects and arrays."""
    max_items: int = 1000
    """Items in any one object or array."""
    max_int_digits: int = 4300
    """Decimal digits of any one integer (CPython's own limit for printing an int)."""
    int_bound: int = dataclasses.field(init=False, repr=False, compare=False)
    """``10 ** max_int_digits``: integers must lie strictly between its negative and it."""
    fast_int_range: tuple[int, int] = dataclasses.field(init=False, repr=False, compare=False)
    """The integers `flat_and_small` passes with one comparison: within the bound and 2**62."""

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_depth", "max_items", "max_int_digits"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(f"ArgumentLimits.{name} must be a positive integer, got {value!r}")
        if self.max_int_digits > 100_000:
            raise ConfigurationError("ArgumentLimits.max_int_digits must be at most 100000")
        object.__setattr__(self, "int_bound", 10**self.max_int_digits)
        small = min(self.int_bound, 2**62)
        object.__setattr__(self, "fast_int_range", (-small, small))


def check_limits(arguments: object, limits: ArgumentLimits, non_finite: frozenset[str] = frozenset()) -> None:
    """Raise `InvalidArgumentsError` unless ``arguments`` is a JSON object within ``limits``.

    NaN and infinities are refused except under the top-level keys in ``non_finite``.
    Walks the value once, iteratively (a deep value cannot exhaust the stack).
    """
    if not isinstance(arguments, Mapping):
        raise InvalidArgumentsError(
            f"arguments must be a JSON object, got {type(arguments).__name__}",
            error_code="not_an_object",
            field_path="",
        )
    if flat_and_small(arguments, limits):
        return
    size = 2
    bound = limits.int_bound
    stack: list[tuple[object, str, int, bool]] = [(arguments, "", 1, False)]
    while stack:
        value, path, depth, non_finite_ok = stack.pop()
        if isinstance(value, (Mapping, list, tuple)):
            if depth > limits.max_depth:
                raise InvalidArgumentsError(
                    f"arguments nest deeper than {limits.max_depth} levels",
                    error_code="too_deep",
                    field_path=path,
                )
            if len(value) > limits.max_items:
                raise InvalidArgumentsError(
                    f"a collection holds {len(value)} items, more than {limits.max_items}",
                    error_code="too_many_items",
                    field_path=path,
                )
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            for key, child in items:
                size += len(str(key)) + 4
                opted_in = non_finite_ok or (depth == 1 and key in non_finite)
                stack.append((child, f"{path}.{key}" if path else str(key), depth + 1, opted_in))
        elif isinstance(value, (str, bytes)):
            size += len(value) + 2
        else:
            _check_number(value, path, bound, limits, non_finite_ok)
            size += 8
        if size > limits.max_bytes:
            raise InvalidArgumentsError(
                f"arguments are larger than {limits.max_bytes} bytes",
                error_code="too_large",
                field_path=path,
            )


def _check_number(value: object, path: str, bound: int, limits: ArgumentLimits, non_finite_ok: bool) -> None:
    if isinstance(value, int) and abs(value) >= bound:
        raise InvalidArgumentsError(
            f"an integer has more than {limits.max_int_digits} digits",
            error_code="int_too_large",
            field_path=path,
        )
    if isinstance(value, float) and not non_finite_ok and not math.isfinite(value):
        raise InvalidArgumentsError(
            "NaN and infinite numbers are not accepted here",
            error_code="non_finite_number",
            field_path=path,
        )


def flat_and_small(arguments: object, limits: ArgumentLimits, keys: frozenset[str] | None = None) -> bool:
    """Whether ``arguments`` is a dict of scalars and strings within ``limits`` (the common case, cheaply).

    With ``keys`` (a by-name route's operation fields), also whether every key is one
    of them: tested first, in C, so a key that is not a string is never measured.
    """
    if type(arguments) is not dict or len(arguments) > limits.max_items:
        return False
    if keys is not None and not keys.issuperset(arguments):
        return False
    size = 2
    low, high = limits.fast_int_range
    for key, value in arguments.items():
        kind = type(value)
        if kind is str:
            size += len(value) + len(key) + 6
        elif kind is int:
            if not low < value < high:
                return False  # possibly too many digits: check_limits counts them
            size += len(key) + 12
        elif kind is float:
            if value - value != 0.0:
                return False  # NaN or an infinity: check_limits decides (a parameter may opt in)
            size += len(key) + 12
        elif kind is bool or value is None:
            size += len(key) + 12
        else:
            return False
    return size <= limits.max_bytes


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
        """The JSON Schema of the arguments (intent field included); local ``$ref`` only."""
        with self._lock:
            if self._json_schema is None:
                schema = self.model.model_json_schema()
                check_local_refs(schema)
                self._json_schema = schema
            return self._json_schema

    def definition(self) -> dict[str, Any]:
        """An LLM function definition: name, description, parameters."""
        return {"name": self.name, "description": self.summary, "parameters": self.json_schema()}


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


def _hints(function: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(function, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations fall back to Any below
        return {}


def operation_schema(
    tool: str, operation: str, function: Callable[..., Any], effect: Effect, summary: str = ""
) -> OperationSchema:
    """Derive the argument model of ``function`` (a tool method or a plain function).

    Every parameter becomes a field (annotation and default kept; unannotated
    means any JSON value). The intent field is ``purpose`` for ``READ_ONLY``
    operations and ``audit_as`` for all others.

    Raises:
        ConfigurationError: the signature has ``*args``/``**kwargs`` or a name clashing
            with the intent field.
    """
    target = inspect.unwrap(function)
    signature = inspect.signature(target)
    hints = _hints(target)
    intent_field = intent_field_for(effect)
    fields: dict[str, Any] = {}
    renames: dict[str, str] = {}
    parameters = list(signature.parameters.values())
    if (target is function or is_operation_method(function)) and parameters and parameters[0].name == "self":
        parameters = parameters[1:]
    for parameter in parameters:
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ConfigurationError(
                f"{tool}.{operation}: *args and **kwargs cannot be described as a schema"
            )
        if parameter.name in ("purpose", "audit_as"):
            raise ConfigurationError(
                f"{tool}.{operation}: parameter {parameter.name!r} clashes with the intent"
            )
        annotation = hints.get(parameter.name, Any)
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
    return OperationSchema(f"{tool}.{operation}", operation, model, intent_field, summary, renames=renames)


def described_schema(
    tool: str, operation: str, parameters: Mapping[str, Any], effect: Effect, summary: str = ""
) -> OperationSchema:
    """The schema of an operation described by JSON Schema (`DescribedOperations`).

    The JSON Schema shown to models is ``parameters`` with the intent field
    added (required) and, unless it says otherwise, no additional properties;
    validation of everything else is the tool's.

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
    return OperationSchema(f"{tool}.{operation}", operation, model, intent_field, summary, json_schema=shown)


def validate_arguments(schema: OperationSchema, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """Validate ``arguments`` against ``schema``: the call's keyword arguments and intent text.

    Raises:
        InvalidArgumentsError: with the first error's code and field path.
    """
    try:
        parsed = schema.model.model_validate(arguments)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        path = ".".join(str(p) for p in first["loc"])
        raise InvalidArgumentsError(
            f"argument {path or '(root)'}: {first['msg']}", error_code=first["type"], field_path=path
        ) from None
    values = dict(parsed.__dict__)
    if schema.described:
        values.update(parsed.__pydantic_extra__ or {})
    for field, parameter in schema.renames.items():
        values[parameter] = values.pop(field)
    text = values.pop(schema.intent_field)
    try:
        validate_intent_text(text)
    except ValueError as exc:
        raise InvalidArgumentsError(
            str(exc), error_code="invalid_intent", field_path=schema.intent_field
        ) from None
    return values, text


@final
class ArgumentValidation:
    """By-name door: guards, schema validation, then the tool's own argument checks.

    The typed door's arguments were checked by the operation method when the
    intent was built, so this step has nothing to do there.
    """

    name = "validation"
    per_attempt = False
    __slots__ = ("_limits",)

    @staticmethod
    def applies(invocation: Invocation) -> bool:
        """Only by-name arguments need validating here."""
        return invocation.door == BY_NAME

    def __init__(self, limits: ArgumentLimits) -> None:
        self._limits = limits

    @property
    def limits(self) -> ArgumentLimits:
        """The guards applied before schema validation."""
        return self._limits

    def __call__(self, invocation: Invocation) -> ToolResult | None:
        if invocation.door != BY_NAME:
            return None
        tools = invocation.tools
        if tools is None:  # pragma: no cover - the by-name door always attaches tools
            raise RuntimeError("invocation has no tools attached")
        schema = tools.catalog.schema(invocation.tool, invocation.operation)
        check_limits(invocation.arguments, self._limits, schema.non_finite)
        values, text = validate_arguments(schema, invocation.arguments)
        try:
            if schema.described:
                described = cast(DescribedOperations, invocation.instance)
                intent = building(invocation.tool, lambda: described.operation_intent(schema.method, values))
            else:
                method = getattr(invocation.instance, schema.method)
                intent = building(invocation.tool, lambda: method(**values))
        except ToolDeniedError as exc:
            return invocation.denied(exc.reason_code, exc.rule, str(exc))
        except InvalidArgumentsError as exc:
            return invocation.invalid(exc.error_code, exc.field_path, str(exc))
        except (ValueError, TypeError) as exc:
            message = (
                str(exc) if isinstance(exc, ToolboxError) or type(exc) is ValueError else type(exc).__name__
            )
            return invocation.invalid("rejected_by_tool", "", message)
        # Both doors hand governance the provider's view of the arguments, and bind the call's own.
        invocation.arguments = intent.arguments
        bound = intent.bound
        if bound is not intent.arguments:
            invocation.bound = bound
        if intent.warnings:
            invocation.warnings = (*invocation.warnings, *intent.warnings)
        invocation.record.intent_text = text
        invocation.call, invocation.acall = dispatch_calls(intent)
        invocation.target = invocation.record.target = intent.target
        return None


def dispatch_calls(intent: Any) -> tuple[Callable[[], Any], Callable[[], Awaitable[Any]] | None]:
    """The sync and async calls of ``intent``, for the by-name door's chain to dispatch.

    Not a way around the chain: a runtime's calls raise `GovernanceBypassError`
    unless the chain is dispatching them. Re-exported by `toolbox.registry._intent`.
    """
    return intent._call, intent._acall
