"""Python argument values as Cedar JSON values, refusing what Cedar cannot hold exactly.

Cedar has booleans, 64-bit integers (``Long``), strings, sets, records and
extension values such as ``decimal`` (four fractional digits). A value
without an exact Cedar counterpart is refused with its path, never rounded
or dropped, so a policy cannot be judged on a different value than the tool
receives. Records may not use Cedar's escape keys (``__entity``, ``__extn``,
``__expr``): an argument must never turn into an entity reference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, final

__all__ = ["MAX_DEPTH", "CedarValueError", "cedar_record", "cedar_value"]

#: Deeper nesting is refused; the by-name door's argument limits normally stop it first.
MAX_DEPTH = 32
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_DECIMAL_PLACES = 4
_DECIMAL_LIMIT = Decimal(_LONG_MAX).scaleb(-_DECIMAL_PLACES)
_ESCAPES = frozenset({"__entity", "__extn", "__expr"})


@final
class CedarValueError(ValueError):
    """An argument value has no exact Cedar value; the message names where, never the value."""


def cedar_record(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as a Cedar record; None values are left out (Cedar has no null)."""
    converted = cedar_value(dict(values), "", 0)
    assert isinstance(converted, dict)
    return converted


def cedar_value(value: Any, path: str, depth: int) -> Any:
    """One value as Cedar JSON; ``path`` names it in errors."""
    if depth > MAX_DEPTH:
        raise CedarValueError(f"argument {_where(path)} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise CedarValueError(f"argument {_where(path)} is outside Cedar's 64-bit integer range")
        return value
    if isinstance(value, (float, Decimal)):
        return {"__extn": {"fn": "decimal", "arg": _decimal_text(value, path)}}
    if isinstance(value, Mapping):
        record: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CedarValueError(f"argument {_where(path)} has a key that is not a string")
            if key in _ESCAPES:
                raise CedarValueError(f"argument {_where(path)} uses the reserved Cedar key {key!r}")
            if item is not None:
                record[key] = cedar_value(item, _join(path, key), depth + 1)
        return record
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if any(item is None for item in items):
            raise CedarValueError(f"argument {_where(path)} holds null, which Cedar sets cannot")
        return [cedar_value(item, _join(path, str(i)), depth + 1) for i, item in enumerate(items)]
    raise CedarValueError(f"argument {_where(path)} of type {type(value).__name__} has no Cedar value")


def _decimal_text(value: float | Decimal, path: str) -> str:
    """Cedar's ``decimal`` text: at most four fractional digits, within its range, no rounding."""
    try:
        exact = Decimal(repr(value)) if isinstance(value, float) else value
        finite = exact.is_finite() and (not isinstance(value, float) or math.isfinite(value))
    except InvalidOperation:  # pragma: no cover - repr of a float always parses
        finite = False
    if not finite:
        raise CedarValueError(f"argument {_where(path)} is not a finite number")
    exponent = exact.normalize().as_tuple().exponent
    if not isinstance(exponent, int) or exponent < -_DECIMAL_PLACES:
        raise CedarValueError(
            f"argument {_where(path)} has more than {_DECIMAL_PLACES} decimal places, "
            "which Cedar's decimal cannot hold"
        )
    if abs(exact) > _DECIMAL_LIMIT:
        raise CedarValueError(f"argument {_where(path)} is outside Cedar's decimal range")
    text = f"{exact.quantize(Decimal(1).scaleb(-max(1, -exponent))):f}"
    return text


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _where(path: str) -> str:
    return repr(path) if path else "(all arguments)"
