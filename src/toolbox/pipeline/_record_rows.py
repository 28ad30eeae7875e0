"""The compact trace record of a call that succeeded at its first attempt (`OperationRecord.compact_shape`).

A `toolbox.foundations._context.Trace` may keep a finished call as a tuple of
its shape (the values every call of its name shares, made once) and its own
values. A by-name route (`toolbox.doors._route`) records its successful calls
that way: ``(shape, declared, duration, ended, intent_text)``, five items where
the record has eighteen fields, so a young collection has few to walk. Which
field takes which value is written here once; `OperationRecord` checks the
names, and reads the record back whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolbox.foundations._context import OperationRecord

__all__ = ["first_success_row"]

#: The fields each of a row's own values sets, in the order `first_success_row`'s function takes them.
_OWN = (
    ("declared_at", "started_at"),  # a route dispatches as soon as the intent is declared
    ("duration",),
    ("ended_at",),
    ("intent_text",),
)
#: The fields that stay None after a plain success.
_UNSET = frozenset({"error_code", "error_type", "field_path", "reason_code", "rule", "target"})


def first_success_row(
    *, tool: str, operation: str, name: str, intent_kind: str
) -> Callable[[float, float, float, str], tuple[Any, ...]]:
    """``row(declared, duration, ended, intent_text)``: the compact record of a call of ``name``.

    One attempt, status ``SUCCESS``, no warnings.

    Raises:
        RuntimeError: ``FIELDS`` holds a field this module does not fill.
    """
    shared: dict[str, object] = {
        "attempts": 1,
        "intent_kind": intent_kind,
        "name": name,
        "operation": operation,
        "status": "SUCCESS",
        "tool": tool,
        "warnings": (),
    }
    unknown = set(OperationRecord.FIELDS) - {f for fields in _OWN for f in fields} - set(shared) - _UNSET
    if unknown:  # pragma: no cover - a new OperationRecord field must be given its value here
        raise RuntimeError(f"first_success_row does not fill OperationRecord fields {sorted(unknown)}")
    shape = OperationRecord.compact_shape(shared, _OWN)

    def row(declared: float, duration: float, ended: float, intent_text: str) -> tuple[Any, ...]:
        return (shape, declared, duration, ended, intent_text)

    return row
