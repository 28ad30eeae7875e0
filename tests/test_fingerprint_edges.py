"""The approval fingerprint's encoding, pinned byte for byte, and its depth limit exactly.

A grant signed by one process is verified by another (a fleet sharing an approval store, a
service upgraded while requests wait): the canonical encoding is a contract between them, so a
change to any tag or delimiter is a breaking change, not a refactoring. Written from
`scripts/mutation src/toolbox/pipeline/checks/_fingerprint.py` (docs/testing.md, "Mutation testing").
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import hashlib
import hmac
import json
import uuid
from collections.abc import Callable

import pytest
from pydantic import BaseModel, SecretBytes, SecretStr

from toolbox.pipeline.checks._fingerprint import canonical_encoding, keyed_fingerprint


class Color(enum.Enum):
    RED = "red"


class Point(BaseModel):
    x: int


@dataclasses.dataclass
class Box:
    w: int


class Count(int):
    """An int subclass: not a plain int, so it is tagged with its type."""


def _q(kind: type) -> str:
    return json.dumps(f"{kind.__module__}.{kind.__qualname__}")


def test_every_kind_of_value_has_its_exact_encoding() -> None:
    value = {
        "n": None,
        "t": True,
        "f": False,
        "s": 'é"',
        "i": -255,
        "d": 1.5,
        "inf": float("-inf"),
        "nan": float("nan"),
        "b": b"\x00\xff",
        "ba": bytearray(b"a"),
        "mv": memoryview(b"z"),
        "l": [1, "1"],
        "tu": (1,),
        "set": {2, 1},
        "fs": frozenset({"a"}),
        "st": {(1, "a")},
        "sec": SecretStr("pw"),
        "secb": SecretBytes(b"k"),
        "e": Color.RED,
        "m": Point(x=1),
        "c": Box(w=2),
        "dec": decimal.Decimal("1.10"),
        "sub": Count(5),
        "u": uuid.UUID(int=1),
        "dt": datetime.date(2026, 1, 2),
        3: "int key",
    }
    uid = "00000000-0000-0000-0000-000000000001"
    expected = (
        '{i3:s"int key",'
        's"b":b00ff;,'
        's"ba":b61;,'
        f's"c":c{_q(Box)}:{{s"w":i2}},'
        's"d":d1.5,'
        f's"dec":x"decimal.Decimal""Decimal(\'1.10\')",'
        f's"dt":o"datetime.date""2026-01-02""datetime.date(2026, 1, 2)",'
        f's"e":e{_q(Color)}:s"red",'
        's"f":f,'
        's"fs":<s"a">,'
        's"i":i-ff,'
        's"inf":d-inf,'
        's"l":[i1,s"1"],'
        f's"m":m{_q(Point)}:{{s"x":i1}},'
        's"mv":b7a;,'
        's"n":n,'
        's"nan":dnan,'
        's"s":s"\\u00e9\\"",'
        's"sec":k"pydantic.types.SecretStr":s"pw",'
        's"secb":k"pydantic.types.SecretBytes":b6b;,'
        's"set":<i1,i2>,'
        's"st":<[i1,s"a"]>,'
        f's"sub":x{_q(Count)}"5",'
        's"t":t,'
        's"tu":[i1],'
        f's"u":o"uuid.UUID""{uid}""UUID(\'{uid}\')"'
        "}"
    )
    assert canonical_encoding(value) == expected


def test_the_keyed_fingerprint_is_the_hmac_of_the_encoded_material_as_a_list() -> None:
    key = b"k" * 32
    expected = hmac.new(key, b'[s"pay",{s"to":s"alice"}]', hashlib.sha256).hexdigest()
    assert keyed_fingerprint(key, "pay", {"to": "alice"}) == expected
    assert expected == "f6fb76c2a891832e994f1fc94df37431c4491489e6ee26d4e3aa3027de503f8e"


def _nested(levels: int, wrap: Callable[[object], object]) -> object:
    value: object = 0
    for _ in range(levels):
        value = wrap(value)
    return value


@pytest.mark.parametrize(
    "wrap",
    [lambda v: [v], lambda v: (v,), lambda v: {"k": v}, lambda v: frozenset([v])],
    ids=["list", "tuple", "mapping-value", "set"],
)
def test_two_hundred_levels_are_encoded_and_one_more_is_refused(wrap: Callable[[object], object]) -> None:
    """The innermost value of 200 nested containers sits at level 200: encoded; at 201: refused."""
    canonical_encoding(_nested(200, wrap))
    with pytest.raises(ValueError, match=r"^arguments nest too deeply to fingerprint$"):
        canonical_encoding(_nested(201, wrap))


def test_the_material_list_is_a_level_of_its_own() -> None:
    """keyed_fingerprint encodes its material as a list: 199 levels inside it fit, 200 do not."""
    keyed_fingerprint(b"k" * 32, _nested(199, lambda v: [v]))
    with pytest.raises(ValueError, match="nest too deeply"):
        keyed_fingerprint(b"k" * 32, _nested(200, lambda v: [v]))


@dataclasses.dataclass
class Wrapper:
    inner: object


class Holder(BaseModel):
    inner: object


@pytest.mark.parametrize("wrap", [Wrapper, lambda v: Holder(inner=v)], ids=["dataclass", "model"])
def test_a_dataclass_or_model_is_a_level_and_its_fields_another(wrap: Callable[[object], object]) -> None:
    """The object at level 198, its fields at 199, a field's value at 200: encoded; one list more: refused."""
    value = wrap("leaf")
    canonical_encoding(_wrap_lists(value, 198))
    with pytest.raises(ValueError, match="nest too deeply"):
        canonical_encoding(_wrap_lists(value, 199))


def _wrap_lists(value: object, levels: int) -> object:
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [SecretStr("leaf"), SecretBytes(b"leaf"), Color.RED],
    ids=["secret-str", "secret-bytes", "enum"],
)
def test_secrets_and_enums_are_one_level_around_their_value(value: object) -> None:
    """The secret or enum sits at level 199, its value at 200: encoded; one list more: refused."""
    canonical_encoding(_wrap_lists(value, 199))
    with pytest.raises(ValueError, match="nest too deeply"):
        canonical_encoding(_wrap_lists(value, 200))


def test_a_deep_key_is_as_deep_as_a_deep_value() -> None:
    """A tuple key 200 levels deep inside a mapping: its innermost item sits at level 201."""
    key: object = 0
    for _ in range(199):
        key = (key,)
    canonical_encoding({key: 1})
    with pytest.raises(ValueError, match="nest too deeply"):
        canonical_encoding({(key,): 1})
