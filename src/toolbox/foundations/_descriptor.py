"""Descriptors: what a tool is, how risky it is and what its operations do."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toolbox.errors import InvalidDescriptorError
from toolbox.foundations._line_text import breaks_line
from toolbox.foundations._wire_names import MAX_WIRE_NAME, to_wire_name

__all__ = [
    "Acknowledgement",
    "Effect",
    "OperationDescriptor",
    "RiskClass",
    "ToolDescriptor",
    "describe_validation_error",
    "validate_descriptor",
]

# Parts between dots: lowercase ASCII letters, digits, "-" and single "_" inside a part. No
# "__" and no "_" at either end of a part: that keeps wire names reversible (toolbox.foundations._wire_names).
_PART = r"[a-z0-9-]*(?:_[a-z0-9-]+)*"
TOOL_NAME_PATTERN = rf"^[a-z]{_PART}(?:\.[a-z0-9]{_PART})*$"
OPERATION_NAME_PATTERN = r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$"
MAX_NAME_LENGTH = 64


class RiskClass(str, enum.Enum):
    """How far a tool reaches outside the process."""

    MEMORY_ONLY = "MEMORY_ONLY"
    """Pure computation in memory: no network, no disk, no money."""
    EXTERNAL_RESOURCE = "EXTERNAL_RESOURCE"
    """Reaches a remote resource (network services, APIs)."""
    PRIVILEGED = "PRIVILEGED"
    """Touches the host or other privileged state (files, processes, payments)."""


class Effect(str, enum.Enum):
    """What an operation does to the world; governs intent kind and retries.

    An effect that is not declared, or not recognised, is `UNSAFE`.
    """

    READ_ONLY = "READ_ONLY"
    IDEMPOTENT = "IDEMPOTENT"
    RECONCILABLE = "RECONCILABLE"
    UNSAFE = "UNSAFE"

    @classmethod
    def _missing_(cls, value: object) -> Effect:
        # Fail safe: an unknown effect must never be treated as harmless.
        return cls.UNSAFE


# Instances are validated again wherever they are validated as input: a descriptor made
# with model_construct() cannot carry a name the rules refuse.
_Frozen = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")


class Acknowledgement(BaseModel):
    """A deployment approval: environment variable ``env`` must equal ``value`` exactly.

    This is not a credential. It is a conscious decision recorded in the
    deployment, so error messages name both the variable and the value.
    """

    model_config = _Frozen

    env: Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]{0,127}$")]
    """Name of the environment variable, UPPER_SNAKE_CASE."""
    value: Annotated[str, Field(min_length=1, max_length=256)]
    """The exact value it must hold (compared without trimming or case folding)."""

    @field_validator("value")
    @classmethod
    def _printable(cls, value: str) -> str:
        if breaks_line(value):
            raise ValueError("must not contain control characters, line separators or bidirectional controls")
        return value


class OperationDescriptor(BaseModel):
    """One operation of a tool, such as ``get`` or ``write``."""

    model_config = _Frozen

    name: Annotated[str, Field(pattern=OPERATION_NAME_PATTERN, max_length=MAX_NAME_LENGTH)]
    """Operation name, unique within its tool: lowercase ``snake_case``, no ``__``."""
    effect: Effect = Effect.UNSAFE
    """What the operation does; undeclared means `Effect.UNSAFE`."""
    summary: Annotated[str, Field(max_length=500)] = ""
    """One line for people and models."""
    requires_approval: bool = False
    """Every call needs a human approval bound to its exact arguments."""


#: The one operation of a ``@tool`` function; such a tool is called by its own name.
FUNCTION_OPERATION = "call"


class ToolDescriptor(BaseModel):
    """The immutable description of a tool that a provider registers."""

    model_config = _Frozen

    name: Annotated[str, Field(pattern=TOOL_NAME_PATTERN, max_length=MAX_NAME_LENGTH)]
    """Unique tool name, e.g. ``http`` or ``acme.payments``: lowercase parts joined by single
    dots, with ``-`` and single ``_`` inside a part (never ``__``, never ``_`` at a part's end)."""
    version: Annotated[str, Field(min_length=1, max_length=64)]
    """The tool's version."""
    summary: Annotated[str, Field(max_length=500)] = ""
    """One line for people and models."""
    risk: RiskClass
    """Risk class. Required: there is no default."""
    acknowledgement: Acknowledgement | None = None
    """Deployment acknowledgement required before the tool may be used."""
    operations: Annotated[tuple[OperationDescriptor, ...], Field(min_length=1)]
    """The tool's operations, each with its effect."""

    @model_validator(mode="after")
    def _check_operations(self) -> ToolDescriptor:
        seen: set[str] = set()
        for op in self.operations:
            if op.name in seen:
                raise ValueError(f"operation {op.name!r} is declared twice")
            seen.add(op.name)
            wire = to_wire_name(f"{self.name}.{op.name}")
            if len(wire) > MAX_WIRE_NAME:
                raise ValueError(
                    f"{self.name}.{op.name} is {len(wire)} characters as a wire name ({wire!r}), "
                    f"more than {MAX_WIRE_NAME}: shorten the tool or operation name"
                )
        return self

    def effect_of(self, operation: str) -> Effect:
        """The declared effect of ``operation``; unknown operations are `Effect.UNSAFE`."""
        for op in self.operations:
            if op.name == operation:
                return op.effect
        return Effect.UNSAFE

    def offered_name(self, operation: str) -> str:
        """The by-name name ``operation`` is offered to models under (dotted; see `_wire_names`).

        ``tool.operation``, except for a tool whose one operation is ``call`` (a ``@tool``
        function): it is called by the tool's own name.
        """
        if len(self.operations) == 1 and operation == FUNCTION_OPERATION:
            return self.name
        return f"{self.name}.{operation}"


def describe_validation_error(error: ValidationError) -> str:
    """Render a pydantic error as ``field 'a.b': message; ...`` without input values."""
    parts = []
    for item in error.errors(include_input=False, include_url=False):
        loc = ".".join(str(p) for p in item["loc"]) or "(root)"
        parts.append(f"field {loc!r}: {item['msg']}")
    return "; ".join(parts)


def validate_descriptor(raw: ToolDescriptor | Mapping[str, Any], *, provider: str) -> ToolDescriptor:
    """Validate ``raw`` as a `ToolDescriptor`, naming ``provider`` and the field on failure.

    Raises:
        InvalidDescriptorError: the descriptor does not validate.
    """
    if not isinstance(raw, (ToolDescriptor, Mapping)):
        raise InvalidDescriptorError(
            f"provider {provider!r} returned a descriptor of type {type(raw).__name__}; "
            "return a toolbox.ToolDescriptor or a mapping of its fields"
        )
    try:
        # An instance is validated again (revalidate_instances): model_construct() skips the rules.
        return ToolDescriptor.model_validate(raw if isinstance(raw, ToolDescriptor) else dict(raw))
    except ValidationError as exc:
        raise InvalidDescriptorError(
            f"provider {provider!r} returned an invalid descriptor: {describe_validation_error(exc)}"
        ) from None
