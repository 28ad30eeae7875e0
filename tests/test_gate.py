"""The per-call gate and the pieces the fast paths share with the full chain, each written once.

The behaviour of every path is compared end to end in ``tests/test_route.py``
and ``tests/test_typed_audit.py``; these tests pin the shared pieces
themselves: the gate (`toolbox.pipeline._paths.gates_open`), the compact trace
row generated from `OperationRecord.FIELDS`, and the route's validation made
from the chain's own operation model.
"""

from __future__ import annotations

import inspect
import math
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, create_model, model_validator

from toolbox import Budget, ExecutionContext
from toolbox.foundations._context import OperationRecord
from toolbox.pipeline._field_values import field_values, known_keys_values
from toolbox.pipeline._paths import context_gated, gates_open
from toolbox.pipeline._record_rows import first_success_row

SRC = Path(__file__).resolve().parent.parent / "src" / "toolbox"
BASE = ExecutionContext(tenant="acme", principal="alice")


def _never(tool: str) -> bool:
    return False


@pytest.mark.parametrize(
    ("context", "engaged", "open_"),
    [
        (BASE, _never, True),
        (BASE.model_copy(update={"deadline": datetime.now(timezone.utc) + timedelta(days=1)}), _never, False),
        (BASE.model_copy(update={"budget": Budget(max_calls=5)}), _never, False),
        (BASE.model_copy(update={"scope": frozenset({"add"})}), _never, False),
        (BASE, lambda tool: tool == "add", False),
    ],
    ids=["open", "deadline", "budget", "scope", "kill-switch"],
)
def test_the_gate_closes_on_each_per_call_state(context: ExecutionContext, engaged: Any, open_: bool) -> None:
    assert gates_open(context_gated(context), engaged, "add") is open_


def test_the_gate_is_written_once() -> None:
    """No other module tests the context's own gates: the fast paths call `gates_open`."""
    pattern = re.compile(r"context\.budget is (not )?None")
    written = sorted(
        path.relative_to(SRC).as_posix() for path in SRC.rglob("*.py") if pattern.search(path.read_text())
    )
    assert written == [Path(inspect.getfile(gates_open)).relative_to(SRC).as_posix()]


def test_the_compact_row_is_the_record_the_chain_keeps() -> None:
    row = first_success_row(tool="calc", operation="add", name="calc.add", intent_kind="purpose")
    record = OperationRecord("calc", "add", "purpose", "Sum the order", None, "calc.add")
    record.declared_at = record.started_at = 10.0
    record.attempts = 1
    record.ended_at, record.duration, record.status = 12.5, 2.5, "SUCCESS"
    compact = row(10.0, 2.5, 12.5, "Sum the order")
    assert len(compact) == 5  # the shape, then the call's own four values: few items to walk
    assert OperationRecord._revived(compact).as_dict() == record.as_dict()
    assert compact[0] is row(11.0, 1.0, 12.0, "Again")[0]  # one shape for every call of the name


@pytest.mark.parametrize(
    ("shared", "own"),
    [({"tool": "calc", "nope": 1}, ()), ({"tool": "calc"}, (("tool",),)), ({}, (("duration", "duration"),))],
    ids=["unknown", "shared-and-own", "twice"],
)
def test_a_compact_shape_names_each_record_field_at_most_once(shared: Any, own: Any) -> None:
    with pytest.raises(ValueError, match="distinct OperationRecord fields"):
        OperationRecord.compact_shape(shared, own)


Arguments = create_model(
    "CalcAddArguments",
    __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True, allow_inf_nan=False),
    a=(int, ...),
    b=(float, 1.5),
    note=(str | None, None),
    purpose=(str, Field(..., min_length=1, max_length=1000)),
)

# What a model may send: valid, extra keys, wrong and coerced types, NaN spelled every way,
# huge and nested values, the intent missing, empty or too long, not an object at all.
ATTEMPTS: list[object] = [
    {"a": 1, "purpose": "Sum"},
    {"a": 1, "b": 2, "note": "x", "purpose": "Sum"},
    {"a": "1", "purpose": "Sum"},
    {"a": True, "purpose": "Sum"},
    {"a": 1.0, "purpose": "Sum"},
    {"a": 1.5, "purpose": "Sum"},
    {"a": 1, "b": math.nan, "purpose": "Sum"},
    {"a": 1, "b": "NaN", "purpose": "Sum"},
    {"a": 1, "b": "Infinity", "purpose": "Sum"},
    {"a": 1, "b": -math.inf, "purpose": "Sum"},
    {"a": 10**50, "purpose": "Sum"},
    {"a": {"nested": [1, 2]}, "purpose": "Sum"},
    {"a": 1, "purpose": "Sum", "extra": 1},
    {"a": 1, "purpose": "Sum", "__class__": "x"},
    {"a": 1},
    {"a": 1, "purpose": ""},
    {"a": 1, "purpose": "x" * 1001},
    {"a": 1, "purpose": 7},
    [1, 2],
    "a=1",
    None,
]


def _outcome(validate: Any, arguments: object) -> object:
    try:
        return validate(arguments)
    except ValidationError as exc:
        return [(e["type"], e["loc"]) for e in exc.errors()]


@pytest.mark.parametrize("arguments", ATTEMPTS, ids=range(len(ATTEMPTS)))
def test_field_values_validate_as_the_chains_model_does(arguments: object) -> None:
    """The same values, or a refusal for the same reasons (anything but an object: a refusal)."""
    expected = _outcome(lambda raw: Arguments.model_validate(raw).__dict__, arguments)
    seen = _outcome(field_values(Arguments), arguments)
    if isinstance(arguments, dict):
        assert seen == expected
    else:  # named as a dict's type here, as a model's there: the route hands the call to the chain
        assert isinstance(seen, list) and isinstance(expected, list)


@pytest.mark.parametrize("arguments", ATTEMPTS, ids=range(len(ATTEMPTS)))
def test_known_keys_values_validate_as_the_chains_model_does_once_the_keys_are_tested(
    arguments: object,
) -> None:
    """Keys all fields: the model's answer without its extra-key check; another key: the model refuses."""
    known = known_keys_values(Arguments)
    assert known is not None
    keys, validate = known
    assert keys == frozenset(Arguments.model_fields)
    if not isinstance(arguments, dict):
        return  # the route's flat_and_small hands anything but a dict to the chain first
    expected = _outcome(lambda raw: Arguments.model_validate(raw).__dict__, arguments)
    if keys.issuperset(arguments):
        assert _outcome(validate, arguments) == expected
    else:  # the caller hands it to the model, which refuses the other key
        assert isinstance(expected, list)
        assert any(kind == "extra_forbidden" for kind, _ in expected)


@pytest.mark.parametrize(
    "model",
    [
        create_model("Loose", a=(int, ...)),  # other keys ignored: nothing to test first
        create_model("Aliased", __config__=ConfigDict(extra="forbid"), a=(int, Field(..., alias="A"))),
    ],
    ids=["extra-ignored", "aliased"],
)
def test_known_keys_values_only_for_a_plain_model_that_forbids_other_keys(model: type[BaseModel]) -> None:
    assert known_keys_values(model) is None


class _Checked(BaseModel):
    a: int

    @model_validator(mode="after")
    def _positive(self) -> _Checked:
        if self.a < 0:
            raise ValueError("a must be positive")
        return self


@pytest.mark.parametrize("model", [_Checked, RootModel[int]], ids=["model-validator", "root-model"])
def test_a_model_that_is_not_plain_is_validated_as_itself(model: type[BaseModel]) -> None:
    validate = field_values(model)
    good = 3 if model is not _Checked else {"a": 3}
    assert validate(good) == model.model_validate(good).__dict__
    if model is _Checked:
        with pytest.raises(ValidationError, match="a must be positive"):
            validate({"a": -1})
