"""Reading the audit trail back for one tenant: traces, filtered events with cursors, verification.

The `AuditTrail` lets an auditor read every tenant; the service narrows every
read to the caller's own tenant, whatever the role, so an auditor of tenant
A never learns that a trace of tenant B exists.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, final

from toolbox.audit._events import AuditRecord
from toolbox.audit._sink import AuditQuery, AuditSink
from toolbox.audit._verify import verify_chain
from toolbox.doors._catalog import Catalog
from toolbox.errors import InvalidArgumentsError

__all__ = ["EventFilter", "TenantAudit", "decode_cursor", "encode_cursor", "tool_filter"]

_Key = tuple[str, int, str]


def encode_cursor(record: AuditRecord) -> str:
    """An opaque cursor after ``record``."""
    raw = json.dumps([record.timestamp, record.sequence, record.event_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> _Key | None:
    """The key a cursor stands for; None when it is not one of ours."""
    if len(cursor) > 512:
        return None
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        return None
    if (
        not isinstance(raw, list)
        or len(raw) != 3
        or not isinstance(raw[0], str)
        or type(raw[1]) is not int
        or not isinstance(raw[2], str)
    ):
        return None
    try:
        datetime.fromisoformat(raw[0])
    except ValueError:
        return None
    return (raw[0], raw[1], raw[2])


def _key(record: AuditRecord) -> _Key:
    return (record.timestamp, record.sequence, record.event_id)


@final
@dataclass(frozen=True)
class EventFilter:
    """The filters of an events query (None: any)."""

    principal: str | None = None
    tool: str | None = None
    status: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    operation: str | None = None


def tool_filter(catalog: Catalog, text: str | None) -> tuple[str | None, str | None]:
    """The (tool, operation) a Tool filter names: a tool (``http``), or ``tool.operation`` as the
    audit lists show names (``http.get``); a tool no longer installed is split at its last dot."""
    if not text or catalog.entry(text) is not None:
        return text or None, None
    try:
        _, tool, operation, _ = catalog.resolve_name(text)
    except InvalidArgumentsError:
        tool, _, operation = text.rpartition(".")
        return (tool, operation) if tool and operation else (text, None)
    return tool, operation


@final
class TenantAudit:
    """Audit reads scoped to one tenant."""

    __slots__ = ("_sink", "_tenant")

    def __init__(self, sink: AuditSink, tenant: str) -> None:
        self._sink = sink
        self._tenant = tenant

    def trace(self, trace_id: str) -> list[AuditRecord]:
        """The tenant's events of ``trace_id``, in order (empty: none, or not this tenant's)."""
        return [r for r in self._sink.read_trace(trace_id) if r.tenant == self._tenant]

    def verify(self, trace_id: str) -> dict[str, Any] | None:
        """Verify the whole chain of a trace the tenant owns; None when it owns none of it."""
        records = self._sink.read_trace(trace_id)
        if not records or any(r.tenant not in (self._tenant, None) for r in records):
            return None
        if all(r.tenant is None for r in records):
            return None
        problems = verify_chain(records)
        return {
            "trace_id": trace_id,
            "events": len(records),
            "ok": not problems,
            "problems": [
                {"sequence": p.sequence, "event_id": p.event_id, "problem": p.problem} for p in problems
            ],
        }

    def events(
        self, wanted: EventFilter, *, limit: int, after: _Key | None
    ) -> tuple[list[AuditRecord], bool]:
        """Up to ``limit`` events oldest first, after the cursor key; and whether more follow."""
        since = wanted.since
        if after is not None:
            cursor_time = datetime.fromisoformat(after[0])
            since = cursor_time if since is None or cursor_time > since else since
        fetch = limit + 1
        while True:
            rows = self._sink.query(
                AuditQuery(
                    self._tenant,
                    wanted.tool,
                    wanted.principal,
                    wanted.status,
                    since,
                    wanted.until,
                    fetch,
                    operation=wanted.operation,
                )
            )
            fresh = [r for r in rows if after is None or _key(r) > after]
            # Events sharing the cursor's timestamp come back again: widen until past them.
            if len(fresh) > limit or len(rows) < fetch or fetch >= 64 * (limit + 1):
                return fresh[:limit], len(fresh) > limit
            fetch *= 4

    def latest(self, wanted: EventFilter, limit: int, *, pages: int = 20) -> list[AuditRecord]:
        """The newest ``limit`` events matching ``wanted`` (reading at most ``pages`` pages forward)."""
        kept: list[AuditRecord] = []
        after: _Key | None = None
        for _ in range(pages):
            page, more = self.events(wanted, limit=limit, after=after)
            kept = (kept + page)[-limit:]
            if not more or not page:
                break
            after = _key(page[-1])
        return kept
