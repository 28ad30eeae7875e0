"""The approval fingerprint: canonical, keyed, bound to every value (security finding 3, issue 9)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, ToolPolicy, tool
from toolbox.errors import ConfigurationError
from toolbox.governance import Approval, ApprovalCheck, HmacApprover
from toolbox.pipeline.checks._fingerprint import canonical_encoding, keyed_fingerprint

KEY = b"k" * 32

#: Names that look secret sit next to ordinary ones: none of them is left out of the binding.
NAMES = st.sampled_from(
    ["amount", "to", "Authorization", "api_key", "password", "token", "code", "barcode", "session", "iban"]
) | st.text(max_size=8)
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=8)
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAMES, inner, max_size=4),
    max_leaves=20,
)
ARGUMENTS = st.dictionaries(NAMES, VALUES, min_size=1, max_size=5)

Path = tuple[Any, ...]


def _paths(value: object, path: Path = ()) -> Iterator[Path]:
    if path:
        yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def _get(value: Any, path: Path) -> Any:
    for step in path:
        value = value[step]
    return value


def _replaced(value: Any, path: Path, new: object) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replaced(value[head], rest, new)
    return copy


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and canonical_encoding(a) == canonical_encoding(b)


@given(arguments=ARGUMENTS, data=st.data())
def test_any_change_to_any_value_changes_the_fingerprint(arguments, data):
    """Property: replace any value at any depth (secret-named or not) and the fingerprint changes."""
    path = data.draw(st.sampled_from(list(_paths(arguments))))
    old = _get(arguments, path)
    new = data.draw(VALUES.filter(lambda candidate: not _same(candidate, old)))
    changed = _replaced(arguments, path, new)
    assert keyed_fingerprint(KEY, "t", "op", changed, "tenant", "p") != keyed_fingerprint(
        KEY, "t", "op", arguments, "tenant", "p"
    )


@given(arguments=ARGUMENTS, data=st.data())
def test_renaming_a_key_changes_the_fingerprint(arguments, data):
    """Property: moving a value under another name is another call."""
    old = data.draw(st.sampled_from(sorted(arguments, key=repr)))
    new = data.draw(NAMES.filter(lambda name: name not in arguments))
    renamed = {new if k == old else k: v for k, v in arguments.items()}
    assert keyed_fingerprint(KEY, renamed) != keyed_fingerprint(KEY, arguments)


@given(a=VALUES, b=VALUES)
def test_equal_encodings_mean_equal_values(a, b):
    """Property: the encoding is injective (equal text only for equal values of equal types)."""
    if canonical_encoding(a) == canonical_encoding(b):
        assert repr(a) == repr(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, 1.0),
        (1, True),
        (1, "1"),
        (0, False),
        (None, "null"),
        (b"a", "a"),
        ([], {}),
        ((1, 2), {1, 2}),
        ({1: "a"}, {"1": "a"}),
        (0.0, -0.0),
        ("\u00e9", "e\u0301"),  # unicode is not normalised: the server would see other bytes
        (["a,b"], ["a", "b"]),
        ({"a": "b:c"}, {"a:b": "c"}),
        (decimal.Decimal("1.0"), decimal.Decimal("1.00")),
    ],
)
def test_values_that_json_would_confuse_stay_apart(a, b):
    """Types, separators and spellings that a JSON dump would merge are kept apart."""
    assert canonical_encoding(a) != canonical_encoding(b)


class Colour(enum.Enum):
    RED = "red"


class Model(pydantic.BaseModel):
    amount: int


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (Colour.RED, "red"),
        (Model(amount=1), Model(amount=2)),
        (Model(amount=1), {"amount": 1}),
        (Point(1), Point(2)),
        (datetime.date(2026, 1, 1), datetime.date(2026, 1, 2)),
        (uuid.UUID(int=1), uuid.UUID(int=2)),
    ],
)
def test_richer_values_are_bound_by_type_and_content(a, b):
    """Validated by-name values (enums, models, dataclasses, dates, UUIDs) keep their content and type."""
    assert canonical_encoding(a) != canonical_encoding(b)
    assert canonical_encoding(a) == canonical_encoding(a)


def test_huge_integers_are_bound():
    """Integers beyond Python's decimal conversion limit are encoded (in hex), not refused."""
    huge = 10**5000
    assert canonical_encoding(huge) != canonical_encoding(huge + 1)


def test_mapping_order_does_not_matter():
    """The same arguments in another order are the same call."""
    assert canonical_encoding({"a": 1, "b": [1, {"c": 2, "d": 3}]}) == canonical_encoding(
        {"b": [1, {"d": 3, "c": 2}], "a": 1}
    )


def test_self_containing_or_too_deep_arguments_fail_closed():
    """A cycle or absurd depth raises (the chain turns that into GOVERNANCE_EVALUATION_FAILED)."""
    loop: list[object] = []
    loop.append(loop)
    deep: object = 0
    for _ in range(300):
        deep = [deep]
    for value in (loop, deep):
        with pytest.raises(ValueError, match="nest too deeply"):
            canonical_encoding(value)


def test_the_fingerprint_is_keyed():
    """Without the key, a fingerprint cannot confirm a guessed secret: another key, another hash."""
    arguments = {"headers": {"authorization": "Bearer 1234"}}
    assert keyed_fingerprint(KEY, arguments) != keyed_fingerprint(b"x" * 32, arguments)


def test_hmac_approvers_with_one_secret_share_a_fingerprint_key():
    """Processes holding the same approval secret compute the same fingerprints."""
    first, second = HmacApprover(b"s" * 32), HmacApprover(b"s" * 32)
    assert first.fingerprint_key == second.fingerprint_key != b"s" * 32
    assert HmacApprover(b"t" * 32).fingerprint_key != first.fingerprint_key


@tool(name="pay", risk=RiskClass.MEMORY_ONLY, effect=Effect.UNSAFE, requires_approval=True)
def pay(to: str, details: dict[str, str]) -> str:
    """Pay someone."""
    return to


class VerifyingApprover:
    """An approver of your own, without a fingerprint key."""

    def verify(self, approval: Approval) -> bool:
        return approval.signature == "ok"


def _gateway(approver: object) -> Gateway:
    return Gateway.load(
        policy=ToolPolicy.standard(),
        providers=[pay],
        discover=False,
        env={},
        governance=Governance(approver=approver),  # type: ignore[arg-type]
    )


def test_an_approver_without_a_key_binds_within_its_chain():
    """A custom approver without ``fingerprint_key``: grants work in the chain that asked, bound as ever."""
    gateway, ctx = _gateway(VerifyingApprover()), ExecutionContext(tenant="t", principal="p")
    arguments = {"to": "alice", "details": {"password": "1234"}, "audit_as": "Pay"}
    request = gateway.invoke("pay", arguments, context=ctx).approval
    assert request is not None and "1234" not in repr(request.as_dict())
    grant = Approval(request.id, request.fingerprint, "manager", expires_at=2e9, signature="ok")
    other = {**arguments, "details": {"password": "9999"}}
    refused = gateway.invoke("pay", other, context=ctx, approval=grant)
    assert (refused.status, refused.reason_code) == (Status.DENIED, "APPROVAL_INVALID")
    assert gateway.invoke("pay", arguments, context=ctx, approval=grant).status is Status.SUCCESS


@pytest.mark.parametrize("key", [b"short", "a string key of some length"])
def test_a_bad_fingerprint_key_is_a_configuration_error(key):
    """A key too short to be a key, or not bytes, fails when the chain is built."""
    approver = VerifyingApprover()
    approver.fingerprint_key = key  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="fingerprint_key"):
        ApprovalCheck(approver)
