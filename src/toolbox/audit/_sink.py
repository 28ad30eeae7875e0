"""The sink protocol and the in-process hash chain shared by simple sinks."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, final, runtime_checkable

from toolbox.audit._events import GENESIS_HASH, AuditEvent, AuditRecord, chain_hash

__all__ = ["AuditQuery", "AuditSink", "AuditSinkError", "ChainState", "chain_dicts", "chain_rows"]


class AuditSinkError(Exception):
    """A sink could not store or read events (wrapped by the audit trail)."""


@final
@dataclass(frozen=True)
class AuditQuery:
    """Filters for `AuditSink.query`; None means any. Times are ISO 8601 UTC strings."""

    tenant: str | None = None
    tool: str | None = None
    principal: str | None = None
    status: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 1000
    #: Events of the runs this run delegated to (their ``parent_run_id``).
    parent_run_id: str | None = None
    #: Events of this operation (with ``tool``: one ``tool.operation``).
    operation: str | None = None


@runtime_checkable
class AuditSink(Protocol):
    """Where audit events are stored.

    ``append`` stores a batch atomically and in order, assigning each event its
    trace's next sequence number and chain hashes. It raises on failure and
    stores nothing of a failed batch.
    """

    def append(self, events: Sequence[AuditEvent]) -> None:
        """Store ``events`` (one transaction)."""

    def read_trace(self, trace_id: str) -> list[AuditRecord]:
        """Every event of ``trace_id`` in sequence order."""

    def query(self, query: AuditQuery) -> list[AuditRecord]:
        """Events matching ``query``, oldest first."""

    def close(self) -> None:
        """Release resources."""


@final
class ChainState:
    """Per-trace sequence and last hash, for sinks that are the only writer of their store."""

    __slots__ = ("_heads", "_lock")

    def __init__(self) -> None:
        self._heads: dict[str, tuple[int, str]] = {}
        self._lock = threading.Lock()

    @property
    def lock(self) -> threading.Lock:
        """Held while a batch is chained and written, so sequences stay gap-free."""
        return self._lock

    def head(self, trace_id: str) -> tuple[int, str]:
        """(last sequence, last hash) of ``trace_id``; (0, genesis) for a new trace."""
        return self._heads.get(trace_id, (0, GENESIS_HASH))

    def set_head(self, trace_id: str, sequence: int, digest: str) -> None:
        """Record the new head of ``trace_id``."""
        self._heads[trace_id] = (sequence, digest)


def chain_rows(
    events: Sequence[AuditEvent], head: Any
) -> tuple[list[dict[str, Any]], dict[str, tuple[int, str]]]:
    """Storage rows for ``events`` with sequence and hashes, plus the new heads.

    ``head(trace_id)`` returns the trace's current (sequence, hash).
    """
    return chain_dicts([event.as_dict() for event in events], head)


def chain_dicts(
    rows: list[dict[str, Any]], head: Any
) -> tuple[list[dict[str, Any]], dict[str, tuple[int, str]]]:
    """`chain_rows` for events already in storage form; fills in ``rows`` and returns them."""
    heads: dict[str, tuple[int, str]] = {}
    for row in rows:
        trace_id = row["trace_id"]
        sequence, previous = heads.get(trace_id) or head(trace_id)
        row["sequence"] = sequence + 1
        row["previous_hash"] = previous
        row["hash"] = chain_hash(row)
        heads[trace_id] = (row["sequence"], row["hash"])
    return rows, heads
