"""Applying an `AuditQuery` to records in memory (memory and JSONL sinks)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from toolbox.audit._events import AuditRecord
from toolbox.audit._sink import AuditQuery

__all__ = ["matches", "select"]


def matches(record: AuditRecord, query: AuditQuery) -> bool:
    """Whether ``record`` passes every filter of ``query``."""
    for field in ("tenant", "tool", "principal", "status", "parent_run_id", "operation"):
        wanted = getattr(query, field)
        if wanted is not None and getattr(record, field) != wanted:
            return False
    if query.since is not None or query.until is not None:
        at = datetime.fromisoformat(record.timestamp)
        if query.since is not None and at < query.since:
            return False
        if query.until is not None and at >= query.until:
            return False
    return True


def select(records: Iterable[AuditRecord], query: AuditQuery) -> list[AuditRecord]:
    """Records matching ``query``, oldest first, at most ``query.limit``."""
    found = sorted((r for r in records if matches(r, query)), key=lambda r: (r.timestamp, r.sequence))
    return found[: query.limit]
