"""What the console pages show, computed from the catalog, the audit reads and the stores.

Kept apart from the routes (`toolbox.service._console`): these functions only
turn service state into plain rows for the templates, which escape everything.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, final

from markupsafe import Markup, escape

from toolbox.audit._events import AuditRecord
from toolbox.doors._tool_decision import ToolDecision
from toolbox.doors._tools import Tools
from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._descriptor import OperationDescriptor
from toolbox.foundations._line_text import one_line
from toolbox.service._service import Service

__all__ = ["ToolRow", "TraceRow", "pretty", "printed", "tool_rows", "trace_rows", "when"]

_OUTCOMES = (
    "SUCCESS",
    "DENIED",
    "INVALID_ARGUMENTS",
    "APPROVAL_REQUIRED",
    "BUSINESS_FAILED",
    "ERROR",
    "UNCERTAIN_EFFECT",
)


@final
@dataclass(frozen=True)
class ToolRow:
    """One tool as ``toolbox check`` reports it, with its operations."""

    decision: ToolDecision
    operations: tuple[OperationDescriptor, ...]
    stopped: bool


def tool_rows(service: Service, context: ExecutionContext) -> list[ToolRow]:
    """Every registered tool's decision under the service's policy, within ``context``'s toolset."""
    catalog = service.served.catalog
    stopped = service.served.kill_switch.tool_states()  # memory or a cached remote read: off the loop
    tools = Tools(catalog, context)
    scope = context.scope
    try:
        rows = []
        for decision in tools.decisions():
            if scope is not None and not scope.allows_tool(decision.tool):
                continue  # outside the credential's toolset: not shown at all
            entry = catalog.entry(decision.tool)
            operations = tuple(entry.descriptor.operations if entry is not None else ())
            if scope is not None:
                operations = tuple(op for op in operations if scope.allows(decision.tool, op.name))
            rows.append(ToolRow(decision, operations, decision.tool in stopped))
        return rows
    finally:
        tools.close()


@final
@dataclass
class TraceRow:
    """A trace in the audit list: when it started, who, which calls, which outcomes."""

    trace_id: str
    started: float
    principal: str
    names: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


def trace_rows(records: Sequence[AuditRecord]) -> list[TraceRow]:
    """``records`` grouped by trace, newest trace first."""
    rows: dict[str, TraceRow] = {}
    for record in records:
        row = rows.get(record.trace_id)
        if row is None:
            row = rows[record.trace_id] = TraceRow(
                record.trace_id, _seconds(record.timestamp), record.principal or "-"
            )
        if record.name and record.name not in row.names:
            row.names.append(record.name)
        if record.type.value == "INVOCATION_RESPONSE" and record.status in _OUTCOMES:
            row.statuses.append(record.status)
        elif record.decision in ("APPROVED", "REJECTED", "ENGAGED", "RELEASED"):
            row.statuses.append(record.decision)
        elif record.status == "DENIED" and record.type.value == "GOVERNANCE_DECISION" and not row.statuses:
            row.statuses.append("DENIED")
    return sorted(rows.values(), key=lambda r: r.started, reverse=True)


def when(value: object) -> str:
    """A UNIX time as ``YYYY-MM-DD HH:MM:SS UTC`` (``-`` for none)."""
    if not isinstance(value, (int, float)):
        return "-"
    return datetime.fromtimestamp(value, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def pretty(value: Any) -> Markup:
    """JSON for people: indented, non-ASCII kept, escaped for HTML here.

    JSON writes a string's line breaks as ``\\n``; what it leaves raw and could still break or
    reorder a line (C1 controls, U+2028, bidirectional controls) is escaped as ``\\u202e``. The
    indentation's own newlines stay: the result is `Markup`, left alone by `printed`.
    """
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=repr)
    return escape("\n".join(one_line(line) for line in text.split("\n")))


def printed(value: Any) -> Any:
    """Every value a template prints (Jinja's ``finalize``), as one line (`toolbox.foundations._line_text`).

    Autoescaping stops markup; this stops text that reorders or breaks what an operator reads
    (``\u202e`` shows the rest of a line backwards).
    """
    if isinstance(value, Markup) or value is None or isinstance(value, (bool, int, float)):
        return value
    return one_line(value)


OUTCOMES = _OUTCOMES
