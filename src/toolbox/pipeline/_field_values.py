"""An operation model's validation, returning the validated field values without building the model.

A by-name route (`toolbox.doors._route`) validates with the same model as the
chain's argument validation (`toolbox.pipeline.checks._arguments`), then throws the
model instance away and keeps its field values. `field_values` compiles that
validation from the model's own core schema (its fields' schemas and its config:
``extra="forbid"``, ``allow_inf_nan=False``) as a typed dict's: the same checks and
conversions, without the instance, its private slots and its set of fields on
every call. ``tests/test_gate.py`` holds it to the model's answers for every kind
of input a model may send.

`known_keys_values` is the same validation for arguments whose keys are all the
model's fields, without pydantic-core's extra-key check (about 120 ns of a call, a
third of the validation): the caller tests the keys first, in C (the route's argument
guard, `flat_and_small` given the keys), and hands any other arguments to the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from pydantic_core import SchemaValidator

__all__ = ["field_values", "known_keys_values"]

#: What a plain model field carries (an alias or anything else: the model validates).
_FIELD_KEYS = frozenset({"type", "schema", "metadata"})


def _typed_dict(model: type[BaseModel], extra: str | None) -> Callable[[object], dict[str, Any]] | None:
    """``model``'s fields validated as a typed dict (``extra``: its extra-key behaviour instead of the
    model's); None when the model's schema is not a plain one."""
    core: Any = model.__pydantic_core_schema__
    fields_schema = core.get("schema", {}) if core.get("type") == "model" else {}
    plain = (
        fields_schema.get("type") == "model-fields"
        and not core.get("custom_init")
        and not core.get("root_model")
        and not model.__pydantic_decorators__.model_validators
        and not fields_schema.get("computed_fields")
        and all(set(field) <= _FIELD_KEYS for field in fields_schema["fields"].values())
    )
    if not plain:
        return None
    # Each field's own schema, required unless it has a default (its schema says so), as the model's.
    fields = {
        name: {
            "type": "typed-dict-field",
            "schema": field["schema"],
            "required": field["schema"]["type"] != "default",
        }
        for name, field in fields_schema["fields"].items()
    }
    config = core.get("config")
    if extra is not None:
        config = {**(config or {}), "extra_fields_behavior": extra}
    typed_dict = {"type": "typed-dict", "fields": fields, "config": config}
    try:
        return SchemaValidator(typed_dict, config).validate_python
    except Exception:  # noqa: BLE001 - a schema pydantic-core does not take alone: the model's own
        return None


def field_values(model: type[BaseModel]) -> Callable[[object], dict[str, Any]]:
    """``validate(arguments)``: the dict of ``model``'s validated field values, in the model's field order.

    Raises pydantic's `ValidationError` (a `ValueError`) where ``model`` would.
    A model whose schema is not a plain one (a custom ``__init__``, a root model,
    model validators, aliases, definitions shared between fields) is validated as itself.
    """
    typed_dict = _typed_dict(model, None)
    if typed_dict is not None:
        return typed_dict
    validate = model.__pydantic_validator__.validate_python
    return lambda arguments: validate(arguments).__dict__


def known_keys_values(
    model: type[BaseModel],
) -> tuple[frozenset[str], Callable[[object], dict[str, Any]]] | None:
    """``(keys, validate)``: `field_values` for a dict whose keys are all in ``keys``, the model's fields.

    For such a dict ``validate`` answers as ``model`` does (values, or the same
    refusal): it only skips the check that no other key is present, which the
    caller makes first (``keys.issuperset(arguments)``; a dict with another key is
    refused by the model, so the caller hands it to the model). None when ``model``
    does not forbid other keys or is not a plain model: use `field_values`.
    """
    core: Any = model.__pydantic_core_schema__
    if (core.get("config") or {}).get("extra_fields_behavior") != "forbid":
        return None
    validate = _typed_dict(model, "ignore")
    if validate is None:
        return None
    return frozenset(model.model_fields), validate
