"""The approval fingerprint: a keyed hash over every value of a call, in a canonical encoding.

The encoding is injective over the values governance sees: every value is
tagged with its type (``1``, ``1.0``, ``True`` and ``"1"`` differ), strings
are JSON-quoted, containers are delimited, and mapping entries are sorted by
their encoded key, so any change to any value, at any depth, changes the
encoding. Nothing is left out for looking secret: secrets enter only through
the HMAC, whose key the application holds, so the fingerprint shown to a
person or a model cannot be used to confirm a guessed secret.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import hmac
import json
import math
from collections.abc import Mapping, Set
from decimal import Decimal

from pydantic import BaseModel, SecretBytes, SecretStr

__all__ = ["canonical_encoding", "keyed_fingerprint"]

_MAX_DEPTH = 200


def canonical_encoding(value: object) -> str:
    """A canonical, type-tagged text for ``value``; equal only for equal values of equal types.

    Raises:
        ValueError: ``value`` nests deeper than 200 levels (or contains itself).
    """
    parts: list[str] = []
    _encode(value, parts, 0)
    return "".join(parts)


def keyed_fingerprint(key: bytes, *material: object) -> str:
    """HMAC-SHA256 under ``key`` of the canonical encoding of ``material``, as hex."""
    return hmac.new(key, canonical_encoding(list(material)).encode("utf-8"), hashlib.sha256).hexdigest()


def _encode(value: object, out: list[str], depth: int) -> None:  # noqa: PLR0912, PLR0915 - a branch per type
    if depth > _MAX_DEPTH:
        raise ValueError("arguments nest too deeply to fingerprint")
    kind = type(value)
    if value is None:
        out.append("n")
    elif kind is bool:
        out.append("t" if value else "f")
    elif kind is str:
        out.append("s" + json.dumps(value, ensure_ascii=True))
    elif kind is int:
        out.append(f"i{value:x}")  # hex: no digit limit for huge ints (decimal str() has one)
    elif kind is float:
        out.append("d" + (repr(value) if math.isfinite(value) else str(value)))  # type: ignore[arg-type]
    elif isinstance(value, (bytes, bytearray, memoryview)):
        out.append("b" + bytes(value).hex() + ";")
    elif isinstance(value, Mapping):
        entries = []
        for key, item in value.items():
            encoded: list[str] = []
            _encode(key, encoded, depth + 1)
            encoded.append(":")
            _encode(item, encoded, depth + 1)
            entries.append("".join(encoded))
        out.append("{" + ",".join(sorted(entries)) + "}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _encode(item, out, depth + 1)
        out.append("]")
    elif isinstance(value, Set):
        items = []
        for item in value:
            encoded = []
            _encode(item, encoded, depth + 1)
            items.append("".join(encoded))
        out.append("<" + ",".join(sorted(items)) + ">")
    elif isinstance(value, (SecretStr, SecretBytes)):
        # A secret is bound by its value, inside the HMAC (its str() is a mask that binds nothing).
        out.append("k" + json.dumps(_qualname(value)) + ":")
        _encode(value.get_secret_value(), out, depth + 1)
    elif isinstance(value, enum.Enum):
        out.append("e" + json.dumps(_qualname(value)) + ":")
        _encode(value.value, out, depth + 1)
    elif isinstance(value, BaseModel):
        out.append("m" + json.dumps(_qualname(value)) + ":")
        _encode(value.model_dump(mode="python"), out, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append("c" + json.dumps(_qualname(value)) + ":")
        _encode({f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, out, depth + 1)
    elif isinstance(value, (int, float, Decimal)):
        out.append("x" + json.dumps(_qualname(value)) + json.dumps(repr(value)))
    else:
        # datetime, UUID, Path, ...: their str is exact; anything else is bound by its repr.
        out.append("o" + json.dumps(_qualname(value)) + json.dumps(str(value)) + json.dumps(repr(value)))


def _qualname(value: object) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"
