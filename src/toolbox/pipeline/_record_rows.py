"""The compact trace record of a call that succeeded at its first attempt, made from `OperationRecord.FIELDS`.

A `toolbox.foundations._context.Trace` keeps a finished call as the tuple of its
`OperationRecord.FIELDS` values, in order (plain values the garbage collector
stops tracking). A by-name route (`toolbox.doors._route`) records its successful calls
that way; the function that builds the tuple is generated here from ``FIELDS``,
so the order is written once, in `OperationRecord`, and a new field cannot be
left out or misplaced (a field this module does not know fails at compile time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolbox.foundations._context import OperationRecord

__all__ = ["first_success_row"]

#: The fields a call's row takes per call, and the parameter of the generated function that holds each.
_PER_CALL = {
    "declared_at": "declared",
    "started_at": "declared",  # a route dispatches as soon as the intent is declared
    "duration": "duration",
    "ended_at": "ended",
    "intent_text": "intent_text",
}
#: The fields that stay None after a plain success.
_UNSET = frozenset({"error_code", "error_type", "field_path", "reason_code", "rule", "target"})


def first_success_row(
    *, tool: str, operation: str, name: str, intent_kind: str
) -> Callable[[float, float, float, str], tuple[Any, ...]]:
    """``row(declared, duration, ended, intent_text)``: the compact record of a call of ``name``.

    One attempt, status ``SUCCESS``, no warnings; the values in `OperationRecord.FIELDS`' order.

    Raises:
        RuntimeError: ``FIELDS`` holds a field this module does not fill.
    """
    fixed: dict[str, object] = {
        "attempts": 1,
        "intent_kind": intent_kind,
        "name": name,
        "operation": operation,
        "status": "SUCCESS",
        "tool": tool,
        "warnings": (),
    }
    unknown = set(OperationRecord.FIELDS) - set(_PER_CALL) - set(fixed) - _UNSET
    if unknown:  # pragma: no cover - a new OperationRecord field must be given its value here
        raise RuntimeError(f"first_success_row does not fill OperationRecord fields {sorted(unknown)}")
    values: list[str] = []
    constants: dict[str, object] = {}
    for index, field in enumerate(OperationRecord.FIELDS):
        if field in _PER_CALL:
            values.append(_PER_CALL[field])
        elif field in fixed:
            constants[f"_{index}"] = fixed[field]
            values.append(f"_{index}")
        else:
            values.append("None")
    # Generated like dataclasses' __init__: one tuple display; its constants are the cells of a closure
    # (a keyword-only default per constant made each call fill them in: twice the time).
    parameters = ", ".join(constants)
    source = (
        f"def make({parameters}):\n"
        f"    def row(declared, duration, ended, intent_text):\n"
        f"        return ({', '.join(values)},)\n"
        f"    return row\n"
    )
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # noqa: S102 - the source is built above from field names and local names only
    row: Callable[[float, float, float, str], tuple[Any, ...]] = namespace["make"](**constants)
    return row
