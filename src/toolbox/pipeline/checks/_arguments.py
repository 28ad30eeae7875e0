"""By-name arguments: size guards and validation against the operation's schema.

A model emits JSON; before anything runs it must be an object of bounded size,
depth, collection length and integer length, without NaN or infinities (unless
the parameter opts in with pydantic's ``AllowInfNan``), and match the
operation's schema exactly (required fields, types, enums, bounds, no
additional properties). The schemas are derived in `toolbox.pipeline.checks._schemas`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast, final

from pydantic import ValidationError

from toolbox.errors import ConfigurationError, InvalidArgumentsError, ToolboxError, ToolDeniedError
from toolbox.foundations._dispatch import building
from toolbox.foundations._intent_text import validate_intent_text
from toolbox.foundations._operations import DescribedOperations
from toolbox.pipeline._invocation import BY_NAME, Invocation
from toolbox.pipeline._result import ToolResult
from toolbox.pipeline.checks._schemas import OperationSchema

__all__ = [
    "ArgumentLimits",
    "ArgumentValidation",
    "check_limits",
    "flat_and_small",
    "validate_arguments",
]


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
