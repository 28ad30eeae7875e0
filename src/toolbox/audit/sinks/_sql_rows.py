"""How a stored event's row is written and read back by the SQL sinks: values in column order,
``rule_ids`` as JSON text, timestamps as stored, records validated."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from operator import itemgetter
from typing import Any

from toolbox.audit._events import FIELDS, AuditRecord

__all__ = ["iso", "record_of", "storage_values", "to_db"]


def iso(moment: datetime) -> str:
    """``moment`` in the stored timestamp format (naive means UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


_VALUES = itemgetter(*FIELDS)  # a row's values in column order, read in C


def storage_values(chained: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each chained row's values in column order, ``rule_ids`` as stored (the rows are updated)."""
    for row in chained:
        row["rule_ids"] = _rule_ids_text(row["rule_ids"])
    return list(map(_VALUES, chained))


def _rule_ids_text(rule_ids: Sequence[str]) -> str:
    """``rule_ids`` as stored: JSON text (most calls have none)."""
    return json.dumps(list(rule_ids), ensure_ascii=False) if rule_ids else "[]"


def to_db(row: dict[str, Any]) -> dict[str, Any]:
    """A copy of the chained ``row`` as stored."""
    stored = dict(row)
    stored["rule_ids"] = _rule_ids_text(row["rule_ids"])
    return stored


def record_of(row: Mapping[Any, Any]) -> AuditRecord:
    """The validated record of a stored row."""
    data = {name: row[name] for name in FIELDS}
    data["rule_ids"] = json.loads(data["rule_ids"])
    return AuditRecord.model_validate(data)
