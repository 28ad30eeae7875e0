"""An operation model's validation, returning the validated field values without building the model.

A by-name route (`toolbox.doors._route`) validates with the same model as the
chain's argument validation (`toolbox.pipeline.checks._arguments`), then throws the
model instance away and keeps its field values. `field_values` compiles that
validation from the model's own core schema (its fields' schemas and its config:
``extra="forbid"``, ``allow_inf_nan=False``) as a typed dict's: the same checks and
conversions, without the instance, its private slots and its set of fields on
every call. ``tests/test_gate.py`` holds it to the model's answers for every kind
of input a model may send.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from pydantic_core import SchemaValidator

__all__ = ["field_values"]

#: What a plain model field carries (an alias or anything else: the model validates).
_FIELD_KEYS = frozenset({"type", "schema", "metadata"})


def field_values(model: type[BaseModel]) -> Callable[[object], dict[str, Any]]:
    """``validate(arguments)``: the dict of ``model``'s validated field values, in the model's field order.

    Raises pydantic's `ValidationError` (a `ValueError`) where ``model`` would.
    A model whose schema is not a plain one (a custom ``__init__``, a root model,
    model validators, aliases, definitions shared between fields) is validated as itself.
    """
    validate = model.__pydantic_validator__.validate_python
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
    if plain:
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
        typed_dict = {"type": "typed-dict", "fields": fields, "config": config}
        try:
            return SchemaValidator(typed_dict, config).validate_python
        except Exception:  # noqa: BLE001, S110 - a schema pydantic-core does not take alone: the model's own
            pass
    return lambda arguments: validate(arguments).__dict__
